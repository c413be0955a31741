//! CPU time and resident memory of a process, read from /proc (Linux only).

/// Linux USER_HZ: /proc/PID/stat times are in 1/100 s on every mainstream kernel config.
pub const CLOCK_TICKS: f64 = 100.0;

/// utime + stime of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the ")" closing the command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// MiB from KiB, for reports.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// CPU used by one process between two samples, as percent of one core.
pub struct CpuWindow {
    pid: u32,
    start: std::time::Instant,
    ticks: u64,
}

impl CpuWindow {
    /// Starts measuring `pid` now.
    pub fn start(pid: u32) -> Option<Self> {
        Some(CpuWindow { pid, start: std::time::Instant::now(), ticks: cpu_ticks(pid)? })
    }

    /// Percent of one core since `start`, and the seconds measured.
    pub fn finish(&self) -> Option<(f64, f64)> {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let used = cpu_ticks(self.pid)?.saturating_sub(self.ticks) as f64 / CLOCK_TICKS;
        Some((used / secs * 100.0, secs))
    }
}

/// The 1-minute load average, to note how busy the machine was.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// VmHWM (peak resident set) of `pid` in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The host's CPU time by state, summed over its CPUs: the first line of /proc/stat, in
/// clock ticks. On a virtual machine `steal` is time the hypervisor gave this guest's
/// virtual CPUs to someone else: a run that lost much of it measured a slower host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    pub idle: u64,
    pub iowait: u64,
    pub steal: u64,
    /// Online CPUs (the "cpuN" lines).
    pub cpus: u32,
}

impl HostTicks {
    /// A sample of /proc/stat now.
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(stat: &str) -> Option<Self> {
        let total = stat.lines().find(|l| l.starts_with("cpu "))?;
        // user nice system idle iowait irq softirq steal guest guest_nice (older kernels stop early)
        let n: Vec<u64> = total.split_whitespace().skip(1).map(|x| x.parse().unwrap_or(0)).collect();
        if n.len() < 4 {
            return None;
        }
        let at = |i: usize| n.get(i).copied().unwrap_or(0);
        let cpus = stat.lines().filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit));
        Some(HostTicks {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            idle: at(3),
            iowait: at(4),
            steal: at(7),
            cpus: cpus.count() as u32,
        })
    }
}

/// What the host's CPUs did between two [`HostTicks`] samples, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostWindow {
    pub cpus: u32,
    pub busy_s: f64,
    pub idle_s: f64,
    pub iowait_s: f64,
    pub steal_s: f64,
}

impl HostWindow {
    pub fn between(before: HostTicks, after: HostTicks) -> Self {
        let s = |a: u64, b: u64| a.saturating_sub(b) as f64 / CLOCK_TICKS;
        HostWindow {
            cpus: after.cpus,
            busy_s: s(after.busy, before.busy),
            idle_s: s(after.idle, before.idle),
            iowait_s: s(after.iowait, before.iowait),
            steal_s: s(after.steal, before.steal),
        }
    }

    fn total_s(&self) -> f64 {
        (self.busy_s + self.idle_s + self.iowait_s + self.steal_s).max(1e-9)
    }

    /// Share of all CPU time in the window, percent.
    pub fn busy_pct(&self) -> f64 {
        self.busy_s / self.total_s() * 100.0
    }

    pub fn steal_pct(&self) -> f64 {
        self.steal_s / self.total_s() * 100.0
    }

    /// Idle, including waiting for I/O.
    pub fn idle_pct(&self) -> f64 {
        (self.idle_s + self.iowait_s) / self.total_s() * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  832297 9053 82696 848168 28894 10 15354 8644 0 0\n\
                        cpu0 416000 4500 41000 424000 14000 5 7600 4300 0 0\n\
                        cpu1 416297 4553 41696 424168 14894 5 7754 4344 0 0\n\
                        intr 1 2 3\nctxt 99\n";

    #[test]
    fn host_ticks_sum_the_busy_states_and_count_the_cpus() {
        let t = HostTicks::parse(STAT).unwrap();
        assert_eq!(
            t,
            HostTicks { busy: 832297 + 9053 + 82696 + 10 + 15354, idle: 848168, iowait: 28894, steal: 8644, cpus: 2 }
        );
        assert_eq!(HostTicks::parse("intr 1 2\n"), None);
    }

    #[test]
    fn a_host_window_splits_the_time_between_busy_idle_and_stolen() {
        let before = HostTicks { busy: 1000, idle: 500, iowait: 100, steal: 50, cpus: 2 };
        // 20 s of two CPUs: 12 busy, 3 idle, 1 waiting for I/O, 4 stolen.
        let after = HostTicks { busy: 2200, idle: 800, iowait: 200, steal: 450, cpus: 2 };
        let w = HostWindow::between(before, after);
        assert_eq!((w.busy_s, w.idle_s, w.iowait_s, w.steal_s), (12.0, 3.0, 1.0, 4.0));
        assert!((w.busy_pct() - 60.0).abs() < 1e-9);
        assert!((w.steal_pct() - 20.0).abs() < 1e-9);
        assert!((w.idle_pct() - 20.0).abs() < 1e-9);
    }
}

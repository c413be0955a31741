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

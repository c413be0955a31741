//! The workloads, written once against [`Target`]/[`Session`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use rand::Rng;
use serde_json::json;

use crate::checker::{Checker, REVOKING_KINDS};
use crate::group_commit;
use crate::procstat::{cpu_ticks, HostTicks, HostWindow, CLOCK_TICKS};
use crate::target::{Mode, OpError, Session, Target};

/// What the clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Each client its own key: begin, acquire exclusive, commit.
    Uncontended,
    /// Every client the same key.
    Contended,
    /// Readers (shared) with a few percent writers (exclusive) on a few keys.
    Shared,
    /// N idle transactions, each holding a key, kept alive by heartbeats.
    Heartbeat,
    /// Pairs taking two keys in opposite order.
    Deadlock,
}

impl Workload {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Uncontended => "uncontended",
            Workload::Contended => "contended",
            Workload::Shared => "shared",
            Workload::Heartbeat => "heartbeat",
            Workload::Deadlock => "deadlock",
        }
    }
}

/// One run's parameters.
pub struct Config {
    pub target: &'static str,
    pub workload: Workload,
    pub clients: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub lease: Duration,
    pub wait: Duration,
    pub shared_keys: usize,
    pub write_pct: f64,
    pub pids: Vec<u32>,
    pub label: Option<String>,
    pub endpoints: String,
    /// DLS nodes' HTTP addresses, for the group-commit figures (may be empty).
    pub metrics: Vec<String>,
}

/// Counters shared by the clients.
#[derive(Default)]
struct Shared {
    measuring: AtomicBool,
    cycles: AtomicU64,
    /// Deadlock workload: cycles ended by a deadlock victim or a lock timeout.
    deadlocks: AtomicU64,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    first_errors: Mutex<Vec<String>>,
    checker: Checker,
}

impl Shared {
    fn error(&self, e: &OpError) {
        if self.measuring.load(Ordering::Relaxed) {
            self.error_always(e);
        }
    }

    fn error_always(&self, e: &OpError) {
        *self.errors.lock().unwrap().entry(e.kind).or_default() += 1;
        let mut first = self.first_errors.lock().unwrap();
        if first.len() < 5 {
            first.push(e.to_string());
        }
    }
}

/// Results of one run.
pub struct Summary {
    target: &'static str,
    workload: Workload,
    clients: usize,
    label: Option<String>,
    endpoints: String,
    measured_s: f64,
    cycles: u64,
    deadlocks: u64,
    lat_ms: [f64; 4],
    errors: BTreeMap<&'static str, u64>,
    first_errors: Vec<String>,
    pub violations: u64,
    violation_samples: Vec<String>,
    alive: Option<u64>,
    cpu: Vec<(u32, f64)>,
    group_commit: Option<group_commit::Window>,
    leader_cpu: Option<LeaderCpu>,
    host_cpu: Option<HostCpu>,
}

/// The leader's CPU time over the measured window, per client write it proposed (from
/// `/proc/PID/stat` and its `/metrics`): what one write costs the node that does the most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderCpu {
    pub pid: u32,
    /// utime + stime of the leader in the window, seconds.
    pub cpu_s: f64,
    /// Client writes (raft commands) the leader proposed in the window.
    pub writes: f64,
    /// Raft entries the leader applied in the window.
    pub entries: f64,
    /// Lock cycles the clients completed in the window.
    pub cycles: u64,
}

impl LeaderCpu {
    /// The leader is the node that proposed the most in the window; `pids` and the
    /// `--metrics` list name the nodes in the same order.
    fn of(pids: &[u32], cpu_s: &[Option<f64>], window: group_commit::Window, cycles: u64) -> Option<LeaderCpu> {
        if pids.len() <= window.node || window.commands <= 0.0 {
            return None;
        }
        let cpu_s = cpu_s.get(window.node).copied().flatten()?;
        Some(LeaderCpu { pid: pids[window.node], cpu_s, writes: window.commands, entries: window.applied, cycles })
    }

    pub fn us_per_write(&self) -> f64 {
        self.cpu_s * 1e6 / self.writes
    }

    fn us_per(&self, n: f64) -> Option<f64> {
        (n > 0.0).then(|| self.cpu_s * 1e6 / n)
    }

    fn to_json(self) -> serde_json::Value {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        json!({
            "pid": self.pid,
            "cpu_s": (self.cpu_s * 1000.0).round() / 1000.0,
            "writes": self.writes,
            "applied_entries": self.entries,
            "cycles": self.cycles,
            "us_per_write": round(self.us_per_write()),
            "us_per_entry": self.us_per(self.entries).map(round),
            "us_per_cycle": self.us_per(self.cycles as f64).map(round),
        })
    }
}

/// Where the whole host's CPU went over the measured window, per lock cycle: this
/// benchmark's clients, the server processes of `--pids` (DLS, etcd or Redis), and all
/// that was busy. With the share
/// the hypervisor took (`steal`), it tells a slow host from a slow change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostCpu {
    pub window: HostWindow,
    /// utime + stime of this process (every client of the run), seconds.
    pub clients_s: f64,
    /// utime + stime of the `--pids` processes, seconds (None without `--pids`).
    pub servers_s: Option<f64>,
    pub cycles: u64,
}

impl HostCpu {
    fn us_per_cycle(&self, s: f64) -> Option<f64> {
        (self.cycles > 0).then(|| s * 1e6 / self.cycles as f64)
    }

    fn to_json(self) -> serde_json::Value {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        json!({
            "cpus": self.window.cpus,
            "busy_pct": round(self.window.busy_pct()),
            "idle_pct": round(self.window.idle_pct()),
            "steal_pct": round(self.window.steal_pct()),
            "us_per_cycle": self.us_per_cycle(self.window.busy_s).map(round),
            "clients_us_per_cycle": self.us_per_cycle(self.clients_s).map(round),
            "servers_us_per_cycle": self.servers_s.and_then(|s| self.us_per_cycle(s)).map(round),
        })
    }

    fn to_text(self) -> String {
        let w = self.window;
        let mut s = format!(
            "  host:       {} CPUs {:.0} % busy, {:.0} % stolen by the hypervisor, {:.0} % idle",
            w.cpus,
            w.busy_pct(),
            w.steal_pct(),
            w.idle_pct()
        );
        if let Some(total) = self.us_per_cycle(w.busy_s) {
            s += &format!(
                "; CPU per cycle {total:.0} µs (clients {:.0}",
                self.us_per_cycle(self.clients_s).unwrap_or(0.0)
            );
            if let Some(servers) = self.servers_s.and_then(|x| self.us_per_cycle(x)) {
                s += &format!(", servers {servers:.0}");
            }
            s += ")";
        }
        s + "\n"
    }
}

impl Summary {
    fn throughput(&self) -> f64 {
        if self.workload == Workload::Heartbeat {
            0.0
        } else {
            self.cycles as f64 / self.measured_s.max(1e-9)
        }
    }

    fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Whether the run did what it is for: cycles completed, or transactions stayed alive.
    pub fn made_progress(&self) -> bool {
        match self.alive {
            Some(a) => a > 0,
            None => self.cycles > 0,
        }
    }

    fn leader_cpu(&self) -> Option<f64> {
        self.cpu.iter().map(|c| c.1).reduce(f64::max)
    }

    /// The JSON object printed by `--json`.
    pub fn to_json(&self) -> serde_json::Value {
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({
            "target": self.target,
            "workload": self.workload.name(),
            "clients": self.clients,
            "label": self.label,
            "endpoints": self.endpoints,
            "duration_s": round(self.measured_s),
            "cycles": self.cycles,
            "throughput": round(self.throughput()),
            "p50_ms": round(self.lat_ms[0]),
            "p90_ms": round(self.lat_ms[1]),
            "p99_ms": round(self.lat_ms[2]),
            "max_ms": round(self.lat_ms[3]),
            "errors": self.error_total(),
            "errors_by_kind": self.errors,
            "first_errors": self.first_errors,
            "deadlocks": self.deadlocks,
            "violations": self.violations,
            "violation_samples": self.violation_samples,
            "alive": self.alive,
            "cpu_pct": self.cpu.iter().map(|(p, c)| (p.to_string(), round(*c))).collect::<BTreeMap<_, _>>(),
            "leader_cpu_pct": self.leader_cpu().map(round),
            "group_commit": self.group_commit.map(group_commit::Window::to_json),
            "leader_cpu_us_per_write": self.leader_cpu.map(|l| (l.us_per_write() * 10.0).round() / 10.0),
            "leader_cpu": self.leader_cpu.map(LeaderCpu::to_json),
            "host_cpu": self.host_cpu.map(HostCpu::to_json),
        })
    }

    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{} / {} / {} clients, {:.1}s measured\n",
            self.target,
            self.workload.name(),
            self.clients,
            self.measured_s
        );
        if let Some(alive) = self.alive {
            s += &format!("  alive:      {alive}/{} transactions kept alive to the end\n", self.clients);
            s += &format!(
                "  setup latency (begin+acquire) ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}\n",
                self.lat_ms[0], self.lat_ms[1], self.lat_ms[2], self.lat_ms[3]
            );
        } else {
            s += &format!("  throughput: {:.1} lock cycles/s ({} cycles)\n", self.throughput(), self.cycles);
            s += &format!(
                "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}\n",
                self.lat_ms[0], self.lat_ms[1], self.lat_ms[2], self.lat_ms[3]
            );
        }
        if self.workload == Workload::Deadlock {
            s += &format!("  deadlocks broken (victim or wait timeout): {}\n", self.deadlocks);
        }
        s += &format!("  errors:     {} {:?}\n", self.error_total(), self.errors);
        for e in &self.first_errors {
            s += &format!("    e.g. {e}\n");
        }
        for (pid, cpu) in &self.cpu {
            s += &format!("  cpu pid {pid}: {cpu:.1}%\n");
        }
        if let Some(g) = self.group_commit {
            s += &format!(
                "  leader log: {:.1} commands and {:.2} raft entries per fsync ({} fsyncs)\n",
                g.commands_per_fsync(),
                g.entries_per_fsync(),
                g.flushes
            );
        }
        if let Some(l) = self.leader_cpu {
            s += &format!(
                "  leader cpu: {:.1} µs per client write ({:.3} s of pid {} for {} writes, {} raft entries, {} cycles)\n",
                l.us_per_write(),
                l.cpu_s,
                l.pid,
                l.writes,
                l.entries,
                l.cycles
            );
        }
        if let Some(h) = self.host_cpu {
            s += &h.to_text();
        }
        s += &format!("  violations: {}\n", self.violations);
        for v in &self.violation_samples {
            s += &format!("    {v}\n");
        }
        s
    }
}

fn run_prefix() -> String {
    format!("b{:08x}", rand::thread_rng().gen::<u32>())
}

/// Runs `cfg.workload` against `target` and returns the summary.
pub async fn run<T: Target>(target: Arc<T>, cfg: &Config) -> anyhow::Result<Summary> {
    let shared = Arc::new(Shared::default());
    let prefix = run_prefix();
    let tag = format!("[{} {} c={}]", cfg.target, cfg.workload.name(), cfg.clients);

    // Connect every client first, so connection set-up is not measured.
    let mut sessions = Vec::with_capacity(cfg.clients);
    for _ in 0..cfg.clients {
        sessions.push(target.connect().await.map_err(|e| anyhow::anyhow!("connect to {}: {e}", cfg.endpoints))?);
    }

    let start = Instant::now();
    let measure_from = start + if cfg.workload == Workload::Heartbeat { Duration::ZERO } else { cfg.warmup };
    let end = measure_from + cfg.duration;
    let alive = Arc::new(AtomicU64::new(0));

    let mut handles = Vec::new();
    for (client, session) in sessions.into_iter().enumerate() {
        let shared = shared.clone();
        let alive = alive.clone();
        let plan = Plan {
            workload: cfg.workload,
            client,
            prefix: prefix.clone(),
            lease: cfg.lease,
            wait: cfg.wait,
            shared_keys: cfg.shared_keys,
            write_pct: cfg.write_pct,
        };
        handles.push(tokio::spawn(async move {
            if plan.workload == Workload::Heartbeat {
                heartbeat_client(session, plan, shared, alive, end).await
            } else {
                cycle_client(session, plan, shared, end).await
            }
        }));
    }

    // Progress, one line a second; CPU sampled over the measured window.
    let mut cpu_start: Option<(Instant, Vec<Option<u64>>)> = None;
    // The host's CPU states and this process's own CPU, at the start of the window.
    let mut host_start: Option<(HostTicks, u64)> = None;
    let mut metrics_start = None;
    let mut last = 0u64;
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_secs(1), Duration::from_secs(1));
    loop {
        let now = Instant::now();
        if now >= measure_from && !shared.measuring.swap(true, Ordering::SeqCst) {
            cpu_start = Some((now, cfg.pids.iter().map(|p| cpu_ticks(*p)).collect()));
            host_start = HostTicks::now().zip(cpu_ticks(std::process::id()));
            metrics_start = Some(group_commit::sample(&cfg.metrics).await);
        }
        if now >= end {
            break;
        }
        let sleep_until = end.min(if shared.measuring.load(Ordering::SeqCst) { end } else { measure_from });
        tokio::select! {
            _ = tick.tick() => {
                let cycles = shared.cycles.load(Ordering::Relaxed);
                let errs: u64 = shared.errors.lock().unwrap().values().sum();
                let (viol, _) = shared.checker.violations();
                let phase = if shared.measuring.load(Ordering::Relaxed) { "" } else { " (warmup)" };
                let t = start.elapsed().as_secs_f64();
                if cfg.workload == Workload::Heartbeat {
                    eprintln!("{tag} t={t:.0}s holding={} errors={errs} violations={viol}", alive.load(Ordering::Relaxed));
                } else {
                    eprintln!("{tag} t={t:.0}s {} cycles/s total={cycles} errors={errs} violations={viol}{phase}", cycles - last);
                }
                last = cycles;
            }
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
        }
    }
    let measured_s = cpu_start.as_ref().map(|c| c.0.elapsed().as_secs_f64()).unwrap_or(cfg.duration.as_secs_f64());
    // CPU seconds of each pid over the window, in the order of `cfg.pids`.
    let cpu_s: Vec<Option<f64>> = match &cpu_start {
        Some((_, before)) => cfg
            .pids
            .iter()
            .zip(before)
            .map(|(pid, b)| Some(cpu_ticks(*pid)?.saturating_sub((*b)?) as f64 / CLOCK_TICKS))
            .collect(),
        None => Vec::new(),
    };
    let cpu: Vec<(u32, f64)> = match &cpu_start {
        Some((at, _)) => {
            let secs = at.elapsed().as_secs_f64().max(1e-9);
            cfg.pids.iter().zip(&cpu_s).filter_map(|(pid, s)| Some((*pid, (*s)? / secs * 100.0))).collect()
        }
        None => Vec::new(),
    };
    let cycles = shared.cycles.load(Ordering::SeqCst);
    let host_cpu = host_start.and_then(|(host, own)| {
        Some(HostCpu {
            window: HostWindow::between(host, HostTicks::now()?),
            clients_s: cpu_ticks(std::process::id())?.saturating_sub(own) as f64 / CLOCK_TICKS,
            servers_s: (!cfg.pids.is_empty()).then(|| cpu_s.iter().flatten().sum()),
            cycles,
        })
    });
    shared.measuring.store(false, Ordering::SeqCst);
    let group_commit = match metrics_start {
        Some(before) => group_commit::Window::of_leader(&before, &group_commit::sample(&cfg.metrics).await),
        None => None,
    };
    let leader_cpu = group_commit.and_then(|w| LeaderCpu::of(&cfg.pids, &cpu_s, w, cycles));

    // Clients stop at `end` once their current cycle finishes (bounded by the wait timeout).
    let mut lat = Vec::new();
    let grace = cfg.wait + Duration::from_secs(20);
    for h in handles {
        match tokio::time::timeout(grace, h).await {
            Ok(Ok(l)) => lat.extend(l),
            Ok(Err(e)) => anyhow::bail!("a client task failed: {e}"),
            Err(_) => anyhow::bail!("a client did not stop within {grace:?} of the end"),
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let i = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
        lat[i] as f64 / 1000.0
    };
    let (violations, violation_samples) = shared.checker.violations();
    let errors = shared.errors.lock().unwrap().clone();
    let first_errors = shared.first_errors.lock().unwrap().clone();
    Ok(Summary {
        target: cfg.target,
        workload: cfg.workload,
        clients: cfg.clients,
        label: cfg.label.clone(),
        endpoints: cfg.endpoints.clone(),
        measured_s,
        cycles: shared.cycles.load(Ordering::SeqCst),
        deadlocks: shared.deadlocks.load(Ordering::SeqCst),
        lat_ms: [pct(0.50), pct(0.90), pct(0.99), pct(1.0)],
        errors,
        first_errors,
        violations,
        violation_samples,
        alive: (cfg.workload == Workload::Heartbeat).then(|| alive.load(Ordering::SeqCst)),
        cpu,
        group_commit,
        leader_cpu,
        host_cpu,
    })
}

struct Plan {
    workload: Workload,
    client: usize,
    prefix: String,
    lease: Duration,
    wait: Duration,
    shared_keys: usize,
    write_pct: f64,
}

impl Plan {
    /// The locks of one cycle, in order.
    fn locks(&self) -> Vec<(String, Mode)> {
        let p = &self.prefix;
        match self.workload {
            Workload::Uncontended | Workload::Heartbeat => vec![(format!("{p}-u{}", self.client), Mode::Exclusive)],
            Workload::Contended => vec![(format!("{p}-contended"), Mode::Exclusive)],
            Workload::Shared => {
                let mut rng = rand::thread_rng();
                let key = format!("{p}-s{}", rng.gen_range(0..self.shared_keys));
                let mode =
                    if rng.gen_bool((self.write_pct / 100.0).clamp(0.0, 1.0)) { Mode::Exclusive } else { Mode::Shared };
                vec![(key, mode)]
            }
            Workload::Deadlock => {
                let pair = self.client / 2;
                let (a, b) = (format!("{p}-d{pair}a"), format!("{p}-d{pair}b"));
                if self.client.is_multiple_of(2) {
                    vec![(a, Mode::Exclusive), (b, Mode::Exclusive)]
                } else {
                    vec![(b, Mode::Exclusive), (a, Mode::Exclusive)]
                }
            }
        }
    }
}

/// Begin, take the plan's locks, commit; again until `end`. Returns cycle latencies (µs)
/// measured inside the window.
async fn cycle_client<S: Session>(mut s: S, plan: Plan, shared: Arc<Shared>, end: Instant) -> Vec<u64> {
    let mut lat = Vec::new();
    while Instant::now() < end {
        let t0 = Instant::now();
        let measuring = shared.measuring.load(Ordering::Relaxed);
        match one_cycle(&mut s, &plan, &shared).await {
            Ok(()) => {
                if measuring && shared.measuring.load(Ordering::Relaxed) {
                    shared.cycles.fetch_add(1, Ordering::Relaxed);
                    lat.push(u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX));
                }
            }
            Err(e) => {
                let expected =
                    plan.workload == Workload::Deadlock && matches!(e.kind, "DEADLOCK_VICTIM" | "LOCK_TIMEOUT");
                if expected {
                    if measuring && shared.measuring.load(Ordering::Relaxed) {
                        shared.deadlocks.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    shared.error(&e);
                    // Do not spin on a failing server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    lat
}

async fn one_cycle<S: Session>(s: &mut S, plan: &Plan, shared: &Shared) -> Result<(), OpError> {
    let mut txn = s.begin(plan.lease).await?;
    let locks = plan.locks();
    let mut held = 0;
    let mut failure = None;
    for (i, (key, mode)) in locks.iter().enumerate() {
        if i > 0 && plan.workload == Workload::Deadlock {
            // Hold the first key a moment so the pair's orders really cross.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        shared.checker.acquiring(plan.client);
        let r = s.acquire(&mut txn, key, *mode, plan.wait).await;
        shared.checker.acquire_ended(plan.client, r.as_ref().err().map(|e| e.kind), &locks[..held]);
        match r {
            Ok(token) => {
                shared.checker.granted(key, *mode, plan.client, token);
                held += 1;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // After a revoking error the checker has already dropped them.
    let revoked = failure.as_ref().is_some_and(|e| REVOKING_KINDS.contains(&e.kind));
    if !revoked {
        for (key, mode) in &locks[..held] {
            shared.checker.releasing(key, *mode, plan.client);
        }
    }
    match failure {
        None => s.commit(txn).await,
        Some(e) => {
            s.abort(txn).await;
            Err(e)
        }
    }
}

/// Begin, take one key, stay idle (the target renews the lease) until `end`, then check
/// the lease is still alive and commit. Returns the set-up latency.
async fn heartbeat_client<S: Session>(
    mut s: S,
    plan: Plan,
    shared: Arc<Shared>,
    alive: Arc<AtomicU64>,
    end: Instant,
) -> Vec<u64> {
    let t0 = Instant::now();
    let (key, mode) = plan.locks().remove(0);
    let mut txn = match s.begin(plan.lease).await {
        Ok(t) => t,
        Err(e) => {
            shared.error_always(&e);
            return Vec::new();
        }
    };
    match s.acquire(&mut txn, &key, mode, plan.wait).await {
        Ok(token) => shared.checker.granted(&key, mode, plan.client, token),
        Err(e) => {
            shared.error_always(&e);
            s.abort(txn).await;
            return Vec::new();
        }
    }
    let setup = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
    alive.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep_until(end.into()).await;
    let still = s.alive(&mut txn).await;
    shared.checker.releasing(&key, mode, plan.client);
    if !still {
        alive.fetch_sub(1, Ordering::SeqCst);
        shared.error_always(&OpError::new("LEASE_LOST", format!("client {} lost its lease while idle", plan.client)));
        s.abort(txn).await;
    } else if let Err(e) = s.commit(txn).await {
        shared.error_always(&e);
    }
    vec![setup]
}

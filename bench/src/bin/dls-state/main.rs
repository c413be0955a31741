//! `dls-state`: the state-size and overhead figures of a real 3-node `dls` cluster that this
//! tool starts itself through the test kit, on 127.0.0.1 with free ports (and SIGKILLs and
//! restarts, for the restore figure):
//!
//! - `heartbeat`: leader CPU and RSS with 10,000 idle heartbeating transactions;
//! - `deadlock`:  cycle closed → victim notified, p50/p99;
//! - `fill`:      RSS at 100,000 locks of 50,000 transactions + 10,000 waiters, snapshot
//!   size, restart → restored / ready, one node and then the whole cluster;
//! - `failover`:  leader SIGKILL → next grant, clients spread over the nodes, a few rounds;
//! - `isolate`:   leader cut off → whether a client of the majority keeps its 2 s lease;
//! - `revoke`:    operator abort → the client's lost signal, heartbeat only vs the lost stream.
//!
//! Progress goes to stderr; a markdown section goes to stdout and, with `--out`, is
//! appended to that file. See docs/bench.md.

mod cluster;
mod deadlock;
mod failover;
mod fill;
mod heartbeat;
mod perf;
mod pool;
mod revoke;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use caerus_bench::procstat;
use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Step {
    Heartbeat,
    Deadlock,
    Fill,
    Failover,
    Isolate,
    Revoke,
}

/// Heartbeat cost, deadlock resolution latency, memory at 100k locks and snapshot restore
/// time of a real 3-node Caerus DLS cluster started by this tool.
#[derive(Parser, Debug)]
#[command(
    name = "dls-state",
    version,
    about = "dls-state: state size, restore, failover and overhead figures of a real 3-node cluster",
    long_about = None
)]
pub struct Opts {
    /// The `dls` binary to run (a release build for meaningful numbers).
    #[arg(long, env = "DLS_BIN")]
    dls_bin: PathBuf,
    /// Steps to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "heartbeat,deadlock,fill,failover,isolate,revoke")]
    steps: Vec<Step>,
    /// Directory for the nodes' data and logs (default: a new directory under /tmp, removed
    /// after a successful run).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Append the markdown section to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Concurrent client tasks used to set up transactions.
    #[arg(long, default_value_t = 256)]
    workers: usize,
    /// heartbeat: idle transactions.
    #[arg(long, default_value_t = 10_000)]
    hb_txns: usize,
    /// heartbeat: lease of each transaction, ms (caerus-core heartbeats every lease/3).
    #[arg(long, default_value_t = 10_000)]
    hb_lease_ms: u64,
    /// heartbeat: client connections (DlsClients) the transactions share.
    #[arg(long, default_value_t = 16)]
    hb_connections: usize,
    /// heartbeat: seconds of leader CPU measurement.
    #[arg(long, default_value_t = 30.0)]
    measure_s: f64,
    /// heartbeat: seconds of idle-cluster baseline before any transaction.
    #[arg(long, default_value_t = 10.0)]
    baseline_s: f64,
    /// heartbeat: seconds of `perf record -g` on the leader after the window (0: none).
    #[arg(long, default_value_t = 10.0)]
    perf_s: f64,
    /// deadlock: pairs to deadlock.
    #[arg(long, default_value_t = 400)]
    dl_pairs: usize,
    /// deadlock: pairs in flight at once.
    #[arg(long, default_value_t = 4)]
    dl_concurrency: usize,
    /// fill: transactions.
    #[arg(long, default_value_t = 50_000)]
    fill_txns: usize,
    /// fill: EXCLUSIVE locks each transaction holds.
    #[arg(long, default_value_t = 2)]
    locks_per_txn: usize,
    /// fill: waiting requests (at most half of --fill-txns).
    #[arg(long, default_value_t = 10_000)]
    waiters: usize,
    /// fill: client connections.
    #[arg(long, default_value_t = 32)]
    fill_connections: usize,
    /// fill: after the holders, print the leader's pid and wait this many seconds before
    /// adding the waiters (time to attach a profiler, e.g. `heaptrack -p PID`).
    #[arg(long, default_value_t = 0.0)]
    pause_before_waiters: f64,
    /// fill: the nodes' --snapshot-every (raft entries; the server's default is 10000, but
    /// batched proposals make entries few, and the tool pads with empty transactions until a
    /// snapshot covers the full table).
    #[arg(long, default_value_t = 2_000)]
    snapshot_every: u64,
    /// failover: leader kills.
    #[arg(long, default_value_t = 10)]
    fo_rounds: usize,
    /// failover: every client on one key (a transaction of the killed node's client may
    /// hold it: the others then wait for its lease, restarted by the new leader).
    #[arg(long)]
    fo_one_key: bool,
    /// isolate: times the leader is cut off.
    #[arg(long, default_value_t = 10)]
    iso_rounds: usize,
    /// revoke: operator aborts per row (heartbeat only, lost stream).
    #[arg(long, default_value_t = 40)]
    rv_rounds: usize,
    /// revoke: lease of each transaction, ms (the heartbeat runs every lease/3).
    #[arg(long, default_value_t = 15_000)]
    rv_lease_ms: u64,
    #[arg(skip)]
    run_dir_path: PathBuf,
}

impl Opts {
    fn dir(&self) -> &PathBuf {
        &self.run_dir_path
    }
}

/// The markdown section being written.
#[derive(Default)]
pub struct Report(String);

impl Report {
    fn h3(&mut self, title: &str) {
        self.0 += &format!("### {title}\n\n");
    }
    fn line(&mut self, s: impl AsRef<str>) {
        self.0 += s.as_ref();
        self.0 += "\n";
    }
}

fn main() -> ExitCode {
    let mut opts = Opts::parse();
    let own_dir = opts.run_dir.is_none();
    opts.run_dir_path = match &opts.run_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("dls-state.{}", std::process::id())),
    };
    if !opts.dls_bin.is_file() {
        eprintln!("dls-state: --dls-bin {} is not a file", opts.dls_bin.display());
        return ExitCode::from(2);
    }
    let mut report = Report::default();
    let started = std::process::Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]).output();
    let started = started.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    report.line(format!("## dls-state run {started}"));
    report.line("");
    report.line(format!(
        "`dls-state --steps {}` with `{}` ({}), 3 nodes on 127.0.0.1, raft log flushed before every ack. \
         {} CPU(s); load average at start {} (other builds share the machine).",
        opts.steps.iter().map(|s| format!("{s:?}").to_lowercase()).collect::<Vec<_>>().join(","),
        opts.dls_bin.display(),
        binary_age(&opts.dls_bin),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        procstat::loadavg()
    ));
    report.line("");
    let mut failed = false;
    for step in opts.steps.clone() {
        // Each step gets its own runtime, dropped at the end with its heartbeat tasks, so a
        // step's thousands of transactions cannot keep working during the next one.
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
        let r = rt.block_on(async {
            match step {
                Step::Heartbeat => heartbeat::run(&opts, &mut report).await,
                Step::Deadlock => deadlock::run(&opts, &mut report).await,
                Step::Fill => fill::run(&opts, &mut report).await,
                Step::Failover => failover::run(&opts, &mut report).await,
                Step::Isolate => failover::run_isolate(&opts, &mut report).await,
                Step::Revoke => revoke::run(&opts, &mut report).await,
            }
        });
        rt.shutdown_timeout(Duration::from_secs(1));
        if let Err(e) = r {
            eprintln!("dls-state: {step:?} failed: {e:#} (logs in {})", opts.dir().display());
            report.line(format!("**{step:?} failed:** {e:#}\n"));
            failed = true;
        }
    }
    report.line(format!("Load average at the end: {}.\n", procstat::loadavg()));
    print!("{}", report.0);
    if let Some(out) = &opts.out {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)
            .and_then(|mut f| f.write_all(format!("{}\n", report.0).as_bytes()));
        if let Err(e) = written {
            eprintln!("dls-state: writing {}: {e}", out.display());
            return ExitCode::from(1);
        }
        eprintln!("dls-state: appended to {}", out.display());
    }
    if failed {
        return ExitCode::from(1);
    }
    if own_dir {
        let _ = std::fs::remove_dir_all(opts.dir());
    }
    ExitCode::SUCCESS
}

fn binary_age(bin: &std::path::Path) -> String {
    let modified = std::fs::metadata(bin).and_then(|m| m.modified()).ok();
    match modified.and_then(|m| m.elapsed().ok()) {
        Some(age) => format!("built {} min before the run", age.as_secs() / 60),
        None => "build time unknown".into(),
    }
}

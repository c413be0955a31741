//! `dls-bench`: lock-service benchmark across Caerus DLS, Redis and etcd.
//!
//! Runs one workload against one target for a fixed time, prints a progress line per
//! second on stderr, checks safety as it goes (no overlapping exclusive holders; fencing
//! tokens strictly increasing per key where the system hands them out), and ends with a
//! summary (or one JSON object with `--json`). Exit status: 0 ok, 1 harness failure or no
//! progress, 2 safety violations. See docs/bench.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use caerus_bench::report;
use caerus_bench::target::{self, Target};
use caerus_bench::workload::{self, Config, Workload};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TargetKind {
    /// Caerus DLS (caerus-core client).
    Dls,
    /// Redis: SET NX PX + compare-and-delete Lua.
    Redis,
    /// etcd v3: lease + v3lock Lock (needs the `etcd` cargo feature).
    Etcd,
}

impl TargetKind {
    fn name(self) -> &'static str {
        match self {
            TargetKind::Dls => "dls",
            TargetKind::Redis => "redis",
            TargetKind::Etcd => "etcd",
        }
    }
    fn default_endpoint(self) -> &'static str {
        match self {
            TargetKind::Dls => "127.0.0.1:7070",
            TargetKind::Redis => "127.0.0.1:6379",
            TargetKind::Etcd => "127.0.0.1:2379",
        }
    }
}

/// Lock-service benchmark: Caerus DLS vs Redis vs etcd.
#[derive(Parser, Debug)]
#[command(name = "dls-bench", version, about, long_about = None)]
struct Args {
    /// System under test.
    #[arg(long, value_enum, default_value = "dls")]
    target: TargetKind,
    /// uncontended: each client its own key. contended: all clients one key. shared: readers
    /// with 5% writers on a few keys. heartbeat: idle transactions kept alive. deadlock: pairs
    /// taking two keys in opposite order.
    #[arg(long, value_enum, default_value = "uncontended")]
    workload: Workload,
    /// Concurrent clients (each with its own connection).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Measured seconds (after the warmup).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before measuring starts.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Comma-separated host:port list (default: the target's usual local port).
    #[arg(long)]
    endpoints: Option<String>,
    /// Lease (transaction timeout) in ms. Default 15000, or 3000 for `heartbeat`.
    #[arg(long)]
    lease_ms: Option<u64>,
    /// How long one acquire may wait, in ms. Default 10000, or 1000 for `deadlock`.
    #[arg(long)]
    wait_ms: Option<u64>,
    /// Keys of the `shared` workload.
    #[arg(long, default_value_t = 4)]
    shared_keys: usize,
    /// Percent of writers in the `shared` workload.
    #[arg(long, default_value_t = 5.0)]
    write_pct: f64,
    /// Server process ids whose CPU use to report (comma-separated; read from /proc).
    #[arg(long)]
    pids: Option<String>,
    /// HTTP addresses (host:port, comma-separated) of the DLS nodes' metrics ports: the
    /// leader's commands and raft entries per fsync over the measured window are reported.
    #[arg(long, value_name = "ADDRS")]
    metrics: Option<String>,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    json: bool,
    /// Tag added to the JSON output (e.g. the server's durability setting).
    #[arg(long)]
    label: Option<String>,
    /// Helper: print N free loopback TCP ports and exit.
    #[arg(long, value_name = "N")]
    free_ports: Option<usize>,
    /// Helper: read JSON results (one object per line) from FILE, print the comparison
    /// table as markdown and exit.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(n) = args.free_ports {
        let ports = caerus_testkit::free_ports(n);
        println!("{}", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(" "));
        return ExitCode::SUCCESS;
    }
    if let Some(file) = &args.report {
        return match report::table(file) {
            Ok(md) => {
                print!("{md}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&format!("report: {e:#}")),
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("tokio runtime: {e}")),
    };
    runtime.block_on(run(args))
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("dls-bench: {msg}");
    ExitCode::from(1)
}

async fn run(args: Args) -> ExitCode {
    if args.clients == 0 {
        return fail("--clients must be at least 1");
    }
    let endpoints = split_list(args.endpoints.as_deref().unwrap_or(args.target.default_endpoint()));
    let pids = match args.pids.as_deref().map(parse_pids).transpose() {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => return fail(&e),
    };
    let cfg = Config {
        target: args.target.name(),
        workload: args.workload,
        clients: args.clients,
        duration: Duration::from_secs_f64(args.duration.max(0.1)),
        warmup: Duration::from_secs_f64(args.warmup.max(0.0)),
        lease: Duration::from_millis(args.lease_ms.unwrap_or(match args.workload {
            Workload::Heartbeat => 3_000,
            _ => 15_000,
        })),
        wait: Duration::from_millis(args.wait_ms.unwrap_or(match args.workload {
            Workload::Deadlock => 1_000,
            _ => 10_000,
        })),
        shared_keys: args.shared_keys.max(1),
        write_pct: args.write_pct,
        pids,
        label: args.label.clone(),
        endpoints: endpoints.join(","),
        metrics: split_list(args.metrics.as_deref().unwrap_or("")),
    };
    let result = match args.target {
        TargetKind::Dls => go(Arc::new(target::Dls::new(endpoints)), &cfg).await,
        TargetKind::Redis => match target::Redis::new(&endpoints[0]) {
            Ok(t) => go(Arc::new(t), &cfg).await,
            Err(e) => Err(anyhow::anyhow!("redis: {e}")),
        },
        TargetKind::Etcd => etcd(endpoints, &cfg).await,
    };
    let summary = match result {
        Ok(s) => s,
        Err(e) => return fail(&format!("{e:#}")),
    };
    if args.json {
        println!("{}", summary.to_json());
    } else {
        print!("{}", summary.to_text());
    }
    if summary.violations > 0 {
        eprintln!("dls-bench: {} SAFETY VIOLATION(S)", summary.violations);
        return ExitCode::from(2);
    }
    if !summary.made_progress() {
        return fail("no progress: no lock cycle completed (or no transaction stayed alive)");
    }
    ExitCode::SUCCESS
}

async fn go<T: Target>(t: Arc<T>, cfg: &Config) -> anyhow::Result<workload::Summary> {
    workload::run(t, cfg).await
}

#[cfg(feature = "etcd")]
async fn etcd(endpoints: Vec<String>, cfg: &Config) -> anyhow::Result<workload::Summary> {
    go(Arc::new(target::Etcd::new(endpoints)), cfg).await
}

#[cfg(not(feature = "etcd"))]
async fn etcd(_endpoints: Vec<String>, _cfg: &Config) -> anyhow::Result<workload::Summary> {
    anyhow::bail!("this dls-bench was built without the `etcd` feature (cargo build -p caerus-bench --features etcd; needs protoc)")
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

fn parse_pids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().map_err(|_| format!("bad pid {p:?} in --pids")))
        .collect()
}

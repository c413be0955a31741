//! A run: start the cluster, let the clients work while the faults come one after another
//! in a seeded order, stop the clients, check that no lock stays held, judge the history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use caerus_core::DlsClient;
use caerus_testkit::disk::Tmpfs;
use clap::Parser;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::checker::{self, Violation};
use crate::cluster;
use crate::fault::Fault;
use crate::history::{History, Op, OpKind, Outcome};
use crate::inject::inject;
use crate::linearizable;
use crate::register::FencedRegister;
use crate::report::{self, Figures, LIN_BUDGET};
use crate::workload::{client_config, worker, Ctx};

/// Each node's data directory is a tmpfs of this size when disk-full is injected.
const TMPFS_SIZE: &str = "256m";
/// Where Debian's `faketime` package puts the thread-safe preload library.
const FAKETIME_LIBS: [&str; 2] =
    ["/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"];

#[derive(Parser, Debug)]
#[command(
    name = "dls-chaos",
    about = "Fault injection for Caerus DLS: kills, pauses, partitions and delays a real cluster while clients contend for locks, then checks the recorded history"
)]
pub struct Args {
    /// Cluster size (3 or 5).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long clients run while faults are injected, in seconds.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Random seed (printed; the same seed replays the same fault schedule and client choices).
    #[arg(long, env = "SEED")]
    seed: Option<u64>,
    /// Concurrent client processes (in-process tasks, one transaction at a time each).
    #[arg(long, default_value_t = 5)]
    clients: usize,
    /// Keys they contend for.
    #[arg(long, default_value_t = 3)]
    keys: usize,
    /// The dls binary.
    #[arg(long, env = "DLS_BIN")]
    dls: PathBuf,
    /// Comma-separated faults to inject. "classic": kill-leader, kill-follower, pause-node,
    /// pause-client, pause-queued, partition-client, partition-leader, partition-split,
    /// one-way, latency, restart-all, crash-after-write. Life cycle: wipe-rejoin,
    /// membership-partition, disk-full (needs root for tmpfs), torn-tail. "all" (the default) is both groups; "one-new" adds one
    /// life-cycle fault chosen by the seed. clock-jump only when named (e.g.
    /// "all,clock-jump": needs libfaketime; every node then runs under it). Or "none".
    #[arg(long, default_value = "all")]
    faults: String,
    /// Transaction lease of the clients, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Where to write the history (JSON lines); default: in the run directory.
    #[arg(long)]
    history: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000)
            .unwrap_or(1)
    });
    let faults = Fault::parse_list(&args.faults, seed).map_err(anyhow::Error::msg)?;
    if args.nodes != 3 && args.nodes != 5 {
        bail!("--nodes must be 3 or 5");
    }
    let dir = tempfile::Builder::new().prefix("dls-chaos-").tempdir()?;
    println!(
        "dls-chaos: seed {seed} (replay with SEED={seed}), {} nodes, {} clients, {} keys, {} s, lease {} ms, run dir {}",
        args.nodes, args.clients, args.keys, args.duration, args.lease_ms, dir.path().display()
    );
    let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    println!("faults: {}", if names.is_empty() { "none".to_string() } else { names.join(",") });
    let mut rng = StdRng::seed_from_u64(seed);
    let faketime = if faults.contains(&Fault::ClockJump) { faketime_lib() } else { None };
    let mut faults = faults;
    let tmpfs = if faults.contains(&Fault::DiskFull) { tmpfs_size(dir.path()) } else { None };
    if tmpfs.is_none() {
        faults.retain(|f| *f != Fault::DiskFull);
    }
    let (mut cluster, mut clocks) = cluster::start(args.dls.clone(), args.nodes, dir.path(), faketime, tmpfs)?;
    let admin = DlsClient::connect(client_config(cluster.listen_endpoints())).await?;
    let history = Arc::new(History::new());
    let Some(l) = cluster.wait_for_leader_by_term(&admin, Duration::from_secs(30)).await else {
        bail!("no leader within 30 s; logs in {}", dir.keep().display());
    };
    history.log(format!("cluster up, leader node {l}"));
    let ctx = Arc::new(Ctx {
        history: history.clone(),
        register: Arc::new(FencedRegister::new()),
        stop: Arc::new(AtomicBool::new(false)),
        keys: args.keys.max(1),
        lease_ms: args.lease_ms,
    });
    let mut workers = Vec::new();
    for p in 0..args.clients as u64 {
        let client = DlsClient::connect(client_config(cluster.listen_endpoints())).await?;
        workers.push(tokio::spawn(worker(p, client, ctx.clone(), seed.wrapping_mul(1000).wrapping_add(p))));
    }
    let mut figs = Figures::default();
    let end = Instant::now() + Duration::from_secs(args.duration);
    let mut order: Vec<Fault> = Vec::new();
    let mut next_fault = 0;
    while Instant::now() < end {
        let quiet = Duration::from_millis(rng.gen_range(1500..3000));
        tokio::time::sleep(quiet.min(end.saturating_duration_since(Instant::now()))).await;
        if Instant::now() >= end {
            break;
        }
        history.log(format!("ops so far: {}, grants: {}", history.len(), history.grants()));
        // Every fault once per round, in a seeded order, so short runs cover them all.
        if next_fault == order.len() {
            order = faults.clone();
            order.shuffle(&mut rng);
            next_fault = 0;
        }
        if let Some(&f) = order.get(next_fault) {
            next_fault += 1;
            inject(f, &mut cluster, clocks.as_mut(), &admin, &ctx, &mut rng, &mut figs).await?;
            for id in cluster.ids() {
                cluster::ensure_running(&mut cluster, id)?;
            }
            cluster.links().heal();
        }
    }
    history.log("stopping clients");
    ctx.stop.store(true, Ordering::Relaxed);
    for w in workers {
        if tokio::time::timeout(Duration::from_secs(60), w).await.is_err() {
            figs.extra_violations
                .push(Violation { checker: "terminal", message: "a client did not finish within 60 s".into() });
        }
    }
    // No lock stays held once every client has ended: within a lease plus elections.
    let bound = Duration::from_millis(args.lease_ms) + Duration::from_secs(10);
    let held = still_held_after(&admin, bound).await;
    if !held.is_empty() {
        figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!("{} ms after every client ended, still held: {held}", bound.as_millis()),
        });
    }
    let path = args.history.clone().unwrap_or_else(|| dir.path().join("history.jsonl"));
    let run = report::Run { seed, nodes: args.nodes, lease_ms: args.lease_ms };
    let violations = report::judge(&run, &history, &ctx.register, figs, cluster.links(), &path)?;
    cluster.kill_all();
    if violations.is_empty() {
        println!("OK (seed {seed})");
        Ok(true)
    } else {
        let kept = dir.keep();
        println!("FAILED (seed {seed}; replay with SEED={seed}); node logs kept in {}", kept.display());
        Ok(false)
    }
}

/// The libfaketime preload library (FAKETIME_LIB, or where Debian's package puts it).
fn faketime_lib() -> Option<PathBuf> {
    let lib = std::env::var_os("FAKETIME_LIB")
        .map(PathBuf::from)
        .or_else(|| FAKETIME_LIBS.iter().map(PathBuf::from).find(|p| p.exists()));
    match &lib {
        Some(l) => println!("clock-jump: every node runs under {}", l.display()),
        None => {
            println!("clock-jump: no libfaketime (apt-get install faketime, or FAKETIME_LIB=…): it will be skipped")
        }
    }
    lib
}

/// The size of each node's tmpfs, if a tmpfs can be mounted here (a probe under `dir`).
fn tmpfs_size(dir: &Path) -> Option<&'static str> {
    match Tmpfs::mount(&dir.join("probe"), "1m") {
        Ok(_) => {
            println!("disk-full: every node's data directory is a {TMPFS_SIZE} tmpfs");
            Some(TMPFS_SIZE)
        }
        Err(e) => {
            println!("disk-full: {e}; it will not be injected");
            None
        }
    }
}

/// The locks still held after `bound` of asking (empty: none), or why the last asking failed.
pub(crate) async fn still_held_after(admin: &DlsClient, bound: Duration) -> String {
    let deadline = Instant::now() + bound;
    loop {
        let held = match admin.list_locks("").await {
            Ok(keys) => keys
                .iter()
                .flat_map(|k| {
                    k.holders.iter().map(move |h| format!("{}/{} by txn {}", k.namespace, k.key, h.transaction_id))
                })
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => format!("list_locks failed: {e}"),
        };
        if held.is_empty() || Instant::now() > deadline {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `dls-chaos check-history FILE`: re-checks a recorded history offline (the register's
/// final state is taken from the history's last accepted writes).
pub fn check_history(path: &str) -> anyhow::Result<bool> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {path}"))?;
    let mut ops = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        ops.push(serde_json::from_str::<Op>(line).with_context(|| format!("{path}:{}", i + 1))?);
    }
    let mut finals: HashMap<String, u64> = HashMap::new();
    for o in ops.iter().filter(|o| o.kind == OpKind::Write && o.outcome == Outcome::Ok) {
        let t = finals.entry(o.key.clone()).or_default();
        *t = (*t).max(o.token);
    }
    let started = Instant::now();
    let mut violations = checker::check_all(&ops, &finals);
    let lin = linearizable::check(&ops, LIN_BUDGET);
    violations.extend(lin.violations.iter().cloned());
    println!("{} operations", ops.len());
    println!("{} in {} ms", report::lin_summary(&lin), started.elapsed().as_millis());
    println!("violations: {}", violations.len());
    for v in violations.iter() {
        println!("  {v}");
    }
    Ok(violations.is_empty())
}

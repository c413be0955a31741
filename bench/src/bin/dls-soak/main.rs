//! `dls-soak` (`make soak`, not in CI): a real three-node cluster with API keys, legitimate
//! churn (clients taking and releasing locks, some contended) for `--minutes`, run twice on
//! fresh clusters: once alone, once with every attack of `server/tests/attacks` running
//! beside it (half-open connections, calls without a body, idle handshakes, unknown keys,
//! one key flooding a follower with waits). It reports whether any node exited, each node's
//! resident memory, and the legitimate clients' latency with and without the attacks, and
//! fails when a node exited or grew past `--max-rss-growth-mib`.

mod attackers;
mod churn;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use caerus_testkit::{add_key, attack, Cluster, Spec};
use clap::Parser;

/// Legitimate churn beside every attack the attack suite knows, against a real cluster.
#[derive(Parser, Debug)]
#[command(
    name = "dls-soak",
    version,
    about = "dls-soak: legitimate churn on a keyed 3-node cluster, alone and beside every port attack",
    long_about = None
)]
struct Opts {
    /// The `dls` binary to run (a release build for meaningful numbers).
    #[arg(long, env = "DLS_BIN")]
    dls_bin: PathBuf,
    /// Length of each run (the attack-free one, then the attacked one).
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Legitimate client tasks (each a lock cycle at a time).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Skip the attack-free run.
    #[arg(long)]
    no_baseline: bool,
    /// The attacks to run beside the churn, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "half-open,body-less,unknown-keys,flood")]
    attacks: Vec<attackers::Attack>,
    /// Largest growth of any node's resident memory over the attacked run.
    #[arg(long, default_value_t = 256.0)]
    max_rss_growth_mib: f64,
}

/// What one run saw.
struct Run {
    label: &'static str,
    cycles: churn::Tally,
    /// Per node: resident memory at the start and at its highest.
    rss: Vec<(f64, f64)>,
    exits: Vec<String>,
    attacks: Option<std::sync::Arc<attackers::Tally>>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let opts = Opts::parse();
    let length = Duration::from_secs_f64(opts.minutes * 60.0);
    let mut runs = Vec::new();
    if !opts.no_baseline {
        runs.push(run(&opts, "without attacks", length, false).await);
    }
    let attacked = run(&opts, "with every attack", length, true).await;
    let failed = !attacked.exits.is_empty()
        || attacked.rss.iter().any(|(start, peak)| peak - start > opts.max_rss_growth_mib)
        || attacked.cycles.ok == 0;
    runs.push(attacked);
    print!("{}", report(&runs, length));
    if failed {
        eprintln!("dls-soak: FAILED (a node exited, grew past --max-rss-growth-mib, or served nothing)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

async fn run(opts: &Opts, label: &'static str, length: Duration, attacked: bool) -> Run {
    eprintln!("dls-soak: {label}, {length:?}");
    let dir = tempfile::tempdir().expect("a run directory");
    let keys = dir.path().join("keys.toml");
    let app = add_key(&keys, "app", &[], false);
    let flood = add_key(&keys, "flood", &[], false);
    let spec = Spec {
        nodes: 3,
        extra: vec![format!("--api-keys-file={}", keys.display())],
        probe_key: Some(app.clone()),
        bin: Some(opts.dls_bin.clone()),
        dir: Some(dir.path().join("cluster")),
        fast_elections: false,
        ..Spec::default()
    };
    let mut cluster = Cluster::start_spec(spec).await;
    let pids: Vec<u32> = cluster.ids().iter().map(|&id| cluster.pid(id).expect("a running node")).collect();
    let start_rss: Vec<f64> = pids.iter().map(|&p| attack::rss_mib(p)).collect();
    let churn = churn::Churn::start(cluster.endpoints(), &app, opts.clients).await;
    let attack = attacked.then(|| attackers::Attackers::start(&cluster, &flood, &opts.attacks));
    let mut peak = start_rss.clone();
    let mut exits = Vec::new();
    let until = Instant::now() + length;
    while Instant::now() < until && exits.is_empty() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (i, id) in cluster.ids().into_iter().enumerate() {
            if let Some(status) = cluster.exited(id) {
                exits.push(format!("node {id} exited: {status}"));
                continue;
            }
            peak[i] = peak[i].max(attack::rss_mib(pids[i]));
        }
    }
    let attacks = match attack {
        Some(a) => Some(a.stop().await),
        None => None,
    };
    let cycles = churn.stop().await;
    if !exits.is_empty() {
        cluster.dump_logs();
    }
    Run { label, cycles, rss: start_rss.into_iter().zip(peak).collect(), exits, attacks }
}

fn report(runs: &[Run], length: Duration) -> String {
    let mut out = format!("## dls-soak ({:.1} min per run, 3 nodes, API keys)\n\n", length.as_secs_f64() / 60.0);
    out += "| run | lock cycles ok | errors | p50 | p99 | max | nodes exited | RSS per node, start → peak (MiB) |\n";
    out += "|---|---|---|---|---|---|---|---|\n";
    for r in runs {
        let rss: Vec<String> = r.rss.iter().map(|(s, p)| format!("{s:.0} → {p:.0}")).collect();
        let (p50, p99, max) = r.cycles.percentiles();
        out += &format!(
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} |\n",
            r.label,
            r.cycles.ok,
            r.cycles.errors,
            p50,
            p99,
            max,
            if r.exits.is_empty() { "0".to_string() } else { r.exits.join("; ") },
            rss.join(", ")
        );
    }
    for r in runs {
        if let Some(a) = &r.attacks {
            out += &format!("\nAttacks during \"{}\": {a}\n", r.label);
        }
    }
    out
}

//! Heartbeat cost: N idle transactions, each holding one key, kept alive by caerus-core's
//! own heartbeat task (one `Heartbeat` RPC per transaction every lease/3), multiplexed on a
//! few connections. Measures the leader's CPU (utime+stime from /proc) and RSS over a
//! window, after an idle baseline of the same cluster, then optionally samples the leader
//! with `perf record -g`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, LockMode, Transaction, TransactionOptions};

use crate::cluster;
use crate::pool::{self, progress, NAMESPACE};
use crate::{perf, Opts, Report};
use caerus_bench::procstat::{self, CpuWindow};

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("heartbeat");
    // More transactions than the server's default --max-txns-per-api-key (10,000), all of
    // one (anonymous) caller: raise it, with room for begins still in flight.
    let extra = ["--max-txns-per-api-key".to_string(), (2 * opts.hb_txns).to_string()];
    let cluster = cluster::start(&opts.dls_bin, &dir, &extra).await?;
    let leader = cluster::leader(&cluster).await?;
    let pid = cluster.pid(leader).expect("leader runs");
    progress(
        "heartbeat",
        format!("3 nodes up, leader node {} (pid {pid}); idle baseline {}s", leader, opts.baseline_s),
    );

    let idle = CpuWindow::start(pid).expect("leader /proc");
    tokio::time::sleep(Duration::from_secs_f64(opts.baseline_s)).await;
    let (idle_cpu, _) = idle.finish().unwrap_or_default();

    let n = opts.hb_txns;
    let lease = Duration::from_millis(opts.hb_lease_ms);
    let clients = pool::clients(&cluster.endpoints(), opts.hb_connections).await?;
    progress(
        "heartbeat",
        format!("setting up {n} transactions (lease {lease:?}) on {} connections", opts.hb_connections),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let ticker = spawn_ticker("heartbeat", done.clone(), n, "transactions holding a key");
    let t_setup = Instant::now();
    let c = clients.clone();
    let txns: Vec<Transaction> = pool::for_each(n, opts.workers, done.clone(), move |i| {
        let client = c[i % c.len()].clone();
        async move {
            let tx = client.begin_transaction(TransactionOptions::default().with_timeout(lease)).await?;
            let wait = AcquireOptions::default().with_timeout_ms(60_000);
            tx.acquire_lock(NAMESPACE, &format!("hb-{i}"), LockMode::Exclusive, wait).await?;
            anyhow::Ok(tx)
        }
    })
    .await?;
    ticker.abort();
    let setup_s = t_setup.elapsed().as_secs_f64();
    progress("heartbeat", format!("{n} transactions set up in {setup_s:.1}s; settling for one lease"));
    // One lease of settling: every transaction has heartbeated at least twice, spread out.
    tokio::time::sleep(lease).await;

    let before = cluster::metrics(&cluster, leader).await?;
    let busy = CpuWindow::start(pid).expect("leader /proc");
    let me = CpuWindow::start(std::process::id()).expect("own /proc");
    let window = Duration::from_secs_f64(opts.measure_s);
    let t_end = Instant::now() + window;
    let mut rss_max = 0u64;
    while Instant::now() < t_end {
        tokio::time::sleep(Duration::from_secs(5).min(t_end.saturating_duration_since(Instant::now()))).await;
        rss_max = rss_max.max(procstat::rss_kib(pid).unwrap_or(0));
        let (cpu, secs) = busy.finish().unwrap_or_default();
        let alive = txns.iter().filter(|t| !t.is_lost()).count();
        progress(
            "heartbeat",
            format!("t={secs:.0}s leader cpu {cpu:.1}% of a core, {alive}/{n} alive, load {}", procstat::loadavg()),
        );
    }
    let (cpu, secs) = busy.finish().unwrap_or_default();
    let (client_cpu, _) = me.finish().unwrap_or_default();
    let after = cluster::metrics(&cluster, leader).await?;
    let alive = txns.iter().filter(|t| !t.is_lost()).count();
    let delta = |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    let expired = delta("dls_expiries_total");
    let log_entries = delta("dls_raft_log_entries_total");
    // caerus-core sends one Heartbeat per transaction every lease/3 (core/src/heartbeat.rs).
    let hb_per_s = alive as f64 / (lease.as_secs_f64() / 3.0);
    let per_1k = if hb_per_s > 0.0 { (cpu - idle_cpu) / hb_per_s * 1000.0 } else { 0.0 };
    let rss = procstat::rss_kib(pid).unwrap_or(0).max(rss_max);

    let profile =
        if opts.perf_s > 0.0 { perf::record(pid, opts.perf_s, &dir.join("perf-heartbeat.data")).await } else { None };

    report.h3("Heartbeat cost");
    report.line(format!(
        "{n} idle transactions, one EXCLUSIVE key each, lease {} s (caerus-core heartbeats every lease/3), \
         multiplexed on {} client connections; 3-node cluster, leader measured.",
        lease.as_secs_f64(),
        opts.hb_connections
    ));
    report.line("");
    report.line("| figure | value |");
    report.line("|---|---|");
    report.line(format!("| leader CPU, {secs:.0} s window | **{cpu:.1} % of one core** (target < 10 %) |"));
    report.line(format!("| leader CPU idle baseline (no transactions, {:.0} s) | {idle_cpu:.1} % |", opts.baseline_s));
    report.line(format!("| heartbeats/s reaching the server (alive × 3 / lease) | {hb_per_s:.0} |"));
    report.line(format!("| leader CPU per 1,000 heartbeats/s above idle | {per_1k:.1} % |"));
    report.line(format!("| transactions alive at the end / expired in the window | {alive}/{n} / {expired:.0} |"));
    report.line(format!("| raft log entries appended on the leader in the window | {log_entries:.0} |"));
    report.line(format!("| leader RSS (max sampled) | {:.0} MiB |", procstat::mib(rss)));
    report.line(format!("| benchmark client CPU (same machine) | {client_cpu:.1} % |"));
    report.line(format!("| set-up of {n} transactions (begin + acquire) | {setup_s:.1} s |"));
    report.line("");
    if let Some(p) = profile {
        report.line(format!(
            "`perf record -g` of the leader for {:.0} s with the transactions idle (self time):",
            opts.perf_s
        ));
        report.line("");
        report.line("```");
        report.line(p);
        report.line("```");
        report.line("");
    }
    // Nothing is committed: the runtime of this step is dropped with its heartbeat tasks and
    // the cluster is killed.
    drop(cluster);
    Ok(())
}

/// Prints `done`/`total` once a second until aborted.
pub fn spawn_ticker(
    step: &'static str,
    done: Arc<AtomicUsize>,
    total: usize,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let d = done.load(Ordering::Relaxed);
            progress(
                step,
                format!("{d}/{total} {what} ({:.0}/s, load {})", (d - last) as f64 / 2.0, procstat::loadavg()),
            );
            last = d;
        }
    })
}

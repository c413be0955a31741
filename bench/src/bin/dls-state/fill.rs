//! Memory and restore: fill a 3-node cluster with T transactions holding L locks each plus
//! W waiting requests (leases and waits of 30 min, so nothing needs a heartbeat while
//! measuring), read every node's RSS, wait for a snapshot that covers the whole table,
//! then SIGKILL+restart one follower and afterwards the whole cluster, timing process
//! start → "restored lock table from snapshot" and → /readyz 200, and checking that the
//! held/waiting gauges equal those before the kill.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use caerus_core::{AcquireOptions, LockMode, Transaction, TransactionOptions};

use caerus_bench::procstat::{self, mib};
use caerus_testkit::Cluster;

use crate::cluster::{self, last_line_with};
use crate::heartbeat::spawn_ticker;
use crate::pool::{self, progress, NAMESPACE};
use crate::{Opts, Report};

const LONG_MS: u64 = 30 * 60 * 1000;
const RESTORED: &str = "restored lock table from snapshot";
const BUILT: &str = "snapshot built";
const PAD_ROUND: usize = 400;

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("fill");
    // The fill is far past the server's default limits for one caller: 50,000 transactions
    // (--max-txns-per-api-key 10,000), and 10,000 waiters asked for at once (a queue of
    // --max-queued-proposals 1,024). Raise both so the figures measure the table, not
    // refusals and retries.
    let extra = vec![
        "--snapshot-every".to_string(),
        opts.snapshot_every.to_string(),
        "--max-txns-per-api-key".to_string(),
        (2 * opts.fill_txns).to_string(),
        "--max-queued-proposals".to_string(),
        (2 * opts.waiters.max(opts.workers)).to_string(),
    ];
    let mut cluster = cluster::start(&opts.dls_bin, &dir, &extra).await?;
    let leader = cluster::leader(&cluster).await?;
    let (t, l, w) = (opts.fill_txns, opts.locks_per_txn, opts.waiters);
    if 2 * w > t {
        bail!("--waiters must be at most half of --fill-txns (waiter i waits on transaction i+W, so no cycles)");
    }
    let clients = pool::clients(&cluster.endpoints(), opts.fill_connections).await?;
    let rss_empty = rss_all(&cluster);
    progress("fill", format!("{t} transactions × {l} locks, then {w} waiters; leader node {}", leader));

    // 1. Holders.
    let done = Arc::new(AtomicUsize::new(0));
    let ticker = spawn_ticker("fill", done.clone(), t, "transactions holding their locks");
    let t0 = Instant::now();
    let c = clients.clone();
    let mut txns: Vec<(usize, Transaction)> = pool::for_each(t, opts.workers, done.clone(), move |i| {
        let client = c[i % c.len()].clone();
        async move {
            let tx = client.begin_transaction(TransactionOptions::default().with_timeout_ms(LONG_MS)).await?;
            for j in 0..l {
                let wait = AcquireOptions::default().with_timeout_ms(60_000);
                tx.acquire_lock(NAMESPACE, &format!("f{i}-{j}"), LockMode::Exclusive, wait).await?;
            }
            anyhow::Ok((i, tx))
        }
    })
    .await?;
    ticker.abort();
    let hold_s = t0.elapsed().as_secs_f64();
    txns.sort_by_key(|p| p.0);
    let rss_holders = rss_all(&cluster);
    if opts.pause_before_waiters > 0.0 {
        progress(
            "fill",
            format!(
                "leader pid {}: pausing {}s before the waiters (--pause-before-waiters)",
                cluster.pid(leader).unwrap_or(0),
                opts.pause_before_waiters
            ),
        );
        tokio::time::sleep(Duration::from_secs_f64(opts.pause_before_waiters)).await;
    }
    progress(
        "fill",
        format!("{} locks held after {hold_s:.1}s ({:.0} raft writes/s)", t * l, (t * (l + 1)) as f64 / hold_s),
    );

    // 2. Waiters: transaction i waits for the first key of transaction i+W (which never
    // waits itself), so the wait-for graph has no cycle. The streams stay open.
    let t1 = Instant::now();
    let mut waiting = Vec::with_capacity(w);
    for (i, tx) in txns.iter().take(w) {
        let (tx, key) = (tx.clone(), format!("f{}-0", i + w));
        waiting.push(tokio::spawn(async move {
            let wait = AcquireOptions::default().with_timeout_ms(LONG_MS);
            tx.acquire_lock(NAMESPACE, &key, LockMode::Exclusive, wait).await
        }));
    }
    let g = wait_gauge(&cluster, leader, "dls_waiting_requests", w as f64, Duration::from_secs(600)).await?;
    let wait_s = t1.elapsed().as_secs_f64();
    progress("fill", format!("{g:.0} requests waiting after {wait_s:.1}s"));
    let fill_s = t0.elapsed().as_secs_f64();

    // 3. Memory, with the table complete.
    let before = gauges(&cluster).await?;
    let rss: Vec<(u64, u64)> = cluster
        .ids()
        .into_iter()
        .map(|id| {
            let pid = cluster.pid(id).unwrap_or(0);
            (procstat::rss_kib(pid).unwrap_or(0), procstat::peak_rss_kib(pid).unwrap_or(0))
        })
        .collect();
    progress("fill", format!("RSS MiB: {:?}", rss.iter().map(|r| mib(r.0).round()).collect::<Vec<_>>()));

    // 4. A snapshot of the complete table on every node: pad with empty transactions until
    // each node's last "snapshot built" covers the index the table was complete at.
    let full_index = before[at(leader)].get("dls_applied_index").copied().unwrap_or(0.0) as u64;
    let t2 = Instant::now();
    let mut pads = 0usize;
    let snaps = loop {
        let s: Vec<Option<(u64, u64)>> = cluster.ids().into_iter().map(|id| snapshot_of(&cluster, id)).collect();
        if s.iter().all(|x| x.is_some_and(|(idx, _)| idx >= full_index)) {
            break s.into_iter().map(Option::unwrap).collect::<Vec<_>>();
        }
        if t2.elapsed() > Duration::from_secs(600) {
            bail!("no snapshot covering index {full_index} on every node after 10 min: {s:?}");
        }
        // Few at a time: the leader batches concurrent proposals into one entry, and the
        // snapshot interval counts entries.
        let c = clients.clone();
        pool::for_each(PAD_ROUND, 4, Arc::new(AtomicUsize::new(0)), move |i| {
            let client = c[i % c.len()].clone();
            async move {
                client.begin_transaction(TransactionOptions::default().with_timeout_ms(10_000)).await?.commit().await?;
                anyhow::Ok(())
            }
        })
        .await?;
        pads += PAD_ROUND;
        progress(
            "fill",
            format!("padding for a snapshot past index {full_index}: {pads} empty transactions, snapshots {s:?}"),
        );
    };
    progress("fill", format!("snapshots (index, bytes): {snaps:?}"));
    let rss_after_snap = rss_all(&cluster);
    let before = gauges(&cluster).await?;

    // 5. One follower: SIGKILL, restart, time to restored and to ready.
    let follower = leader % 3 + 1;
    cluster.kill(follower);
    let one = restart(&mut cluster, &[follower]).await?;
    let after_one = wait_same(&cluster, follower, &before[at(leader)]).await;
    let rss_restored = procstat::rss_kib(cluster.pid(follower).unwrap_or(0)).unwrap_or(0);

    // 6. The whole cluster: SIGKILL all three, restart all three.
    cluster.kill_all();
    let ids = cluster.ids();
    let all = restart(&mut cluster, &ids).await?;
    let new_leader = cluster::leader(&cluster).await?;
    let after_all = wait_same(&cluster, new_leader, &before[at(leader)]).await;
    drop(waiting);

    let b = &before[at(leader)];
    report.h3("Memory at 100k locks, snapshot restore");
    report.line(format!(
        "{t} transactions × {l} EXCLUSIVE locks + {w} waiting requests (each a transaction of the {t} waiting for \
         another's key), lease and wait 30 min so no heartbeat is due while measuring; {} client connections, {} \
         concurrent workers; `--snapshot-every {}`.",
        opts.fill_connections, opts.workers, opts.snapshot_every
    ));
    report.line("");
    report.line("| figure | value |");
    report.line("|---|---|");
    report.line(format!(
        "| fill: holders / waiters | {hold_s:.1} s ({:.0} txns/s, {:.0} raft writes/s) / {wait_s:.1} s |",
        t as f64 / hold_s,
        (t * (l + 1)) as f64 / hold_s
    ));
    report.line(format!(
        "| leader gauges: transactions / held locks / waiting | {:.0} / {:.0} / {:.0} |",
        b["dls_active_transactions"], b["dls_held_locks"], b["dls_waiting_requests"]
    ));
    for id in 1..=3 {
        let role = if id == leader { "leader" } else { "follower" };
        report.line(format!(
            "| RSS node {id} ({role}): filled / peak (VmHWM) / after snapshot | {}{:.0} MiB{} / {:.0} MiB / {:.0} MiB |",
            if id == leader { "**" } else { "" },
            mib(rss[at(id)].0),
            if id == leader { "** (target < 256)" } else { "" },
            mib(rss[at(id)].1),
            mib(rss_after_snap[at(id)])
        ));
    }
    report.line(format!(
        "| RSS leader / followers (MiB): empty → {t} holders → + {w} waiters | {} / {} |",
        stages(leader, &[&rss_empty, &rss_holders, &rss.iter().map(|r| r.0).collect::<Vec<_>>()]),
        (1..=3)
            .filter(|&id| id != leader)
            .map(|id| stages(id, &[&rss_empty, &rss_holders, &rss.iter().map(|r| r.0).collect::<Vec<_>>()]))
            .collect::<Vec<_>>()
            .join(" / ")
    ));
    report.line(format!(
        "| snapshot size (bytes, per node) | {} (index ≥ {full_index}, {pads} padding txns) |",
        snaps.iter().map(|s| s.1.to_string()).collect::<Vec<_>>().join(" / ")
    ));
    report.line(format!(
        "| restart 1 follower: start → restored from snapshot / → /readyz 200 | {} / **{:.2} s** (target < 2 s) |",
        fmt_s(one.restored[0]),
        one.ready[0]
    ));
    report.line(format!("| follower after restart: held / waiting (equal before?) | {after_one} |"));
    report.line(format!("| RSS of the restored follower | {:.0} MiB |", mib(rss_restored)));
    report.line(format!(
        "| restart all 3: start → restored (per node) / → every node ready | {} / **{:.2} s** |",
        all.restored.iter().map(|r| fmt_s(*r)).collect::<Vec<_>>().join(", "),
        all.ready.iter().copied().fold(0.0, f64::max)
    ));
    report.line(format!("| new leader after restart: held / waiting (equal before?) | {after_all} |"));
    report.line(format!("| total fill time (holders + waiters) | {fill_s:.1} s |"));
    report.line("");
    Ok(())
}

/// Where node `id`'s figure is in a per-node list (node order).
fn at(id: u64) -> usize {
    id as usize - 1
}

fn rss_all(cluster: &Cluster) -> Vec<u64> {
    cluster.ids().into_iter().map(|id| procstat::rss_kib(cluster.pid(id).unwrap_or(0)).unwrap_or(0)).collect()
}

/// "a → b → c" in MiB for node `id`.
fn stages(id: u64, samples: &[&[u64]]) -> String {
    samples.iter().map(|s| format!("{:.0}", mib(s[at(id)]))).collect::<Vec<_>>().join(" → ")
}

fn fmt_s(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.2} s")).unwrap_or_else(|| "no snapshot line".into())
}

/// Index and size of the last snapshot node `id`'s log reports.
fn snapshot_of(cluster: &Cluster, id: u64) -> Option<(u64, u64)> {
    let line = last_line_with(cluster, id, BUILT)?;
    let num_after = |tag: &str| -> Option<u64> {
        let rest = &line[line.rfind(tag)? + tag.len()..];
        rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
    };
    Some((num_after("index: ")?, num_after("bytes=")?))
}

async fn gauges(cluster: &Cluster) -> anyhow::Result<Vec<HashMap<String, f64>>> {
    let mut v = Vec::new();
    for id in cluster.ids() {
        v.push(cluster::metrics(cluster, id).await?);
    }
    Ok(v)
}

async fn wait_gauge(cluster: &Cluster, node: u64, name: &str, want: f64, limit: Duration) -> anyhow::Result<f64> {
    let until = Instant::now() + limit;
    let mut last_print = Instant::now();
    loop {
        let v = cluster::metrics(cluster, node).await?.get(name).copied().unwrap_or(0.0);
        if v >= want {
            return Ok(v);
        }
        if Instant::now() > until {
            bail!("{name} is {v}, wanted {want}, after {limit:?}");
        }
        if last_print.elapsed() > Duration::from_secs(2) {
            progress("fill", format!("{name} = {v:.0} / {want:.0}"));
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `node` until its held/waiting gauges equal `want`'s (or 30 s), and says how it went.
async fn wait_same(cluster: &Cluster, node: u64, want: &HashMap<String, f64>) -> String {
    let keys = ["dls_held_locks", "dls_waiting_requests"];
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let got = cluster::metrics(cluster, node).await.unwrap_or_default();
        let same = keys.iter().all(|k| got.get(*k) == want.get(*k));
        if same || Instant::now() > until {
            let g = |k| got.get(k).copied().unwrap_or(f64::NAN);
            return format!("{:.0} / {:.0} ({})", g(keys[0]), g(keys[1]), if same { "yes" } else { "NO" });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Restart {
    restored: Vec<Option<f64>>,
    ready: Vec<f64>,
}

/// Starts `nodes` (already killed) and times each from spawn to /readyz 200 (polled) and
/// to the restore log line (by the line's own timestamp, so polling cannot miss or delay it).
async fn restart(cluster: &mut Cluster, nodes: &[u64]) -> anyhow::Result<Restart> {
    let t0 = Instant::now();
    let wall0 = seconds_of_day_now();
    for &id in nodes {
        cluster.start_node(id)?;
    }
    let mut ready = vec![None; nodes.len()];
    while ready.iter().any(Option::is_none) {
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("restarted nodes not ready after 120 s");
        }
        for (k, &i) in nodes.iter().enumerate() {
            if ready[k].is_none() && cluster::ready(cluster, i).await {
                ready[k] = Some(t0.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let restored: Vec<Option<f64>> = nodes
        .iter()
        .map(|&i| {
            let line = last_line_with(cluster, i, RESTORED)?;
            Some((seconds_of_day(&line)? - wall0).rem_euclid(86_400.0))
        })
        .collect();
    let ready: Vec<f64> = ready.into_iter().map(Option::unwrap).collect();
    progress("restore", format!("nodes {nodes:?}: restored at {restored:?} s, ready at {ready:?} s"));
    Ok(Restart { restored, ready })
}

fn seconds_of_day_now() -> f64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_secs_f64().rem_euclid(86_400.0)
}

/// Seconds since UTC midnight of a log line starting with tracing's RFC 3339 timestamp
/// (`2026-11-29T16:49:08.157720Z ...`).
fn seconds_of_day(line: &str) -> Option<f64> {
    let time = line.split_whitespace().next()?.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

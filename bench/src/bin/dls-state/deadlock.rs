//! Deadlock resolution latency: per pair, an older high-priority transaction A holds `a`,
//! a younger low-priority B holds `b` and waits (queued, confirmed by the server's Queued
//! message) for `a`; then A asks for `b`, closing the cycle. B is the victim under any
//! policy (lowest priority, then youngest). Measured: from the moment A's cycle-closing
//! acquire is sent to the moment B's waiting acquire stream ends with DEADLOCK_VICTIM.
//! That span holds one raft commit (A's enqueue, where detection runs inside apply) plus
//! the victim's notification.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use caerus_core::{AcquireOptions, LockMode, TransactionOptions};

use crate::cluster;
use crate::heartbeat::spawn_ticker;
use crate::pool::{self, pct, progress, NAMESPACE};
use crate::{Opts, Report};

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("deadlock");
    let cluster = cluster::start(&opts.dls_bin, &dir, &[]).await?;
    let conc = opts.dl_concurrency.max(1);
    // A and B of one pair on different connections, as two processes would be.
    let clients = pool::clients(&cluster.endpoints(), 2 * conc).await?;
    let pairs = opts.dl_pairs;
    progress("deadlock", format!("{pairs} deadlocked pairs, {conc} at a time"));
    let anomalies = Arc::new(Mutex::new(Vec::<String>::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let ticker = spawn_ticker("deadlock", done.clone(), pairs, "cycles broken");
    let (c, an) = (clients.clone(), anomalies.clone());
    let results: Vec<Option<(f64, f64)>> = pool::for_each(pairs, conc, done.clone(), move |i| {
        let (ca, cb) = (c[(2 * i) % c.len()].clone(), c[(2 * i + 1) % c.len()].clone());
        let an = an.clone();
        async move {
            let (ka, kb) = (format!("dl-{i}-a"), format!("dl-{i}-b"));
            let wait = AcquireOptions::default().with_timeout_ms(10_000);
            let a =
                ca.begin_transaction(TransactionOptions::default().with_timeout_ms(15_000).with_priority(10)).await?;
            let b =
                cb.begin_transaction(TransactionOptions::default().with_timeout_ms(15_000).with_priority(0)).await?;
            a.acquire_lock(NAMESPACE, &ka, LockMode::Exclusive, wait.clone()).await?;
            b.acquire_lock(NAMESPACE, &kb, LockMode::Exclusive, wait.clone()).await?;
            let (queued_tx, queued_rx) = tokio::sync::oneshot::channel();
            let b2 = b.clone();
            let (ka2, w2) = (ka.clone(), wait.clone());
            let victim = tokio::spawn(async move {
                let mut queued_tx = Some(queued_tx);
                let r = b2
                    .acquire_lock_with_progress(NAMESPACE, &ka2, LockMode::Exclusive, w2, |_| {
                        if let Some(q) = queued_tx.take() {
                            let _ = q.send(());
                        }
                    })
                    .await;
                (r, Instant::now())
            });
            if queued_rx.await.is_err() {
                an.lock().unwrap().push(format!("pair {i}: B was never queued"));
                let _ = a.abort().await;
                return anyhow::Ok(None);
            }
            let t0 = Instant::now();
            let ra = a.acquire_lock(NAMESPACE, &kb, LockMode::Exclusive, wait).await;
            let t_closer = t0.elapsed().as_secs_f64() * 1000.0;
            let (rb, t_victim) = victim.await?;
            let out = match (&ra, &rb) {
                (Ok(_), Err(e)) if e.code() == "DEADLOCK_VICTIM" => {
                    Some((t_victim.saturating_duration_since(t0).as_secs_f64() * 1000.0, t_closer))
                }
                _ => {
                    an.lock().unwrap().push(format!(
                        "pair {i}: closer {:?}, waiter {:?}",
                        ra.as_ref().map(|_| "granted").map_err(|e| e.code()),
                        rb.as_ref().map(|_| "granted").map_err(|e| e.code())
                    ));
                    None
                }
            };
            let _ = a.commit().await;
            drop(b);
            anyhow::Ok(out)
        }
    })
    .await?;
    ticker.abort();
    let mut victim: Vec<f64> = results.iter().flatten().map(|r| r.0).collect();
    let mut closer: Vec<f64> = results.iter().flatten().map(|r| r.1).collect();
    victim.sort_by(f64::total_cmp);
    closer.sort_by(f64::total_cmp);
    let anomalies = anomalies.lock().unwrap().clone();
    progress(
        "deadlock",
        format!(
            "victim notified p50 {:.2} ms p99 {:.2} ms ({} pairs)",
            pct(&victim, 0.5),
            pct(&victim, 0.99),
            victim.len()
        ),
    );

    report.h3("Deadlock resolution latency");
    report.line(format!(
        "{pairs} pairs, {conc} concurrently; the older, higher-priority transaction closes the cycle while the \
         victim waits on its stream. Clock: cycle-closing acquire sent → victim's stream ends with DEADLOCK_VICTIM."
    ));
    report.line("");
    report.line("| figure | p50 | p90 | p99 | max |");
    report.line("|---|---|---|---|---|");
    for (name, v) in [("cycle closed → victim notified (ms)", &victim), ("cycle closed → closer granted (ms)", &closer)]
    {
        report.line(format!(
            "| {name} | {:.2} | {:.2} | **{:.2}** | {:.2} |",
            pct(v, 0.5),
            pct(v, 0.9),
            pct(v, 0.99),
            pct(v, 1.0)
        ));
    }
    report.line("");
    report.line(format!(
        "Measured pairs: {}; anomalies (victim not B, or not queued): {}.",
        victim.len(),
        anomalies.len()
    ));
    for a in anomalies.iter().take(5) {
        report.line(format!("- {a}"));
    }
    report.line("");
    drop(cluster);
    if victim.is_empty() {
        anyhow::bail!("no deadlock was resolved as expected");
    }
    Ok(())
}

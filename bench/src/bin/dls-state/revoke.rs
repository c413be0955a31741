//! Revocation → lost signal: how long a client goes on believing it holds a lock after an
//! operator revoked it (AdminService.AbortTransaction), through the Rust core, without and
//! with the lost stream (`TransactionOptions::lost_stream`). Without it the client learns
//! at its next heartbeat (every third of the lease, so anywhere in 0..lease/3); with it the
//! server pushes the end down the acquire stream it keeps open. Each round takes a lock,
//! waits a random part of a heartbeat period (so the abort falls anywhere in the heartbeat
//! cycle), then aborts it from another connection. Clock: abort sent → `Transaction::lost`
//! resolves.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, LockMode, TransactionOptions};
use rand::Rng;

use crate::cluster;
use crate::pool::{self, pct, progress, NAMESPACE};
use crate::{Opts, Report};

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("revoke");
    let cluster = cluster::start(&opts.dls_bin, &dir, &[]).await?;
    // Holders on one connection, the operator on another.
    let clients = pool::clients(&cluster.endpoints(), 2).await?;
    let rounds = opts.rv_rounds.max(1);
    let lease_ms = opts.rv_lease_ms;
    progress("revoke", format!("{rounds} revocations without and with the lost stream, lease {lease_ms} ms"));
    let mut rows = Vec::new();
    for lost_stream in [false, true] {
        let mut spans = measure(&clients, rounds, lease_ms, lost_stream).await?;
        spans.sort_by(f64::total_cmp);
        let label = if lost_stream { "with the lost stream" } else { "heartbeat only" };
        progress("revoke", format!("{label}: p50 {:.1} ms, p99 {:.1} ms", pct(&spans, 0.5), pct(&spans, 0.99)));
        rows.push((label, spans));
    }
    report.h3("Revocation → lost signal");
    report.line(format!(
        "{rounds} operator aborts of a held lock per row, lease {lease_ms} ms (heartbeat every {} ms), through the \
         Rust core. Clock: AbortTransaction sent → the transaction's lost signal fires.",
        lease_ms / 3
    ));
    report.line("");
    report.line("| client | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) |");
    report.line("|---|---|---|---|---|");
    for (label, v) in &rows {
        report.line(format!(
            "| {label} | {:.1} | {:.1} | **{:.1}** | {:.1} |",
            pct(v, 0.5),
            pct(v, 0.9),
            pct(v, 0.99),
            pct(v, 1.0)
        ));
    }
    report.line("");
    drop(cluster);
    Ok(())
}

/// `rounds` revocations, all in flight at once (each mostly waits); the spans in ms.
async fn measure(
    clients: &Arc<Vec<caerus_core::DlsClient>>,
    rounds: usize,
    lease_ms: u64,
    lost_stream: bool,
) -> anyhow::Result<Vec<f64>> {
    let done = Arc::new(AtomicUsize::new(0));
    let c = clients.clone();
    pool::for_each(rounds, rounds, done, move |i| {
        let (holder, operator) = (c[0].clone(), c[1 % c.len()].clone());
        async move {
            let opts = TransactionOptions::default().with_timeout_ms(lease_ms).with_lost_stream(lost_stream);
            let tx = holder.begin_transaction(opts).await?;
            let key = format!("revoke-{lost_stream}-{i}");
            tx.acquire_lock(NAMESPACE, &key, LockMode::Exclusive, AcquireOptions::default()).await?;
            let offset = rand::thread_rng().gen_range(0..lease_ms / 3);
            tokio::time::sleep(Duration::from_millis(offset)).await;
            let sent = Instant::now();
            operator.abort_transaction(tx.id(), "dls-state revoke").await?;
            tokio::time::timeout(Duration::from_millis(lease_ms), tx.lost()).await?;
            anyhow::Ok(sent.elapsed().as_secs_f64() * 1000.0)
        }
    })
    .await
}

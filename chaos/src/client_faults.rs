//! Faults of a client while it holds or awaits a lock, run through a stall-client
//! subprocess: frozen by SIGSTOP (`pause-client`, `pause-queued`) or cut off by the proxies
//! (`partition-client`) past its lease. The lock must go on to others, and the stalled
//! client's late write must be fenced off.

use std::time::{Duration, Instant};

use caerus_core::DlsClient;
use caerus_testkit::Cluster;
use rand::rngs::StdRng;
use rand::Rng;

use crate::checker::Violation;
use crate::fault::Fault;
use crate::history::Outcome;
use crate::report::{Figures, Stall};
use crate::stall::StallChild;
use crate::workload::{client_config, harness_acquire, harness_write_commit, key_name, Ctx, NS};

/// pause-client: a holder is SIGSTOPped past its lease, woken, writes with its old token.
pub async fn pause_client(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let h = &ctx.history;
    let key = key_name(rng.gen_range(0..ctx.keys));
    let p = figs.process();
    let mut child = StallChild::spawn(c, &c.listen_endpoints(), &key, ctx.lease_ms, p)?;
    let Some(txn) = child.begun(h, p).await else {
        h.log("  pause-client: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let acq = child.acquired(h, p, txn, &key, h.now_us(), Duration::from_secs(15)).await;
    if acq.outcome != Outcome::Ok {
        h.log(format!("  pause-client: no grant ({}), skipped", acq.error));
        let _ = child.write_and_commit(ctx, &acq, p, Fault::PauseClient).await?;
        return Ok(());
    }
    child.signal("STOP");
    let stopped_us = h.now_us();
    let pause = Duration::from_millis(ctx.lease_ms * 2 + 1000);
    h.log(format!(
        "  pause-client: txn {txn} holds {key} with token {}; SIGSTOP for {} ms",
        acq.token,
        pause.as_millis()
    ));
    tokio::time::sleep(pause).await;
    child.signal("CONT");
    figs.stalls.push(Stall { kind: "SIGSTOP of a holder", key: key.clone(), txn, stopped_us, probe_granted_us: None });
    child.write_and_commit(ctx, &acq, p, Fault::PauseClient).await?;
    Ok(())
}

/// pause-queued: a client queued behind a holder is SIGSTOPped past its lease; the holder
/// leaves, and the harness's next request for the key must be granted within a lease plus
/// an election of the stop — the frozen waiter must not keep (or be handed) the lock.
pub async fn pause_queued(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let h = &ctx.history;
    let key = key_name(rng.gen_range(0..ctx.keys));
    let client = DlsClient::connect(client_config(c.listen_endpoints())).await?;
    let pb = figs.process();
    let Some((blocker, bacq)) = harness_acquire(&client, ctx, pb, &key, Duration::from_secs(10)).await else {
        h.log("  pause-queued: the blocker got no grant, skipped");
        return Ok(());
    };
    let p = figs.process();
    let mut child = match StallChild::spawn(c, &c.listen_endpoints(), &key, ctx.lease_ms, p) {
        Ok(child) => child,
        Err(e) => {
            // End the blocker's transaction, or the terminal checker would count it unended.
            harness_write_commit(ctx, blocker, &bacq, pb).await;
            return Err(e);
        }
    };
    let Some(txn) = child.begun(h, p).await else {
        harness_write_commit(ctx, blocker, &bacq, pb).await;
        h.log("  pause-queued: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let invoke_us = h.now_us();
    // Wait until the server has queued it (else it would be paused before asking).
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut queued = false;
    while !queued && Instant::now() < deadline {
        if let Ok(keys) = client.list_locks(NS).await {
            queued = keys.iter().any(|k| k.key == key && k.waiters.iter().any(|w| w.transaction_id == txn));
        }
        if !queued {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    child.signal("STOP");
    let stopped_us = h.now_us();
    h.log(format!(
        "  pause-queued: txn {txn} {} behind txn {} on {key}; SIGSTOP, the holder commits",
        if queued { "queued" } else { "not seen queued" },
        bacq.txn
    ));
    harness_write_commit(ctx, blocker, &bacq, pb).await;
    let pp = figs.process();
    let bound = Duration::from_millis(ctx.lease_ms) + Duration::from_secs(10);
    let mut probe_granted_us = None;
    match harness_acquire(&client, ctx, pp, &key, bound).await {
        Some((tx, acq)) => {
            probe_granted_us = Some(acq.complete_us);
            h.log(format!(
                "  pause-queued: next grant of {key} {} ms after the SIGSTOP",
                (acq.complete_us - stopped_us) / 1000
            ));
            harness_write_commit(ctx, tx, &acq, pp).await;
        }
        None => figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "key {key}: a SIGSTOPped waiter (txn {txn}) blocked it for more than {} ms",
                bound.as_millis()
            ),
        }),
    }
    if queued {
        figs.stalls.push(Stall {
            kind: "SIGSTOP of a queued waiter",
            key: key.clone(),
            txn,
            stopped_us,
            probe_granted_us,
        });
    }
    let rest =
        Duration::from_millis(ctx.lease_ms * 2 + 1000).saturating_sub(Duration::from_micros(h.now_us() - stopped_us));
    tokio::time::sleep(rest).await;
    child.signal("CONT");
    let acq = child.acquired(h, p, txn, &key, invoke_us, Duration::from_secs(15)).await;
    h.log(format!("  pause-queued: woken, its acquire: {:?} {} token {}", acq.outcome, acq.error, acq.token));
    child.write_and_commit(ctx, &acq, p, Fault::PauseQueued).await?;
    Ok(())
}

/// partition-client: a holder that reaches the cluster only through the proxies is cut
/// off from every node past its lease (its heartbeats fail; it is not paused), then
/// healed. Meanwhile the harness takes the key and writes with the next token. The cut
/// client's late write with its old token must be rejected and its commit must fail: it
/// must learn that its transaction was lost.
pub async fn partition_client(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let key = key_name(rng.gen_range(0..ctx.keys));
    let p = figs.process();
    // Its connections through the proxies are told apart by its pid.
    let mut child = StallChild::spawn(c, &c.endpoints(), &key, ctx.lease_ms, p)?;
    partition_client_run(c, ctx, figs, &key, p, &mut child).await
}

async fn partition_client_run(
    c: &Cluster,
    ctx: &Ctx,
    figs: &mut Figures,
    key: &str,
    p: u64,
    child: &mut StallChild,
) -> anyhow::Result<()> {
    let h = &ctx.history;
    let Some(txn) = child.begun(h, p).await else {
        h.log("  partition-client: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let acq = child.acquired(h, p, txn, key, h.now_us(), Duration::from_secs(15)).await;
    if acq.outcome != Outcome::Ok {
        h.log(format!("  partition-client: no grant ({}), skipped", acq.error));
        child.write_and_commit(ctx, &acq, p, Fault::PartitionClient).await?;
        return Ok(());
    }
    for n in c.ids() {
        c.links().block(p, n);
    }
    let cut_us = h.now_us();
    let cut = Duration::from_millis(ctx.lease_ms * 2 + 1000);
    h.log(format!(
        "  partition-client: txn {txn} holds {key} with token {}; cut from every node for {} ms",
        acq.token,
        cut.as_millis()
    ));
    figs.stalls.push(Stall {
        kind: "client cut off holding",
        key: key.to_string(),
        txn,
        stopped_us: cut_us,
        probe_granted_us: None,
    });
    let client = DlsClient::connect(client_config(c.listen_endpoints())).await?;
    let pp = figs.process();
    let bound = Duration::from_millis(ctx.lease_ms) + Duration::from_secs(10);
    let mut fenced_by = None;
    match harness_acquire(&client, ctx, pp, key, bound).await {
        Some((tx, nacq)) => {
            h.log(format!(
                "  partition-client: next grant of {key} {} ms after the cut, token {}",
                (nacq.complete_us - cut_us) / 1000,
                nacq.token
            ));
            if harness_write_commit(ctx, tx, &nacq, pp).await {
                fenced_by = Some(nacq.token);
            }
        }
        None => figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "key {key}: a client cut off while holding it (txn {txn}) blocked it for more than {} ms",
                bound.as_millis()
            ),
        }),
    }
    let rest = cut.saturating_sub(Duration::from_micros(h.now_us() - cut_us));
    tokio::time::sleep(rest).await;
    c.links().heal();
    h.log("  partition-client: healed");
    let (wrote, commit) = child.write_and_commit(ctx, &acq, p, Fault::PartitionClient).await?;
    if let (Some(Outcome::Ok), Some(t)) = (wrote, fenced_by) {
        figs.extra_violations.push(Violation {
            checker: "fenced-register",
            message: format!(
                "key {key}: cut-off txn {txn}'s late write with token {} accepted after token {t} was written",
                acq.token
            ),
        });
    }
    if commit.outcome != Outcome::Fail {
        figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "txn {txn} was cut off past its lease and healed, yet its commit was {:?} {} (not lost)",
                commit.outcome, commit.error
            ),
        });
    }
    Ok(())
}

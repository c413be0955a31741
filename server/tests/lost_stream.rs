//! `stay_open` acquires (the lost stream): after the grant the stream stays open for the
//! life of the transaction and reports at once when the server ends it (operator abort,
//! deadlock victim, lease expiry, maximum duration), and ends quietly when the client ends
//! it or releases the lock. Against real `dls` processes, on one node and through a
//! follower of three.

use crate::common;

use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient};
use caerus_proto::v1 as pb;
use common::{raw_client, Cluster, PATIENCE};
use pb::acquire_lock_response::Event;
use pb::lock_service_client::LockServiceClient;
use tonic::transport::Channel;
use tonic::Streaming;

type Raw = LockServiceClient<Channel>;

/// How soon a `lost` must follow the end: far below any lease or heartbeat used here.
const PROMPTLY: Duration = Duration::from_secs(5);

async fn admin(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(PATIENCE))
        .await
        .unwrap()
}

async fn begin(raw: &mut Raw, lease_ms: i64, priority: i32, max_duration_ms: i64) -> u64 {
    let req = pb::BeginTransactionRequest { timeout_ms: lease_ms, priority, max_duration_ms, ..Default::default() };
    raw.begin_transaction(req).await.unwrap().into_inner().transaction_id
}

fn acquire(txn: u64, key: &str, stay_open: bool) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: key.into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 10_000,
        stay_open,
        ..Default::default()
    }
}

/// Opens an AcquireLock stream and reads it to its grant; returns the rest of the stream.
async fn granted(raw: &mut Raw, req: pb::AcquireLockRequest) -> Streaming<pb::AcquireLockResponse> {
    let mut stream = raw.acquire_lock(req).await.unwrap().into_inner();
    loop {
        let msg = stream.message().await.unwrap().expect("a grant before the end of the stream");
        if let Some(Event::Granted(_)) = msg.event {
            return stream;
        }
    }
}

/// What a granted stream says next: `Some(lost)`, or `None` when it ends quietly (OK).
/// Fails if it says nothing within PROMPTLY, or ends with an error.
async fn after_grant(stream: &mut Streaming<pb::AcquireLockResponse>) -> Option<pb::LockStreamLost> {
    let next = tokio::time::timeout(PROMPTLY, stream.message()).await.expect("the stream spoke promptly");
    match next.expect("no error status") {
        None => None,
        Some(pb::AcquireLockResponse { event: Some(Event::Lost(lost)), .. }) => {
            let end = tokio::time::timeout(PROMPTLY, stream.message()).await.expect("the stream ended after lost");
            assert!(matches!(end, Ok(None)), "lost is the last message: {end:?}");
            Some(lost)
        }
        Some(other) => panic!("unexpected message after the grant: {other:?}"),
    }
}

/// Nothing arrives on the stream for a while: it is still open, waiting.
async fn stays_quiet(stream: &mut Streaming<pb::AcquireLockResponse>, for_: Duration) {
    if let Ok(next) = tokio::time::timeout(for_, stream.message()).await {
        panic!("the stream should stay open and quiet, got {next:?}");
    }
}

fn cause(lost: &pb::LockStreamLost) -> pb::EndCause {
    pb::EndCause::try_from(lost.end_cause).unwrap()
}

/// An operator abort reaches a stay_open stream at once, with its cause, on `raw`'s node.
async fn operator_abort_is_reported(cluster: &Cluster, mut raw: Raw) {
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let mut stream = granted(&mut raw, acquire(txn, "op", true)).await;
    stays_quiet(&mut stream, Duration::from_millis(300)).await;
    let aborted_at = Instant::now();
    admin(cluster).await.abort_transaction(txn, "maintenance").await.unwrap();
    let lost = after_grant(&mut stream).await.expect("lost after an operator abort");
    assert_eq!(cause(&lost), pb::EndCause::OperatorAbort);
    assert_eq!(lost.transaction_id, txn);
    assert!(lost.message.contains("maintenance"), "{}", lost.message);
    // A 30 s lease: a heartbeat would have told in 10 s at the soonest.
    assert!(aborted_at.elapsed() < PROMPTLY, "{:?}", aborted_at.elapsed());
}

#[tokio::test]
async fn an_operator_abort_is_reported_at_once_on_one_node() {
    let cluster = Cluster::start(1).await;
    let raw = raw_client(&cluster.endpoints()[0]).await;
    operator_abort_is_reported(&cluster, raw).await;
}

#[tokio::test]
async fn an_operator_abort_is_reported_at_once_through_the_leader_and_a_follower_of_three() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    operator_abort_is_reported(&cluster, raw_client(&cluster.addr(leader)).await).await;
    // Relayed by the follower to the leader, the stream stays open just the same.
    operator_abort_is_reported(&cluster, raw_client(&cluster.addr(follower)).await).await;
}

#[tokio::test]
async fn lease_expiry_and_maximum_duration_are_reported_with_their_cause() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    // No heartbeats: the lease of 500 ms lapses.
    let txn = begin(&mut raw, 500, 0, 0).await;
    let mut stream = granted(&mut raw, acquire(txn, "lease", true)).await;
    assert_eq!(cause(&after_grant(&mut stream).await.expect("lost")), pb::EndCause::LeaseExpired);

    // A long lease, but a bound of 800 ms on the transaction's life.
    let txn = begin(&mut raw, 30_000, 0, 800).await;
    let mut stream = granted(&mut raw, acquire(txn, "bounded", true)).await;
    assert_eq!(cause(&after_grant(&mut stream).await.expect("lost")), pb::EndCause::MaxDurationExceeded);
}

#[tokio::test]
async fn a_deadlock_victim_is_told_on_the_stream_of_a_lock_it_held() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let survivor = begin(&mut raw, 30_000, 10, 0).await;
    let victim = begin(&mut raw, 30_000, 0, 0).await;
    let mut survivor_holds = granted(&mut raw, acquire(survivor, "a", true)).await;
    let mut victim_holds = granted(&mut raw, acquire(victim, "b", true)).await;
    // survivor waits for b, then victim for a: a cycle; the lower priority loses.
    let mut survivor_waits = raw.clone().acquire_lock(acquire(survivor, "b", false)).await.unwrap().into_inner();
    let victim_waits = raw.clone().acquire_lock(acquire(victim, "a", false)).await;
    if let Ok(response) = victim_waits {
        let mut s = response.into_inner();
        while let Ok(Some(_)) = s.message().await {}
    }
    let lost = after_grant(&mut victim_holds).await.expect("the victim's held lock reports the loss");
    assert_eq!(cause(&lost), pb::EndCause::DeadlockVictim);
    assert_eq!(lost.transaction_id, victim);
    // The survivor got b and its first stream says nothing.
    loop {
        let msg = survivor_waits.message().await.unwrap().expect("survivor granted b");
        if let Some(Event::Granted(_)) = msg.event {
            break;
        }
    }
    stays_quiet(&mut survivor_holds, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn commit_abort_and_release_end_the_stream_quietly() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    for commit in [true, false] {
        let txn = begin(&mut raw, 30_000, 0, 0).await;
        let mut stream = granted(&mut raw, acquire(txn, "end", true)).await;
        let end = pb::EndTransactionRequest { transaction_id: txn, commit, ..Default::default() };
        raw.end_transaction(end).await.unwrap();
        assert_eq!(after_grant(&mut stream).await, None, "commit={commit}: no lost, the stream ended");
    }
    // Releasing the lock ends its stream; the transaction goes on.
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let mut stream = granted(&mut raw, acquire(txn, "released", true)).await;
    let release = pb::ReleaseLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: "released".into(),
        ..Default::default()
    };
    assert!(raw.release_lock(release).await.unwrap().into_inner().released);
    assert_eq!(after_grant(&mut stream).await, None);
}

#[tokio::test]
async fn without_stay_open_the_stream_ends_after_the_grant() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let mut stream = granted(&mut raw, acquire(txn, "plain", false)).await;
    assert_eq!(after_grant(&mut stream).await, None);
}

#[tokio::test]
async fn a_one_shot_begin_and_acquire_stays_open_too() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let mut req = acquire(0, "one-shot", true);
    req.begin = Some(pb::BeginTransactionRequest { timeout_ms: 30_000, ..Default::default() });
    let mut stream = raw.acquire_lock(req).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let txn = first.begun.expect("the one-shot names its transaction").transaction_id;
    assert!(matches!(first.event, Some(Event::Granted(_))), "{first:?}");
    admin(&cluster).await.abort_transaction(txn, "one-shot revoked").await.unwrap();
    assert_eq!(cause(&after_grant(&mut stream).await.expect("lost")), pb::EndCause::OperatorAbort);
}

#[tokio::test]
async fn an_all_or_nothing_acquire_stays_open_too() {
    use pb::acquire_locks_response::Event as AllEvent;
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let locks = ["x", "y"].map(|k| pb::LockRequest {
        namespace: "ns".into(),
        key: k.into(),
        mode: pb::LockMode::Exclusive as i32,
    });
    let req = pb::AcquireLocksRequest {
        transaction_id: txn,
        locks: locks.to_vec(),
        timeout_ms: 10_000,
        stay_open: true,
        ..Default::default()
    };
    let mut stream = raw.acquire_locks(req).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(first.event, Some(AllEvent::Granted(_))), "{first:?}");
    admin(&cluster).await.abort_transaction(txn, "all revoked").await.unwrap();
    let next = tokio::time::timeout(PROMPTLY, stream.message()).await.unwrap().unwrap();
    match next {
        Some(pb::AcquireLocksResponse { event: Some(AllEvent::Lost(lost)) }) => {
            assert_eq!(cause(&lost), pb::EndCause::OperatorAbort)
        }
        other => panic!("expected lost, got {other:?}"),
    }
}

#[tokio::test]
async fn a_leader_change_ends_the_stream_with_an_error_not_lost() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    let mut raw = raw_client(&cluster.addr(follower)).await;
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let mut stream = granted(&mut raw, acquire(txn, "deposed", true)).await;
    cluster.kill(leader);
    let end = tokio::time::timeout(PATIENCE, stream.message()).await.expect("the stream ended");
    let status = end.expect_err("an error status, not OK and not lost");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
}

/// The Rust core with `lost_stream`: the lost signal fires as soon as the server ends the
/// transaction, long before the heartbeat (a third of a 30 s lease) would have told.
mod core_client {
    use caerus_core::{LockMode, LostKind, TransactionOptions};

    use super::*;

    fn opts(lost_stream: bool) -> TransactionOptions {
        TransactionOptions::default().with_timeout_ms(30_000).with_lost_stream(lost_stream)
    }

    async fn take(tx: &caerus_core::Transaction, key: &str) {
        tx.acquire_lock("ns", key, LockMode::Exclusive, common::wait(10_000)).await.unwrap();
    }

    #[tokio::test]
    async fn the_lost_signal_fires_before_the_heartbeat_would_tell() {
        let cluster = Cluster::start(1).await;
        let c = admin(&cluster).await;
        let streamed = c.begin_transaction(opts(true)).await.unwrap();
        let plain = c.begin_transaction(opts(false)).await.unwrap();
        take(&streamed, "streamed").await;
        take(&plain, "plain").await;
        c.abort_transaction(streamed.id(), "revoked").await.unwrap();
        c.abort_transaction(plain.id(), "revoked").await.unwrap();
        let reason = tokio::time::timeout(PROMPTLY, streamed.lost()).await.expect("signal from the stream");
        assert_eq!(reason.kind, LostKind::Aborted, "{reason}");
        assert!(reason.message.contains("revoked"), "{reason}");
        // The same abort, without the stream: not known yet; its heartbeat tells later.
        assert!(!plain.is_lost(), "the plain transaction learned first?");
        let reason = tokio::time::timeout(PATIENCE, plain.lost()).await.expect("signal from the heartbeat");
        assert_eq!(reason.kind, LostKind::Aborted, "{reason}");
    }

    #[tokio::test]
    async fn the_signal_carries_the_kind_of_end() {
        let cluster = Cluster::start(1).await;
        let c = admin(&cluster).await;
        // The one-shot path (a deferred transaction's first acquire) opens the stream too.
        let bounded = c.transaction(opts(true).with_max_duration_ms(800)).unwrap();
        take(&bounded, "bounded").await;
        let reason = tokio::time::timeout(PROMPTLY, bounded.lost()).await.expect("lost at its bound");
        assert_eq!(reason.kind, LostKind::Expired, "{reason}");

        let survivor = c.begin_transaction(opts(true).with_priority(10)).await.unwrap();
        let victim = c.begin_transaction(opts(true)).await.unwrap();
        take(&survivor, "a").await;
        take(&victim, "b").await;
        let waits = {
            let survivor = survivor.clone();
            tokio::spawn(
                async move { survivor.acquire_lock("ns", "b", LockMode::Exclusive, common::wait(10_000)).await },
            )
        };
        common::eventually_async(PATIENCE, "the survivor to wait for b", || async {
            let locks = c.list_locks("ns").await.ok()?;
            locks
                .iter()
                .any(|l| l.key == "b" && l.waiters.iter().any(|w| w.transaction_id == survivor.id()))
                .then_some(())
        })
        .await;
        // The victim's second acquire fails; its first one's stream is what this is about,
        // so the signal is checked separately from that error.
        let _ = victim.acquire_lock("ns", "a", LockMode::Exclusive, common::wait(10_000)).await;
        let reason = tokio::time::timeout(PROMPTLY, victim.lost()).await.expect("victim lost");
        assert_eq!(reason.kind, LostKind::DeadlockVictim, "{reason}");
        waits.await.unwrap().unwrap();
        assert!(!survivor.is_lost());
    }

    #[tokio::test]
    async fn commit_and_abort_fire_nothing() {
        let cluster = Cluster::start(1).await;
        let c = admin(&cluster).await;
        for commit in [true, false] {
            let tx = c.begin_transaction(opts(true)).await.unwrap();
            take(&tx, "k").await;
            take(&tx, "k2").await;
            if commit {
                tx.commit().await.unwrap();
            } else {
                tx.abort().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(tx.lost_reason(), None, "commit={commit}");
        }
    }

    #[tokio::test]
    async fn a_stream_broken_by_a_leader_change_fires_nothing_and_heartbeats_carry_on() {
        let mut cluster = Cluster::start(3).await;
        let leader = cluster.wait_for_leader(PATIENCE).await;
        let c = admin(&cluster).await;
        let tx = c.begin_transaction(opts(true).with_timeout_ms(6_000)).await.unwrap();
        take(&tx, "kept").await;
        cluster.kill(leader);
        let new_leader = cluster.wait_for_new_leader(leader, PATIENCE).await;
        // Two heartbeats renewed by the new leader: still held, still not lost.
        common::eventually(PATIENCE, "two lease renewals on the new leader", || {
            assert!(!tx.is_lost(), "{:?}", tx.lost_reason());
            (cluster.metric_now(new_leader, "dls_heartbeat_renewals_total")? >= 2.0).then_some(())
        })
        .await;
        assert!(!tx.is_lost(), "{:?}", tx.lost_reason());
        // The next acquire opens a new stream, which hears the next end at once.
        take(&tx, "again").await;
        c.abort_transaction(tx.id(), "after the election").await.unwrap();
        let reason = tokio::time::timeout(PROMPTLY, tx.lost()).await.expect("lost from the new stream");
        assert_eq!(reason.kind, LostKind::Aborted, "{reason}");
    }
}

#[tokio::test]
async fn a_transaction_keeps_a_bounded_number_of_streams_open() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let txn = begin(&mut raw, 30_000, 0, 0).await;
    let mut open = Vec::new();
    for i in 0..16 {
        open.push(granted(&mut raw, acquire(txn, &format!("capped-{i}"), true)).await);
    }
    // The 17th ends after its grant, as without stay_open.
    let mut extra = granted(&mut raw, acquire(txn, "capped-extra", true)).await;
    assert_eq!(after_grant(&mut extra).await, None);
    // Closing one frees a place, once the server has seen it close: until then a new
    // stream still ends after its grant (each try takes another key).
    drop(open.pop());
    let mut tries = 0;
    let mut again = common::eventually_async(PATIENCE, "a freed place: a new stream that stays open", || {
        tries += 1;
        let mut raw = raw.clone();
        async move {
            let mut stream = granted(&mut raw, acquire(txn, &format!("capped-again-{tries}"), true)).await;
            match tokio::time::timeout(Duration::from_millis(300), stream.message()).await {
                Err(_) => Some(stream),
                Ok(Ok(None)) => None,
                Ok(other) => panic!("a capped stream ends quietly after its grant, got {other:?}"),
            }
        }
    })
    .await;
    admin(&cluster).await.abort_transaction(txn, "capped").await.unwrap();
    for stream in open.iter_mut().chain([&mut again]) {
        assert_eq!(cause(&after_grant(stream).await.expect("lost")), pb::EndCause::OperatorAbort);
    }
}

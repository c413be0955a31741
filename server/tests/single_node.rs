//! Lock semantics end to end on a real single-node server, through the Rust core client.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, EndCause, Error, LockMode, LostKind, TransactionState};
use caerus_proto::v1 as pb;
use common::{eventually, eventually_async, opts, raw_client, wait, Cluster, PATIENCE};
use tokio::sync::mpsc;

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap()
}

/// Starts an acquire in the background; its queue positions arrive on the channel and
/// the final result on the join handle.
fn acquire_in_background(
    tx: &caerus_core::Transaction,
    key: &'static str,
    mode: LockMode,
) -> (mpsc::UnboundedReceiver<u32>, tokio::task::JoinHandle<Result<caerus_core::Lock, Error>>) {
    acquire_waiting(tx, key, mode, 20_000)
}

/// An acquire that would wait far longer than any test: only a withdrawal ends it early.
fn wait_for_ever(
    tx: &caerus_core::Transaction,
    key: &'static str,
    mode: LockMode,
) -> (mpsc::UnboundedReceiver<u32>, tokio::task::JoinHandle<Result<caerus_core::Lock, Error>>) {
    acquire_waiting(tx, key, mode, 3_600_000)
}

fn acquire_waiting(
    tx: &caerus_core::Transaction,
    key: &'static str,
    mode: LockMode,
    wait_ms: u64,
) -> (mpsc::UnboundedReceiver<u32>, tokio::task::JoinHandle<Result<caerus_core::Lock, Error>>) {
    let (pos_tx, pos_rx) = mpsc::unbounded_channel();
    let tx = tx.clone();
    let handle = tokio::spawn(async move {
        tx.acquire_lock_with_progress("ns", key, mode, wait(wait_ms), move |q| {
            let _ = pos_tx.send(q.position);
        })
        .await
    });
    (pos_rx, handle)
}

#[tokio::test]
async fn exclusive_excludes_until_released_and_the_next_token_is_higher() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let a = c.begin_transaction(opts(10_000)).await.unwrap();
    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    let la = a.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await.unwrap();
    let (mut positions, pending) = acquire_in_background(&b, "k", LockMode::Exclusive);
    assert_eq!(positions.recv().await, Some(1), "b must be told it is queued first in line");
    assert!(!pending.is_finished());
    let st = b.status().await.unwrap();
    assert_eq!(st.waiting.as_ref().map(|w| w.position), Some(1));
    assert!(a.release("ns", "k").await.unwrap());
    let lb = pending.await.unwrap().unwrap();
    assert!(lb.fencing_token > la.fencing_token);
    assert_eq!(b.status().await.unwrap().locks, vec![lb]);
    a.commit().await.unwrap();
    b.commit().await.unwrap();
}

#[tokio::test]
async fn shared_readers_coexist_and_block_a_writer_and_later_readers_queue_behind_it() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let r1 = c.begin_transaction(opts(10_000)).await.unwrap();
    let r2 = c.begin_transaction(opts(10_000)).await.unwrap();
    let w = c.begin_transaction(opts(10_000)).await.unwrap();
    let r3 = c.begin_transaction(opts(10_000)).await.unwrap();
    let t1 = r1.acquire_lock("ns", "doc", LockMode::SharedRead, wait(1000)).await.unwrap();
    let t2 = r2.acquire_lock("ns", "doc", LockMode::SharedRead, wait(1000)).await.unwrap();
    assert_ne!(t1.fencing_token, t2.fencing_token);

    let (mut wpos, writer) = acquire_in_background(&w, "doc", LockMode::Exclusive);
    assert_eq!(wpos.recv().await, Some(1));
    // A reader arriving behind the queued writer does not overtake it.
    let (mut rpos, reader) = acquire_in_background(&r3, "doc", LockMode::SharedRead);
    assert_eq!(rpos.recv().await, Some(2));

    r1.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!writer.is_finished(), "the writer must wait for the second reader");
    r2.commit().await.unwrap();
    let wl = writer.await.unwrap().unwrap();
    assert_eq!(wl.mode, LockMode::Exclusive);
    assert_eq!(rpos.recv().await, Some(1), "the reader moves up once the writer holds");
    assert!(!reader.is_finished());
    w.commit().await.unwrap();
    let rl = reader.await.unwrap().unwrap();
    assert!(rl.fencing_token > wl.fencing_token);
    r3.commit().await.unwrap();
}

#[tokio::test]
async fn reentrant_acquire_returns_the_same_grant_and_upgrade_gets_a_new_token() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let first = t.acquire_lock("ns", "k", LockMode::SharedRead, wait(1000)).await.unwrap();
    let again = t.acquire_lock("ns", "k", LockMode::SharedRead, wait(1000)).await.unwrap();
    assert_eq!(first, again);
    let upgraded = t.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert_eq!(upgraded.mode, LockMode::Exclusive);
    assert!(upgraded.fencing_token > first.fencing_token);
    // Exclusive covers a later shared request: same grant.
    assert_eq!(t.acquire_lock("ns", "k", LockMode::SharedRead, wait(1000)).await.unwrap(), upgraded);
    t.commit().await.unwrap();
}

#[tokio::test]
async fn an_upgrade_waits_for_the_other_reader() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let a = c.begin_transaction(opts(10_000)).await.unwrap();
    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    a.acquire_lock("ns", "k", LockMode::SharedRead, wait(1000)).await.unwrap();
    b.acquire_lock("ns", "k", LockMode::SharedRead, wait(1000)).await.unwrap();
    let (mut pos, up) = acquire_in_background(&a, "k", LockMode::Exclusive);
    assert_eq!(pos.recv().await, Some(1));
    b.release("ns", "k").await.unwrap();
    assert_eq!(up.await.unwrap().unwrap().mode, LockMode::Exclusive);
    a.commit().await.unwrap();
    b.commit().await.unwrap();
}

#[tokio::test]
async fn acquire_timeout_ends_the_wait_but_keeps_the_transaction() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let a = c.begin_transaction(opts(10_000)).await.unwrap();
    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    a.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await.unwrap();
    let err = b.acquire_lock("ns", "k", LockMode::Exclusive, wait(200)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    let st = b.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert!(st.waiting.is_none(), "the timed-out wait must be gone from the queue");
    // The transaction can go on, and a's release does not hand the lock to the old wait.
    b.acquire_lock("ns", "other", LockMode::Exclusive, wait(1000)).await.unwrap();
    a.commit().await.unwrap();
    let st = b.status().await.unwrap();
    assert_eq!(st.locks.len(), 1);
    assert_eq!(st.locks[0].key, "other");
    b.commit().await.unwrap();
}

/// Who waits for `ns/key`, by the leader's table.
async fn waiters(c: &DlsClient, key: &str) -> Vec<(u64, bool)> {
    let locks = c.list_locks("ns").await.unwrap();
    let found = locks.into_iter().find(|k| k.key == key);
    found.map(|k| k.waiters.iter().map(|w| (w.transaction_id, w.upgrade)).collect()).unwrap_or_default()
}

#[tokio::test]
async fn a_dropped_acquire_is_withdrawn_and_never_granted_to_nobody() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let holder = c.begin_transaction(opts(10_000)).await.unwrap();
    holder.acquire_lock("ns", "dropped", LockMode::Exclusive, wait(1000)).await.unwrap();
    // A fresh wait, given up by dropping its future (as a cancelled task does).
    let waiter = c.begin_transaction(opts(10_000)).await.unwrap();
    let (mut pos, wait_task) = wait_for_ever(&waiter, "dropped", LockMode::Exclusive);
    assert_eq!(pos.recv().await, Some(1));
    assert_eq!(waiters(&c, "dropped").await, vec![(waiter.id(), false)]);
    wait_task.abort();
    eventually_async(PATIENCE, "the dropped wait leaves the queue", || async {
        waiters(&c, "dropped").await.is_empty().then_some(())
    })
    .await;
    // The holder lets go: the key is free, nobody got it, and the waiter's transaction
    // goes on holding nothing.
    holder.commit().await.unwrap();
    let st = waiter.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert!(st.locks.is_empty() && st.waiting.is_none(), "{st:?}");
    assert!(c.list_locks("ns").await.unwrap().iter().all(|k| k.key != "dropped"), "the key is free");
    // A later acquire of the same key by the same transaction is not taken back.
    let lock = waiter.acquire_lock("ns", "dropped", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert_eq!(waiter.status().await.unwrap().locks[0].fencing_token, lock.fencing_token);
    waiter.commit().await.unwrap();
}

#[tokio::test]
async fn a_dropped_upgrade_is_withdrawn_and_keeps_the_shared_hold() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let a = c.begin_transaction(opts(10_000)).await.unwrap();
    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    let shared = a.acquire_lock("ns", "up", LockMode::SharedRead, wait(1000)).await.unwrap();
    b.acquire_lock("ns", "up", LockMode::SharedRead, wait(1000)).await.unwrap();
    let (mut pos, up) = wait_for_ever(&a, "up", LockMode::Exclusive);
    assert_eq!(pos.recv().await, Some(1));
    assert_eq!(waiters(&c, "up").await, vec![(a.id(), true)]);
    up.abort();
    eventually_async(PATIENCE, "the dropped upgrade leaves the queue", || async {
        waiters(&c, "up").await.is_empty().then_some(())
    })
    .await;
    b.commit().await.unwrap();
    let st = a.status().await.unwrap();
    assert_eq!(st.locks.len(), 1, "{st:?}");
    assert_eq!((st.locks[0].mode, st.locks[0].fencing_token), (LockMode::SharedRead, shared.fencing_token));
    a.commit().await.unwrap();
}

#[tokio::test]
async fn cancel_wait_names_a_request_of_an_active_transaction() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.addr(1)).await;
    let begun = raw.begin_transaction(pb::BeginTransactionRequest { timeout_ms: 10_000, ..Default::default() }).await;
    let txn = begun.unwrap().into_inner().transaction_id;
    let err = raw.cancel_wait(pb::CancelWaitRequest { transaction_id: txn, request_id: String::new() }).await;
    assert_eq!(err.unwrap_err().code(), tonic::Code::InvalidArgument);
    let err = raw.cancel_wait(pb::CancelWaitRequest { transaction_id: txn + 100, request_id: "r1".into() }).await;
    assert_eq!(err.unwrap_err().code(), tonic::Code::NotFound);
    // A request it never made: nothing waits, nothing was granted.
    let answer = raw.cancel_wait(pb::CancelWaitRequest { transaction_id: txn, request_id: "r1".into() }).await;
    assert_eq!(answer.unwrap().into_inner(), pb::CancelWaitResponse { cancelled: false, granted: false });
}

#[tokio::test]
async fn an_expired_lease_frees_the_locks_for_the_next_waiter() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    // A transaction without heartbeats: begun through the raw API.
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let silent = raw
        .begin_transaction(pb::BeginTransactionRequest {
            timeout_ms: 300,
            priority: 0,
            name: "silent".into(),
            request_id: String::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .transaction_id;
    let mut stream = raw
        .acquire_lock(pb::AcquireLockRequest {
            transaction_id: silent,
            namespace: "ns".into(),
            key: "k".into(),
            mode: pb::LockMode::Exclusive as i32,
            timeout_ms: 1000,
            request_id: "s1".into(),
            begin: None,
            stay_open: false,
            permits: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let silent_token = match stream.message().await.unwrap().unwrap().event {
        Some(pb::acquire_lock_response::Event::Granted(g)) => g.fencing_token,
        e => panic!("{e:?}"),
    };

    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    let lb = b.acquire_lock("ns", "k", LockMode::Exclusive, wait(5_000)).await.unwrap();
    assert!(lb.fencing_token > silent_token);
    let st = c.transaction_status(silent).await.unwrap();
    assert_eq!(st.state, TransactionState::Expired);
    assert_eq!(st.end_cause, Some(EndCause::LeaseExpired));
    assert!(st.locks.is_empty());
    assert!(st.end_reason.contains("lease"), "{}", st.end_reason);

    // The expired transaction's calls say what ended it as data, singly and in a batch.
    let refused = raw.heartbeat(pb::HeartbeatRequest { transaction_id: silent, more_transaction_ids: vec![] }).await;
    let detail = caerus_proto::error_detail(&refused.unwrap_err()).expect("an error detail");
    assert_eq!(detail.kind, pb::ErrorKind::TransactionLost as i32);
    assert_eq!((detail.transaction_id, detail.end_cause), (silent, pb::EndCause::LeaseExpired as i32));
    let batch = raw
        .heartbeat(pb::HeartbeatRequest { transaction_id: 0, more_transaction_ids: vec![silent] })
        .await
        .unwrap()
        .into_inner();
    let detail = batch.results[0].error.clone().expect("the result's error detail");
    assert_eq!(
        (detail.kind, detail.end_cause),
        (pb::ErrorKind::TransactionLost as i32, pb::EndCause::LeaseExpired as i32)
    );
    b.commit().await.unwrap();
}

#[tokio::test]
async fn a_heartbeating_transaction_outlives_many_lease_periods() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    // The shortest lease whose heartbeats (every third of it) a loaded two-core machine still
    // sends in time; what is asserted is that the server renewed it across lease periods.
    const LEASE: Duration = Duration::from_millis(1_000);
    let t = c.begin_transaction(opts(LEASE.as_millis() as u64)).await.unwrap();
    let lock = t.acquire_lock("ns", "long", LockMode::Exclusive, wait(1000)).await.unwrap();
    let (started, renewed) = (Instant::now(), cluster.metric(1, "dls_heartbeat_renewals_total"));
    eventually(PATIENCE, "four lease periods with a renewal every period", || {
        assert!(!t.is_lost(), "lost after {:?}: {:?}", started.elapsed(), t.lost_reason());
        let renewals = cluster.metric(1, "dls_heartbeat_renewals_total") - renewed;
        (started.elapsed() >= 4 * LEASE && renewals >= 4.0).then_some(())
    })
    .await;
    let st = t.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert_eq!(st.locks, vec![lock]);
    t.commit().await.unwrap();
}

#[tokio::test]
async fn with_transaction_commits_on_ok_and_aborts_on_error() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let committed_id = c
        .with_transaction(opts(5_000), |tx| async move {
            tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await?;
            Ok::<_, Error>(tx.id())
        })
        .await
        .unwrap();
    assert_eq!(c.transaction_status(committed_id).await.unwrap().state, TransactionState::Committed);

    let seen = Arc::new(std::sync::Mutex::new(0u64));
    let seen2 = seen.clone();
    let err = c
        .with_transaction(opts(5_000), |tx| async move {
            tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await?;
            // Known once the first call (here the acquire) has begun the transaction.
            *seen2.lock().unwrap() = tx.id();
            Err::<(), _>(Error::Internal { message: "business failure".into() })
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("business failure"));
    let id = *seen.lock().unwrap();
    let st = c.transaction_status(id).await.unwrap();
    assert_eq!(st.state, TransactionState::Aborted);
    assert!(st.locks.is_empty(), "an aborted transaction releases its locks");
}

#[tokio::test]
async fn a_transaction_aborted_elsewhere_is_reported_lost_and_its_body_cancelled() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let (id_tx, mut id_rx) = mpsc::unbounded_channel();
    let run = tokio::spawn({
        let c = c.clone();
        async move {
            c.with_transaction(opts(600), |tx| async move {
                tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(1000)).await?;
                id_tx.send(tx.id()).unwrap();
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, Error>(())
            })
            .await
        }
    });
    let id = id_rx.recv().await.unwrap();
    // An operator aborts it through the raw API.
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    raw.end_transaction(pb::EndTransactionRequest { transaction_id: id, commit: false, request_id: String::new() })
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), run).await.expect("body must be cancelled").unwrap();
    assert!(matches!(result, Err(Error::TransactionLost { .. })), "{result:?}");

    // The lost signal on a manual transaction too.
    let t = c.begin_transaction(opts(600)).await.unwrap();
    raw.end_transaction(pb::EndTransactionRequest { transaction_id: t.id(), commit: false, request_id: String::new() })
        .await
        .unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), t.lost()).await.expect("lost must fire");
    assert_eq!(reason.kind, LostKind::Aborted, "{reason:?}");
}

#[tokio::test]
async fn retries_with_the_same_request_id_get_the_first_answer() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let begin = pb::BeginTransactionRequest {
        timeout_ms: 10_000,
        priority: 0,
        name: String::new(),
        request_id: "begin-1".into(),
        ..Default::default()
    };
    let t1 = raw.begin_transaction(begin.clone()).await.unwrap().into_inner().transaction_id;
    let t2 = raw.begin_transaction(begin).await.unwrap().into_inner().transaction_id;
    assert_eq!(t1, t2, "a retried begin must not start a second transaction");

    let acquire = pb::AcquireLockRequest {
        transaction_id: t1,
        namespace: "ns".into(),
        key: "k".into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 1000,
        request_id: "acq-1".into(),
        begin: None,
        stay_open: false,
        permits: 0,
    };
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let mut s = raw.acquire_lock(acquire.clone()).await.unwrap().into_inner();
        match s.message().await.unwrap().unwrap().event {
            Some(pb::acquire_lock_response::Event::Granted(g)) => tokens.push(g.fencing_token),
            e => panic!("{e:?}"),
        }
    }
    assert!(tokens.windows(2).all(|w| w[0] == w[1]), "retries must return one token: {tokens:?}");

    let release = pb::ReleaseLockRequest {
        transaction_id: t1,
        namespace: "ns".into(),
        key: "k".into(),
        request_id: "rel-1".into(),
    };
    assert!(raw.release_lock(release.clone()).await.unwrap().into_inner().released);
    assert!(raw.release_lock(release).await.unwrap().into_inner().released, "a retried release answers as the first");

    // After all the retries, the next grant is only one token further.
    let t3 = raw
        .begin_transaction(pb::BeginTransactionRequest {
            timeout_ms: 10_000,
            priority: 0,
            name: String::new(),
            request_id: String::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .transaction_id;
    let mut s = raw
        .acquire_lock(pb::AcquireLockRequest { transaction_id: t3, request_id: "acq-2".into(), ..acquire })
        .await
        .unwrap()
        .into_inner();
    match s.message().await.unwrap().unwrap().event {
        Some(pb::acquire_lock_response::Event::Granted(g)) => assert_eq!(g.fencing_token, tokens[0] + 1),
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn re_attaching_to_a_grant_after_the_transaction_ended_is_transaction_lost() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    for commit in [true, false] {
        let tx = c.begin_transaction(opts(10_000)).await.unwrap();
        let acquire = pb::AcquireLockRequest {
            transaction_id: tx.id(),
            namespace: "ns".into(),
            key: "reattach".into(),
            mode: pb::LockMode::Exclusive as i32,
            timeout_ms: 1000,
            request_id: "acq-1".into(),
            begin: None,
            stay_open: false,
            permits: 0,
        };
        let mut s = raw.acquire_lock(acquire.clone()).await.unwrap().into_inner();
        assert!(matches!(
            s.message().await.unwrap().unwrap().event,
            Some(pb::acquire_lock_response::Event::Granted(_))
        ));
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.abort().await.unwrap();
        }
        // The old grant would tell the client it holds a lock that was released.
        let status = match raw.acquire_lock(acquire).await {
            Err(s) => s,
            Ok(r) => r.into_inner().message().await.expect_err("the re-attach must fail"),
        };
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
        assert_eq!(status.metadata().get("x-dls-error").unwrap(), "TRANSACTION_LOST", "{status:?}");
        assert!(status.message().contains(if commit { "COMMITTED" } else { "ABORTED" }), "{status:?}");
    }
}

#[tokio::test]
async fn heartbeats_racing_an_end_are_refused_once_the_end_is_applied() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let addr = cluster.endpoints()[0].clone();
    for _ in 0..20 {
        let tx = c.begin_transaction(opts(500)).await.unwrap();
        let id = tx.id();
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Heartbeats in a tight loop while the transaction commits.
        let beats = {
            let (ended, addr) = (ended.clone(), addr.clone());
            tokio::spawn(async move {
                let mut raw = raw_client(&addr).await;
                loop {
                    let after_end = ended.load(std::sync::atomic::Ordering::SeqCst);
                    let r = raw.heartbeat(pb::HeartbeatRequest { transaction_id: id, ..Default::default() }).await;
                    match r {
                        Ok(_) => assert!(!after_end, "a heartbeat sent after the end was acknowledged"),
                        Err(s) => {
                            assert_eq!(s.metadata().get("x-dls-error").unwrap(), "TRANSACTION_LOST", "{s:?}");
                            return;
                        }
                    }
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        tx.commit().await.unwrap();
        ended.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(10), beats).await.expect("heartbeats ended").unwrap();
    }
}

#[tokio::test]
async fn a_restarted_node_keeps_transactions_grants_and_the_token_counter() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "20"]).await;
    let c = client(&cluster).await;
    let holder = c.begin_transaction(opts(10_000)).await.unwrap();
    // Enough grants to cross a snapshot and a log purge.
    let mut last = 0;
    for i in 0..30 {
        let t = c.begin_transaction(opts(10_000)).await.unwrap();
        let l = t.acquire_lock("ns", &format!("k{i}"), LockMode::Exclusive, wait(1000)).await.unwrap();
        assert!(l.fencing_token > last);
        last = l.fencing_token;
        t.commit().await.unwrap();
    }
    let held = holder.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();

    cluster.restart(1); // SIGKILL, then start again on the same data directory
    cluster.wait_for_leader(Duration::from_secs(20)).await;

    // The transaction, its grant and token are intact; its heartbeat carries on.
    common::assert_kept_across_restart(&c, &holder, &held).await;
}

#[tokio::test]
async fn tokens_strictly_increase_under_concurrent_contention_with_no_overlap() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (c, inside, tokens) = (c.clone(), inside.clone(), tokens.clone());
        workers.push(tokio::spawn(async move {
            for _ in 0..5 {
                c.with_transaction(opts(5_000), |tx| {
                    let (inside, tokens) = (inside.clone(), tokens.clone());
                    async move {
                        let l = tx.acquire_lock("ns", "hot", LockMode::Exclusive, wait(20_000)).await?;
                        assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0, "two holders at once");
                        tokens.lock().unwrap().push(l.fencing_token);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        Ok::<_, Error>(())
                    }
                })
                .await
                .unwrap();
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 40);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "grant order must follow token order: {tokens:?}");
}

#[tokio::test]
async fn a_waiter_far_back_is_told_each_new_position_as_the_queue_moves_and_then_its_grant() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let holder = c.begin_transaction(opts(20_000)).await.unwrap();
    holder.acquire_lock("ns", "busy", LockMode::Exclusive, wait(1000)).await.unwrap();
    // Three waiters ahead, each queued before the next starts.
    let mut ahead = Vec::new();
    for _ in 0..3 {
        let t = c.begin_transaction(opts(20_000)).await.unwrap();
        let (mut pos, pending) = acquire_in_background(&t, "busy", LockMode::Exclusive);
        pos.recv().await.expect("queued");
        ahead.push((t, pending));
    }
    let last = c.begin_transaction(opts(20_000)).await.unwrap();
    let (mut positions, pending) = acquire_in_background(&last, "busy", LockMode::Exclusive);
    assert_eq!(positions.recv().await, Some(4), "the first message comes at once, with the position");

    // Each commit hands the lock to the next waiter, which keeps it until the last waiter
    // has been told its new place (moves are coalesced, never dropped).
    let mut releasing = holder;
    for (expected, (t, p)) in (1..=3).rev().zip(ahead) {
        releasing.commit().await.unwrap();
        p.await.unwrap().unwrap();
        let told = tokio::time::timeout(common::PATIENCE, positions.recv()).await.expect("a new position");
        assert_eq!(told, Some(expected));
        releasing = t;
    }
    releasing.commit().await.unwrap();
    let granted = pending.await.unwrap().unwrap();
    assert_eq!(last.status().await.unwrap().locks, vec![granted]);
    last.commit().await.unwrap();
}

/// Kills the `dls serve` it holds when the test ends, passed or not.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Port 0 in --listen and --http-listen: the node binds free ports and names them in
/// --ports-file, and that is where it serves (no port picked by the caller first, which
/// another process could take before the node binds it). The membership names the bound
/// client port, not port 0: clients and leader redirects are told it.
#[tokio::test]
async fn port_zero_binds_free_ports_and_the_ports_file_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ports.json");
    let log = std::fs::File::create(dir.path().join("dls.log")).unwrap();
    let _node = Serving(
        std::process::Command::new(common::dls_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--ports-file"])
            .arg(&file)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let text = eventually(PATIENCE, "the ports file", || std::fs::read_to_string(&file).ok()).await;
    let ports: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (client, http) = (ports["client"].as_str().unwrap(), ports["http"].as_str().unwrap());
    for addr in [client, http] {
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{text}");
    }
    assert!(ports["peer"].is_null(), "a single node opens no peer port: {text}");

    let c = eventually_async(PATIENCE, "a client of the bound port", || async {
        DlsClient::connect(ClientConfig::new(vec![client.to_string()]).without_api_key()).await.ok()
    })
    .await;
    let tx = c.begin_transaction(opts(10_000)).await.unwrap();
    assert!(tx.acquire_lock("ports", "k", LockMode::Exclusive, wait(5_000)).await.unwrap().fencing_token > 0);
    tx.commit().await.unwrap();

    let (status, body) = common::http_get(http, "/api/v1/cluster").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(client), "the membership names the bound client port: {body}");
}

/// The kit's bound ports (what `dls-cluster` starts the SDK suites' single nodes with): a
/// restarted node comes back on the ports it bound first, so its clients find it again.
#[tokio::test]
async fn a_node_on_bound_ports_restarts_on_the_same_ports() {
    let mut c = Cluster::start_spec(common::Spec { bound_ports: true, ..Default::default() }).await;
    let (addr, http) = (c.addr(1), c.http_addr(1));
    assert!(!addr.ends_with(":0") && !http.ends_with(":0"), "{addr} {http}");
    let before = client(&c).await;
    let tx = before.begin_transaction(opts(10_000)).await.unwrap();
    let first = tx.acquire_lock("ports", "k", LockMode::Exclusive, wait(5_000)).await.unwrap().fencing_token;
    tx.commit().await.unwrap();
    c.restart(1);
    assert_eq!((c.addr(1), c.http_addr(1)), (addr, http));
    c.wait_for_leader(PATIENCE).await;
    let after = client(&c).await;
    let tx = after.begin_transaction(opts(10_000)).await.unwrap();
    assert!(tx.acquire_lock("ports", "k", LockMode::Exclusive, wait(5_000)).await.unwrap().fencing_token > first);
    tx.commit().await.unwrap();
}

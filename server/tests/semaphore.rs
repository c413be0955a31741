//! Counted semaphores (mode SEMAPHORE with `permits`): up to N holders, each with its own
//! token, FIFO; mixing with lock modes is INVALID_ARGUMENT; deadlocks through permits are
//! broken (and cycles with a way out are not); permits survive a leader change and a restart
//! from a snapshot file.

use crate::common;

use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, Transaction};
use caerus_proto::v1 as pb;
use common::{opts, patient_client, raw_client, wait, Cluster, PATIENCE};

/// Takes a permit of `ns/key` (of `permits`), granted within a second.
async fn permit(tx: &Transaction, key: &str, permits: u32) -> caerus_core::Lock {
    tx.acquire_permit("ns", key, permits, wait(1_000)).await.unwrap()
}

/// Starts a permit request in the background and returns once the server queued it.
async fn queued_permit(
    tx: &Transaction,
    key: &'static str,
    permits: u32,
) -> tokio::task::JoinHandle<Result<caerus_core::Lock, Error>> {
    let (seen, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let tx = tx.clone();
    let wait = tokio::spawn(async move {
        tx.acquire_permit_with_progress("ns", key, permits, wait(60_000), move |q| {
            let _ = seen.send(q.position);
        })
        .await
    });
    tokio::time::timeout(PATIENCE, queued.recv()).await.expect("queued in time").expect("queued, not ended");
    wait
}

fn invalid(result: Result<caerus_core::Lock, Error>, words: &str) {
    match result {
        Err(e @ Error::InvalidArgument { .. }) => assert!(e.message().contains(words), "{e} should say {words:?}"),
        other => panic!("expected INVALID_ARGUMENT saying {words:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_semaphore_admits_its_count_in_fifo_order_and_refuses_mixing() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let txs: Vec<Transaction> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(c.begin_transaction(opts(30_000)).await.unwrap());
        }
        v
    };
    let (a, b) = (permit(&txs[0], "s", 2).await, permit(&txs[1], "s", 2).await);
    assert_eq!((a.mode, b.mode), (LockMode::Semaphore, LockMode::Semaphore));
    assert!(b.fencing_token > a.fencing_token, "each permit has its own token");
    let third = queued_permit(&txs[2], "s", 2).await;
    let refused = txs[3].acquire_permit("ns", "s", 2, AcquireOptions::default().with_timeout_ms(0)).await;
    assert!(matches!(refused, Err(Error::LockTimeout { .. })), "no permit left: {refused:?}");
    let listed = c.list_locks("ns").await.unwrap();
    assert_eq!((listed[0].permits, listed[0].holders.len(), listed[0].waiters.len()), (2, 2, 1));
    assert_eq!(listed[0].waiters[0].blocking_transaction_ids, vec![txs[0].id(), txs[1].id()]);

    // Mixing, each answered INVALID_ARGUMENT (a try-lock too, not "locked").
    let x = txs[3].acquire_lock("ns", "s", LockMode::Exclusive, wait(1_000)).await;
    invalid(x, "is a semaphore with 2 permits");
    let x = txs[3].acquire_lock("ns", "s", LockMode::SharedRead, AcquireOptions::default().with_timeout_ms(0)).await;
    invalid(x, "is a semaphore with 2 permits");
    invalid(txs[3].acquire_permit("ns", "s", 3, wait(1_000)).await, "declares 3");
    txs[3].acquire_lock("ns", "plain", LockMode::Exclusive, wait(1_000)).await.unwrap();
    invalid(
        txs[1].acquire_permit("ns", "plain", 2, AcquireOptions::default().with_timeout_ms(0)).await,
        "in use as a lock",
    );

    assert!(txs[0].release("ns", "s").await.unwrap());
    let got = tokio::time::timeout(PATIENCE, third).await.unwrap().unwrap().unwrap();
    assert!(got.fencing_token > b.fencing_token);
    assert_eq!(txs[2].acquire_permit("ns", "s", 2, wait(1_000)).await.unwrap(), got, "re-entrant");

    // A deferred transaction begins first, then takes its permit.
    let deferred = c.transaction(opts(30_000)).unwrap();
    let p = deferred.acquire_permit("ns", "s2", 3, wait(1_000)).await.unwrap();
    assert_eq!(p.mode, LockMode::Semaphore);
    assert!(deferred.id() > 0, "the transaction began for its permit");
}

#[tokio::test]
async fn bad_semaphore_requests_are_invalid_argument_at_the_edge() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let begin = pb::BeginTransactionRequest { timeout_ms: 30_000, ..Default::default() };
    let txn = raw.begin_transaction(begin.clone()).await.unwrap().into_inner().transaction_id;
    let req = |mode: pb::LockMode, permits: u32| pb::AcquireLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: "s".into(),
        mode: mode as i32,
        timeout_ms: 1_000,
        permits,
        ..Default::default()
    };
    for (r, words) in [
        (req(pb::LockMode::Semaphore, 0), "permits"),
        (req(pb::LockMode::Semaphore, 100_001), "permits"),
        (req(pb::LockMode::Exclusive, 2), "only for mode SEMAPHORE"),
        (
            pb::AcquireLockRequest { transaction_id: 0, begin: Some(begin.clone()), ..req(pb::LockMode::Semaphore, 2) },
            "existing transaction",
        ),
    ] {
        let status = match raw.acquire_lock(r).await {
            Err(s) => s,
            Ok(resp) => resp.into_inner().message().await.expect_err("refused"),
        };
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(words), "{status:?} should say {words:?}");
    }
    let all = pb::AcquireLocksRequest {
        transaction_id: txn,
        locks: vec![pb::LockRequest { namespace: "ns".into(), key: "s".into(), mode: pb::LockMode::Semaphore as i32 }],
        timeout_ms: 1_000,
        ..Default::default()
    };
    let status = match raw.acquire_locks(all).await {
        Err(s) => s,
        Ok(resp) => resp.into_inner().message().await.expect_err("refused"),
    };
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("one key at a time"), "{status:?}");
}

#[tokio::test]
async fn a_deadlock_through_permits_aborts_a_victim_and_a_way_out_is_not_one() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let begin = |p: i32| c.begin_transaction(opts(30_000).with_priority(p));
    let (a, b, t) = (begin(5).await.unwrap(), begin(5).await.unwrap(), begin(1).await.unwrap());
    permit(&a, "s", 2).await;
    permit(&b, "s", 2).await;
    t.acquire_lock("ns", "l1", LockMode::Exclusive, wait(1_000)).await.unwrap();
    t.acquire_lock("ns", "l2", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let a_waits = common::queued(&a, "l1").await;
    // t waits for a permit while b can still leave: a cycle t -> a -> t, but no deadlock.
    let t_waits = queued_permit(&t, "s", 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!t_waits.is_finished(), "t still waits, nobody was aborted");
    // b now waits for t too: no way out is left, and t (lowest priority) is the victim.
    // (in the very write that queues b, so b is granted l2 at once)
    let b_lock = b.acquire_lock("ns", "l2", LockMode::Exclusive, wait(10_000)).await.unwrap();
    let err = tokio::time::timeout(PATIENCE, t_waits).await.unwrap().unwrap().unwrap_err();
    assert!(matches!(err, Error::DeadlockVictim { .. }), "{err:?}");
    tokio::time::timeout(PATIENCE, a_waits).await.unwrap().unwrap().unwrap();
    assert!(b_lock.fencing_token > 0);
}

#[tokio::test]
async fn permits_survive_a_leader_change_and_a_restart_from_a_snapshot() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "10"]).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let c = patient_client(cluster.endpoints()).await;
    let (a, b, w) = (
        c.begin_transaction(opts(30_000)).await.unwrap(),
        c.begin_transaction(opts(30_000)).await.unwrap(),
        c.begin_transaction(opts(30_000)).await.unwrap(),
    );
    permit(&a, "s", 2).await;
    let held = permit(&b, "s", 2).await;
    // Enough entries that the followers' snapshots hold the semaphore.
    common::grant_many(&c, "k", 25, 0).await;
    cluster.kill(leader);
    cluster.wait_for_new_leader(leader, Duration::from_secs(20)).await;
    invalid(w.acquire_lock("ns", "s", LockMode::Exclusive, wait(1_000)).await, "is a semaphore with 2 permits");
    let waiting = queued_permit(&w, "s", 2).await;
    assert!(a.release("ns", "s").await.unwrap());
    let got = tokio::time::timeout(PATIENCE, waiting).await.unwrap().unwrap().unwrap();
    assert!(got.fencing_token > held.fencing_token);
    // Every node restarted: the count comes back from the snapshot files and logs.
    for id in cluster.ids() {
        if cluster.is_running(id) {
            cluster.restart(id);
        } else {
            cluster.start_again(id);
        }
    }
    cluster.wait_for_leader(Duration::from_secs(30)).await;
    let late = c.begin_transaction(opts(30_000)).await.unwrap();
    let listed = c.list_locks("ns").await.unwrap().into_iter().find(|k| k.key == "s").unwrap();
    assert_eq!((listed.permits, listed.holders.len()), (2, 2));
    let refused = late.acquire_permit("ns", "s", 2, AcquireOptions::default().with_timeout_ms(0)).await;
    assert!(matches!(refused, Err(Error::LockTimeout { .. })), "both permits are still held: {refused:?}");
}

//! Deadlock detection end to end, through the Rust client against real `dls` processes:
//! the victim's acquire fails with DeadlockVictim, its lost signal says so, the survivors
//! get their locks, and the resolution is visible in the event log.

use crate::common;

use caerus_core::{
    AcquireOptions, ClientConfig, DlsClient, EndCause, Error, EventDetail, EventKind, EventStream, Lock, LockMode,
    LostKind, Transaction, TransactionOptions, TransactionState, VictimPolicy, WatchOptions,
};
use common::{queued, take, Cluster, PATIENCE};
use tokio::task::JoinHandle;

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(PATIENCE))
        .await
        .unwrap()
}

async fn begin(client: &DlsClient, name: &str, priority: i32) -> Transaction {
    client
        .begin_transaction(
            TransactionOptions::default().with_timeout_ms(10_000).with_name(name).with_priority(priority),
        )
        .await
        .unwrap()
}

async fn finish<T>(task: JoinHandle<T>) -> T {
    tokio::time::timeout(PATIENCE, task).await.expect("finished in time").expect("task did not panic")
}

async fn lost_kind(tx: &Transaction) -> LostKind {
    tokio::time::timeout(PATIENCE, tx.lost()).await.expect("the lost signal fires").kind
}

/// The victim's error names the deadlock as data: the cycle it was part of (the victim
/// among its members) and the policy that chose it. Returns the cycle's members.
fn assert_victim(result: Result<Lock, Error>) -> Vec<u64> {
    match result {
        Err(Error::DeadlockVictim { message, deadlock: Some(d) }) => {
            assert!(message.contains("deadlock victim"), "{message}");
            let members: Vec<u64> = d.cycle.iter().map(|m| m.transaction_id).collect();
            assert!(members.len() >= 2 && members.contains(&d.victim_transaction_id), "{d:?}");
            members
        }
        other => panic!("expected DeadlockVictim with its deadlock, got {other:?}"),
    }
}

/// The next deadlock event of `events`: (cycle members in wait-for order, victim, policy).
async fn next_deadlock(events: &mut EventStream) -> (Vec<u64>, u64, VictimPolicy) {
    loop {
        let event = tokio::time::timeout(PATIENCE, events.next_event())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("no stream error");
        if let EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } = event.detail {
            return (cycle.iter().map(|m| m.transaction_id).collect(), victim_transaction_id, policy);
        }
    }
}

/// `cycle` is `members` in wait-for order, starting anywhere.
fn assert_cycle(cycle: &[u64], members: &[u64]) {
    assert_eq!(cycle.len(), members.len(), "{cycle:?} vs {members:?}");
    let start = members.iter().position(|m| *m == cycle[0]).expect("cycle member");
    let rotated: Vec<u64> = members[start..].iter().chain(&members[..start]).copied().collect();
    assert_eq!(cycle, rotated, "wait-for order");
}

#[tokio::test]
async fn two_transaction_cycle_aborts_the_youngest_and_the_survivor_gets_the_lock() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let mut events = c.watch_events(WatchOptions::new().with_kind(EventKind::DeadlockResolved)).await.unwrap();

    let old = begin(&c, "old", 0).await;
    let young = begin(&c, "young", 0).await;
    take(&old, "k1").await;
    let k2 = take(&young, "k2").await;
    let old_waits = queued(&old, "k2").await;
    // Closes the cycle: old waits for young (k2), young now waits for old (k1).
    let closing = young.acquire_lock("ns", "k1", LockMode::Exclusive, AcquireOptions::default()).await;

    assert_cycle(&assert_victim(closing), &[young.id(), old.id()]);
    assert_eq!(lost_kind(&young).await, LostKind::DeadlockVictim);
    let granted = finish(old_waits).await.expect("the survivor gets the lock");
    assert!(granted.fencing_token > k2.fencing_token, "a revoked lock is granted with a higher token");
    assert!(!old.is_lost());

    // Every later call of the victim says why it is gone.
    assert!(matches!(young.release("ns", "k2").await, Err(Error::DeadlockVictim { .. })));
    let status = c.transaction_status(young.id()).await.unwrap();
    assert_eq!(status.state, TransactionState::Aborted);
    assert_eq!(status.end_cause, Some(EndCause::DeadlockVictim));
    assert!(status.end_reason.contains("deadlock victim"), "{}", status.end_reason);
    assert!(status.locks.is_empty());

    let (cycle, victim, policy) = next_deadlock(&mut events).await;
    assert_cycle(&cycle, &[young.id(), old.id()]);
    assert_eq!(victim, young.id());
    assert_eq!(policy, VictimPolicy::LowestPriorityThenYoungest);
    old.commit().await.unwrap();
}

#[tokio::test]
async fn with_transaction_reports_deadlock_victim_when_its_acquire_was_chosen() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let old = begin(&c, "old", 0).await;
    take(&old, "k1").await;

    let (held_k2, mut k2_taken) = tokio::sync::mpsc::unbounded_channel();
    let (go, mut ready) = tokio::sync::mpsc::unbounded_channel::<()>();
    let victim_client = c.clone();
    let body = tokio::spawn(async move {
        victim_client
            .with_transaction(
                TransactionOptions::default().with_timeout_ms(10_000).with_name("young"),
                |tx| async move {
                    take(&tx, "k2").await;
                    held_k2.send(tx.id()).unwrap();
                    ready.recv().await;
                    tx.acquire_lock("ns", "k1", LockMode::Exclusive, AcquireOptions::default()).await?;
                    Ok::<_, Error>("the body must not finish")
                },
            )
            .await
    });
    let young_id = tokio::time::timeout(PATIENCE, k2_taken.recv()).await.unwrap().unwrap();
    let old_waits = queued(&old, "k2").await;
    go.send(()).unwrap();

    match finish(body).await {
        Err(Error::DeadlockVictim { message, .. }) => assert!(message.contains("deadlock victim"), "{message}"),
        other => panic!("expected DeadlockVictim from with_transaction, got {other:?}"),
    }
    finish(old_waits).await.expect("the survivor gets the lock");
    let status = c.transaction_status(young_id).await.unwrap();
    assert_eq!((status.state, status.end_cause), (TransactionState::Aborted, Some(EndCause::DeadlockVictim)));
    old.commit().await.unwrap();
}

#[tokio::test]
async fn three_transaction_cycle_over_three_keys_aborts_only_the_victim() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let mut events = c.watch_events(WatchOptions::new().with_kind(EventKind::DeadlockResolved)).await.unwrap();

    // The middle one has the lowest priority: neither the oldest, the youngest, nor the
    // one that closes the cycle is chosen.
    let a = begin(&c, "a", 0).await;
    let b = begin(&c, "b", -1).await;
    let d = begin(&c, "d", 0).await;
    take(&a, "k1").await;
    take(&b, "k2").await;
    take(&d, "k3").await;
    let a_waits = queued(&a, "k2").await; // a -> b
    let b_waits = queued(&b, "k3").await; // b -> d
    let d_waits = tokio::spawn({
        let d = d.clone();
        async move {
            d.acquire_lock("ns", "k1", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(60_000)).await
        }
    }); // d -> a: the cycle

    assert_victim(finish(b_waits).await);
    assert_eq!(lost_kind(&b).await, LostKind::DeadlockVictim);
    // b's k2 goes to a; d still waits for k1, held by a.
    finish(a_waits).await.expect("a gets b's lock");
    let (cycle, victim, _) = next_deadlock(&mut events).await;
    assert_cycle(&cycle, &[d.id(), a.id(), b.id()]);
    assert_eq!(victim, b.id());
    assert!(!d_waits.is_finished());
    a.commit().await.unwrap();
    finish(d_waits).await.expect("d gets k1 once a commits");
    assert!(!a.is_lost() && !d.is_lost());
    d.commit().await.unwrap();
}

#[tokio::test]
async fn priority_overrides_age() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let mut events = c.watch_events(WatchOptions::new().with_kind(EventKind::DeadlockResolved)).await.unwrap();

    let old_low = begin(&c, "old-low", 0).await;
    let young_high = begin(&c, "young-high", 5).await;
    take(&old_low, "k1").await;
    take(&young_high, "k2").await;
    let old_waits = queued(&old_low, "k2").await;
    // The young one closes the cycle, yet the old low-priority one is aborted.
    let granted = young_high
        .acquire_lock("ns", "k1", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(30_000))
        .await
        .expect("the high-priority transaction survives and gets the lock");
    assert_eq!(granted.key, "k1");
    assert_victim(finish(old_waits).await);
    assert_eq!(lost_kind(&old_low).await, LostKind::DeadlockVictim);
    let (_, victim, policy) = next_deadlock(&mut events).await;
    assert_eq!(victim, old_low.id());
    assert_eq!(policy, VictimPolicy::LowestPriorityThenYoungest);
    young_high.commit().await.unwrap();
}

#[tokio::test]
async fn victim_policy_oldest_aborts_the_oldest() {
    let cluster = Cluster::start_with(1, &["--victim-policy", "oldest"]).await;
    let c = client(&cluster).await;
    let mut events = c.watch_events(WatchOptions::new().with_kind(EventKind::DeadlockResolved)).await.unwrap();

    // Priority does not count under this policy.
    let old = begin(&c, "old", 100).await;
    let young = begin(&c, "young", 0).await;
    take(&old, "k1").await;
    take(&young, "k2").await;
    let old_waits = queued(&old, "k2").await;
    young
        .acquire_lock("ns", "k1", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(30_000))
        .await
        .expect("the young one survives");
    assert_victim(finish(old_waits).await);
    assert_eq!(lost_kind(&old).await, LostKind::DeadlockVictim);
    let (_, victim, policy) = next_deadlock(&mut events).await;
    assert_eq!((victim, policy), (old.id(), VictimPolicy::Oldest));
    young.commit().await.unwrap();
}

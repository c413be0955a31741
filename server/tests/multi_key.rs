//! All-or-nothing AcquireLocks against real nodes: granted together or not at all, one
//! token per lock, queued fairly with single-key requests, part of deadlock detection, and
//! a waiting request survives a leader change (one node and three, through a follower).

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Error, Lock, LockMode, LockRequest, Transaction};
use common::{opts, patient_client, queued, take, wait, Cluster, PATIENCE};

fn x(key: &str) -> LockRequest {
    LockRequest::exclusive("ns", key)
}

/// Starts an all-or-nothing acquire in the background; returns once the server queued it.
async fn queued_all(tx: &Transaction, locks: Vec<LockRequest>) -> tokio::task::JoinHandle<Result<Vec<Lock>, Error>> {
    let (seen, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let tx = tx.clone();
    let wait = tokio::spawn(async move {
        tx.acquire_locks_with_progress(&locks, wait(60_000), move |p| {
            let _ = seen.send(p.position);
        })
        .await
    });
    match tokio::time::timeout(PATIENCE, queued.recv()).await {
        Ok(Some(position)) => assert!(position >= 1),
        Ok(None) => panic!("the acquire ended without queueing: {:?}", wait.await.unwrap()),
        Err(_) => panic!("the acquire was not queued within {PATIENCE:?}"),
    }
    wait
}

async fn keys_waited_by(c: &DlsClient, txn: u64) -> Vec<String> {
    let locks = c.list_locks("ns").await.unwrap();
    locks.into_iter().filter(|k| k.waiters.iter().any(|w| w.transaction_id == txn)).map(|k| k.key).collect()
}

async fn all_or_nothing_on(nodes: usize) {
    let cluster = Cluster::start(nodes).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let entry = cluster.ids().into_iter().find(|id| *id != leader).unwrap_or(leader);
    let c = DlsClient::connect(ClientConfig::new(vec![cluster.addr(entry)]).without_api_key()).await.unwrap();

    // Free keys: granted together, in the order asked, one new token each.
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let got = t.acquire_locks(&[x("b"), LockRequest::shared("ns", "a")], wait(1_000)).await.unwrap();
    assert_eq!(
        got.iter().map(|l| (l.key.as_str(), l.mode)).collect::<Vec<_>>(),
        [("b", LockMode::Exclusive), ("a", LockMode::SharedRead)]
    );
    assert!(got[0].fencing_token < got[1].fencing_token);
    // Re-entrant: held locks come back with their tokens; a new one gets a new token.
    let again = t.acquire_locks(&[x("b"), x("c")], wait(1_000)).await.unwrap();
    assert_eq!(again[0], got[0]);
    assert!(again[1].fencing_token > got[1].fencing_token);
    t.commit().await.unwrap();

    // One key busy: nothing is taken; the request keeps its place on the free key.
    let holder = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = take(&holder, "q").await;
    let multi = c.begin_transaction(opts(10_000)).await.unwrap();
    let waiting = queued_all(&multi, vec![x("p"), x("q")]).await;
    let mut waits = keys_waited_by(&c, multi.id()).await;
    waits.sort();
    assert_eq!(waits, ["p", "q"], "it waits in both queues");
    assert!(multi.status().await.unwrap().locks.is_empty(), "nothing held half-way");
    let later = c.begin_transaction(opts(10_000)).await.unwrap();
    let later_wait = queued(&later, "p").await;
    // A try of the same keys is refused at once, and queues nothing.
    let trier = c.begin_transaction(opts(10_000)).await.unwrap();
    let refused = trier.acquire_locks(&[x("p"), x("q")], wait(0)).await.unwrap_err();
    assert!(matches!(refused, Error::LockTimeout { .. }), "{refused:?}");
    assert!(keys_waited_by(&c, trier.id()).await.is_empty());

    holder.commit().await.unwrap();
    let granted = waiting.await.unwrap().unwrap();
    assert_eq!(granted.len(), 2);
    assert!(granted.iter().all(|l| l.fencing_token > held.fencing_token));
    assert_ne!(granted[0].fencing_token, granted[1].fencing_token);
    assert!(!later_wait.is_finished(), "the later single-key request stays behind it");
    multi.commit().await.unwrap();
    later_wait.await.unwrap().unwrap();
    later.commit().await.unwrap();
    trier.commit().await.unwrap();

    // Bad input: clear INVALID_ARGUMENT, nothing queued or held.
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    for (locks, says) in [
        (vec![], "locks is empty"),
        (vec![x("d"), LockRequest::shared("ns", "d")], "locks[1]: ns/d is named twice"),
        ((0..65).map(|i| x(&format!("k{i}"))).collect(), "the limit is 64 per request"),
        (vec![x("d"), LockRequest::exclusive("", "e")], "locks[1]: namespace must not be empty"),
    ] {
        let err = t.acquire_locks(&locks, wait(1_000)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.message().contains(says), "{err}");
    }
    assert!(t.status().await.unwrap().locks.is_empty());
    t.commit().await.unwrap();
}

#[tokio::test]
async fn all_or_nothing_on_one_node() {
    all_or_nothing_on(1).await;
}

#[tokio::test]
async fn all_or_nothing_through_a_follower_of_three() {
    all_or_nothing_on(3).await;
}

#[tokio::test]
async fn a_cycle_through_multi_key_requests_is_broken() {
    let cluster = Cluster::start(1).await;
    let c = patient_client(cluster.endpoints()).await;
    let (t1, t2) = (c.begin_transaction(opts(10_000)).await.unwrap(), c.begin_transaction(opts(10_000)).await.unwrap());
    take(&t1, "a").await;
    take(&t2, "b").await;
    let first = queued_all(&t1, vec![x("b"), x("c")]).await;
    let second =
        t2.acquire_locks(&[LockRequest::shared("ns", "c"), LockRequest::shared("ns", "a")], wait(10_000)).await;
    let first = first.await.unwrap();
    let victims = [first.is_err(), second.is_err()];
    assert_eq!(victims.iter().filter(|v| **v).count(), 1, "exactly one victim: {first:?} / {second:?}");
    let err = first.as_ref().err().or(second.as_ref().err()).unwrap();
    assert!(matches!(err, Error::DeadlockVictim { .. }), "{err:?}");
    let won = first.ok().or(second.ok()).unwrap();
    assert_eq!(won.len(), 2, "the survivor gets both its locks");
}

#[tokio::test]
async fn a_waiting_request_is_granted_whole_after_a_leader_change() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let c = patient_client(cluster.endpoints()).await;
    let holder = c.begin_transaction(opts(30_000)).await.unwrap();
    let held = take(&holder, "b").await;
    let multi = c.begin_transaction(opts(30_000)).await.unwrap();
    let waiting = queued_all(&multi, vec![x("a"), x("b")]).await;
    cluster.kill(leader);
    // The holder lets go on the new leader; the waiting request re-attaches and gets both.
    holder.commit().await.unwrap();
    let granted = waiting.await.unwrap().unwrap();
    assert_eq!(granted.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert!(granted.iter().all(|l| l.fencing_token > held.fencing_token));
    assert_eq!(multi.status().await.unwrap().locks.len(), 2);
    multi.commit().await.unwrap();
}

#[tokio::test]
async fn a_request_over_the_transactions_lock_limit_is_refused_whole() {
    let cluster = Cluster::start_with(1, &["--max-locks-per-txn", "2"]).await;
    let c = patient_client(cluster.endpoints()).await;
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let err = t.acquire_locks(&[x("a"), x("b"), x("c")], wait(1_000)).await.unwrap_err();
    assert!(matches!(err, Error::ResourceExhausted { .. }), "{err:?}");
    assert!(err.message().contains("asks for 3 more (limit --max-locks-per-txn 2)"), "{err}");
    assert!(t.status().await.unwrap().locks.is_empty(), "nothing taken");
    assert_eq!(t.acquire_locks(&[x("a"), x("b")], wait(1_000)).await.unwrap().len(), 2);
    t.commit().await.unwrap();
}

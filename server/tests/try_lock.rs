//! Try-lock: an acquire with `timeout_ms` 0 is granted at once or refused with LOCK_TIMEOUT
//! at once, never queued, on one node and through a follower of three.

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Error, LockMode, TransactionOptions, TransactionState};
use common::{http_get, wait, Cluster};

fn lease() -> TransactionOptions {
    TransactionOptions::default().with_timeout_ms(10_000)
}

/// Commands node `id` proposed so far as leader: each is one replicated write.
fn proposed_commands(cluster: &Cluster, id: u64) -> u64 {
    let (status, text) = http_get(&cluster.http_addr(id), "/metrics").unwrap();
    assert_eq!(status, 200, "/metrics answered {status}");
    text.lines()
        .find_map(|l| l.strip_prefix("dls_proposed_commands_total ")?.parse::<f64>().ok())
        .expect("dls_proposed_commands_total in /metrics") as u64
}

async fn try_lock_on(nodes: usize) {
    let cluster = Cluster::start(nodes).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    // Through a follower when there is one: it forwards the call to the leader.
    let entry = cluster.ids().into_iter().find(|id| *id != leader).unwrap_or(leader);
    let c = DlsClient::connect(ClientConfig::new(vec![cluster.addr(entry)]).without_api_key()).await.unwrap();

    let holder = c.begin_transaction(lease()).await.unwrap();
    let held = holder.acquire_lock("ns", "k", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let other = c.begin_transaction(lease()).await.unwrap();

    // Held: LOCK_TIMEOUT at once, without a raft write, and the transaction goes on.
    let before = proposed_commands(&cluster, leader);
    let refused = other.acquire_lock("ns", "k", LockMode::SharedRead, wait(0)).await.unwrap_err();
    assert!(matches!(refused, Error::LockTimeout { .. }), "{refused:?}");
    assert_eq!(proposed_commands(&cluster, leader), before, "a refused try-lock writes nothing");
    assert_eq!(other.status().await.unwrap().state, TransactionState::Active);
    assert!(c.list_locks("ns").await.unwrap().iter().all(|k| k.waiters.is_empty()), "nothing queued");

    // Free: granted at once, with a later token than the last grant.
    holder.commit().await.unwrap();
    let granted = other.acquire_lock("ns", "k", LockMode::SharedRead, wait(0)).await.unwrap();
    assert!(granted.fencing_token > held.fencing_token);
    // Re-entrant: a try for what it holds answers with the same grant.
    assert_eq!(other.acquire_lock("ns", "k", LockMode::SharedRead, wait(0)).await.unwrap(), granted);

    // A deferred transaction whose first call is a try-lock (the one-shot start): refused,
    // it still begins and stays active; the holder's release lets the next try through.
    let third = c.transaction(lease()).unwrap();
    let refused = third.acquire_lock("ns", "k", LockMode::Exclusive, wait(0)).await.unwrap_err();
    assert!(matches!(refused, Error::LockTimeout { .. }), "{refused:?}");
    assert_eq!(third.status().await.unwrap().state, TransactionState::Active);
    other.commit().await.unwrap();
    let next = third.acquire_lock("ns", "k", LockMode::Exclusive, wait(0)).await.unwrap();
    assert!(next.fencing_token > granted.fencing_token);
    third.commit().await.unwrap();
}

#[tokio::test]
async fn a_try_lock_answers_at_once_on_a_single_node() {
    try_lock_on(1).await;
}

#[tokio::test]
async fn a_try_lock_answers_at_once_through_a_follower_of_three() {
    try_lock_on(3).await;
}

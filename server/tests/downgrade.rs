//! DowngradeLock against real nodes: EXCLUSIVE -> SHARED_READ in place with the same
//! token, queued readers come in, writers keep waiting (one node and through a follower).

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, LockMode};
use common::{opts, queued, take, wait, Cluster};

async fn downgrade_on(nodes: usize) {
    let cluster = Cluster::start(nodes).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let entry = cluster.ids().into_iter().find(|id| *id != leader).unwrap_or(leader);
    let c = DlsClient::connect(ClientConfig::new(vec![cluster.addr(entry)]).without_api_key()).await.unwrap();

    let owner = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = take(&owner, "k").await;
    let writer = c.begin_transaction(opts(10_000)).await.unwrap();
    let writer_wait = queued(&writer, "k").await;
    // A reader that arrives now waits behind the writer, as always.
    let reader = c.begin_transaction(opts(10_000)).await.unwrap();
    let reader_wait = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.acquire_lock("ns", "k", LockMode::SharedRead, wait(2_000)).await })
    };

    let down = owner.downgrade("ns", "k").await.unwrap().expect("held");
    assert_eq!((down.mode, down.fencing_token), (LockMode::SharedRead, held.fencing_token));
    assert_eq!(owner.status().await.unwrap().locks, vec![down.clone()]);
    // The token stays current for fencing checks.
    assert!(c.verify_fencing_token("ns", "k", held.fencing_token).await.unwrap().current);
    // The writer still waits (a reader holds the key); the reader behind the writer too.
    let err = reader_wait.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "LOCK_TIMEOUT", "{err}");
    assert!(!writer_wait.is_finished());
    // Once the writer gives up, readers share the key with the downgraded holder.
    writer.abort().await.unwrap();
    let shared = reader.acquire_lock("ns", "k", LockMode::SharedRead, wait(2_000)).await.unwrap();
    assert!(shared.fencing_token > held.fencing_token);
    // Downgrading a shared hold or a lock not held.
    assert_eq!(owner.downgrade("ns", "k").await.unwrap(), Some(down));
    assert_eq!(owner.downgrade("ns", "other").await.unwrap(), None);
    owner.commit().await.unwrap();
    reader.commit().await.unwrap();
}

#[tokio::test]
async fn downgrade_on_one_node() {
    downgrade_on(1).await;
}

#[tokio::test]
async fn downgrade_through_a_follower_of_three() {
    downgrade_on(3).await;
}

#[tokio::test]
async fn readers_queued_behind_the_holder_come_in_at_the_downgrade() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let owner = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = take(&owner, "k").await;
    let reader = c.begin_transaction(opts(10_000)).await.unwrap();
    let (seen, mut queued_rx) = tokio::sync::mpsc::unbounded_channel();
    let r = reader.clone();
    let reading = tokio::spawn(async move {
        r.acquire_lock_with_progress("ns", "k", LockMode::SharedRead, wait(30_000), move |_| {
            let _ = seen.send(());
        })
        .await
    });
    queued_rx.recv().await.expect("the reader queues");
    owner.downgrade("ns", "k").await.unwrap();
    let got = reading.await.unwrap().unwrap();
    assert!(got.fencing_token > held.fencing_token);
    owner.commit().await.unwrap();
    reader.commit().await.unwrap();
}

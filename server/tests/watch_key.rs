//! WatchKey and leader election against real nodes: every kind of holder change reaches a
//! watcher, a watch follows a leader change without missing one, election hands over
//! when the leader dies, and a key limited to other namespaces may not watch.

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Election, EndCause, Error, KeyChangeKind, KeyUpdate, KeyWatch, LockMode};
use common::{add_key, eventually_async, opts, patient_client, take, wait, Cluster, PATIENCE};
use futures::StreamExt;

async fn next(w: &mut KeyWatch) -> KeyUpdate {
    match tokio::time::timeout(PATIENCE, w.next_update()).await {
        Ok(Some(Ok(u))) => u,
        other => panic!("no key update: {other:?}"),
    }
}

fn kinds(u: &KeyUpdate) -> Vec<(KeyChangeKind, u64)> {
    u.changes.iter().map(|c| (c.kind, c.holder.transaction_id)).collect()
}

#[tokio::test]
async fn every_kind_of_change_reaches_the_watcher() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let mut w = c.watch_key("ns", "k").await.unwrap();
    let first = next(&mut w).await;
    assert!(first.initial && first.holders.is_empty() && first.changes.is_empty());

    // Granted, downgraded, a reader joins, released.
    let a = c.begin_transaction(opts(10_000).with_name("alpha")).await.unwrap();
    let held = take(&a, "k").await;
    let u = next(&mut w).await;
    assert_eq!(kinds(&u), vec![(KeyChangeKind::Granted, a.id())]);
    assert_eq!((u.holders[0].transaction_name.as_str(), u.holders[0].fencing_token), ("alpha", held.fencing_token));
    a.downgrade("ns", "k").await.unwrap();
    assert_eq!(kinds(&next(&mut w).await), vec![(KeyChangeKind::Downgraded, a.id())]);
    let b = c.begin_transaction(opts(10_000)).await.unwrap();
    b.acquire_lock("ns", "k", LockMode::SharedRead, wait(1_000)).await.unwrap();
    let u = next(&mut w).await;
    assert_eq!(kinds(&u), vec![(KeyChangeKind::Granted, b.id())]);
    assert_eq!(u.holders.len(), 2, "both readers, oldest grant first");
    assert_eq!(u.holders[0].transaction_id, a.id());
    a.commit().await.unwrap();
    assert_eq!(kinds(&next(&mut w).await), vec![(KeyChangeKind::Released, a.id())]);

    // Revoked by an operator, with its cause.
    c.abort_transaction(b.id(), "maintenance").await.unwrap();
    let u = next(&mut w).await;
    assert_eq!(kinds(&u), vec![(KeyChangeKind::Revoked, b.id())]);
    assert_eq!(u.changes[0].end_cause, Some(EndCause::OperatorAbort));
    assert!(u.holders.is_empty());

    // Expired: a transaction whose heartbeats stop.
    let silent = c.begin_transaction(opts(300)).await.unwrap();
    take(&silent, "k").await;
    assert_eq!(kinds(&next(&mut w).await), vec![(KeyChangeKind::Granted, silent.id())]);
    silent.abandon();
    let u = next(&mut w).await;
    assert_eq!(kinds(&u), vec![(KeyChangeKind::Expired, silent.id())]);
    assert_eq!(u.changes[0].end_cause, Some(EndCause::LeaseExpired));
}

#[tokio::test]
async fn a_watch_follows_a_leader_change_and_election_hands_over() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let c = patient_client(cluster.endpoints()).await;
    let election = Election::new(&c, "ns", "leader");
    assert_eq!(election.leader().await.unwrap(), None);
    let mut observed = election.observe().await.unwrap();
    assert_eq!(tokio::time::timeout(PATIENCE, observed.next()).await.unwrap().unwrap().unwrap(), None);

    let first = election.campaign("node-a", 5_000).await.unwrap();
    let seen = tokio::time::timeout(PATIENCE, observed.next()).await.unwrap().unwrap().unwrap().unwrap();
    assert_eq!((seen.transaction_name.as_str(), seen.fencing_token), ("node-a", first.term()));
    assert_eq!(election.leader().await.unwrap().unwrap().transaction_name, "node-a");

    // A second candidate waits in line; the dls leader dies; the first candidate resigns
    // on the new dls leader and the second takes over, seen by the same observer.
    let c2 = c.clone();
    let second = tokio::spawn(async move { Election::new(&c2, "ns", "leader").campaign("node-b", 5_000).await });
    eventually_async(PATIENCE, "the second candidate to wait in line", || async {
        let locks = c.list_locks("ns").await.ok()?;
        locks.iter().any(|l| l.key == "leader" && !l.waiters.is_empty()).then_some(())
    })
    .await;
    cluster.kill(leader);
    let first_term = first.term();
    first.resign().await.unwrap();
    let second = tokio::time::timeout(PATIENCE, second).await.unwrap().unwrap().unwrap();
    loop {
        let seen = tokio::time::timeout(PATIENCE, observed.next()).await.unwrap().unwrap().unwrap();
        if let Some(l) = seen {
            assert_eq!((l.transaction_name.as_str(), l.fencing_token), ("node-b", second.term()));
            break;
        }
    }
    assert!(second.term() > first_term, "a later leader has a higher term");
    second.resign().await.unwrap();
}

#[tokio::test]
async fn bad_input_and_other_tenants_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let billing = add_key(&file, "billing", &["billing-"], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin)).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(&billing)).await.unwrap();
    let err = c.watch_key("payroll", "k").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    let err = c.watch_key("billing-x", "").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let mut w = c.watch_key("billing-x", "k").await.unwrap();
    assert!(next(&mut w).await.initial);
}

#[tokio::test]
async fn a_cursor_resumes_with_what_changed_and_watches_are_bounded() {
    use caerus_proto::v1 as pb;
    let cluster = Cluster::start_with(1, &["--max-watches-per-api-key", "2"]).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let tx = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = take(&tx, "r").await;
    let mut raw = common::raw_client(&cluster.endpoints()[0]).await;
    let watch = |cursor: &str| pb::WatchKeyRequest { namespace: "ns".into(), key: "r".into(), cursor: cursor.into() };

    // A watcher that saw this holder, then lost its stream while the holder let go and a
    // reader came: the resumed watch starts with exactly those changes.
    let mut first = raw.watch_key(watch("")).await.unwrap().into_inner();
    let seen = first.message().await.unwrap().unwrap();
    assert_eq!(seen.holders.len(), 1);
    drop(first);
    tx.commit().await.unwrap();
    let reader = c.begin_transaction(opts(10_000)).await.unwrap();
    let read = reader.acquire_lock("ns", "r", LockMode::SharedRead, wait(1_000)).await.unwrap();
    let mut resumed = raw.watch_key(watch(&seen.cursor)).await.unwrap().into_inner();
    let m = resumed.message().await.unwrap().unwrap();
    let changes: Vec<_> = m.changes.iter().map(|c| (c.kind(), c.holder.as_ref().unwrap().fencing_token)).collect();
    assert_eq!(
        changes,
        vec![(pb::KeyChangeKind::Released, held.fencing_token), (pb::KeyChangeKind::Granted, read.fencing_token)]
    );

    // A cursor this server did not make is refused; a third watch is over the limit.
    let err = raw.watch_key(watch("1:2")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let _second = raw.watch_key(watch("")).await.unwrap();
    let err = raw.watch_key(watch("")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("--max-watches-per-api-key 2"), "{err:?}");
}

//! One API key cannot refuse another: every node-wide bound one key could fill alone has a
//! per-key share. A key's flood of waiting calls through a follower, its event streams on
//! a follower's HTTP port and its flood of proposals each leave the other key served.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::calls::{exclusive, keyed};
use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::{self as pb};
use caerus_testkit::{add_key, eventually, eventually_async, raw_client, Cluster, PATIENCE};
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

/// A cluster of three that requires keys, and two ordinary keys of it, "a" and "b".
async fn keyed_cluster(flags: &[&str]) -> (Cluster, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let (a, b) = (add_key(&file, "a", &[], false), add_key(&file, "b", &[], false));
    let mut all = vec!["--api-keys-file", file.to_str().unwrap()];
    all.extend_from_slice(flags);
    let cluster = Cluster::start_full(3, &all, Some(a.clone())).await;
    (cluster, a, b, dir)
}

/// The leader, and a follower that knows it (so its calls are forwarded, not refused).
async fn leader_and_follower(cluster: &Cluster) -> (u64, u64) {
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    let knows = || ((cluster.metric(follower, "dls_leader_id") as u64) == leader).then_some(());
    eventually(PATIENCE, "the follower to know the leader", knows).await;
    (leader, follower)
}

async fn begin(c: &mut LockServiceClient<Channel>, key: &str) -> Result<u64, Status> {
    let msg = pb::BeginTransactionRequest { timeout_ms: 60_000, ..Default::default() };
    Ok(c.begin_transaction(keyed(msg, key)).await?.into_inner().transaction_id)
}

fn acquire(txn: u64, lock: &str) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest { request_id: format!("acquire-{txn}-{lock}"), ..exclusive(txn, lock) }
}

/// Opens an acquire of `lock` by `txn` and reads its first message: the stream when it
/// waits (queued), or the status refusing it.
async fn wait_for(
    c: &mut LockServiceClient<Channel>,
    key: &str,
    txn: u64,
    lock: &str,
) -> Result<Streaming<pb::AcquireLockResponse>, Status> {
    let mut stream = c.acquire_lock(keyed(acquire(txn, lock), key)).await?.into_inner();
    let first = stream.message().await?.and_then(|m| m.event);
    assert!(matches!(first, Some(AcquireEvent::Queued(_))), "the acquire must wait: {first:?}");
    Ok(stream)
}

fn assert_refused_by(err: &Status, flag: &str) {
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains(flag), "{err:?}");
    assert!(err.metadata().get("x-dls-forwarded-to").is_none(), "refused by the follower itself: {err:?}");
}

#[tokio::test]
async fn one_keys_waiting_calls_through_a_follower_leave_room_for_another_key() {
    // Eight forwarded calls at once on a follower: a quarter of them per key.
    let (cluster, a, b, _keys) = keyed_cluster(&["--max-forwarded-calls", "8"]).await;
    let (leader, follower) = leader_and_follower(&cluster).await;
    let mut direct = raw_client(&cluster.addr(leader)).await;
    let mut f = raw_client(&cluster.addr(follower)).await;
    let holder = begin(&mut direct, &a).await.unwrap();
    let mut first = direct.acquire_lock(keyed(acquire(holder, "k"), &a)).await.unwrap().into_inner();
    assert!(matches!(first.message().await.unwrap().unwrap().event, Some(AcquireEvent::Granted(_))));

    // Key a opens waiting acquires through the follower until it is refused: at its share.
    let mut open = Vec::new();
    let refusal = loop {
        assert!(open.len() <= 8, "key a held {} waiting calls through the follower", open.len());
        let txn = match begin(&mut f, &a).await {
            Ok(txn) => txn,
            Err(e) => break e,
        };
        match wait_for(&mut f, &a, txn, "k").await {
            Ok(stream) => open.push(stream),
            Err(e) => break e,
        }
    };
    assert_refused_by(&refusal, "--max-forwarded-calls-per-api-key 2");
    assert!(refusal.message().contains("API key \"a\""), "{refusal:?}");
    assert_eq!(open.len(), 2);
    assert!(cluster.metric(follower, "dls_refused_total{limit=\"max-forwarded-calls-per-api-key\"}") >= 1.0);

    // Key b is served through the same follower, and may wait there too.
    let txn = begin(&mut f, &b).await.unwrap();
    let _waiting = wait_for(&mut f, &b, txn, "k").await.unwrap();
    assert_eq!(cluster.metric(follower, "dls_forwarded_calls_open") as u64, 3);

    // A stream a hangs up gives its place back to a.
    drop(open.pop());
    eventually_async(PATIENCE, "key a's freed place", || {
        let mut f = f.clone();
        let a = a.clone();
        async move { begin(&mut f, &a).await.ok() }
    })
    .await;
}

/// An HTTP/1.1 GET of server-sent events on its own connection: the status, and the open
/// connection (the stream goes on while it is held).
fn open_events(addr: &str, key: &str) -> (u16, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let request =
        format!("GET /api/v1/events?only_new=true HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "the connection closed before the head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, s)
}

#[tokio::test]
async fn one_keys_event_streams_on_a_followers_http_port_leave_room_for_another_key() {
    // Two watches per client connection: the follower must count each HTTP client, not its
    // own way to the leader.
    let (cluster, a, b, _keys) = keyed_cluster(&["--max-watches-per-connection", "2"]).await;
    let (_leader, follower) = leader_and_follower(&cluster).await;
    let http = cluster.http_addr(follower);
    let mut streams = Vec::new();
    for n in 0..3 {
        let (status, stream) = open_events(&http, &a);
        assert_eq!(status, 200, "key a's stream {n} on the follower");
        streams.push(stream);
    }
    let (status, _b_stream) = open_events(&http, &b);
    assert_eq!(status, 200, "key b's stream on the follower");
    // Every stream reaches the leader through the follower's hop, one place each.
    assert_eq!(cluster.metric(follower, "dls_forwarded_calls_open") as u64, 4);
    // Closed streams give their places back.
    drop(streams);
    eventually(PATIENCE, "the closed streams' places freed", || {
        ((cluster.metric(follower, "dls_forwarded_calls_open") as u64) == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn one_keys_flood_of_proposals_leaves_room_in_the_queue_for_another_key() {
    // Eight proposals may wait on the leader, a quarter of them per key.
    let (mut cluster, a, b, _keys) = keyed_cluster(&["--max-queued-proposals", "8"]).await;
    let (leader, _) = leader_and_follower(&cluster).await;
    let direct = raw_client(&cluster.addr(leader)).await;
    // Without its followers the leader commits nothing: proposals wait in its queue.
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    for id in &followers {
        cluster.pause(*id);
    }
    let floods: Vec<_> = (0..16)
        .map(|_| {
            let (mut c, a) = (direct.clone(), a.clone());
            tokio::spawn(async move { begin(&mut c, &a).await })
        })
        .collect();
    let shed = eventually(PATIENCE, "one of key a's begins to be shed", || {
        floods.iter().any(|t| t.is_finished()).then_some(())
    });
    shed.await;
    let mut refusals = Vec::new();
    let mut waiting = Vec::new();
    for t in floods {
        if t.is_finished() {
            refusals.push(t.await.unwrap().unwrap_err());
        } else {
            waiting.push(t);
        }
    }
    for err in &refusals {
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(err.message().contains("--max-queued-proposals-per-api-key 2"), "{err:?}");
        assert!(err.metadata().get("x-dls-retry-after-ms").is_some(), "shed with a retry hint: {err:?}");
    }

    // Key b's begin waits in the queue instead of being shed.
    let queued = cluster.metric(leader, "dls_queued_proposals");
    let mut c = direct.clone();
    let b_begin = tokio::spawn(async move { begin(&mut c, &b).await });
    eventually(PATIENCE, "key b's begin to be queued", || {
        assert!(!b_begin.is_finished(), "key b's begin was answered while nothing can commit");
        (cluster.metric(leader, "dls_queued_proposals") > queued).then_some(())
    })
    .await;
    for id in &followers {
        cluster.resume(*id);
    }
    assert!(b_begin.await.unwrap().unwrap() > 0, "key b's transaction begins once the followers are back");
    for t in waiting {
        t.await.unwrap().unwrap();
    }
}

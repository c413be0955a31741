//! Keys and identities hold: a revoked key's open streams end; begin request ids belong to
//! their key; only the owner's heartbeats renew a lease; a node certificate speaks only for
//! its own node, and only while that node is a member; a secret-only cluster never adds a
//! member whose address would get the secret in clear; the HTTP port's answers refuse to be
//! framed; files holding secrets are owner-only, and a readable cluster secret is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use caerus_proto::raft::peer_discovery_service_client::PeerDiscoveryServiceClient;
use caerus_proto::raft::raft_service_client::RaftServiceClient;
use caerus_proto::raft::{ClusterStateRequest, RaftPayload};
use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::event::Detail;
use caerus_proto::v1::{self as pb, lock_service_client::LockServiceClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::{Channel, ClientTlsConfig};
use tonic::{Code, Request, Status, Streaming};

use super::calls::{exclusive, keyed};
use crate::common::{self, add_key, eventually, eventually_async, raw_client, Cluster, Spec, PATIENCE};

fn begin_req(request_id: &str, lease_ms: i64) -> pb::BeginTransactionRequest {
    pb::BeginTransactionRequest { timeout_ms: lease_ms, request_id: request_id.into(), ..Default::default() }
}

async fn begin(c: &mut LockServiceClient<Channel>, key: &str, request_id: &str) -> Result<u64, Status> {
    Ok(c.begin_transaction(keyed(begin_req(request_id, 10_000), key)).await?.into_inner().transaction_id)
}

/// The first message of an acquire stream.
async fn first(stream: &mut Streaming<pb::AcquireLockResponse>) -> pb::AcquireLockResponse {
    stream.message().await.unwrap().expect("the acquire stream ended at once")
}

/// Reads a stream until it ends with an error status (a stream that ends cleanly fails).
async fn end_of<T>(mut stream: Streaming<T>, what: &str) -> Status {
    let ended = async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("{what}: the stream ended without an error"),
                Err(status) => return status,
            }
        }
    };
    tokio::time::timeout(PATIENCE, ended).await.unwrap_or_else(|_| panic!("{what}: the stream did not end"))
}

fn assert_ended(status: &Status, code: Code, words: &str, what: &str) {
    assert_eq!(status.code(), code, "{what}: {status:?}");
    assert!(status.message().contains(words), "{what}: {status:?}");
}

/// Rewrites the keys file `file` (written by `dls keys add`) with `edit` applied to its
/// entries, keeping the file's mode.
fn rewrite_keys(file: &Path, edit: impl FnOnce(&mut Vec<toml::Table>)) {
    let mut doc: toml::Table = toml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut entries: Vec<toml::Table> = match doc.remove("keys") {
        Some(toml::Value::Array(a)) => a.into_iter().map(|v| v.as_table().unwrap().clone()).collect(),
        other => panic!("no keys in {}: {other:?}", file.display()),
    };
    edit(&mut entries);
    doc.insert("keys".into(), toml::Value::Array(entries.into_iter().map(toml::Value::Table).collect()));
    std::fs::write(file, toml::to_string(&doc).unwrap()).unwrap();
}

fn named(name: &'static str) -> impl Fn(&toml::Table) -> bool {
    move |k| k.get("name").and_then(|v| v.as_str()) == Some(name)
}

/// A Server-Sent Events stream of the HTTP port, read as raw text.
struct Sse {
    conn: TcpStream,
    seen: String,
}

impl Sse {
    async fn open(http: &str, path: &str, key: &str) -> Sse {
        let mut conn = TcpStream::connect(http).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {http}\r\nAuthorization: Bearer {key}\r\n\r\n");
        conn.write_all(request.as_bytes()).await.unwrap();
        Sse { conn, seen: String::new() }
    }

    /// Reads until `needle` was received; everything received so far.
    async fn until(&mut self, needle: &str) -> &str {
        let read = async {
            let mut buf = [0u8; 4096];
            while !self.seen.contains(needle) {
                let n = self.conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the SSE stream closed before {needle:?}: {}", self.seen);
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        };
        if tokio::time::timeout(PATIENCE, read).await.is_err() {
            panic!("no {needle:?} on the SSE stream: {}", self.seen);
        }
        &self.seen
    }
}

#[tokio::test]
async fn a_revoked_key_s_open_streams_end_and_other_keys_streams_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let watcher = add_key(&file, "watcher", &[], false);
    let narrowed = add_key(&file, "narrowed", &["ns", "other-"], false);
    let holder = add_key(&file, "holder", &[], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
    let (addr, http) = (cluster.addr(1), cluster.http_addr(1));
    let mut c = raw_client(&addr).await;

    // The watcher's every kind of stream: a wait behind another key's hold, an event watch,
    // a key watch, and both SSE streams of the HTTP port.
    let held = begin(&mut c, &holder, "").await.unwrap();
    let mut grant = c.acquire_lock(keyed(exclusive(held, "k"), &holder)).await.unwrap().into_inner();
    assert!(matches!(first(&mut grant).await.event, Some(AcquireEvent::Granted(_))));
    let waiter = begin(&mut c, &watcher, "").await.unwrap();
    let mut waiting = c.acquire_lock(keyed(exclusive(waiter, "k"), &watcher)).await.unwrap().into_inner();
    assert!(matches!(first(&mut waiting).await.event, Some(AcquireEvent::Queued(_))));
    let new_events = || pb::WatchEventsRequest { only_new: true, ..Default::default() };
    let events = c.watch_events(keyed(new_events(), &watcher)).await.unwrap().into_inner();
    let key_watch = pb::WatchKeyRequest { namespace: "ns".into(), key: "k".into(), cursor: String::new() };
    let mut holders = c.watch_key(keyed(key_watch, &watcher)).await.unwrap().into_inner();
    holders.message().await.unwrap().expect("the key's holders now");
    let mut sse_events = Sse::open(&http, "/api/v1/events?only_new=true", &watcher).await;
    sse_events.until("caerus-dls events").await;
    let mut sse_key = Sse::open(&http, "/api/v1/keys/watch?namespace=ns&key=k", &watcher).await;
    sse_key.until("data:").await;
    // A key whose namespaces will narrow, and the admin's, which will not change.
    let narrowed_events = c.watch_events(keyed(new_events(), &narrowed)).await.unwrap().into_inner();
    let mut admin_events = c.watch_events(keyed(new_events(), &admin)).await.unwrap().into_inner();

    rewrite_keys(&file, |keys| {
        keys.retain(|k| !named("watcher")(k));
        let n = keys.iter_mut().find(|k| named("narrowed")(k)).unwrap();
        n.insert("namespaces".into(), toml::Value::Array(vec!["ns".into()]));
    });
    cluster.signal(1, "HUP");
    let reloaded = Instant::now();

    let removed = "was removed from the keys file";
    assert_ended(&end_of(waiting, "wait").await, Code::Unauthenticated, removed, "the waiting AcquireLock");
    assert_ended(&end_of(events, "events").await, Code::Unauthenticated, removed, "WatchEvents");
    assert_ended(&end_of(holders, "holders").await, Code::Unauthenticated, removed, "WatchKey");
    for (sse, what) in [(&mut sse_events, "/api/v1/events"), (&mut sse_key, "/api/v1/keys/watch")] {
        let text = sse.until("event: dls-error").await;
        assert!(text.contains("UNAUTHENTICATED") && text.contains(removed), "{what}: {text}");
    }
    let status = end_of(narrowed_events, "narrowed").await;
    assert_ended(&status, Code::PermissionDenied, "rights of API key \"narrowed\" changed", "a narrowed key's watch");
    println!("the revoked key's streams ended {:?} after SIGHUP", reloaded.elapsed());

    // The admin's watch goes on: it sees the event of an abort made after the reload.
    let mut a = AdminServiceClient::new(plain_channel(&addr));
    let abort = pb::AbortTransactionRequest { transaction_id: held, reason: "test".into(), request_id: String::new() };
    a.abort_transaction(keyed(abort, &admin)).await.unwrap();
    let event = tokio::time::timeout(PATIENCE, admin_events.message()).await.unwrap().unwrap().unwrap();
    assert!(matches!(event.detail, Some(Detail::TransactionAborted(ref t)) if t.transaction_id == held), "{event:?}");
}

/// The followers of `leader`, once each knows it leads.
async fn followers_of(cluster: &Cluster, leader: u64) -> Vec<u64> {
    let ids: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let knows = || ids.iter().all(|id| (cluster.metric(*id, "dls_leader_id") as u64) == leader).then_some(());
    eventually(PATIENCE, "the followers to know the leader", knows).await;
    ids
}

#[tokio::test]
async fn a_stream_opened_through_a_follower_ends_when_the_leader_revokes_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let watcher = add_key(&file, "watcher", &[], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(3, &["--api-keys-file", file.to_str().unwrap()], Some(admin)).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];

    let mut c = raw_client(&cluster.addr(follower)).await;
    let opened = c.watch_events(keyed(pb::WatchEventsRequest::default(), &watcher)).await.unwrap();
    let forwarded_to = opened.metadata().get("x-dls-forwarded-to").map(|v| v.to_str().unwrap().to_string());
    assert_eq!(forwarded_to, Some(leader.to_string()), "the follower forwarded the watch");
    let path = "/api/v1/keys/watch?namespace=ns&key=k";
    let mut sse = Sse::open(&cluster.http_addr(follower), path, &watcher).await;
    sse.until("data:").await;

    // Only the leader reloads: its keys decide.
    rewrite_keys(&file, |keys| keys.retain(|k| !named("watcher")(k)));
    cluster.signal(leader, "HUP");
    let status = end_of(opened.into_inner(), "forwarded watch").await;
    assert_ended(&status, Code::Unauthenticated, "was removed from the keys file", "WatchEvents through a follower");
    let text = sse.until("event: dls-error").await;
    assert!(text.contains("UNAUTHENTICATED"), "{text}");
}

#[tokio::test]
async fn begin_request_ids_belong_to_their_key_through_any_node_and_after_a_leader_change() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let a = add_key(&file, "tenant-a", &[], false);
    let b = add_key(&file, "tenant-b", &[], false);
    let mut cluster = Cluster::start_full(3, &["--api-keys-file", file.to_str().unwrap()], Some(a.clone())).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let fs = followers_of(&cluster, leader).await;
    let mut on_leader = raw_client(&cluster.addr(leader)).await;
    let (mut f0, mut f1) = (raw_client(&cluster.addr(fs[0])).await, raw_client(&cluster.addr(fs[1])).await);

    // The same client id under two keys: two transactions, and B learns nothing of A's.
    let ta = begin(&mut on_leader, &a, "nightly-job").await.unwrap();
    let tb = begin(&mut on_leader, &b, "nightly-job").await.expect("another key's id must not be refused");
    assert_ne!(ta, tb, "B got a transaction of its own");
    let status = pb::GetTransactionStatusRequest { transaction_id: tb };
    let own = on_leader.get_transaction_status(keyed(status, &b)).await.unwrap().into_inner();
    assert_eq!(own.state, pb::TransactionState::Active as i32);
    // Retries through either follower get each key's own transaction.
    assert_eq!(begin(&mut f0, &a, "nightly-job").await.unwrap(), ta);
    assert_eq!(begin(&mut f1, &b, "nightly-job").await.unwrap(), tb);

    // A one-shot begin + acquire: the same, and a retry gets the same grant.
    let once = |lock: &str| pb::AcquireLockRequest { begin: Some(begin_req("once", 10_000)), ..exclusive(0, lock) };
    let granted = |r: pb::AcquireLockResponse| match (r.event, r.begun) {
        (Some(AcquireEvent::Granted(g)), Some(begun)) => (begun.transaction_id, g.fencing_token),
        other => panic!("no grant: {other:?}"),
    };
    let mut s = f0.acquire_lock(keyed(once("a-lock"), &a)).await.unwrap().into_inner();
    let (oa, token) = granted(first(&mut s).await);
    let mut s = on_leader.acquire_lock(keyed(once("b-lock"), &b)).await.expect("B's one-shot").into_inner();
    let (ob, _) = granted(first(&mut s).await);
    assert!(oa != ob && ![ta, tb].contains(&oa) && ![ta, tb].contains(&ob), "{oa} {ob}");
    let mut s = f1.acquire_lock(keyed(once("a-lock"), &a)).await.unwrap().into_inner();
    assert_eq!(granted(first(&mut s).await), (oa, token), "A's retry gets the first answer");

    // After a leader change, through the nodes left: the same answers.
    cluster.kill(leader);
    let next = cluster.wait_for_new_leader(leader, PATIENCE).await;
    let mut c = raw_client(&cluster.addr(next)).await;
    let retry = |c: &mut LockServiceClient<Channel>, key: String| {
        let mut c = c.clone();
        async move { begin(&mut c, &key, "nightly-job").await.ok() }
    };
    let again_a = eventually_async(PATIENCE, "A's retry after the failover", || retry(&mut c, a.clone())).await;
    assert_eq!(again_a, ta);
    assert_eq!(retry(&mut c, b.clone()).await, Some(tb));
}

#[tokio::test]
async fn an_admin_s_heartbeat_does_not_keep_another_key_s_transaction_alive() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let owner = add_key(&file, "owner", &[], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
    let mut c = raw_client(&cluster.addr(1)).await;
    let txn = c.begin_transaction(keyed(begin_req("", 1_000), &owner)).await.unwrap().into_inner().transaction_id;

    // The admin heartbeats it all along, alone and in a batch, and reads its status: it is
    // refused every time and the transaction expires on its own schedule.
    let expired = eventually_async(PATIENCE, "the owner's transaction to expire", || {
        let (mut c, admin) = (c.clone(), admin.clone());
        async move {
            let beat = pb::HeartbeatRequest { transaction_id: txn, more_transaction_ids: vec![] };
            let refused = c.heartbeat(keyed(beat, &admin)).await.expect_err("an admin's heartbeat renewed it");
            assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
            assert!(refused.message().contains("only heartbeats of the key that began"), "{refused:?}");
            let batch = pb::HeartbeatRequest { transaction_id: 0, more_transaction_ids: vec![txn] };
            let results = c.heartbeat(keyed(batch, &admin)).await.unwrap().into_inner().results;
            assert_eq!(results[0].error_kind, "PERMISSION_DENIED", "{results:?}");
            let status = pb::GetTransactionStatusRequest { transaction_id: txn };
            let s = c.get_transaction_status(keyed(status, &admin)).await.unwrap().into_inner();
            (s.state == pb::TransactionState::Expired as i32).then_some(s)
        }
    })
    .await;
    assert_eq!(expired.end_cause, pb::EndCause::LeaseExpired as i32, "{expired:?}");
    // The owner's own heartbeat is what renews: refused now only because it expired.
    let beat = pb::HeartbeatRequest { transaction_id: txn, more_transaction_ids: vec![] };
    assert_eq!(c.heartbeat(keyed(beat, &owner)).await.unwrap_err().code(), Code::FailedPrecondition);
}

/// The cluster id of node `id`'s data directory.
fn cluster_id(cluster: &Cluster, id: u64) -> String {
    let n = cluster.nodes.iter().find(|n| n.id == id).unwrap();
    let text = std::fs::read_to_string(n.data_dir.join("cluster-id.toml")).unwrap();
    let line = text.lines().find(|l| l.starts_with("cluster_id")).expect("cluster_id in cluster-id.toml");
    line.split('"').nth(1).unwrap().to_string()
}

fn plain_channel(addr: &str) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect_lazy()
}

/// A TLS channel to `addr`.
fn tls_channel(addr: &str, tls: ClientTlsConfig) -> Channel {
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .tls_config(tls)
        .unwrap()
        .connect_lazy()
}

/// A cluster of `n` nodes whose peers (and clients) use mutual TLS with the certificates
/// made in `certs` (nodes 1..=`made`).
async fn tls_cluster(certs: &Path, n: usize, made: u64) -> Cluster {
    common::make_certs(certs, made);
    let spec = Spec {
        nodes: n,
        extra: common::tls_flags(certs),
        probe_tls: Some(common::client_tls(certs, None)),
        no_secret: true,
        ..Spec::default()
    };
    Cluster::start_spec(spec).await
}

/// A raft call to node `to` (a payload no raft message decodes from), made with node
/// certificate `cert` claiming to come from node `from`: the peer gate's answer.
async fn raft_call(cluster: &Cluster, certs: &Path, cert: &str, from: u64, to: u64) -> Status {
    let node = cluster.nodes.iter().find(|n| n.id == to).unwrap();
    let mut client = RaftServiceClient::new(tls_channel(&node.peer_addr, common::client_tls(certs, Some(cert))));
    let mut req = Request::new(RaftPayload { data: vec![0xff; 3], is_error: false, seq: 0 });
    let md = req.metadata_mut();
    md.insert("x-dls-cluster-id", cluster_id(cluster, to).parse().unwrap());
    md.insert("x-dls-from-node", from.into());
    md.insert("x-dls-to-node", to.into());
    client.vote(req).await.expect_err("a payload that is no raft message was answered")
}

#[tokio::test]
async fn a_node_certificate_speaks_only_for_its_own_node_and_only_while_it_is_a_member() {
    let certs = tempfile::tempdir().unwrap();
    let cluster = tls_cluster(certs.path(), 3, 4).await;
    // Calls go to the leader: it knows a leader (itself), so it can tell a non-member.
    let target = cluster.wait_for_leader(PATIENCE).await;
    let other = (1..=3).find(|&n| n != target).unwrap();
    let cert = |id: u64| format!("node-{id}");

    // Node `other`'s certificate, as itself: past the gate (the payload is then refused).
    let own = raft_call(&cluster, certs.path(), &cert(other), other, target).await;
    assert_ended(&own, Code::InvalidArgument, "bad raft payload", "a member's own certificate");
    // The same certificate claiming to be another member: refused at the gate.
    let third = 6 - target - other;
    let status = raft_call(&cluster, certs.path(), &cert(other), third, target).await;
    let claims = format!("presents node {other}'s certificate but claims to be node {third}");
    assert_ended(&status, Code::Unauthenticated, &claims, "another node's certificate");
    // The discovery call (asked before a node is a member) checks the same.
    let tls = common::client_tls(certs.path(), Some(&cert(other)));
    let peer_addr = cluster.nodes.iter().find(|n| n.id == target).unwrap().peer_addr.clone();
    let mut discovery = PeerDiscoveryServiceClient::new(tls_channel(&peer_addr, tls));
    let mut ask = Request::new(ClusterStateRequest { node_id: third, joining: false });
    ask.metadata_mut().insert("x-dls-from-node", third.into());
    let status = discovery.cluster_state(ask).await.unwrap_err();
    assert_ended(&status, Code::Unauthenticated, &claims, "discovery with another node's certificate");

    // A certificate of the CA for a node that is not a member.
    let status = raft_call(&cluster, certs.path(), &cert(4), 4, target).await;
    assert_ended(&status, Code::PermissionDenied, "node 4 is not a member", "a non-member's certificate");
    // It may still ask its way in (`--join` asks before it is added).
    let tls = common::client_tls(certs.path(), Some(&cert(4)));
    let mut ask = Request::new(ClusterStateRequest { node_id: 4, joining: true });
    ask.metadata_mut().insert("x-dls-from-node", 4u64.into());
    PeerDiscoveryServiceClient::new(tls_channel(&peer_addr, tls)).cluster_state(ask).await.unwrap();

    // Removing a member is what revokes its certificate, at every node that stays.
    let removed = third;
    let probe = common::client_tls(certs.path(), None);
    let mut admin = AdminServiceClient::new(tls_channel(&cluster.addr(target), probe));
    admin.remove_member(pb::RemoveMemberRequest { node_id: removed }).await.unwrap();
    let (cluster, certs) = (&cluster, certs.path());
    for stays in (1..=3).filter(|&n| n != removed) {
        eventually_async(PATIENCE, "the removed node's certificate to be refused", || async move {
            let status = raft_call(cluster, certs, &cert(removed), removed, stays).await;
            (status.code() == Code::PermissionDenied && status.message().contains("was removed")).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn a_node_with_another_node_s_certificate_is_refused_both_ways() {
    let certs = tempfile::tempdir().unwrap();
    let mut cluster = tls_cluster(certs.path(), 3, 3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let impostor = (1..=3).find(|&n| n != leader).unwrap();
    // The impostor presents the leader's certificate, on every port.
    cluster.kill(impostor);
    for suffix in [".pem", "-key.pem"] {
        let from = certs.path().join(format!("node-{leader}{suffix}"));
        std::fs::copy(from, certs.path().join(format!("node-{impostor}{suffix}"))).unwrap();
    }
    cluster.restart(impostor);

    // The leader does not send it anything (its certificate is not node `impostor`'s)...
    let called = format!("called as node {impostor} presented node {leader}'s certificate");
    eventually(PATIENCE, "the leader to refuse the impostor's certificate", || {
        cluster.log_of(leader).contains(&called).then_some(())
    })
    .await;
    // ...and nobody takes its calls (it claims to be node `impostor`).
    let claims = format!("presents node {leader}'s certificate but claims to be node {impostor}");
    let third = 6 - leader - impostor;
    eventually(PATIENCE, "the other nodes to refuse the impostor's calls", || {
        cluster.log_of(third).contains(&claims).then_some(())
    })
    .await;
    // The two others still serve.
    let probe = common::client_tls(certs.path(), None);
    let mut c = LockServiceClient::new(tls_channel(&cluster.addr(leader), probe));
    let txn = c.begin_transaction(begin_req("", 5_000)).await.unwrap().into_inner().transaction_id;
    let mut s = c.acquire_lock(exclusive(txn, "k")).await.unwrap().into_inner();
    assert!(matches!(first(&mut s).await.event, Some(AcquireEvent::Granted(_))));
}

#[tokio::test]
async fn a_secret_only_cluster_refuses_a_member_whose_peer_address_would_get_the_secret_in_clear() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];
    let mut admin = AdminServiceClient::new(plain_channel(&cluster.addr(follower)));
    let add = |peer_addr: String| pb::AddMemberRequest {
        node_id: 4,
        addr: "127.0.0.1:1".into(),
        peer_addr,
        stay_learner: true,
        catch_up_timeout_ms: 0,
    };

    let refused = admin.add_member(add("10.255.0.4:7080".into())).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    for words in ["10.255.0.4:7080 is not loopback", "in clear", "--peer-tls-cert", "--insecure"] {
        assert!(refused.message().contains(words), "{words:?}: {refused:?}");
    }
    let refused = admin.add_member(add("node-4.example:7080".into())).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "a host name may resolve anywhere: {refused:?}");
    let members = admin.list_members(pb::ListMembersRequest::default()).await.unwrap().into_inner().members;
    assert_eq!(members.len(), 3, "nothing was added: {members:?}");

    // A loopback address is what the start rules allow: it is added.
    let local = format!("127.0.0.1:{}", common::free_port());
    let added = admin.add_member(add(local)).await.unwrap().into_inner().members;
    assert_eq!(added.len(), 4);
    admin.remove_member(pb::RemoveMemberRequest { node_id: 4 }).await.unwrap();
}

/// The response head of a GET on the HTTP port.
async fn head_of(http: &str, path: &str) -> String {
    let mut conn = TcpStream::connect(http).await.unwrap();
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: {http}\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    text.split("\r\n\r\n").next().unwrap().to_ascii_lowercase()
}

#[tokio::test]
async fn the_playground_and_the_api_refuse_to_be_framed_or_sniffed() {
    let cluster = Cluster::start(1).await;
    let http = cluster.http_addr(1);
    for path in ["/playground", "/api/v1/cluster", "/healthz", "/api/v1/transactions/0"] {
        let head = head_of(&http, path).await;
        for header in ["x-frame-options: deny", "x-content-type-options: nosniff", "frame-ancestors 'none'"] {
            assert!(head.contains(header), "{path}: no {header:?} in\n{head}");
        }
    }
    let page = head_of(&http, "/playground").await;
    assert!(page.contains("script-src 'self'"), "the page keeps its own policy:\n{page}");
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `dls serve` on loopback with `args`: its exit status (None if it was serving), and its output.
fn serve(args: &[&str]) -> (Option<std::process::ExitStatus>, String) {
    let dir = tempfile::tempdir().unwrap();
    let addr = || format!("127.0.0.1:{}", common::free_port());
    let log: PathBuf = dir.path().join("log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(common::dls_bin())
        .args(["serve", "--listen", &addr(), "--http-listen", &addr(), "--data-dir"])
        .arg(dir.path().join("data"))
        .args(args)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline || std::fs::read_to_string(&log).unwrap_or_default().contains("dls serving") {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(&log).unwrap())
}

#[tokio::test]
async fn files_holding_secrets_are_owner_only_and_a_readable_cluster_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // `dls keys add` over a keys file someone made readable by everyone.
    let keys = dir.path().join("keys.toml");
    add_key(&keys, "first", &[], false);
    set_mode(&keys, 0o644);
    add_key(&keys, "second", &[], false);
    assert_eq!(mode(&keys), 0o600, "dls keys add leaves the keys file owner-only");
    // `dls certs ... --force` over a key file readable by everyone.
    let certs = dir.path().join("certs");
    common::make_certs(&certs, 1);
    set_mode(&certs.join("node-1-key.pem"), 0o644);
    let d = certs.to_str().unwrap();
    common::dls(&["certs", "node", "1", "--host", "127.0.0.1", "--dir", d, "--force"]);
    assert_eq!(mode(&certs.join("node-1-key.pem")), 0o600, "a replaced key file is owner-only");

    // A cluster secret its group may read: refused, naming the file, its mode and the fix.
    let secret = dir.path().join("cluster-secret");
    std::fs::write(&secret, "a-cluster-secret-of-32-characters").unwrap();
    set_mode(&secret, 0o640);
    let file = secret.to_str().unwrap();
    let (status, out) = serve(&["--cluster-secret-file", file]);
    assert!(status.is_some_and(|s| !s.success()), "started with a readable secret:\n{out}");
    for words in [file, "mode 0640", &format!("chmod 600 {file}")] {
        assert!(out.contains(words), "{words:?} not in:\n{out}");
    }
    // A private key every user may read: refused too; owner-only: served.
    set_mode(&secret, 0o600);
    let key = certs.join("node-1-key.pem");
    set_mode(&key, 0o644);
    let tls = ["--tls-cert", &format!("{d}/node-1.pem"), "--tls-key", key.to_str().unwrap()];
    let (status, out) = serve(&tls);
    assert!(status.is_some_and(|s| !s.success()) && out.contains("--tls-key") && out.contains("0644"), "{out}");
    set_mode(&key, 0o600);
    let (status, out) = serve(&[&tls[..], &["--cluster-secret-file", file]].concat());
    assert!(status.is_none(), "owner-only files are accepted:\n{out}");
}

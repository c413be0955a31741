//! Followers forward clients' calls to the leader over the peer channel: a client that
//! reaches only followers (or whose route to the leader is cut) keeps getting grants, the
//! leader still authenticates every call and applies the request-id rules, and a follower
//! holds only a bounded number of forwarded calls.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, Error, LockMode};
use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::event::Detail;
use caerus_proto::v1::{self as pb, lock_service_client::LockServiceClient};
use common::{add_key, opts, queued, raw_client, wait, Cluster, Proxies, Spec, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};

/// The followers of `leader`, once each knows it leads (a follower that knows no leader
/// answers NOT_LEADER itself, as it should).
async fn followers_of(cluster: &Cluster, leader: u64) -> Vec<u64> {
    let ids: Vec<u64> = cluster.nodes.iter().map(|n| n.id).filter(|id| *id != leader).collect();
    let knows = || ids.iter().all(|id| (cluster.metric(*id, "dls_leader_id") as u64) == leader).then_some(());
    common::eventually(PATIENCE, "the followers to know the leader", knows).await;
    ids
}

fn keyed<T>(msg: T, key: Option<&str>) -> Request<T> {
    let mut req = Request::new(msg);
    if let Some(k) = key {
        req.metadata_mut().insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    req
}

fn begin_req(request_id: &str) -> pb::BeginTransactionRequest {
    pb::BeginTransactionRequest { timeout_ms: 10_000, request_id: request_id.into(), ..Default::default() }
}

async fn begin(c: &mut LockServiceClient<Channel>, request_id: &str) -> Result<u64, Status> {
    Ok(c.begin_transaction(begin_req(request_id)).await?.into_inner().transaction_id)
}

fn acquire_req(txn: u64, key: &str, request_id: &str) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: key.into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 60_000,
        request_id: request_id.into(),
        ..Default::default()
    }
}

/// Reads an AcquireLock stream to its grant; the fencing token.
async fn granted(stream: &mut Streaming<pb::AcquireLockResponse>) -> u64 {
    loop {
        match stream.message().await.unwrap().expect("the stream ended without a grant").event {
            Some(AcquireEvent::Granted(g)) => return g.fencing_token,
            Some(AcquireEvent::Queued(_)) => continue,
            Some(AcquireEvent::Lost(l)) => panic!("lost before a grant: {l:?}"),
            None => panic!("an acquire message without an event"),
        }
    }
}

async fn grant(c: &mut LockServiceClient<Channel>, txn: u64, key: &str, request_id: &str) -> u64 {
    granted(&mut c.acquire_lock(acquire_req(txn, key, request_id)).await.unwrap().into_inner()).await
}

/// Opens an acquire that must queue; returns its stream after the first `queued` message.
async fn waiting(c: &mut LockServiceClient<Channel>, txn: u64, key: &str) -> Streaming<pb::AcquireLockResponse> {
    let mut stream = c.acquire_lock(acquire_req(txn, key, &format!("w-{txn}"))).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap().event;
    assert!(matches!(first, Some(AcquireEvent::Queued(_))), "{first:?}");
    stream
}

/// A counter of `/metrics` (the unlabelled line `name value`, or a labelled one in full).
#[tokio::test]
async fn followers_serve_every_call_by_forwarding_it_and_a_waiter_gets_its_grant_through_them() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let fs = followers_of(&cluster, leader).await;
    let (mut a, mut b) = (raw_client(&cluster.addr(fs[0])).await, raw_client(&cluster.addr(fs[1])).await);

    // A follower answers the call itself now, naming the leader that did the work.
    let answer = a.begin_transaction(begin_req("")).await.unwrap();
    assert_eq!(answer.metadata().get("x-dls-forwarded-to").unwrap().to_str().unwrap(), leader.to_string());
    assert_eq!(answer.metadata().get("x-dls-leader-addr").unwrap().to_str().unwrap(), cluster.addr(leader));
    let holder = answer.into_inner().transaction_id;
    let beat = a.heartbeat(pb::HeartbeatRequest { transaction_id: holder, ..Default::default() }).await.unwrap();
    assert!(beat.into_inner().lease_remaining_ms > 0);
    let held = grant(&mut a, holder, "k", "h").await;

    // A waiter queued through the other follower gets its grant on the forwarded stream.
    let waiter = begin(&mut b, "").await.unwrap();
    let mut stream = waiting(&mut b, waiter, "k").await;
    let release = pb::ReleaseLockRequest {
        transaction_id: holder,
        namespace: "ns".into(),
        key: "k".into(),
        ..Default::default()
    };
    assert!(a.release_lock(release).await.unwrap().into_inner().released);
    let next = granted(&mut stream).await;
    assert!(next > held, "token {next} after {held}");
    for (c, txn) in [(&mut a, holder), (&mut b, waiter)] {
        let end =
            c.end_transaction(pb::EndTransactionRequest { transaction_id: txn, commit: true, ..Default::default() });
        assert_eq!(end.await.unwrap().into_inner().state, pb::TransactionState::Committed as i32);
    }
    assert!(fs.iter().all(|id| (cluster.metric(*id, "dls_forwarded_calls_total") as u64) >= 3));
    assert_eq!(cluster.metric(leader, "dls_forwarded_calls_total") as u64, 0, "the leader serves, never forwards");

    // The core client given only a follower learns the leader from the relayed answer and
    // goes there directly (it can reach it here): the follower forwards nothing more.
    let c = DlsClient::connect(ClientConfig::new([cluster.addr(fs[0])]).without_api_key()).await.unwrap();
    let tx = c.begin_transaction(opts(5_000)).await.unwrap();
    let before = cluster.metric(fs[0], "dls_forwarded_calls_total") as u64;
    let lock = tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(1_000)).await.unwrap();
    assert!(lock.fencing_token > next);
    assert!(tx.release("ns", "k").await.unwrap());
    tx.commit().await.unwrap();
    assert_eq!(cluster.metric(fs[0], "dls_forwarded_calls_total") as u64, before);
}

#[tokio::test]
async fn request_id_retries_through_two_followers_get_one_transaction_and_one_grant() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let fs = followers_of(&cluster, leader).await;
    let (mut a, mut b) = (raw_client(&cluster.addr(fs[0])).await, raw_client(&cluster.addr(fs[1])).await);

    let txn = begin(&mut a, "begin-1").await.unwrap();
    assert_eq!(begin(&mut b, "begin-1").await.unwrap(), txn, "a retried begin returns its transaction");
    let token = grant(&mut a, txn, "k", "acquire-1").await;
    assert_eq!(grant(&mut b, txn, "k", "acquire-1").await, token, "a retried acquire returns its grant");
    let status = b.get_transaction_status(pb::GetTransactionStatusRequest { transaction_id: txn }).await.unwrap();
    assert_eq!(status.into_inner().locks.len(), 1);
    // The retry took no token: the next grant is the very next one.
    assert_eq!(grant(&mut b, txn, "other", "acquire-2").await, token + 1);
}

#[tokio::test]
async fn both_the_follower_and_the_leader_authenticate_and_the_peer_port_still_wants_peer_credentials() {
    // Every node starts with keys "app" and "stale"; the leader's file later loses "stale"
    // (a revocation that reached the leader first).
    let dir = tempfile::tempdir().unwrap();
    let app_only = dir.path().join("app-only.toml");
    let key = add_key(&app_only, "app", &[], false);
    let both = dir.path().join("both.toml");
    std::fs::copy(&app_only, &both).unwrap();
    let stale = add_key(&both, "stale", &[], false);
    for id in 1..=3 {
        std::fs::copy(&both, dir.path().join(format!("keys-{id}.toml"))).unwrap();
    }
    let keys_flag = format!("--api-keys-file={}/keys-{{id}}.toml", dir.path().display());
    let cluster = Cluster::start_full(3, &[&keys_flag], Some(key.clone())).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];
    let mut raw = raw_client(&cluster.addr(follower)).await;

    // A bad key is refused by the follower itself, from the headers: nothing reaches the leader.
    let err = raw.begin_transaction(keyed(begin_req(""), Some("dls_not-a-key"))).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(err.message().contains("unknown API key"), "{err:?}");
    assert!(err.metadata().get("x-dls-forwarded-to").is_none(), "refused by the follower: {err:?}");
    let err = raw.begin_transaction(keyed(begin_req(""), None)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    let ok = raw.begin_transaction(keyed(begin_req(""), Some(&key))).await.unwrap();
    assert!(ok.into_inner().transaction_id > 0);

    // The leader judges a forwarded call by its own keys: a key it revoked is refused even
    // through a follower whose file still has it.
    std::fs::copy(&app_only, dir.path().join(format!("keys-{leader}.toml"))).unwrap();
    cluster.signal(leader, "HUP");
    let refused = || async {
        let err = raw_client(&cluster.addr(follower))
            .await
            .begin_transaction(keyed(begin_req(""), Some(&stale)))
            .await
            .err()?;
        (err.code() == Code::Unauthenticated).then_some(err)
    };
    let err = common::eventually_async(PATIENCE, "the leader to refuse the revoked key", refused).await;
    assert_eq!(err.metadata().get("x-dls-forwarded-to").unwrap().to_str().unwrap(), leader.to_string(), "{err:?}");

    // The client services on the peer port answer nodes of the cluster only, whatever the
    // API key: a client cannot skip the follower's hop to pose as one.
    for n in &cluster.nodes {
        let mut peer = raw_client(&n.peer_addr).await;
        let err = peer.begin_transaction(keyed(begin_req(""), Some(&key))).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "node {}: {err:?}", n.id);
        assert!(err.message().contains("cluster secret"), "node {}: {err:?}", n.id);
        let mut req = keyed(begin_req(""), Some(&key));
        req.metadata_mut().insert("x-dls-peer-secret", "not-the-cluster-secret".parse().unwrap());
        req.metadata_mut().insert("x-dls-forwarded-for", "10.9.9.9:1".parse().unwrap());
        assert_eq!(peer.begin_transaction(req).await.unwrap_err().code(), Code::Unauthenticated);
    }
}

#[tokio::test]
async fn a_follower_bounds_its_forwarded_calls_and_frees_a_place_when_the_client_hangs_up() {
    let cluster = Cluster::start_with(3, &["--max-forwarded-calls", "2"]).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];
    let mut f = raw_client(&cluster.addr(follower)).await;
    let mut direct = raw_client(&cluster.addr(leader)).await;

    let holder = begin(&mut f, "").await.unwrap();
    grant(&mut f, holder, "k", "h").await;
    let idle = || ((cluster.metric(follower, "dls_forwarded_calls_open") as u64) == 0).then_some(());
    common::eventually(PATIENCE, "the granted stream's place freed", idle).await;
    let (w1, w2) = (begin(&mut f, "").await.unwrap(), begin(&mut f, "").await.unwrap());
    let first = waiting(&mut f, w1, "k").await;
    let _second = waiting(&mut f, w2, "k").await;

    // Two streams are open through the follower: the next call is refused, untouched.
    let err = begin(&mut f, "refused").await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("--max-forwarded-calls 2"), "{err:?}");
    assert!(err.metadata().get("x-dls-forwarded-to").is_none(), "refused by the follower itself");
    let err = f.acquire_lock(acquire_req(w1, "x", "x")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(cluster.metric(follower, "dls_forwarded_calls_open") as u64, 2);
    assert!((cluster.metric(follower, "dls_refused_total{limit=\"max-forwarded-calls\"}") as u64) >= 2);
    // The bound is the follower's own: the leader serves the same call. Nothing was
    // proposed for the refused begin: its request id starts a new transaction now.
    let other = begin(&mut direct, "").await.unwrap();
    assert!(begin(&mut direct, "refused").await.unwrap() > other);

    // The client hangs up one stream: the follower drops its forwarded stream and the place.
    drop(first);
    common::eventually(PATIENCE, "a freed forwarding place", || {
        ((cluster.metric(follower, "dls_forwarded_calls_open") as u64) == 1).then_some(())
    })
    .await;
    begin(&mut f, "").await.unwrap();
}

#[tokio::test]
async fn with_mutual_tls_between_nodes_the_hop_is_made_with_the_followers_node_certificate() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 3);
    let tls = common::client_tls(certs.path(), None);
    let spec = Spec {
        nodes: 3,
        extra: common::tls_flags(certs.path()),
        probe_tls: Some(tls.clone()),
        no_secret: true,
        ..Spec::default()
    };
    let cluster = Cluster::start_spec(spec).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let mut raw = common::raw_tls_client(&cluster.addr(follower), &tls);
    // Until it has heard from the leader, the follower answers NOT_LEADER without an address.
    let answer = common::eventually_async(PATIENCE, "a relayed answer", || {
        let mut raw = raw.clone();
        async move { raw.begin_transaction(begin_req("")).await.ok() }
    })
    .await;
    assert_eq!(answer.metadata().get("x-dls-forwarded-to").unwrap().to_str().unwrap(), leader.to_string());
    raw.heartbeat(pb::HeartbeatRequest { transaction_id: answer.into_inner().transaction_id, ..Default::default() })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_follower_that_cannot_reach_a_leader_answers_not_leader_as_before() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let fs = followers_of(&cluster, leader).await;
    cluster.kill(leader);
    cluster.kill(fs[1]);
    // At first the survivor still takes the dead node for the leader (its forward fails to
    // connect), then it knows none: either way the client gets NOT_LEADER, at once.
    let mut survivor = raw_client(&cluster.addr(fs[0])).await;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let mut req = Request::new(begin_req(""));
        req.set_timeout(Duration::from_secs(2));
        let err = survivor.begin_transaction(req).await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert_eq!(err.metadata().get("x-dls-error").unwrap(), "NOT_LEADER", "{err:?}");
        assert!(err.metadata().get("x-dls-forwarded-to").is_none(), "{err:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn only_new() -> pb::WatchEventsRequest {
    pb::WatchEventsRequest { only_new: true, ..Default::default() }
}

#[tokio::test]
async fn event_watches_through_a_follower_count_against_the_clients_own_connection_and_end_with_it() {
    let flags = ["--max-watches-per-connection", "1", "--max-watches-per-api-key", "2"];
    let cluster = Cluster::start_with(3, &flags).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];
    // Three client connections, all to the same follower.
    let (mut a, mut b, mut c) = (
        raw_client(&cluster.addr(follower)).await,
        raw_client(&cluster.addr(follower)).await,
        raw_client(&cluster.addr(follower)).await,
    );

    let opened = a.watch_events(only_new()).await.unwrap();
    assert_eq!(opened.metadata().get("x-dls-forwarded-to").unwrap().to_str().unwrap(), leader.to_string());
    assert!(opened.metadata().get("x-dls-first-sequence").is_some(), "the leader's stream headers are relayed");
    let mut first = opened.into_inner();
    // The leader counts the client's connection, not the follower's: a second watch on `a`
    // is refused, one on `b` is not.
    let err = a.watch_events(only_new()).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("--max-watches-per-connection 1"), "{err:?}");
    let mut second = b.watch_events(only_new()).await.unwrap().into_inner();

    // An operator's abort through the follower (a forwarded AdminService call) reaches both.
    let txn = begin(&mut a, "").await.unwrap();
    grant(&mut a, txn, "k", "w").await;
    let mut admin = AdminServiceClient::new(
        Channel::from_shared(format!("http://{}", cluster.addr(follower))).unwrap().connect_lazy(),
    );
    let abort = pb::AbortTransactionRequest { transaction_id: txn, reason: "test".into(), ..Default::default() };
    admin.abort_transaction(abort).await.unwrap();
    for stream in [&mut first, &mut second] {
        let e = stream.message().await.unwrap().unwrap();
        assert!(matches!(&e.detail, Some(Detail::TransactionAborted(t)) if t.transaction_id == txn), "{e:?}");
    }

    // The key's two watches are open: a third connection is refused, until a client hangs
    // up: the follower drops its stream, and with it the leader its stream and the place.
    let err = c.watch_events(only_new()).await.unwrap_err();
    assert!(err.message().contains("--max-watches-per-api-key 2"), "{err:?}");
    drop(second);
    common::eventually_async(PATIENCE, "the dropped watch's place to be freed", || {
        let mut c = c.clone();
        async move { c.watch_events(only_new()).await.ok() }
    })
    .await;
}

/// A TCP proxy in front of one node's client port. Cut, it turns into a black hole: new
/// connections are accepted and never answered, open ones stop carrying bytes (nothing is
/// refused or reset, as when a firewall drops packets).
struct Proxy {
    cut: Arc<AtomicBool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(listen: &str, target: String) -> Proxy {
        let listener = TcpListener::bind(listen).await.unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (cut, target) = (flag.clone(), target.clone());
                tokio::spawn(async move {
                    if cut.load(Ordering::SeqCst) {
                        // Held open, never read: the caller's bytes go nowhere.
                        std::future::pending::<()>().await;
                    }
                    let Ok(outbound) = TcpStream::connect(&target).await else { return };
                    let _ = outbound.set_nodelay(true);
                    let _ = inbound.set_nodelay(true);
                    let (ri, wi) = inbound.into_split();
                    let (ro, wo) = outbound.into_split();
                    tokio::join!(pipe(ri, wo, cut.clone()), pipe(ro, wi, cut));
                });
            }
        });
        Proxy { cut, accept }
    }

    fn cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies bytes one way until either side closes; stalls for good once the proxy is cut.
async fn pipe(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, cut: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A client that gives up on a silent node after 1 s (a dropped packet is not refused).
fn config_for(endpoints: impl IntoIterator<Item = String>) -> ClientConfig {
    ClientConfig::new(endpoints)
        .without_api_key()
        .with_request_timeout(Duration::from_secs(1))
        .with_retry_deadline(Duration::from_secs(30))
}

#[tokio::test]
async fn with_the_route_to_the_leader_cut_grants_keep_coming_through_the_followers() {
    // Each node advertises (in --peers) the address of a proxy in front of it and listens
    // behind it, so every way the client reaches a node, redirects included, passes a proxy.
    let spec = Spec { nodes: 3, proxies: Proxies::CallerClient, ..Spec::default() };
    let cluster = Cluster::spawn_spec(spec);
    let mut proxies = Vec::new();
    for n in &cluster.nodes {
        proxies.push((n.id, Proxy::start(&n.addr, n.listen.clone()).await));
    }
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let leader_proxy = &proxies.iter().find(|(id, _)| *id == leader).unwrap().1;
    // The leader first, so the client talks to it directly until the cut.
    let mut endpoints = vec![cluster.addr(leader)];
    endpoints.extend(followers_of(&cluster, leader).await.iter().map(|id| cluster.addr(*id)));
    let c = DlsClient::connect(config_for(endpoints)).await.unwrap();

    // One worker takes "hot" again and again, recording when each grant came and its token.
    let grants: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (c, grants, stop) = (c.clone(), grants.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                c.with_transaction(opts(5_000), |tx| {
                    let grants = grants.clone();
                    async move {
                        let l = tx.acquire_lock("ns", "hot", LockMode::Exclusive, wait(10_000)).await?;
                        grants.lock().unwrap().push((Instant::now(), l.fencing_token));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok::<_, Error>(())
                    }
                })
                .await
                .expect("every transaction completes");
            }
        })
    };
    common::eventually(PATIENCE, "grants before the cut", || (grants.lock().unwrap().len() >= 5).then_some(())).await;

    leader_proxy.cut(true);
    let cut_at = Instant::now();
    // A holder and a waiter queued behind it, both begun while the leader is out of reach:
    // the waiter's grant reaches it through a follower's forwarded stream.
    let holder = c.begin_transaction(opts(5_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "q", LockMode::Exclusive, wait(10_000)).await.unwrap();
    let waiter = c.begin_transaction(opts(5_000)).await.unwrap();
    let pending = queued(&waiter, "q").await;
    holder.commit().await.unwrap();
    let next = pending.await.unwrap().unwrap();
    assert!(next.fencing_token > held.fencing_token);
    waiter.commit().await.unwrap();
    // A client started during the cut with only followers' addresses learns from a relayed
    // answer where the leader is, finds it out of reach, and goes on through the followers.
    let late = DlsClient::connect(config_for(followers_of(&cluster, leader).await.iter().map(|id| cluster.addr(*id))))
        .await
        .unwrap();
    for _ in 0..3 {
        let tx = late.begin_transaction(opts(5_000)).await.unwrap();
        tx.acquire_lock("ns", "late", LockMode::Exclusive, wait(10_000)).await.unwrap();
        tx.commit().await.unwrap();
    }
    // The worker keeps getting grants through the followers while the leader stays cut off
    // (how soon is a benchmark's business; on a loaded machine the first one can take a
    // few request timeouts).
    let during_cut = |g: &Vec<(Instant, u64)>| g.iter().filter(|(at, _)| *at > cut_at).count();
    common::eventually(PATIENCE, "5 grants to the worker while the leader is cut off", || {
        (during_cut(&grants.lock().unwrap()) >= 5).then_some(())
    })
    .await;
    let cut_for = cut_at.elapsed();
    leader_proxy.cut(false);
    stop.store(true, Ordering::SeqCst);
    worker.await.unwrap();

    let grants = grants.lock().unwrap().clone();
    assert!(grants.windows(2).all(|w| w[0].1 < w[1].1), "tokens must rise: {grants:?}");
    let during: Vec<&(Instant, u64)> = grants.iter().filter(|(at, _)| *at > cut_at && *at < cut_at + cut_for).collect();
    let first = during.first().map(|(at, _)| at.duration_since(cut_at));
    let longest_gap = during.windows(2).map(|w| w[1].0.duration_since(w[0].0)).max().unwrap_or_default();
    eprintln!(
        "cut for {cut_for:?}: {} grants during the cut, first after {first:?}, longest gap {longest_gap:?}",
        during.len()
    );
    assert!(during.len() >= 5, "only {} grants while the leader was cut off for {cut_for:?}", during.len());
    assert_eq!(cluster.wait_for_leader(PATIENCE).await, leader, "the leader itself was never in trouble");
}

/// A follower's NOT_LEADER once its leader stopped answering: never sending the client
/// back to `silent`.
fn moved_on_from(err: &Status, silent: &str) {
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(err.metadata().get("x-dls-error").unwrap(), "NOT_LEADER", "{err:?}");
    let hint = err.metadata().get("x-dls-leader-addr").map(|v| v.to_str().unwrap().to_string());
    assert_ne!(hint.as_deref(), Some(silent), "{err:?}");
}

#[tokio::test]
async fn a_call_and_a_stream_forwarded_to_a_paused_leader_end_with_not_leader_at_once() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = followers_of(&cluster, leader).await[0];
    let mut f = raw_client(&cluster.addr(follower)).await;
    let holder = begin(&mut f, "").await.unwrap();
    grant(&mut f, holder, "k", "h").await;
    let waiter = begin(&mut f, "").await.unwrap();
    let mut stream = waiting(&mut f, waiter, "k").await;

    // The leader stops answering, its connections open (SIGSTOP): nothing is refused or
    // reset, so only the follower's view of raft tells that it is gone.
    cluster.pause(leader);
    let paused_at = Instant::now();
    let mut req = Request::new(begin_req(""));
    req.set_timeout(Duration::from_secs(60));
    let err = f.begin_transaction(req).await.unwrap_err();
    let answered_after = paused_at.elapsed();
    moved_on_from(&err, &cluster.addr(leader));
    // Within an election (0.3–0.6 s in these clusters, and the follower's wait for the new
    // leader's name), not at the client's deadline or the hop's keepalive (5–10 s).
    assert!(answered_after < Duration::from_secs(4), "answered after {answered_after:?}");
    // The waiting stream ends the same way; the wait itself lives on in the table.
    moved_on_from(&stream.message().await.unwrap_err(), &cluster.addr(leader));
    let new_leader = cluster.addr(cluster.wait_for_new_leader(leader, PATIENCE).await);
    // Re-attached on the new leader with its request id, the wait is still there.
    let again = common::eventually_async(PATIENCE, "the new leader to serve the re-attach", || {
        let new_leader = new_leader.clone();
        async move {
            let mut next = raw_client(&new_leader).await;
            next.acquire_lock(acquire_req(waiter, "k", &format!("w-{waiter}"))).await.ok()
        }
    })
    .await;
    let first = again.into_inner().message().await.unwrap().unwrap().event;
    assert!(matches!(first, Some(AcquireEvent::Queued(_))), "{first:?}");
    cluster.resume(leader);
}

#[tokio::test]
async fn the_core_client_given_every_node_is_served_by_the_new_leader_after_the_old_one_is_paused() {
    // The server's own raft timers (followers stand after 450–600 ms of silence): what a 2 s
    // lease is measured against.
    let mut cluster = Cluster::start_spec(Spec { nodes: 3, fast_elections: false, ..Spec::default() }).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let c = DlsClient::connect(config_for(cluster.endpoints())).await.unwrap();
    let holder = c.begin_transaction(opts(2_000)).await.unwrap();
    holder.acquire_lock("ns", "k", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let waiter = c.begin_transaction(opts(2_000)).await.unwrap();
    let pending = queued(&waiter, "k").await;

    // The leader stops answering with every connection open (SIGSTOP): nothing is refused
    // or reset. The holder's commit finds the new leader.
    cluster.pause(leader);
    holder.commit().await.unwrap();
    let committed = Instant::now();
    // The waiter's stream, open on the silent node, moves to the new leader once the client
    // has seen that node give no answer, instead of waiting for the connection's keepalive
    // (10–15 s): it hears its grant, and both leases live on.
    let lock = pending.await.unwrap().unwrap();
    let heard_after = committed.elapsed();
    assert!(heard_after < Duration::from_secs(5), "the waiter heard its grant {heard_after:?} after the commit");
    assert!(lock.fencing_token > 0);
    for _ in 0..5 {
        let t = c.begin_transaction(opts(2_000)).await.unwrap();
        t.commit().await.unwrap();
    }
    let status = c.transaction_status(waiter.id()).await.unwrap();
    assert_eq!(status.state, caerus_core::TransactionState::Active, "{status:?}");
    assert!(!waiter.is_lost(), "{:?}", waiter.lost_reason());
    waiter.commit().await.unwrap();
    cluster.resume(leader);
}

#[tokio::test]
async fn with_the_leader_cut_off_silently_a_client_of_the_majority_keeps_its_transactions() {
    // The server's own raft timers, as in the previous test.
    let spec = Spec { nodes: 3, proxies: Proxies::Kit, fast_elections: false, ..Spec::default() };
    let cluster = Cluster::start_spec(spec).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    // Transactions with a 2 s lease, begun apart so that the cut finds their heartbeats at
    // different points of their cycle.
    let mut held = Vec::new();
    for i in 0..4 {
        let tx = c.begin_transaction(opts(2_000)).await.unwrap();
        tx.acquire_lock("ns", &format!("k{i}"), LockMode::Exclusive, wait(1_000)).await.unwrap();
        held.push(tx);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    // The leader is cut off from the other nodes and from this client, as when its packets
    // are dropped: its connections stay open, silent.
    let links = cluster.links();
    links.set_silent(true);
    links.partition(&[leader], &others);
    links.block(common::proxy::HARNESS, leader);
    let new_leader = common::eventually_async(PATIENCE, "a new leader on the majority side", || {
        let c = c.clone();
        let cluster = &cluster;
        async move { cluster.leader_by_term(&c).await.filter(|l| *l != leader) }
    })
    .await;
    // Several leases later every transaction is still alive, on the new leader.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for tx in &held {
        assert!(!tx.is_lost(), "transaction {} lost: {:?}", tx.id(), tx.lost_reason());
        let status = c.transaction_status(tx.id()).await.unwrap();
        assert_eq!(status.state, caerus_core::TransactionState::Active, "{status:?}");
    }
    eprintln!("node {new_leader} leads; the old leader {leader} stays cut off");
    links.heal();
    for tx in held {
        tx.commit().await.unwrap();
    }
}

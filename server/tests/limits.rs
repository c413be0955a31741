//! Every limit against real `dls` processes started with small limits: the refusal is
//! RESOURCE_EXHAUSTED (x-dls-error RESOURCE_EXHAUSTED) naming the limit and its flag, and
//! it changes nothing; an overloaded leader sheds new work with UNAVAILABLE and a retry
//! hint. Raw generated clients, so every status reaches the test as the server sent it.

use crate::common;

use std::time::Duration;

use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::*;
use common::{add_key, http_post, raw_client, Cluster, PATIENCE};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const EX: i32 = LockMode::Exclusive as i32;

/// A request carrying `key` (None: a server without keys).
fn req<T>(msg: T, key: Option<&str>) -> Request<T> {
    let mut r = Request::new(msg);
    if let Some(k) = key {
        r.metadata_mut().insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    r
}

fn begin_req(request_id: &str) -> BeginTransactionRequest {
    BeginTransactionRequest {
        timeout_ms: 60_000,
        priority: 0,
        name: "t".into(),
        request_id: request_id.into(),
        ..Default::default()
    }
}

async fn begin(c: &mut LockServiceClient<Channel>, key: Option<&str>, request_id: &str) -> Result<u64, Status> {
    Ok(c.begin_transaction(req(begin_req(request_id), key)).await?.into_inner().transaction_id)
}

fn acquire_req(txn: u64, key: &str, request_id: &str) -> AcquireLockRequest {
    AcquireLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: key.into(),
        mode: EX,
        timeout_ms: 60_000,
        request_id: request_id.into(),
        begin: None,
        stay_open: false,
        permits: 0,
    }
}

/// Runs an AcquireLock until its first message: the token of a grant, or 0 when queued.
async fn acquire_first(
    c: &mut LockServiceClient<Channel>,
    r: impl tonic::IntoRequest<AcquireLockRequest>,
) -> Result<u64, Status> {
    let mut stream = c.acquire_lock(r).await?.into_inner();
    match stream.message().await?.and_then(|m| m.event) {
        Some(AcquireEvent::Granted(g)) => Ok(g.fencing_token),
        Some(AcquireEvent::Queued(_)) => Ok(0),
        Some(AcquireEvent::Lost(_)) => Err(Status::internal("lost without stay_open")),
        None => Err(Status::internal("the stream ended without a message")),
    }
}

async fn status(c: &mut LockServiceClient<Channel>, txn: u64) -> GetTransactionStatusResponse {
    c.get_transaction_status(GetTransactionStatusRequest { transaction_id: txn }).await.unwrap().into_inner()
}

/// A RESOURCE_EXHAUSTED refusal whose message says `mentions`.
fn assert_refused<T: std::fmt::Debug>(r: Result<T, Status>, mentions: &str) {
    let s = r.expect_err("expected a RESOURCE_EXHAUSTED refusal");
    assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
    assert_eq!(s.metadata().get("x-dls-error").and_then(|v| v.to_str().ok()), Some("RESOURCE_EXHAUSTED"), "{s:?}");
    assert!(s.message().contains(mentions), "message {:?} should say {mentions:?}", s.message());
}

#[tokio::test]
async fn active_transactions_are_bounded_per_api_key_and_a_refused_begin_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let add = |name: &str, admin| add_key(&file, name, &[], admin);
    let (a, b, admin) = (add("a", false), add("b", false), add("admin", true));
    let flags = ["--api-keys-file", file.to_str().unwrap(), "--max-txns-per-api-key", "2"];
    let cluster = Cluster::start_full(1, &flags, Some(admin)).await;
    let mut c = raw_client(&cluster.endpoints()[0]).await;
    let (a, b) = (Some(a.as_str()), Some(b.as_str()));

    let t1 = begin(&mut c, a, "a-1").await.unwrap();
    let t2 = begin(&mut c, a, "a-2").await.unwrap();
    let limit = "API key \"a\" has 2 active transactions (limit --max-txns-per-api-key 2)";
    assert_refused(begin(&mut c, a, "a-3").await, limit);
    // A one-shot start is a begin too.
    let mut one_shot = acquire_req(0, "k", "acq-1");
    one_shot.begin = Some(begin_req("a-4"));
    assert_refused(acquire_first(&mut c, req(one_shot, a)).await, limit);
    // Over HTTP the same refusal is 429 with the same kind and message.
    let (code, body) = http_post(&cluster.http_addr(1), "/api/v1/transactions", r#"{"timeout_ms": 60000}"#, a).unwrap();
    assert_eq!(code, 429, "{body}");
    assert!(
        body.contains(r#""kind":"RESOURCE_EXHAUSTED""#) && body.contains("(limit --max-txns-per-api-key 2)"),
        "{body}"
    );
    // A retry of a begin that went through is answered, not refused.
    assert_eq!(begin(&mut c, a, "a-2").await.unwrap(), t2);
    // Another key has its own bound, and the refused begins took no transaction id.
    let tb = begin(&mut c, b, "b-1").await.unwrap();
    assert_eq!(tb, t2 + 1, "a refused begin must not create a transaction");
    // Ending one frees a place.
    let end = EndTransactionRequest { transaction_id: t1, commit: true, request_id: "end-1".into() };
    c.end_transaction(req(end, a)).await.unwrap();
    assert_eq!(begin(&mut c, a, "a-3").await.unwrap(), tb + 1);
}

#[tokio::test]
async fn locks_per_transaction_are_bounded_and_a_refused_acquire_takes_nothing() {
    let cluster = Cluster::start_with(1, &["--max-locks-per-txn", "2"]).await;
    let mut c = raw_client(&cluster.endpoints()[0]).await;
    let t = begin(&mut c, None, "t").await.unwrap();
    let ta = acquire_first(&mut c, acquire_req(t, "a", "a")).await.unwrap();
    let tb = acquire_first(&mut c, acquire_req(t, "b", "b")).await.unwrap();
    assert_refused(
        acquire_first(&mut c, acquire_req(t, "c", "c")).await,
        &format!("transaction {t} holds or asks for 2 locks (limit --max-locks-per-txn 2)"),
    );
    // Re-acquiring a lock it holds adds nothing, so it is answered.
    assert_eq!(acquire_first(&mut c, acquire_req(t, "a", "a-again")).await.unwrap(), ta);
    let st = status(&mut c, t).await;
    assert_eq!(st.locks.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    // Nothing was granted for the refusal: the next grant has the next token.
    let u = begin(&mut c, None, "u").await.unwrap();
    assert_eq!(acquire_first(&mut c, acquire_req(u, "c", "u-c")).await.unwrap(), tb + 1);
    // Releasing one lets the transaction take another.
    let release =
        ReleaseLockRequest { transaction_id: t, namespace: "ns".into(), key: "a".into(), request_id: "r".into() };
    assert!(c.release_lock(release).await.unwrap().into_inner().released);
    assert_eq!(acquire_first(&mut c, acquire_req(t, "d", "d")).await.unwrap(), tb + 2);
}

#[tokio::test]
async fn waiters_per_lock_are_bounded_and_a_refused_request_does_not_queue() {
    let cluster = Cluster::start_with(1, &["--max-waiters-per-lock", "2"]).await;
    let addr = cluster.endpoints()[0].clone();
    let mut c = raw_client(&addr).await;
    let holder = begin(&mut c, None, "h").await.unwrap();
    let token = acquire_first(&mut c, acquire_req(holder, "k", "h-k")).await.unwrap();
    let w1 = begin(&mut c, None, "w1").await.unwrap();
    let w2 = begin(&mut c, None, "w2").await.unwrap();
    assert_eq!(acquire_first(&mut c, acquire_req(w1, "k", "w1-k")).await.unwrap(), 0, "queued");
    assert_eq!(acquire_first(&mut c, acquire_req(w2, "k", "w2-k")).await.unwrap(), 0, "queued");
    let w3 = begin(&mut c, None, "w3").await.unwrap();
    let limit = "lock ns/k has 2 waiting requests (limit --max-waiters-per-lock 2)";
    assert_refused(acquire_first(&mut c, acquire_req(w3, "k", "w3-k")).await, limit);
    // A one-shot start on the full queue creates no transaction.
    let mut one_shot = acquire_req(0, "k", "w4-k");
    one_shot.begin = Some(begin_req("w4"));
    assert_refused(acquire_first(&mut c, one_shot).await, limit);
    // The queue is as before: w3 waits for nothing, w2 is still second.
    let st3 = status(&mut c, w3).await;
    assert!(st3.waiting.is_none() && st3.locks.is_empty(), "{st3:?}");
    assert_eq!(status(&mut c, w2).await.waiting.map(|w| w.position), Some(2));
    assert_eq!(begin(&mut c, None, "next").await.unwrap(), w3 + 1, "the refused one-shot began nothing");
    // The holder leaves: w1 gets the next token.
    let end = EndTransactionRequest { transaction_id: holder, commit: true, request_id: "h-end".into() };
    c.end_transaction(end).await.unwrap();
    let granted = tokio::time::timeout(PATIENCE, async {
        loop {
            let st = status(&mut c, w1).await;
            if let Some(l) = st.locks.first() {
                return l.fencing_token;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("w1 was not granted the lock");
    assert_eq!(granted, token + 1);
}

async fn watch(ch: &Channel) -> Result<tonic::Streaming<Event>, Status> {
    let r = WatchEventsRequest { only_new: true, ..Default::default() };
    Ok(LockServiceClient::new(ch.clone()).watch_events(r).await?.into_inner())
}

fn channel(addr: &str) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect_lazy()
}

#[tokio::test]
async fn watch_streams_are_bounded_per_key_and_per_connection_and_a_dropped_stream_frees_its_place() {
    let flags = ["--max-watches-per-api-key", "3", "--max-watches-per-connection", "2"];
    let cluster = Cluster::start_with(1, &flags).await;
    let addr = cluster.endpoints()[0].clone();
    let (one, two, three) = (channel(&addr), channel(&addr), channel(&addr));
    let first = watch(&one).await.unwrap();
    let _second = watch(&one).await.unwrap();
    assert_refused(watch(&one).await, "open watches of events and keys (limit --max-watches-per-connection 2)");
    let _third = watch(&two).await.unwrap();
    // Without API keys every caller is the same principal: the key bound is server-wide.
    assert_refused(
        watch(&three).await,
        "the server has 3 open watches of events and keys (limit --max-watches-per-api-key 3)",
    );
    // A client that just drops its stream gives its place back.
    drop(first);
    let again = tokio::time::timeout(PATIENCE, async {
        loop {
            match watch(&one).await {
                Ok(s) => return s,
                Err(s) if s.code() == Code::ResourceExhausted => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(s) => panic!("{s:?}"),
            }
        }
    })
    .await;
    assert!(again.is_ok(), "the dropped stream's place was not freed within {PATIENCE:?}");
}

#[tokio::test]
async fn a_full_proposal_queue_sheds_new_work_with_a_retry_hint_and_proposes_none_of_it() {
    let cluster = Cluster::start_with(1, &["--max-queued-proposals", "1"]).await;
    let addr = cluster.endpoints()[0].clone();
    let channels: Vec<Channel> = (0..8).map(|_| channel(&addr)).collect();
    let (mut begun, mut shed) = (Vec::new(), Vec::new());
    // Bursts of concurrent begins until some are shed (the first burst almost always does).
    for round in 0..10 {
        let calls = (0..400).map(|i| {
            let mut c = LockServiceClient::new(channels[i % channels.len()].clone());
            let id = format!("r{round}-{i}");
            async move { (id.clone(), begin(&mut c, None, &id).await) }
        });
        for (id, r) in futures::future::join_all(calls).await {
            match r {
                Ok(txn) => begun.push(txn),
                Err(s) => {
                    assert_eq!(s.code(), Code::Unavailable, "{s:?}");
                    assert_eq!(s.metadata().get("x-dls-error").and_then(|v| v.to_str().ok()), Some("UNAVAILABLE"));
                    let hint: u64 =
                        s.metadata().get("x-dls-retry-after-ms").unwrap().to_str().unwrap().parse().unwrap();
                    assert!((20..=2_000).contains(&hint), "retry hint {hint} ms");
                    assert!(s.message().contains("(limit --max-queued-proposals 1)"), "{}", s.message());
                    shed.push(id);
                }
            }
        }
        if !shed.is_empty() {
            break;
        }
    }
    assert!(!shed.is_empty(), "4,000 concurrent begins never filled a queue of 1");
    // Nothing shed was proposed: exactly the answered begins are active.
    assert_eq!(cluster.metric(1, "dls_active_transactions"), begun.len() as f64);
    assert_eq!(cluster.metric(1, "dls_shed_proposals_total"), shed.len() as f64);
    // Retried later with the same request id, a shed begin goes through as a new transaction.
    let mut c = raw_client(&addr).await;
    let retried = begin(&mut c, None, &shed[0]).await.unwrap();
    assert!(!begun.contains(&retried));
    assert_eq!(cluster.metric(1, "dls_active_transactions"), begun.len() as f64 + 1.0);
}

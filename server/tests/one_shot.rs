//! The one-shot AcquireLock (`begin` in the request): a transaction and its first lock
//! in one call, with the same semantics as BeginTransaction followed by AcquireLock.
//! Also checks that concurrent proposals (batched into shared raft entries by the
//! leader) keep mutual exclusion and token order.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Error, LockMode, TransactionOptions, TransactionState};
use caerus_proto::v1 as pb;
use common::{raw_client, wait, Cluster, PATIENCE};
use tonic::Code;

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap()
}

fn lease(ms: u64) -> TransactionOptions {
    TransactionOptions::default().with_timeout_ms(ms)
}

fn one_shot(key: &str, begin_id: &str, acquire_id: &str) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: 0,
        namespace: "ns".into(),
        key: key.into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 5_000,
        request_id: acquire_id.into(),
        begin: Some(pb::BeginTransactionRequest {
            timeout_ms: 10_000,
            priority: 0,
            name: "one-shot".into(),
            request_id: begin_id.into(),
            ..Default::default()
        }),
        stay_open: false,
        permits: 0,
    }
}

/// Reads a raw AcquireLock stream to its grant: (begun, fencing token).
async fn grant(
    c: &mut pb::lock_service_client::LockServiceClient<tonic::transport::Channel>,
    req: pb::AcquireLockRequest,
) -> Result<(Option<pb::BeginTransactionResponse>, u64), tonic::Status> {
    let mut stream = c.acquire_lock(req).await?.into_inner();
    let mut begun = None;
    while let Some(msg) = stream.message().await? {
        if msg.begun.is_some() {
            assert!(begun.is_none(), "only the first message names the transaction");
            begun = msg.begun;
        }
        if let Some(pb::acquire_lock_response::Event::Granted(g)) = msg.event {
            return Ok((begun, g.fencing_token));
        }
    }
    Err(tonic::Status::internal("stream ended without a grant"))
}

#[tokio::test]
async fn one_shot_begins_and_locks_and_queues_like_two_calls() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;

    let (a, lock_a) = c.begin_with_lock(lease(10_000), "ns", "k", LockMode::Exclusive, wait(5_000)).await.unwrap();
    assert!(a.id() > 0);
    let status = a.status().await.unwrap();
    assert_eq!(status.state, TransactionState::Active);
    assert_eq!(status.locks.len(), 1);
    assert_eq!(status.locks[0].fencing_token, lock_a.fencing_token);

    // A second one-shot on the held key queues; its transaction exists (and heartbeats)
    // while it waits; the holder's commit hands the key over with a higher token.
    let c2 = c.clone();
    let waiting =
        tokio::spawn(
            async move { c2.begin_with_lock(lease(1_000), "ns", "k", LockMode::Exclusive, wait(60_000)).await },
        );
    let queued = loop {
        let locks = c.list_locks("ns").await.unwrap();
        if let Some(w) = locks.iter().find(|k| k.key == "k").and_then(|k| k.waiters.first()) {
            break w.transaction_id;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_ne!(queued, a.id());
    // Wait past the waiter's 1 s lease: its heartbeat, started from the first stream
    // message, must keep it alive while it waits.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    a.commit().await.unwrap();
    let (b, lock_b) = tokio::time::timeout(PATIENCE, waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(b.id(), queued);
    assert!(lock_b.fencing_token > lock_a.fencing_token);
    b.commit().await.unwrap();
}

#[tokio::test]
async fn a_one_shot_that_times_out_leaves_no_transaction_behind() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let (holder, _) = c.begin_with_lock(lease(10_000), "ns", "busy", LockMode::Exclusive, wait(1_000)).await.unwrap();

    let err = c.begin_with_lock(lease(10_000), "ns", "busy", LockMode::Exclusive, wait(300)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    // The transaction begun for it was aborted by the client: nothing waits, and the
    // only active transaction left holding anything is the holder.
    let locks = c.list_locks("ns").await.unwrap();
    let busy = locks.iter().find(|k| k.key == "busy").unwrap();
    assert!(busy.waiters.is_empty());
    assert_eq!(busy.holders.iter().map(|h| h.transaction_id).collect::<Vec<_>>(), vec![holder.id()]);
    let abandoned = c.transaction_status(holder.id() + 1).await.unwrap();
    assert_eq!(abandoned.state, TransactionState::Aborted);
}

#[tokio::test]
async fn a_retried_one_shot_returns_the_same_transaction_and_grant() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let (begun, token) = grant(&mut raw, one_shot("r", "begin-1", "acquire-1")).await.unwrap();
    let begun = begun.expect("the first message names the transaction");
    assert!(begun.transaction_id > 0);
    assert_eq!(begun.lease_timeout_ms, 10_000);

    let (again, token_again) = grant(&mut raw, one_shot("r", "begin-1", "acquire-1")).await.unwrap();
    assert_eq!(again.map(|b| b.transaction_id), Some(begun.transaction_id));
    assert_eq!(token_again, token, "a retry must not consume a new token");

    // A different transaction on the same key must wait (the retry did not release it).
    let mut other = one_shot("r", "begin-2", "acquire-2");
    other.timeout_ms = 200;
    let status = grant(&mut raw, other).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
}

#[tokio::test]
async fn bad_one_shots_are_refused_and_start_nothing() {
    let cluster = Cluster::start(1).await;
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let kind = |s: &tonic::Status| s.metadata().get("x-dls-error").and_then(|v| v.to_str().ok()).map(String::from);

    let mut both = one_shot("b", "b1", "a1");
    both.transaction_id = 7;
    let s = grant(&mut raw, both).await.unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument);
    assert!(s.message().contains("not both"), "{s:?}");

    let mut bad_lease = one_shot("b", "b2", "a2");
    bad_lease.begin.as_mut().unwrap().timeout_ms = 0;
    let s = grant(&mut raw, bad_lease).await.unwrap_err();
    assert_eq!((s.code(), kind(&s).as_deref()), (Code::InvalidArgument, Some("INVALID_ARGUMENT")), "{s:?}");

    let mut bad_key = one_shot("", "b3", "a3");
    bad_key.key = String::new();
    let s = grant(&mut raw, bad_key).await.unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");

    // Nothing was begun: the next transaction gets id 1.
    let first = raw
        .begin_transaction(pb::BeginTransactionRequest {
            timeout_ms: 1_000,
            priority: 0,
            name: String::new(),
            request_id: String::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.transaction_id, 1);
}

#[tokio::test]
async fn concurrent_cycles_on_three_nodes_stay_exclusive_and_ordered() {
    // Many clients at once make the leader batch proposals into shared entries; every
    // holder must still be alone and tokens per key must strictly increase.
    let cluster = Cluster::start(3).await;
    let c = client(&cluster).await;
    let holders = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<String, u32>::new()));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let (c, holders) = (c.clone(), holders.clone());
        tasks.push(tokio::spawn(async move {
            let key = format!("k{}", i % 3);
            let mut last = 0;
            let mut tokens = Vec::new();
            for _ in 0..8 {
                let (tx, lock) =
                    c.begin_with_lock(lease(10_000), "ns", &key, LockMode::Exclusive, wait(30_000)).await.unwrap();
                {
                    let mut h = holders.lock().unwrap();
                    let n = h.entry(key.clone()).or_default();
                    *n += 1;
                    assert_eq!(*n, 1, "two holders of {key} at once");
                }
                assert!(lock.fencing_token > last);
                last = lock.fencing_token;
                tokens.push((key.clone(), lock.fencing_token));
                tokio::time::sleep(Duration::from_millis(2)).await;
                *holders.lock().unwrap().get_mut(&key).unwrap() -= 1;
                tx.commit().await.unwrap();
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let mut tokens: Vec<u64> = all.iter().map(|(_, t)| *t).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 24 * 8, "every grant has its own token");
}

#[tokio::test]
async fn many_transactions_of_one_client_stay_alive_on_shared_heartbeats() {
    // 200 transactions with a 600 ms lease on one client: their heartbeats travel together
    // in batched calls; after 4 leases every one must still be active and holding.
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let mut txns = Vec::new();
    for i in 0..200 {
        let key = format!("hb{i}");
        txns.push(c.begin_with_lock(lease(600), "ns", &key, LockMode::Exclusive, wait(5_000)).await.unwrap().0);
    }
    tokio::time::sleep(Duration::from_millis(2_400)).await;
    for tx in &txns {
        assert!(!tx.is_lost(), "transaction {} lost: {:?}", tx.id(), tx.lost_reason());
    }
    let held: usize = c.list_locks("ns").await.unwrap().iter().map(|k| k.holders.len()).sum();
    assert_eq!(held, 200);
    // An operator abort reaches the owner through the batched heartbeat as a loss.
    c.abort_transaction(txns[7].id(), "test").await.unwrap();
    tokio::time::timeout(PATIENCE, txns[7].lost()).await.expect("the abort is noticed");
    assert!(!txns[8].is_lost());
}

/// Commands the node proposed so far (as leader): each is one replicated write.
#[tokio::test]
async fn with_transaction_and_with_lock_begin_in_their_first_acquire() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let before = cluster.metric(1, "dls_proposed_commands_total") as u64;
    let mut tokens = Vec::new();
    for _ in 0..5 {
        let token = c
            .with_transaction(lease(10_000), |tx| async move {
                assert_eq!(tx.id(), 0, "nothing is sent before the first call");
                let lock = tx.acquire_lock("ns", "cycle", LockMode::Exclusive, wait(5_000)).await?;
                assert!(tx.id() > 0);
                assert_eq!(tx.status().await?.locks.len(), 1);
                Ok::<_, Error>(lock.fencing_token)
            })
            .await
            .unwrap();
        tokens.push(token);
    }
    let token = c
        .with_lock("ns", "cycle", LockMode::Exclusive, wait(5_000), lease(10_000), |tx, lock| async move {
            assert_eq!(tx.status().await?.locks[0].fencing_token, lock.fencing_token);
            Ok::<_, Error>(lock.fencing_token)
        })
        .await
        .unwrap();
    tokens.push(token);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens must increase: {tokens:?}");
    // Begin + acquire in one write, commit in another: two per cycle, not three.
    assert_eq!(cluster.metric(1, "dls_proposed_commands_total") as u64 - before, 2 * 6);
    // The key is free again: every cycle committed.
    let free = c.list_locks("ns").await.unwrap();
    assert!(free.iter().all(|k| k.holders.is_empty()), "{free:?}");
}

#[tokio::test]
async fn a_deferred_transaction_keeps_the_usual_semantics() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let (holder, _) = c.begin_with_lock(lease(10_000), "ns", "busy", LockMode::Exclusive, wait(1_000)).await.unwrap();

    // A first acquire that times out leaves the (now begun) transaction active, as it
    // would after BeginTransaction; the transaction goes on and commits.
    let tx = c.transaction(lease(10_000)).unwrap();
    let err = tx.acquire_lock("ns", "busy", LockMode::Exclusive, wait(200)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    assert!(tx.id() > 0);
    assert_eq!(tx.status().await.unwrap().state, TransactionState::Active);
    let other = tx.acquire_lock("ns", "free", LockMode::Exclusive, wait(1_000)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(c.transaction_status(tx.id()).await.unwrap().state, TransactionState::Committed);
    assert!(other.fencing_token > 0);

    // Two first acquires at once on one deferred transaction: one begins it, the other
    // joins the same transaction (never a second one).
    let tx = c.transaction(lease(10_000)).unwrap();
    let (a, b) = tokio::join!(
        tx.acquire_lock("ns", "a", LockMode::Exclusive, wait(1_000)),
        tx.acquire_lock("ns", "b", LockMode::SharedRead, wait(1_000)),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let status = tx.status().await.unwrap();
    let mut held: Vec<_> = status.locks.iter().map(|l| (l.key.clone(), l.fencing_token)).collect();
    held.sort();
    assert_eq!(held, vec![("a".to_string(), a.fencing_token), ("b".to_string(), b.fencing_token)]);
    tx.abort().await.unwrap();

    // An invalid first acquire is refused before anything begins; the transaction is
    // still usable.
    let tx = c.transaction(lease(10_000)).unwrap();
    let err = tx.acquire_lock("", "k", LockMode::Exclusive, wait(1_000)).await.unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT", "{err}");
    assert_eq!(tx.id(), 0);
    tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(1_000)).await.unwrap();
    tx.commit().await.unwrap();
    holder.commit().await.unwrap();
}

/// Reads a raw one-shot AcquireLock stream's first message: the stream, the transaction
/// begun, and its queue position if queued.
async fn first_position(
    c: &mut pb::lock_service_client::LockServiceClient<tonic::transport::Channel>,
    req: pb::AcquireLockRequest,
) -> (tonic::Streaming<pb::AcquireLockResponse>, u64, Option<u32>) {
    let mut stream = c.acquire_lock(req).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().expect("a first message");
    let txn = first.begun.expect("a one-shot names its transaction first").transaction_id;
    let position = match first.event {
        Some(pb::acquire_lock_response::Event::Queued(q)) => Some(q.position),
        _ => None,
    };
    (stream, txn, position)
}

/// An acquire the table would queue is parked to ride with the next write (see
/// `raft::proposer`); with no other write coming it is still written, queues in order and
/// gets its grant. Acquires that would be granted, and try-locks, are never parked.
#[tokio::test]
async fn an_acquire_that_would_queue_rides_with_the_next_write_and_keeps_its_place() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let parked = || cluster.metric(1, "dls_parked_proposals_total") as u64;
    let (holder, _) = c.begin_with_lock(lease(10_000), "ns", "hot", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let (free, _) = c.begin_with_lock(lease(10_000), "ns", "free", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let err = c.begin_with_lock(lease(10_000), "ns", "hot", LockMode::Exclusive, wait(0)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    assert_eq!(parked(), 0, "granted acquires and try-locks go at once");

    // Two waiters, one a one-shot start, one in a transaction: both parked, both queued (in
    // order) although nothing else was written after them.
    let mut raw = raw_client(&cluster.endpoints()[0]).await;
    let (mut first, first_txn, position) = first_position(&mut raw, one_shot("hot", "w1", "w1-acquire")).await;
    assert_eq!(position, Some(1));
    let waiter = c.begin_transaction(lease(10_000)).await.unwrap();
    let second = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire_lock("ns", "hot", LockMode::Exclusive, wait(10_000)).await }
    });
    common::eventually_async(PATIENCE, "the second waiter to queue", || async {
        let locks = c.list_locks("ns").await.ok()?;
        (locks.iter().find(|k| k.key == "hot")?.waiters.len() == 2).then_some(())
    })
    .await;
    assert_eq!(parked(), 2);

    // The holder's commit hands the key to the first waiter, then the next.
    holder.commit().await.unwrap();
    let granted = loop {
        match first.message().await.unwrap().expect("a grant").event {
            Some(pb::acquire_lock_response::Event::Granted(g)) => break g,
            _ => continue,
        }
    };
    assert!(granted.fencing_token > 0);
    assert!(!second.is_finished(), "the second waiter must wait for the first");
    let end = pb::EndTransactionRequest { transaction_id: first_txn, commit: true, request_id: "w1-end".into() };
    raw.end_transaction(end).await.unwrap();
    let lock = tokio::time::timeout(PATIENCE, second).await.unwrap().unwrap().unwrap();
    assert!(lock.fencing_token > granted.fencing_token);
    waiter.commit().await.unwrap();
    free.commit().await.unwrap();
}

//! Every bad input gets the right gRPC status, names what to fix, and changes nothing.
//! Uses the raw generated client so malformed values reach the server unfiltered.

use crate::common;

use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::*;
use common::{raw_client, Cluster};
use tonic::transport::Channel;
use tonic::Code;

async fn begin(c: &mut LockServiceClient<Channel>, timeout_ms: i64) -> Result<u64, tonic::Status> {
    let r = c
        .begin_transaction(BeginTransactionRequest {
            timeout_ms,
            priority: 0,
            name: "t".into(),
            request_id: String::new(),
            ..Default::default()
        })
        .await?;
    Ok(r.into_inner().transaction_id)
}

fn acquire_req(txn: u64, ns: &str, key: &str, mode: i32, timeout_ms: i64, request_id: &str) -> AcquireLockRequest {
    AcquireLockRequest {
        transaction_id: txn,
        namespace: ns.into(),
        key: key.into(),
        mode,
        timeout_ms,
        request_id: request_id.into(),
        begin: None,
        stay_open: false,
        permits: 0,
    }
}

/// Runs an AcquireLock to its end: the grant's token, or the status it ended with.
async fn acquire(c: &mut LockServiceClient<Channel>, req: AcquireLockRequest) -> Result<u64, tonic::Status> {
    let mut stream = c.acquire_lock(req).await?.into_inner();
    while let Some(msg) = stream.message().await? {
        if let Some(acquire_lock_response::Event::Granted(g)) = msg.event {
            return Ok(g.fencing_token);
        }
    }
    Err(tonic::Status::internal("stream ended without a grant"))
}

fn assert_status<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, kind: &str, mentions: &str) {
    let s = r.expect_err("expected an error status");
    assert_eq!(s.code(), code, "status {s:?}");
    assert_eq!(s.metadata().get("x-dls-error").and_then(|v| v.to_str().ok()), Some(kind), "status {s:?}");
    assert!(s.message().contains(mentions), "message {:?} should mention {mentions:?}", s.message());
}

#[tokio::test]
async fn bad_inputs_are_refused_with_the_right_status_and_change_nothing() {
    let cluster = Cluster::start(1).await;
    let mut c = raw_client(&cluster.endpoints()[0]).await;
    let ex = LockMode::Exclusive as i32;

    // Begin: lease bounds, name, request id.
    for bad in [0, -1, 99, 3_600_001] {
        assert_status(begin(&mut c, bad).await, Code::InvalidArgument, "INVALID_ARGUMENT", "timeout_ms");
    }
    let long_name = BeginTransactionRequest {
        timeout_ms: 1000,
        priority: 0,
        name: "n".repeat(300),
        request_id: String::new(),
        ..Default::default()
    };
    assert_status(c.begin_transaction(long_name).await, Code::InvalidArgument, "INVALID_ARGUMENT", "name");
    let bad_id = BeginTransactionRequest {
        timeout_ms: 1000,
        priority: 0,
        name: String::new(),
        request_id: "no spaces!".into(),
        ..Default::default()
    };
    assert_status(c.begin_transaction(bad_id).await, Code::InvalidArgument, "INVALID_ARGUMENT", "request_id");

    let txn = begin(&mut c, 30_000).await.unwrap();
    let long = "x".repeat(257);
    let cases: Vec<(AcquireLockRequest, &str)> = vec![
        (acquire_req(txn, "", "k", ex, 1000, ""), "namespace"),
        (acquire_req(txn, "ns", "", ex, 1000, ""), "key"),
        (acquire_req(txn, &long, "k", ex, 1000, ""), "namespace"),
        (acquire_req(txn, "ns", &long, ex, 1000, ""), "key"),
        (acquire_req(txn, "ns", "k\u{7}", ex, 1000, ""), "key"),
        (acquire_req(txn, "ns", "k", LockMode::Unspecified as i32, 1000, ""), "mode"),
        (acquire_req(txn, "ns", "k", 9, 1000, ""), "mode"),
        (acquire_req(txn, "ns", "k", ex, -5, ""), "timeout_ms"),
        (acquire_req(txn, "ns", "k", ex, 3_600_001, ""), "timeout_ms"),
        (acquire_req(txn, "ns", "k", ex, 1000, "bad id with spaces"), "request_id"),
        (acquire_req(0, "ns", "k", ex, 1000, ""), "transaction_id"),
    ];
    for (req, field) in cases {
        assert_status(acquire(&mut c, req).await, Code::InvalidArgument, "INVALID_ARGUMENT", field);
    }
    // Unknown transaction.
    assert_status(
        acquire(&mut c, acquire_req(999, "ns", "k", ex, 1000, "")).await,
        Code::NotFound,
        "TRANSACTION_NOT_FOUND",
        "999",
    );
    let rel =
        ReleaseLockRequest { transaction_id: 999, namespace: "ns".into(), key: "k".into(), request_id: String::new() };
    assert_status(c.release_lock(rel).await, Code::NotFound, "TRANSACTION_NOT_FOUND", "999");
    assert_status(
        c.get_transaction_status(GetTransactionStatusRequest { transaction_id: 999 }).await,
        Code::NotFound,
        "TRANSACTION_NOT_FOUND",
        "999",
    );

    // Nothing was half-applied: the transaction holds nothing and the first real grant
    // gets the first token.
    let st = c.get_transaction_status(GetTransactionStatusRequest { transaction_id: txn }).await.unwrap().into_inner();
    assert_eq!(st.state, TransactionState::Active as i32);
    assert!(st.locks.is_empty() && st.waiting.is_none());
    assert_eq!(acquire(&mut c, acquire_req(txn, "ns", "k", ex, 1000, "r1")).await.unwrap(), 1);

    // A request id reused for a different request is refused.
    assert_status(
        acquire(&mut c, acquire_req(txn, "ns", "other", ex, 1000, "r1")).await,
        Code::InvalidArgument,
        "INVALID_ARGUMENT",
        "request_id",
    );

    // Calls on a finished transaction.
    let end = |commit, id: &str| EndTransactionRequest { transaction_id: txn, commit, request_id: id.into() };
    let ended = c.end_transaction(end(true, "e1")).await.unwrap().into_inner();
    assert_eq!((ended.state, ended.released_locks), (TransactionState::Committed as i32, 1));
    // The same request id again is a retry: same answer.
    let again = c.end_transaction(end(true, "e1")).await.unwrap().into_inner();
    assert_eq!(again, ended);
    assert_status(c.end_transaction(end(false, "e2")).await, Code::FailedPrecondition, "TRANSACTION_LOST", "COMMITTED");
    assert_status(
        acquire(&mut c, acquire_req(txn, "ns", "k2", ex, 1000, "")).await,
        Code::FailedPrecondition,
        "TRANSACTION_LOST",
        "COMMITTED",
    );
    assert_status(
        c.heartbeat(HeartbeatRequest { transaction_id: txn, ..Default::default() }).await,
        Code::FailedPrecondition,
        "TRANSACTION_LOST",
        "COMMITTED",
    );
    let rel =
        ReleaseLockRequest { transaction_id: txn, namespace: "ns".into(), key: "k".into(), request_id: String::new() };
    assert_status(c.release_lock(rel).await, Code::FailedPrecondition, "TRANSACTION_LOST", "COMMITTED");

    // A batched heartbeat answers each transaction on its own: one renewed, one ended,
    // one unknown; the call itself succeeds.
    let live = begin(&mut c, 10_000).await.unwrap();
    let batch = HeartbeatRequest { transaction_id: 0, more_transaction_ids: vec![live, txn, 999_999] };
    let r = c.heartbeat(batch).await.unwrap().into_inner();
    let kinds: Vec<(u64, &str)> = r.results.iter().map(|x| (x.transaction_id, x.error_kind.as_str())).collect();
    assert_eq!(kinds, vec![(live, ""), (txn, "TRANSACTION_LOST"), (999_999, "TRANSACTION_NOT_FOUND")]);
    assert!(r.results[0].lease_remaining_ms > 9_000, "{r:?}");
    assert!(r.results[1].error_message.contains("COMMITTED"), "{r:?}");
    // Too many at once is refused as a whole.
    let huge = HeartbeatRequest { transaction_id: 0, more_transaction_ids: vec![live; 10_001] };
    assert_status(c.heartbeat(huge).await, Code::InvalidArgument, "INVALID_ARGUMENT", "at most 10000");
    // Neither a transaction nor a batch: the id is missing.
    assert_status(
        c.heartbeat(HeartbeatRequest::default()).await,
        Code::InvalidArgument,
        "INVALID_ARGUMENT",
        "transaction_id",
    );

    // The next grant continues the sequence: no token was consumed by refusals.
    let txn2 = begin(&mut c, 30_000).await.unwrap();
    assert_eq!(acquire(&mut c, acquire_req(txn2, "ns", "k", ex, 1000, "")).await.unwrap(), 2);
}

#[tokio::test]
async fn oversized_requests_are_refused() {
    let cluster = Cluster::start(1).await;
    let mut c = raw_client(&cluster.endpoints()[0]).await;
    let huge = BeginTransactionRequest {
        timeout_ms: 1000,
        priority: 0,
        name: "n".repeat(100_000),
        request_id: String::new(),
        ..Default::default()
    };
    let s = c.begin_transaction(huge).await.expect_err("a 100 KB request must be refused");
    assert_eq!(s.code(), Code::OutOfRange, "{s:?}");
}

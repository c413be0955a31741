//! Raw gRPC requests the attack modules share: a message with an API key, an exclusive
//! acquire.

use caerus_proto::v1 as pb;
use tonic::Request;

/// `msg` with `authorization: Bearer <key>`.
pub fn keyed<T>(msg: T, key: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    req
}

/// An exclusive acquire of `ns/<lock>` by `txn` that may wait a minute.
pub fn exclusive(txn: u64, lock: &str) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: txn,
        namespace: "ns".into(),
        key: lock.into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 60_000,
        ..Default::default()
    }
}

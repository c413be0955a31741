//! Values of the SDK as JavaScript objects (u64 as `bigint`, modes and states as strings)
//! and the checks of values coming from JavaScript.
//!
//! Unlike the Python and uniffi bindings, these are not core's types with a derive: the
//! JavaScript shape differs from core's in every value that holds a token or an id (a
//! `bigint`: napi reads no `u64` from JavaScript and writes `i64` as a number, so such a
//! field must be napi's `BigInt`), a mode or state (a string in `index.d.ts`) or a duration
//! (ms as a number), so a derive on core's types would change the published TypeScript
//! surface.

use caerus_core::{Lock, LockMode, LostReason, TokenCheck, TransactionStatus};
use napi::bindgen_prelude::BigInt;
use napi::Result;
use napi_derive::napi;

use crate::errors::{invalid, to_js};

/// A JS `bigint` (or a non-negative safe integer passed as such) as a u64.
pub(crate) fn u64_of(value: &BigInt, what: &str) -> Result<u64> {
    let (negative, v, lossless) = value.get_u64();
    if negative || !lossless {
        return Err(invalid(format!("{what} must be a non-negative 64-bit integer")));
    }
    Ok(v)
}

pub(crate) fn ms_of(value: Option<f64>, what: &str) -> Result<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 => Ok(Some(v as u64)),
        Some(v) => Err(invalid(format!("{what} must be a non-negative integer number of milliseconds, got {v}"))),
    }
}

pub(crate) fn mode_of(mode: Option<String>) -> Result<LockMode> {
    match mode {
        None => Ok(LockMode::Exclusive),
        Some(m) => m.parse::<LockMode>().map_err(|e| to_js(e.into())),
    }
}

/// A granted lock.
#[napi(object)]
pub struct JsLock {
    pub namespace: String,
    pub key: String,
    pub mode: String,
    pub fencing_token: BigInt,
}

impl From<Lock> for JsLock {
    fn from(l: Lock) -> Self {
        JsLock {
            namespace: l.namespace,
            key: l.key,
            mode: l.mode.as_str().to_string(),
            fencing_token: BigInt::from(l.fencing_token),
        }
    }
}

/// One lock of an all-or-nothing `acquireLocks`.
#[napi(object)]
pub struct JsLockRequest {
    pub namespace: String,
    pub key: String,
    pub mode: Option<String>,
}

/// The answer of `verifyFencingToken`.
#[napi(object)]
pub struct JsTokenCheck {
    pub current: bool,
    pub current_tokens: Vec<BigInt>,
}

impl From<TokenCheck> for JsTokenCheck {
    fn from(c: TokenCheck) -> Self {
        JsTokenCheck { current: c.current, current_tokens: c.current_tokens.into_iter().map(BigInt::from).collect() }
    }
}

/// Where a waiting acquire stands in its key's queue (given to `onQueued`).
#[napi(object)]
pub struct JsQueuePosition {
    /// 1 = next in line (for several locks: the furthest place over the keys waited for).
    pub position: u32,
    /// The transactions this request waits for.
    pub blocking_transaction_ids: Vec<BigInt>,
}

/// A waiting lock request.
#[napi(object)]
pub struct JsPendingLock {
    pub namespace: String,
    pub key: String,
    pub mode: String,
    pub position: u32,
}

/// A transaction as the leader sees it.
#[napi(object)]
pub struct JsTransactionStatus {
    pub id: BigInt,
    pub state: String,
    pub name: Option<String>,
    pub priority: i32,
    pub lease_timeout_ms: f64,
    pub lease_remaining_ms: f64,
    pub locks: Vec<JsLock>,
    pub waiting: Option<JsPendingLock>,
    pub end_reason: String,
    /// What ended it (`LEASE_EXPIRED`, `DEADLOCK_VICTIM`, ...); undefined while active.
    pub end_cause: Option<String>,
}

impl From<TransactionStatus> for JsTransactionStatus {
    fn from(s: TransactionStatus) -> Self {
        JsTransactionStatus {
            id: BigInt::from(s.id),
            state: s.state.as_str().to_string(),
            name: s.name,
            priority: s.priority,
            lease_timeout_ms: s.lease_timeout_ms as f64,
            lease_remaining_ms: s.lease_remaining_ms as f64,
            locks: s.locks.into_iter().map(JsLock::from).collect(),
            waiting: s.waiting.map(|w| JsPendingLock {
                namespace: w.namespace,
                key: w.key,
                mode: w.mode.as_str().to_string(),
                position: w.position,
            }),
            end_reason: s.end_reason,
            end_cause: s.end_cause.map(|c| c.as_str().to_string()),
        }
    }
}

/// Why a transaction was lost.
#[napi(object)]
pub struct JsLostReason {
    /// `EXPIRED`, `ABORTED`, `DEADLOCK_VICTIM`, `LEASE_UNCONFIRMED` or `NOT_FOUND`.
    pub kind: String,
    pub message: String,
    /// What ended it on the server (`LEASE_EXPIRED`, `MAX_DURATION_EXCEEDED`, …), when it said.
    pub end_cause: Option<String>,
}

impl From<LostReason> for JsLostReason {
    fn from(r: LostReason) -> Self {
        let end_cause = r.end_cause.map(|c| c.as_str().to_string());
        JsLostReason { kind: r.kind.as_str().to_string(), message: r.message, end_cause }
    }
}

/// A transaction holding a listed key (`listLocks`).
#[napi(object)]
pub struct JsLockHolder {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    pub fencing_token: BigInt,
    pub since_ms: f64,
}

/// A request waiting in a listed key's queue (`listLocks`).
#[napi(object)]
pub struct JsLockWaiter {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    /// 1 = next in line.
    pub position: u32,
    pub blocking_transaction_ids: Vec<BigInt>,
    pub since_ms: f64,
    /// A SHARED_READ holder waiting to become EXCLUSIVE.
    pub upgrade: bool,
}

/// Why and until when a listed key grants nothing (its holder was revoked under a lock-delay).
#[napi(object)]
pub struct JsKeyDelay {
    /// Leader clock, ms since the Unix epoch.
    pub until_ms: f64,
    pub transaction_id: BigInt,
    /// How the revoked holder ended (`LEASE_EXPIRED`, `OPERATOR_ABORT`, ...); undefined if unknown.
    pub cause: Option<String>,
}

/// One key of `listLocks`: its holders, its queue and its lock-delay.
#[napi(object)]
pub struct JsKeyLocks {
    pub namespace: String,
    pub key: String,
    pub holders: Vec<JsLockHolder>,
    pub waiters: Vec<JsLockWaiter>,
    pub delay: Option<JsKeyDelay>,
    /// A semaphore's permit count; 0 for a lock.
    pub permits: u32,
}

impl From<caerus_core::KeyLocks> for JsKeyLocks {
    fn from(k: caerus_core::KeyLocks) -> Self {
        JsKeyLocks {
            namespace: k.namespace,
            key: k.key,
            holders: k
                .holders
                .into_iter()
                .map(|h| JsLockHolder {
                    transaction_id: BigInt::from(h.transaction_id),
                    transaction_name: h.transaction_name,
                    mode: h.mode.as_str().to_string(),
                    fencing_token: BigInt::from(h.fencing_token),
                    since_ms: h.since_ms as f64,
                })
                .collect(),
            waiters: k
                .waiters
                .into_iter()
                .map(|w| JsLockWaiter {
                    transaction_id: BigInt::from(w.transaction_id),
                    transaction_name: w.transaction_name,
                    mode: w.mode.as_str().to_string(),
                    position: w.position,
                    blocking_transaction_ids: w.blocking_transaction_ids.into_iter().map(BigInt::from).collect(),
                    since_ms: w.since_ms as f64,
                    upgrade: w.upgrade,
                })
                .collect(),
            permits: k.permits,
            delay: k.delay.map(|d| JsKeyDelay {
                until_ms: d.until_ms as f64,
                transaction_id: BigInt::from(d.transaction_id),
                cause: d.cause.map(|c| c.as_str().to_string()),
            }),
        }
    }
}

/// A lock-delay rule (`lockDelays`).
#[napi(object)]
pub struct JsLockDelayRule {
    /// Namespaces starting with this prefix ("" = every namespace).
    pub namespace_prefix: String,
    pub delay_ms: f64,
}

/// An API key kept by the cluster (`listApiKeys`; never its secret).
#[napi(object)]
pub struct JsApiKeyInfo {
    pub name: String,
    /// Allowed namespace prefixes (empty = every namespace).
    pub namespace_prefixes: Vec<String>,
    pub admin: bool,
    /// When it stops working (the cluster's clock, ms since the epoch).
    pub expires_at_ms: Option<f64>,
    /// The admin key that created it.
    pub created_by: String,
    pub created_at_ms: f64,
}

//! The values a call returns: locks, transaction states and statuses, lost reasons, lock
//! listings and lock-delay rules.

use caerus_core as core;

// The modes, states and causes are the shared types themselves (`caerus-types`, through
// core), and so is every value core declares with this SDK's shape (locks, queue places,
// token checks, lost reasons, lock listings; key watches in `key_watch.rs`, slot states
// in `slots.rs`, cycle members in `events.rs`). `uniffi::remote` exposes a type declared in
// another crate: the field and variant lists below are checked against the real
// declarations at compile time, and nothing is converted. (A derive inside caerus-types or
// caerus-core would need a uniffi namespace of its own: a second Kotlin package and Swift
// module, which would move these types out of `dev.caerus.dls` / `CaerusDls` and break every
// import of them.) A record is declared here only where the foreign shape differs; each
// says why.

/// How a lock is held.
pub type LockMode = core::LockMode;

#[uniffi::remote(Enum)]
pub enum LockMode {
    /// One holder at a time.
    Exclusive,
    /// Any number of SHARED_READ holders, no EXCLUSIVE one.
    SharedRead,
    /// One permit of a counted semaphore (up to its permit count at once).
    Semaphore,
}

pub type Lock = core::Lock;

/// A granted lock.
#[uniffi::remote(Record)]
pub struct Lock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// Cluster-wide, strictly increasing: hand it to the storage you protect.
    pub fencing_token: u64,
}

/// Where a transaction stands.
pub type TransactionState = core::TransactionState;

#[uniffi::remote(Enum)]
pub enum TransactionState {
    Active,
    Committed,
    Aborted,
    Expired,
}

/// What ended a transaction, as the server recorded it.
pub type EndCause = core::EndCause;

#[uniffi::remote(Enum)]
pub enum EndCause {
    Committed,
    ClientAbort,
    LeaseExpired,
    DeadlockVictim,
    OperatorAbort,
    /// The transaction reached the `max_duration_ms` it was begun with.
    MaxDurationExceeded,
}

pub type CycleMember = core::CycleMember;

/// A member of a deadlock cycle (of a `DeadlockResolved` event, of a victim's error).
#[uniffi::remote(Record)]
pub struct CycleMember {
    pub transaction_id: u64,
    pub transaction_name: String,
    pub priority: i32,
    /// The lock it waited for.
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
}

pub type LockRequest = core::LockRequest;

/// One lock of an all-or-nothing `acquire_locks`.
#[uniffi::remote(Record)]
pub struct LockRequest {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
}

pub type QueuePosition = core::QueuePosition;

/// Where a waiting acquire stands in its key's queue.
#[uniffi::remote(Record)]
pub struct QueuePosition {
    /// 1 = next in line (several locks: the furthest place over the keys waited for).
    pub position: u32,
    /// The transactions this request waits for (holders and earlier waiters).
    pub blocking_transaction_ids: Vec<u64>,
}

pub type TokenCheck = core::TokenCheck;

/// The answer of `verify_fencing_token`.
#[uniffi::remote(Record)]
pub struct TokenCheck {
    /// Whether the token is held on the key right now.
    pub current: bool,
    /// The tokens of the key's current holders (several for SHARED_READ, none when free).
    pub current_tokens: Vec<u64>,
}

// Not core's `PendingLock`: that one also carries the waiting call's request id, which is
// the client's business.
/// The lock a transaction waits for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PendingLock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// 1-based place in the key's queue.
    pub position: u32,
}

// Holds a `PendingLock` (above), so it is declared here too.
/// A transaction as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TransactionStatus {
    pub id: u64,
    pub state: TransactionState,
    pub name: Option<String>,
    pub priority: i32,
    pub lease_timeout_ms: u64,
    pub lease_remaining_ms: u64,
    pub locks: Vec<Lock>,
    pub waiting: Option<PendingLock>,
    pub end_reason: String,
    /// What ended it; null while active.
    pub end_cause: Option<EndCause>,
}

impl From<core::TransactionStatus> for TransactionStatus {
    fn from(s: core::TransactionStatus) -> Self {
        TransactionStatus {
            id: s.id,
            state: s.state,
            name: s.name,
            priority: s.priority,
            lease_timeout_ms: s.lease_timeout_ms,
            lease_remaining_ms: s.lease_remaining_ms,
            locks: s.locks,
            waiting: s.waiting.map(|w| PendingLock {
                namespace: w.namespace,
                key: w.key,
                mode: w.mode,
                position: w.position,
            }),
            end_reason: s.end_reason,
            end_cause: s.end_cause,
        }
    }
}

pub type LostKind = core::LostKind;

/// Why a transaction was lost.
#[uniffi::remote(Enum)]
pub enum LostKind {
    Expired,
    Aborted,
    DeadlockVictim,
    /// The client could not confirm the lease in time (e.g. the cluster was unreachable).
    LeaseUnconfirmed,
    NotFound,
}

pub type LostReason = core::LostReason;

/// Why a transaction was lost, with the server's (or client's) message.
#[uniffi::remote(Record)]
pub struct LostReason {
    pub kind: LostKind,
    pub message: String,
    /// What ended it on the server, when the server said (none for an unconfirmed lease).
    pub end_cause: Option<EndCause>,
}

pub type LockHolder = core::LockHolder;

/// A transaction holding a listed key (`list_locks`).
#[uniffi::remote(Record)]
pub struct LockHolder {
    pub transaction_id: u64,
    /// Its label ("" if it has none).
    pub transaction_name: String,
    pub mode: LockMode,
    pub fencing_token: u64,
    /// When it was granted (leader clock, ms since the Unix epoch).
    pub since_ms: i64,
}

pub type LockWaiter = core::LockWaiter;

/// A request waiting in a listed key's queue (`list_locks`).
#[uniffi::remote(Record)]
pub struct LockWaiter {
    pub transaction_id: u64,
    pub transaction_name: String,
    pub mode: LockMode,
    /// 1 = next in line.
    pub position: u32,
    /// The transactions it waits for directly.
    pub blocking_transaction_ids: Vec<u64>,
    /// When it started waiting (leader clock, ms since the Unix epoch).
    pub since_ms: i64,
    /// True for a SHARED_READ holder waiting to become EXCLUSIVE.
    pub upgrade: bool,
}

// Not core's `KeyDelay`: core also reports `remaining_ms`, which this SDK never exposed.
/// Why and until when a listed key grants nothing: its holder was revoked in a namespace
/// with a lock-delay (`set_lock_delay`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct KeyDelay {
    /// When the key may be granted again (leader clock, ms since the Unix epoch).
    pub until_ms: i64,
    /// The revoked holder whose end started the delay.
    pub transaction_id: u64,
    /// How that holder ended (lease expired, operator abort, deadlock victim, maximum
    /// duration); null if the server sent a cause this SDK does not know.
    pub cause: Option<EndCause>,
}

// Holds a `KeyDelay` (above), so it is declared here too.
/// One key of `list_locks`: held, waited for, or under a lock-delay.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct KeyLocks {
    pub namespace: String,
    pub key: String,
    pub holders: Vec<LockHolder>,
    /// The FIFO queue, first in line first.
    pub waiters: Vec<LockWaiter>,
    /// The lock-delay keeping the key from granting anything; null if none.
    pub delay: Option<KeyDelay>,
    /// A semaphore's permit count (holders and waiters all SEMAPHORE); 0 for a lock.
    pub permits: u32,
}

impl From<core::KeyLocks> for KeyLocks {
    fn from(k: core::KeyLocks) -> Self {
        KeyLocks {
            namespace: k.namespace,
            key: k.key,
            holders: k.holders,
            waiters: k.waiters,
            delay: k.delay.map(|d| KeyDelay { until_ms: d.until_ms, transaction_id: d.transaction_id, cause: d.cause }),
            permits: k.permits,
        }
    }
}

// Core's rule holds a `Duration`; the foreign side gets milliseconds.
/// A lock-delay rule (`lock_delays`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LockDelayRule {
    /// Namespaces starting with this prefix ("" = every namespace).
    pub namespace_prefix: String,
    /// How long a revoked holder's keys grant nothing, in ms.
    pub delay_ms: u64,
}

impl From<core::LockDelayRule> for LockDelayRule {
    fn from(r: core::LockDelayRule) -> Self {
        LockDelayRule { namespace_prefix: r.namespace_prefix, delay_ms: millis(r.delay) }
    }
}

// Core's key info also carries limits and rotation times this SDK does not expose (yet).
/// An API key kept by the cluster (`list_api_keys`; never its secret).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ApiKeyInfo {
    pub name: String,
    /// Allowed namespace prefixes (empty = every namespace).
    pub namespace_prefixes: Vec<String>,
    pub admin: bool,
    /// When it stops working (the cluster's clock, ms since the epoch).
    pub expires_at_ms: Option<i64>,
    /// The admin key that created it.
    pub created_by: String,
    pub created_at_ms: i64,
}

impl From<core::ApiKeyInfo> for ApiKeyInfo {
    fn from(k: core::ApiKeyInfo) -> Self {
        ApiKeyInfo {
            name: k.name,
            namespace_prefixes: k.namespace_prefixes,
            admin: k.admin,
            expires_at_ms: k.expires_at_ms,
            created_by: k.created_by,
            created_at_ms: k.created_at_ms,
        }
    }
}

/// A duration as whole milliseconds (saturating).
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

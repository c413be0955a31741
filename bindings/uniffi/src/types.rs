//! The values a call returns: locks, transaction states and statuses, lost reasons.

use caerus_core as core;

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LockMode {
    /// One holder at a time.
    Exclusive,
    /// Any number of SHARED_READ holders, no EXCLUSIVE one.
    SharedRead,
}

impl From<LockMode> for core::LockMode {
    fn from(m: LockMode) -> Self {
        match m {
            LockMode::Exclusive => core::LockMode::Exclusive,
            LockMode::SharedRead => core::LockMode::SharedRead,
        }
    }
}

impl From<core::LockMode> for LockMode {
    fn from(m: core::LockMode) -> Self {
        match m {
            core::LockMode::SharedRead => LockMode::SharedRead,
            _ => LockMode::Exclusive,
        }
    }
}

/// A granted lock.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Lock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// Cluster-wide, strictly increasing: hand it to the storage you protect.
    pub fencing_token: u64,
}

impl From<core::Lock> for Lock {
    fn from(l: core::Lock) -> Self {
        Lock { namespace: l.namespace, key: l.key, mode: l.mode.into(), fencing_token: l.fencing_token }
    }
}

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TransactionState {
    Active,
    Committed,
    Aborted,
    Expired,
}

impl From<core::TransactionState> for TransactionState {
    fn from(s: core::TransactionState) -> Self {
        match s {
            core::TransactionState::Active => TransactionState::Active,
            core::TransactionState::Committed => TransactionState::Committed,
            core::TransactionState::Expired => TransactionState::Expired,
            _ => TransactionState::Aborted,
        }
    }
}

/// The lock a transaction waits for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PendingLock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// 1-based place in the key's queue.
    pub position: u32,
}

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
}

impl From<core::TransactionStatus> for TransactionStatus {
    fn from(s: core::TransactionStatus) -> Self {
        TransactionStatus {
            id: s.id,
            state: s.state.into(),
            name: s.name,
            priority: s.priority,
            lease_timeout_ms: s.lease_timeout_ms,
            lease_remaining_ms: s.lease_remaining_ms,
            locks: s.locks.into_iter().map(Lock::from).collect(),
            waiting: s.waiting.map(|w| PendingLock {
                namespace: w.namespace,
                key: w.key,
                mode: w.mode.into(),
                position: w.position,
            }),
            end_reason: s.end_reason,
        }
    }
}

/// Why a transaction was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LostKind {
    Expired,
    Aborted,
    DeadlockVictim,
    /// The client could not confirm the lease in time (e.g. the cluster was unreachable).
    LeaseUnconfirmed,
    NotFound,
}

/// Why a transaction was lost, with the server's (or client's) message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LostReason {
    pub kind: LostKind,
    pub message: String,
}

impl From<core::LostReason> for LostReason {
    fn from(r: core::LostReason) -> Self {
        let kind = match r.kind {
            core::LostKind::Expired => LostKind::Expired,
            core::LostKind::Aborted => LostKind::Aborted,
            core::LostKind::DeadlockVictim => LostKind::DeadlockVictim,
            core::LostKind::NotFound => LostKind::NotFound,
            _ => LostKind::LeaseUnconfirmed,
        };
        LostReason { kind, message: r.message }
    }
}

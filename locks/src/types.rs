//! Domain types of the lock table: identifiers, modes, states.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The modes, states, causes and policies every part of the product shares. The lock
/// table calls a transaction state `TxnState`. A victim policy is carried in each Acquire
/// command (the leader resolves its configuration into it), so every replica applies the
/// same policy even if their configuration files differ.
pub use caerus_types::{EndCause, LockMode, TransactionState as TxnState, VictimPolicy};

/// Identifier of a transaction, assigned by the state machine; never reused.
pub type TxnId = u64;

/// A fencing token: cluster-wide, strictly increasing, one per grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FencingToken(pub u64);

/// The address of a lock.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LockKey {
    pub namespace: String,
    pub key: String,
}

impl LockKey {
    pub fn new(namespace: impl Into<String>, key: impl Into<String>) -> Self {
        LockKey { namespace: namespace.into(), key: key.into() }
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.key)
    }
}

/// Why a wait ended without a grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitEnd {
    /// The acquire timeout passed; the transaction stays active.
    TimedOut,
    /// Withdrawn by ReleaseLock on the same key.
    Cancelled,
    /// The transaction ended while waiting (state, cause and reason say how).
    TxnEnded { state: TxnState, cause: EndCause, reason: String },
}

/// A lock held by a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub mode: LockMode,
    pub token: FencingToken,
    /// Leader clock at the grant.
    pub since_ms: u64,
}

/// One lock of an all-or-nothing grant: the lock, the mode held and its fencing token (the
/// existing one for a lock the transaction already held in a covering mode).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub lock: LockKey,
    pub mode: LockMode,
    pub token: FencingToken,
}

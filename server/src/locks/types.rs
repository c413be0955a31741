//! Domain types of the lock table: identifiers, modes, states.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifier of a transaction, assigned by the state machine; never reused.
pub type TxnId = u64;

/// A fencing token: cluster-wide, strictly increasing, one per grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FencingToken(pub u64);

/// Lock modes. Only two SHARED_READ requests are compatible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockMode {
    Exclusive,
    SharedRead,
}

impl LockMode {
    /// Whether a holder in `self` may coexist with a holder in `other`.
    pub fn compatible_with(self, other: LockMode) -> bool {
        self == LockMode::SharedRead && other == LockMode::SharedRead
    }

    /// Whether holding `self` already satisfies a request for `wanted`.
    pub fn covers(self, wanted: LockMode) -> bool {
        self == LockMode::Exclusive || wanted == LockMode::SharedRead
    }
}

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

/// Lifecycle state of a transaction; only `Active` is live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Active,
    Committed,
    Aborted,
    Expired,
}

impl TxnState {
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Active => "ACTIVE",
            TxnState::Committed => "COMMITTED",
            TxnState::Aborted => "ABORTED",
            TxnState::Expired => "EXPIRED",
        }
    }
}

/// What ended a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndCause {
    Committed,
    /// EndTransaction(commit = false).
    ClientAbort,
    /// The lease lapsed.
    Expired,
    /// Aborted to break a wait-for cycle.
    DeadlockVictim,
    /// AdminService.AbortTransaction.
    OperatorAbort,
}

impl EndCause {
    pub fn state(self) -> TxnState {
        match self {
            EndCause::Committed => TxnState::Committed,
            EndCause::Expired => TxnState::Expired,
            EndCause::ClientAbort | EndCause::DeadlockVictim | EndCause::OperatorAbort => TxnState::Aborted,
        }
    }

    /// Whether the server took the transaction's locks away (rather than the client
    /// giving them up): those releases are reported as revoked locks.
    pub fn revokes(self) -> bool {
        matches!(self, EndCause::Expired | EndCause::DeadlockVictim | EndCause::OperatorAbort)
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

/// Which member of a deadlock cycle is aborted. Carried in each Acquire command (the
/// leader resolves its configuration into it), so every replica applies the same policy
/// even if their configuration files differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VictimPolicy {
    /// Lowest priority; among equals the youngest (latest begun).
    #[default]
    LowestPriorityThenYoungest,
    /// Latest begun.
    Youngest,
    /// Earliest begun.
    Oldest,
}

impl VictimPolicy {
    pub fn name(self) -> &'static str {
        match self {
            VictimPolicy::LowestPriorityThenYoungest => "lowest-priority-then-youngest",
            VictimPolicy::Youngest => "youngest",
            VictimPolicy::Oldest => "oldest",
        }
    }
}

impl std::str::FromStr for VictimPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "lowest-priority-then-youngest" | "lowest-priority" | "priority" => {
                Ok(VictimPolicy::LowestPriorityThenYoungest)
            }
            "youngest" => Ok(VictimPolicy::Youngest),
            "oldest" => Ok(VictimPolicy::Oldest),
            other => {
                Err(format!("unknown victim policy {other:?}; use lowest-priority-then-youngest, youngest or oldest"))
            }
        }
    }
}

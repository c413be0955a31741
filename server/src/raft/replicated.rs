//! The replicated state: what every node applies the log to, and what a snapshot holds.

use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use super::types::{LogId, StoredMembership};
use crate::locks::LockTable;

/// The replicated state: the lock table plus raft's bookkeeping. Cloned by a snapshot
/// (cheap: the table's records are shared, see `LockTable`).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Replicated {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub table: LockTable,
}

/// Read by the engine; written only by the state machine's `apply`.
pub type SharedState = Arc<RwLock<Replicated>>;

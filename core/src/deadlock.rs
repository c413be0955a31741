//! A deadlock the server broke, as the client reports it: in `DeadlockResolved` events and
//! in the victim's error. Plain data, so the error type and the event stream share it
//! without depending on each other.

use caerus_types::{LockMode, VictimPolicy};

/// A member of a wait-for cycle: the transaction and the lock it was waiting for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleMember {
    /// The waiting transaction.
    pub transaction_id: u64,
    /// Its label ("" if it has none).
    pub transaction_name: String,
    /// Its priority.
    pub priority: i32,
    /// The namespace of the lock it waited for.
    pub namespace: String,
    /// The key of the lock it waited for.
    pub key: String,
    /// The mode it asked for.
    pub mode: LockMode,
}

/// A deadlock the server broke: the cycle, the aborted member and the policy that chose it.
/// Carried by [`EventDetail::DeadlockResolved`] and by the victim's
/// [`Error::DeadlockVictim`](crate::Error::DeadlockVictim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The cycle in wait-for order: each member waits for the next, the last for the first.
    pub cycle: Vec<CycleMember>,
    /// The aborted transaction (a member of the cycle).
    pub victim_transaction_id: u64,
    /// The policy that chose the victim.
    pub policy: VictimPolicy,
}

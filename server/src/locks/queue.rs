//! One key's holders and its FIFO queue of waiters.
//!
//! Fairness rule: a request is granted only when it is compatible with every holder and
//! no earlier waiter is queued, so readers arriving behind a waiting writer wait too and
//! writers never starve. Upgrades (SHARED_READ holder asking EXCLUSIVE) queue ahead of
//! ordinary waiters: an upgrader already holds the key, so a writer queued in front of it
//! would wait for the upgrader while the upgrader waited for the writer.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

use super::types::{Held, LockMode, TxnId};

/// A queued request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    pub txn: TxnId,
    pub mode: LockMode,
    pub request_id: String,
    /// The transaction already holds this key SHARED_READ and wants EXCLUSIVE.
    pub upgrade: bool,
    /// The acquire timeout, kept so a new leader can restart the wait's timer.
    pub wait_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLock {
    pub holders: BTreeMap<TxnId, Held>,
    pub queue: VecDeque<Waiter>,
}

impl KeyLock {
    pub fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.queue.is_empty()
    }

    /// Whether `txn` could hold `mode` beside the current holders (ignoring its own hold).
    pub fn compatible_with_holders(&self, txn: TxnId, mode: LockMode) -> bool {
        self.holders.iter().all(|(&h, held)| h == txn || held.mode.compatible_with(mode))
    }

    /// Whether a new (non-upgrade) request may be granted at once.
    pub fn can_grant_now(&self, txn: TxnId, mode: LockMode) -> bool {
        self.queue.is_empty() && self.compatible_with_holders(txn, mode)
    }

    /// Queues a request: upgrades after the other upgrades at the front, others at the back.
    pub fn enqueue(&mut self, waiter: Waiter) {
        if waiter.upgrade {
            let at = self.queue.iter().take_while(|w| w.upgrade).count();
            self.queue.insert(at, waiter);
        } else {
            self.queue.push_back(waiter);
        }
    }

    /// Removes the waiter of `txn`, if any.
    pub fn remove_waiter(&mut self, txn: TxnId) -> Option<Waiter> {
        let at = self.queue.iter().position(|w| w.txn == txn)?;
        self.queue.remove(at)
    }

    /// Pops the head of the queue if it can be granted now (strict FIFO).
    pub fn pop_grantable(&mut self) -> Option<Waiter> {
        let head = self.queue.front()?;
        if self.compatible_with_holders(head.txn, head.mode) {
            self.queue.pop_front()
        } else {
            None
        }
    }

    /// 1-based position of `txn` in the queue.
    pub fn position(&self, txn: TxnId) -> Option<u32> {
        self.queue.iter().position(|w| w.txn == txn).map(|i| i as u32 + 1)
    }

    /// The wait-for edges of `txn`'s queued request: every holder it is incompatible with
    /// and every earlier waiter it is incompatible with. Deadlock detection walks these.
    pub fn blockers(&self, txn: TxnId) -> Vec<TxnId> {
        let Some(at) = self.queue.iter().position(|w| w.txn == txn) else {
            return Vec::new();
        };
        let mode = self.queue[at].mode;
        let mut out: Vec<TxnId> = self
            .holders
            .iter()
            .filter(|(&h, held)| h != txn && !held.mode.compatible_with(mode))
            .map(|(&h, _)| h)
            .collect();
        for earlier in self.queue.iter().take(at) {
            if !earlier.mode.compatible_with(mode) && !out.contains(&earlier.txn) {
                out.push(earlier.txn);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::types::FencingToken;

    fn held(mode: LockMode) -> Held {
        Held { mode, token: FencingToken(1) }
    }

    fn waiter(txn: TxnId, mode: LockMode, upgrade: bool) -> Waiter {
        Waiter { txn, mode, request_id: format!("r{txn}"), upgrade, wait_ms: 1 }
    }

    #[test]
    fn readers_share_but_not_with_a_writer() {
        let mut k = KeyLock::default();
        k.holders.insert(1, held(LockMode::SharedRead));
        assert!(k.can_grant_now(2, LockMode::SharedRead));
        assert!(!k.can_grant_now(2, LockMode::Exclusive));
        // The holder itself is ignored when it asks again.
        assert!(k.compatible_with_holders(1, LockMode::Exclusive));
    }

    #[test]
    fn a_reader_waits_behind_a_queued_writer() {
        let mut k = KeyLock::default();
        k.holders.insert(1, held(LockMode::SharedRead));
        k.enqueue(waiter(2, LockMode::Exclusive, false));
        assert!(!k.can_grant_now(3, LockMode::SharedRead));
    }

    #[test]
    fn upgrades_go_ahead_of_ordinary_waiters_in_their_own_order() {
        let mut k = KeyLock::default();
        k.enqueue(waiter(1, LockMode::Exclusive, false));
        k.enqueue(waiter(2, LockMode::Exclusive, true));
        k.enqueue(waiter(3, LockMode::Exclusive, true));
        let order: Vec<_> = k.queue.iter().map(|w| w.txn).collect();
        assert_eq!(order, vec![2, 3, 1]);
        assert_eq!(k.position(1), Some(3));
    }

    #[test]
    fn blockers_are_incompatible_holders_and_earlier_waiters() {
        let mut k = KeyLock::default();
        k.holders.insert(1, held(LockMode::SharedRead));
        k.holders.insert(2, held(LockMode::SharedRead));
        k.enqueue(waiter(3, LockMode::Exclusive, false));
        k.enqueue(waiter(4, LockMode::SharedRead, false));
        assert_eq!(k.blockers(3), vec![1, 2]);
        // A reader is not blocked by reader holders, only by the writer queued before it.
        assert_eq!(k.blockers(4), vec![3]);
    }
}

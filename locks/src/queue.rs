//! One key's holders and its FIFO queue of waiters.
//!
//! Fairness rule: a request is granted only when it is compatible with every holder and
//! with every earlier waiter, so readers arriving behind a waiting writer wait too and
//! writers never starve. With single-key requests only, that is strict FIFO: a waiter at
//! the head is only ever blocked by a holder. A request for several keys may wait at the
//! head of one key's queue for another key; readers behind it may pass it then, writers
//! may not. Upgrades (SHARED_READ holder asking EXCLUSIVE) queue ahead of
//! ordinary waiters: an upgrader already holds the key, so a writer queued in front of it
//! would wait for the upgrader while the upgrader waited for the writer.
//!
//! A semaphore key (`permits` > 0) holds only SEMAPHORE permits, at most `permits` at once;
//! its waiters are granted strictly in arrival order as permits free up.
//!
//! The queue is ordered by [`Slot`] rather than kept in a list, so a waiter can be found,
//! removed and its direct blockers computed without scanning the whole queue; with ten
//! thousand waiters on one key, deadlock detection stays linear.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::vec_map::VecMap;

use super::types::{Held, LockMode, TxnId};

/// A place in a key's queue: upgrades (class 0) before ordinary requests (class 1), each
/// in arrival order (`ticket`, from a table-wide counter).
pub type Slot = (u8, u64);

pub const UPGRADE_CLASS: u8 = 0;
pub const NORMAL_CLASS: u8 = 1;

/// A queued request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    pub txn: TxnId,
    pub mode: LockMode,
    pub request_id: String,
    /// The acquire timeout, kept so a new leader can restart the wait's timer.
    pub wait_ms: u64,
    /// Leader clock when the wait began.
    pub since_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLock {
    pub holders: VecMap<TxnId, Held>,
    pub queue: BTreeMap<Slot, Waiter>,
    /// A semaphore's permit count (0 = a lock), declared by the request that found the key
    /// idle. Not in the serde form (older snapshots keep decoding): snapshot files carry it
    /// as a section (see `table::semaphores`).
    #[serde(skip)]
    pub permits: u32,
}

impl KeyLock {
    pub fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.queue.is_empty()
    }

    /// Whether `txn` could hold `mode` beside the current holders (ignoring its own hold).
    pub fn compatible_with_holders(&self, txn: TxnId, mode: LockMode) -> bool {
        self.holders.iter().all(|(&h, held)| h == txn || held.mode.compatible_with(mode))
            && (self.permits == 0 || self.holders.iter().filter(|(&h, _)| h != txn).count() < self.permits as usize)
    }

    /// Whether a new (non-upgrade) request may be granted at once: compatible with every
    /// holder and every waiter (it would otherwise pass a waiter it conflicts with), and on
    /// a semaphore, a permit left after everyone queued got theirs.
    pub fn can_grant_now(&self, txn: TxnId, mode: LockMode) -> bool {
        self.compatible_with_holders(txn, mode)
            && self.queue.values().all(|w| w.mode.compatible_with(mode))
            && (self.permits == 0 || self.holders.len() + self.queue.len() < self.permits as usize)
    }

    /// Whether the waiter in `slot` may have this key now: compatible with every holder and
    /// with every waiter ahead of it (and on a semaphore, a permit left for it). Only a
    /// request that also waits for other keys can pass this test and still wait (see
    /// `table::all`).
    pub fn ready_at(&self, slot: Slot) -> bool {
        self.ready_without(slot, |_| false)
    }

    /// Whether the waiter in `slot` could have this key once the transactions `gone` says
    /// have left (released their holds and their places in the queue): the grant rule of
    /// [`KeyLock::ready_at`], for deadlock detection's "what if they all finished".
    pub fn ready_without(&self, slot: Slot, gone: impl Fn(TxnId) -> bool) -> bool {
        let Some(w) = self.queue.get(&slot) else { return false };
        if !self.holders.iter().all(|(&h, held)| h == w.txn || gone(h) || held.mode.compatible_with(w.mode)) {
            return false;
        }
        // Permits taken by the holders that stay and the waiters ahead that stay; the scan
        // stops at the first conflicting waiter, or once no permit is left.
        let permits = self.permits as usize;
        let mut taken =
            if permits > 0 { self.holders.keys().filter(|h| **h != w.txn && !gone(**h)).count() } else { 0 };
        for (_, earlier) in self.queue.range(..slot) {
            if gone(earlier.txn) {
                continue;
            }
            if !earlier.mode.compatible_with(w.mode) {
                return false;
            }
            taken += 1;
            if permits > 0 && taken >= permits {
                return false;
            }
        }
        permits == 0 || taken < permits
    }

    /// The waiters that may have this key now, in queue order: each compatible with the
    /// holders and with every waiter ahead of it. Nothing behind an EXCLUSIVE waiter
    /// qualifies, so the scan stops there; on a semaphore, the first waiters as many as
    /// there are permits left.
    pub fn grantable(&self) -> Vec<(Slot, &Waiter)> {
        if self.permits > 0 {
            let left = (self.permits as usize).saturating_sub(self.holders.len());
            return self.queue.iter().take(left).map(|(s, w)| (*s, w)).collect();
        }
        let mut out = Vec::new();
        let mut any_ahead = false;
        for (slot, w) in &self.queue {
            let passes_ahead = w.mode == LockMode::SharedRead || !any_ahead;
            if passes_ahead && self.compatible_with_holders(w.txn, w.mode) {
                out.push((*slot, w));
            }
            if w.mode == LockMode::Exclusive {
                break;
            }
            any_ahead = true;
        }
        out
    }

    /// 1-based position of the waiter in `slot`.
    pub fn position(&self, slot: Slot) -> u32 {
        self.queue.range(..slot).count() as u32 + 1
    }

    /// The direct wait-for edges of the waiter in `slot`: every incompatible holder, plus
    /// the nearest earlier waiters it conflicts with. A reader needs only the nearest
    /// earlier writer; a writer needs the readers back to (and including) the nearest
    /// earlier writer. Each of those waits in turn for everything ahead of it, so
    /// reachability in the wait-for graph (all deadlock detection needs) is the same as
    /// with an edge to every earlier conflicting waiter, at a fraction of the edges.
    ///
    /// A semaphore's waiter waits for any one of several (a permit frees up when any holder
    /// leaves): its edges are every holder and the waiter just ahead, and a cycle through
    /// them is a deadlock only if none of them can ever leave (see `table::semaphores`).
    pub fn blockers(&self, slot: Slot) -> Vec<TxnId> {
        let Some(w) = self.queue.get(&slot) else {
            return Vec::new();
        };
        if self.permits > 0 {
            let mut out: Vec<TxnId> = self.holders.keys().copied().filter(|h| *h != w.txn).collect();
            out.extend(self.queue.range(..slot).next_back().map(|(_, e)| e.txn));
            return out;
        }
        let mut out: Vec<TxnId> = self
            .holders
            .iter()
            .filter(|(&h, held)| h != w.txn && !held.mode.compatible_with(w.mode))
            .map(|(&h, _)| h)
            .collect();
        for earlier in self.queue.range(..slot).rev().map(|(_, e)| e) {
            let conflicts = !earlier.mode.compatible_with(w.mode);
            if conflicts && !out.contains(&earlier.txn) {
                out.push(earlier.txn);
            }
            if earlier.mode == LockMode::Exclusive {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FencingToken;

    fn held(mode: LockMode) -> Held {
        Held { mode, token: FencingToken(1), since_ms: 0 }
    }

    fn waiter(txn: TxnId, mode: LockMode) -> Waiter {
        Waiter { txn, mode, request_id: format!("r{txn}"), wait_ms: 1, since_ms: 0 }
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
        k.queue.insert((NORMAL_CLASS, 1), waiter(2, LockMode::Exclusive));
        assert!(!k.can_grant_now(3, LockMode::SharedRead));
    }

    #[test]
    fn upgrades_go_ahead_of_ordinary_waiters_in_their_own_order() {
        let mut k = KeyLock::default();
        k.queue.insert((NORMAL_CLASS, 1), waiter(1, LockMode::Exclusive));
        k.queue.insert((UPGRADE_CLASS, 2), waiter(2, LockMode::Exclusive));
        k.queue.insert((UPGRADE_CLASS, 3), waiter(3, LockMode::Exclusive));
        let order: Vec<_> = k.queue.values().map(|w| w.txn).collect();
        assert_eq!(order, vec![2, 3, 1]);
        assert_eq!(k.position((NORMAL_CLASS, 1)), 3);
    }

    #[test]
    fn blockers_are_incompatible_holders_and_the_nearest_conflicting_waiters() {
        let mut k = KeyLock::default();
        k.holders.insert(1, held(LockMode::SharedRead));
        k.holders.insert(2, held(LockMode::SharedRead));
        k.queue.insert((NORMAL_CLASS, 1), waiter(3, LockMode::Exclusive));
        k.queue.insert((NORMAL_CLASS, 2), waiter(4, LockMode::SharedRead));
        k.queue.insert((NORMAL_CLASS, 3), waiter(5, LockMode::SharedRead));
        k.queue.insert((NORMAL_CLASS, 4), waiter(6, LockMode::Exclusive));
        assert_eq!(k.blockers((NORMAL_CLASS, 1)), vec![1, 2]);
        // A reader is not blocked by reader holders or readers, only by the writer before it.
        assert_eq!(k.blockers((NORMAL_CLASS, 3)), vec![3]);
        // A writer waits for every holder and the readers back to the previous writer.
        assert_eq!(k.blockers((NORMAL_CLASS, 4)), vec![1, 2, 5, 4, 3]);
    }
}

//! Counted semaphores: a key asked for in mode SEMAPHORE with `permits` = N admits up to N
//! holders at once, granted in arrival order, each with its own fencing token. The request
//! that finds the key idle declares N; while the key is held or waited for, every request
//! on it must be SEMAPHORE with the same N, and a semaphore request on a key used as a lock
//! is refused (`Rejection::Invalid`; a request on a semaphore of another count, or as a
//! lock, `Rejection::SemaphoreMismatch`: INVALID_ARGUMENT at the API either way).
//!
//! Deadlocks: a semaphore's waiter waits for any one of the holders (or the waiter ahead)
//! to leave, not for all of them, so a cycle through such a wait is a deadlock only if no
//! way out is left. When the cycle search from a new waiter finds a cycle through a
//! semaphore wait, the table decides by reduction (Holt): every transaction that waits for
//! nothing will finish and release; so will every waiter that could be granted once those
//! are gone; repeat. The new waiter is deadlocked only if it is never reached, and the
//! victim is then picked from a cycle among the transactions that are not.
//!
//! The permit counts are not part of the table's serde form: snapshot files carry them as
//! a section, written only when a semaphore is in use.

use std::collections::{BTreeMap, BTreeSet};

use super::super::command::Rejection;
use super::super::deadlock::find_cycle;
use super::super::types::{LockKey, LockMode, TxnId};
use super::LockTable;

/// The largest permit count a semaphore may declare (a semaphore of more permits than that
/// is no bound at all; the per-key limits bound the holders anyway).
pub const MAX_PERMITS: u32 = 100_000;

/// The section name of the permit counts in snapshot files.
const PERMITS: &str = "semaphore-permits";

impl LockTable {
    /// Whether a request for `lock` in `mode` (with `permits`, for a semaphore) fits what
    /// the key is now: a lock takes only lock modes, a semaphore only permits of its count.
    pub fn check_key_kind(&self, lock: &LockKey, mode: LockMode, permits: u32) -> Result<(), Rejection> {
        let semaphore = mode == LockMode::Semaphore;
        if semaphore && !(1..=MAX_PERMITS).contains(&permits) {
            return Err(Rejection::Invalid(format!(
                "a SEMAPHORE request on {lock} needs permits between 1 and {MAX_PERMITS} (got {permits})"
            )));
        }
        if !semaphore && permits != 0 {
            return Err(Rejection::Invalid(format!("permits is only for mode SEMAPHORE (got {permits} with {mode})")));
        }
        let declared = match self.keys.get(lock).filter(|k| !k.is_idle()) {
            None => return Ok(()),
            Some(k) => k.permits,
        };
        match (semaphore, declared) {
            (false, 0) => Ok(()),
            (true, d) if d == permits => Ok(()),
            (true, 0) => Err(Rejection::Invalid(format!(
                "{lock} is in use as a lock (EXCLUSIVE or SHARED_READ); a semaphore cannot share its key: use another key"
            ))),
            // The count travels as data: a client words its own advice (the CLI's --permits).
            (true, declared) => Err(Rejection::SemaphoreMismatch { lock: lock.clone(), declared, asked: permits }),
            (false, declared) => Err(Rejection::SemaphoreMismatch { lock: lock.clone(), declared, asked: 0 }),
        }
    }

    /// Whether any of these transactions waits for a semaphore permit.
    pub(super) fn waits_for_a_permit(&self, txns: &[TxnId]) -> bool {
        txns.iter().any(|t| {
            self.txns
                .get(t)
                .and_then(|t| t.waiting.as_ref())
                .is_some_and(|p| self.keys.get(&p.lock).is_some_and(|k| k.permits > 0))
        })
    }

    /// The deadlock `txn`'s wait is part of, decided by reduction over what it waits for
    /// (see the module): a cycle of deadlocked transactions through `txn`, or None when some
    /// way out remains.
    pub(super) fn deadlock_through(&self, txn: TxnId) -> Option<Vec<TxnId>> {
        // Everything `txn` waits for, directly or not.
        let mut reach = BTreeSet::from([txn]);
        let mut todo = vec![txn];
        while let Some(t) = todo.pop() {
            for b in self.waits_for(t) {
                if reach.insert(b) {
                    todo.push(b);
                }
            }
        }
        let stuck = self.stuck_among(&reach);
        if !stuck.contains(&txn) {
            return None;
        }
        let within = |t: TxnId| self.waits_for(t).into_iter().filter(|b| stuck.contains(b)).collect::<Vec<_>>();
        // Every stuck transaction is stuck because of `txn`'s new wait (there was no deadlock
        // before it), so a cycle through it exists; should it not, `txn` alone is the victim
        // rather than leaving a deadlock standing.
        Some(find_cycle(txn, within).unwrap_or_else(|| vec![txn]))
    }

    /// Those of `txns` that can never go on (Holt's reduction): every one that waits for
    /// nothing will finish and let go; so will every waiter the grant rule would admit once
    /// those are gone; repeat. What is left waits, directly or not, on itself. `txns` must
    /// hold everything its waiters wait for (a holder outside it counts as staying).
    pub fn stuck_among(&self, txns: &BTreeSet<TxnId>) -> BTreeSet<TxnId> {
        let waiting = |t: &TxnId| self.txns.get(t).is_some_and(|x| x.waiting.is_some());
        let mut done: BTreeSet<TxnId> = txns.iter().copied().filter(|t| !waiting(t)).collect();
        loop {
            let ready: Vec<TxnId> = txns
                .iter()
                .copied()
                .filter(|t| !done.contains(t))
                .filter(|t| {
                    self.pending_slots(*t).iter().all(|(lock, slot)| {
                        self.keys.get(lock).is_some_and(|k| k.ready_without(*slot, |h| done.contains(&h)))
                    })
                })
                .collect();
            if ready.is_empty() {
                return txns.difference(&done).copied().collect();
            }
            done.extend(ready);
        }
    }

    /// The permit counts of the semaphores in use, as a snapshot section (none when no
    /// semaphore is in use, so older versions still read the file).
    pub(super) fn permits_section(&self) -> Option<(String, Vec<u8>)> {
        let permits: BTreeMap<&LockKey, u32> =
            self.keys.iter().filter(|(_, k)| k.permits > 0).map(|(l, k)| (l, k.permits)).collect();
        (!permits.is_empty())
            .then(|| (PERMITS.to_string(), bincode::serialize(&permits).expect("a map of keys encodes")))
    }

    /// Restores section `name` if it holds permit counts; false if it does not.
    pub(super) fn restore_permits(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        if name != PERMITS {
            return Ok(false);
        }
        let permits: BTreeMap<LockKey, u32> = bincode::deserialize(bytes)
            .map_err(|e| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}")))?;
        for (lock, n) in permits {
            match self.key_mut(&lock) {
                Some(k) => k.permits = n,
                None => {
                    return Err(Rejection::Invalid(format!("snapshot section {name:?} names {lock}, which is idle")))
                }
            }
        }
        Ok(true)
    }
}

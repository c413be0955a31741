//! Leader-side timers: transaction leases and acquire timeouts.
//!
//! Heartbeats are not raft writes (that would put an fsync on every heartbeat); the
//! leader keeps lease deadlines in memory, as etcd does, and proposes only the expiry.
//! Every node tracks the timers from applied effects so that a newly elected leader
//! knows every transaction and wait; on election it restarts them all at their full
//! length, so a failover never expires a healthy client.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::locks::{Effect, LockKey, LockTable, TxnId};
use crate::raft::log_clock::LogClock;

/// Deadlines keyed by `K`, cheap to renew and to pop in deadline order.
#[derive(Debug)]
pub struct DeadlineQueue<K: Ord + Hash + Clone> {
    by_key: HashMap<K, (Instant, Duration)>,
    order: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Hash + Clone> Default for DeadlineQueue<K> {
    fn default() -> Self {
        DeadlineQueue { by_key: HashMap::new(), order: BTreeSet::new() }
    }
}

impl<K: Ord + Hash + Clone> DeadlineQueue<K> {
    /// Sets `key` to expire `length` after `now`.
    pub fn start(&mut self, key: K, length: Duration, now: Instant) {
        self.set(key, now + length, length);
    }

    /// Sets `key` to expire at `at`; later renewals restart it at `length`.
    pub fn set(&mut self, key: K, at: Instant, length: Duration) {
        self.remove(&key);
        self.by_key.insert(key.clone(), (at, length));
        self.order.insert((at, key));
    }

    /// Restarts `key` at its full length; false if it is not tracked.
    pub fn renew(&mut self, key: &K, now: Instant) -> bool {
        match self.by_key.get(key).copied() {
            Some((_, length)) => {
                self.start(key.clone(), length, now);
                true
            }
            None => false,
        }
    }

    pub fn remove(&mut self, key: &K) -> Option<Duration> {
        let (at, length) = self.by_key.remove(key)?;
        self.order.remove(&(at, key.clone()));
        Some(length)
    }

    pub fn remaining(&self, key: &K, now: Instant) -> Option<Duration> {
        self.by_key.get(key).map(|(at, _)| at.saturating_duration_since(now))
    }

    /// Removes and returns every key whose deadline is at or before `now`, with its length.
    pub fn pop_due(&mut self, now: Instant) -> Vec<(K, Duration)> {
        let mut due = Vec::new();
        while let Some((at, key)) = self.order.first().cloned() {
            if at > now {
                break;
            }
            self.order.pop_first();
            let (_, length) = self.by_key.remove(&key).expect("indexed both ways");
            due.push((key, length));
        }
        due
    }

    /// Restarts every deadline at its full length from `now`.
    pub fn restart_all(&mut self, now: Instant) {
        let all: Vec<(K, Duration)> = self.by_key.iter().map(|(k, (_, l))| (k.clone(), *l)).collect();
        for (k, l) in all {
            self.start(k, l, now);
        }
    }

    pub fn clear(&mut self) {
        self.by_key.clear();
        self.order.clear();
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// Why a heartbeat could not renew a lease.
#[derive(Debug, PartialEq, Eq)]
pub enum RenewError {
    /// The leader already decided the lease lapsed; the expiry is being committed.
    Expiring,
    /// No lease is tracked: the transaction's end was applied. A renewal never starts one
    /// (only an applied begin, a restore or a new leadership does), or a heartbeat racing
    /// the end would bring back a timer for a finished transaction.
    Untracked,
}

/// What the timer loop must propose now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    pub expire: Vec<TxnId>,
    pub cancel_waits: Vec<(TxnId, String)>,
    /// Bounded transactions whose maximum duration passed.
    pub overdue: Vec<TxnId>,
    /// Keys whose lock-delay passed.
    pub delays_ended: Vec<LockKey>,
}

#[derive(Default)]
struct Timers {
    leases: DeadlineQueue<TxnId>,
    waits: DeadlineQueue<(TxnId, String)>,
    /// Leases past their deadline whose `Expire` is proposed but not applied yet: a
    /// heartbeat arriving now must not bring them back. They stay here until the expiry
    /// applies or a new leadership restarts them, even when a proposal times out: a
    /// timed-out proposal may still commit.
    expiring: HashMap<TxnId, Duration>,
    /// When to propose the expiry of an expiring lease again (its last proposal failed).
    expiry_retries: DeadlineQueue<TxnId>,
    /// Maximum durations of bounded transactions. Absolute (from the begin, by the
    /// leaders' clocks): never restarted by a new leadership, unlike leases.
    overdue: DeadlineQueue<TxnId>,
    /// Ends of lock-delays: absolute too (from the revocation).
    delays: DeadlineQueue<LockKey>,
}

#[derive(Default)]
pub struct Leases {
    timers: Mutex<Timers>,
    /// Converts the table's times (lock-delay ends, maximum durations) to instants: the
    /// log's time, never this node's wall clock (see `log_clock`).
    clock: Arc<LogClock>,
}

impl Leases {
    pub fn new(clock: Arc<LogClock>) -> Leases {
        Leases { timers: Mutex::default(), clock }
    }

    /// Follows the applied log: start and stop timers. Called under the state write lock,
    /// so whoever reads the table under its read lock sees timers that agree with it.
    pub fn observe(&self, effects: &[Effect], now: Instant) {
        let mut t = self.timers.lock().expect("timers lock");
        for e in effects {
            match e {
                Effect::TxnBegun { txn, lease_ms } => t.leases.start(*txn, Duration::from_millis(*lease_ms), now),
                Effect::DeadlineSet { txn, deadline_ms } => {
                    t.overdue.set(*txn, self.clock.instant_of(*deadline_ms, now), Duration::ZERO)
                }
                Effect::LockDelayed { key, until_ms } => {
                    t.delays.set(key.clone(), self.clock.instant_of(*until_ms, now), Duration::ZERO)
                }
                Effect::TxnFinished { txn, .. } => {
                    t.overdue.remove(txn);
                    t.leases.remove(txn);
                    t.expiring.remove(txn);
                    t.expiry_retries.remove(txn);
                }
                Effect::WaitStarted { txn, request_id, wait_ms, .. } => {
                    t.waits.start((*txn, request_id.clone()), Duration::from_millis(*wait_ms), now)
                }
                Effect::WaitEnded { txn, request_id, .. } => {
                    t.waits.remove(&(*txn, request_id.clone()));
                }
                Effect::TxnChanged { .. }
                | Effect::QueueMoved { .. }
                | Effect::Granted { .. }
                | Effect::KeyChanged { .. }
                | Effect::DeadlockResolved { .. }
                | Effect::Released { .. }
                | Effect::EventsAppended
                | Effect::ApiKeysChanged => {}
            }
        }
    }

    /// Rebuilds every timer from the table at full length (restore, snapshot install).
    pub fn reset(&self, table: &LockTable, now: Instant) {
        let mut t = self.timers.lock().expect("timers lock");
        t.leases.clear();
        t.waits.clear();
        t.expiring.clear();
        t.expiry_retries.clear();
        t.overdue.clear();
        t.delays.clear();
        for (txn, deadline_ms) in table.deadlines() {
            t.overdue.set(txn, self.clock.instant_of(deadline_ms, now), Duration::ZERO);
        }
        for (key, delay) in table.delayed_keys() {
            t.delays.set(key.clone(), self.clock.instant_of(delay.until_ms, now), Duration::ZERO);
        }
        for txn in table.active_txns() {
            t.leases.start(txn.id, Duration::from_millis(txn.lease_ms), now);
            if let Some((request_id, wait_ms)) = table.pending_wait(txn.id) {
                t.waits.start((txn.id, request_id), Duration::from_millis(wait_ms), now);
            }
        }
    }

    /// A new leader restarts every lease and wait at its full length.
    pub fn restart_all(&self, now: Instant) {
        let mut t = self.timers.lock().expect("timers lock");
        t.leases.restart_all(now);
        t.waits.restart_all(now);
        t.expiry_retries.clear();
        let expiring: Vec<(TxnId, Duration)> = t.expiring.drain().collect();
        for (txn, length) in expiring {
            // Their expiry may not have been committed by the old leadership: they get a
            // fresh lease like everyone else rather than hang without a timer.
            t.leases.start(txn, length, now);
        }
    }

    /// Renews `txn`'s lease; returns the lease length. Call it under the state read lock
    /// after checking the transaction is active there: timers follow applies under the
    /// write lock, so the check and the renewal then see the same applied state.
    pub fn renew(&self, txn: TxnId, now: Instant) -> Result<Duration, RenewError> {
        let mut t = self.timers.lock().expect("timers lock");
        if t.expiring.contains_key(&txn) {
            return Err(RenewError::Expiring);
        }
        if !t.leases.renew(&txn, now) {
            return Err(RenewError::Untracked);
        }
        Ok(t.leases.remaining(&txn, now).unwrap_or_default())
    }

    pub fn remaining(&self, txn: TxnId, now: Instant) -> Option<Duration> {
        self.timers.lock().expect("timers lock").leases.remaining(&txn, now)
    }

    /// Pops what is due; due leases are marked expiring until their expiry applies.
    pub fn due(&self, now: Instant) -> Due {
        let mut t = self.timers.lock().expect("timers lock");
        let due_leases = t.leases.pop_due(now);
        let mut expire: Vec<TxnId> = due_leases.iter().map(|(txn, _)| *txn).collect();
        t.expiring.extend(due_leases);
        expire.extend(t.expiry_retries.pop_due(now).into_iter().map(|(txn, _)| txn));
        let cancel_waits = t.waits.pop_due(now).into_iter().map(|(k, _)| k).collect();
        let overdue = t.overdue.pop_due(now).into_iter().map(|(txn, _)| txn).collect();
        let delays_ended = t.delays.pop_due(now).into_iter().map(|(key, _)| key).collect();
        Due { expire, cancel_waits, overdue, delays_ended }
    }

    /// An expiry proposal failed or timed out: propose it again `after` from now. The
    /// lease stays expiring meanwhile (the timed-out proposal may still commit, so a
    /// heartbeat must not be acknowledged in between).
    pub fn retry_expire(&self, txn: TxnId, after: Duration, now: Instant) {
        let mut t = self.timers.lock().expect("timers lock");
        if t.expiring.contains_key(&txn) {
            t.expiry_retries.start(txn, after, now);
        }
    }

    /// An overdue end was not applied (not committed, or not due yet by the log's clock):
    /// ask again `after` from now, unless the transaction ended meanwhile.
    pub fn retry_overdue(&self, table: &LockTable, txn: TxnId, after: Duration, now: Instant) {
        if table.deadline(txn).is_some() {
            self.timers.lock().expect("timers lock").overdue.start(txn, after, now);
        }
    }

    /// Lock-delays whose end was not applied (not committed, or not due yet by the log's
    /// clock): ask again `after` from now for those still delayed.
    pub fn retry_delays(&self, table: &LockTable, keys: Vec<LockKey>, after: Duration, now: Instant) {
        let mut t = self.timers.lock().expect("timers lock");
        for key in keys.into_iter().filter(|k| table.is_delayed(k)) {
            t.delays.start(key, after, now);
        }
    }

    pub fn retry_wait(&self, txn: TxnId, request_id: String, after: Duration, now: Instant) {
        self.timers.lock().expect("timers lock").waits.start((txn, request_id), after, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_pop_in_order_and_renew_pushes_them_back() {
        let now = Instant::now();
        let mut q = DeadlineQueue::default();
        q.start(1u64, Duration::from_millis(100), now);
        q.start(2u64, Duration::from_millis(50), now);
        assert!(q.pop_due(now + Duration::from_millis(10)).is_empty());
        assert!(q.renew(&2, now + Duration::from_millis(40)));
        // Renewed at 40 ms for 50 ms: due at 90 ms, before key 1.
        assert!(q.pop_due(now + Duration::from_millis(60)).is_empty());
        assert_eq!(q.pop_due(now + Duration::from_millis(95)), vec![(2, Duration::from_millis(50))]);
        assert_eq!(q.pop_due(now + Duration::from_millis(100)), vec![(1, Duration::from_millis(100))]);
        assert!(q.is_empty());
    }

    #[test]
    fn an_expiring_lease_cannot_be_renewed_until_a_new_leader_restarts_it() {
        let now = Instant::now();
        let leases = Leases::default();
        leases.observe(&[Effect::TxnBegun { txn: 7, lease_ms: 100 }], now);
        let later = now + Duration::from_millis(150);
        assert_eq!(leases.due(later).expire, vec![7]);
        assert_eq!(leases.renew(7, later), Err(RenewError::Expiring));
        leases.observe(&[Effect::TxnFinished { txn: 7, cause: crate::locks::EndCause::LeaseExpired }], later);
        assert!(leases.remaining(7, later).is_none());
    }

    #[test]
    fn a_renewal_never_brings_back_the_lease_of_an_ended_transaction() {
        let now = Instant::now();
        let leases = Leases::default();
        leases.observe(&[Effect::TxnBegun { txn: 3, lease_ms: 100 }], now);
        assert_eq!(leases.renew(3, now), Ok(Duration::from_millis(100)));
        leases.observe(&[Effect::TxnFinished { txn: 3, cause: crate::locks::EndCause::Committed }], now);
        assert_eq!(leases.renew(3, now), Err(RenewError::Untracked));
        assert!(leases.remaining(3, now).is_none());
        assert_eq!(leases.due(now + Duration::from_secs(1)), Due::default(), "no expiry for an ended transaction");
    }

    #[test]
    fn a_failed_expiry_proposal_keeps_the_lease_expiring_and_is_proposed_again() {
        let now = Instant::now();
        let leases = Leases::default();
        leases.observe(&[Effect::TxnBegun { txn: 9, lease_ms: 100 }], now);
        let lapsed = now + Duration::from_millis(100);
        assert_eq!(leases.due(lapsed).expire, vec![9]);
        // The proposal timed out (it may still commit): heartbeats stay refused.
        leases.retry_expire(9, Duration::from_millis(200), lapsed);
        let between = lapsed + Duration::from_millis(100);
        assert_eq!(leases.renew(9, between), Err(RenewError::Expiring));
        assert_eq!(leases.due(between), Due::default());
        assert_eq!(leases.due(lapsed + Duration::from_millis(200)).expire, vec![9], "proposed again");
        assert_eq!(leases.renew(9, lapsed + Duration::from_millis(250)), Err(RenewError::Expiring));
        // A new leadership gives it a fresh lease instead (its expiry may never have committed).
        leases.restart_all(lapsed + Duration::from_millis(300));
        assert!(leases.renew(9, lapsed + Duration::from_millis(300)).is_ok());
    }

    #[test]
    fn restart_all_gives_every_lease_its_full_length() {
        let now = Instant::now();
        let leases = Leases::default();
        leases.observe(&[Effect::TxnBegun { txn: 1, lease_ms: 1000 }], now);
        let later = now + Duration::from_millis(900);
        leases.restart_all(later);
        assert_eq!(leases.remaining(1, later), Some(Duration::from_millis(1000)));
    }
}

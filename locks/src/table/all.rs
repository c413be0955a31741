//! All-or-nothing acquires of several locks (`Command::AcquireAll`).
//!
//! The request is granted in one apply, every lock at once with a fresh token each (locks
//! the transaction already holds in a covering mode keep theirs), or it waits. A waiting
//! request sits in the queue of every key it still needs, all slots under one ticket, so:
//! - it is fair both ways: single-key requests that came later queue behind it on each of
//!   its keys (it never starves), and it queues behind those that came earlier;
//! - two multi-key requests are ordered the same way on every key they share (one
//!   table-wide ticket), so they never block each other in a circle by queue order alone;
//! - its wait-for edges are the union of its edges on each key, so deadlock detection sees
//!   it like any waiter.
//!
//! It is granted when it may have every one of its keys now (`KeyLock::ready_at`).
//! Meanwhile it may sit at the head of one key's queue waiting for another key; a reader
//! behind it that is compatible with it passes it (it would not delay it), a writer waits.

use super::super::command::{AcquireStatus, Outcome, Rejection};
use super::super::queue::{Slot, Waiter, NORMAL_CLASS, UPGRADE_CLASS};
use super::super::requests::{AllRecord, RequestRecord};
use super::super::types::{Grant, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};
use super::{Effect, LockTable, Pending};

impl LockTable {
    pub(super) fn acquire_all(
        &mut self,
        txn: TxnId,
        request_id: &str,
        locks: &[(LockKey, LockMode)],
        wait_ms: u64,
        policy: VictimPolicy,
    ) -> Outcome {
        if let Some(why) = invalid_lock_list(locks) {
            return Outcome::Rejected(Rejection::Invalid(why));
        }
        match self.recorded_acquire_all(txn, request_id, locks) {
            Ok(Some(status)) => return Outcome::Acquire(status),
            Err(r @ Rejection::RequestIdReused(_)) => return Outcome::Rejected(r),
            _ => {}
        }
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        if let Some(p) = &t.waiting {
            return Outcome::Rejected(Rejection::AlreadyWaiting {
                txn,
                lock: p.lock.clone(),
                request_id: p.request_id.clone(),
            });
        }
        if let Some(r) = locks.iter().find_map(|(lock, mode)| self.check_key_kind(lock, *mode, 0).err()) {
            return Outcome::Rejected(r);
        }
        let status = if self.all_grantable_now(txn, locks) {
            AllRecord::Granted(self.grant_all(txn, request_id, locks))
        } else if wait_ms == 0 {
            // A try-lock: nothing queued, nothing granted.
            AllRecord::Ended(WaitEnd::TimedOut)
        } else {
            self.wait_all(txn, request_id, locks, wait_ms)
        };
        let waiting = matches!(status, AllRecord::Waiting { .. });
        self.remember(txn, request_id, RequestRecord::AcquireAll { locks: locks.to_vec(), status });
        if waiting {
            self.break_deadlock(txn, policy);
        }
        match self.acquire_status(txn, request_id) {
            Ok(Some(status)) => Outcome::Acquire(status),
            _ => unreachable!("the request was just recorded"),
        }
    }

    /// The recorded answer to all-or-nothing acquire `request_id` if it was seen before for
    /// these very locks (same rules as `recorded_acquire`).
    pub fn recorded_acquire_all(
        &self,
        txn: TxnId,
        request_id: &str,
        locks: &[(LockKey, LockMode)],
    ) -> Result<Option<AcquireStatus>, Rejection> {
        let t = self.txns.get(&txn).ok_or(Rejection::NotFound(txn))?;
        match t.requests.get(request_id) {
            None => Ok(None),
            Some(RequestRecord::AcquireAll { locks: l, status }) if l == locks => match status {
                AllRecord::Ended(end @ WaitEnd::TxnEnded { .. }) => Ok(Some(AcquireStatus::Ended(end.clone()))),
                _ if t.state != TxnState::Active => {
                    Err(Rejection::NotActive { txn, state: t.state, cause: t.end_cause, reason: t.end_reason.clone() })
                }
                status => Ok(Some(self.status_of_all(txn, status))),
            },
            Some(_) => Err(Rejection::RequestIdReused(request_id.to_string())),
        }
    }

    /// Whether every lock of the request would be granted at once (the try-lock's answer).
    pub fn all_grantable_now(&self, txn: TxnId, locks: &[(LockKey, LockMode)]) -> bool {
        locks.iter().all(|(lock, mode)| self.grantable_now(txn, lock, *mode))
    }

    pub(super) fn status_of_all(&self, txn: TxnId, record: &AllRecord) -> AcquireStatus {
        match record {
            AllRecord::Granted(grants) => AcquireStatus::GrantedAll { grants: grants.clone() },
            AllRecord::Ended(end) => AcquireStatus::Ended(end.clone()),
            AllRecord::Waiting { .. } => match self.wait_view(txn) {
                Some((_, _, position, blockers)) => AcquireStatus::Queued { position, blockers },
                None => AcquireStatus::Queued { position: 0, blockers: Vec::new() },
            },
        }
    }

    /// Grants every lock of the request that `txn` does not hold in a covering mode (a new
    /// token each, upgrades included) and returns the grants in the order asked.
    fn grant_all(&mut self, txn: TxnId, request_id: &str, locks: &[(LockKey, LockMode)]) -> Vec<Grant> {
        let mut grants = Vec::with_capacity(locks.len());
        for (lock, mode) in locks {
            let held = self.txns[&txn].held.get(lock).copied();
            let (mode, token) = match held {
                Some(h) if h.mode.covers(*mode) => (h.mode, h.token),
                _ => {
                    self.grant(txn, request_id, lock, *mode);
                    (*mode, self.txns[&txn].held.get(lock).expect("just granted").token)
                }
            };
            grants.push(Grant { lock: lock.clone(), mode, token });
        }
        grants
    }

    /// Queues the request in the queue of every key it still needs, under one ticket
    /// (upgrades of held keys in the upgrade class, ahead of ordinary waiters).
    fn wait_all(&mut self, txn: TxnId, request_id: &str, locks: &[(LockKey, LockMode)], wait_ms: u64) -> AllRecord {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        let mut queued = Vec::new();
        for (lock, mode) in locks {
            let class = match self.txns[&txn].held.get(lock) {
                Some(h) if h.mode.covers(*mode) => continue,
                Some(_) => UPGRADE_CLASS,
                None => NORMAL_CLASS,
            };
            let slot = (class, ticket);
            let waiter =
                Waiter { txn, mode: *mode, request_id: request_id.to_string(), wait_ms, since_ms: self.clock_ms };
            self.key_entry(lock).queue.insert(slot, waiter);
            if class == UPGRADE_CLASS {
                self.notify_waiters(lock);
            }
            queued.push((lock.clone(), slot));
        }
        let (lock, slot) = queued.first().cloned().expect("a request that cannot be granted needs a key");
        self.txn_mut(txn).waiting = Some(Pending { lock: lock.clone(), request_id: request_id.to_string(), slot });
        self.effects.push(Effect::WaitStarted { txn, request_id: request_id.to_string(), wait_ms, lock });
        AllRecord::Waiting { queued }
    }

    /// Every (key, slot) the pending request of `txn` occupies: one for a single-key
    /// acquire, one per key still needed for an all-or-nothing one.
    pub fn pending_slots(&self, txn: TxnId) -> Vec<(LockKey, Slot)> {
        let Some(t) = self.txns.get(&txn) else { return Vec::new() };
        let Some(p) = &t.waiting else { return Vec::new() };
        match t.requests.get(&p.request_id) {
            Some(RequestRecord::AcquireAll { status: AllRecord::Waiting { queued }, .. }) => queued.clone(),
            _ => vec![(p.lock.clone(), p.slot)],
        }
    }

    /// Whether the waiter of `txn` in `slot` of `lock` may be granted now: on that key, and,
    /// for an all-or-nothing request, on every other key it waits for.
    pub(super) fn ready(&self, txn: TxnId, lock: &LockKey, slot: Slot) -> bool {
        let on = |l: &LockKey, s: Slot| !self.is_delayed(l) && self.keys.get(l).is_some_and(|k| k.ready_at(s));
        if !on(lock, slot) {
            return false;
        }
        self.pending_slots(txn).iter().all(|(l, s)| on(l, *s))
    }

    /// Grants the pending all-or-nothing request of `txn` (every slot ready): takes it out
    /// of every queue and records the grants.
    pub(super) fn grant_pending_all(&mut self, txn: TxnId) -> Vec<LockKey> {
        let Some(p) = self.txns[&txn].waiting.clone() else { return Vec::new() };
        let slots = self.pending_slots(txn);
        let Some(RequestRecord::AcquireAll { locks, .. }) = self.txns[&txn].requests.get(&p.request_id).cloned() else {
            return Vec::new();
        };
        for (lock, slot) in &slots {
            if let Some(k) = self.key_mut(lock) {
                k.queue.remove(slot);
            }
        }
        let grants = self.grant_all(txn, &p.request_id, &locks);
        let t = self.txn_mut(txn);
        t.waiting = None;
        if let Some(RequestRecord::AcquireAll { status, .. }) = t.requests.get_mut(&p.request_id) {
            *status = AllRecord::Granted(grants);
        }
        self.effects.push(Effect::WaitEnded { txn, request_id: p.request_id, granted: true });
        self.effects.push(Effect::TxnChanged { txn });
        slots.into_iter().map(|(l, _)| l).collect()
    }
}

/// Why a list of locks cannot be one all-or-nothing request: empty, or a key twice.
pub fn invalid_lock_list(locks: &[(LockKey, LockMode)]) -> Option<String> {
    if locks.is_empty() {
        return Some("an all-or-nothing acquire needs at least one lock".into());
    }
    if let Some((l, _)) = locks.iter().find(|(_, m)| *m == LockMode::Semaphore) {
        return Some(format!(
            "{l}: semaphore permits are taken one key at a time (AcquireLock); an all-or-nothing acquire takes EXCLUSIVE and SHARED_READ locks"
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    locks.iter().find(|(l, _)| !seen.insert(l)).map(|(l, _)| {
        format!(
            "lock {l} is named twice in one all-or-nothing acquire; name each key once, with the strongest mode needed"
        )
    })
}

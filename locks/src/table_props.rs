//! Property tests of the lock table: random sequences of every command (begin, acquire in
//! both modes including upgrades, try-locks and retried request ids, release, end, expire, operator
//! abort, acquire timeouts, batches, schedule-slot claims and finishes, the clock moving on) with the table's invariants
//! checked after every step, and replay from a snapshot compared with replay from the log.
//!
//! The examples in `table_tests` pin single behaviours; these look for the interleavings
//! nobody wrote down. A failure prints the shrunk command sequence.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::command::{AcquireStatus, Begin, BeginOption, Command, LogCommand, Outcome};
use super::queue::Waiter;
use super::schedule::{RunResult, RunState, SlotClaim};
use super::table::LockTable;
use super::types::{LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};

const KEYS: [&str; 3] = ["a", "b", "c"];
/// Semaphore keys and their permit counts.
const PERMIT_KEYS: [(&str, u32); 2] = [("p", 2), ("q", 1)];

/// One step of a run. Transactions and keys are picked by index (modulo what exists), so
/// every generated sequence is meaningful and shrinks well.
#[derive(Clone, Debug)]
enum Op {
    Begin {
        priority: i32,
        /// A bounded transaction: its maximum duration.
        max_ms: Option<u64>,
    },
    /// The leader's timer says the transaction's maximum duration passed.
    Overdue {
        t: usize,
    },
    Acquire {
        t: usize,
        k: usize,
        exclusive: bool,
        policy: usize,
        /// A try-lock: `wait_ms` 0.
        try_lock: bool,
    },
    /// An all-or-nothing acquire of the keys in `mask` (bit i = KEYS[i]), each in the mode
    /// of its bit in `exclusive`.
    AcquireAll {
        t: usize,
        mask: u8,
        exclusive: u8,
        try_lock: bool,
    },
    /// The last acquire again with the same request id (a client's retry).
    RetryAcquire,
    Release {
        t: usize,
        k: usize,
    },
    Downgrade {
        t: usize,
        k: usize,
    },
    End {
        t: usize,
        commit: bool,
    },
    Expire {
        t: usize,
    },
    Abort {
        t: usize,
    },
    /// The leader's acquire timer fired for the transaction's pending wait.
    TimeOut {
        t: usize,
    },
    /// A group-committed entry of two steps.
    Batch(Box<Op>, Box<Op>),
    Tick {
        ms: u64,
    },
    /// An operator sets the lock-delay of `PREFIXES[rule]` (0 removes it).
    SetDelay {
        rule: usize,
        ms: u64,
    },
    /// The leader's timer says the key's lock-delay passed.
    EndDelay {
        k: usize,
    },
    /// A permit of `PERMIT_KEYS[k]`; `wrong` declares another count (refused while the key
    /// is in use).
    Permit {
        t: usize,
        k: usize,
        try_lock: bool,
        wrong: bool,
    },
    /// A plain lock on a semaphore key: refused while it is one, a lock when it is idle
    /// (and then permits on it are refused).
    MixLock {
        t: usize,
        k: usize,
    },
    /// Release of a semaphore key's permit (or of the lock `MixLock` took).
    ReleasePermit {
        t: usize,
        k: usize,
    },
    /// A schedule-slot claim of `KEYS[k]` with `PERIODS[period]`.
    Claim {
        t: usize,
        k: usize,
        period: usize,
        retry_failed: bool,
    },
    /// A finish of the key's running claim (or of a slot the transaction never claimed).
    Finish {
        t: usize,
        k: usize,
        result: usize,
    },
}

/// Schedule periods: one under the ticks' size, one over it.
const PERIODS: [u64; 2] = [1_000, 60_000];
/// Finish results: succeeded, failed with a code, failed without, lost.
const RESULTS: [RunResult; 4] = [
    RunResult::Succeeded,
    RunResult::Failed { exit_code: Some(3) },
    RunResult::Failed { exit_code: None },
    RunResult::Lost,
];

/// Lock-delay prefixes: every namespace, two that match "ns" (the longer wins), one that
/// matches none.
const PREFIXES: [&str; 4] = ["", "n", "ns", "x"];

fn single_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (-1..2i32, prop::option::weighted(0.3, 1..8_000u64))
            .prop_map(|(priority, max_ms)| Op::Begin { priority, max_ms }),
        1 => (0..6usize).prop_map(|t| Op::Overdue { t }),
        6 => (0..6usize, 0..KEYS.len(), any::<bool>(), 0..3usize, prop::bool::weighted(0.25))
            .prop_map(|(t, k, exclusive, policy, try_lock)| Op::Acquire { t, k, exclusive, policy, try_lock }),
        3 => (0..6usize, 1..8u8, 0..8u8, prop::bool::weighted(0.25))
            .prop_map(|(t, mask, exclusive, try_lock)| Op::AcquireAll { t, mask, exclusive, try_lock }),
        1 => Just(Op::RetryAcquire),
        3 => (0..6usize, 0..KEYS.len()).prop_map(|(t, k)| Op::Release { t, k }),
        1 => (0..6usize, 0..KEYS.len()).prop_map(|(t, k)| Op::Downgrade { t, k }),
        2 => (0..6usize, any::<bool>()).prop_map(|(t, commit)| Op::End { t, commit }),
        1 => (0..6usize).prop_map(|t| Op::Expire { t }),
        1 => (0..6usize).prop_map(|t| Op::Abort { t }),
        2 => (0..6usize).prop_map(|t| Op::TimeOut { t }),
        1 => (1..5_000u64).prop_map(|ms| Op::Tick { ms }),
        1 => (0..PREFIXES.len(), prop_oneof![Just(0u64), 1..3_000u64]).prop_map(|(rule, ms)| Op::SetDelay { rule, ms }),
        1 => (0..KEYS.len()).prop_map(|k| Op::EndDelay { k }),
        4 => (0..6usize, 0..PERMIT_KEYS.len(), prop::bool::weighted(0.2), prop::bool::weighted(0.05))
            .prop_map(|(t, k, try_lock, wrong)| Op::Permit { t, k, try_lock, wrong }),
        1 => (0..6usize, 0..PERMIT_KEYS.len()).prop_map(|(t, k)| Op::MixLock { t, k }),
        2 => (0..6usize, 0..PERMIT_KEYS.len()).prop_map(|(t, k)| Op::ReleasePermit { t, k }),
        3 => (0..6usize, 0..KEYS.len(), 0..PERIODS.len(), any::<bool>())
            .prop_map(|(t, k, period, retry_failed)| Op::Claim { t, k, period, retry_failed }),
        2 => (0..6usize, 0..KEYS.len(), 0..RESULTS.len()).prop_map(|(t, k, result)| Op::Finish { t, k, result }),
        // Long enough for finished transactions and slot records to be forgotten.
        1 => (600_000..1_500_000u64).prop_map(|ms| Op::Tick { ms }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => single_op(),
        1 => (single_op(), single_op()).prop_map(|(a, b)| Op::Batch(Box::new(a), Box::new(b))),
    ]
}

/// Drives a table through generated steps, keeping the log it applied.
struct Run {
    table: LockTable,
    now: u64,
    seq: u64,
    txns: Vec<TxnId>,
    last_acquire: Option<Command>,
    log: Vec<LogCommand>,
    outcomes: Vec<Outcome>,
}

impl Run {
    fn new() -> Run {
        Run {
            table: LockTable::new(),
            now: 1_000,
            seq: 0,
            txns: Vec::new(),
            last_acquire: None,
            log: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    fn pick(&self, t: usize) -> Option<TxnId> {
        (!self.txns.is_empty()).then(|| self.txns[t % self.txns.len()])
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.seq += 1;
        format!("{prefix}{}", self.seq)
    }

    /// The command for `op`, or None when it needs a transaction and none exists yet.
    fn command(&mut self, op: &Op) -> Option<Command> {
        let key = |k: usize| LockKey::new("ns", KEYS[k]);
        Some(match op {
            Op::Begin { priority, max_ms: None } => Command::Begin {
                request_id: Some(self.fresh_id("b")),
                lease_ms: 5_000,
                priority: *priority,
                name: String::new(),
                owner: String::new(),
            },
            Op::Begin { priority, max_ms: Some(ms) } => Command::BeginWith {
                begin: Begin {
                    request_id: Some(self.fresh_id("b")),
                    lease_ms: 5_000,
                    priority: *priority,
                    name: String::new(),
                    owner: String::new(),
                },
                options: vec![BeginOption::MaxDurationMs(*ms)],
                acquire: None,
            },
            Op::Overdue { t } => Command::EndOverdue { txn: self.pick(*t)? },
            Op::Acquire { t, k, exclusive, policy, try_lock } => {
                let cmd = Command::Acquire {
                    txn: self.pick(*t)?,
                    request_id: self.fresh_id("a"),
                    lock: key(*k),
                    mode: if *exclusive { LockMode::Exclusive } else { LockMode::SharedRead },
                    wait_ms: if *try_lock { 0 } else { 1_000 },
                    victim_policy: [
                        VictimPolicy::LowestPriorityThenYoungest,
                        VictimPolicy::Youngest,
                        VictimPolicy::Oldest,
                    ][*policy],
                };
                self.last_acquire = Some(cmd.clone());
                cmd
            }
            Op::AcquireAll { t, mask, exclusive, try_lock } => {
                let locks = (0..KEYS.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| {
                        (key(i), if exclusive & (1 << i) != 0 { LockMode::Exclusive } else { LockMode::SharedRead })
                    })
                    .collect();
                let cmd = Command::AcquireAll {
                    txn: self.pick(*t)?,
                    request_id: self.fresh_id("m"),
                    locks,
                    wait_ms: if *try_lock { 0 } else { 1_000 },
                    victim_policy: VictimPolicy::Youngest,
                };
                self.last_acquire = Some(cmd.clone());
                cmd
            }
            Op::RetryAcquire => self.last_acquire.clone()?,
            Op::Release { t, k } => Command::Release { txn: self.pick(*t)?, request_id: None, lock: key(*k) },
            Op::Downgrade { t, k } => {
                Command::Downgrade { txn: self.pick(*t)?, request_id: Some(self.fresh_id("d")), lock: key(*k) }
            }
            Op::End { t, commit } => Command::End { txn: self.pick(*t)?, request_id: None, commit: *commit },
            Op::Expire { t } => Command::Expire { txn: self.pick(*t)? },
            Op::Abort { t } => {
                Command::Abort { txn: self.pick(*t)?, request_id: None, operator: "prop".into(), reason: "test".into() }
            }
            Op::TimeOut { t } => {
                let txn = self.pick(*t)?;
                let (request_id, _) = self.table.pending_wait(txn)?;
                Command::CancelWait { txn, request_id }
            }
            Op::Batch(a, b) => {
                let (a, b) = (self.command(a), self.command(b));
                Command::Batch(a.into_iter().chain(b).collect())
            }
            Op::SetDelay { rule, ms } => Command::SetLockDelay { prefix: PREFIXES[*rule].into(), delay_ms: *ms },
            Op::EndDelay { k } => Command::EndLockDelay { keys: vec![key(*k)] },
            Op::Permit { t, k, try_lock, wrong } => {
                let (name, permits) = PERMIT_KEYS[*k];
                let cmd = Command::AcquirePermit {
                    txn: self.pick(*t)?,
                    request_id: self.fresh_id("p"),
                    lock: LockKey::new("ns", name),
                    permits: permits + u32::from(*wrong),
                    wait_ms: if *try_lock { 0 } else { 1_000 },
                    victim_policy: VictimPolicy::LowestPriorityThenYoungest,
                };
                self.last_acquire = Some(cmd.clone());
                cmd
            }
            Op::MixLock { t, k } => Command::Acquire {
                txn: self.pick(*t)?,
                request_id: self.fresh_id("x"),
                lock: LockKey::new("ns", PERMIT_KEYS[*k].0),
                mode: LockMode::Exclusive,
                wait_ms: 1_000,
                victim_policy: VictimPolicy::Youngest,
            },
            Op::ReleasePermit { t, k } => {
                Command::Release { txn: self.pick(*t)?, request_id: None, lock: LockKey::new("ns", PERMIT_KEYS[*k].0) }
            }
            Op::Claim { t, k, period, retry_failed } => Command::ClaimSlot {
                txn: self.pick(*t)?,
                request_id: self.fresh_id("s"),
                lock: key(*k),
                period_ms: PERIODS[*period],
                retry_failed: *retry_failed,
            },
            Op::Finish { t, k, result } => {
                let txn = self.pick(*t)?;
                let slot = self.table.slot_run(&key(*k)).map_or(self.now / 1_000, |r| r.slot);
                Command::FinishSlot {
                    txn,
                    request_id: self.fresh_id("f"),
                    lock: key(*k),
                    slot,
                    result: RESULTS[*result],
                }
            }
            Op::Tick { .. } => return None,
        })
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        if let Op::Tick { ms } = op {
            self.now += ms;
            return Ok(());
        }
        let Some(cmd) = self.command(op) else { return Ok(()) };
        let entry = LogCommand { now_ms: self.now, cmd };
        let before = self.table.clone();
        let outcome = self.table.apply(&entry);
        self.table.take_effects();
        for txn in begun(&outcome) {
            if !self.txns.contains(&txn) {
                self.txns.push(txn);
            }
        }
        check_try_lock(&before, &entry.cmd, &outcome)?;
        check_overdue(&before, &entry, &self.table)?;
        check_end_delay(&before, &entry, &self.table)?;
        check_slot_claim(&before, &entry, &outcome)?;
        self.log.push(entry);
        self.outcomes.push(outcome);
        check_step(&before, &self.table)
    }
}

/// A claim is answered "run" only when its key's slot (by the entry's clock) has no run, or
/// its run failed or was lost and the claim asked to retry.
fn check_slot_claim(before: &LockTable, entry: &LogCommand, outcome: &Outcome) -> Result<(), TestCaseError> {
    let claims: Vec<(&Command, &Outcome)> = match (&entry.cmd, outcome) {
        (Command::Batch(cmds), Outcome::Batch(outs)) => cmds.iter().zip(outs).collect(),
        (cmd, out) => vec![(cmd, out)],
    };
    // Only a claim alone in its entry is checked against `before` (a batch changes it in
    // between).
    if let [(
        Command::ClaimSlot { txn, request_id, lock, period_ms, retry_failed },
        Outcome::SlotClaimed(SlotClaim::Run { slot, .. }),
    )] = claims[..]
    {
        let now = before.clock_ms().max(entry.now_ms);
        if let Some(r) = before.slot_run(lock) {
            let retried = r.txn == *txn && r.request_id == *request_id;
            let same_slot = r.started_ms / period_ms == now / period_ms;
            let may_rerun = *retry_failed && matches!(r.state, RunState::Failed | RunState::Lost);
            prop_assert!(retried || !same_slot || may_rerun, "slot {slot} of {lock} ran twice: {r:?}");
        }
    }
    Ok(())
}

/// A running record's transaction holds its key (claimed EXCLUSIVE, perhaps downgraded
/// since: nobody else can claim while it holds it in any mode); its slot is its start's.
fn check_slot_records(t: &LockTable) -> Result<(), TestCaseError> {
    for (lock, r) in t.slot_runs() {
        if r.state == RunState::Running {
            let holds = t.txn(r.txn).is_some_and(|x| x.state == TxnState::Active && x.held.contains_key(lock));
            prop_assert!(holds, "running {r:?} of {lock} without its transaction holding it");
        }
        prop_assert_eq!(r.slot, r.started_ms / r.period_ms);
    }
    Ok(())
}

/// A lock-delay ends exactly when it is due by the log's clock.
fn check_end_delay(before: &LockTable, entry: &LogCommand, after: &LockTable) -> Result<(), TestCaseError> {
    let Command::EndLockDelay { keys } = &entry.cmd else { return Ok(()) };
    for lock in keys {
        let clock = entry.now_ms.max(before.clock_ms());
        let due = before.key_delay(lock).map(|d| d.until_ms <= clock);
        match due {
            Some(true) | None => prop_assert!(!after.is_delayed(lock), "{lock} is still delayed after its end"),
            Some(false) => prop_assert!(after.is_delayed(lock), "{lock}'s delay ended early"),
        }
    }
    Ok(())
}

/// An overdue end ends a bounded transaction exactly when its deadline passed by the log's
/// clock, as EXPIRED with cause MaxDurationExceeded; otherwise it changes nothing.
fn check_overdue(before: &LockTable, entry: &LogCommand, after: &LockTable) -> Result<(), TestCaseError> {
    let Command::EndOverdue { txn } = &entry.cmd else { return Ok(()) };
    let active = before.txn(*txn).is_some_and(|t| t.state == TxnState::Active);
    let due = before.deadline(*txn).is_some_and(|d| d <= entry.now_ms);
    let ended = active
        && after.txn(*txn).is_some_and(|t| {
            t.state == TxnState::Expired && t.end_cause == Some(super::types::EndCause::MaxDurationExceeded)
        });
    prop_assert_eq!(ended, active && due, "overdue end of {}", txn);
    // A finished transaction past its retention is forgotten at any entry (long ticks).
    let forgotten = !active && after.txn(*txn).is_none();
    if !ended && !forgotten {
        prop_assert!(before.txn(*txn) == after.txn(*txn), "an overdue end that is not due changed {}", txn);
        prop_assert_eq!(before.keys().count(), after.keys().count());
    }
    Ok(())
}

/// A new try-lock by an active transaction that waits for nothing is granted exactly when
/// the table said it could be ([`LockTable::grantable_now`]), and never leaves a waiter.
fn check_try_lock(before: &LockTable, cmd: &Command, outcome: &Outcome) -> Result<(), TestCaseError> {
    if let Command::AcquireAll { txn, request_id, locks, wait_ms: 0, .. } = cmd {
        let fresh = matches!(before.recorded_acquire_all(*txn, request_id, locks), Ok(None));
        let idle = before.txn(*txn).is_some_and(|t| t.state == TxnState::Active && t.waiting.is_none());
        if fresh && idle {
            let granted = matches!(outcome, Outcome::Acquire(AcquireStatus::GrantedAll { .. }));
            prop_assert_eq!(granted, before.all_grantable_now(*txn, locks), "try of {:?}: {:?}", locks, outcome);
            if !granted {
                prop_assert_eq!(outcome, &Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut)));
            }
        }
        return Ok(());
    }
    let Command::Acquire { txn, request_id, lock, mode, wait_ms: 0, .. } = cmd else { return Ok(()) };
    let fresh = matches!(before.recorded_acquire(*txn, request_id, lock, *mode), Ok(None));
    let idle = before.txn(*txn).is_some_and(|t| t.state == TxnState::Active && t.waiting.is_none());
    if !(fresh && idle) {
        return Ok(());
    }
    let granted = matches!(outcome, Outcome::Acquire(AcquireStatus::Granted { .. }));
    prop_assert_eq!(
        granted,
        before.grantable_now(*txn, lock, *mode),
        "try-lock of {:?} by {}: {:?}",
        lock,
        txn,
        outcome
    );
    if !granted {
        prop_assert_eq!(outcome, &Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut)));
    }
    Ok(())
}

/// Transactions an outcome says were begun.
fn begun(o: &Outcome) -> Vec<TxnId> {
    match o {
        Outcome::Begun { txn, .. } | Outcome::BegunAcquire { txn, .. } => vec![*txn],
        Outcome::Batch(all) => all.iter().flat_map(begun).collect(),
        _ => vec![],
    }
}

/// Every queued request as (key, slot, waiter).
fn queued(t: &LockTable) -> Vec<(LockKey, (u8, u64), Waiter)> {
    t.keys().flat_map(|(l, k)| k.queue.iter().map(move |(s, w)| (l.clone(), *s, w.clone()))).collect()
}

/// The invariants of one table, and the promises between it and the one before the step.
fn check_step(before: &LockTable, after: &LockTable) -> Result<(), TestCaseError> {
    check_table(after)?;
    prop_assert!(after.last_token() >= before.last_token(), "the token counter went back");

    // Tokens: every new grant (or upgrade) gets a token above every token handed out
    // before, and no two grants share one.
    let mut new_tokens = BTreeSet::new();
    for (lock, k) in after.keys() {
        for (txn, held) in k.holders.iter() {
            let old = before.key(lock).and_then(|b| b.holders.get(txn));
            if old.map(|o| o.token) == Some(held.token) {
                continue;
            }
            prop_assert!(held.token.0 > before.last_token(), "grant {held:?} to {txn} on {lock} reuses an old token");
            prop_assert!(new_tokens.insert(held.token), "token {:?} granted twice in one step", held.token);
            // FIFO: nobody who waited ahead of it in a conflicting mode is still waiting.
            // A request granted from the queue passes only the waiters before its slot;
            // one granted at once passes every waiter, so the conflicting ones must all
            // have left in this step (granted, or ended: a deadlock victim leaves the queue
            // in the very step that closed the cycle). Only an upgrade of a hold may pass
            // waiters. A compatible waiter may stay behind: a request of several keys waits
            // for another key, and a reader does not delay it.
            let queue_before = before.key(lock).map(|b| &b.queue);
            let slot = queue_before.and_then(|q| q.iter().find(|(_, w)| w.txn == *txn).map(|(s, _)| *s));
            if old.is_none() || slot.is_some() {
                let ahead =
                    queue_before.into_iter().flat_map(|q| q.iter()).filter(|(s, _)| slot.is_none_or(|own| **s < own));
                // A permit passes nobody: a semaphore's queue is strict FIFO.
                let passed = |w: &Waiter| held.mode == LockMode::Semaphore || !w.mode.compatible_with(held.mode);
                for (_, w) in ahead.filter(|(_, w)| passed(w)) {
                    let still = k.queue.values().any(|x| x.txn == w.txn && x.request_id == w.request_id);
                    prop_assert!(!still, "{txn} was granted {lock} ahead of {} queued before it", w.txn);
                }
            }
        }
    }
    Ok(())
}

/// Invariants of one table on its own.
fn check_table(t: &LockTable) -> Result<(), TestCaseError> {
    check_slot_records(t)?;
    for (lock, k) in t.keys() {
        // A semaphore holds and queues only permits, at most its count held; a lock none.
        let permits = k.holders.iter().map(|(_, h)| h.mode).chain(k.queue.values().map(|w| w.mode));
        let permit_modes = permits.filter(|m| *m == LockMode::Semaphore).count();
        if k.permits > 0 {
            prop_assert!(
                k.holders.len() <= k.permits as usize,
                "{lock} has more holders than its {} permits",
                k.permits
            );
            prop_assert_eq!(permit_modes, k.holders.len() + k.queue.len(), "a lock mode on semaphore {}", lock);
        } else {
            prop_assert_eq!(permit_modes, 0, "a permit on lock {}", lock);
        }
        // Never two conflicting holders.
        let modes: Vec<LockMode> = k.holders.iter().map(|(_, h)| h.mode).collect();
        if modes.contains(&LockMode::Exclusive) {
            prop_assert_eq!(modes.len(), 1, "exclusive holder beside others on {}", lock);
        }
        for (txn, held) in k.holders.iter() {
            let owner = t.txn(*txn);
            prop_assert!(owner.is_some_and(|o| o.state == TxnState::Active), "{txn} holds {lock} but is not active");
            prop_assert_eq!(
                owner.unwrap().held.get(lock),
                Some(held),
                "{} disagrees with {} about its hold",
                txn,
                lock
            );
            prop_assert!(held.token.0 <= t.last_token(), "token above the counter");
        }
    }
    for (lock, slot, w) in queued(t) {
        let txn = t.txn(w.txn);
        prop_assert!(txn.is_some_and(|x| x.state == TxnState::Active), "{} waits but is not active", w.txn);
        let pending = txn.unwrap().waiting.as_ref();
        prop_assert!(
            pending.is_some_and(|p| p.request_id == w.request_id)
                && t.pending_slots(w.txn).contains(&(lock.clone(), slot)),
            "{} is queued for {lock} but its transaction says {pending:?}",
            w.txn
        );
    }
    for txn in t.active_txns() {
        for (lock, held) in txn.held.iter() {
            prop_assert_eq!(t.key(lock).and_then(|k| k.holders.get(&txn.id)), Some(held));
        }
        let slots = t.pending_slots(txn.id);
        prop_assert_eq!(txn.waiting.is_some(), !slots.is_empty());
        let mut could_go = !slots.is_empty();
        for (lock, slot) in &slots {
            let k = t.key(lock);
            let w = k.and_then(|k| k.queue.get(slot));
            prop_assert!(w.is_some_and(|w| w.txn == txn.id), "{} waits for {} but is not in its queue", txn.id, lock);
            let (k, w) = (k.unwrap(), w.unwrap());
            // All or nothing: a key it waits for is not already held in a covering mode.
            prop_assert!(
                !txn.held.get(lock).is_some_and(|h| h.mode.covers(w.mode)),
                "{} waits for {lock} it holds",
                txn.id
            );
            // Whether it could have this key now: compatible with the holders and with
            // everyone queued ahead of it.
            let ahead = k.queue.range(..*slot).count();
            could_go &= !t.is_delayed(lock)
                && (k.permits == 0 || k.holders.len() + ahead < k.permits as usize)
                && k.compatible_with_holders(txn.id, w.mode)
                && k.queue.range(..*slot).all(|(_, e)| e.mode.compatible_with(w.mode));
        }
        // Nobody is left waiting who could have every key it waits for.
        prop_assert!(!could_go, "{} waits for {slots:?} although it could be granted", txn.id);
    }
    // A delayed key grants nothing: every hold of it is older than the delay.
    for (lock, delay) in t.delayed_keys() {
        for (txn, held) in t.key(lock).into_iter().flat_map(|k| k.holders.iter()) {
            prop_assert!(held.token.0 <= delay.after_token, "{txn} was granted {lock} during its lock-delay");
        }
    }
    // Only active transactions are bounded.
    for (txn, _) in t.deadlines() {
        prop_assert!(t.txn(txn).is_some_and(|x| x.state == TxnState::Active), "{txn} has a deadline but is not active");
    }
    check_no_deadlock(t)?;
    if t.keys().all(|(_, k)| k.permits == 0) {
        // Without semaphores every wait is for all of its blockers: no cycle at all.
        check_no_cycle(t)?;
    }
    Ok(())
}

/// Every deadlock is broken in the step that closes it: assuming every transaction that
/// waits for nothing finishes, and then every waiter that could then be granted, nobody is
/// left waiting (Holt's reduction, over the whole table, by the grant rule itself).
fn check_no_deadlock(t: &LockTable) -> Result<(), TestCaseError> {
    let active: BTreeSet<TxnId> = t.active_txns().map(|x| x.id).collect();
    let stuck = t.stuck_among(&active);
    prop_assert!(stuck.is_empty(), "deadlocked and left standing: {stuck:?}");
    Ok(())
}

/// Every wait-for cycle is broken in the step that closes it: the graph is acyclic after
/// every step.
fn check_no_cycle(t: &LockTable) -> Result<(), TestCaseError> {
    let mut edges: BTreeMap<TxnId, Vec<TxnId>> = BTreeMap::new();
    for (lock, slot, w) in queued(t) {
        edges.entry(w.txn).or_default().extend(t.key(&lock).unwrap().blockers(slot));
    }
    // Depth-first search with colours: grey = on the current path.
    fn visit(n: TxnId, edges: &BTreeMap<TxnId, Vec<TxnId>>, colour: &mut BTreeMap<TxnId, u8>) -> Option<TxnId> {
        match colour.get(&n) {
            Some(1) => return Some(n),
            Some(_) => return None,
            None => {}
        }
        colour.insert(n, 1);
        for &m in edges.get(&n).map(Vec::as_slice).unwrap_or_default() {
            if let Some(c) = visit(m, edges, colour) {
                return Some(c);
            }
        }
        colour.insert(n, 2);
        None
    }
    let mut colour = BTreeMap::new();
    for &n in edges.keys() {
        let cycle = visit(n, &edges, &mut colour);
        prop_assert!(cycle.is_none(), "a wait-for cycle through {:?} was left standing: {edges:?}", cycle);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(ops in prop::collection::vec(op(), 1..80)) {
        let mut run = Run::new();
        for op in &ops {
            run.step(op)?;
        }
    }

    /// A follower restored from a snapshot taken at any point and then fed the rest of the
    /// log ends with the same table, and answers every later command the same way, as one
    /// that applied the whole log.
    #[test]
    fn replay_from_a_snapshot_equals_replay_from_the_log(
        ops in prop::collection::vec(op(), 1..60),
        split in any::<prop::sample::Index>(),
    ) {
        let mut run = Run::new();
        for op in &ops {
            run.step(op)?;
        }
        let at = split.index(run.log.len() + 1);
        let mut head = LockTable::new();
        for entry in &run.log[..at] {
            head.apply(entry);
        }
        let mut restored: LockTable = bincode::deserialize(&bincode::serialize(&head).unwrap()).unwrap();
        restored.restore_sections(head.sections()).unwrap();
        for (entry, outcome) in run.log[at..].iter().zip(&run.outcomes[at..]) {
            prop_assert_eq!(&restored.apply(entry), outcome);
        }
        restored.take_effects();
        prop_assert!(restored == run.table, "the restored table differs from the one that applied the whole log");
    }
}

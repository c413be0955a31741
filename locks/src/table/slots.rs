//! At most once per schedule slot: a job run under a lock claims slot N of its key, and
//! the cluster remembers that slot N ran, so a host whose clock is off or whose cron fired
//! late skips it.
//!
//! Slots are aligned to the Unix epoch, `N = floor(t / period)`, where `t` is the log's
//! clock (the proposing leader's time carried in the entry), never the client's: two hosts
//! whose clocks disagree by minutes still agree on the slot, because neither decides it.
//! "Slot N ran" means a run of the key *started* inside N's window `[N·p, (N+1)·p)` by the
//! log's clock; so a claim with another period (a schedule changed) is judged by the same
//! rule and no stored slot number has to be converted.
//!
//! A claim is made while holding the key EXCLUSIVE (nobody else can claim it meanwhile)
//! and stays `Running` until its transaction finishes it (`Command::FinishSlot`: succeeded
//! or failed with an exit code). A run whose transaction lets go of the key without a
//! finish — a release, a commit, an expiry, an abort — is `Lost`: nobody can tell whether
//! the job did its work. Whether a failed or lost run's slot may run again is the claimer's
//! choice (`retry_failed`); a succeeded slot never runs twice.
//!
//! One record per key (its last run), forgotten once its slot is over plus
//! `max(SLOT_KEEP_PERIODS periods, SLOT_KEEP_MIN_MS)` by the log's clock (and at least
//! `SLOT_KEEP_MIN_MS` after it ended), never while running. How many records a node keeps (and an API key's share) is bounded by the
//! leader before it proposes a claim that adds one (see `server::limits`).
//!
//! The records are not part of the table's serde form: snapshot files carry them as a
//! section, written only when there is one, so a cluster that never claimed a slot writes
//! snapshots an older version still reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::super::command::{Outcome, Rejection};
use super::super::schedule::{invalid_slot_period, RunResult, RunState, SlotClaim, SlotRun};
use super::super::types::{LockKey, LockMode, TxnId};
use super::LockTable;

/// The replicated slot records, with indexes derived from them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct SlotRuns {
    runs: BTreeMap<LockKey, SlotRun>,
    /// Derived: running claims by transaction, so its end finds them without a scan.
    running: BTreeMap<TxnId, BTreeSet<LockKey>>,
    /// Derived: (expiry, key) in expiry order, and each key's entry in it (a running record
    /// has none).
    expiries: BTreeSet<(u64, LockKey)>,
    expiry_of: BTreeMap<LockKey, u64>,
    /// Derived: records per owner, for the leader's per-key share.
    by_owner: HashMap<String, usize>,
}

/// The section name in snapshot files.
const SECTION: &str = "slot-runs";

impl SlotRuns {
    fn insert(&mut self, lock: LockKey, run: SlotRun) {
        self.remove(&lock);
        if run.state == RunState::Running {
            self.running.entry(run.txn).or_default().insert(lock.clone());
        }
        if let Some(at) = run.expires_at() {
            self.set_expiry(&lock, at);
        }
        *self.by_owner.entry(run.owner.clone()).or_default() += 1;
        self.runs.insert(lock, run);
    }

    fn remove(&mut self, lock: &LockKey) -> Option<SlotRun> {
        let run = self.runs.remove(lock)?;
        self.not_running(run.txn, lock);
        if let Some(at) = self.expiry_of.remove(lock) {
            self.expiries.remove(&(at, lock.clone()));
        }
        if let Some(n) = self.by_owner.get_mut(&run.owner) {
            *n -= 1;
            if *n == 0 {
                self.by_owner.remove(&run.owner);
            }
        }
        Some(run)
    }

    fn set_expiry(&mut self, lock: &LockKey, at: u64) {
        if let Some(old) = self.expiry_of.insert(lock.clone(), at) {
            self.expiries.remove(&(old, lock.clone()));
        }
        self.expiries.insert((at, lock.clone()));
    }

    fn not_running(&mut self, txn: TxnId, lock: &LockKey) {
        if let Some(keys) = self.running.get_mut(&txn) {
            keys.remove(lock);
            if keys.is_empty() {
                self.running.remove(&txn);
            }
        }
    }

    /// Ends run `lock` (it must be running) as `state`.
    fn end(&mut self, lock: &LockKey, state: RunState, exit_code: Option<i32>, reason: String, now_ms: u64) {
        let Some(run) = self.runs.get_mut(lock) else { return };
        run.state = state;
        run.exit_code = exit_code;
        run.reason = reason;
        run.finished_ms = now_ms;
        let (txn, expiry) = (run.txn, run.expires_at());
        self.not_running(txn, lock);
        if let Some(at) = expiry {
            self.set_expiry(lock, at);
        }
    }

    /// Forgets the records past their expiry by `now_ms` (a running one has none).
    fn forget_expired(&mut self, now_ms: u64) {
        while let Some((at, lock)) = self.expiries.first().cloned() {
            if at >= now_ms {
                break;
            }
            self.remove(&lock);
        }
    }

    fn section(&self) -> Option<(String, Vec<u8>)> {
        (!self.runs.is_empty())
            .then(|| (SECTION.to_string(), bincode::serialize(&self.runs).expect("a map of records encodes")))
    }

    /// Restores the section if `name` is this module's; false if it is not.
    fn restore_section(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        if name != SECTION {
            return Ok(false);
        }
        let runs: BTreeMap<LockKey, SlotRun> = bincode::deserialize(bytes)
            .map_err(|e| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}")))?;
        *self = SlotRuns::default();
        for (lock, run) in runs {
            self.insert(lock, run);
        }
        Ok(true)
    }
}

impl LockTable {
    /// Claims the slot of `lock` that the log's clock is in, for a job `txn` runs while it
    /// holds `lock` EXCLUSIVE. See the module's doc for the rule.
    pub(super) fn claim_slot(
        &mut self,
        txn: TxnId,
        request_id: &str,
        lock: &LockKey,
        period_ms: u64,
        retry_failed: bool,
    ) -> Outcome {
        if let Some(run) = self.slot_runs.runs.get(lock) {
            if run.txn == txn && run.request_id == request_id {
                // A retry (after a leader change, say) gets the first answer, even once the
                // clock has moved into the next slot.
                return Outcome::SlotClaimed(SlotClaim::Run { slot: run.slot, attempt: run.attempt });
            }
        }
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        if let Some(why) = invalid_slot_period(period_ms) {
            return Outcome::Rejected(Rejection::Invalid(why));
        }
        if !t.held.get(lock).is_some_and(|h| h.mode == LockMode::Exclusive) {
            return Outcome::Rejected(Rejection::NotHeldExclusive { txn, lock: lock.clone() });
        }
        let (owner, holder) = (t.owner.clone(), t.name.clone());
        let slot = self.clock_ms / period_ms;
        let mut attempt = 1;
        if let Some(run) = self.slot_runs.runs.get(lock).filter(|r| r.started_in(slot, period_ms)) {
            let retry = retry_failed && matches!(run.state, RunState::Failed | RunState::Lost);
            if !retry {
                return Outcome::SlotClaimed(SlotClaim::Skip { slot, run: run.clone() });
            }
            attempt = run.attempt.saturating_add(1);
        }
        let run = SlotRun {
            period_ms,
            slot,
            txn,
            request_id: request_id.to_string(),
            owner,
            holder,
            started_ms: self.clock_ms,
            finished_ms: 0,
            state: RunState::Running,
            exit_code: None,
            reason: String::new(),
            attempt,
            finish_request: None,
        };
        self.slot_runs.insert(lock.clone(), run);
        Outcome::SlotClaimed(SlotClaim::Run { slot, attempt })
    }

    /// Records how `txn`'s run of slot `slot` of `lock` ended. The first finish decides; a
    /// retry of it (same request id) answers the same record, even after the transaction
    /// ended. A transaction that has ended cannot finish: its run is already lost.
    pub(super) fn finish_slot(
        &mut self,
        txn: TxnId,
        request_id: &str,
        lock: &LockKey,
        slot: u64,
        result: RunResult,
    ) -> Outcome {
        let mine = |r: &SlotRun| r.txn == txn && r.slot == slot;
        if let Some(run) = self.slot_runs.runs.get(lock).filter(|r| mine(r)) {
            if run.finish_request.as_deref() == Some(request_id) {
                return Outcome::SlotFinished(run.clone());
            }
        }
        if let Err(r) = self.active(txn) {
            return Outcome::Rejected(r);
        }
        let Some(run) = self.slot_runs.runs.get(lock).filter(|r| mine(r)) else {
            return Outcome::Rejected(Rejection::Invalid(format!(
                "transaction {txn} has no claim on slot {slot} of {lock} (claim it first, with the lock held)"
            )));
        };
        if run.state != RunState::Running {
            // Finished before under another request id: the first finish stands.
            return Outcome::SlotFinished(run.clone());
        }
        let (state, exit_code, reason) = match result {
            RunResult::Succeeded => (RunState::Succeeded, Some(0), String::new()),
            RunResult::Failed { exit_code } => (RunState::Failed, exit_code, String::new()),
            RunResult::Lost => (RunState::Lost, None, "the client lost the lock while the job ran".to_string()),
        };
        self.slot_runs.end(lock, state, exit_code, reason, self.clock_ms);
        let run = self.slot_runs.runs.get_mut(lock).expect("just ended");
        run.finish_request = Some(request_id.to_string());
        Outcome::SlotFinished(run.clone())
    }

    /// `txn` let go of `lock` (or, with None, of everything) while a run it claimed may
    /// still be going: that run is lost.
    pub(super) fn lose_slot_runs(&mut self, txn: TxnId, lock: Option<&LockKey>, why: &str) {
        let Some(keys) = self.slot_runs.running.get(&txn) else { return };
        let keys: Vec<LockKey> = keys.iter().filter(|k| lock.is_none_or(|l| l == *k)).cloned().collect();
        for key in keys {
            let reason = format!("{why} before the run finished");
            self.slot_runs.end(&key, RunState::Lost, None, reason, self.clock_ms);
        }
    }

    /// Forgets slot records past their keep time (the log's clock).
    pub(super) fn forget_old_slot_runs(&mut self) {
        self.slot_runs.forget_expired(self.clock_ms);
    }

    /// The last run of `lock`, while remembered.
    pub fn slot_run(&self, lock: &LockKey) -> Option<&SlotRun> {
        self.slot_runs.runs.get(lock)
    }

    /// Every remembered run, in (namespace, key) order.
    pub fn slot_runs(&self) -> impl Iterator<Item = (&LockKey, &SlotRun)> {
        self.slot_runs.runs.iter()
    }

    /// How many slot records there are, in all and of API key `owner`.
    pub fn slot_run_counts(&self, owner: &str) -> (usize, usize) {
        (self.slot_runs.runs.len(), self.slot_runs.by_owner.get(owner).copied().unwrap_or(0))
    }

    pub(super) fn slot_runs_section(&self) -> Option<(String, Vec<u8>)> {
        self.slot_runs.section()
    }

    pub(super) fn restore_slot_runs(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        self.slot_runs.restore_section(name, bytes)
    }
}

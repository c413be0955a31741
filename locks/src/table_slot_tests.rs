//! Unit tests of schedule slots (`Command::ClaimSlot`, `Command::FinishSlot`).

use super::command::{Command, LogCommand, Outcome, Rejection};
use super::table::{LockTable, RunResult, RunState, SlotClaim, SLOT_KEEP_MIN_MS};
use super::types::{LockKey, LockMode, TxnId, VictimPolicy};

const MIN: u64 = 60_000;
/// A period of 5 minutes; the harness starts 1 minute into slot 1000.
const PERIOD: u64 = 5 * MIN;

struct Harness {
    table: LockTable,
    now: u64,
    seq: u64,
}

fn job() -> LockKey {
    LockKey::new("jobs", "billing")
}

impl Harness {
    fn new() -> Harness {
        Harness { table: LockTable::new(), now: 1000 * PERIOD + MIN, seq: 0 }
    }

    fn apply(&mut self, cmd: Command) -> Outcome {
        self.table.apply(&LogCommand { now_ms: self.now, cmd })
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("r{}", self.seq)
    }

    /// A transaction holding the job's key EXCLUSIVE.
    fn holder(&mut self, owner: &str) -> TxnId {
        let cmd =
            Command::Begin { request_id: None, lease_ms: 5_000, priority: 0, name: "host".into(), owner: owner.into() };
        let Outcome::Begun { txn, .. } = self.apply(cmd) else { panic!("begin") };
        self.acquire(txn, LockMode::Exclusive);
        txn
    }

    fn acquire(&mut self, txn: TxnId, mode: LockMode) {
        let request_id = self.next_id();
        let cmd =
            Command::Acquire { txn, request_id, lock: job(), mode, wait_ms: 0, victim_policy: VictimPolicy::default() };
        assert!(matches!(self.apply(cmd), Outcome::Acquire(super::command::AcquireStatus::Granted { .. })));
    }

    fn claim_as(&mut self, txn: TxnId, request_id: &str, retry_failed: bool) -> Outcome {
        let cmd =
            Command::ClaimSlot { txn, request_id: request_id.into(), lock: job(), period_ms: PERIOD, retry_failed };
        self.apply(cmd)
    }

    fn claim(&mut self, txn: TxnId, retry_failed: bool) -> SlotClaim {
        let id = self.next_id();
        match self.claim_as(txn, &id, retry_failed) {
            Outcome::SlotClaimed(c) => c,
            o => panic!("claim: {o:?}"),
        }
    }

    fn finish(&mut self, txn: TxnId, slot: u64, result: RunResult) -> Outcome {
        let request_id = self.next_id();
        self.apply(Command::FinishSlot { txn, request_id, lock: job(), slot, result })
    }

    fn end(&mut self, txn: TxnId) {
        self.apply(Command::End { txn, request_id: None, commit: true });
    }

    /// One host's whole run: take the key, claim, finish with `result` if it may run, end.
    fn run(&mut self, result: RunResult, retry_failed: bool) -> SlotClaim {
        let txn = self.holder("");
        let claim = self.claim(txn, retry_failed);
        if let SlotClaim::Run { slot, .. } = claim {
            assert!(matches!(self.finish(txn, slot, result), Outcome::SlotFinished(_)));
        }
        self.end(txn);
        claim
    }
}

#[test]
fn a_slot_that_succeeded_is_skipped_until_the_next_slot() {
    let mut h = Harness::new();
    assert_eq!(h.run(RunResult::Succeeded, false), SlotClaim::Run { slot: 1000, attempt: 1 });
    // A late host (its cron fired 3 minutes late, or its clock is behind): same slot by the
    // log's clock, whatever its own clock says.
    h.now += 3 * MIN;
    match h.run(RunResult::Succeeded, true) {
        SlotClaim::Skip { slot: 1000, run } => {
            assert_eq!((run.state, run.exit_code, run.attempt), (RunState::Succeeded, Some(0), 1));
        }
        c => panic!("{c:?}"),
    }
    h.now += MIN;
    assert_eq!(h.run(RunResult::Succeeded, false), SlotClaim::Run { slot: 1001, attempt: 1 });
}

#[test]
fn a_failed_slot_runs_again_only_when_retry_is_asked() {
    let mut h = Harness::new();
    h.run(RunResult::Failed { exit_code: Some(3) }, false);
    match h.run(RunResult::Succeeded, false) {
        SlotClaim::Skip { run, .. } => assert_eq!((run.state, run.exit_code), (RunState::Failed, Some(3))),
        c => panic!("{c:?}"),
    }
    assert_eq!(h.run(RunResult::Succeeded, true), SlotClaim::Run { slot: 1000, attempt: 2 });
    assert!(matches!(h.run(RunResult::Succeeded, true), SlotClaim::Skip { .. }));
}

#[test]
fn a_run_whose_transaction_ends_or_releases_the_key_without_finishing_is_lost() {
    let mut h = Harness::new();
    let txn = h.holder("");
    assert!(matches!(h.claim(txn, false), SlotClaim::Run { .. }));
    h.apply(Command::Expire { txn });
    let run = h.table.slot_run(&job()).unwrap().clone();
    assert_eq!(run.state, RunState::Lost);
    assert!(run.reason.contains("lease expired"), "{}", run.reason);
    // Its finish comes too late: the transaction is gone.
    assert!(matches!(h.finish(txn, 1000, RunResult::Succeeded), Outcome::Rejected(Rejection::NotActive { .. })));
    assert_eq!(h.table.slot_run(&job()).unwrap().state, RunState::Lost);

    let txn = h.holder("");
    assert!(matches!(h.claim(txn, true), SlotClaim::Run { attempt: 2, .. }));
    h.apply(Command::Release { txn, request_id: None, lock: job() });
    assert_eq!(h.table.slot_run(&job()).unwrap().state, RunState::Lost);
}

#[test]
fn a_claim_is_made_holding_the_key_exclusive() {
    let mut h = Harness::new();
    let cmd = Command::Begin { request_id: None, lease_ms: 5_000, priority: 0, name: "t".into(), owner: String::new() };
    let Outcome::Begun { txn, .. } = h.apply(cmd) else { panic!() };
    assert!(matches!(h.claim_as(txn, "c", false), Outcome::Rejected(Rejection::NotHeldExclusive { .. })));
    h.acquire(txn, LockMode::SharedRead);
    assert!(matches!(h.claim_as(txn, "c", false), Outcome::Rejected(Rejection::NotHeldExclusive { .. })));
    assert!(h.table.slot_run(&job()).is_none());
    let cmd = Command::ClaimSlot { txn, request_id: "p".into(), lock: job(), period_ms: 10, retry_failed: false };
    assert!(matches!(h.apply(cmd), Outcome::Rejected(Rejection::Invalid(_))));
}

#[test]
fn retries_get_the_first_answer() {
    let mut h = Harness::new();
    let txn = h.holder("");
    assert_eq!(h.claim_as(txn, "c1", false), Outcome::SlotClaimed(SlotClaim::Run { slot: 1000, attempt: 1 }));
    // A retry after the clock moved into the next slot: still the first answer, no second run.
    h.now += PERIOD;
    assert_eq!(h.claim_as(txn, "c1", false), Outcome::SlotClaimed(SlotClaim::Run { slot: 1000, attempt: 1 }));
    let finish = Command::FinishSlot {
        txn,
        request_id: "f1".into(),
        lock: job(),
        slot: 1000,
        result: RunResult::Failed { exit_code: Some(1) },
    };
    let first = h.apply(finish.clone());
    h.end(txn);
    assert_eq!(h.apply(finish), first, "a retried finish after the end answers the same");
    assert_eq!(h.table.slot_run(&job()).unwrap().state, RunState::Failed);
}

#[test]
fn records_expire_by_the_logs_clock_and_survive_a_snapshot() {
    let mut h = Harness::new();
    h.run(RunResult::Succeeded, false);
    let mut copy = LockTable::new();
    copy.restore_sections(h.table.sections()).unwrap();
    assert_eq!(copy.slot_run(&job()), h.table.slot_run(&job()));
    assert_eq!(copy.slot_run_counts(""), (1, 1));
    // Kept past its slot for max(2 periods, 10 minutes): here 10 minutes.
    h.now = 1001 * PERIOD + SLOT_KEEP_MIN_MS;
    h.apply(Command::Expire { txn: 999 });
    assert!(h.table.slot_run(&job()).is_some());
    h.now += 1;
    h.apply(Command::Expire { txn: 999 });
    assert!(h.table.slot_run(&job()).is_none());
    assert_eq!(h.table.slot_run_counts(""), (0, 0));
    assert!(h.table.sections().iter().all(|(name, _)| name != "slot-runs"), "no section without records");
}

#[test]
fn a_running_record_is_not_forgotten() {
    let mut h = Harness::new();
    let txn = h.holder("k");
    h.claim(txn, false);
    h.now += 100 * PERIOD;
    h.apply(Command::Expire { txn: 999 });
    assert_eq!(h.table.slot_run(&job()).unwrap().state, RunState::Running);
    assert!(matches!(h.finish(txn, 1000, RunResult::Succeeded), Outcome::SlotFinished(_)));
    h.end(txn);
    h.now += SLOT_KEEP_MIN_MS + 1;
    h.apply(Command::Expire { txn: 999 });
    assert!(h.table.slot_run(&job()).is_none());
}

#[test]
fn a_replica_restored_from_a_snapshot_forgets_a_long_runs_record_at_the_same_entry() {
    let mut h = Harness::new();
    let txn = h.holder("");
    h.claim(txn, false);
    // The run outlasts its slot's keep time (the record stays while it runs), then ends.
    h.now += 10 * PERIOD;
    h.apply(Command::Expire { txn: 999 });
    h.now += PERIOD;
    assert!(matches!(h.finish(txn, 1000, RunResult::Succeeded), Outcome::SlotFinished(_)));
    // A replica restored from a snapshot here keeps or forgets the record at every later
    // entry exactly as the table that applied the whole log.
    let mut copy = LockTable::new();
    copy.restore_sections(h.table.sections()).unwrap();
    let mut copy = Harness { table: copy, now: h.now, seq: 1_000 };
    for step in [1, SLOT_KEEP_MIN_MS / 2, SLOT_KEEP_MIN_MS / 2, 1] {
        h.now += step;
        copy.now = h.now;
        h.apply(Command::Expire { txn: 999 });
        copy.apply(Command::Expire { txn: 999 });
        assert_eq!(h.table.slot_run(&job()).is_some(), copy.table.slot_run(&job()).is_some(), "at {}", h.now);
    }
    assert!(h.table.slot_run(&job()).is_none(), "forgotten 10 minutes after it ended");
}

//! Unit tests of counted semaphores (`Command::AcquirePermit`).

use super::command::{AcquireStatus, Command, LogCommand, Outcome, Rejection};
use super::table::LockTable;
use super::types::{EndCause, LockKey, LockMode, TxnId, TxnState, VictimPolicy};

use LockMode::{Exclusive as X, Semaphore as P};

#[derive(Default)]
struct Harness {
    table: LockTable,
    seq: u64,
}

impl Harness {
    fn apply(&mut self, cmd: Command) -> Outcome {
        self.table.apply(&LogCommand { now_ms: 1_000, cmd })
    }

    fn begin(&mut self, priority: i32) -> TxnId {
        let cmd =
            Command::Begin { request_id: None, lease_ms: 5_000, priority, name: String::new(), owner: String::new() };
        match self.apply(cmd) {
            Outcome::Begun { txn, .. } => txn,
            o => panic!("begin: {o:?}"),
        }
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("r{}", self.seq)
    }

    fn permit_with(&mut self, txn: TxnId, key: &str, permits: u32, wait_ms: u64) -> Outcome {
        let request_id = self.next_id();
        self.apply(Command::AcquirePermit {
            txn,
            request_id,
            lock: LockKey::new("ns", key),
            permits,
            wait_ms,
            victim_policy: VictimPolicy::default(),
        })
    }

    fn permit(&mut self, txn: TxnId, key: &str, permits: u32) -> AcquireStatus {
        match self.permit_with(txn, key, permits, 60_000) {
            Outcome::Acquire(s) => s,
            o => panic!("permit: {o:?}"),
        }
    }

    fn lock_with(&mut self, txn: TxnId, key: &str, mode: LockMode) -> Outcome {
        let request_id = self.next_id();
        self.apply(Command::Acquire {
            txn,
            request_id,
            lock: LockKey::new("ns", key),
            mode,
            wait_ms: 60_000,
            victim_policy: VictimPolicy::default(),
        })
    }

    fn lock(&mut self, txn: TxnId, key: &str) -> AcquireStatus {
        match self.lock_with(txn, key, X) {
            Outcome::Acquire(s) => s,
            o => panic!("lock: {o:?}"),
        }
    }

    fn release(&mut self, txn: TxnId, key: &str) {
        self.apply(Command::Release { txn, request_id: None, lock: LockKey::new("ns", key) });
    }

    fn holds(&self, txn: TxnId, key: &str) -> bool {
        self.table.txn(txn).is_some_and(|t| t.held.contains_key(&LockKey::new("ns", key)))
    }

    fn state(&self, txn: TxnId) -> TxnState {
        self.table.txn(txn).unwrap().state
    }
}

fn token(s: &AcquireStatus) -> u64 {
    match s {
        AcquireStatus::Granted { token, mode: P } => token.0,
        other => panic!("not a granted permit: {other:?}"),
    }
}

fn invalid(o: &Outcome, words: &str) {
    let said = match o {
        Outcome::Rejected(r @ (Rejection::Invalid(_) | Rejection::SemaphoreMismatch { .. })) => r.to_string(),
        other => panic!("{other:?} is no refusal as invalid"),
    };
    assert!(said.contains(words), "{o:?} should say {words:?}");
}

#[test]
fn up_to_n_holders_each_with_a_token_then_fifo() {
    let mut h = Harness::default();
    let (a, b, c, d) = (h.begin(0), h.begin(0), h.begin(0), h.begin(0));
    let (ta, tb) = (token(&h.permit(a, "s", 2)), token(&h.permit(b, "s", 2)));
    assert!(tb > ta, "each permit has its own token");
    assert_eq!(h.permit(c, "s", 2), AcquireStatus::Queued { position: 1, blockers: vec![a, b] });
    assert_eq!(h.permit(d, "s", 2), AcquireStatus::Queued { position: 2, blockers: vec![a, b, c] });
    assert_eq!(token(&h.permit(a, "s", 2)), ta, "re-entrant: the same permit");
    h.release(a, "s");
    assert!(h.holds(c, "s") && !h.holds(d, "s"), "the first waiter gets the freed permit");
    h.release(b, "s");
    assert!(h.holds(d, "s"));
    assert_eq!(h.table.key(&LockKey::new("ns", "s")).unwrap().holders.len(), 2);
}

#[test]
fn a_try_lock_gets_a_free_permit_and_is_refused_when_none_is_left() {
    let mut h = Harness::default();
    let (a, b) = (h.begin(0), h.begin(0));
    assert!(matches!(h.permit_with(a, "s", 1, 0), Outcome::Acquire(AcquireStatus::Granted { .. })));
    assert!(matches!(h.permit_with(b, "s", 1, 0), Outcome::Acquire(AcquireStatus::Ended(_))));
    assert!(!h.table.grantable_now(b, &LockKey::new("ns", "s"), P));
}

#[test]
fn mixing_a_semaphore_with_a_lock_or_another_count_is_refused() {
    let mut h = Harness::default();
    let (a, b) = (h.begin(0), h.begin(0));
    h.permit(a, "s", 3);
    invalid(&h.lock_with(b, "s", X), "is a semaphore with 3 permits");
    invalid(&h.lock_with(b, "s", LockMode::SharedRead), "mode SEMAPHORE and permits 3");
    invalid(&h.permit_with(b, "s", 4, 1_000), "declares 4");
    // The declared count is data, for a client to word its own advice.
    let mismatch =
        |asked| Outcome::Rejected(Rejection::SemaphoreMismatch { lock: LockKey::new("ns", "s"), declared: 3, asked });
    assert_eq!(h.lock_with(b, "s", X), mismatch(0));
    assert_eq!(h.permit_with(b, "s", 4, 1_000), mismatch(4));
    invalid(&h.permit_with(b, "s", 0, 1_000), "between 1 and");
    invalid(&h.lock_with(b, "s", P), "needs permits");
    h.lock(a, "plain");
    invalid(&h.permit_with(b, "plain", 2, 1_000), "in use as a lock");
    let all = h.apply(Command::AcquireAll {
        txn: b,
        request_id: "all".into(),
        locks: vec![(LockKey::new("ns", "s"), P)],
        wait_ms: 1_000,
        victim_policy: VictimPolicy::default(),
    });
    invalid(&all, "one key at a time");
    let all = h.apply(Command::AcquireAll {
        txn: b,
        request_id: "all2".into(),
        locks: vec![(LockKey::new("ns", "s"), X)],
        wait_ms: 1_000,
        victim_policy: VictimPolicy::default(),
    });
    invalid(&all, "is a semaphore");
    assert!(!h.holds(b, "s") && h.table.txn(b).unwrap().waiting.is_none(), "nothing half-applied");
    // Once idle, the key may be declared again, with another count or as a lock.
    h.release(a, "s");
    assert!(h.table.key(&LockKey::new("ns", "s")).is_none());
    h.lock(b, "s");
    h.release(b, "s");
    token(&h.permit(b, "s", 5));
    // A permit is not downgraded.
    let d = h.apply(Command::Downgrade { txn: b, request_id: None, lock: LockKey::new("ns", "s") });
    assert!(matches!(d, Outcome::Downgraded { held: Some(held) } if held.mode == P));
}

#[test]
fn a_cycle_through_a_permit_wait_is_no_deadlock_while_another_holder_can_leave() {
    let mut h = Harness::default();
    let (a, b, t) = (h.begin(0), h.begin(0), h.begin(0));
    h.permit(a, "s", 2);
    h.permit(b, "s", 2);
    h.lock(t, "l");
    assert!(matches!(h.lock(a, "l"), AcquireStatus::Queued { .. }), "a waits for t");
    // t waits for a permit: a cycle t -> a -> t, but b can still leave.
    assert!(matches!(h.permit(t, "s", 2), AcquireStatus::Queued { .. }));
    assert_eq!([h.state(a), h.state(b), h.state(t)], [TxnState::Active; 3], "no victim");
    h.release(b, "s");
    assert!(h.holds(t, "s"), "b's permit went to t");
}

#[test]
fn a_deadlock_through_permits_is_broken_by_a_victim_from_the_cycle() {
    let mut h = Harness::default();
    let (a, b, t) = (h.begin(5), h.begin(5), h.begin(1));
    let bystander = h.begin(0);
    h.permit(a, "s", 2);
    h.permit(b, "s", 2);
    h.lock(t, "l1");
    h.lock(t, "l2");
    h.lock(bystander, "other");
    assert!(matches!(h.lock(a, "l1"), AcquireStatus::Queued { .. }));
    assert!(matches!(h.lock(b, "l2"), AcquireStatus::Queued { .. }));
    // Every holder of the semaphore now waits for t: t's wait closes a real deadlock.
    let _ = h.permit(t, "s", 2);
    assert_eq!(h.state(t), TxnState::Aborted, "t, the lowest priority, is the victim");
    assert_eq!(h.table.txn(t).unwrap().end_cause, Some(EndCause::DeadlockVictim));
    assert!(h.holds(a, "l1") && h.holds(b, "l2"), "the others go on");
    assert_eq!(h.state(bystander), TxnState::Active);
}

#[test]
fn a_one_permit_semaphore_deadlocks_like_a_lock() {
    let mut h = Harness::default();
    let (a, t) = (h.begin(5), h.begin(1));
    h.permit(a, "s", 1);
    h.lock(t, "l");
    assert!(matches!(h.lock(a, "l"), AcquireStatus::Queued { .. }));
    let _ = h.permit(t, "s", 1);
    assert_eq!(h.state(t), TxnState::Aborted);
    assert!(h.holds(a, "l"));
}

#[test]
fn permit_counts_survive_a_snapshot() {
    let mut h = Harness::default();
    let (a, b) = (h.begin(0), h.begin(0));
    assert_eq!(h.table.sections().len(), 1, "no semaphore, no section");
    h.permit(a, "s", 1);
    h.permit(b, "s", 1);
    let mut restored: LockTable = bincode::deserialize(&bincode::serialize(&h.table).unwrap()).unwrap();
    restored.restore_sections(h.table.sections()).unwrap();
    h.table.take_effects();
    assert!(restored == h.table, "the permit count comes back from its section");
    assert_eq!(restored.key(&LockKey::new("ns", "s")).unwrap().permits, 1);
}

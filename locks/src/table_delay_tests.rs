//! Unit tests of lock-delay (`Command::SetLockDelay`, `Command::EndLockDelay`).

use super::command::{AcquireStatus, Command, LogCommand, Outcome, Rejection};
use super::table::{Effect, LockTable};
use super::types::{EndCause, LockKey, LockMode, TxnId, VictimPolicy};

use LockMode::{Exclusive as X, SharedRead as S};

struct Harness {
    table: LockTable,
    now: u64,
    seq: u64,
}

impl Harness {
    fn new() -> Harness {
        Harness { table: LockTable::new(), now: 1_000, seq: 0 }
    }

    fn apply(&mut self, cmd: Command) -> Outcome {
        self.table.apply(&LogCommand { now_ms: self.now, cmd })
    }

    fn set_delay(&mut self, prefix: &str, delay_ms: u64) -> Outcome {
        self.apply(Command::SetLockDelay { prefix: prefix.into(), delay_ms })
    }

    fn begin(&mut self) -> TxnId {
        let cmd =
            Command::Begin { request_id: None, lease_ms: 5_000, priority: 0, name: "t".into(), owner: String::new() };
        match self.apply(cmd) {
            Outcome::Begun { txn, .. } => txn,
            o => panic!("begin: {o:?}"),
        }
    }

    fn acquire(&mut self, txn: TxnId, ns: &str, mode: LockMode, wait_ms: u64) -> AcquireStatus {
        self.seq += 1;
        let cmd = Command::Acquire {
            txn,
            request_id: format!("a{}", self.seq),
            lock: LockKey::new(ns, "k"),
            mode,
            wait_ms,
            victim_policy: VictimPolicy::default(),
        };
        match self.apply(cmd) {
            Outcome::Acquire(s) => s,
            o => panic!("acquire: {o:?}"),
        }
    }

    fn holds(&self, txn: TxnId, ns: &str) -> bool {
        self.table.txn(txn).is_some_and(|t| t.held.contains_key(&LockKey::new(ns, "k")))
    }

    fn end_delay(&mut self, ns: &str) -> Outcome {
        self.apply(Command::EndLockDelay { keys: vec![LockKey::new(ns, "k")] })
    }
}

fn granted(s: &AcquireStatus) -> bool {
    matches!(s, AcquireStatus::Granted { .. })
}

#[test]
fn an_expired_holders_key_waits_out_the_delay_then_goes_to_the_queue() {
    let mut h = Harness::new();
    assert_eq!(h.set_delay("billing", 2_000), Outcome::LockDelaySet { previous_ms: 0 });
    let (a, b, c) = (h.begin(), h.begin(), h.begin());
    assert!(granted(&h.acquire(a, "billing-eu", X, 1_000)));
    assert!(!granted(&h.acquire(b, "billing-eu", X, 60_000)), "b queues behind a");
    h.table.take_effects();
    h.now = 1_500;
    h.apply(Command::Expire { txn: a });
    let key = LockKey::new("billing-eu", "k");
    let delay = *h.table.key_delay(&key).expect("the key is delayed");
    assert_eq!((delay.until_ms, delay.txn, delay.cause), (3_500, a, EndCause::LeaseExpired));
    assert!(h.table.take_effects().contains(&Effect::LockDelayed { key: key.clone(), until_ms: 3_500 }));
    assert!(!h.holds(b, "billing-eu"), "the queued waiter is not granted during the delay");
    assert!(!h.table.grantable_now(c, &key, S), "a try-lock is refused during the delay");
    assert!(matches!(h.acquire(c, "billing-eu", S, 0), AcquireStatus::Ended(_)));
    assert!(!granted(&h.acquire(c, "billing-eu", S, 60_000)), "a new request queues behind b");

    // Proposed early (a leader clock ahead of the log's): nothing changes.
    h.now = 3_000;
    assert_eq!(h.end_delay("billing-eu"), Outcome::LockDelaysEnded { ended: 0 });
    assert!(h.table.is_delayed(&key) && !h.holds(b, "billing-eu"));
    h.now = 3_500;
    assert_eq!(h.end_delay("billing-eu"), Outcome::LockDelaysEnded { ended: 1 });
    assert!(!h.table.is_delayed(&key));
    assert!(h.holds(b, "billing-eu") && !h.holds(c, "billing-eu"), "FIFO order is kept across the delay");
    assert_eq!(h.end_delay("billing-eu"), Outcome::LockDelaysEnded { ended: 0 }, "a repeated end is a no-op");
}

#[test]
fn a_normal_release_commit_or_client_abort_is_never_delayed() {
    let mut h = Harness::new();
    h.set_delay("", 5_000);
    for how in 0..3 {
        let (a, b) = (h.begin(), h.begin());
        assert!(granted(&h.acquire(a, "ns", X, 1_000)));
        assert!(!granted(&h.acquire(b, "ns", X, 60_000)));
        let lock = LockKey::new("ns", "k");
        match how {
            0 => h.apply(Command::Release { txn: a, request_id: None, lock: lock.clone() }),
            1 => h.apply(Command::End { txn: a, request_id: None, commit: true }),
            _ => h.apply(Command::End { txn: a, request_id: None, commit: false }),
        };
        assert!(h.holds(b, "ns"), "way {how}: the next waiter gets the key at once");
        assert!(!h.table.is_delayed(&lock));
        h.apply(Command::End { txn: b, request_id: None, commit: true });
    }
}

#[test]
fn every_revocation_delays_and_only_matching_namespaces() {
    let mut h = Harness::new();
    h.set_delay("pay", 1_000);
    h.set_delay("payroll", 3_000);
    for (cause, ns, delay) in [
        (EndCause::OperatorAbort, "payments", 1_000),
        (EndCause::LeaseExpired, "payroll-2", 3_000),
        (EndCause::OperatorAbort, "other", 0),
    ] {
        let a = h.begin();
        assert!(granted(&h.acquire(a, ns, X, 1_000)));
        match cause {
            EndCause::OperatorAbort => {
                h.apply(Command::Abort { txn: a, request_id: None, operator: "op".into(), reason: "test".into() })
            }
            _ => h.apply(Command::Expire { txn: a }),
        };
        let got = h.table.key_delay(&LockKey::new(ns, "k")).map(|d| d.until_ms - h.now);
        assert_eq!(got, (delay > 0).then_some(delay), "{ns}: the longest matching prefix decides");
        assert_eq!(h.table.lock_delay_for(ns), delay);
    }
}

#[test]
fn a_deadlock_victims_keys_are_delayed_too() {
    let mut h = Harness::new();
    h.set_delay("", 1_000);
    let (a, b) = (h.begin(), h.begin());
    assert!(granted(&h.acquire(a, "one", X, 1_000)));
    assert!(granted(&h.acquire(b, "two", X, 1_000)));
    assert!(!granted(&h.acquire(a, "two", X, 60_000)));
    // b closes the cycle; the youngest (b) is the default victim.
    let _ = h.acquire(b, "one", X, 60_000);
    let victim = if h.table.txn(a).unwrap().state == super::types::TxnState::Active { b } else { a };
    let survivor = if victim == a { b } else { a };
    let victim_key = if victim == a { "one" } else { "two" };
    let delay = h.table.key_delay(&LockKey::new(victim_key, "k")).expect("the victim's key is delayed");
    assert_eq!(delay.cause, EndCause::DeadlockVictim);
    assert!(!h.holds(survivor, victim_key), "the survivor waits out the delay");
    h.now += 1_000;
    h.end_delay(victim_key);
    assert!(h.holds(survivor, victim_key));
}

#[test]
fn surviving_readers_keep_their_hold_and_an_upgrade_waits() {
    let mut h = Harness::new();
    h.set_delay("", 1_000);
    let (a, b) = (h.begin(), h.begin());
    assert!(granted(&h.acquire(a, "ns", S, 1_000)));
    assert!(granted(&h.acquire(b, "ns", S, 1_000)));
    h.apply(Command::Expire { txn: a });
    assert!(h.holds(b, "ns"), "a reader that was not revoked keeps its hold");
    assert!(granted(&h.acquire(b, "ns", S, 1_000)), "a covering re-acquire still answers");
    assert!(!granted(&h.acquire(b, "ns", X, 60_000)), "an upgrade waits out the delay");
    h.now += 1_000;
    h.end_delay("ns");
    assert!(matches!(h.table.txn(b).unwrap().held.get(&LockKey::new("ns", "k")), Some(x) if x.mode == X));
}

#[test]
fn rules_are_bounded_and_zero_removes_one() {
    let mut h = Harness::new();
    let too_long = h.set_delay("x", super::table::MAX_LOCK_DELAY_MS + 1);
    assert!(matches!(too_long, Outcome::Rejected(Rejection::Invalid(ref m)) if m.contains("maximum")), "{too_long:?}");
    for i in 0..super::table::MAX_LOCK_DELAY_RULES {
        assert_eq!(h.set_delay(&format!("p{i}"), 10), Outcome::LockDelaySet { previous_ms: 0 });
    }
    let over = h.set_delay("one-more", 10);
    assert!(matches!(over, Outcome::Rejected(Rejection::Invalid(ref m)) if m.contains("256")), "{over:?}");
    assert_eq!(h.set_delay("p0", 20), Outcome::LockDelaySet { previous_ms: 10 }, "changing a rule is no new rule");
    assert_eq!(h.set_delay("p0", 0), Outcome::LockDelaySet { previous_ms: 20 });
    assert_eq!(h.set_delay("one-more", 10), Outcome::LockDelaySet { previous_ms: 0 });
    assert_eq!(h.table.lock_delay_rules().count(), super::table::MAX_LOCK_DELAY_RULES);
}

#[test]
fn delays_survive_a_snapshot_and_an_unused_feature_writes_no_section() {
    let mut h = Harness::new();
    assert_eq!(h.table.sections().len(), 1, "only the deadlines while nobody set a lock-delay");
    h.set_delay("ns", 1_000);
    let a = h.begin();
    assert!(granted(&h.acquire(a, "ns", X, 1_000)));
    h.apply(Command::Expire { txn: a });
    let mut restored: LockTable = bincode::deserialize(&bincode::serialize(&h.table).unwrap()).unwrap();
    assert!(!restored.is_delayed(&LockKey::new("ns", "k")), "not in the serde form");
    restored.restore_sections(h.table.sections()).unwrap();
    h.table.take_effects();
    assert!(restored == h.table, "the rules and the delayed key come back from their sections");
    assert_eq!(restored.key_delay(&LockKey::new("ns", "k")).map(|d| d.until_ms), Some(2_000));
}

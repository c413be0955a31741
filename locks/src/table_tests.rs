//! Unit tests of the lock table: the semantics without raft or network.

use super::command::{AcquireStatus, Command, LogCommand, Outcome, Rejection};
use super::table::{Effect, LockTable, FINISHED_RETENTION_MS};
use super::types::{EndCause, FencingToken, Held, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};

use LockMode::{Exclusive as X, SharedRead as S};

struct Harness {
    table: LockTable,
    now: u64,
    seq: u64,
    policy: VictimPolicy,
}

impl Harness {
    fn new() -> Self {
        Harness { table: LockTable::new(), now: 1_000, seq: 0, policy: VictimPolicy::default() }
    }

    fn apply(&mut self, cmd: Command) -> Outcome {
        self.table.apply(&LogCommand { now_ms: self.now, cmd })
    }

    fn begin(&mut self) -> TxnId {
        self.seq += 1;
        match self.apply(Command::Begin {
            request_id: Some(format!("b{}", self.seq)),
            lease_ms: 5_000,
            priority: 0,
            name: String::new(),
            owner: String::new(),
        }) {
            Outcome::Begun { txn, .. } => txn,
            o => panic!("begin: {o:?}"),
        }
    }

    fn acquire_with_outcome(&mut self, txn: TxnId, key: &str, mode: LockMode, request_id: &str) -> Outcome {
        self.apply(Command::Acquire {
            txn,
            request_id: request_id.into(),
            lock: LockKey::new("ns", key),
            mode,
            wait_ms: 1_000,
            victim_policy: self.policy,
        })
    }

    /// A try-lock (`wait_ms` 0).
    fn try_lock(&mut self, txn: TxnId, key: &str, mode: LockMode, request_id: &str) -> AcquireStatus {
        match self.apply(Command::Acquire {
            txn,
            request_id: request_id.into(),
            lock: LockKey::new("ns", key),
            mode,
            wait_ms: 0,
            victim_policy: self.policy,
        }) {
            Outcome::Acquire(s) => s,
            o => panic!("try-lock: {o:?}"),
        }
    }

    fn acquire_with(&mut self, txn: TxnId, key: &str, mode: LockMode, request_id: &str) -> AcquireStatus {
        match self.acquire_with_outcome(txn, key, mode, request_id) {
            Outcome::Acquire(s) => s,
            o => panic!("acquire: {o:?}"),
        }
    }

    fn acquire(&mut self, txn: TxnId, key: &str, mode: LockMode) -> AcquireStatus {
        self.seq += 1;
        let r = format!("a{}", self.seq);
        self.acquire_with(txn, key, mode, &r)
    }

    fn release(&mut self, txn: TxnId, key: &str) -> Outcome {
        self.apply(Command::Release { txn, request_id: None, lock: LockKey::new("ns", key) })
    }

    fn end(&mut self, txn: TxnId, commit: bool) -> Outcome {
        self.apply(Command::End { txn, request_id: None, commit })
    }

    fn holders(&self, key: &str) -> Vec<TxnId> {
        self.table.key(&LockKey::new("ns", key)).map(|k| k.holders.keys().copied().collect()).unwrap_or_default()
    }
}

fn token(s: &AcquireStatus) -> u64 {
    match s {
        AcquireStatus::Granted { token, .. } => token.0,
        other => panic!("expected a grant, got {other:?}"),
    }
}

fn position(s: &AcquireStatus) -> u32 {
    match s {
        AcquireStatus::Queued { position, .. } => *position,
        other => panic!("expected queued, got {other:?}"),
    }
}

#[test]
fn exclusive_excludes_and_passes_on_release_with_a_higher_token() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    let ta = token(&h.acquire(a, "k", X));
    assert_eq!(position(&h.acquire_with(b, "k", X, "rb")), 1);
    assert_eq!(h.release(a, "k"), Outcome::Released { released: true });
    let tb = token(&h.table.acquire_status(b, "rb").unwrap().unwrap());
    assert!(tb > ta);
    assert_eq!(h.holders("k"), vec![b]);
}

#[test]
fn readers_share_and_block_a_writer_until_all_leave() {
    let mut h = Harness::new();
    let (r1, r2, w) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(r1, "k", S));
    token(&h.acquire(r2, "k", S));
    let q = h.acquire_with(w, "k", X, "rw");
    assert_eq!(q, AcquireStatus::Queued { position: 1, blockers: vec![r1, r2] });
    h.release(r1, "k");
    assert_eq!(position(&h.table.acquire_status(w, "rw").unwrap().unwrap()), 1);
    h.release(r2, "k");
    token(&h.table.acquire_status(w, "rw").unwrap().unwrap());
}

#[test]
fn a_queued_writer_is_not_overtaken_by_later_readers() {
    let mut h = Harness::new();
    let (r1, w, r2) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(r1, "k", S));
    assert_eq!(position(&h.acquire_with(w, "k", X, "rw")), 1);
    assert_eq!(h.acquire_with(r2, "k", S, "rr"), AcquireStatus::Queued { position: 2, blockers: vec![w] });
    h.release(r1, "k");
    // The writer goes first; the reader still waits for it.
    token(&h.table.acquire_status(w, "rw").unwrap().unwrap());
    assert_eq!(position(&h.table.acquire_status(r2, "rr").unwrap().unwrap()), 1);
    h.end(w, true);
    token(&h.table.acquire_status(r2, "rr").unwrap().unwrap());
}

#[test]
fn consecutive_readers_at_the_head_are_granted_together() {
    let mut h = Harness::new();
    let (w, r1, r2, w2) = (h.begin(), h.begin(), h.begin(), h.begin());
    token(&h.acquire(w, "k", X));
    h.acquire_with(r1, "k", S, "r1");
    h.acquire_with(r2, "k", S, "r2");
    h.acquire_with(w2, "k", X, "w2");
    h.release(w, "k");
    assert_eq!(h.holders("k"), vec![r1, r2]);
    assert_eq!(position(&h.table.acquire_status(w2, "w2").unwrap().unwrap()), 1);
}

#[test]
fn tokens_strictly_increase_across_keys_and_regrants() {
    let mut h = Harness::new();
    let mut last = 0;
    for i in 0..20 {
        let t = h.begin();
        let tok = token(&h.acquire(t, &format!("k{}", i % 3), if i % 2 == 0 { X } else { S }));
        assert!(tok > last, "token {tok} after {last}");
        last = tok;
        h.end(t, true);
    }
    assert_eq!(h.table.last_token(), last);
}

#[test]
fn reacquire_returns_the_same_grant_and_exclusive_covers_shared() {
    let mut h = Harness::new();
    let a = h.begin();
    let first = token(&h.acquire(a, "k", X));
    assert_eq!(token(&h.acquire(a, "k", X)), first);
    assert_eq!(h.acquire(a, "k", S), AcquireStatus::Granted { token: FencingToken(first), mode: X });
}

#[test]
fn upgrade_as_sole_holder_is_immediate_with_a_new_token() {
    let mut h = Harness::new();
    let a = h.begin();
    let shared = token(&h.acquire(a, "k", S));
    let excl = token(&h.acquire(a, "k", X));
    assert!(excl > shared);
    assert_eq!(h.table.txn(a).unwrap().held.get(&LockKey::new("ns", "k")).unwrap().mode, X);
}

#[test]
fn upgrade_waits_for_other_readers_ahead_of_queued_writers() {
    let mut h = Harness::new();
    let (a, b, w) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(a, "k", S));
    token(&h.acquire(b, "k", S));
    assert_eq!(position(&h.acquire_with(w, "k", X, "rw")), 1);
    // a's upgrade goes ahead of the writer, waiting only for b.
    assert_eq!(h.acquire_with(a, "k", X, "up"), AcquireStatus::Queued { position: 1, blockers: vec![b] });
    assert_eq!(position(&h.table.acquire_status(w, "rw").unwrap().unwrap()), 2);
    h.release(b, "k");
    assert_eq!(
        h.table.acquire_status(a, "up").unwrap().unwrap(),
        AcquireStatus::Granted { token: FencingToken(3), mode: X }
    );
    assert_eq!(h.holders("k"), vec![a]);
}

#[test]
fn releasing_during_a_pending_upgrade_withdraws_the_upgrade() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    token(&h.acquire(a, "k", S));
    token(&h.acquire(b, "k", S));
    position(&h.acquire_with(a, "k", X, "up"));
    assert_eq!(h.release(a, "k"), Outcome::Released { released: true });
    h.release(b, "k");
    assert!(h.holders("k").is_empty());
    assert_eq!(h.table.acquire_status(a, "up").unwrap().unwrap(), AcquireStatus::Ended(WaitEnd::Cancelled));
}

#[test]
fn a_retried_acquire_gets_the_same_answer_and_no_second_token() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    let t1 = token(&h.acquire_with(a, "k", X, "same"));
    let t2 = token(&h.acquire_with(a, "k", X, "same"));
    assert_eq!(t1, t2);
    assert_eq!(h.table.last_token(), t1);
    // A queued request re-attached: same position, still one waiter.
    position(&h.acquire_with(b, "k", X, "wait"));
    assert_eq!(position(&h.acquire_with(b, "k", X, "wait")), 1);
    assert_eq!(h.table.key(&LockKey::new("ns", "k")).unwrap().queue.len(), 1);
    // Same id, different request: refused.
    assert_eq!(
        h.apply(Command::Acquire {
            txn: a,
            request_id: "same".into(),
            lock: LockKey::new("ns", "other"),
            mode: X,
            wait_ms: 1,
            victim_policy: VictimPolicy::default(),
        }),
        Outcome::Rejected(Rejection::RequestIdReused("same".into()))
    );
}

#[test]
fn a_retried_acquire_after_the_transaction_ended_is_refused_not_granted_again() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    let t1 = token(&h.acquire_with(a, "k", X, "got"));
    position(&h.acquire_with(b, "k", X, "waited"));
    h.apply(Command::Expire { txn: b });
    assert!(matches!(h.end(a, true), Outcome::Ended { state: TxnState::Committed, .. }));
    // The grant is stale: the lock was released with the commit.
    let retried = h.acquire_with_outcome(a, "k", X, "got");
    assert!(
        matches!(retried, Outcome::Rejected(Rejection::NotActive { txn, state: TxnState::Committed, .. }) if txn == a),
        "{retried:?}"
    );
    assert_eq!(
        h.table.recorded_acquire(a, "got", &LockKey::new("ns", "k"), X),
        Err(Rejection::NotActive {
            txn: a,
            state: TxnState::Committed,
            cause: Some(EndCause::Committed),
            reason: "committed".into()
        })
    );
    assert_eq!(h.table.last_token(), t1, "no new grant");
    // A wait the end cut short still says how it ended.
    assert!(matches!(
        h.table.recorded_acquire(b, "waited", &LockKey::new("ns", "k"), X),
        Ok(Some(AcquireStatus::Ended(WaitEnd::TxnEnded { state: TxnState::Expired, .. })))
    ));
}

#[test]
fn a_retried_begin_returns_the_same_transaction() {
    let mut h = Harness::new();
    let begin = Command::Begin {
        request_id: Some("r".into()),
        lease_ms: 1_000,
        priority: 3,
        name: "n".into(),
        owner: String::new(),
    };
    let a = h.apply(begin.clone());
    let b = h.apply(begin);
    assert_eq!(a, b);
    assert_eq!(h.table.active_txns().count(), 1);
}

#[test]
fn a_transaction_waits_for_one_lock_at_a_time() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    token(&h.acquire(a, "k1", X));
    position(&h.acquire_with(b, "k1", X, "w1"));
    match h.apply(Command::Acquire {
        txn: b,
        request_id: "w2".into(),
        lock: LockKey::new("ns", "k2"),
        mode: X,
        wait_ms: 1,
        victim_policy: VictimPolicy::default(),
    }) {
        Outcome::Rejected(Rejection::AlreadyWaiting { txn, .. }) => assert_eq!(txn, b),
        o => panic!("{o:?}"),
    }
    assert!(h.holders("k2").is_empty());
}

#[test]
fn cancel_wait_times_out_only_a_pending_wait_and_keeps_the_transaction() {
    let mut h = Harness::new();
    let (a, b, c) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(a, "k", X));
    position(&h.acquire_with(b, "k", X, "rb"));
    position(&h.acquire_with(c, "k", X, "rc"));
    let out = h.apply(Command::CancelWait { txn: b, request_id: "rb".into() });
    assert_eq!(out, Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut)));
    assert_eq!(h.table.txn(b).unwrap().state, TxnState::Active);
    assert_eq!(position(&h.table.acquire_status(c, "rc").unwrap().unwrap()), 1);
    // A late timer after the grant changes nothing.
    h.release(a, "k");
    let granted = h.table.acquire_status(c, "rc").unwrap().unwrap();
    assert_eq!(h.apply(Command::CancelWait { txn: c, request_id: "rc".into() }), Outcome::Acquire(granted));
    assert_eq!(h.holders("k"), vec![c]);
}

#[test]
fn expiry_releases_everything_and_ends_the_wait() {
    let mut h = Harness::new();
    let (a, b, c) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(a, "k1", X));
    token(&h.acquire(a, "k2", S));
    token(&h.acquire(c, "k3", X));
    position(&h.acquire_with(b, "k1", X, "rb"));
    position(&h.acquire_with(a, "k3", X, "ra"));
    h.table.take_effects();
    assert_eq!(h.apply(Command::Expire { txn: a }), Outcome::Ended { state: TxnState::Expired, released: 2 });
    // The expiry and each revoked lock are events.
    let kinds: Vec<String> = h.table.events().since(0, 10).unwrap().iter().map(|e| format!("{:?}", e.detail)).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(kinds.iter().filter(|k| k.starts_with("LockRevoked")).count() == 2);
    assert!(kinds[0].starts_with("TransactionExpired"), "the cause comes first: {kinds:?}");
    token(&h.table.acquire_status(b, "rb").unwrap().unwrap());
    assert!(h.holders("k2").is_empty());
    assert_eq!(
        h.table.acquire_status(a, "ra").unwrap().unwrap(),
        AcquireStatus::Ended(WaitEnd::TxnEnded {
            state: TxnState::Expired,
            cause: EndCause::LeaseExpired,
            reason: "lease expired".into()
        })
    );
    assert!(h.table.key(&LockKey::new("ns", "k3")).unwrap().queue.is_empty());
    let effects = h.table.take_effects();
    assert!(effects.contains(&Effect::TxnFinished { txn: a, cause: EndCause::LeaseExpired }));
    assert!(effects.contains(&Effect::TxnChanged { txn: b }));
    // A second expiry, or any call, is refused without changing anything.
    assert!(matches!(h.apply(Command::Expire { txn: a }), Outcome::Rejected(Rejection::NotActive { .. })));
    assert!(matches!(h.end(a, true), Outcome::Rejected(Rejection::NotActive { state: TxnState::Expired, .. })));
}

#[test]
fn end_is_idempotent_by_request_id_and_refused_otherwise() {
    let mut h = Harness::new();
    let a = h.begin();
    token(&h.acquire(a, "k", X));
    let end = Command::End { txn: a, request_id: Some("e".into()), commit: true };
    assert_eq!(h.apply(end.clone()), Outcome::Ended { state: TxnState::Committed, released: 1 });
    assert_eq!(h.apply(end), Outcome::Ended { state: TxnState::Committed, released: 1 });
    assert!(matches!(h.end(a, false), Outcome::Rejected(Rejection::NotActive { state: TxnState::Committed, .. })));
}

#[test]
fn unknown_transactions_are_refused() {
    let mut h = Harness::new();
    assert_eq!(h.release(42, "k"), Outcome::Rejected(Rejection::NotFound(42)));
    assert_eq!(h.end(42, true), Outcome::Rejected(Rejection::NotFound(42)));
}

#[test]
fn releasing_a_lock_not_held_is_a_no_op() {
    let mut h = Harness::new();
    let a = h.begin();
    assert_eq!(h.release(a, "k"), Outcome::Released { released: false });
}

#[test]
fn idle_keys_are_dropped_and_finished_transactions_forgotten_after_retention() {
    let mut h = Harness::new();
    let a = h.begin();
    token(&h.acquire(a, "k", X));
    h.end(a, true);
    assert!(h.table.key(&LockKey::new("ns", "k")).is_none());
    assert!(h.table.txn(a).is_some());
    h.now += FINISHED_RETENTION_MS + 1;
    h.begin();
    assert!(h.table.txn(a).is_none());
    // The token counter is not affected by forgetting.
    let b = h.begin();
    assert_eq!(token(&h.acquire(b, "k", X)), 2);
}

#[test]
fn replicas_applying_the_same_log_agree_and_snapshots_roundtrip() {
    let mut log = Vec::new();
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    h.acquire(a, "k", X);
    h.acquire_with(b, "k", S, "r");
    h.release(a, "k");
    for i in 1..=2 {
        log.push(LogCommand {
            now_ms: 5,
            cmd: Command::Begin {
                request_id: Some(format!("b{i}")),
                lease_ms: 5_000,
                priority: 0,
                name: String::new(),
                owner: String::new(),
            },
        });
    }
    log.push(LogCommand {
        now_ms: 6,
        cmd: Command::Acquire {
            txn: 1,
            request_id: "x".into(),
            lock: LockKey::new("ns", "k"),
            mode: X,
            wait_ms: 9,
            victim_policy: VictimPolicy::default(),
        },
    });
    log.push(LogCommand {
        now_ms: 6,
        cmd: Command::Acquire {
            txn: 2,
            request_id: "y".into(),
            lock: LockKey::new("ns", "k"),
            mode: X,
            wait_ms: 9,
            victim_policy: VictimPolicy::default(),
        },
    });
    log.push(LogCommand { now_ms: 7, cmd: Command::Expire { txn: 1 } });
    let mut r1 = LockTable::new();
    let mut r2 = LockTable::new();
    let o1: Vec<_> = log.iter().map(|e| r1.apply(e)).collect();
    let o2: Vec<_> = log.iter().map(|e| r2.apply(e)).collect();
    assert_eq!(o1, o2);
    r1.take_effects();
    r2.take_effects();
    assert_eq!(r1, r2);
    let bytes = bincode::serialize(&r1).unwrap();
    let restored: LockTable = bincode::deserialize(&bytes).unwrap();
    assert_eq!(restored, r1);
    assert_eq!(restored.last_token(), 2);
}

// ---- deadlock detection ----

fn begin_with_priority(h: &mut Harness, priority: i32) -> TxnId {
    h.seq += 1;
    match h.apply(Command::Begin {
        request_id: Some(format!("bp{}", h.seq)),
        lease_ms: 5_000,
        priority,
        name: format!("t{}", h.seq),
        owner: String::new(),
    }) {
        Outcome::Begun { txn, .. } => txn,
        o => panic!("{o:?}"),
    }
}

fn deadlock_events(h: &Harness) -> Vec<(Vec<TxnId>, TxnId)> {
    h.table
        .events()
        .since(0, 1000)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.detail {
            super::events::EventDetail::DeadlockResolved { cycle, victim, .. } => {
                Some((cycle.iter().map(|m| m.txn).collect(), victim))
            }
            _ => None,
        })
        .collect()
}

fn assert_victim(h: &Harness, txn: TxnId) {
    let t = h.table.txn(txn).unwrap();
    assert_eq!(t.state, TxnState::Aborted);
    assert_eq!(t.end_cause, Some(EndCause::DeadlockVictim));
    assert!(t.end_reason.contains("deadlock"), "{}", t.end_reason);
    assert!(t.held.is_empty() && t.waiting.is_none());
}

#[test]
fn a_two_transaction_cycle_aborts_the_youngest_and_the_other_proceeds() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    token(&h.acquire(a, "k1", X));
    token(&h.acquire(b, "k2", X));
    assert_eq!(position(&h.acquire_with(a, "k2", X, "a2")), 1);
    let out = h.acquire_with(b, "k1", X, "b1");
    match out {
        AcquireStatus::Ended(WaitEnd::TxnEnded { cause: EndCause::DeadlockVictim, reason, .. }) => {
            assert!(reason.contains(&format!("{a} waits for ns/k2")), "{reason}")
        }
        o => panic!("the closing request of the victim must end at once: {o:?}"),
    }
    assert_victim(&h, b);
    token(&h.table.acquire_status(a, "a2").unwrap().unwrap());
    assert_eq!(deadlock_events(&h), vec![(vec![b, a], b)]);
}

#[test]
fn a_three_transaction_cycle_over_three_keys() {
    let mut h = Harness::new();
    let (a, b, c) = (h.begin(), h.begin(), h.begin());
    for (t, k) in [(a, "k1"), (b, "k2"), (c, "k3")] {
        token(&h.acquire(t, k, X));
    }
    position(&h.acquire_with(a, "k2", X, "a"));
    position(&h.acquire_with(b, "k3", X, "b"));
    assert!(deadlock_events(&h).is_empty());
    h.acquire_with(c, "k1", X, "c");
    assert_eq!(deadlock_events(&h), vec![(vec![c, a, b], c)]);
    assert_victim(&h, c);
    // c's k3 went to b; a still waits for b.
    token(&h.table.acquire_status(b, "b").unwrap().unwrap());
    assert_eq!(position(&h.table.acquire_status(a, "a").unwrap().unwrap()), 1);
}

#[test]
fn one_wait_that_closes_two_cycles_breaks_both() {
    let mut h = Harness::new();
    // Begun in this order so the search meets c before d among k2's readers.
    let a = h.begin();
    let c = begin_with_priority(&mut h, -1);
    let d = h.begin();
    token(&h.acquire(a, "k0", S));
    token(&h.acquire(d, "k2", S));
    token(&h.acquire(c, "k2", S));
    // c upgrades (waits for d, the other reader); a wants k2 exclusively (waits for d and c).
    position(&h.acquire_with(c, "k2", X, "c"));
    position(&h.acquire_with(a, "k2", X, "a"));
    assert!(deadlock_events(&h).is_empty());
    // d wants k0 (held by a): cycles d -> a -> d and d -> a -> c -> d. The cheapest victim of
    // the longer one (c, priority -1) leaves the shorter standing, so a second victim goes.
    h.acquire_with(d, "k0", X, "d");
    assert_eq!(deadlock_events(&h), vec![(vec![d, a, c], c), (vec![d, a], d)]);
    assert_victim(&h, c);
    assert_victim(&h, d);
    // a, the survivor, gets k2 once both readers are gone.
    token(&h.table.acquire_status(a, "a").unwrap().unwrap());
}

#[test]
fn a_cycle_through_shared_readers() {
    let mut h = Harness::new();
    let (r1, r2, w) = (h.begin(), h.begin(), h.begin());
    token(&h.acquire(r1, "doc", S));
    token(&h.acquire(r2, "doc", S));
    token(&h.acquire(w, "index", X));
    // w wants to write doc (blocked by both readers); r1 wants to read index (blocked by w).
    position(&h.acquire_with(w, "doc", X, "w"));
    h.acquire_with(r1, "index", S, "r1");
    let events = deadlock_events(&h);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, vec![r1, w]);
    assert_victim(&h, w);
    token(&h.table.acquire_status(r1, "r1").unwrap().unwrap());
    assert_eq!(h.table.txn(r2).unwrap().state, TxnState::Active);
}

#[test]
fn two_readers_both_upgrading_is_a_deadlock() {
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    let first = token(&h.acquire(a, "k", S));
    token(&h.acquire(b, "k", S));
    position(&h.acquire_with(a, "k", X, "up-a"));
    h.acquire_with(b, "k", X, "up-b");
    assert_eq!(deadlock_events(&h), vec![(vec![b, a], b)]);
    assert_victim(&h, b);
    let up = token(&h.table.acquire_status(a, "up-a").unwrap().unwrap());
    assert!(up > first);
    assert_eq!(h.holders("k"), vec![a]);
}

#[test]
fn priority_overrides_age_and_policies_are_configurable() {
    for (policy, expect_old) in [
        (VictimPolicy::LowestPriorityThenYoungest, true),
        (VictimPolicy::Youngest, false),
        (VictimPolicy::Oldest, true),
    ] {
        let mut h = Harness::new();
        h.policy = policy;
        let old_low = begin_with_priority(&mut h, 0);
        let young_high = begin_with_priority(&mut h, 10);
        token(&h.acquire(old_low, "k1", X));
        token(&h.acquire(young_high, "k2", X));
        position(&h.acquire_with(old_low, "k2", X, "a"));
        h.acquire_with(young_high, "k1", X, "b");
        let victim = if expect_old { old_low } else { young_high };
        assert_eq!(deadlock_events(&h)[0].1, victim, "{policy:?}");
        assert_victim(&h, victim);
    }
}

#[test]
fn a_cycle_forming_while_a_member_is_expiring_stays_consistent() {
    // The expiry was decided by the leader but its entry lands after the cycle closes.
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    token(&h.acquire(a, "k1", X));
    token(&h.acquire(b, "k2", X));
    position(&h.acquire_with(a, "k2", X, "a"));
    h.acquire_with(b, "k1", X, "b");
    assert_victim(&h, b);
    assert_eq!(h.apply(Command::Expire { txn: a }), Outcome::Ended { state: TxnState::Expired, released: 2 });
    assert!(h.holders("k1").is_empty() && h.holders("k2").is_empty());

    // The other order: the expiry lands first, so no cycle ever forms.
    let mut h = Harness::new();
    let (a, b) = (h.begin(), h.begin());
    token(&h.acquire(a, "k1", X));
    token(&h.acquire(b, "k2", X));
    position(&h.acquire_with(a, "k2", X, "a"));
    h.apply(Command::Expire { txn: a });
    token(&h.acquire_with(b, "k1", X, "b"));
    assert!(deadlock_events(&h).is_empty());
}

#[test]
fn no_false_positive_on_a_long_wait_chain() {
    let mut h = Harness::new();
    let txns: Vec<TxnId> = (0..300).map(|_| h.begin()).collect();
    for (i, &t) in txns.iter().enumerate() {
        token(&h.acquire(t, &format!("k{i}"), X));
    }
    for (i, &t) in txns.iter().enumerate().skip(1) {
        position(&h.acquire_with(t, &format!("k{}", i - 1), X, "w"));
    }
    // Many waiters on one key too.
    for _ in 0..50 {
        let t = h.begin();
        position(&h.acquire_with(t, "k0", if t.is_multiple_of(2) { X } else { S }, "q"));
    }
    assert!(deadlock_events(&h).is_empty());
    assert!(txns.iter().all(|t| h.table.txn(*t).unwrap().state == TxnState::Active));
}

fn begin_acquire(request_id: &str, acquire_id: &str, key: &str) -> Command {
    begin_acquire_as("", request_id, acquire_id, key)
}

fn begin_acquire_as(owner: &str, request_id: &str, acquire_id: &str, key: &str) -> Command {
    use super::command::{AcquireRequest, Begin};
    Command::BeginAcquire {
        begin: Begin {
            request_id: Some(request_id.into()),
            lease_ms: 5_000,
            priority: 0,
            name: "one-shot".into(),
            owner: owner.into(),
        },
        acquire: AcquireRequest {
            request_id: acquire_id.into(),
            lock: LockKey::new("ns", key),
            mode: X,
            wait_ms: 1_000,
            victim_policy: VictimPolicy::default(),
        },
    }
}

#[test]
fn a_batch_applies_like_its_commands_one_by_one() {
    // The same commands, once as separate entries and once as one batch, must leave the
    // same table and answer the same outcomes (group commit is invisible to semantics).
    let cmds = |a: TxnId, b: TxnId| {
        vec![
            Command::Acquire {
                txn: a,
                request_id: "x".into(),
                lock: LockKey::new("ns", "k"),
                mode: X,
                wait_ms: 1_000,
                victim_policy: VictimPolicy::default(),
            },
            Command::Acquire {
                txn: b,
                request_id: "y".into(),
                lock: LockKey::new("ns", "k"),
                mode: X,
                wait_ms: 1_000,
                victim_policy: VictimPolicy::default(),
            },
            Command::End { txn: a, request_id: None, commit: true },
        ]
    };
    let mut one_by_one = Harness::new();
    let (a, b) = (one_by_one.begin(), one_by_one.begin());
    let separate: Vec<Outcome> = cmds(a, b).into_iter().map(|c| one_by_one.apply(c)).collect();

    let mut batched = Harness::new();
    let (a2, b2) = (batched.begin(), batched.begin());
    assert_eq!((a, b), (a2, b2));
    let Outcome::Batch(together) = batched.apply(Command::Batch(cmds(a, b))) else { panic!("a batch answers a batch") };
    assert_eq!(separate, together);
    assert_eq!(one_by_one.holders("k"), vec![b]);
    assert_eq!(batched.holders("k"), vec![b]);
    assert_eq!(one_by_one.table.last_token(), batched.table.last_token());
    // The handoff inside the batch granted b with a higher token than a's.
    let (Outcome::Acquire(first), Outcome::Acquire(_)) = (&together[0], &together[1]) else { panic!() };
    let b_status = batched.table.acquire_status(b, "y").unwrap().unwrap();
    assert!(token(&b_status) > token(first));
}

#[test]
fn a_nested_batch_is_refused_without_applying_anything() {
    let mut h = Harness::new();
    let a = h.begin();
    let inner = Command::Batch(vec![Command::End { txn: a, request_id: None, commit: true }]);
    let Outcome::Batch(outs) = h.apply(Command::Batch(vec![inner])) else { panic!("a batch answers a batch") };
    assert_eq!(outs, vec![Outcome::Rejected(Rejection::NestedBatch)]);
    assert_eq!(h.table.txn(a).unwrap().state, TxnState::Active);
}

#[test]
fn one_shot_begin_acquire_grants_queues_and_is_idempotent() {
    let mut h = Harness::new();
    let Outcome::BegunAcquire { txn: a, acquire, .. } = h.apply(begin_acquire("b-a", "a-a", "k")) else { panic!() };
    let Outcome::Acquire(granted) = *acquire else { panic!("{acquire:?}") };
    let first = token(&granted);
    assert_eq!(h.holders("k"), vec![a]);

    // A second one-shot on the same key queues behind it.
    let Outcome::BegunAcquire { txn: b, acquire, .. } = h.apply(begin_acquire("b-b", "a-b", "k")) else { panic!() };
    assert_ne!(a, b);
    let Outcome::Acquire(queued) = *acquire else { panic!("{acquire:?}") };
    assert_eq!(position(&queued), 1);

    // A retry (same request ids) finds the same transaction and the same request: no
    // second transaction, no second queue entry.
    let txns_before = h.table.active_txns().count();
    let Outcome::BegunAcquire { txn: b_again, acquire, .. } = h.apply(begin_acquire("b-b", "a-b", "k")) else {
        panic!()
    };
    assert_eq!(b_again, b);
    assert_eq!(*acquire, Outcome::Acquire(queued));
    assert_eq!(h.table.active_txns().count(), txns_before);

    // The holder commits: the one-shot waiter gets the lock with a higher token.
    h.end(a, true);
    let now = h.table.acquire_status(b, "a-b").unwrap().unwrap();
    assert!(token(&now) > first);
}

#[test]
fn a_one_shot_with_someone_elses_begin_id_takes_no_lock_for_them() {
    let mut h = Harness::new();
    let Outcome::BegunAcquire { txn: a, .. } = h.apply(begin_acquire_as("alice", "b-1", "a-1", "k")) else { panic!() };
    // Bob reuses Alice's begin request id for another key: refused, and Alice's
    // transaction holds only what she asked for.
    let Outcome::BegunAcquire { acquire, .. } = h.apply(begin_acquire_as("bob", "b-1", "a-2", "other")) else {
        panic!()
    };
    assert!(matches!(*acquire, Outcome::Rejected(Rejection::RequestIdReused(_))), "{acquire:?}");
    assert!(h.holders("other").is_empty());
    assert_eq!(h.table.txn(a).unwrap().held.len(), 1);
}

#[test]
fn a_grant_tells_the_granted_its_outcome_and_the_waiters_behind_only_that_their_queue_moved() {
    let mut h = Harness::new();
    let (a, b, c, d) = (h.begin(), h.begin(), h.begin(), h.begin());
    token(&h.acquire(a, "k", X));
    for t in [b, c, d] {
        assert!(matches!(h.acquire_with(t, "k", X, &format!("r{t}")), AcquireStatus::Queued { .. }));
    }
    h.table.take_effects();
    h.end(a, true);
    let effects = h.table.take_effects();
    assert!(effects.contains(&Effect::TxnChanged { txn: a }));
    assert!(effects.contains(&Effect::TxnChanged { txn: b }), "b is granted: its outcome changed");
    for t in [c, d] {
        assert!(effects.contains(&Effect::QueueMoved { txn: t }), "{t} moved up: {effects:?}");
        assert!(!effects.contains(&Effect::TxnChanged { txn: t }), "{t}'s outcome did not change: {effects:?}");
    }
    assert_eq!(position(&h.table.acquire_status(d, &format!("r{d}")).unwrap().unwrap()), 2);
}

// ---- bounds ----

#[test]
fn a_long_lived_transaction_with_fresh_request_ids_keeps_a_bounded_record_and_answers_recent_retries() {
    use super::requests::MAX_REQUEST_RECORDS;
    let mut h = Harness::new();
    let (t, other) = (h.begin(), h.begin());
    let held = token(&h.acquire_with(t, "held", X, "held-1"));
    let mut last = (String::new(), 0);
    for i in 0..5_000 {
        let id = format!("a{i}");
        last = (id.clone(), token(&h.acquire_with(t, "cycle", X, &id)));
        let release = Command::Release { txn: t, request_id: Some(format!("r{i}")), lock: LockKey::new("ns", "cycle") };
        assert_eq!(h.apply(release), Outcome::Released { released: true });
        assert!(h.table.txn(t).unwrap().requests.len() <= MAX_REQUEST_RECORDS);
    }
    // The last acquire's retry gets its first answer (the same token), not a new grant...
    let before = h.table.last_token();
    assert_eq!(token(&h.acquire_with(t, "cycle", X, &last.0)), last.1);
    assert_eq!(h.table.last_token(), before, "a retry must not issue a token");
    // ... and so does the last release's, although the lock is free now.
    let retry = Command::Release { txn: t, request_id: Some("r4999".into()), lock: LockKey::new("ns", "cycle") };
    assert_eq!(h.apply(retry), Outcome::Released { released: true });
    // A grant still held keeps its token whether or not its record is remembered.
    assert_eq!(token(&h.acquire_with(t, "held", X, "held-1")), held);
    // A pending wait is never forgotten, however many requests come after it.
    token(&h.acquire_with(other, "busy", X, "o1"));
    assert_eq!(position(&h.acquire_with(t, "busy", X, "wait")), 1);
    for i in 0..2 * MAX_REQUEST_RECORDS {
        let release = Command::Release { txn: t, request_id: Some(format!("x{i}")), lock: LockKey::new("ns", "none") };
        h.apply(release);
    }
    assert_eq!(position(&h.table.acquire_status(t, "wait").unwrap().unwrap()), 1);
    h.end(other, true);
    token(&h.table.acquire_status(t, "wait").unwrap().unwrap());
}

#[test]
fn active_transactions_are_counted_per_owner_and_after_a_restore() {
    let mut h = Harness::new();
    let begin = |h: &mut Harness, owner: &str| match h.apply(Command::Begin {
        request_id: None,
        lease_ms: 1_000,
        priority: 0,
        name: String::new(),
        owner: owner.into(),
    }) {
        Outcome::Begun { txn, .. } => txn,
        o => panic!("{o:?}"),
    };
    let a1 = begin(&mut h, "a");
    assert_eq!(h.table.active_txns_of("a"), 1);
    begin(&mut h, "a");
    begin(&mut h, "b");
    assert_eq!((h.table.active_txns_of("a"), h.table.active_txns_of("b")), (2, 1));
    h.end(a1, true);
    assert_eq!(h.table.active_txns_of("a"), 1);
    let restored: LockTable = bincode::deserialize(&bincode::serialize(&h.table).unwrap()).unwrap();
    assert_eq!((restored.active_txns_of("a"), restored.active_txns_of("b"), restored.active_txns_of("c")), (1, 1, 0));
}

#[test]
fn a_try_lock_is_granted_at_once_or_refused_without_queueing_and_the_transaction_goes_on() {
    let mut h = Harness::new();
    let (holder, reader, other) = (h.begin(), h.begin(), h.begin());
    let granted = h.try_lock(holder, "k", X, "t1");
    assert!(matches!(granted, AcquireStatus::Granted { .. }), "a free key: {granted:?}");
    h.table.take_effects();

    // Held: refused at once, nothing queued, nobody told their queue moved.
    assert_eq!(h.try_lock(other, "k", S, "t2"), AcquireStatus::Ended(WaitEnd::TimedOut));
    assert!(h.table.key(&LockKey::new("ns", "k")).unwrap().queue.is_empty());
    assert!(!h.table.take_effects().iter().any(|e| matches!(e, Effect::WaitStarted { .. })));
    assert_eq!(h.table.txn(other).unwrap().state, TxnState::Active, "the transaction goes on");
    // The same request id answers from the record, even once the key is free.
    h.release(holder, "k");
    assert_eq!(h.try_lock(other, "k", S, "t2"), AcquireStatus::Ended(WaitEnd::TimedOut));

    // Compatible with the holders but someone waits ahead: refused (FIFO, no overtaking).
    assert!(matches!(h.try_lock(reader, "k", S, "t3"), AcquireStatus::Granted { .. }));
    assert!(matches!(h.acquire(holder, "k", X), AcquireStatus::Queued { .. }));
    assert_eq!(h.try_lock(other, "k", S, "t4"), AcquireStatus::Ended(WaitEnd::TimedOut));

    // Re-entrant: a covering grant answers with its token; an upgrade waits for nobody only
    // as the sole holder.
    let held = h.table.txn(reader).unwrap().held.get(&LockKey::new("ns", "k")).unwrap().token;
    assert_eq!(token(&h.try_lock(reader, "k", S, "t5")), held.0);
    let second = h.begin();
    h.end(holder, false);
    assert!(matches!(h.try_lock(second, "k", S, "t6"), AcquireStatus::Granted { .. }));
    assert_eq!(h.try_lock(reader, "k", X, "t7"), AcquireStatus::Ended(WaitEnd::TimedOut), "another reader holds it");
    h.release(second, "k");
    assert!(matches!(h.try_lock(reader, "k", X, "t8"), AcquireStatus::Granted { mode: X, .. }), "sole holder");
}

#[test]
fn a_downgrade_keeps_the_token_and_lets_queued_readers_in_not_writers() {
    let mut h = Harness::new();
    let (owner, r1, w, r2) = (h.begin(), h.begin(), h.begin(), h.begin());
    let held = token(&h.acquire(owner, "k", X));
    assert!(matches!(h.acquire(r1, "k", S), AcquireStatus::Queued { .. }));
    assert!(matches!(h.acquire(w, "k", X), AcquireStatus::Queued { .. }));
    assert!(matches!(h.acquire(r2, "k", S), AcquireStatus::Queued { .. }));
    let down = Command::Downgrade { txn: owner, request_id: Some("d1".into()), lock: LockKey::new("ns", "k") };
    let out = h.apply(down.clone());
    let Outcome::Downgraded { held: Some(after) } = out else { panic!("{out:?}") };
    assert_eq!((after.mode, after.token.0), (S, held), "same token, shared now");
    // The reader ahead of the writer comes in; the writer (and the reader behind it) wait.
    let mut holders = h.holders("k");
    holders.sort();
    assert_eq!(holders, vec![owner, r1]);
    // A retry answers the same; a SHARED_READ hold stays as it is; a lock not held: None.
    assert_eq!(h.apply(down), Outcome::Downgraded { held: Some(after) });
    let again = h.apply(Command::Downgrade { txn: r1, request_id: None, lock: LockKey::new("ns", "k") });
    assert!(matches!(again, Outcome::Downgraded { held: Some(Held { mode: S, .. }) }));
    let none = h.apply(Command::Downgrade { txn: w, request_id: None, lock: LockKey::new("ns", "nope") });
    assert_eq!(none, Outcome::Downgraded { held: None });
}

/// A limited admin's end or abort of another key's transaction (`Command::Scoped`) is decided
/// on the state it is applied to: one that took a lock outside the admin's prefixes after the
/// leader's check is refused and keeps every lock; one inside ends; the owner's own key and
/// unknown transactions get the command's usual answer.
#[test]
fn a_scoped_end_applies_only_while_the_transaction_is_inside_the_admins_prefixes() {
    let mut h = Harness::new();
    let begin = |owner: &str, id: &str| Command::Begin {
        request_id: Some(id.into()),
        lease_ms: 5_000,
        priority: 0,
        name: String::new(),
        owner: owner.into(),
    };
    let acquire = |txn, ns: &str, id: &str| Command::Acquire {
        txn,
        request_id: id.into(),
        lock: LockKey::new(ns, "k"),
        mode: X,
        wait_ms: 0,
        victim_policy: VictimPolicy::default(),
    };
    let abort = |txn, id: &str| Command::Abort {
        txn,
        request_id: Some(id.into()),
        operator: "ops".into(),
        reason: "test".into(),
    };
    let scoped =
        |key: &str, cmd| Command::Scoped { key: key.into(), prefixes: vec!["billing-".into()], cmd: Box::new(cmd) };
    let txn = |o| match o {
        Outcome::Begun { txn, .. } => txn,
        o => panic!("begin: {o:?}"),
    };
    let (a, b) = (txn(h.apply(begin("app", "b1"))), txn(h.apply(begin("app", "b2"))));
    for (t, ns, id) in [(a, "billing-jobs", "a1"), (b, "billing-ops", "a2")] {
        assert!(matches!(h.apply(acquire(t, ns, id)), Outcome::Acquire(AcquireStatus::Granted { .. })));
    }

    // `a` takes a lock outside after the leader checked it: the abort is refused, nothing moves.
    assert!(matches!(h.apply(acquire(a, "reports", "a3")), Outcome::Acquire(AcquireStatus::Granted { .. })));
    match h.apply(scoped("ops", abort(a, "x1"))) {
        Outcome::Rejected(r @ Rejection::OutsideScope { .. }) => {
            assert!(r.to_string().contains("not inside the prefixes [\"billing-\"] of admin key \"ops\""), "{r}")
        }
        o => panic!("scoped abort of a straddling transaction: {o:?}"),
    }
    let t = h.table.txn(a).unwrap();
    assert_eq!((t.state, t.held.len()), (TxnState::Active, 2));

    // `b` is inside: ended, and a retry answers as the first did.
    for _ in 0..2 {
        assert_eq!(h.apply(scoped("ops", abort(b, "x2"))), Outcome::Ended { state: TxnState::Aborted, released: 1 });
    }
    // The owner's own key ends its straddling transaction; unknown ones are not found.
    let end = Command::End { txn: a, request_id: None, commit: true };
    assert_eq!(h.apply(scoped("app", end)), Outcome::Ended { state: TxnState::Committed, released: 2 });
    assert_eq!(h.apply(scoped("ops", abort(99, "x3"))), Outcome::Rejected(Rejection::NotFound(99)));
    // Only ends are scoped.
    assert!(matches!(
        h.apply(scoped("ops", acquire(a, "billing-jobs", "a4"))),
        Outcome::Rejected(Rejection::Invalid(_))
    ));
}

#[test]
fn releases_and_revocations_report_the_key_and_how_long_it_was_held_by_the_log_clock() {
    let mut h = Harness::new();
    let a = h.begin();
    let b = h.begin();
    token(&h.acquire(a, "k1", X));
    token(&h.acquire(b, "k2", X));
    h.table.take_effects();
    h.now += 250;
    h.release(a, "k1");
    let released = Effect::Released { txn: a, lock: LockKey::new("ns", "k1"), held_ms: 250, ended_by: None };
    assert!(h.table.take_effects().contains(&released));
    h.now += 100;
    h.apply(Command::Expire { txn: b });
    let revoked = Effect::Released {
        txn: b,
        lock: LockKey::new("ns", "k2"),
        held_ms: 350,
        ended_by: Some(EndCause::LeaseExpired),
    };
    assert!(h.table.take_effects().contains(&revoked));
}

//! Unit tests of all-or-nothing acquires of several locks (`Command::AcquireAll`).

use super::command::{AcquireStatus, Command, LogCommand, Outcome, Rejection};
use super::table::LockTable;
use super::types::{EndCause, Grant, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};

use LockMode::{Exclusive as X, SharedRead as S};

#[derive(Default)]
struct Harness {
    table: LockTable,
    seq: u64,
}

impl Harness {
    fn apply(&mut self, cmd: Command) -> Outcome {
        self.table.apply(&LogCommand { now_ms: 1_000, cmd })
    }

    fn begin(&mut self) -> TxnId {
        match self.apply(Command::Begin {
            request_id: None,
            lease_ms: 5_000,
            priority: 0,
            name: String::new(),
            owner: String::new(),
        }) {
            Outcome::Begun { txn, .. } => txn,
            o => panic!("begin: {o:?}"),
        }
    }

    fn all_with(&mut self, txn: TxnId, request_id: &str, locks: &[(&str, LockMode)], wait_ms: u64) -> Outcome {
        let locks = locks.iter().map(|(k, m)| (LockKey::new("ns", *k), *m)).collect();
        self.apply(Command::AcquireAll {
            txn,
            request_id: request_id.into(),
            locks,
            wait_ms,
            victim_policy: VictimPolicy::default(),
        })
    }

    fn all(&mut self, txn: TxnId, locks: &[(&str, LockMode)]) -> AcquireStatus {
        self.seq += 1;
        match self.all_with(txn, &format!("m{}", self.seq), locks, 1_000) {
            Outcome::Acquire(s) => s,
            o => panic!("acquire all: {o:?}"),
        }
    }

    fn one(&mut self, txn: TxnId, key: &str, mode: LockMode) -> AcquireStatus {
        self.seq += 1;
        match self.apply(Command::Acquire {
            txn,
            request_id: format!("a{}", self.seq),
            lock: LockKey::new("ns", key),
            mode,
            wait_ms: 1_000,
            victim_policy: VictimPolicy::default(),
        }) {
            Outcome::Acquire(s) => s,
            o => panic!("acquire: {o:?}"),
        }
    }

    fn release(&mut self, txn: TxnId, key: &str) {
        self.apply(Command::Release { txn, request_id: None, lock: LockKey::new("ns", key) });
    }

    fn end(&mut self, txn: TxnId) {
        self.apply(Command::End { txn, request_id: None, commit: true });
    }

    fn holds(&self, txn: TxnId, key: &str) -> bool {
        self.table.txn(txn).is_some_and(|t| t.held.contains_key(&LockKey::new("ns", key)))
    }

    /// The status of the transaction's latest all-or-nothing request.
    fn status(&self, txn: TxnId) -> AcquireStatus {
        self.table.acquire_status(txn, &format!("m{}", self.seq_of(txn))).unwrap().unwrap()
    }

    fn seq_of(&self, txn: TxnId) -> u64 {
        let t = self.table.txn(txn).unwrap();
        t.requests.iter().filter_map(|(id, _)| id.strip_prefix('m')?.parse().ok()).max().unwrap()
    }
}

fn grants(s: &AcquireStatus) -> Vec<Grant> {
    match s {
        AcquireStatus::GrantedAll { grants } => grants.clone(),
        other => panic!("expected every lock granted, got {other:?}"),
    }
}

#[test]
fn free_keys_are_granted_together_one_token_each_in_the_order_asked() {
    let mut h = Harness::default();
    let t = h.begin();
    let g = grants(&h.all(t, &[("b", X), ("a", S), ("c", X)]));
    let keys: Vec<&str> = g.iter().map(|g| g.lock.key.as_str()).collect();
    assert_eq!(keys, ["b", "a", "c"]);
    assert_eq!(g.iter().map(|g| g.mode).collect::<Vec<_>>(), [X, S, X]);
    let tokens: Vec<u64> = g.iter().map(|g| g.token.0).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "distinct increasing tokens: {tokens:?}");
    assert!(["a", "b", "c"].iter().all(|k| h.holds(t, k)));
}

#[test]
fn one_busy_key_means_nothing_is_granted_until_all_are_free() {
    let mut h = Harness::default();
    let (holder, multi) = (h.begin(), h.begin());
    assert!(matches!(h.one(holder, "b", X), AcquireStatus::Granted { .. }));
    assert!(matches!(h.all(multi, &[("a", X), ("b", X)]), AcquireStatus::Queued { .. }));
    assert!(!h.holds(multi, "a"), "nothing is taken while one key is busy");
    // It holds its place on the free key: a later writer queues behind it.
    let writer = h.begin();
    assert!(matches!(h.one(writer, "a", X), AcquireStatus::Queued { .. }));
    h.release(holder, "b");
    let g = grants(&h.status(multi));
    assert_eq!(g.len(), 2);
    assert!(h.holds(multi, "a") && h.holds(multi, "b") && !h.holds(writer, "a"));
    h.end(multi);
    assert!(h.holds(writer, "a"));
}

#[test]
fn a_multi_key_request_is_not_starved_by_later_single_key_requests() {
    let mut h = Harness::default();
    let (ha, hb, multi) = (h.begin(), h.begin(), h.begin());
    h.one(ha, "a", X);
    h.one(hb, "b", X);
    assert!(matches!(h.all(multi, &[("a", X), ("b", X)]), AcquireStatus::Queued { .. }));
    // Keys free up one at a time while others keep asking: each later request queues
    // behind the multi-key one instead of taking the freed key.
    let late_a = h.begin();
    h.one(late_a, "a", X);
    h.release(ha, "a");
    assert!(!h.holds(late_a, "a"), "a later request must not take the key the multi-key request waits for");
    let late_b = h.begin();
    h.one(late_b, "b", S);
    h.release(hb, "b");
    assert_eq!(grants(&h.status(multi)).len(), 2);
    assert!(!h.holds(late_b, "b"));
}

#[test]
fn readers_behind_a_waiting_multi_key_reader_pass_it_writers_do_not() {
    let mut h = Harness::default();
    let (writer_b, multi, reader, writer) = (h.begin(), h.begin(), h.begin(), h.begin());
    h.one(writer_b, "b", X);
    assert!(matches!(h.all(multi, &[("a", S), ("b", S)]), AcquireStatus::Queued { .. }));
    // "a" is free, the multi-key request waits for "b": a reader of "a" does not delay it.
    assert!(matches!(h.one(reader, "a", S), AcquireStatus::Granted { .. }));
    // A writer would: it queues.
    assert!(matches!(h.one(writer, "a", X), AcquireStatus::Queued { .. }));
    h.release(writer_b, "b");
    assert_eq!(grants(&h.status(multi)).len(), 2);
    assert!(h.holds(reader, "a") && !h.holds(writer, "a"));
}

#[test]
fn held_locks_keep_their_tokens_and_shared_holds_are_upgraded() {
    let mut h = Harness::default();
    let t = h.begin();
    let AcquireStatus::Granted { token: kept, .. } = h.one(t, "a", X) else { panic!() };
    let AcquireStatus::Granted { token: shared, .. } = h.one(t, "b", S) else { panic!() };
    let g = grants(&h.all(t, &[("a", S), ("b", X), ("c", S)]));
    assert_eq!((g[0].mode, g[0].token), (X, kept), "an EXCLUSIVE hold covers SHARED_READ and keeps its token");
    assert_eq!(g[1].mode, X);
    assert!(g[1].token > shared, "an upgrade gets a new token");
    // Upgrade with another reader present waits as an upgrade, ahead of queued writers.
    let (u, other, writer) = (h.begin(), h.begin(), h.begin());
    h.one(u, "k", S);
    h.one(other, "k", S);
    h.one(writer, "k", X);
    assert!(matches!(h.all(u, &[("k", X), ("z", X)]), AcquireStatus::Queued { position: 1, .. }));
    h.release(other, "k");
    assert_eq!(grants(&h.status(u)).len(), 2);
    assert!(!h.holds(writer, "k"));
}

#[test]
fn a_try_of_several_locks_is_all_or_nothing_and_never_queues() {
    let mut h = Harness::default();
    let (holder, t) = (h.begin(), h.begin());
    h.one(holder, "b", X);
    let out = h.all_with(t, "try", &[("a", X), ("b", X)], 0);
    assert_eq!(out, Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut)));
    assert!(!h.holds(t, "a"));
    assert!(h.table.keys().all(|(_, k)| k.queue.is_empty()));
    assert_eq!(h.table.txn(t).unwrap().state, TxnState::Active);
}

#[test]
fn a_retry_answers_from_the_record_and_another_request_under_its_id_is_refused() {
    let mut h = Harness::default();
    let t = h.begin();
    let first = h.all_with(t, "r", &[("a", X), ("b", X)], 1_000);
    let last = h.table.last_token();
    assert_eq!(h.all_with(t, "r", &[("a", X), ("b", X)], 1_000), first);
    assert_eq!(h.table.last_token(), last, "no second grant");
    assert!(matches!(h.all_with(t, "r", &[("a", X)], 1_000), Outcome::Rejected(Rejection::RequestIdReused(_))));
}

#[test]
fn empty_lists_and_repeated_keys_are_refused() {
    let mut h = Harness::default();
    let t = h.begin();
    assert!(matches!(h.all_with(t, "e", &[], 1_000), Outcome::Rejected(Rejection::Invalid(_))));
    assert!(matches!(h.all_with(t, "d", &[("a", S), ("a", X)], 1_000), Outcome::Rejected(Rejection::Invalid(_))));
    assert!(h.table.keys().next().is_none(), "nothing changed");
}

#[test]
fn releasing_one_key_withdraws_the_whole_request_and_so_does_the_end() {
    let mut h = Harness::default();
    let (holder, t, behind) = (h.begin(), h.begin(), h.begin());
    h.one(holder, "b", X);
    h.one(t, "z", X);
    h.all(t, &[("a", X), ("b", X)]);
    h.one(behind, "a", X);
    h.release(t, "b");
    assert_eq!(h.status(t), AcquireStatus::Ended(WaitEnd::Cancelled));
    assert!(h.holds(behind, "a"), "the key it left passes on");
    assert!(h.table.txn(t).unwrap().waiting.is_none());
    // Ended while waiting: the record says how.
    h.all(t, &[("a", X), ("c", X)]);
    h.apply(Command::Expire { txn: t });
    assert!(matches!(h.status(t), AcquireStatus::Ended(WaitEnd::TxnEnded { cause: EndCause::LeaseExpired, .. })));
    assert!(h.table.keys().all(|(_, k)| k.queue.values().all(|w| w.txn != t)));
}

#[test]
fn a_cycle_through_a_multi_key_request_is_broken() {
    let mut h = Harness::default();
    let (t1, t2) = (h.begin(), h.begin());
    h.one(t1, "a", X);
    h.one(t2, "b", X);
    assert!(matches!(h.all(t1, &[("b", X), ("c", X)]), AcquireStatus::Queued { .. }));
    // t2 asks for a (held by t1) and c (reserved by t1's request): a cycle either way.
    let out = h.all(t2, &[("c", S), ("a", S)]);
    let ended = |s: &AcquireStatus| {
        matches!(s, AcquireStatus::Ended(WaitEnd::TxnEnded { cause: EndCause::DeadlockVictim, .. }))
    };
    assert!(ended(&out) || ended(&h.status(t1)), "one of them is the victim: {out:?} / {:?}", h.status(t1));
    let survivor = if ended(&out) { t1 } else { t2 };
    assert!(matches!(h.status(survivor), AcquireStatus::GrantedAll { .. }));
}

#[test]
fn a_waiting_multi_key_request_reports_its_furthest_position_and_every_blocker() {
    let mut h = Harness::default();
    let (a1, b1, b2, multi) = (h.begin(), h.begin(), h.begin(), h.begin());
    h.one(a1, "a", X);
    h.one(b1, "b", X);
    h.one(b2, "b", X);
    let AcquireStatus::Queued { position, mut blockers } = h.all(multi, &[("a", X), ("b", X)]) else { panic!() };
    blockers.sort();
    assert_eq!(position, 2, "second in line on b");
    assert_eq!(blockers, vec![a1, b1, b2]);
}

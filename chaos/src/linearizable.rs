//! Linearizability of the lock operations, per key (the lock of one key is one object, and
//! linearizability is compositional, so keys are checked one at a time).
//!
//! The search is Wing & Gong's: pick an operation that may come next (no unplaced
//! operation finished before it was invoked), apply it to a sequential model, recurse, and
//! backtrack when the model refuses; memoise every (placed set, model state) already
//! explored (Lowe's refinement) so that no configuration is searched twice. A step budget
//! per key bounds the search: past it the key is reported *inconclusive*, never hung on.
//!
//! The sequential model is a reader-writer lock that hands out fencing tokens:
//!
//! - `Grant { txn, mode, token }`: allowed when nobody holds the key, or both the holders
//!   and the request are shared; the token must exceed every token granted on the key
//!   before it.
//! - `End { txn }`: the transaction's hold on the key ends (release, commit, abort, lease
//!   expiry); nothing happens if it holds nothing.
//!
//! What the history proves, and so what enters the search:
//!
//! - An acknowledged grant is a `Grant` between its invoke and its acknowledgement. Its
//!   hold lasts until the release or commit only if the transaction's commit was
//!   acknowledged; otherwise the lease may have run out at any moment after the grant
//!   (abort succeeds on a lost transaction too), so the grant is checked against the
//!   holders and tokens at its point and then holds nothing (`holds: false`).
//! - A committed transaction's release (ok) or commit (ok) is an `End` within its call; a
//!   release with an unknown outcome is an `End` that may take effect at any time after it
//!   was invoked (or never).
//! - Failed acquires did nothing. Acquires with an unknown outcome carry no token and could
//!   only add a holder, which never makes another operation possible, so leaving them out
//!   loses no linearization.
//!
//! One more pruning, sound for this model: once its transaction's grant is placed, an
//! `End` never makes anything impossible (it only removes holders), so whenever such an
//! `End` may come next it is placed at once, without branching.

use std::collections::{HashMap, HashSet};

use crate::checker::{committed, Violation};
use crate::history::{Mode, Op, OpKind, Outcome};

/// One operation of the sequential model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOp {
    /// The key was granted to `txn` in `mode` with `token` (0: unknown, not checked).
    /// `holds` false: the hold may have ended right after the grant (nothing vouches for
    /// it), so only the grant itself is checked.
    Grant {
        /// Transaction.
        txn: u64,
        /// Mode.
        mode: Mode,
        /// Fencing token.
        token: u64,
        /// Whether the hold lasts until an `End`.
        holds: bool,
    },
    /// `txn`'s hold ends (if it has one).
    End {
        /// Transaction.
        txn: u64,
    },
}

/// An operation with its real-time window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it does.
    pub op: LockOp,
    /// When it was invoked (µs).
    pub invoke_us: u64,
    /// When its outcome was known; `None`: it may take effect any time after the invoke,
    /// or never.
    pub complete_us: Option<u64>,
}

/// The model's state: who holds the key and the highest token granted on it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LockState {
    holders: Vec<u64>,
    exclusive: bool,
    last_token: u64,
}

impl LockState {
    /// The state after `op`, or `None` if the model forbids it here.
    pub fn step(&self, op: &LockOp) -> Option<LockState> {
        match *op {
            LockOp::Grant { txn, mode, token, holds } => {
                if token != 0 && token <= self.last_token {
                    return None;
                }
                let compatible =
                    self.holders.is_empty() || (mode == Mode::Shared && !self.exclusive) || self.holders == [txn];
                if !compatible {
                    return None;
                }
                let mut s = self.clone();
                s.last_token = s.last_token.max(token);
                if holds && !s.holders.contains(&txn) {
                    s.holders.push(txn);
                    s.holders.sort_unstable();
                    s.exclusive = mode == Mode::Exclusive;
                }
                Some(s)
            }
            LockOp::End { txn } => {
                let mut s = self.clone();
                s.holders.retain(|&t| t != txn);
                if s.holders.is_empty() {
                    s.exclusive = false;
                }
                Some(s)
            }
        }
    }
}

/// The outcome of the search for one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// None exists; the message says how far the longest attempt got.
    NotLinearizable(String),
    /// The step budget ran out first.
    Inconclusive,
}

/// The search's result and effort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyResult {
    /// The verdict.
    pub verdict: Verdict,
    /// Grants tried (the budget counts these).
    pub steps: u64,
    /// Operations in the search.
    pub ops: usize,
}

struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
}

struct Node {
    placed: Bits,
    state: LockState,
    /// Required operations placed.
    done: usize,
    /// Every operation before this index is placed.
    first: usize,
    /// Grants that may come next, and the next one to try.
    cands: Vec<usize>,
    next: usize,
}

struct Search<'a> {
    e: &'a [Entry],
    required: usize,
    /// For each operation, the grants of the same transaction.
    grants_of: Vec<Vec<usize>>,
}

impl Search<'_> {
    /// Unplaced operations that may come next: invoked no later than the earliest
    /// acknowledgement among the unplaced required operations.
    fn candidates(&self, placed: &Bits, first: usize) -> Vec<usize> {
        let mut horizon = u64::MAX;
        let mut seen = Vec::new();
        for i in first..self.e.len() {
            let x = &self.e[i];
            if x.invoke_us > horizon {
                break;
            }
            if placed.get(i) {
                continue;
            }
            if let Some(c) = x.complete_us {
                horizon = horizon.min(c);
            }
            seen.push(i);
        }
        seen.retain(|&i| self.e[i].invoke_us <= horizon);
        seen
    }

    /// Places `i` and then every `End` that may come next; builds the node.
    fn node(&self, mut placed: Bits, mut state: LockState, mut done: usize, first: usize, i: Option<usize>) -> Node {
        let place = |placed: &mut Bits, state: &mut LockState, done: &mut usize, i: usize| {
            placed.set(i);
            if self.e[i].complete_us.is_some() {
                *done += 1;
            }
            if let Some(s) = state.step(&self.e[i].op) {
                *state = s;
            }
        };
        if let Some(i) = i {
            place(&mut placed, &mut state, &mut done, i);
        }
        let mut first = first;
        loop {
            while first < self.e.len() && placed.get(first) {
                first += 1;
            }
            let cands = self.candidates(&placed, first);
            // An end whose transaction's grants are all placed only removes holders: place it.
            let ends: Vec<usize> = cands
                .iter()
                .copied()
                .filter(|&c| {
                    matches!(self.e[c].op, LockOp::End { .. }) && self.grants_of[c].iter().all(|&g| placed.get(g))
                })
                .collect();
            if ends.is_empty() {
                return Node { placed, state, done, first, cands, next: 0 };
            }
            for c in ends {
                place(&mut placed, &mut state, &mut done, c);
            }
        }
    }
}

/// Searches for a linearization of `entries` (one key) within `budget` grant steps.
pub fn check_key(entries: &[Entry], budget: u64) -> KeyResult {
    let mut e = entries.to_vec();
    e.sort_by_key(|x| (x.invoke_us, x.complete_us.unwrap_or(u64::MAX)));
    let required = e.iter().filter(|x| x.complete_us.is_some()).count();
    let txn = |x: &Entry| match x.op {
        LockOp::Grant { txn, .. } | LockOp::End { txn } => txn,
    };
    let mut grants: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, x) in e.iter().enumerate() {
        if matches!(x.op, LockOp::Grant { .. }) {
            grants.entry(txn(x)).or_default().push(i);
        }
    }
    let grants_of = e.iter().map(|x| grants.get(&txn(x)).cloned().unwrap_or_default()).collect();
    let s = Search { e: &e, required, grants_of };
    let root = s.node(Bits::new(e.len()), LockState::default(), 0, 0, None);
    let mut result = KeyResult { verdict: Verdict::Linearizable, steps: 0, ops: e.len() };
    if root.done == s.required {
        return result;
    }
    let mut seen: HashSet<(Vec<u64>, LockState)> = HashSet::new();
    seen.insert((root.placed.0.clone(), root.state.clone()));
    // The deepest node reached, for the report.
    let mut deepest = (root.done, root.state.clone(), root.cands.clone());
    let mut stack = vec![root];
    while let Some(top) = stack.last_mut() {
        let Some(&c) = top.cands.get(top.next) else {
            stack.pop();
            continue;
        };
        top.next += 1;
        result.steps += 1;
        if result.steps > budget {
            result.verdict = Verdict::Inconclusive;
            return result;
        }
        let Some(state) = top.state.step(&e[c].op) else { continue };
        let placed = Bits(top.placed.0.clone());
        let child = s.node(placed, state, top.done, top.first, Some(c));
        if child.done == s.required {
            return result;
        }
        if !seen.insert((child.placed.0.clone(), child.state.clone())) {
            continue;
        }
        if child.done > deepest.0 {
            deepest = (child.done, child.state.clone(), child.cands.clone());
        }
        stack.push(child);
    }
    let (done, state, cands) = deepest;
    let stuck: Vec<String> = cands.iter().map(|&c| describe(&e[c])).collect();
    result.verdict = Verdict::NotLinearizable(format!(
        "no order of the {} operations fits a reader-writer lock with rising tokens; the longest attempt \
         placed {done} of {required} and then stopped with {}, last token {}, none of these could go next: {}",
        e.len(),
        match (state.holders.is_empty(), state.exclusive) {
            (true, _) => "the key free".to_string(),
            (false, true) => format!("txn {:?} holding it exclusively", state.holders),
            (false, false) => format!("txns {:?} holding it shared", state.holders),
        },
        state.last_token,
        if stuck.is_empty() { "(none may come next)".to_string() } else { stuck.join("; ") }
    ));
    result
}

fn describe(x: &Entry) -> String {
    let window = match x.complete_us {
        Some(c) => format!("{}..{} us", x.invoke_us, c),
        None => format!("{}.. us", x.invoke_us),
    };
    match x.op {
        LockOp::Grant { txn, mode, token, holds } => format!(
            "grant to txn {txn} ({mode:?}, token {token}{}) {window}",
            if holds { "" } else { ", not committed" }
        ),
        LockOp::End { txn } => format!("end of txn {txn}'s hold {window}"),
    }
}

/// The model operations of every key, from a recorded history (see the module docs).
pub fn entries_by_key(history: &[Op]) -> HashMap<String, Vec<Entry>> {
    let committed = committed(history);
    let mut commit_of: HashMap<u64, &Op> = HashMap::new();
    for o in history.iter().filter(|o| o.kind == OpKind::Commit && o.outcome == Outcome::Ok) {
        commit_of.insert(o.txn, o);
    }
    let mut out: HashMap<String, Vec<Entry>> = HashMap::new();
    for o in history {
        let vouched = committed.contains(&o.txn);
        let entry = match (o.kind, o.outcome) {
            (OpKind::Acquire, Outcome::Ok) => {
                let op = LockOp::Grant {
                    txn: o.txn,
                    mode: o.mode.unwrap_or(Mode::Exclusive),
                    token: o.token,
                    holds: vouched,
                };
                if vouched {
                    let c = commit_of[&o.txn];
                    out.entry(o.key.clone()).or_default().push(Entry {
                        op: LockOp::End { txn: o.txn },
                        invoke_us: c.invoke_us,
                        complete_us: Some(c.complete_us),
                    });
                }
                Entry { op, invoke_us: o.invoke_us, complete_us: Some(o.complete_us) }
            }
            (OpKind::Release, Outcome::Ok) if vouched => {
                Entry { op: LockOp::End { txn: o.txn }, invoke_us: o.invoke_us, complete_us: Some(o.complete_us) }
            }
            (OpKind::Release, Outcome::Unknown) if vouched => {
                Entry { op: LockOp::End { txn: o.txn }, invoke_us: o.invoke_us, complete_us: None }
            }
            _ => continue,
        };
        out.entry(o.key.clone()).or_default().push(entry);
    }
    out
}

/// Per-key results of a whole history, and the violations.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Keys searched.
    pub keys: usize,
    /// Keys with a linearization.
    pub linearizable: usize,
    /// Keys whose search ran out of budget.
    pub inconclusive: Vec<String>,
    /// Keys with none.
    pub violations: Vec<Violation>,
    /// Grants tried, over all keys.
    pub steps: u64,
    /// Operations searched, over all keys.
    pub ops: usize,
}

/// Checks every key of `history` with `budget` steps per key.
pub fn check(history: &[Op], budget: u64) -> Report {
    let mut keys: Vec<(String, Vec<Entry>)> = entries_by_key(history).into_iter().collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    let mut r = Report { keys: keys.len(), ..Report::default() };
    for (key, entries) in keys {
        let k = check_key(&entries, budget);
        r.steps += k.steps;
        r.ops += k.ops;
        match k.verdict {
            Verdict::Linearizable => r.linearizable += 1,
            Verdict::Inconclusive => r.inconclusive.push(key),
            Verdict::NotLinearizable(why) => {
                r.violations.push(Violation { checker: "linearizable", message: format!("key {key}: {why}") })
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(txn: u64, mode: Mode, token: u64, t: (u64, u64)) -> Entry {
        Entry { op: LockOp::Grant { txn, mode, token, holds: true }, invoke_us: t.0, complete_us: Some(t.1) }
    }

    fn end(txn: u64, t: (u64, u64)) -> Entry {
        Entry { op: LockOp::End { txn }, invoke_us: t.0, complete_us: Some(t.1) }
    }

    fn verdict(e: &[Entry]) -> Verdict {
        check_key(e, 10_000).verdict
    }

    use Mode::{Exclusive as X, Shared as S};

    #[test]
    fn sequential_exclusive_holds_are_linearizable() {
        let h = [grant(1, X, 10, (0, 1)), end(1, (2, 3)), grant(2, X, 11, (4, 5)), end(2, (6, 7))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn overlapping_calls_that_can_be_ordered_are_linearizable() {
        // 2's grant was invoked before 1 ended and acknowledged after: it waited for it.
        let h = [grant(1, X, 10, (0, 1)), grant(2, X, 11, (2, 9)), end(1, (3, 4)), end(2, (10, 11))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
        // Both calls overlap each other and the end: the order 1, end 1, 2 exists.
        let h = [grant(2, X, 11, (0, 10)), grant(1, X, 10, (0, 10)), end(1, (0, 10)), end(2, (20, 21))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn shared_holders_may_overlap() {
        let h = [grant(1, S, 10, (0, 1)), grant(2, S, 11, (2, 3)), end(1, (4, 5)), end(2, (6, 7))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn two_exclusive_holds_that_cannot_be_ordered_are_not() {
        let h = [grant(1, X, 10, (0, 1)), grant(2, X, 11, (2, 3)), end(1, (4, 5)), end(2, (6, 7))];
        let Verdict::NotLinearizable(why) = verdict(&h) else { panic!("{:?}", verdict(&h)) };
        assert!(why.contains("txn 2"), "{why}");
        // A writer inside two readers' holds.
        let h = [grant(1, S, 10, (0, 1)), grant(2, X, 11, (2, 3)), end(1, (4, 5)), end(2, (6, 7))];
        assert!(matches!(verdict(&h), Verdict::NotLinearizable(_)));
    }

    #[test]
    fn a_lower_token_after_a_completed_higher_one_is_not() {
        let h = [grant(1, X, 11, (0, 1)), end(1, (2, 3)), grant(2, X, 10, (4, 5)), end(2, (6, 7))];
        assert!(matches!(verdict(&h), Verdict::NotLinearizable(_)));
        // Concurrent grants may be ordered by their tokens instead.
        let h = [grant(1, S, 11, (0, 5)), grant(2, S, 10, (1, 3)), end(1, (6, 7)), end(2, (6, 7))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn token_order_and_holds_together_can_rule_out_every_order() {
        // Each rule alone is satisfiable: 1 may be granted before 2 (it started first), but its
        // token is higher, so 2 came first, and 2's hold lasted past 1's acknowledgement.
        let h = [grant(1, X, 11, (0, 5)), grant(2, X, 10, (1, 3)), end(2, (6, 7)), end(1, (8, 9))];
        assert!(matches!(verdict(&h), Verdict::NotLinearizable(_)));
    }

    #[test]
    fn unvouched_holds_may_have_expired_but_their_grants_still_count() {
        let lost = |txn, token, t: (u64, u64)| Entry {
            op: LockOp::Grant { txn, mode: X, token, holds: false },
            invoke_us: t.0,
            complete_us: Some(t.1),
        };
        // 1 never committed: its lease may have run out before 2 was granted.
        let h = [lost(1, 10, (0, 1)), grant(2, X, 11, (2, 3)), end(2, (4, 5))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
        // But a grant while a vouched holder holds is still a violation.
        let h = [grant(2, X, 10, (0, 1)), lost(1, 11, (2, 3)), end(2, (4, 5))];
        assert!(matches!(verdict(&h), Verdict::NotLinearizable(_)));
    }

    #[test]
    fn a_release_of_unknown_outcome_may_have_happened() {
        let unknown_end = Entry { op: LockOp::End { txn: 1 }, invoke_us: 2, complete_us: None };
        let h = [grant(1, X, 10, (0, 1)), unknown_end, grant(2, X, 11, (5, 6)), end(2, (7, 8))];
        assert_eq!(verdict(&h), Verdict::Linearizable);
    }

    #[test]
    fn the_budget_makes_a_search_inconclusive_not_endless() {
        // Many concurrent shared grants whose tokens force one order, but the wrong orders
        // are tried first; with a budget of 1 the search must give up.
        let h: Vec<Entry> = (0..12).map(|i| grant(i, S, 100 - i, (0, 100))).collect();
        assert_eq!(check_key(&h, 1).verdict, Verdict::Inconclusive);
        assert_eq!(check_key(&h, 1_000_000).verdict, Verdict::Linearizable);
    }

    #[test]
    fn entries_come_from_the_history() {
        use crate::history::Op;
        let op = |kind, txn, key: &str, token, t: (u64, u64), outcome| Op {
            key: key.into(),
            token,
            invoke_us: t.0,
            complete_us: t.1,
            outcome,
            mode: Some(X),
            ..Op::new(txn, kind, txn)
        };
        use OpKind::*;
        let h = vec![
            op(Acquire, 1, "k", 10, (0, 1), Outcome::Ok),
            op(Release, 1, "k", 0, (2, 3), Outcome::Ok),
            op(Commit, 1, "", 0, (4, 5), Outcome::Ok),
            op(Acquire, 2, "k", 11, (2, 6), Outcome::Ok),
            op(Commit, 2, "", 0, (7, 8), Outcome::Fail),
            op(Acquire, 3, "k", 0, (2, 9), Outcome::Unknown),
            op(Acquire, 4, "j", 12, (0, 1), Outcome::Ok),
            op(Commit, 4, "", 0, (9, 10), Outcome::Ok),
        ];
        let e = entries_by_key(&h);
        assert_eq!(e["k"].len(), 4, "{:?}", e["k"]); // grant, release, commit end, lost grant
        assert_eq!(e["j"].len(), 2);
        let r = check(&h, 1000);
        assert_eq!((r.keys, r.linearizable, r.violations.len()), (2, 2, 0));
        // Txn 1 keeps the key until its commit at 7 and txn 2 commits: 2's exclusive grant
        // (2..6) falls inside 1's vouched hold.
        let mut bad = h.clone();
        bad.remove(1);
        bad[1].invoke_us = 7;
        bad[1].complete_us = 8;
        bad[3].outcome = Outcome::Ok;
        let r = check(&bad, 1000);
        assert_eq!(r.violations.len(), 1, "{r:?}");
        assert!(r.violations[0].message.starts_with("key k:"));
    }
}

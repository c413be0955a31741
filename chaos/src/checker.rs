//! Checkers: each takes the whole history and returns the violations it found.
//!
//! Only what the server vouched for is judged: a hold counts for the interval checker only
//! if its transaction committed successfully, and then only from the grant's
//! acknowledgement to the moment the client *asked* to release or commit (an inner bound
//! of the true hold, so no false alarms from acknowledgement delays).

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::history::{Mode, Op, OpKind, Outcome};

/// One violation: which checker and what it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The checker's name.
    pub checker: &'static str,
    /// What it saw, with transaction ids, keys, tokens and times.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.message)
    }
}

fn violation(checker: &'static str, message: String) -> Violation {
    Violation { checker, message }
}

/// Transactions whose commit was acknowledged.
pub fn committed(history: &[Op]) -> HashSet<u64> {
    history.iter().filter(|o| o.kind == OpKind::Commit && o.outcome == Outcome::Ok).map(|o| o.txn).collect()
}

/// (a) The fenced register: accepted tokens strictly increase per key; a committed
/// transaction's write is never rejected (it held the lock, so nobody with a higher token
/// could have written); a committed reader never saw a write with a higher token than its
/// own (a writer overlapped its shared hold); the register ends with the last accepted
/// write of every key (no acknowledged write lost).
pub fn fenced_register(history: &[Op], final_tokens: &HashMap<String, u64>) -> Vec<Violation> {
    const NAME: &str = "fenced-register";
    let mut out = Vec::new();
    let committed = committed(history);
    let mut writes: Vec<&Op> = history.iter().filter(|o| o.kind == OpKind::Write).collect();
    writes.sort_by_key(|o| o.complete_us);
    let mut last: HashMap<&str, u64> = HashMap::new();
    for w in &writes {
        match w.outcome {
            Outcome::Ok => {
                let prev = last.entry(w.key.as_str()).or_insert(0);
                if w.token <= *prev {
                    out.push(violation(
                        NAME,
                        format!(
                            "key {}: write with token {} (txn {}) accepted after token {}",
                            w.key, w.token, w.txn, prev
                        ),
                    ));
                }
                *prev = (*prev).max(w.token);
            }
            Outcome::Fail if committed.contains(&w.txn) => out.push(violation(
                NAME,
                format!(
                    "key {}: txn {} committed, yet its write with token {} was fenced off by token {} at {} us: \
                     someone else held the key with a higher token during its hold",
                    w.key, w.txn, w.token, w.observed, w.complete_us
                ),
            )),
            _ => {}
        }
    }
    for r in history.iter().filter(|o| o.kind == OpKind::Read && o.outcome == Outcome::Ok) {
        if r.observed > r.token && committed.contains(&r.txn) {
            out.push(violation(
                NAME,
                format!(
                    "key {}: txn {} committed a shared hold with token {} but read a write with token {} at {} us",
                    r.key, r.txn, r.token, r.observed, r.complete_us
                ),
            ));
        }
    }
    for (key, token) in &last {
        let fin = final_tokens.get(*key).copied().unwrap_or(0);
        if fin != *token {
            out.push(violation(
                NAME,
                format!("key {key}: last acknowledged write had token {token}, the register ends with {fin}"),
            ));
        }
    }
    out
}

/// A hold the server vouched for: `[start_us, end_us)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// Transaction.
    pub txn: u64,
    /// Key.
    pub key: String,
    /// Mode.
    pub mode: Mode,
    /// Fencing token.
    pub token: u64,
    /// The grant's acknowledgement.
    pub start_us: u64,
    /// When the client asked to release or commit.
    pub end_us: u64,
}

/// The holds of committed transactions: from the grant's acknowledgement to the invoke of
/// the first release of that key after it, else of the commit.
pub fn vouched_holds(history: &[Op]) -> Vec<Hold> {
    let committed = committed(history);
    let mut commit_at: HashMap<u64, u64> = HashMap::new();
    for o in history.iter().filter(|o| o.kind == OpKind::Commit && o.outcome == Outcome::Ok) {
        commit_at.insert(o.txn, o.invoke_us);
    }
    let mut holds = Vec::new();
    for a in history.iter().filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Ok) {
        if !committed.contains(&a.txn) {
            continue;
        }
        let release = history
            .iter()
            .filter(|o| o.kind == OpKind::Release && o.txn == a.txn && o.key == a.key && o.invoke_us >= a.complete_us)
            .map(|o| o.invoke_us)
            .min();
        let end = release.unwrap_or(commit_at[&a.txn]);
        holds.push(Hold {
            txn: a.txn,
            key: a.key.clone(),
            mode: a.mode.unwrap_or(Mode::Exclusive),
            token: a.token,
            start_us: a.complete_us,
            end_us: end,
        });
    }
    holds
}

/// (b) No two vouched holds of one key in conflicting modes overlap.
pub fn hold_intervals(history: &[Op]) -> Vec<Violation> {
    const NAME: &str = "hold-intervals";
    let mut by_key: HashMap<String, Vec<Hold>> = HashMap::new();
    for h in vouched_holds(history) {
        by_key.entry(h.key.clone()).or_default().push(h);
    }
    let mut out = Vec::new();
    for (key, mut holds) in by_key {
        holds.sort_by_key(|h| h.start_us);
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                if b.start_us >= a.end_us {
                    break;
                }
                if a.txn != b.txn && a.mode.conflicts(b.mode) {
                    out.push(violation(
                        NAME,
                        format!(
                            "key {key}: txn {} ({:?}, token {}, {}..{} us) overlaps txn {} ({:?}, token {}, {}..{} us)",
                            a.txn, a.mode, a.token, a.start_us, a.end_us, b.txn, b.mode, b.token, b.start_us, b.end_us
                        ),
                    ));
                }
            }
        }
    }
    out
}

/// (c) Fencing tokens: every granted token is non-zero and unique cluster-wide, and a grant
/// acknowledged before another was invoked has the smaller token (real-time order, which
/// also spans restarts and leader changes).
pub fn tokens(history: &[Op]) -> Vec<Violation> {
    const NAME: &str = "tokens";
    let mut out = Vec::new();
    let grants: Vec<&Op> = history.iter().filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Ok).collect();
    let mut seen: HashMap<u64, &Op> = HashMap::new();
    for g in &grants {
        if g.token == 0 {
            out.push(violation(NAME, format!("txn {} was granted key {} with token 0", g.txn, g.key)));
        }
        if let Some(other) = seen.insert(g.token, g) {
            out.push(violation(
                NAME,
                format!(
                    "token {} granted twice: txn {} key {} at {} us and txn {} key {} at {} us",
                    g.token, other.txn, other.key, other.complete_us, g.txn, g.key, g.complete_us
                ),
            ));
        }
    }
    let mut by_complete = grants.clone();
    by_complete.sort_by_key(|o| o.complete_us);
    let mut by_invoke = grants;
    by_invoke.sort_by_key(|o| o.invoke_us);
    let mut i = 0;
    let mut max: Option<&Op> = None;
    for g in by_invoke {
        while i < by_complete.len() && by_complete[i].complete_us < g.invoke_us {
            if max.is_none_or(|m| by_complete[i].token > m.token) {
                max = Some(by_complete[i]);
            }
            i += 1;
        }
        if let Some(m) = max {
            if g.token <= m.token {
                out.push(violation(
                    NAME,
                    format!(
                        "txn {} got token {} for key {} (invoked at {} us) after txn {} had been granted token {} \
                         (acknowledged at {} us)",
                        g.txn, g.token, g.key, g.invoke_us, m.txn, m.token, m.complete_us
                    ),
                ));
            }
        }
    }
    out
}

/// (d) Every transaction that began reaches a terminal operation (commit or abort, with
/// any outcome: a lost transaction's commit fails, which is terminal too).
pub fn terminal(history: &[Op]) -> Vec<Violation> {
    let ended: HashSet<u64> =
        history.iter().filter(|o| matches!(o.kind, OpKind::Commit | OpKind::Abort)).map(|o| o.txn).collect();
    history
        .iter()
        .filter(|o| o.kind == OpKind::Begin && o.outcome == Outcome::Ok && !ended.contains(&o.txn))
        .map(|o| violation("terminal", format!("txn {} (process {}) never ended", o.txn, o.process)))
        .collect()
}

/// Every checker over one history.
pub fn check_all(history: &[Op], final_tokens: &HashMap<String, u64>) -> Vec<Violation> {
    let mut v = fenced_register(history, final_tokens);
    v.extend(hold_intervals(history));
    v.extend(tokens(history));
    v.extend(terminal(history));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, txn: u64, key: &str, token: u64, t: (u64, u64), outcome: Outcome) -> Op {
        Op {
            key: key.into(),
            token,
            invoke_us: t.0,
            complete_us: t.1,
            outcome,
            mode: Some(Mode::Exclusive),
            ..Op::new(txn, kind, txn)
        }
    }

    fn shared(mut o: Op) -> Op {
        o.mode = Some(Mode::Shared);
        o
    }

    fn observed(mut o: Op, seen: u64) -> Op {
        o.observed = seen;
        o
    }

    /// Two transactions taking `k` one after the other, each writing and committing.
    fn clean() -> Vec<Op> {
        use OpKind::*;
        use Outcome::Ok;
        vec![
            op(Begin, 1, "", 0, (0, 1), Ok),
            op(Acquire, 1, "k", 10, (2, 3), Ok),
            op(Write, 1, "k", 10, (4, 4), Ok),
            op(Commit, 1, "", 0, (5, 6), Ok),
            op(Begin, 2, "", 0, (1, 2), Ok),
            op(Acquire, 2, "k", 11, (3, 7), Ok),
            op(Write, 2, "k", 11, (8, 8), Ok),
            op(Release, 2, "k", 0, (9, 10), Ok),
            op(Commit, 2, "", 0, (11, 12), Ok),
        ]
    }

    fn finals(k: u64) -> HashMap<String, u64> {
        HashMap::from([("k".to_string(), k)])
    }

    #[test]
    fn a_clean_history_passes_every_checker() {
        assert_eq!(check_all(&clean(), &finals(11)), vec![]);
    }

    #[test]
    fn a_stale_holder_that_is_fenced_off_and_fails_to_commit_is_fine() {
        use OpKind::*;
        let mut h = clean();
        // txn 3 got token 9 long before, stalled, wrote late and was rejected; its commit failed.
        h.push(op(Begin, 3, "", 0, (0, 1), Outcome::Ok));
        h.push(op(Acquire, 3, "k", 9, (1, 2), Outcome::Ok));
        h.push(observed(op(Write, 3, "k", 9, (20, 20), Outcome::Fail), 11));
        h.push(op(Commit, 3, "", 0, (21, 22), Outcome::Fail));
        assert_eq!(check_all(&h, &finals(11)), vec![]);
    }

    #[test]
    fn a_committed_writer_that_was_fenced_off_fails() {
        use OpKind::*;
        let mut h = clean();
        h.push(op(Begin, 3, "", 0, (0, 1), Outcome::Ok));
        h.push(op(Acquire, 3, "k", 9, (1, 2), Outcome::Ok));
        h.push(observed(op(Write, 3, "k", 9, (20, 20), Outcome::Fail), 11));
        h.push(op(Commit, 3, "", 0, (21, 22), Outcome::Ok));
        let v = fenced_register(&h, &finals(11));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("txn 3 committed"));
    }

    #[test]
    fn an_accepted_write_with_a_lower_token_fails() {
        use OpKind::*;
        let mut h = clean();
        h.push(op(Write, 1, "k", 10, (30, 30), Outcome::Ok));
        assert_eq!(fenced_register(&h, &finals(11)).len(), 1);
    }

    #[test]
    fn a_lost_acknowledged_write_fails() {
        let v = fenced_register(&clean(), &finals(10));
        assert_eq!(v.len(), 1);
        assert!(v[0].message.contains("register ends with 10"));
    }

    #[test]
    fn a_committed_reader_that_saw_a_newer_write_fails() {
        use OpKind::*;
        let mut h = clean();
        h.push(op(Begin, 4, "", 0, (0, 1), Outcome::Ok));
        h.push(shared(op(Acquire, 4, "k", 12, (13, 14), Outcome::Ok)));
        h.push(shared(observed(op(Read, 4, "k", 12, (15, 15), Outcome::Ok), 13)));
        h.push(op(Commit, 4, "", 0, (16, 17), Outcome::Ok));
        let v = fenced_register(&h, &finals(11));
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn overlapping_exclusive_holds_of_committed_transactions_fail() {
        use OpKind::*;
        use Outcome::Ok;
        let h = vec![
            op(Acquire, 1, "k", 10, (0, 1), Ok),
            op(Commit, 1, "", 0, (10, 11), Ok),
            op(Acquire, 2, "k", 11, (2, 5), Ok),
            op(Commit, 2, "", 0, (12, 13), Ok),
        ];
        let v = hold_intervals(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("txn 1"));
    }

    #[test]
    fn overlapping_holds_are_fine_when_shared_or_not_committed() {
        use OpKind::*;
        use Outcome::*;
        let h = vec![
            shared(op(Acquire, 1, "k", 10, (0, 1), Ok)),
            op(Commit, 1, "", 0, (10, 11), Ok),
            shared(op(Acquire, 2, "k", 11, (2, 5), Ok)),
            op(Commit, 2, "", 0, (12, 13), Ok),
            // Exclusive and overlapping, but its commit failed: the server never vouched.
            op(Acquire, 3, "k", 12, (3, 4), Ok),
            op(Commit, 3, "", 0, (12, 13), Fail),
            // Overlaps only the acknowledgement of txn 1's release (after its invoke).
            op(Acquire, 4, "j", 13, (0, 1), Ok),
            op(Release, 4, "j", 0, (5, 9), Ok),
            op(Commit, 4, "", 0, (10, 11), Ok),
            op(Acquire, 5, "j", 14, (6, 7), Ok),
            op(Commit, 5, "", 0, (10, 11), Ok),
        ];
        assert_eq!(hold_intervals(&h), vec![]);
    }

    #[test]
    fn repeated_or_backward_tokens_fail() {
        use OpKind::*;
        use Outcome::Ok;
        let dup = vec![op(Acquire, 1, "k", 10, (0, 1), Ok), op(Acquire, 2, "j", 10, (0, 2), Ok)];
        assert_eq!(tokens(&dup).len(), 1);
        // Granted 8 after 10 was acknowledged: goes backwards (e.g. after a restart).
        let back = vec![op(Acquire, 1, "k", 10, (0, 1), Ok), op(Acquire, 2, "j", 8, (2, 3), Ok)];
        let v = tokens(&back);
        assert_eq!(v.len(), 1, "{v:?}");
        // Concurrent grants may come in either order.
        let conc = vec![op(Acquire, 1, "k", 10, (0, 5), Ok), op(Acquire, 2, "j", 8, (2, 3), Ok)];
        assert_eq!(tokens(&conc), vec![]);
        // Unknown outcomes carry no token.
        let unk = vec![op(Acquire, 1, "k", 0, (0, 5), Outcome::Unknown)];
        assert_eq!(tokens(&unk), vec![]);
    }

    #[test]
    fn a_transaction_without_an_end_fails() {
        use OpKind::*;
        let h = vec![op(Begin, 1, "", 0, (0, 1), Outcome::Ok), op(Begin, 2, "", 0, (0, 1), Outcome::Ok)];
        let mut h2 = h.clone();
        h2.push(op(Commit, 2, "", 0, (2, 3), Outcome::Unknown));
        assert_eq!(terminal(&h).len(), 2);
        assert_eq!(terminal(&h2).len(), 1);
    }
}

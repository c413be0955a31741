//! Cost of one enqueue (an Acquire that must wait, including the deadlock search) with
//! 10,000 transactions already waiting, on the bare lock table (no raft, no network).
//!
//! Run with `make bench` (or `cargo bench -p caerus-locks --bench enqueue`). Prints one
//! line per scenario: mean and worst time per enqueue over the measured repetitions.

use std::hint::black_box;
use std::time::{Duration, Instant};

use caerus_locks::{Command, LockKey, LockMode, LockTable, LogCommand, Outcome, TxnId, VictimPolicy};

const WAITING: usize = 10_000;
const REPS: usize = 300;

fn apply(t: &mut LockTable, cmd: Command) -> Outcome {
    let out = t.apply(&LogCommand { now_ms: 1, cmd });
    t.take_effects();
    out
}

fn begin(t: &mut LockTable) -> TxnId {
    match apply(
        t,
        Command::Begin { request_id: None, lease_ms: 60_000, priority: 0, name: String::new(), owner: String::new() },
    ) {
        Outcome::Begun { txn, .. } => txn,
        o => panic!("{o:?}"),
    }
}

fn acquire(txn: TxnId, key: &str, mode: LockMode, request_id: &str) -> Command {
    Command::Acquire {
        txn,
        request_id: request_id.into(),
        lock: LockKey::new("bench", key),
        mode,
        wait_ms: 60_000,
        victim_policy: VictimPolicy::default(),
    }
}

/// Measures enqueueing fresh transactions on `key` of a prepared table. With `waited_for`
/// the new transaction first takes a lock of its own that another transaction waits for,
/// which forces the full deadlock search (otherwise it is skipped: nobody can be waiting
/// for a transaction that holds nothing contended). Everything a repetition adds is
/// removed afterwards, outside the timing, so every repetition sees the same table.
fn measure(name: &str, t: &mut LockTable, key: &str, mode: LockMode, waited_for: bool) {
    let mut times = Vec::with_capacity(REPS);
    for i in 0..REPS {
        let txn = begin(t);
        let mut extra = None;
        if waited_for {
            let own = format!("own{i}");
            apply(t, acquire(txn, &own, LockMode::Exclusive, "own"));
            let other = begin(t);
            apply(t, acquire(other, &own, LockMode::Exclusive, "wait-own"));
            extra = Some(other);
        }
        let cmd = acquire(txn, key, mode, &format!("m{i}"));
        let start = Instant::now();
        let out = black_box(apply(t, cmd));
        times.push(start.elapsed());
        assert!(matches!(out, Outcome::Acquire(caerus_locks::AcquireStatus::Queued { .. })), "{out:?}");
        for x in std::iter::once(txn).chain(extra) {
            apply(t, Command::End { txn: x, request_id: None, commit: false });
        }
    }
    let mean = times.iter().sum::<Duration>() / REPS as u32;
    let worst = times.iter().max().copied().unwrap_or_default();
    println!("{name:<70} mean {:>9.1} µs   worst {:>9.1} µs", mean.as_secs_f64() * 1e6, worst.as_secs_f64() * 1e6);
}

fn main() {
    println!("enqueue cost with {WAITING} waiting transactions ({REPS} measured enqueues each)");

    // A chain: t_i holds k_i and waits for k_{i-1}. The new waiter on the last key makes
    // the deadlock search walk all 10,000 transactions (the worst case: no cycle).
    let mut t = LockTable::new();
    let txns: Vec<TxnId> = (0..=WAITING).map(|_| begin(&mut t)).collect();
    for (i, &x) in txns.iter().enumerate() {
        apply(&mut t, acquire(x, &format!("k{i}"), LockMode::Exclusive, "hold"));
    }
    for (i, &x) in txns.iter().enumerate().skip(1) {
        apply(&mut t, acquire(x, &format!("k{}", i - 1), LockMode::Exclusive, "wait"));
    }
    let last = format!("k{WAITING}");
    measure("chain of 10,000 waiters, new waiter holds nothing contended", &mut t, &last, LockMode::Exclusive, false);
    measure(
        "chain of 10,000 waiters, new waiter is waited for (full search)",
        &mut t,
        &last,
        LockMode::Exclusive,
        true,
    );

    // One hot key: 10,000 waiters (every tenth a writer) queued on it.
    let mut t = LockTable::new();
    let holder = begin(&mut t);
    apply(&mut t, acquire(holder, "hot", LockMode::Exclusive, "hold"));
    for i in 0..WAITING {
        let x = begin(&mut t);
        let mode = if i % 10 == 0 { LockMode::Exclusive } else { LockMode::SharedRead };
        apply(&mut t, acquire(x, "hot", mode, "wait"));
    }
    measure(
        "one key with 10,000 queued, new writer holds nothing contended",
        &mut t,
        "hot",
        LockMode::Exclusive,
        false,
    );
    measure(
        "one key with 10,000 queued, new writer is waited for (full search)",
        &mut t,
        "hot",
        LockMode::Exclusive,
        true,
    );
    measure(
        "one key with 10,000 queued, new reader is waited for (full search)",
        &mut t,
        "hot",
        LockMode::SharedRead,
        true,
    );

    // Many independent waits: 10,000 keys, each held by one transaction and waited for by another.
    let mut t = LockTable::new();
    for i in 0..WAITING {
        let (h, w) = (begin(&mut t), begin(&mut t));
        apply(&mut t, acquire(h, &format!("k{i}"), LockMode::Exclusive, "hold"));
        apply(&mut t, acquire(w, &format!("k{i}"), LockMode::Exclusive, "wait"));
    }
    measure("10,000 independent waits, new waiter is waited for", &mut t, "k5000", LockMode::Exclusive, true);
}

//! The recorded history: one entry per operation, written when the operation completes
//! (clients are sequential, so an entry holds both its invoke and its completion).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// What an operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// Begin a transaction (`txn` is its id when ok).
    Begin,
    /// Acquire a lock on `key` in `mode`; `token` is the fencing token when ok.
    Acquire,
    /// Release the lock on `key`.
    Release,
    /// Commit the transaction.
    Commit,
    /// Abort the transaction.
    Abort,
    /// Write to the fenced register with `token`; ok = accepted, fail = rejected.
    /// `observed` is the register's last accepted token before the write.
    Write,
    /// Read the fenced register while holding a shared lock with `token`; `observed` is
    /// the last accepted token it saw.
    Read,
}

/// Lock mode, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// One holder.
    Exclusive,
    /// Any number of readers.
    Shared,
}

impl Mode {
    /// Whether two holds in these modes may not overlap.
    pub fn conflicts(self, other: Mode) -> bool {
        self == Mode::Exclusive || other == Mode::Exclusive
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// It may or may not have taken effect (timeout, unavailable, crash).
    Unknown,
}

/// One operation of one client process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The client process (worker index, or 1000+ for stalled client subprocesses).
    pub process: u64,
    /// What it did.
    pub kind: OpKind,
    /// Transaction id (0 when a Begin failed).
    pub txn: u64,
    /// Lock key (empty for Begin/Commit/Abort).
    pub key: String,
    /// Lock mode for Acquire, Write and Read.
    pub mode: Option<Mode>,
    /// Fencing token (Acquire ok; the writer's/reader's token for Write and Read).
    pub token: u64,
    /// Register's last accepted token seen by a Write or Read.
    pub observed: u64,
    /// Microseconds since the start of the run when invoked.
    pub invoke_us: u64,
    /// Microseconds since the start of the run when the outcome was known.
    pub complete_us: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// Error code when it did not end ok.
    pub error: String,
}

impl Op {
    /// A new operation, to fill in with the struct update syntax.
    pub fn new(process: u64, kind: OpKind, txn: u64) -> Op {
        Op {
            process,
            kind,
            txn,
            key: String::new(),
            mode: None,
            token: 0,
            observed: 0,
            invoke_us: 0,
            complete_us: 0,
            outcome: Outcome::Ok,
            error: String::new(),
        }
    }
}

/// A shared, append-only history with a common clock.
pub struct History {
    start: Instant,
    ops: Mutex<Vec<Op>>,
    /// Acknowledged grants so far (read often while waiting for one: no copy of the history).
    grants: AtomicU64,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// An empty history whose clock starts now.
    pub fn new() -> History {
        History { start: Instant::now(), ops: Mutex::new(Vec::new()), grants: AtomicU64::new(0) }
    }

    /// Microseconds since the start.
    /// Prints a progress line stamped with the run's time.
    pub fn log(&self, msg: impl AsRef<str>) {
        println!("[{:7.1}s] {}", self.now_us() as f64 / 1e6, msg.as_ref());
    }

    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// The instant the clock counts from.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Appends a completed operation.
    pub fn push(&self, op: Op) {
        if op.kind == OpKind::Acquire && op.outcome == Outcome::Ok {
            self.grants.fetch_add(1, Ordering::Relaxed);
        }
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).push(op);
    }

    /// Acknowledged grants so far.
    pub fn grants(&self) -> u64 {
        self.grants.load(Ordering::Relaxed)
    }

    /// A copy of every operation so far.
    pub fn snapshot(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The number of operations so far.
    pub fn len(&self) -> usize {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One JSON object per line, in completion order.
    pub fn to_jsonl(&self) -> String {
        let mut ops = self.snapshot();
        ops.sort_by_key(|o| o.complete_us);
        ops.iter().map(|o| serde_json::to_string(o).expect("op serializes") + "\n").collect()
    }
}

//! What goes into the raft log, and what applying it answers.
//!
//! Every change of lock state is one of these commands. Time enters only as
//! `LogCommand::now_ms`, the proposing leader's clock, so every replica applying the same
//! log computes the same table (no replica reads its own clock during apply).

use serde::{Deserialize, Serialize};

use super::api_key::{KeyActor, NewApiKey};
use super::schedule::{RunResult, SlotClaim, SlotRun};
use super::types::{EndCause, FencingToken, Grant, Held, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};

/// A command with the leader's wall clock at proposal time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogCommand {
    /// Milliseconds since the Unix epoch on the proposing leader. Used only for
    /// bookkeeping (begin/end times, retention of finished transactions), never to decide
    /// an expiry: expiries are explicit `Expire` commands.
    pub now_ms: u64,
    pub cmd: Command,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Start a transaction. A repeated `request_id` returns the same transaction.
    Begin { request_id: Option<String>, lease_ms: u64, priority: i32, name: String, owner: String },
    /// Ask for a lock; grants at once or queues (and then breaks any deadlock it closes,
    /// choosing the victim by `victim_policy`).
    Acquire { txn: TxnId, request_id: String, lock: LockKey, mode: LockMode, wait_ms: u64, victim_policy: VictimPolicy },
    /// Withdraw a wait whose acquire timeout passed (proposed by the leader's timer).
    CancelWait { txn: TxnId, request_id: String },
    /// Release one lock (or withdraw the wait for it).
    Release { txn: TxnId, request_id: Option<String>, lock: LockKey },
    /// Commit or abort, releasing everything.
    End { txn: TxnId, request_id: Option<String>, commit: bool },
    /// The leader saw the lease lapse.
    Expire { txn: TxnId },
    /// An operator aborts a transaction.
    Abort { txn: TxnId, request_id: Option<String>, operator: String, reason: String },
    /// A webhook endpoint acknowledged every event up to `sequence`.
    WebhookDelivered { webhook: String, sequence: u64 },
    /// Commands proposed together (group commit: one raft entry, one fsync for all),
    /// applied in order exactly as if each were its own entry with the same clock.
    /// Never nested.
    Batch(Vec<Command>),
    /// Begin a transaction and ask for its first lock in one entry (the one-shot
    /// AcquireLock). Both halves are idempotent by their request ids, like `Begin` and
    /// `Acquire` on their own.
    BeginAcquire { begin: Begin, acquire: AcquireRequest },
    /// Ask for several locks at once: granted together in this entry or a later one, or not
    /// at all (see `table::all`). Locks the transaction holds in a covering mode are part of
    /// the answer with their tokens; the rest wait in every key's queue under one ticket.
    AcquireAll {
        txn: TxnId,
        request_id: String,
        locks: Vec<(LockKey, LockMode)>,
        wait_ms: u64,
        victim_policy: VictimPolicy,
    },
    /// Turn an EXCLUSIVE hold into SHARED_READ in place, keeping its token, and let the
    /// readers queued behind it in. A SHARED_READ hold is left as it is.
    Downgrade { txn: TxnId, request_id: Option<String>, lock: LockKey },
    /// A begin with options added since the first release (and, for the one-shot start,
    /// its first acquire): answers like `Begin` (or `BeginAcquire`). Options are a list of
    /// enum values so a new option needs neither a new command nor a new layout.
    BeginWith { begin: Begin, options: Vec<BeginOption>, acquire: Option<AcquireRequest> },
    /// The leader saw a bounded transaction's maximum duration pass (see
    /// `BeginOption::MaxDurationMs`); applied only if it really has by the log's clock.
    EndOverdue { txn: TxnId },
    /// An operator sets the lock-delay of namespaces starting with `prefix` ("" = every
    /// namespace; 0 removes the rule). See `table::lock_delay`.
    SetLockDelay { prefix: String, delay_ms: u64 },
    /// The leader saw these keys' lock-delays pass; each ends only if it really has by the
    /// log's clock.
    EndLockDelay { keys: Vec<LockKey> },
    /// Ask for one permit of the semaphore `lock` of `permits` permits (mode SEMAPHORE):
    /// like `Acquire`, with the count the key is declared with (see `table::semaphores`).
    AcquirePermit {
        txn: TxnId,
        request_id: String,
        lock: LockKey,
        permits: u32,
        wait_ms: u64,
        victim_policy: VictimPolicy,
    },
    /// An admin key (`key`) limited to namespace `prefixes` ends or aborts another key's
    /// transaction: `cmd` (an `End` or an `Abort`) is applied only if the transaction is
    /// still the key's own or inside the prefixes by this entry's state (`Txn::inside`).
    /// The leader checks before proposing, but the owner can take a lock outside the
    /// prefixes in between, and ending the transaction would release that lock too.
    Scoped { key: String, prefixes: Vec<String>, cmd: Box<Command> },
    /// Claim the schedule slot of `lock` (of `period_ms`, aligned to the epoch) that the
    /// log's clock is in, for a job `txn` runs while holding `lock` EXCLUSIVE: answered
    /// with the slot and whether to run (see `table::slots`). Idempotent by `request_id`.
    ClaimSlot { txn: TxnId, request_id: String, lock: LockKey, period_ms: u64, retry_failed: bool },
    /// Record how `txn`'s run of slot `slot` of `lock` ended. Idempotent by `request_id`.
    FinishSlot { txn: TxnId, request_id: String, lock: LockKey, slot: u64, result: RunResult },
    /// The leader sets the cluster's feature level (see `feature_level`): raised once every
    /// member said it reads the new level, lowered for a rolling downgrade while nothing of
    /// the higher level was used. Answered `FeatureLevelSet` or refused.
    SetFeatureLevel { level: u32 },
    /// An admin key (`by`) creates a cluster API key; only its hash is in the entry. A
    /// retry with the same `request_id` by the same key replaces the hash (see
    /// `table::api_keys`). Checked against `by`'s prefixes on the state it is applied to.
    CreateApiKey { by: KeyActor, request_id: String, key: NewApiKey },
    /// An admin key revokes a cluster API key: its next call anywhere is unauthenticated.
    RevokeApiKey { by: KeyActor, name: String },
    /// An admin key gives a cluster API key a new secret (its hash); the old one keeps
    /// working for `grace_ms` of the log's clock (0 = stops at once).
    RotateApiKey { by: KeyActor, name: String, sha256: [u8; 32], grace_ms: u64 },
    /// The leader saw these keys' expiry (or their old secret's grace) pass; each ends only
    /// if it really has by the log's clock.
    ExpireApiKeys { names: Vec<String> },
    // New variants go last: bincode numbers variants in order, and logs written by an
    // older version must keep decoding.
}

/// The `Begin` fields of a one-shot `BeginAcquire`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Begin {
    pub request_id: Option<String>,
    pub lease_ms: u64,
    pub priority: i32,
    pub name: String,
    pub owner: String,
}

/// An option of `Command::BeginWith`. New options go last (bincode numbers variants).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BeginOption {
    /// End the transaction this long after its begin (by the proposing leader's clock),
    /// however its lease is renewed.
    MaxDurationMs(u64),
}

/// The `Acquire` fields of a one-shot `BeginAcquire` (the transaction is the new one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcquireRequest {
    pub request_id: String,
    pub lock: LockKey,
    pub mode: LockMode,
    pub wait_ms: u64,
    pub victim_policy: VictimPolicy,
}

/// Where an acquire request stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcquireStatus {
    Granted {
        token: FencingToken,
        mode: LockMode,
    },
    /// Waiting; `position` 1 is next in line, `blockers` are the wait-for edges.
    Queued {
        position: u32,
        blockers: Vec<TxnId>,
    },
    Ended(WaitEnd),
    /// An all-or-nothing request was granted: one grant per lock, in the order asked.
    GrantedAll {
        grants: Vec<Grant>,
    },
}

/// Why a command was refused. Refusals change nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rejection {
    /// No such transaction (never existed or forgotten after the retention window).
    NotFound(TxnId),
    /// The transaction already ended (`cause` says how; `reason` in words).
    NotActive { txn: TxnId, state: TxnState, cause: Option<EndCause>, reason: String },
    /// A transaction waits for one lock at a time.
    AlreadyWaiting { txn: TxnId, lock: LockKey, request_id: String },
    /// The request id was used before for a different request of this transaction.
    RequestIdReused(String),
    /// A batch inside a batch (the proposer never builds one).
    NestedBatch,
    /// A request the API checks at the edge, refused again here so a log entry can never
    /// put the table in a state it has no rule for (new variants go last).
    Invalid(String),
    /// A `Scoped` command's transaction is not inside the admin key's prefixes (any more).
    OutsideScope { txn: TxnId, key: String, prefixes: Vec<String> },
    /// A slot claim by a transaction that does not hold the lock EXCLUSIVE.
    NotHeldExclusive { txn: TxnId, lock: LockKey },
    /// A cluster API key of this name exists (made by another request).
    ApiKeyExists(String),
    /// No cluster API key of this name.
    ApiKeyNotFound(String),
    /// Admin key `by`, limited to `prefixes`, may not manage key `key` (its namespaces are
    /// not all inside them, or it has every namespace).
    ApiKeyOutsideScope { key: String, by: String, prefixes: Vec<String> },
    /// `lock` is in use as a semaphore of `declared` permits, and the request asked for it
    /// with another count (`asked`), or as a lock (`asked` 0).
    SemaphoreMismatch { lock: LockKey, declared: u32, asked: u32 },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::NotFound(txn) => write!(f, "transaction {txn} not found (unknown, or finished and forgotten)"),
            Rejection::NotActive { txn, state, reason, .. } => write!(f, "transaction {txn} is {state} ({reason})"),
            Rejection::AlreadyWaiting { txn, lock, request_id } => write!(
                f,
                "transaction {txn} already waits for {lock} (request {request_id}); a transaction waits for one lock at a time"
            ),
            Rejection::RequestIdReused(id) => write!(
                f,
                "request_id {id:?} was already used for a different request of this transaction; use a fresh id"
            ),
            Rejection::NestedBatch => f.write_str("a batch of commands cannot contain another batch"),
            Rejection::Invalid(why) => f.write_str(why),
            Rejection::NotHeldExclusive { txn, lock } => write!(
                f,
                "transaction {txn} does not hold {lock} EXCLUSIVE; a schedule slot is claimed while holding its lock"
            ),
            Rejection::ApiKeyExists(name) => write!(f, "an API key named {name:?} already exists in the cluster"),
            Rejection::ApiKeyNotFound(name) => write!(f, "the cluster has no API key named {name:?}"),
            Rejection::ApiKeyOutsideScope { key, by, prefixes } => write!(
                f,
                "admin key {by:?} is limited to namespace prefixes {prefixes:?}; API key {key:?} reaches beyond them \
                 (a key of every namespace, or one with a namespace outside them)"
            ),
            Rejection::SemaphoreMismatch { lock, declared, asked: 0 } => write!(
                f,
                "{lock} is a semaphore with {declared} permits; ask for it with mode SEMAPHORE and permits {declared}, or use another key"
            ),
            Rejection::SemaphoreMismatch { lock, declared, asked } => write!(
                f,
                "{lock} is a semaphore with {declared} permits; this request declares {asked}: every request must declare the same count"
            ),
            Rejection::OutsideScope { txn, key, prefixes } => write!(
                f,
                "transaction {txn} was begun with another API key and is not inside the prefixes {prefixes:?} of admin key {key:?} (it must hold, wait for or have asked for only namespaces there)"
            ),
        }
    }
}

impl std::error::Error for Rejection {}

/// The answer of applying one command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Raft's own entries (blank, membership) answer nothing.
    None,
    Begun {
        txn: TxnId,
        lease_ms: u64,
    },
    Acquire(AcquireStatus),
    Released {
        released: bool,
    },
    Ended {
        state: TxnState,
        released: u32,
    },
    Rejected(Rejection),
    /// A one-shot `BeginAcquire`: the transaction and the acquire's outcome
    /// (`Acquire` or `Rejected`).
    BegunAcquire {
        txn: TxnId,
        lease_ms: u64,
        acquire: Box<Outcome>,
    },
    /// One outcome per command of a `Command::Batch`, in order.
    Batch(Vec<Outcome>),
    /// A downgrade: the hold after it (SHARED_READ, same token), or None when the
    /// transaction did not hold the lock.
    Downgraded {
        held: Option<Held>,
    },
    /// A lock-delay rule was set: the delay its prefix had before (0 = none).
    LockDelaySet {
        previous_ms: u64,
    },
    /// How many of the keys of an `EndLockDelay` were released from their delay.
    LockDelaysEnded {
        ended: u32,
    },
    /// The answer to a `ClaimSlot`.
    SlotClaimed(SlotClaim),
    /// A `FinishSlot`: the run's record after it.
    SlotFinished(SlotRun),
    /// A `SetFeatureLevel`: the cluster's level after it.
    FeatureLevelSet {
        level: u32,
    },
    /// A cluster API key was created (`retried`: by a retry of the same request, which
    /// replaced its hash).
    ApiKeyCreated {
        retried: bool,
    },
    ApiKeyRevoked,
    /// Rotated; the old secret works until then (the log's clock; 0 = not at all).
    ApiKeyRotated {
        previous_until_ms: u64,
    },
    /// How many keys of an `ExpireApiKeys` expired.
    ApiKeysExpired {
        expired: u32,
    },
}

//! The replicated lock table: a plain, deterministic data structure.
//!
//! `apply(LogCommand) -> Outcome` is the only way to change it. Raft feeds it committed
//! entries in log order on every replica; same log, same table, same tokens, same
//! deadlock victims. It never reads a clock or a random source. Side effects the node must
//! act on (wake a waiting stream, start or stop a timer) are collected as [`Effect`]s.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use super::command::{AcquireRequest, AcquireStatus, Begin, Command, LogCommand, Outcome, Rejection};
use super::deadlock::{choose_victim, find_cycle, Candidate};
use super::events::{CycleMember, EventDetail, EventLog};
use super::feature_level::FeatureLevels;
use super::owners::ActiveByOwner;
use super::queue::{KeyLock, Slot, Waiter, NORMAL_CLASS, UPGRADE_CLASS};
use super::requests::{AcquireRecord, AllRecord, RequestLog, RequestRecord};
use super::types::{EndCause, FencingToken, Held, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};
use super::vec_map::VecMap;

mod all;
mod api_keys;
mod bounds;
mod lock_delay;
mod sections;
mod semaphores;
mod slots;

pub use super::api_key::{
    invalid_new_key, ApiKey, ApiKeyChange, KeyActor, KeyLimits, NewApiKey, MAX_KEY_NAME, MAX_KEY_PREFIXES,
};
pub use super::schedule::{
    invalid_slot_period, RunResult, RunState, SlotClaim, SlotRun, MAX_SLOT_PERIOD_MS, MIN_SLOT_PERIOD_MS,
    SLOT_KEEP_MIN_MS, SLOT_KEEP_PERIODS,
};
pub use lock_delay::{invalid_lock_delay, KeyDelay, MAX_LOCK_DELAY_MS, MAX_LOCK_DELAY_RULES};
pub use semaphores::MAX_PERMITS;

/// Finished transactions are remembered this long (by the leaders' clocks carried in the
/// log) so late status queries and retries get true answers.
pub const FINISHED_RETENTION_MS: u64 = 10 * 60 * 1000;
/// ... and at most this many, so a burst of short transactions cannot grow memory unboundedly.
pub const MAX_FINISHED: usize = 100_000;

/// The one pending acquire of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub lock: LockKey,
    pub request_id: String,
    pub slot: Slot,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Txn {
    pub id: TxnId,
    pub name: String,
    pub priority: i32,
    /// Name of the API key that began it ("" when the server runs without keys).
    pub owner: String,
    pub lease_ms: u64,
    pub begun_at_ms: u64,
    pub state: TxnState,
    pub end_cause: Option<EndCause>,
    pub end_reason: String,
    pub ended_at_ms: u64,
    pub held: VecMap<LockKey, Held>,
    pub waiting: Option<Pending>,
    /// Bounded: the oldest settled records are forgotten (see `requests`).
    pub requests: RequestLog,
    pub begin_request_id: Option<String>,
    /// The request id and answer of the call that ended it.
    pub end_request: Option<(String, u32)>,
}

impl Txn {
    /// Namespaces it holds, waits for or has asked for (its request records), so the set
    /// does not shrink when it ends and releases everything. Complete only while
    /// [`Txn::history_complete`]: old settled records may have been forgotten.
    pub fn namespaces(&self) -> BTreeSet<&str> {
        let held = self.held.iter().map(|(l, _)| l);
        let waiting = self.waiting.iter().map(|p| &p.lock);
        let asked = self.requests.iter().flat_map(|(_, r)| r.locks());
        held.chain(waiting).chain(asked).map(|l| l.namespace.as_str()).collect()
    }

    /// Whether every request it made is still remembered (see `requests`).
    pub fn history_complete(&self) -> bool {
        !self.requests.forgot_any()
    }

    /// Whether it is inside namespace `prefixes`: every namespace it holds, waits for or
    /// has asked for starts with one of them, and there is at least one. One whose oldest
    /// requests were forgotten may have asked for namespaces outside: it is not known to be.
    pub fn inside(&self, prefixes: &[String]) -> bool {
        let touched = self.namespaces();
        self.history_complete()
            && !touched.is_empty()
            && touched.iter().all(|ns| prefixes.iter().any(|p| ns.starts_with(p.as_str())))
    }
}

/// Something the node must act on after an apply. Not part of the replicated state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A transaction began: start tracking its lease.
    TxnBegun { txn: TxnId, lease_ms: u64 },
    /// A bounded transaction must end at `deadline_ms` (ms since the epoch).
    DeadlineSet { txn: TxnId, deadline_ms: u64 },
    /// A revoked holder's key grants nothing until `until_ms` (ms since the epoch): the
    /// leader proposes the end then.
    LockDelayed { key: LockKey, until_ms: u64 },
    /// A transaction ended: stop its timers, wake its streams.
    TxnFinished { txn: TxnId, cause: EndCause },
    /// A request started waiting: start its acquire timer. `lock` is the (first) key it
    /// waits for.
    WaitStarted { txn: TxnId, request_id: String, wait_ms: u64, lock: LockKey },
    /// A wait ended; `granted` tells a grant from a timeout or an abort.
    WaitEnded { txn: TxnId, request_id: String, granted: bool },
    /// A lock was granted, for the request `request_id`.
    Granted { txn: TxnId, request_id: String, lock: LockKey },
    /// The holders of this key changed (a grant, a release, an end, a downgrade): its
    /// watchers read it again.
    KeyChanged { key: LockKey },
    /// The outcome of this transaction's pending acquire changed (granted or ended), or
    /// the transaction itself did: its streams read the table at once.
    TxnChanged { txn: TxnId },
    /// Requests ahead of this transaction's wait left its queue: its position (and its
    /// blockers) may differ. Streams coalesce these (one read per interval), since every
    /// grant on a busy key moves every waiter behind it.
    QueueMoved { txn: TxnId },
    /// A deadlock was broken; `lock` is the key its victim was waiting for.
    DeadlockResolved { lock: LockKey },
    /// New events were appended to the event log.
    EventsAppended,
    /// A holder let go of `lock` after `held_ms` of the log's clock: released by its client
    /// (`ended_by: None`) or because its transaction ended (with that cause; a revocation
    /// when the cause `revokes`).
    Released { txn: TxnId, lock: LockKey, held_ms: u64, ended_by: Option<EndCause> },
    /// The cluster's API keys changed: every node's key ring takes them over.
    ApiKeysChanged,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockTable {
    next_txn: TxnId,
    last_token: u64,
    /// Orders queue slots and request records by age; table-wide so it is deterministic
    /// and never repeats.
    next_ticket: u64,
    /// Highest leader clock seen in the log; only ever moves forward.
    clock_ms: u64,
    /// Transactions and keys sit behind `Arc`s, changed through `Arc::make_mut`: a snapshot
    /// clones the table under the state's read lock in a few milliseconds (pointers, not
    /// records) and encodes the copy after the lock is released, while applies go on; a
    /// record is copied only when it changes during that encoding. Encoding under the lock
    /// stalled every apply for the whole encoding: 85–260 ms with 100,000 remembered
    /// transactions (figures in docs/bench.md). Serde encodes an `Arc` as its contents, so
    /// snapshot files keep their format.
    txns: BTreeMap<TxnId, Arc<Txn>>,
    keys: BTreeMap<LockKey, Arc<KeyLock>>,
    /// Begin request ids of the remembered transactions (up to `MAX_FINISHED` finished
    /// ones plus the active): looked up on every begin, so hashed rather than searched
    /// through a tree of strings (figures in docs/bench.md). Only ever looked up, never
    /// iterated, so its order (which may differ between replicas and in snapshots) decides
    /// nothing; a snapshot encodes it as a map either way.
    /// Shared strings, so a snapshot's clone copies no text (see `txns`).
    begin_requests: HashMap<Arc<str>, TxnId>,
    /// Finished transactions in the order they ended, for retention.
    finished: VecDeque<TxnId>,
    events: EventLog,
    /// Per webhook: the last event sequence it acknowledged.
    webhook_cursors: BTreeMap<String, u64>,
    /// Deadlines of bounded active transactions (see `bounds`): in snapshot files as a
    /// section of their own, not in the serde form, so older snapshots keep decoding.
    #[serde(skip)]
    deadlines: BTreeMap<TxnId, u64>,
    /// Lock-delay rules and the keys under a delay (see `lock_delay`); in snapshot files as
    /// sections, like `deadlines`.
    #[serde(skip)]
    lock_delays: lock_delay::LockDelays,
    /// The last run of each key claimed per schedule slot (see `slots`); in snapshot files
    /// as a section, like `deadlines`.
    #[serde(skip)]
    slot_runs: slots::SlotRuns,
    /// The cluster's feature level and the highest level used (see `feature_level`); in
    /// snapshot files as a section, written only above level 1.
    #[serde(skip)]
    features: FeatureLevels,
    /// The cluster's API keys (see `api_keys`); in snapshot files as a section, like
    /// `deadlines`.
    #[serde(skip)]
    api_keys: api_keys::ApiKeys,
    /// Derived from `txns`, for the leader's per-key limit; not part of snapshots.
    #[serde(skip)]
    active_by_owner: ActiveByOwner,
    #[serde(skip)]
    effects: Vec<Effect>,
}

impl LockTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one committed entry (a command or a batch of them). Refusals change
    /// nothing.
    pub fn apply(&mut self, entry: &LogCommand) -> Outcome {
        self.clock_ms = self.clock_ms.max(entry.now_ms);
        // Every entry counts, refused or not: it is in the log, where a node of a lower
        // level could not read it.
        self.features.note(&entry.cmd);
        let outcome = match &entry.cmd {
            Command::Batch(cmds) => Outcome::Batch(cmds.iter().map(|cmd| self.apply_command(cmd)).collect()),
            cmd => self.apply_command(cmd),
        };
        self.forget_old_transactions();
        self.forget_old_slot_runs();
        outcome
    }

    fn apply_command(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::Begin { request_id, lease_ms, priority, name, owner } => {
                let (txn, lease_ms) = self.begin(request_id.clone(), *lease_ms, *priority, name, owner);
                Outcome::Begun { txn, lease_ms }
            }
            Command::Acquire { txn, request_id, lock, mode, wait_ms, victim_policy } => {
                self.acquire(*txn, request_id, lock, (*mode, 0), *wait_ms, *victim_policy)
            }
            Command::AcquirePermit { txn, request_id, lock, permits, wait_ms, victim_policy } => {
                self.acquire(*txn, request_id, lock, (LockMode::Semaphore, *permits), *wait_ms, *victim_policy)
            }
            Command::CancelWait { txn, request_id } => self.cancel_wait(*txn, request_id),
            Command::Release { txn, request_id, lock } => self.release(*txn, request_id.as_deref(), lock),
            Command::End { txn, request_id, commit } => {
                let (cause, reason) = if *commit {
                    (EndCause::Committed, "committed".to_string())
                } else {
                    (EndCause::ClientAbort, "aborted by the client".to_string())
                };
                self.end(*txn, request_id.as_deref(), cause, reason, None)
            }
            Command::Abort { txn, request_id, operator, reason } => {
                let why = format!("aborted by operator {operator:?}: {reason}");
                self.end(*txn, request_id.as_deref(), EndCause::OperatorAbort, why, Some((operator, reason)))
            }
            Command::Expire { txn } => self.expire(*txn),
            Command::WebhookDelivered { webhook, sequence } => {
                let cursor = self.webhook_cursors.entry(webhook.clone()).or_default();
                *cursor = (*cursor).max(*sequence);
                Outcome::None
            }
            Command::BeginAcquire { begin, acquire } => {
                let (txn, lease_ms) =
                    self.begin(begin.request_id.clone(), begin.lease_ms, begin.priority, &begin.name, &begin.owner);
                let outcome = self.first_acquire(txn, begin, acquire);
                Outcome::BegunAcquire { txn, lease_ms, acquire: Box::new(outcome) }
            }
            Command::AcquireAll { txn, request_id, locks, wait_ms, victim_policy } => {
                self.acquire_all(*txn, request_id, locks, *wait_ms, *victim_policy)
            }
            Command::Downgrade { txn, request_id, lock } => self.downgrade(*txn, request_id.as_deref(), lock),
            Command::BeginWith { begin, options, acquire } => {
                let (txn, lease_ms) = self.begin_with(begin, options);
                match acquire {
                    None => Outcome::Begun { txn, lease_ms },
                    Some(a) => {
                        let acquire = self.first_acquire(txn, begin, a);
                        Outcome::BegunAcquire { txn, lease_ms, acquire: Box::new(acquire) }
                    }
                }
            }
            Command::EndOverdue { txn } => self.end_overdue(*txn),
            Command::SetLockDelay { prefix, delay_ms } => self.set_lock_delay(prefix, *delay_ms),
            Command::EndLockDelay { keys } => self.end_lock_delays(keys),
            Command::Batch(_) => Outcome::Rejected(Rejection::NestedBatch),
            Command::Scoped { key, prefixes, cmd } => self.scoped(key, prefixes, cmd),
            Command::ClaimSlot { txn, request_id, lock, period_ms, retry_failed } => {
                self.claim_slot(*txn, request_id, lock, *period_ms, *retry_failed)
            }
            Command::FinishSlot { txn, request_id, lock, slot, result } => {
                self.finish_slot(*txn, request_id, lock, *slot, *result)
            }
            Command::SetFeatureLevel { level } => match self.features.set(*level) {
                Ok(()) => Outcome::FeatureLevelSet { level: *level },
                Err(r) => Outcome::Rejected(r),
            },
            Command::CreateApiKey { by, request_id, key } => self.create_api_key(by, request_id, key),
            Command::RevokeApiKey { by, name } => self.revoke_api_key(by, name),
            Command::RotateApiKey { by, name, sha256, grace_ms } => self.rotate_api_key(by, name, *sha256, *grace_ms),
            Command::ExpireApiKeys { names } => self.expire_api_keys(names),
        }
    }

    /// A limited admin key's `End` or `Abort` of a transaction (see `Command::Scoped`),
    /// checked against the state it is applied to.
    fn scoped(&mut self, key: &str, prefixes: &[String], cmd: &Command) -> Outcome {
        let txn = match cmd {
            Command::End { txn, .. } | Command::Abort { txn, .. } => *txn,
            other => return Outcome::Rejected(Rejection::Invalid(format!("{other:?} cannot be scoped"))),
        };
        match self.txn(txn) {
            Some(t) if t.owner != key && !t.inside(prefixes) => {
                Outcome::Rejected(Rejection::OutsideScope { txn, key: key.to_string(), prefixes: prefixes.to_vec() })
            }
            // Unknown transactions get the command's own answer.
            _ => self.apply_command(cmd),
        }
    }

    /// The acquire of a one-shot start, in the transaction its begin found or started.
    fn first_acquire(&mut self, txn: TxnId, begin: &Begin, a: &AcquireRequest) -> Outcome {
        // A begin request id that found someone else's transaction must not take a lock
        // for it (a plain Begin only tells the id, and the API refuses that).
        if self.txns[&txn].owner != begin.owner {
            return Outcome::Rejected(Rejection::RequestIdReused(begin.request_id.clone().unwrap_or_default()));
        }
        self.acquire(txn, &a.request_id, &a.lock, (a.mode, 0), a.wait_ms, a.victim_policy)
    }

    /// Takes the effects collected since the last call.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    pub fn txn(&self, id: TxnId) -> Option<&Txn> {
        self.txns.get(&id).map(Arc::as_ref)
    }

    pub fn active_txns(&self) -> impl Iterator<Item = &Txn> {
        self.txns.values().map(Arc::as_ref).filter(|t| t.state == TxnState::Active)
    }

    /// How many active transactions `owner` (an API key's name) has.
    pub fn active_txns_of(&self, owner: &str) -> usize {
        self.active_by_owner.count(owner, || self.active_txns().map(|t| t.owner.as_str()))
    }

    /// Whether a Begin with this request id was applied (and is still remembered).
    pub fn knows_begin(&self, request_id: &str) -> bool {
        self.begin_requests.contains_key(request_id)
    }

    /// The cluster's feature level and the highest level used, as of the last entry applied.
    pub fn feature_levels(&self) -> FeatureLevels {
        self.features
    }

    /// The transaction a Begin with this request id started, while it is remembered.
    pub fn begun_by(&self, request_id: &str) -> Option<&Txn> {
        self.begin_requests.get(request_id).and_then(|id| self.txn(*id))
    }

    /// Makes every later fencing token larger than `floor` (a cluster restored from a
    /// backup must not repeat tokens the old cluster issued after the backup).
    pub fn raise_token_floor(&mut self, floor: u64) {
        self.last_token = self.last_token.max(floor);
    }

    /// The log's clock: the highest leader clock applied so far (ms since the epoch).
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// The last fencing token issued (0 before the first grant).
    pub fn last_token(&self) -> u64 {
        self.last_token
    }

    pub fn key(&self, lock: &LockKey) -> Option<&KeyLock> {
        self.keys.get(lock).map(Arc::as_ref)
    }

    /// Every lock that is held or waited for, in (namespace, key) order.
    pub fn keys(&self) -> impl Iterator<Item = (&LockKey, &KeyLock)> {
        self.keys.iter().map(|(l, k)| (l, k.as_ref()))
    }

    pub fn events(&self) -> &EventLog {
        &self.events
    }

    pub fn webhook_cursor(&self, webhook: &str) -> u64 {
        self.webhook_cursors.get(webhook).copied().unwrap_or(0)
    }

    /// Where acquire `request_id` of `txn` stands now, or why it cannot be answered.
    pub fn acquire_status(&self, txn: TxnId, request_id: &str) -> Result<Option<AcquireStatus>, Rejection> {
        let t = self.txns.get(&txn).ok_or(Rejection::NotFound(txn))?;
        match t.requests.get(request_id) {
            Some(RequestRecord::Acquire { status, .. }) => Ok(Some(self.status_of(t, status))),
            Some(RequestRecord::AcquireAll { status, .. }) => Ok(Some(self.status_of_all(txn, status))),
            _ => Ok(None),
        }
    }

    /// The recorded answer to acquire `request_id` if it was seen before for this very
    /// lock and mode (a re-attach); a different request under that id is refused, and so
    /// is a re-attach after the transaction ended (unless its end is what ended the wait).
    pub fn recorded_acquire(
        &self,
        txn: TxnId,
        request_id: &str,
        lock: &LockKey,
        mode: LockMode,
    ) -> Result<Option<AcquireStatus>, Rejection> {
        let t = self.txns.get(&txn).ok_or(Rejection::NotFound(txn))?;
        match t.requests.get(request_id) {
            None => Ok(None),
            // A wait the transaction's end cut short says how it ended (deadlock victim,
            // expiry, ...). Any other answer is stale once the transaction ended: an old
            // grant would tell the client it still holds a lock that was released.
            Some(RequestRecord::Acquire {
                status: AcquireRecord::Ended(end @ WaitEnd::TxnEnded { .. }),
                lock: l,
                mode: m,
            }) if l == lock && *m == mode => Ok(Some(AcquireStatus::Ended(end.clone()))),
            Some(RequestRecord::Acquire { lock: l, mode: m, .. })
                if l == lock && *m == mode && t.state != TxnState::Active =>
            {
                Err(Rejection::NotActive { txn, state: t.state, cause: t.end_cause, reason: t.end_reason.clone() })
            }
            Some(RequestRecord::Acquire { lock: l, mode: m, status }) if l == lock && *m == mode => {
                Ok(Some(self.status_of(t, status)))
            }
            Some(_) => Err(Rejection::RequestIdReused(request_id.to_string())),
        }
    }

    /// Whether an acquire of `lock` in `mode` by `txn` would be granted at once (a covering
    /// grant it holds, an upgrade as the sole holder, or no conflicting holder and nobody
    /// queued): what a try-lock (`wait_ms` 0) answers. A read of the table as it stands; the
    /// apply of the acquire decides.
    pub fn grantable_now(&self, txn: TxnId, lock: &LockKey, mode: LockMode) -> bool {
        let held = self.txns.get(&txn).and_then(|t| t.held.get(lock));
        if held.is_some_and(|h| h.mode.covers(mode)) {
            return true;
        }
        if self.is_delayed(lock) {
            return false;
        }
        let Some(key) = self.keys.get(lock) else { return true };
        match held {
            Some(_) => key.compatible_with_holders(txn, mode),
            None => key.can_grant_now(txn, mode),
        }
    }

    /// The pending wait of `txn`: its request id and acquire timeout.
    pub fn pending_wait(&self, txn: TxnId) -> Option<(String, u64)> {
        let p = self.txns.get(&txn)?.waiting.as_ref()?;
        let waiter = self.keys.get(&p.lock)?.queue.get(&p.slot)?;
        Some((p.request_id.clone(), waiter.wait_ms))
    }

    /// The pending wait of `txn` with its mode, position (1 = next) and direct blockers.
    /// For a request of several keys: the mode on its first key still needed, its furthest
    /// position, and its blockers on every key.
    pub fn wait_view(&self, txn: TxnId) -> Option<(&Pending, LockMode, u32, Vec<TxnId>)> {
        let p = self.txns.get(&txn)?.waiting.as_ref()?;
        let mode = self.keys.get(&p.lock)?.queue.get(&p.slot)?.mode;
        let mut position = 0;
        for (lock, slot) in self.pending_slots(txn) {
            position = position.max(self.keys.get(&lock).map_or(0, |k| k.position(slot)));
        }
        Some((p, mode, position, self.waits_for(txn)))
    }

    fn status_of(&self, t: &Txn, record: &AcquireRecord) -> AcquireStatus {
        match record {
            AcquireRecord::Granted { token, mode } => AcquireStatus::Granted { token: *token, mode: *mode },
            AcquireRecord::Ended(end) => AcquireStatus::Ended(end.clone()),
            AcquireRecord::Waiting => match self.wait_view(t.id) {
                Some((_, _, position, blockers)) => AcquireStatus::Queued { position, blockers },
                None => AcquireStatus::Queued { position: 0, blockers: Vec::new() },
            },
        }
    }

    fn active(&self, txn: TxnId) -> Result<&Txn, Rejection> {
        let t = self.txns.get(&txn).ok_or(Rejection::NotFound(txn))?;
        if t.state != TxnState::Active {
            return Err(Rejection::NotActive { txn, state: t.state, cause: t.end_cause, reason: t.end_reason.clone() });
        }
        Ok(t)
    }

    /// Starts a transaction (or finds the one this request id started) and returns its
    /// id and lease.
    fn begin(
        &mut self,
        request_id: Option<String>,
        lease_ms: u64,
        priority: i32,
        name: &str,
        owner: &str,
    ) -> (TxnId, u64) {
        if let Some(id) = request_id.as_deref().and_then(|r| self.begin_requests.get(r)) {
            return (*id, self.txns[id].lease_ms);
        }
        self.next_txn += 1;
        let id = self.next_txn;
        if let Some(r) = &request_id {
            self.begin_requests.insert(r.as_str().into(), id);
        }
        self.txns.insert(
            id,
            Arc::new(Txn {
                id,
                name: name.to_string(),
                priority,
                owner: owner.to_string(),
                lease_ms,
                begun_at_ms: self.clock_ms,
                state: TxnState::Active,
                end_cause: None,
                end_reason: String::new(),
                ended_at_ms: 0,
                held: VecMap::new(),
                waiting: None,
                requests: RequestLog::default(),
                begin_request_id: request_id,
                end_request: None,
            }),
        );
        self.active_by_owner.add(owner);
        self.effects.push(Effect::TxnBegun { txn: id, lease_ms });
        (id, lease_ms)
    }

    /// Asks for `lock` in `mode`; `permits` is the semaphore's count for a SEMAPHORE request
    /// (0 otherwise).
    fn acquire(
        &mut self,
        txn: TxnId,
        request_id: &str,
        lock: &LockKey,
        (mode, permits): (LockMode, u32),
        wait_ms: u64,
        policy: VictimPolicy,
    ) -> Outcome {
        // A retry of a request we already saw answers from the record, even if the
        // transaction has ended since (the record says how the wait ended).
        match self.recorded_acquire(txn, request_id, lock, mode) {
            Ok(Some(status)) => return Outcome::Acquire(status),
            Err(r @ Rejection::RequestIdReused(_)) => return Outcome::Rejected(r),
            _ => {}
        }
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        if let Some(p) = &t.waiting {
            return Outcome::Rejected(Rejection::AlreadyWaiting {
                txn,
                lock: p.lock.clone(),
                request_id: p.request_id.clone(),
            });
        }
        if let Err(r) = self.check_key_kind(lock, mode, permits) {
            return Outcome::Rejected(r);
        }
        let t = &self.txns[&txn];
        let already = t.held.get(lock).copied();
        // A key under a lock-delay grants nothing new (a covering hold still answers).
        let open = !self.is_delayed(lock);
        let key = self.key_entry(lock);
        if key.is_idle() {
            // The request that finds the key idle declares what it is: a lock, or a
            // semaphore of `permits` (`check_key_kind` passed; see `semaphores`).
            key.permits = if mode == LockMode::Semaphore { permits } else { 0 };
        }
        let record = match already {
            // Re-entrant: the existing grant already covers the request.
            Some(held) if held.mode.covers(mode) => AcquireRecord::Granted { token: held.token, mode: held.mode },
            // Upgrade SHARED_READ -> EXCLUSIVE: immediate only as the sole holder.
            Some(_) if open && key.compatible_with_holders(txn, mode) => self.grant(txn, request_id, lock, mode),
            None if open && key.can_grant_now(txn, mode) => self.grant(txn, request_id, lock, mode),
            // A try-lock (no wait allowed) never queues: nobody behind it moves, no deadlock
            // search, and the transaction stays active.
            _ if wait_ms == 0 => AcquireRecord::Ended(WaitEnd::TimedOut),
            Some(_) => self.wait(txn, request_id, lock, mode, UPGRADE_CLASS, wait_ms),
            None => self.wait(txn, request_id, lock, mode, NORMAL_CLASS, wait_ms),
        };
        let waiting = record == AcquireRecord::Waiting;
        if matches!(record, AcquireRecord::Ended(_)) && self.keys.get(lock).is_some_and(|k| k.is_idle()) {
            // A refused try-lock on a free key (a lock-delay) leaves nothing behind.
            self.keys.remove(lock);
        }
        self.remember(txn, request_id, RequestRecord::Acquire { lock: lock.clone(), mode, status: record });
        if waiting {
            self.break_deadlock(txn, policy);
        }
        match self.acquire_status(txn, request_id) {
            Ok(Some(status)) => Outcome::Acquire(status),
            _ => unreachable!("the request was just recorded"),
        }
    }

    /// Issues the next fencing token and makes `txn` a holder of `lock` in `mode`, for its
    /// request `request_id`.
    fn grant(&mut self, txn: TxnId, request_id: &str, lock: &LockKey, mode: LockMode) -> AcquireRecord {
        self.last_token += 1;
        let held = Held { mode, token: FencingToken(self.last_token), since_ms: self.clock_ms };
        self.key_entry(lock).holders.insert(txn, held);
        self.txn_mut(txn).held.insert(lock.clone(), held);
        self.effects.push(Effect::Granted { txn, request_id: request_id.to_string(), lock: lock.clone() });
        self.effects.push(Effect::KeyChanged { key: lock.clone() });
        AcquireRecord::Granted { token: held.token, mode }
    }

    fn wait(
        &mut self,
        txn: TxnId,
        request_id: &str,
        lock: &LockKey,
        mode: LockMode,
        class: u8,
        wait_ms: u64,
    ) -> AcquireRecord {
        self.next_ticket += 1;
        let slot = (class, self.next_ticket);
        let waiter = Waiter { txn, mode, request_id: request_id.to_string(), wait_ms, since_ms: self.clock_ms };
        self.key_entry(lock).queue.insert(slot, waiter);
        if class == UPGRADE_CLASS {
            // Queued ahead of others: their positions moved.
            self.notify_waiters(lock);
        }
        self.txn_mut(txn).waiting = Some(Pending { lock: lock.clone(), request_id: request_id.to_string(), slot });
        self.effects.push(Effect::WaitStarted { txn, request_id: request_id.to_string(), wait_ms, lock: lock.clone() });
        AcquireRecord::Waiting
    }

    /// Direct wait-for edges of `txn` (empty when it does not wait): on every key its
    /// request waits for. On the deadlock search's path for every node it visits, so it
    /// must not compute a queue position (linear in the queue).
    fn waits_for(&self, txn: TxnId) -> Vec<TxnId> {
        let Some(p) = self.txns.get(&txn).and_then(|t| t.waiting.as_ref()) else {
            return Vec::new();
        };
        let mut out = self.keys.get(&p.lock).map(|k| k.blockers(p.slot)).unwrap_or_default();
        for (lock, slot) in self.pending_slots(txn).into_iter().skip(1) {
            for b in self.keys.get(&lock).map(|k| k.blockers(slot)).unwrap_or_default() {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
        }
        out
    }

    /// Whether anyone could be waiting for `txn`: a cycle through it needs an edge into
    /// it, and edges point at holders (from waiters of keys it holds) or at earlier
    /// waiters (only waiters behind an upgrade, which also sit on a key it holds). Most
    /// new waiters hold nothing anyone waits for, so this skips the search in O(held).
    fn is_waited_for(&self, txn: TxnId) -> bool {
        self.txns[&txn]
            .held
            .keys()
            .any(|lock| self.keys.get(lock).is_some_and(|k| k.queue.values().any(|w| w.txn != txn)))
    }

    /// Called when `txn` starts waiting: if that closed cycles, abort victims now, in this
    /// same apply, so the others go on and every replica does the same. One new wait can
    /// close several cycles (a transaction waiting on a key that two others hold shared),
    /// and a victim chosen from one of them may leave another standing: search again until
    /// no cycle runs through `txn` (each round aborts one transaction, so this ends).
    fn break_deadlock(&mut self, txn: TxnId, policy: VictimPolicy) {
        while self.txns.get(&txn).is_some_and(|t| t.waiting.is_some()) && self.is_waited_for(txn) {
            let Some(cycle) = find_cycle(txn, |t| self.waits_for(t)) else {
                return;
            };
            // A cycle through a semaphore's wait may still have a way out (see `semaphores`).
            let cycle = match self.waits_for_a_permit(&cycle) {
                false => cycle,
                true => match self.deadlock_through(txn) {
                    Some(cycle) => cycle,
                    None => return,
                },
            };
            self.abort_victim(&cycle, policy);
        }
    }

    /// Aborts the member of `cycle` that `policy` picks, with the event saying why.
    fn abort_victim(&mut self, cycle: &[TxnId], policy: VictimPolicy) {
        let members: Vec<CycleMember> = cycle
            .iter()
            .map(|&id| {
                let t = &self.txns[&id];
                let p = t.waiting.as_ref().expect("cycle members wait");
                let mode = self.keys[&p.lock].queue[&p.slot].mode;
                CycleMember { txn: id, name: t.name.clone(), priority: t.priority, lock: p.lock.clone(), mode }
            })
            .collect();
        let candidates: Vec<Candidate> =
            members.iter().map(|m| Candidate { txn: m.txn, priority: m.priority }).collect();
        let victim = choose_victim(policy, &candidates);
        let victim_lock =
            members.iter().find(|m| m.txn == victim).map(|m| m.lock.clone()).expect("the victim is a member");
        let path = members.iter().map(|m| format!("{} waits for {}", m.txn, m.lock)).collect::<Vec<_>>().join(", ");
        let reason = format!("deadlock victim (policy {}): cycle {path}", policy.config_name());
        self.events.push(self.clock_ms, EventDetail::DeadlockResolved { cycle: members, victim, policy });
        self.effects.push(Effect::DeadlockResolved { lock: victim_lock });
        self.finish(victim, EndCause::DeadlockVictim, &reason);
    }

    fn cancel_wait(&mut self, txn: TxnId, request_id: &str) -> Outcome {
        let pending = self.txns.get(&txn).and_then(|t| t.waiting.clone());
        match pending {
            Some(p) if p.request_id == request_id => {
                for lock in self.end_wait(txn, WaitEnd::TimedOut) {
                    self.promote(&lock);
                }
                Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut))
            }
            // Already granted or ended: the timer lost the race, nothing to undo.
            _ => match self.acquire_status(txn, request_id) {
                Ok(Some(s)) => Outcome::Acquire(s),
                Ok(None) => Outcome::None,
                Err(r) => Outcome::Rejected(r),
            },
        }
    }

    fn release(&mut self, txn: TxnId, request_id: Option<&str>, lock: &LockKey) -> Outcome {
        if let (Some(t), Some(r)) = (self.txns.get(&txn), request_id) {
            match t.requests.get(r) {
                Some(RequestRecord::Release { lock: l, released }) if l == lock => {
                    return Outcome::Released { released: *released };
                }
                Some(_) => return Outcome::Rejected(Rejection::RequestIdReused(r.to_string())),
                None => {}
            }
        }
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        let holds = t.held.contains_key(lock);
        let waits = self.pending_slots(txn).iter().any(|(l, _)| l == lock);
        // Both can be true for a pending upgrade: releasing gives up the wait as well,
        // or the upgrade could be granted after the caller let go of the key. Releasing
        // one key of an all-or-nothing request withdraws the whole request.
        let mut left = Vec::new();
        if waits {
            left = self.end_wait(txn, WaitEnd::Cancelled);
        }
        if holds {
            self.lose_slot_runs(txn, Some(lock), "its lock was released");
            if let Some(h) = self.txn_mut(txn).held.remove(lock) {
                let held_ms = self.clock_ms.saturating_sub(h.since_ms);
                self.effects.push(Effect::Released { txn, lock: lock.clone(), held_ms, ended_by: None });
            }
            if let Some(k) = self.key_mut(lock) {
                k.holders.remove(&txn);
            }
            self.effects.push(Effect::KeyChanged { key: lock.clone() });
            // Wakes a `stay_open` acquire stream of this lock: it ends once the lock is gone.
            self.effects.push(Effect::TxnChanged { txn });
        }
        let released = holds || waits;
        if released {
            self.promote(lock);
        }
        for other in left.iter().filter(|l| *l != lock) {
            self.promote(other);
        }
        if let Some(r) = request_id {
            self.remember(txn, r, RequestRecord::Release { lock: lock.clone(), released });
        }
        Outcome::Released { released }
    }

    /// EXCLUSIVE -> SHARED_READ in place, same token; readers queued behind it may now be
    /// granted. A retry with the same request id answers from its record (the hold may have
    /// been upgraded again since).
    fn downgrade(&mut self, txn: TxnId, request_id: Option<&str>, lock: &LockKey) -> Outcome {
        if let (Some(t), Some(r)) = (self.txns.get(&txn), request_id) {
            match t.requests.get(r) {
                Some(RequestRecord::Downgrade { lock: l, held }) if l == lock => {
                    return Outcome::Downgraded { held: *held };
                }
                Some(_) => return Outcome::Rejected(Rejection::RequestIdReused(r.to_string())),
                None => {}
            }
        }
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        // Only an EXCLUSIVE hold changes; SHARED_READ and semaphore permits stay as they are.
        let held = t.held.get(lock).copied().map(|h| match h.mode {
            LockMode::Exclusive => Held { mode: LockMode::SharedRead, ..h },
            _ => h,
        });
        if let Some(h) = held {
            self.txn_mut(txn).held.insert(lock.clone(), h);
            if let Some(k) = self.key_mut(lock) {
                k.holders.insert(txn, h);
            }
            self.effects.push(Effect::KeyChanged { key: lock.clone() });
            self.promote(lock);
        }
        if let Some(r) = request_id {
            self.remember(txn, r, RequestRecord::Downgrade { lock: lock.clone(), held });
        }
        Outcome::Downgraded { held }
    }

    /// Ends a transaction by a client's EndTransaction or an operator's abort.
    fn end(
        &mut self,
        txn: TxnId,
        request_id: Option<&str>,
        cause: EndCause,
        reason: String,
        operator: Option<(&String, &String)>,
    ) -> Outcome {
        if let (Some(t), Some(r)) = (self.txns.get(&txn), request_id) {
            if let Some((er, released)) = &t.end_request {
                if er == r {
                    return Outcome::Ended { state: t.state, released: *released };
                }
            }
        }
        if let Err(r) = self.active(txn) {
            return Outcome::Rejected(r);
        }
        if let Some((operator, why)) = operator {
            // The cause goes into the log before its consequences (the revoked locks).
            let (name, released) = self.held_by(txn);
            let detail = EventDetail::TransactionAborted {
                txn,
                name,
                reason: why.clone(),
                operator: operator.clone(),
                released,
            };
            self.events.push(self.clock_ms, detail);
        }
        let released = self.finish(txn, cause, &reason);
        let count = released.len() as u32;
        if let Some(r) = request_id {
            self.txn_mut(txn).end_request = Some((r.to_string(), count));
        }
        Outcome::Ended { state: cause.state(), released: count }
    }

    fn expire(&mut self, txn: TxnId) -> Outcome {
        match self.active(txn) {
            Ok(_) => {
                let (name, released) = self.held_by(txn);
                self.events.push(self.clock_ms, EventDetail::TransactionExpired { txn, name, released });
                let count = self.finish(txn, EndCause::LeaseExpired, "lease expired").len() as u32;
                Outcome::Ended { state: TxnState::Expired, released: count }
            }
            // A race with a commit: the transaction already ended.
            Err(r) => Outcome::Rejected(r),
        }
    }

    /// A transaction's name and held locks, for events.
    fn held_by(&self, txn: TxnId) -> (String, Vec<(LockKey, Held)>) {
        let t = &self.txns[&txn];
        (t.name.clone(), t.held.iter().map(|(l, h)| (l.clone(), *h)).collect())
    }

    /// Ends a transaction: withdraws its wait, releases its locks, grants them onward.
    /// Returns what it released.
    fn finish(&mut self, txn: TxnId, cause: EndCause, reason: &str) -> Vec<(LockKey, Held)> {
        let state = cause.state();
        for lock in self.end_wait(txn, WaitEnd::TxnEnded { state, cause, reason: reason.to_string() }) {
            self.promote(&lock);
        }
        let clock = self.clock_ms;
        self.lose_slot_runs(txn, None, &format!("its transaction ended ({reason})"));
        self.deadlines.remove(&txn);
        self.active_by_owner.remove(&self.txns[&txn].owner);
        let t = self.txn_mut(txn);
        let held = std::mem::take(&mut t.held);
        t.state = state;
        t.end_cause = Some(cause);
        t.end_reason = reason.to_string();
        t.ended_at_ms = clock;
        let held: Vec<(LockKey, Held)> = held.into_iter().collect();
        self.delay_revoked_keys(txn, cause, &held);
        for (lock, h) in &held {
            if cause.revokes() {
                let cause = cause.describe().to_string();
                let detail = EventDetail::LockRevoked { txn, lock: lock.clone(), held: *h, cause };
                self.events.push(clock, detail);
            }
            if let Some(k) = self.key_mut(lock) {
                k.holders.remove(&txn);
            }
            let held_ms = clock.saturating_sub(h.since_ms);
            self.effects.push(Effect::Released { txn, lock: lock.clone(), held_ms, ended_by: Some(cause) });
            self.effects.push(Effect::KeyChanged { key: lock.clone() });
            self.promote(lock);
        }
        self.finished.push_back(txn);
        self.effects.push(Effect::TxnFinished { txn, cause });
        self.effects.push(Effect::TxnChanged { txn });
        if cause.revokes() {
            // Revoked locks were logged above (and the cause before them by the caller).
            self.effects.push(Effect::EventsAppended);
        }
        held
    }

    /// Takes `txn`'s pending request out of its queue (every queue, for a request of
    /// several keys) and records how its wait ended. Returns the keys it left: the caller
    /// promotes them.
    fn end_wait(&mut self, txn: TxnId, end: WaitEnd) -> Vec<LockKey> {
        let slots = self.pending_slots(txn);
        let t = self.txn_mut(txn);
        let Some(p) = t.waiting.take() else { return Vec::new() };
        match t.requests.get_mut(&p.request_id) {
            Some(RequestRecord::Acquire { status, .. }) => *status = AcquireRecord::Ended(end),
            Some(RequestRecord::AcquireAll { status, .. }) => *status = AllRecord::Ended(end),
            _ => {}
        }
        for (lock, slot) in &slots {
            if let Some(k) = self.key_mut(lock) {
                k.queue.remove(slot);
            }
        }
        self.effects.push(Effect::WaitEnded { txn, request_id: p.request_id, granted: false });
        self.effects.push(Effect::TxnChanged { txn });
        for (lock, _) in &slots {
            self.notify_waiters(lock);
        }
        slots.into_iter().map(|(l, _)| l).collect()
    }

    /// Grants `lock` to every waiter that may have it now, in queue order (see `queue`; a
    /// request of several keys only when it may have all of them), then drops the key if
    /// nothing holds or waits for it.
    ///
    /// One pass is enough: a granted waiter becomes a holder in the mode it waited in, and
    /// it was compatible with everyone ahead of it, so no waiter's chance changes by it.
    fn promote(&mut self, lock: &LockKey) {
        let candidates: Vec<(Slot, TxnId, String)> = match self.keys.get(lock) {
            Some(k) => k.grantable().into_iter().map(|(slot, w)| (slot, w.txn, w.request_id.clone())).collect(),
            None => Vec::new(),
        };
        let mut granted_any = false;
        for (slot, txn, request_id) in candidates {
            if !self.ready(txn, lock, slot) {
                continue;
            }
            granted_any = true;
            if self.is_all_request(txn, &request_id) {
                for other in self.grant_pending_all(txn).iter().filter(|l| *l != lock) {
                    self.notify_waiters(other);
                }
                continue;
            }
            let w = self.key_mut(lock).and_then(|k| k.queue.remove(&slot)).expect("a candidate is queued");
            let record = self.grant(txn, &request_id, lock, w.mode);
            let t = self.txn_mut(txn);
            t.waiting = None;
            if let Some(RequestRecord::Acquire { status, .. }) = t.requests.get_mut(&request_id) {
                *status = record;
            }
            self.effects.push(Effect::WaitEnded { txn, request_id, granted: true });
            self.effects.push(Effect::TxnChanged { txn });
        }
        if granted_any {
            self.notify_waiters(lock);
        }
        if self.keys.get(lock).is_some_and(|k| k.is_idle()) {
            self.keys.remove(lock);
        }
    }

    /// Whether `request_id` of `txn` is an all-or-nothing acquire.
    fn is_all_request(&self, txn: TxnId, request_id: &str) -> bool {
        matches!(self.txns[&txn].requests.get(request_id), Some(RequestRecord::AcquireAll { .. }))
    }

    /// Queue positions on `lock` may have changed: tell its waiters' streams.
    fn notify_waiters(&mut self, lock: &LockKey) {
        if let Some(k) = self.keys.get(lock) {
            let txns: Vec<TxnId> = k.queue.values().map(|w| w.txn).collect();
            self.effects.extend(txns.into_iter().map(|txn| Effect::QueueMoved { txn }));
        }
    }

    /// Records what request `request_id` of `txn` turned into, as its newest record.
    fn remember(&mut self, txn: TxnId, request_id: &str, record: RequestRecord) {
        self.next_ticket += 1;
        let seq = self.next_ticket;
        let t = self.txn_mut(txn);
        t.requests.insert(request_id.to_string(), seq, record, &t.held);
    }

    fn txn_mut(&mut self, txn: TxnId) -> &mut Txn {
        Arc::make_mut(self.txns.get_mut(&txn).expect("transaction checked by the caller"))
    }

    /// The key's record, to change (see `txns` on why through `make_mut`).
    fn key_mut(&mut self, lock: &LockKey) -> Option<&mut KeyLock> {
        self.keys.get_mut(lock).map(Arc::make_mut)
    }

    /// The key's record, created empty if the key has none.
    fn key_entry(&mut self, lock: &LockKey) -> &mut KeyLock {
        Arc::make_mut(self.keys.entry(lock.clone()).or_default())
    }

    /// Drops finished transactions past the retention window or over the cap. Uses only
    /// the log's clock, so every replica forgets the same ones at the same entry.
    fn forget_old_transactions(&mut self) {
        while let Some(&oldest) = self.finished.front() {
            let t = &self.txns[&oldest];
            let expired = t.ended_at_ms.saturating_add(FINISHED_RETENTION_MS) < self.clock_ms;
            if !expired && self.finished.len() <= MAX_FINISHED {
                break;
            }
            self.finished.pop_front();
            if let Some(t) = self.txns.remove(&oldest) {
                if let Some(r) = &t.begin_request_id {
                    self.begin_requests.remove(r.as_str());
                }
            }
        }
    }
}

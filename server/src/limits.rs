//! Limits on what clients can make a node hold, and the one place they are checked.
//!
//! A node-wide bound that one API key could fill alone has a per-key share (forwarded
//! calls here, the proposal queue in `raft::proposer`), so one key cannot refuse another:
//! see [`Tenant`].
//!
//! Every limit is checked by the leader before it proposes anything, so a refusal
//! (RESOURCE_EXHAUSTED, naming the limit and its flag) changes nothing. A check counts the
//! table as applied plus the requests admitted but not yet applied, under one lock, so
//! concurrent requests cannot all pass at the bound; an admission is given back once its
//! proposal has been applied (or has failed), not when the caller goes away. The proposal
//! queue's bound lives in `raft::proposer`; the bound on a transaction's request records
//! is a constant of the state machine (`locks::table`), since anything decided inside
//! apply must be the same on every replica whatever its flags.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use clap::Args;

use crate::locks::{LockKey, LockTable, TxnId};
use crate::raft::replicated::Replicated;
use crate::request::EngineError;
use crate::request::Principal;

/// `dls serve` flags of the limits (each also an environment variable).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct LimitArgs {
    /// Active transactions one API key may have at once (begins in flight count too). On a
    /// server without API keys every caller shares this one bound. ~1 KiB of leader memory
    /// per idle transaction.
    #[arg(long, env = "DLS_MAX_TXNS_PER_API_KEY", default_value_t = 10_000, value_parser = at_least_one())]
    pub max_txns_per_api_key: u64,
    /// Locks one transaction may hold (or wait for) at once.
    #[arg(long, env = "DLS_MAX_LOCKS_PER_TXN", default_value_t = 1_000, value_parser = at_least_one())]
    pub max_locks_per_txn: u64,
    /// Requests that may wait in one lock's queue.
    #[arg(long, env = "DLS_MAX_WAITERS_PER_LOCK", default_value_t = 1_000, value_parser = at_least_one())]
    pub max_waiters_per_lock: u64,
    /// Open event watch streams (gRPC WatchEvents and HTTP /api/v1/events) per API key.
    #[arg(long, env = "DLS_MAX_WATCHES_PER_API_KEY", default_value_t = 256, value_parser = at_least_one())]
    pub max_watches_per_api_key: u64,
    /// Open WatchEvents streams per client connection (remote address).
    #[arg(long, env = "DLS_MAX_WATCHES_PER_CONNECTION", default_value_t = 64, value_parser = at_least_one())]
    pub max_watches_per_connection: u64,
    /// Client proposals that may wait for a raft write on the leader; past it new work is
    /// shed with UNAVAILABLE and an `x-dls-retry-after-ms` hint (releases and ends get twice
    /// as many places; the leader's own expiries are never shed).
    #[arg(long, env = "DLS_MAX_QUEUED_PROPOSALS", default_value_t = 1_024, value_parser = at_least_one())]
    pub max_queued_proposals: u64,
    /// Of --max-queued-proposals, how many one API key may have queued at once, so one key's
    /// flood cannot shed another key's work (shed the same way, naming this flag). Default: a
    /// quarter of --max-queued-proposals. Without API keys the one caller may use it all.
    #[arg(long, env = "DLS_MAX_QUEUED_PROPOSALS_PER_API_KEY", value_parser = at_least_one())]
    pub max_queued_proposals_per_api_key: Option<u64>,
    /// Client calls a follower may have open on the leader at once (forwarded unary calls in
    /// flight and forwarded AcquireLock/WatchEvents streams, gRPC and HTTP); past it a call to
    /// this follower is refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "DLS_MAX_FORWARDED_CALLS", default_value_t = 4_096, value_parser = at_least_one())]
    pub max_forwarded_calls: u64,
    /// Of --max-forwarded-calls, how many one API key may hold on a follower, so one key
    /// cannot refuse another's calls. Default: a quarter of --max-forwarded-calls. Without
    /// API keys the one caller may use it all.
    #[arg(long, env = "DLS_MAX_FORWARDED_CALLS_PER_API_KEY", value_parser = at_least_one())]
    pub max_forwarded_calls_per_api_key: Option<u64>,
    /// Of --max-forwarded-calls, how many calls with no API key or one this follower does not
    /// know may hold together (the leader decides on them; made-up keys must not take real
    /// keys' room). Default: 1/64 of --max-forwarded-calls, at least 1.
    #[arg(long, env = "DLS_MAX_FORWARDED_CALLS_UNKNOWN_KEYS", value_parser = at_least_one())]
    pub max_forwarded_calls_unknown_keys: Option<u64>,
    /// Schedule-slot records (`dls lock --once-per`: the last run of each key) the cluster
    /// keeps at once; past it a claim on a key without a record is refused. A record is
    /// forgotten two periods (at least 10 minutes) after its slot. ~300 bytes each.
    #[arg(long, env = "DLS_MAX_SLOT_RECORDS", default_value_t = 100_000, value_parser = at_least_one())]
    pub max_slot_records: u64,
    /// Of --max-slot-records, how many one API key's transactions may hold, so one key
    /// cannot refuse another's claims. Default: a quarter of --max-slot-records. Without API
    /// keys the one caller may use it all.
    #[arg(long, env = "DLS_MAX_SLOT_RECORDS_PER_API_KEY", value_parser = at_least_one())]
    pub max_slot_records_per_api_key: Option<u64>,
    /// API keys the cluster keeps (`dls keys create`); past it a create is refused.
    #[arg(long, env = "DLS_MAX_API_KEYS", default_value_t = 1_000, value_parser = at_least_one())]
    pub max_api_keys: u64,
    /// Of --max-api-keys, how many one admin key may have created (and not revoked), so one
    /// admin cannot take every place. Default: a quarter of --max-api-keys.
    #[arg(long, env = "DLS_MAX_API_KEYS_PER_ADMIN_KEY", value_parser = at_least_one())]
    pub max_api_keys_per_admin_key: Option<u64>,
}

impl LimitArgs {
    /// `--max-queued-proposals-per-api-key`, or its default.
    pub fn queued_proposals_per_api_key(&self) -> u64 {
        self.max_queued_proposals_per_api_key.unwrap_or((self.max_queued_proposals / 4).max(1))
    }

    /// `--max-forwarded-calls-per-api-key`, or its default.
    pub fn forwarded_calls_per_api_key(&self) -> u64 {
        self.max_forwarded_calls_per_api_key.unwrap_or((self.max_forwarded_calls / 4).max(1))
    }

    /// `--max-slot-records-per-api-key`, or its default.
    pub fn slot_records_per_api_key(&self) -> u64 {
        self.max_slot_records_per_api_key.unwrap_or((self.max_slot_records / 4).max(1))
    }

    /// `--max-api-keys-per-admin-key`, or its default.
    pub fn api_keys_per_admin_key(&self) -> u64 {
        self.max_api_keys_per_admin_key.unwrap_or((self.max_api_keys / 4).max(1))
    }

    /// `--max-forwarded-calls-unknown-keys`, or its default.
    pub fn forwarded_calls_unknown_keys(&self) -> u64 {
        self.max_forwarded_calls_unknown_keys.unwrap_or((self.max_forwarded_calls / 64).max(1))
    }
}

/// How a refusal names the limit: the node's flag, or the key's own override of it.
fn limit_of(own: Option<u64>, flag: &str, max: u64) -> String {
    match own {
        Some(_) => format!("{max}, this cluster key's own override of --{flag}"),
        None => format!("--{flag} {max}"),
    }
}

fn at_least_one() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

impl Default for LimitArgs {
    fn default() -> Self {
        LimitArgs {
            max_txns_per_api_key: 10_000,
            max_locks_per_txn: 1_000,
            max_waiters_per_lock: 1_000,
            max_watches_per_api_key: 256,
            max_watches_per_connection: 64,
            max_queued_proposals: 1_024,
            max_queued_proposals_per_api_key: None,
            max_forwarded_calls: 4_096,
            max_forwarded_calls_per_api_key: None,
            max_forwarded_calls_unknown_keys: None,
            max_slot_records: 100_000,
            max_slot_records_per_api_key: None,
            max_api_keys: 1_000,
            max_api_keys_per_admin_key: None,
        }
    }
}

/// Whose share of a node-wide bound a request counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tenant {
    /// The caller of a server without API keys: the one tenant there is, who may use the
    /// whole bound (shares keep keys apart; without keys there is nobody to keep apart).
    Open,
    /// An API key this node knows, by name.
    Key(String),
    /// No API key, or one this node does not know (its keys file may be older than the
    /// leader's, which decides): all such calls share one small bucket.
    Unknown,
}

impl Tenant {
    /// The tenant of an authenticated caller; "" is the caller of a server without keys
    /// (the keys file refuses an empty name).
    pub fn of(who: &Principal) -> Tenant {
        if who.name.is_empty() {
            Tenant::Open
        } else {
            Tenant::Key(who.name.clone())
        }
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tenant::Open => f.write_str("the server's one caller (no API keys)"),
            Tenant::Key(name) => write!(f, "API key {name:?}"),
            Tenant::Unknown => f.write_str("calls with no API key or one this node does not know"),
        }
    }
}

/// Which limit refused a request (a label of `dls_refused_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    TxnsPerApiKey,
    LocksPerTxn,
    WaitersPerLock,
    WatchesPerApiKey,
    WatchesPerConnection,
    ForwardedCalls,
    ForwardedCallsPerApiKey,
    ForwardedCallsUnknownKeys,
    SlotRecords,
    SlotRecordsPerApiKey,
    ApiKeys,
    ApiKeysPerAdminKey,
}

impl Limit {
    pub const ALL: [Limit; 12] = [
        Limit::TxnsPerApiKey,
        Limit::LocksPerTxn,
        Limit::WaitersPerLock,
        Limit::WatchesPerApiKey,
        Limit::WatchesPerConnection,
        Limit::ForwardedCalls,
        Limit::ForwardedCallsPerApiKey,
        Limit::ForwardedCallsUnknownKeys,
        Limit::SlotRecords,
        Limit::SlotRecordsPerApiKey,
        Limit::ApiKeys,
        Limit::ApiKeysPerAdminKey,
    ];

    /// The flag that sets it, without dashes.
    pub fn flag(self) -> &'static str {
        match self {
            Limit::TxnsPerApiKey => "max-txns-per-api-key",
            Limit::LocksPerTxn => "max-locks-per-txn",
            Limit::WaitersPerLock => "max-waiters-per-lock",
            Limit::WatchesPerApiKey => "max-watches-per-api-key",
            Limit::WatchesPerConnection => "max-watches-per-connection",
            Limit::ForwardedCalls => "max-forwarded-calls",
            Limit::ForwardedCallsPerApiKey => "max-forwarded-calls-per-api-key",
            Limit::ForwardedCallsUnknownKeys => "max-forwarded-calls-unknown-keys",
            Limit::SlotRecords => "max-slot-records",
            Limit::SlotRecordsPerApiKey => "max-slot-records-per-api-key",
            Limit::ApiKeys => "max-api-keys",
            Limit::ApiKeysPerAdminKey => "max-api-keys-per-admin-key",
        }
    }
}

/// Requests admitted but not applied yet, and open watch streams.
#[derive(Default)]
struct Counts {
    begins: HashMap<String, u64>,
    acquires_by_txn: HashMap<TxnId, u64>,
    acquires_by_lock: HashMap<LockKey, u64>,
    watches_by_key: HashMap<String, u64>,
    watches_by_connection: HashMap<SocketAddr, u64>,
    /// Slot claims in flight that would add a record, by the owner of their transaction.
    slot_claims: HashMap<String, u64>,
}

fn add<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u64>, key: K) {
    *map.entry(key).or_default() += 1;
}

/// Gives one back; entries at zero are removed so the maps hold only what is in flight.
fn sub<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u64>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

fn get<K: std::hash::Hash + Eq>(map: &HashMap<K, u64>, key: &K) -> u64 {
    map.get(key).copied().unwrap_or(0)
}

/// Places taken under one node-wide bound, in all and by tenant.
#[derive(Default)]
struct Shares {
    total: u64,
    by_tenant: HashMap<Tenant, u64>,
}

/// The configured limits with what counts against them on this node.
pub struct Limits {
    pub args: LimitArgs,
    counts: Mutex<Counts>,
    /// Client calls this node has open on the leader (see `api::forward`).
    forwarded: Mutex<Shares>,
    refused: [AtomicU64; Limit::ALL.len()],
}

impl Limits {
    pub fn new(args: LimitArgs) -> Arc<Limits> {
        Arc::new(Limits { args, counts: Mutex::default(), forwarded: Mutex::default(), refused: Default::default() })
    }

    /// Requests refused by `limit` since the node started.
    pub fn refused(&self, limit: Limit) -> u64 {
        self.refused[limit as usize].load(Relaxed)
    }

    fn refuse(&self, limit: Limit, message: String) -> EngineError {
        self.refused[limit as usize].fetch_add(1, Relaxed);
        tracing::debug!(limit = limit.flag(), "{message}");
        EngineError::ResourceExhausted(message)
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().expect("limits lock")
    }

    /// Admits a new transaction of `who` (and its first lock, for a one-shot start) unless
    /// `request_id` began one already. The
    /// table lock is taken inside the limits lock, so nothing applied or given back between
    /// the two reads can make the count too low.
    pub fn admit_begin(
        self: &Arc<Self>,
        state: &RwLock<Replicated>,
        who: &Principal,
        request_id: Option<&str>,
        first_lock: Option<&LockKey>,
    ) -> Result<Admission, EngineError> {
        let mut counts = self.counts();
        let st = state.read().expect("state lock");
        let table = &st.table;
        if request_id.is_some_and(|r| table.knows_begin(r)) {
            // A retry: answered with the transaction it began, which adds nothing.
            return Ok(Admission::none());
        }
        let active = table.active_txns_of(&who.name) as u64 + get(&counts.begins, &who.name);
        let max = who.limits.max_txns.unwrap_or(self.args.max_txns_per_api_key);
        if active >= max {
            let whose = if who.name.is_empty() {
                "the server (without API keys every caller shares one bound)".to_string()
            } else {
                format!("API key {:?}", who.name)
            };
            return Err(self.refuse(
                Limit::TxnsPerApiKey,
                format!(
                    "{whose} has {active} active transactions (limit {}); end some or raise the limit",
                    limit_of(who.limits.max_txns, "max-txns-per-api-key", max)
                ),
            ));
        }
        if let Some(lock) = first_lock {
            self.check_waiters(&counts, table, lock)?;
            add(&mut counts.acquires_by_lock, lock.clone());
        }
        add(&mut counts.begins, who.name.clone());
        Ok(Admission {
            limits: Some(self.clone()),
            owner: Some(who.name.clone()),
            txn: None,
            locks: first_lock.into_iter().cloned().collect(),
            slot_claim: None,
        })
    }

    /// Admits an acquire of `locks` (one, or an all-or-nothing request's) by active
    /// transaction `txn`: one more held lock for each it does not hold yet, and perhaps one
    /// more waiter in each lock's queue.
    pub fn admit_acquire(
        self: &Arc<Self>,
        state: &RwLock<Replicated>,
        txn: TxnId,
        locks: &[LockKey],
    ) -> Result<Admission, EngineError> {
        let mut counts = self.counts();
        let st = state.read().expect("state lock");
        let table = &st.table;
        let Some(t) = table.txn(txn) else {
            // Unknown or forgotten: the proposal itself answers that, and holds nothing.
            return Ok(Admission::none());
        };
        let new = locks.iter().filter(|l| !t.held.contains_key(l)).count() as u64;
        if new > 0 {
            let holds = t.held.len() as u64 + u64::from(t.waiting.is_some()) + get(&counts.acquires_by_txn, &txn);
            let max = self.args.max_locks_per_txn;
            if holds + new > max {
                let asks = if new == 1 { String::new() } else { format!(" and this request asks for {new} more") };
                return Err(self.refuse(
                    Limit::LocksPerTxn,
                    format!(
                        "transaction {txn} holds or asks for {holds} locks{asks} (limit --max-locks-per-txn {max}); \
                         release some or raise the limit"
                    ),
                ));
            }
        }
        for lock in locks {
            self.check_waiters(&counts, table, lock)?;
        }
        *counts.acquires_by_txn.entry(txn).or_default() += new;
        for lock in locks {
            add(&mut counts.acquires_by_lock, lock.clone());
        }
        Ok(Admission {
            limits: Some(self.clone()),
            owner: None,
            txn: Some((txn, new)),
            locks: locks.to_vec(),
            slot_claim: None,
        })
    }

    /// Admits a schedule-slot claim of `lock` by `txn`: one more record when the key has
    /// none (a claim on a key with a record replaces it, or skips), counted against the
    /// node's bound and the share of the transaction's API key. A retried claim adds nothing.
    pub fn admit_slot_claim(
        self: &Arc<Self>,
        state: &RwLock<Replicated>,
        txn: TxnId,
        lock: &LockKey,
        request_id: &str,
    ) -> Result<Admission, EngineError> {
        let mut counts = self.counts();
        let st = state.read().expect("state lock");
        let table = &st.table;
        let Some(t) = table.txn(txn) else { return Ok(Admission::none()) };
        let owner = t.owner.clone();
        let record = table.slot_run(lock);
        if record.is_some_and(|r| r.txn == txn && r.request_id == request_id) {
            return Ok(Admission::none());
        }
        let in_flight: u64 = counts.slot_claims.values().sum();
        let (total, of_owner) = table.slot_run_counts(&owner);
        if record.is_none() {
            let max = self.args.max_slot_records;
            let held = total as u64 + in_flight;
            if held >= max {
                return Err(self.refuse(
                    Limit::SlotRecords,
                    format!(
                        "the cluster keeps {held} schedule-slot records (limit --max-slot-records {max}); \
                         records expire two periods (at least 10 minutes) after their slot, or raise the limit"
                    ),
                ));
            }
        }
        let adds_to_owner = record.is_none_or(|r| r.owner != owner);
        if adds_to_owner && !owner.is_empty() {
            // A cluster key may carry its own share (`dls keys create --max-slot-records`).
            let own = table.api_key(&owner).and_then(|k| k.limits.max_slot_records);
            let share = own.unwrap_or_else(|| self.args.slot_records_per_api_key());
            let held = of_owner as u64 + get(&counts.slot_claims, &owner);
            if held >= share {
                return Err(self.refuse(
                    Limit::SlotRecordsPerApiKey,
                    format!(
                        "API key {owner:?} has {held} schedule-slot records (limit --max-slot-records-per-api-key \
                         {share}, its share of --max-slot-records {}); records expire two periods (at least 10 \
                         minutes) after their slot, or raise the limit",
                        self.args.max_slot_records
                    ),
                ));
            }
        }
        if !adds_to_owner {
            return Ok(Admission::none());
        }
        add(&mut counts.slot_claims, owner.clone());
        Ok(Admission { limits: Some(self.clone()), owner: None, txn: None, locks: Vec::new(), slot_claim: Some(owner) })
    }

    /// Admits one more cluster API key by admin key `by`, against the cluster's bound and
    /// `by`'s share. Creates are serialized by the caller (`Engine::create_api_key`), so
    /// the table as applied is the whole count.
    pub fn admit_api_key(&self, table: &LockTable, by: &str) -> Result<(), EngineError> {
        let (total, of_creator) = table.api_key_counts(by);
        let (total, of_creator) = (total as u64, of_creator as u64);
        let max = self.args.max_api_keys;
        if total >= max {
            return Err(self.refuse(
                Limit::ApiKeys,
                format!(
                    "the cluster keeps {total} API keys (limit --max-api-keys {max}); revoke some or raise the limit"
                ),
            ));
        }
        let share = self.args.api_keys_per_admin_key();
        if of_creator >= share {
            return Err(self.refuse(
                Limit::ApiKeysPerAdminKey,
                format!(
                    "admin key {by:?} has created {of_creator} API keys (limit --max-api-keys-per-admin-key {share}, \
                     its share of --max-api-keys {max}); revoke some or raise the limit"
                ),
            ));
        }
        Ok(())
    }

    /// A full queue refuses every new request of the key: none could be granted at once
    /// anyway while anyone waits (queues are FIFO). Acquires in flight on the key count as
    /// possible waiters.
    fn check_waiters(&self, counts: &Counts, table: &LockTable, lock: &LockKey) -> Result<(), EngineError> {
        let queued = table.key(lock).map_or(0, |k| k.queue.len()) as u64;
        let waiting = queued + get(&counts.acquires_by_lock, lock);
        let max = self.args.max_waiters_per_lock;
        if waiting >= max {
            return Err(self.refuse(
                Limit::WaitersPerLock,
                format!(
                    "lock {lock} has {waiting} waiting requests (limit --max-waiters-per-lock {max}); \
                     try again later or raise the limit"
                ),
            ));
        }
        Ok(())
    }

    /// Opens an event watch of `who` on connection `from` (unknown for the HTTP port's own
    /// streams, which then count against the key only). The slot is freed when the
    /// returned value is dropped, i.e. when the stream ends for any reason.
    pub fn admit_watch(self: &Arc<Self>, who: &Principal, from: Option<SocketAddr>) -> Result<WatchSlot, EngineError> {
        let mut counts = self.counts();
        let by_key = get(&counts.watches_by_key, &who.name);
        let max = who.limits.max_watches.unwrap_or(self.args.max_watches_per_api_key);
        if by_key >= max {
            let whose = if who.name.is_empty() { "the server".to_string() } else { format!("API key {:?}", who.name) };
            return Err(self.refuse(
                Limit::WatchesPerApiKey,
                format!(
                    "{whose} has {by_key} open watches of events and keys (limit {}); close some or raise the limit",
                    limit_of(who.limits.max_watches, "max-watches-per-api-key", max)
                ),
            ));
        }
        if let Some(addr) = from {
            let by_conn = get(&counts.watches_by_connection, &addr);
            let max = self.args.max_watches_per_connection;
            if by_conn >= max {
                return Err(self.refuse(
                    Limit::WatchesPerConnection,
                    format!(
                        "connection {addr} has {by_conn} open watches of events and keys (limit --max-watches-per-connection \
                         {max}); close some, open another connection, or raise the limit"
                    ),
                ));
            }
            add(&mut counts.watches_by_connection, addr);
        }
        add(&mut counts.watches_by_key, who.name.clone());
        Ok(WatchSlot { limits: self.clone(), key: who.name.clone(), from })
    }

    fn forwards(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.forwarded.lock().expect("forwarded calls lock")
    }

    /// Opens a client call of `tenant` forwarded to the leader: within the tenant's share
    /// and the node-wide bound. The place is freed when the returned value is dropped: when
    /// a unary call has its answer, or a stream ends or is dropped.
    pub fn admit_forward(self: &Arc<Self>, tenant: &Tenant) -> Result<ForwardSlot, EngineError> {
        let mut forwards = self.forwards();
        let share = match tenant {
            Tenant::Open => None,
            Tenant::Key(_) => Some((Limit::ForwardedCallsPerApiKey, self.args.forwarded_calls_per_api_key())),
            Tenant::Unknown => Some((Limit::ForwardedCallsUnknownKeys, self.args.forwarded_calls_unknown_keys())),
        };
        if let Some((limit, share)) = share {
            let held = get(&forwards.by_tenant, tenant);
            if held >= share {
                let whose = match tenant {
                    Tenant::Unknown => format!("{tenant} together have"),
                    _ => format!("{tenant} has"),
                };
                return Err(self.refuse(
                    limit,
                    format!(
                        "{whose} {held} client calls open on the leader through this follower (limit --{} {share}, \
                         its share of --max-forwarded-calls {}); close some streams, call the leader directly, or \
                         raise the limit",
                        limit.flag(),
                        self.args.max_forwarded_calls
                    ),
                ));
            }
        }
        let max = self.args.max_forwarded_calls;
        if forwards.total >= max {
            let open = forwards.total;
            return Err(self.refuse(
                Limit::ForwardedCalls,
                format!(
                    "this follower has {open} client calls open on the leader (limit --max-forwarded-calls {max}); \
                     close some streams, call the leader directly, or raise the limit"
                ),
            ));
        }
        forwards.total += 1;
        add(&mut forwards.by_tenant, tenant.clone());
        Ok(ForwardSlot { limits: self.clone(), tenant: tenant.clone() })
    }

    /// Client calls this node has open on the leader right now.
    pub fn forwarded(&self) -> u64 {
        self.forwards().total
    }

    /// Begins, acquires and watches counted right now.
    #[cfg(test)]
    pub fn in_flight(&self) -> (u64, u64, u64) {
        let c = self.counts();
        (c.begins.values().sum(), c.acquires_by_txn.values().sum(), c.watches_by_key.values().sum())
    }
}

/// What an admitted request counts against its limits until its proposal is applied or
/// has failed. Travels with the proposal (see `Node::propose_admitted`), so a caller that
/// hangs up early cannot free its place before the request has taken effect.
#[must_use = "the admission is given back when dropped"]
pub struct Admission {
    limits: Option<Arc<Limits>>,
    owner: Option<String>,
    /// The transaction and how many more locks it may come to hold.
    txn: Option<(TxnId, u64)>,
    locks: Vec<LockKey>,
    /// A slot claim that adds a record of this owner's.
    slot_claim: Option<String>,
}

impl Admission {
    /// Nothing counted (a retry or re-attach of a known request).
    pub fn none() -> Admission {
        Admission { limits: None, owner: None, txn: None, locks: Vec::new(), slot_claim: None }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let Some(limits) = &self.limits else { return };
        let mut counts = limits.counts();
        if let Some(owner) = &self.owner {
            sub(&mut counts.begins, owner);
        }
        if let Some((txn, n)) = self.txn {
            if let Some(count) = counts.acquires_by_txn.get_mut(&txn) {
                *count = count.saturating_sub(n);
                if *count == 0 {
                    counts.acquires_by_txn.remove(&txn);
                }
            }
        }
        for lock in &self.locks {
            sub(&mut counts.acquires_by_lock, lock);
        }
        if let Some(owner) = &self.slot_claim {
            sub(&mut counts.slot_claims, owner);
        }
    }
}

/// An open watch stream's place; freed on drop.
pub struct WatchSlot {
    limits: Arc<Limits>,
    key: String,
    from: Option<SocketAddr>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        sub(&mut counts.watches_by_key, &self.key);
        if let Some(addr) = &self.from {
            sub(&mut counts.watches_by_connection, addr);
        }
    }
}

/// A forwarded call's place under `--max-forwarded-calls` and its tenant's share; freed on
/// drop.
pub struct ForwardSlot {
    limits: Arc<Limits>,
    tenant: Tenant,
}

impl Drop for ForwardSlot {
    fn drop(&mut self) {
        let mut forwards = self.limits.forwards();
        forwards.total = forwards.total.saturating_sub(1);
        sub(&mut forwards.by_tenant, &self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{Command, LockMode, LogCommand, Outcome, VictimPolicy};

    fn who(name: &str) -> Principal {
        Principal { name: name.into(), namespaces: None, admin: false, limits: Default::default() }
    }

    fn apply(state: &RwLock<Replicated>, cmd: Command) -> Outcome {
        state.write().unwrap().table.apply(&LogCommand { now_ms: 1, cmd })
    }

    fn begin(table: &RwLock<Replicated>, owner: &str) -> TxnId {
        let cmd =
            Command::Begin { request_id: None, lease_ms: 1000, priority: 0, name: String::new(), owner: owner.into() };
        match apply(table, cmd) {
            Outcome::Begun { txn, .. } => txn,
            o => panic!("{o:?}"),
        }
    }

    fn acquire(table: &RwLock<Replicated>, txn: TxnId, key: &str) {
        let cmd = Command::Acquire {
            txn,
            request_id: format!("{txn}-{key}"),
            lock: LockKey::new("ns", key),
            mode: LockMode::Exclusive,
            wait_ms: 1000,
            victim_policy: VictimPolicy::default(),
        };
        apply(table, cmd);
    }

    fn small() -> Arc<Limits> {
        Limits::new(LimitArgs {
            max_txns_per_api_key: 2,
            max_locks_per_txn: 2,
            max_waiters_per_lock: 1,
            max_watches_per_api_key: 2,
            max_watches_per_connection: 1,
            max_queued_proposals: 1,
            max_queued_proposals_per_api_key: None,
            max_forwarded_calls: 1,
            max_forwarded_calls_per_api_key: None,
            max_forwarded_calls_unknown_keys: None,
            max_slot_records: 100_000,
            max_slot_records_per_api_key: None,
            max_api_keys: 1_000,
            max_api_keys_per_admin_key: None,
        })
    }

    fn refused_by(r: Result<Admission, EngineError>, flag: &str) {
        match r {
            Err(EngineError::ResourceExhausted(m)) => assert!(m.contains(flag), "{m}"),
            Err(e) => panic!("expected a refusal naming {flag}, got {e:?}"),
            Ok(_) => panic!("expected a refusal naming {flag}"),
        }
    }

    #[test]
    fn begins_in_flight_count_until_given_back() {
        let (limits, table) = (small(), RwLock::default());
        let first = limits.admit_begin(&table, &who("a"), None, None).unwrap();
        let second = limits.admit_begin(&table, &who("a"), None, None).unwrap();
        refused_by(limits.admit_begin(&table, &who("a"), None, None), "--max-txns-per-api-key 2");
        // Another key has its own bound.
        drop(limits.admit_begin(&table, &who("b"), None, None).unwrap());
        // The first begin is applied, then its admission given back: still two.
        begin(&table, "a");
        drop(first);
        refused_by(limits.admit_begin(&table, &who("a"), None, None), "API key \"a\" has 2 active transactions");
        drop(second);
        assert!(limits.admit_begin(&table, &who("a"), None, None).is_ok());
        assert_eq!(limits.refused(Limit::TxnsPerApiKey), 2);
    }

    #[test]
    fn a_cluster_key_s_own_limits_replace_the_flags() {
        let (limits, table) = (small(), RwLock::default());
        let own = |txns, watches| Principal {
            limits: crate::locks::KeyLimits { max_txns: txns, max_watches: watches, max_slot_records: None },
            ..who("own")
        };
        let _one = limits.admit_begin(&table, &own(Some(1), None), None, None).unwrap();
        refused_by(limits.admit_begin(&table, &own(Some(1), None), None, None), "this cluster key's own override");
        // Raised above the flag's 2.
        let raised = own(Some(4), Some(3));
        let _more: Vec<_> = (0..3).map(|_| limits.admit_begin(&table, &raised, None, None).unwrap()).collect();
        let _watches: Vec<_> = (0..3).map(|_| limits.admit_watch(&raised, None).unwrap()).collect();
        refused_by(
            limits.admit_watch(&raised, None).map(|_| Admission::none()),
            "3, this cluster key's own override of --max-watches-per-api-key",
        );
    }

    #[test]
    fn locks_per_txn_and_waiters_per_lock() {
        let (limits, table) = (small(), RwLock::default());
        let t1 = begin(&table, "a");
        acquire(&table, t1, "x");
        acquire(&table, t1, "y");
        refused_by(limits.admit_acquire(&table, t1, &[LockKey::new("ns", "z")]), "--max-locks-per-txn 2");
        // A lock it holds already adds nothing.
        drop(limits.admit_acquire(&table, t1, &[LockKey::new("ns", "x")]).unwrap());
        let t2 = begin(&table, "a");
        let waiting = limits.admit_acquire(&table, t2, &[LockKey::new("ns", "x")]).unwrap();
        // One acquire in flight on x already fills its single waiter place.
        let t3 = begin(&table, "b");
        refused_by(limits.admit_acquire(&table, t3, &[LockKey::new("ns", "x")]), "--max-waiters-per-lock 1");
        acquire(&table, t2, "x");
        drop(waiting);
        refused_by(limits.admit_acquire(&table, t3, &[LockKey::new("ns", "x")]), "lock ns/x has 1 waiting");
        // An all-or-nothing request counts every lock it does not hold yet, and every queue.
        let t4 = begin(&table, "b");
        let three: Vec<LockKey> = ["p", "q", "r"].iter().map(|k| LockKey::new("ns", *k)).collect();
        refused_by(limits.admit_acquire(&table, t4, &three), "asks for 3 more (limit --max-locks-per-txn 2)");
        let two = limits.admit_acquire(&table, t4, &three[..2]).unwrap();
        refused_by(limits.admit_acquire(&table, t4, &three[2..]), "--max-locks-per-txn 2");
        drop(two);
        refused_by(limits.admit_acquire(&table, t4, &[three[0].clone(), LockKey::new("ns", "x")]), "lock ns/x");
        assert!(limits.in_flight() == (0, 0, 0));
    }

    #[test]
    fn watch_slots_are_freed_on_drop() {
        let limits = small();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let one = limits.admit_watch(&who("k"), Some(a)).unwrap();
        refused_by(limits.admit_watch(&who("k"), Some(a)).map(|_| Admission::none()), "--max-watches-per-connection 1");
        let two = limits.admit_watch(&who("k"), Some(b)).unwrap();
        refused_by(limits.admit_watch(&who("k"), None).map(|_| Admission::none()), "--max-watches-per-api-key 2");
        drop(one);
        drop(two);
        assert_eq!(limits.in_flight(), (0, 0, 0));
        assert!(limits.admit_watch(&who("k"), Some(a)).is_ok());
    }

    #[test]
    fn forwarded_calls_are_bounded_until_their_slots_are_dropped() {
        let limits = small();
        let open = limits.admit_forward(&Tenant::Open).unwrap();
        match limits.admit_forward(&Tenant::Open) {
            Err(EngineError::ResourceExhausted(m)) => assert!(m.contains("--max-forwarded-calls 1"), "{m}"),
            _ => panic!("a second forwarded call must be refused"),
        }
        assert_eq!((limits.forwarded(), limits.refused(Limit::ForwardedCalls)), (1, 1));
        drop(open);
        assert_eq!(limits.forwarded(), 0);
        assert!(limits.admit_forward(&Tenant::Open).is_ok());
    }

    fn refused_forward(r: Result<ForwardSlot, EngineError>, flag: &str) {
        refused_by(r.map(|_| Admission::none()), flag)
    }

    #[test]
    fn each_key_and_the_unknown_keys_hold_at_most_their_share_of_the_forwarded_calls() {
        let args = LimitArgs { max_forwarded_calls: 8, ..LimitArgs::default() };
        assert_eq!((args.forwarded_calls_per_api_key(), args.forwarded_calls_unknown_keys()), (2, 1));
        let limits = Limits::new(args);
        let (a, b) = (Tenant::Key("a".into()), Tenant::Key("b".into()));
        let held: Vec<ForwardSlot> = (0..2).map(|_| limits.admit_forward(&a).unwrap()).collect();
        refused_forward(limits.admit_forward(&a), "API key \"a\" has 2 client calls open");
        refused_forward(limits.admit_forward(&a), "--max-forwarded-calls-per-api-key 2");
        // Another key has its own share; calls without a known key share one small bucket.
        let other = limits.admit_forward(&b).unwrap();
        let unknown = limits.admit_forward(&Tenant::Unknown).unwrap();
        refused_forward(limits.admit_forward(&Tenant::Unknown), "--max-forwarded-calls-unknown-keys 1");
        assert_eq!(limits.refused(Limit::ForwardedCallsPerApiKey), 2);
        assert_eq!(limits.refused(Limit::ForwardedCallsUnknownKeys), 1);
        assert_eq!(limits.forwarded(), 4);
        drop((held, other, unknown));
        assert_eq!(limits.forwarded(), 0);
        assert!(limits.admit_forward(&a).is_ok() && limits.admit_forward(&Tenant::Unknown).is_ok());
        // The node-wide bound still holds over the shares, and a server without keys has one
        // tenant, who may fill it.
        let shares =
            LimitArgs { max_forwarded_calls: 3, max_forwarded_calls_per_api_key: Some(3), ..LimitArgs::default() };
        let limits = Limits::new(shares);
        let _two = [limits.admit_forward(&a).unwrap(), limits.admit_forward(&b).unwrap()];
        let _three = limits.admit_forward(&Tenant::Open).unwrap();
        refused_forward(limits.admit_forward(&b), "--max-forwarded-calls 3");
    }
}

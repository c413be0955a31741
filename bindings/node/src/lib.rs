//! Native part of `@caerus-dev/sdk`: a thin N-API layer over `caerus-core`.
//!
//! Every lock operation is a call into [`caerus_core`]: leader discovery, safe retries,
//! the heartbeat and the lost signal all live there. This crate only converts values
//! (u64 ⇄ `bigint`, modes as strings, errors as records, see `errors.rs`) and turns core's
//! futures into JavaScript promises, which napi runs on its tokio runtime, so no call
//! blocks the event loop. The JavaScript wrapper (`index.js`) turns the error records
//! into error classes and adds `AbortSignal` and async-iterator glue.

use std::sync::Arc;

use caerus_core::{
    AcquireOptions, ClientConfig, DlsClient, Event, EventDetail, EventKind, EventStream, Lock, LockMode, LockRequest,
    LostReason, QueuePosition, SlotClaim, SlotOutcome, SlotRun, TokenCheck, Transaction, TransactionOptions,
    TransactionStatus, WatchOptions,
};
use napi::bindgen_prelude::{block_on, spawn, BigInt, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Error, Result, Status};

pub mod errors;
mod promise_bridge;
use errors::{coded, to_js};
use napi_derive::napi;
use promise_bridge::promise;
use tokio::sync::{watch, Mutex};

fn invalid(message: impl AsRef<str>) -> Error {
    coded("INVALID_ARGUMENT", message.as_ref())
}

/// A JS `bigint` (or a non-negative safe integer passed as such) as a u64.
fn u64_of(value: &BigInt, what: &str) -> Result<u64> {
    let (negative, v, lossless) = value.get_u64();
    if negative || !lossless {
        return Err(invalid(format!("{what} must be a non-negative 64-bit integer")));
    }
    Ok(v)
}

fn ms_of(value: Option<f64>, what: &str) -> Result<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 => Ok(Some(v as u64)),
        Some(v) => Err(invalid(format!("{what} must be a non-negative integer number of milliseconds, got {v}"))),
    }
}

fn mode_of(mode: Option<String>) -> Result<LockMode> {
    match mode {
        None => Ok(LockMode::Exclusive),
        Some(m) => m.parse::<LockMode>().map_err(|e| to_js(e.into())),
    }
}

/// Options of the client (all optional; the JS wrapper documents the defaults).
#[napi(object)]
pub struct ClientOptions {
    /// Defaults to `CAERUS_API_KEY`.
    pub api_key: Option<String>,
    /// Defaults to `DLS_ENDPOINTS` (comma separated), then `127.0.0.1:7070`.
    pub endpoints: Option<Vec<String>>,
    pub connect_timeout_ms: Option<f64>,
    pub request_timeout_ms: Option<f64>,
    pub retry_deadline_ms: Option<f64>,
    /// CA bundle (PEM) the nodes' certificates must chain to. Defaults to `DLS_CA_FILE`.
    pub ca_file: Option<String>,
    /// Client certificate (PEM). Defaults to `DLS_CLIENT_CERT_FILE`.
    pub client_cert_file: Option<String>,
    /// Its private key (PEM). Defaults to `DLS_CLIENT_KEY_FILE`.
    pub client_key_file: Option<String>,
}

/// Options of a transaction.
#[napi(object)]
pub struct TxOptions {
    pub timeout_ms: Option<f64>,
    pub priority: Option<i32>,
    pub name: Option<String>,
    pub max_duration_ms: Option<f64>,
    /// Keep acquire streams open to hear at once that the server ended the transaction
    /// (`TransactionOptions::lost_stream` of the core). Default false.
    pub lost_stream: Option<bool>,
}

/// Options of an event watch.
#[napi(object)]
pub struct EventWatchOptions {
    pub from_sequence: Option<BigInt>,
    pub namespace_prefixes: Option<Vec<String>>,
    pub kinds: Option<Vec<String>>,
    pub only_new: Option<bool>,
}

/// A granted lock.
#[napi(object)]
pub struct JsLock {
    pub namespace: String,
    pub key: String,
    pub mode: String,
    pub fencing_token: BigInt,
}

impl From<Lock> for JsLock {
    fn from(l: Lock) -> Self {
        JsLock {
            namespace: l.namespace,
            key: l.key,
            mode: l.mode.as_str().to_string(),
            fencing_token: BigInt::from(l.fencing_token),
        }
    }
}

/// A key's run for a schedule slot, as the cluster remembers it (`claimSlot`, `finishSlot`).
#[napi(object)]
pub struct JsSlotRun {
    pub namespace: String,
    pub key: String,
    pub period_ms: f64,
    /// floor(startedAtMs / periodMs): below 2^53 for every allowed period.
    pub slot: f64,
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub api_key: String,
    /// The cluster's clock, ms since the Unix epoch (finishedAtMs 0 while running).
    pub started_at_ms: f64,
    pub finished_at_ms: f64,
    /// RUNNING, SUCCEEDED, FAILED or LOST.
    pub state: String,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub attempt: u32,
}

impl From<SlotRun> for JsSlotRun {
    fn from(r: SlotRun) -> Self {
        JsSlotRun {
            period_ms: r.period.as_millis() as f64,
            slot: r.slot as f64,
            transaction_id: BigInt::from(r.transaction_id),
            state: r.state.as_str().to_string(),
            started_at_ms: r.started_at_ms as f64,
            finished_at_ms: r.finished_at_ms as f64,
            namespace: r.namespace,
            key: r.key,
            transaction_name: r.transaction_name,
            api_key: r.api_key,
            exit_code: r.exit_code,
            reason: r.reason,
            attempt: r.attempt,
        }
    }
}

/// The cluster's answer to `claimSlot`: run the job only when `run` is true.
#[napi(object)]
pub struct JsSlotClaim {
    pub namespace: String,
    pub key: String,
    pub slot: f64,
    pub run: bool,
    pub attempt: u32,
    pub last_run: Option<JsSlotRun>,
}

impl From<SlotClaim> for JsSlotClaim {
    fn from(c: SlotClaim) -> Self {
        JsSlotClaim {
            namespace: c.namespace,
            key: c.key,
            slot: c.slot as f64,
            run: c.run,
            attempt: c.attempt,
            last_run: c.last_run.map(JsSlotRun::from),
        }
    }
}

/// How a run ended, from JS: SUCCEEDED, FAILED (with an exit code) or LOST.
fn slot_outcome(outcome: &str, exit_code: Option<i32>) -> Result<SlotOutcome> {
    match outcome {
        "SUCCEEDED" if exit_code.is_none_or(|c| c == 0) => Ok(SlotOutcome::Succeeded),
        "FAILED" => Ok(SlotOutcome::Failed { exit_code }),
        "LOST" => Ok(SlotOutcome::Lost),
        _ => Err(invalid(format!(
            "finishSlot needs outcome 'SUCCEEDED' (exitCode null or 0), 'FAILED' or 'LOST', got {outcome:?} with exitCode {exit_code:?}"
        ))),
    }
}

/// One lock of an all-or-nothing `acquireLocks`.
#[napi(object)]
pub struct JsLockRequest {
    pub namespace: String,
    pub key: String,
    pub mode: Option<String>,
}

/// The answer of `verifyFencingToken`.
#[napi(object)]
pub struct JsTokenCheck {
    pub current: bool,
    pub current_tokens: Vec<BigInt>,
}

impl From<TokenCheck> for JsTokenCheck {
    fn from(c: TokenCheck) -> Self {
        JsTokenCheck { current: c.current, current_tokens: c.current_tokens.into_iter().map(BigInt::from).collect() }
    }
}

/// Where a waiting acquire stands in its key's queue (given to `onQueued`).
#[napi(object)]
pub struct JsQueuePosition {
    /// 1 = next in line (for several locks: the furthest place over the keys waited for).
    pub position: u32,
    /// The transactions this request waits for.
    pub blocking_transaction_ids: Vec<BigInt>,
}

/// A JS callback called from the runtime without keeping the process alive.
type Callback<T> = ThreadsafeFunction<T, (), T, Status, false, true>;

/// Core's progress callback calling the JS `onQueued` (if any) on the event loop.
fn queued_callback(on_queued: Option<Callback<JsQueuePosition>>) -> impl FnMut(&QueuePosition) + Send {
    move |q| {
        if let Some(callback) = &on_queued {
            let position = JsQueuePosition {
                position: q.position,
                blocking_transaction_ids: q.blocking_transaction_ids.iter().map(|&id| BigInt::from(id)).collect(),
            };
            callback.call(position, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Cancels the call it is handed to: `index.js` calls `abort()` when the caller's
/// `AbortSignal` fires. The call's core future is dropped, which withdraws a waiting
/// acquire on the server (core's `withdraw`).
#[napi]
pub struct NativeAbort {
    aborted: watch::Sender<bool>,
}

#[napi]
impl NativeAbort {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeAbort { aborted: watch::channel(false).0 }
    }

    #[napi]
    pub fn abort(&self) {
        self.aborted.send_replace(true);
    }
}

impl Default for NativeAbort {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `call` until it ends or `abort` fires; then drops it (`ABORTED`; `index.js` rejects
/// with the signal's reason instead).
async fn abortable<T>(
    abort: Option<watch::Receiver<bool>>,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(mut abort) = abort else { return call.await };
    tokio::select! {
        result = call => result,
        _ = abort.wait_for(|aborted| *aborted) => Err(coded("ABORTED", "the call was aborted by its AbortSignal")),
    }
}

fn acquire_options(timeout_ms: Option<f64>) -> Result<AcquireOptions> {
    let mut opts = AcquireOptions::default();
    if let Some(ms) = ms_of(timeout_ms, "timeoutMs")? {
        opts = opts.with_timeout_ms(ms);
    }
    Ok(opts)
}

/// A waiting lock request.
#[napi(object)]
pub struct JsPendingLock {
    pub namespace: String,
    pub key: String,
    pub mode: String,
    pub position: u32,
}

/// A transaction as the leader sees it.
#[napi(object)]
pub struct JsTransactionStatus {
    pub id: BigInt,
    pub state: String,
    pub name: Option<String>,
    pub priority: i32,
    pub lease_timeout_ms: f64,
    pub lease_remaining_ms: f64,
    pub locks: Vec<JsLock>,
    pub waiting: Option<JsPendingLock>,
    pub end_reason: String,
    /// What ended it (`LEASE_EXPIRED`, `DEADLOCK_VICTIM`, ...); undefined while active.
    pub end_cause: Option<String>,
}

impl From<TransactionStatus> for JsTransactionStatus {
    fn from(s: TransactionStatus) -> Self {
        JsTransactionStatus {
            id: BigInt::from(s.id),
            state: s.state.as_str().to_string(),
            name: s.name,
            priority: s.priority,
            lease_timeout_ms: s.lease_timeout_ms as f64,
            lease_remaining_ms: s.lease_remaining_ms as f64,
            locks: s.locks.into_iter().map(JsLock::from).collect(),
            waiting: s.waiting.map(|w| JsPendingLock {
                namespace: w.namespace,
                key: w.key,
                mode: w.mode.as_str().to_string(),
                position: w.position,
            }),
            end_reason: s.end_reason,
            end_cause: s.end_cause.map(|c| c.as_str().to_string()),
        }
    }
}

/// Why a transaction was lost.
#[napi(object)]
pub struct JsLostReason {
    /// `EXPIRED`, `ABORTED`, `DEADLOCK_VICTIM`, `LEASE_UNCONFIRMED` or `NOT_FOUND`.
    pub kind: String,
    pub message: String,
}

impl From<LostReason> for JsLostReason {
    fn from(r: LostReason) -> Self {
        JsLostReason { kind: r.kind.as_str().to_string(), message: r.message }
    }
}

/// A member of a deadlock cycle.
#[napi(object)]
pub struct JsCycleMember {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub priority: i32,
    pub namespace: String,
    pub key: String,
    pub mode: String,
}

/// One event of the replicated log; fields beyond the first four depend on `kind`.
#[napi(object)]
pub struct JsEvent {
    pub sequence: BigInt,
    pub time_ms: f64,
    pub kind: String,
    pub namespaces: Vec<String>,
    pub transaction_id: Option<BigInt>,
    pub transaction_name: Option<String>,
    pub released_locks: Option<Vec<JsLock>>,
    pub reason: Option<String>,
    pub operator: Option<String>,
    pub cycle: Option<Vec<JsCycleMember>>,
    pub victim_transaction_id: Option<BigInt>,
    pub policy: Option<String>,
    pub namespace: Option<String>,
    pub key: Option<String>,
    pub mode: Option<String>,
    pub fencing_token: Option<BigInt>,
    pub cause: Option<String>,
}

impl From<Event> for JsEvent {
    fn from(e: Event) -> Self {
        let mut out = JsEvent {
            sequence: BigInt::from(e.sequence),
            time_ms: e.time_ms as f64,
            kind: e.kind().as_str().to_string(),
            namespaces: e.namespaces,
            transaction_id: None,
            transaction_name: None,
            released_locks: None,
            reason: None,
            operator: None,
            cycle: None,
            victim_transaction_id: None,
            policy: None,
            namespace: None,
            key: None,
            mode: None,
            fencing_token: None,
            cause: None,
        };
        match e.detail {
            EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
                out.cycle = Some(
                    cycle
                        .into_iter()
                        .map(|m| JsCycleMember {
                            transaction_id: BigInt::from(m.transaction_id),
                            transaction_name: m.transaction_name,
                            priority: m.priority,
                            namespace: m.namespace,
                            key: m.key,
                            mode: m.mode.as_str().to_string(),
                        })
                        .collect(),
                );
                out.victim_transaction_id = Some(BigInt::from(victim_transaction_id));
                out.policy = Some(policy.as_str().to_string());
            }
            EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.transaction_name = Some(transaction_name);
                out.released_locks = Some(released_locks.into_iter().map(JsLock::from).collect());
            }
            EventDetail::TransactionAborted { transaction_id, transaction_name, reason, operator, released_locks } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.transaction_name = Some(transaction_name);
                out.reason = Some(reason);
                out.operator = Some(operator);
                out.released_locks = Some(released_locks.into_iter().map(JsLock::from).collect());
            }
            EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.namespace = Some(namespace);
                out.key = Some(key);
                out.mode = Some(mode.as_str().to_string());
                out.fencing_token = Some(BigInt::from(fencing_token));
                out.cause = cause.map(|c| c.as_str().to_string());
            }
            // A kind added to core later: the common fields are still useful.
            _ => {}
        }
        out
    }
}

/// A transaction holding a listed key (`listLocks`).
#[napi(object)]
pub struct JsLockHolder {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    pub fencing_token: BigInt,
    pub since_ms: f64,
}

/// A request waiting in a listed key's queue (`listLocks`).
#[napi(object)]
pub struct JsLockWaiter {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    /// 1 = next in line.
    pub position: u32,
    pub blocking_transaction_ids: Vec<BigInt>,
    pub since_ms: f64,
    /// A SHARED_READ holder waiting to become EXCLUSIVE.
    pub upgrade: bool,
}

/// Why and until when a listed key grants nothing (its holder was revoked under a lock-delay).
#[napi(object)]
pub struct JsKeyDelay {
    /// Leader clock, ms since the Unix epoch.
    pub until_ms: f64,
    pub transaction_id: BigInt,
    /// How the revoked holder ended (`LEASE_EXPIRED`, `OPERATOR_ABORT`, ...); undefined if unknown.
    pub cause: Option<String>,
}

/// One key of `listLocks`: its holders, its queue and its lock-delay.
#[napi(object)]
pub struct JsKeyLocks {
    pub namespace: String,
    pub key: String,
    pub holders: Vec<JsLockHolder>,
    pub waiters: Vec<JsLockWaiter>,
    pub delay: Option<JsKeyDelay>,
    /// A semaphore's permit count; 0 for a lock.
    pub permits: u32,
}

impl From<caerus_core::KeyLocks> for JsKeyLocks {
    fn from(k: caerus_core::KeyLocks) -> Self {
        JsKeyLocks {
            namespace: k.namespace,
            key: k.key,
            holders: k
                .holders
                .into_iter()
                .map(|h| JsLockHolder {
                    transaction_id: BigInt::from(h.transaction_id),
                    transaction_name: h.transaction_name,
                    mode: h.mode.as_str().to_string(),
                    fencing_token: BigInt::from(h.fencing_token),
                    since_ms: h.since_ms as f64,
                })
                .collect(),
            waiters: k
                .waiters
                .into_iter()
                .map(|w| JsLockWaiter {
                    transaction_id: BigInt::from(w.transaction_id),
                    transaction_name: w.transaction_name,
                    mode: w.mode.as_str().to_string(),
                    position: w.position,
                    blocking_transaction_ids: w.blocking_transaction_ids.into_iter().map(BigInt::from).collect(),
                    since_ms: w.since_ms as f64,
                    upgrade: w.upgrade,
                })
                .collect(),
            permits: k.permits,
            delay: k.delay.map(|d| JsKeyDelay {
                until_ms: d.until_ms as f64,
                transaction_id: BigInt::from(d.transaction_id),
                cause: d.cause.map(|c| c.as_str().to_string()),
            }),
        }
    }
}

/// A lock-delay rule (`lockDelays`).
#[napi(object)]
pub struct JsLockDelayRule {
    /// Namespaces starting with this prefix ("" = every namespace).
    pub namespace_prefix: String,
    pub delay_ms: f64,
}

/// An API key kept by the cluster (`listApiKeys`; never its secret).
#[napi(object)]
pub struct JsApiKeyInfo {
    pub name: String,
    /// Allowed namespace prefixes (empty = every namespace).
    pub namespace_prefixes: Vec<String>,
    pub admin: bool,
    /// When it stops working (the cluster's clock, ms since the epoch).
    pub expires_at_ms: Option<f64>,
    /// The admin key that created it.
    pub created_by: String,
    pub created_at_ms: f64,
}

/// What a new cluster API key may do (`createApiKey`).
#[napi(object)]
pub struct ApiKeyOptions {
    /// Allowed namespace prefixes (default: every namespace).
    pub namespace_prefixes: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: Option<bool>,
    /// How long it works, by the cluster's clock (default: until revoked).
    pub expires_in_ms: Option<f64>,
}

fn tx_options(opts: Option<TxOptions>) -> Result<TransactionOptions> {
    let mut out = TransactionOptions::default();
    if let Some(o) = opts {
        if let Some(ms) = ms_of(o.timeout_ms, "timeoutMs")? {
            out = out.with_timeout_ms(ms);
        }
        if let Some(p) = o.priority {
            out = out.with_priority(p);
        }
        if let Some(n) = o.name {
            out = out.with_name(n);
        }
        if let Some(ms) = ms_of(o.max_duration_ms, "maxDurationMs")? {
            out = out.with_max_duration_ms(ms);
        }
        out = out.with_lost_stream(o.lost_stream.unwrap_or(false));
    }
    Ok(out)
}

/// Connection to a cluster (`Dls.DlsClient` wraps it).
#[napi]
pub struct NativeClient {
    client: DlsClient,
}

#[napi]
impl NativeClient {
    #[napi(constructor)]
    pub fn new(opts: Option<ClientOptions>) -> Result<Self> {
        let mut config = ClientConfig::from_env();
        if let Some(o) = opts {
            if let Some(endpoints) = o.endpoints.filter(|e| !e.is_empty()) {
                config.endpoints = endpoints;
            }
            if let Some(key) = o.api_key.filter(|k| !k.is_empty()) {
                config = config.with_api_key(key);
            }
            if let Some(ms) = ms_of(o.connect_timeout_ms, "connectTimeoutMs")? {
                config = config.with_connect_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(ms) = ms_of(o.request_timeout_ms, "requestTimeoutMs")? {
                config = config.with_request_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(ms) = ms_of(o.retry_deadline_ms, "retryDeadlineMs")? {
                config = config.with_retry_deadline(std::time::Duration::from_millis(ms));
            }
            let path = |p: Option<String>| p.filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
            config = config
                .with_tls_files(path(o.ca_file), path(o.client_cert_file), path(o.client_key_file))
                .map_err(to_js)?;
        }
        // `connect` only validates and prepares lazy connections (no I/O), but needs to
        // run inside the tokio runtime that will carry them.
        let client = block_on(DlsClient::connect(config)).map_err(to_js)?;
        Ok(NativeClient { client })
    }

    /// A transaction that begins with its first call (nothing is sent here): when that
    /// call is an acquire, the begin and the lock go in one request.
    #[napi]
    pub fn transaction(&self, opts: Option<TxOptions>) -> Result<NativeTransaction> {
        let tx = self.client.transaction(tx_options(opts)?).map_err(to_js)?;
        Ok(NativeTransaction::new(tx))
    }

    #[napi(ts_return_type = "Promise<NativeTransaction>")]
    pub fn begin_transaction<'env>(&self, env: &'env Env, opts: Option<TxOptions>) -> Result<Unknown<'env>> {
        let (client, opts) = (self.client.clone(), tx_options(opts));
        promise(env, async move {
            let tx = client.begin_transaction(opts?).await.map_err(to_js)?;
            Ok(NativeTransaction::new(tx))
        })
    }

    #[napi(ts_return_type = "Promise<JsTransactionStatus>")]
    pub fn transaction_status<'env>(&self, env: &'env Env, id: BigInt) -> Result<Unknown<'env>> {
        let (client, id) = (self.client.clone(), u64_of(&id, "transaction id"));
        promise(env, async move { client.transaction_status(id?).await.map(JsTransactionStatus::from).map_err(to_js) })
    }

    /// Follows who holds `namespace`/`key`; resolves once attached.
    #[napi]
    pub async fn watch_key(&self, namespace: String, key: String) -> Result<NativeKeyWatch> {
        let watch = self.client.watch_key(&namespace, &key).await.map_err(to_js)?;
        Ok(NativeKeyWatch { watch: Arc::new(Mutex::new(Some(watch))) })
    }

    /// Whether `fencing_token` is the current grant of the key (linearizable, no transaction).
    #[napi(ts_return_type = "Promise<JsTokenCheck>")]
    pub fn verify_fencing_token<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        fencing_token: BigInt,
    ) -> Result<Unknown<'env>> {
        let (client, token) = (self.client.clone(), u64_of(&fencing_token, "fencingToken"));
        promise(env, async move {
            client.verify_fencing_token(&namespace, &key, token?).await.map(JsTokenCheck::from).map_err(to_js)
        })
    }

    /// Operator call: aborts any transaction; returns its final state.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn abort_transaction<'env>(&self, env: &'env Env, id: BigInt, reason: String) -> Result<Unknown<'env>> {
        let (client, id) = (self.client.clone(), u64_of(&id, "transaction id"));
        promise(env, async move {
            let state = client.abort_transaction(id?, &reason).await.map_err(to_js)?;
            Ok(state.as_str().to_string())
        })
    }

    /// Operator call: holders, waiters and lock-delays of every key under the prefix.
    #[napi(ts_return_type = "Promise<JsKeyLocks[]>")]
    pub fn list_locks<'env>(&self, env: &'env Env, namespace_prefix: Option<String>) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let locks = client.list_locks(namespace_prefix.as_deref().unwrap_or("")).await.map_err(to_js)?;
            Ok(locks.into_iter().map(JsKeyLocks::from).collect::<Vec<_>>())
        })
    }

    /// Operator call: sets the lock-delay of namespaces starting with the prefix (0 removes
    /// the rule); resolves with the prefix's previous delay in ms.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn set_lock_delay<'env>(
        &self,
        env: &'env Env,
        namespace_prefix: String,
        delay_ms: f64,
    ) -> Result<Unknown<'env>> {
        let (client, delay_ms) = (self.client.clone(), ms_of(Some(delay_ms), "delayMs"));
        promise(env, async move {
            let delay = std::time::Duration::from_millis(delay_ms?.unwrap_or(0));
            let previous = client.set_lock_delay(&namespace_prefix, delay).await.map_err(to_js)?;
            Ok(previous.as_millis() as f64)
        })
    }

    /// Operator call: creates an API key kept by the cluster; resolves with its secret,
    /// shown only here.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn create_api_key<'env>(
        &self,
        env: &'env Env,
        name: String,
        opts: Option<ApiKeyOptions>,
    ) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        let o = opts.unwrap_or(ApiKeyOptions { namespace_prefixes: None, admin: None, expires_in_ms: None });
        let expires_in = ms_of(o.expires_in_ms, "expiresInMs").map(|ms| ms.map(std::time::Duration::from_millis));
        promise(env, async move {
            let key = caerus_core::NewApiKey {
                namespace_prefixes: o.namespace_prefixes.unwrap_or_default(),
                admin: o.admin.unwrap_or(false),
                expires_in: expires_in?,
                ..Default::default()
            };
            Ok(client.create_api_key(&name, key).await.map_err(to_js)?.secret)
        })
    }

    /// Operator call: the cluster's API keys this admin key may manage (no secrets).
    #[napi(ts_return_type = "Promise<JsApiKeyInfo[]>")]
    pub fn list_api_keys<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let keys = client.list_api_keys().await.map_err(to_js)?;
            Ok(keys
                .into_iter()
                .map(|k| JsApiKeyInfo {
                    name: k.name,
                    namespace_prefixes: k.namespace_prefixes,
                    admin: k.admin,
                    expires_at_ms: k.expires_at_ms.map(|ms| ms as f64),
                    created_by: k.created_by,
                    created_at_ms: k.created_at_ms as f64,
                })
                .collect::<Vec<_>>())
        })
    }

    /// Operator call: revokes a cluster API key; every node refuses it once applied.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn revoke_api_key<'env>(&self, env: &'env Env, name: String) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move { client.revoke_api_key(&name).await.map_err(to_js) })
    }

    /// Operator call: a new secret for a cluster API key (resolves with it); the old one
    /// works `graceMs` longer.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn rotate_api_key<'env>(&self, env: &'env Env, name: String, grace_ms: Option<f64>) -> Result<Unknown<'env>> {
        let (client, grace) = (self.client.clone(), ms_of(grace_ms, "graceMs"));
        promise(env, async move {
            let grace = std::time::Duration::from_millis(grace?.unwrap_or(0));
            Ok(client.rotate_api_key(&name, grace).await.map_err(to_js)?.secret)
        })
    }

    /// Operator call: the lock-delay rules, sorted by prefix.
    #[napi(ts_return_type = "Promise<JsLockDelayRule[]>")]
    pub fn lock_delays<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let rules = client.lock_delays().await.map_err(to_js)?;
            Ok(rules
                .into_iter()
                .map(|r| JsLockDelayRule { namespace_prefix: r.namespace_prefix, delay_ms: r.delay.as_millis() as f64 })
                .collect::<Vec<_>>())
        })
    }

    #[napi]
    pub async fn watch_events(&self, opts: Option<EventWatchOptions>) -> Result<NativeEventStream> {
        let mut w = WatchOptions::new();
        if let Some(o) = opts {
            if let Some(seq) = o.from_sequence {
                w = w.with_from_sequence(u64_of(&seq, "fromSequence")?);
            }
            for p in o.namespace_prefixes.unwrap_or_default() {
                w = w.with_namespace_prefix(p);
            }
            for k in o.kinds.unwrap_or_default() {
                w = w.with_kind(k.parse::<EventKind>().map_err(|e| to_js(e.into()))?);
            }
            w = w.with_only_new(o.only_new.unwrap_or(false));
        }
        let stream = self.client.watch_events(w).await.map_err(to_js)?;
        let backlog_end = stream.backlog_end();
        Ok(NativeEventStream {
            stream: Arc::new(Mutex::new(Some(stream))),
            closed: Arc::new(watch::channel(false).0),
            backlog_end,
        })
    }
}

/// A running transaction (`Transaction` in the JS wrapper).
#[napi]
pub struct NativeTransaction {
    tx: Transaction,
    /// Turns true when this handle committed or aborted, which ends `on_lost`'s wait.
    ended: Arc<watch::Sender<bool>>,
}

impl NativeTransaction {
    fn new(tx: Transaction) -> Self {
        NativeTransaction { tx, ended: Arc::new(watch::channel(false).0) }
    }

    /// Commit or abort; a success silences `on_lost` for good.
    fn end<'env>(&self, env: &'env Env, commit: bool) -> Result<Unknown<'env>> {
        let (tx, ended) = (self.tx.clone(), Arc::clone(&self.ended));
        promise(env, async move {
            let result = if commit { tx.commit().await } else { tx.abort().await };
            if result.is_ok() {
                ended.send_replace(true);
            }
            result.map_err(to_js)
        })
    }
}

#[napi]
impl NativeTransaction {
    #[napi(getter)]
    pub fn id(&self) -> BigInt {
        BigInt::from(self.tx.id())
    }

    #[napi(getter)]
    pub fn lease_ms(&self) -> f64 {
        self.tx.lease().as_millis() as f64
    }

    #[napi(ts_return_type = "Promise<JsLock>")]
    // One positional argument per option: index.js is the only caller.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_lock<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        mode: Option<String>,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let opts = acquire_options(timeout_ms).map(|o| match traceparent {
            Some(tp) => o.with_traceparent(tp, tracestate),
            None => o,
        });
        let mode = mode_of(mode);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let lock = tx.acquire_lock_with_progress(&namespace, &key, mode?, opts?, progress).await;
                lock.map(JsLock::from).map_err(to_js)
            })
            .await
        })
    }

    /// One permit of the semaphore `namespace`/`key` of `permits` permits.
    #[napi(ts_return_type = "Promise<JsLock>")]
    // One positional argument per option: index.js is the only caller.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_permit<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        permits: u32,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let opts = acquire_options(timeout_ms);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let lock = tx.acquire_permit_with_progress(&namespace, &key, permits, opts?, progress).await;
                lock.map(JsLock::from).map_err(to_js)
            })
            .await
        })
    }

    /// Every lock of `locks` together or none (all-or-nothing, one token per lock).
    #[napi(ts_return_type = "Promise<JsLock[]>")]
    pub fn acquire_locks<'env>(
        &self,
        env: &'env Env,
        locks: Vec<JsLockRequest>,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let wanted: Result<Vec<LockRequest>> =
            locks.into_iter().map(|l| Ok(LockRequest::new(l.namespace, l.key, mode_of(l.mode)?))).collect();
        let opts = acquire_options(timeout_ms);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let granted = tx.acquire_locks_with_progress(&wanted?, opts?, progress).await.map_err(to_js)?;
                Ok(granted.into_iter().map(JsLock::from).collect::<Vec<_>>())
            })
            .await
        })
    }

    /// Claims the schedule slot (of `period_ms`, aligned to the Unix epoch, by the cluster's
    /// clock) of a lock the transaction holds EXCLUSIVE.
    #[napi(ts_return_type = "Promise<JsSlotClaim>")]
    pub fn claim_slot<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        period_ms: f64,
        retry_failed: bool,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let period = ms_of(Some(period_ms), "periodMs").map(|ms| std::time::Duration::from_millis(ms.unwrap_or(0)));
        promise(env, async move {
            let claim = tx.claim_slot(&namespace, &key, period?, retry_failed).await.map_err(to_js)?;
            Ok(JsSlotClaim::from(claim))
        })
    }

    /// Records how the run of a claimed slot ended; resolves with the cluster's record.
    #[napi(ts_return_type = "Promise<JsSlotRun>")]
    pub fn finish_slot<'env>(
        &self,
        env: &'env Env,
        claim: JsSlotClaim,
        outcome: String,
        exit_code: Option<i32>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let outcome = slot_outcome(&outcome, exit_code);
        let claim = SlotClaim {
            namespace: claim.namespace,
            key: claim.key,
            slot: claim.slot as u64,
            run: claim.run,
            attempt: claim.attempt,
            last_run: None,
        };
        promise(env, async move { Ok(JsSlotRun::from(tx.finish_slot(&claim, outcome?).await.map_err(to_js)?)) })
    }

    /// EXCLUSIVE -> SHARED_READ in place, same token; null if the lock was not held.
    #[napi(ts_return_type = "Promise<JsLock | null>")]
    pub fn downgrade<'env>(&self, env: &'env Env, namespace: String, key: String) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.downgrade(&namespace, &key).await.map(|l| l.map(JsLock::from)).map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env, namespace: String, key: String) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.release(&namespace, &key).await.map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<JsTransactionStatus>")]
    pub fn status<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.status().await.map(JsTransactionStatus::from).map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        self.end(env, true)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn abort<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        self.end(env, false)
    }

    /// Stops the heartbeat without telling the server (after a failed abort).
    #[napi]
    pub fn abandon(&self) {
        self.tx.abandon();
    }

    /// Why the transaction was lost, or null while it is not.
    #[napi]
    pub fn lost_reason(&self) -> Option<JsLostReason> {
        self.tx.lost_reason().map(Into::into)
    }

    /// Calls `callback(reason)` once when core's lost signal fires; never after this
    /// handle committed or aborted. The callback is a weak threadsafe function: waiting for
    /// the signal does not keep the Node process alive, and the task holds only the signal
    /// channel, not the transaction.
    #[napi]
    pub fn on_lost(&self, callback: Callback<JsLostReason>) {
        let mut lost = self.tx.lost_signal();
        let mut ended = self.ended.subscribe();
        spawn(async move {
            let reason = tokio::select! {
                seen = lost.wait_for(Option::is_some) => seen.ok().and_then(|r| r.clone()),
                _ = ended.wait_for(|e| *e) => None,
            };
            if let Some(reason) = reason {
                callback.call(reason.into(), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
    }
}

/// A transaction holding a watched key.
#[napi(object)]
pub struct JsKeyHolder {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    pub fencing_token: BigInt,
    pub since_ms: f64,
}

impl From<caerus_core::KeyHolder> for JsKeyHolder {
    fn from(h: caerus_core::KeyHolder) -> Self {
        JsKeyHolder {
            transaction_id: BigInt::from(h.transaction_id),
            transaction_name: h.transaction_name,
            mode: h.mode.as_str().to_string(),
            fencing_token: BigInt::from(h.fencing_token),
            since_ms: h.since_ms as f64,
        }
    }
}

/// One change of a watched key's holders.
#[napi(object)]
pub struct JsKeyChange {
    /// `GRANTED`, `RELEASED`, `EXPIRED`, `REVOKED` or `DOWNGRADED`.
    pub kind: String,
    pub holder: JsKeyHolder,
    pub end_cause: Option<String>,
}

/// The holders of a watched key and what changed since the previous update.
#[napi(object)]
pub struct JsKeyUpdate {
    pub holders: Vec<JsKeyHolder>,
    pub changes: Vec<JsKeyChange>,
    pub initial: bool,
}

fn change_kind(k: caerus_core::KeyChangeKind) -> &'static str {
    match k {
        caerus_core::KeyChangeKind::Granted => "GRANTED",
        caerus_core::KeyChangeKind::Released => "RELEASED",
        caerus_core::KeyChangeKind::Expired => "EXPIRED",
        caerus_core::KeyChangeKind::Revoked => "REVOKED",
        caerus_core::KeyChangeKind::Downgraded => "DOWNGRADED",
        _ => "UNKNOWN",
    }
}

impl From<caerus_core::KeyUpdate> for JsKeyUpdate {
    fn from(u: caerus_core::KeyUpdate) -> Self {
        JsKeyUpdate {
            holders: u.holders.into_iter().map(JsKeyHolder::from).collect(),
            changes: u
                .changes
                .into_iter()
                .map(|c| JsKeyChange {
                    kind: change_kind(c.kind).to_string(),
                    holder: c.holder.into(),
                    end_cause: c.end_cause.map(|e| e.as_str().to_string()),
                })
                .collect(),
            initial: u.initial,
        }
    }
}

/// A key watch (`watchKey` in the JS wrapper turns it into an async iterator).
#[napi]
pub struct NativeKeyWatch {
    watch: Arc<Mutex<Option<caerus_core::KeyWatch>>>,
}

#[napi]
impl NativeKeyWatch {
    /// The next update, or null once the watch ended. Rejects (once) when it ends with an error.
    #[napi]
    pub async fn next(&self) -> Result<Option<JsKeyUpdate>> {
        let mut guard = self.watch.lock().await;
        let Some(watch) = guard.as_mut() else { return Ok(None) };
        match watch.next_update().await {
            Some(Ok(u)) => Ok(Some(u.into())),
            Some(Err(e)) => {
                *guard = None;
                Err(to_js(e))
            }
            None => {
                *guard = None;
                Ok(None)
            }
        }
    }

    /// Stops the watch (the server stream is dropped); a pending `next` still finishes.
    #[napi]
    pub fn close(&self) {
        if let Ok(mut guard) = self.watch.try_lock() {
            *guard = None;
        }
    }
}

/// An event watch (`watchEvents` in the JS wrapper turns it into an async iterator).
#[napi]
pub struct NativeEventStream {
    stream: Arc<Mutex<Option<EventStream>>>,
    closed: Arc<watch::Sender<bool>>,
    backlog_end: Option<u64>,
}

#[napi]
impl NativeEventStream {
    /// The last sequence committed when the watch attached (null if the server did not say).
    #[napi(getter)]
    pub fn backlog_end(&self) -> Option<BigInt> {
        self.backlog_end.map(BigInt::from)
    }

    /// The next event, or null once the stream is closed. Rejects (once) when the
    /// stream ends with an error.
    #[napi]
    pub async fn next(&self) -> Result<Option<JsEvent>> {
        let mut closed = self.closed.subscribe();
        if *closed.borrow() {
            return Ok(None);
        }
        let mut guard = tokio::select! {
            g = self.stream.lock() => g,
            _ = closed.wait_for(|c| *c) => return Ok(None),
        };
        let Some(stream) = guard.as_mut() else { return Ok(None) };
        let next = tokio::select! {
            n = stream.next_event() => n,
            _ = closed.wait_for(|c| *c) => return Ok(None),
        };
        match next {
            Some(Ok(event)) => Ok(Some(event.into())),
            Some(Err(e)) => {
                *guard = None;
                Err(to_js(e))
            }
            None => {
                *guard = None;
                Ok(None)
            }
        }
    }

    /// Stops the watch: a pending `next` resolves with null and the server stream is dropped.
    #[napi]
    pub fn close(&self) {
        self.closed.send_replace(true);
        if let Ok(mut guard) = self.stream.try_lock() {
            *guard = None;
        }
    }
}

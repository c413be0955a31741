//! Kotlin and Swift SDKs of Caerus DLS: a thin uniffi layer over `caerus-core`.
//!
//! Every lock operation is a call into [`caerus_core`]: leader discovery, safe retries,
//! the heartbeat and the lost signal all live there. This crate only mirrors core's
//! values as uniffi records and enums, maps core's error to one flat [`DlsError`] with
//! the same codes as the Python and Node SDKs, and runs core's futures on a tokio runtime
//! of its own, so that the foreign side can await them as Kotlin `suspend` functions or
//! Swift `async` ones whatever executor drives them.
//!
//! The idiomatic layers (`withTransaction` in Kotlin and Swift) are written in those
//! languages next to the generated code; see `bindings/uniffi/README.md`.

use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use caerus_core as core;
use tokio::sync::{watch, Mutex};

uniffi::setup_scaffolding!("caerus_dls");

// ---------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------

/// The runtime that carries core's connections, heartbeats and calls. Foreign executors
/// (Kotlin coroutines, Swift tasks) poll the join handles of the tasks spawned on it.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("caerus-dls")
        .enable_all()
        .build()
        .expect("caerus-dls: cannot start the tokio runtime")
});

/// Aborts the spawned task when the foreign side drops the call (a cancelled coroutine
/// or Swift task), like dropping a core future would.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `fut` on [`RUNTIME`] and waits for it from whatever executor polls this future.
async fn on_runtime<T, F>(fut: F) -> Result<T, DlsError>
where
    F: Future<Output = Result<T, DlsError>> + Send + 'static,
    T: Send + 'static,
{
    let handle = RUNTIME.spawn(fut);
    let _guard = AbortOnDrop(handle.abort_handle());
    match handle.await {
        Ok(result) => result,
        Err(e) => Err(DlsError::Internal { message: format!("task failed: {e}") }),
    }
}

/// Runs a short future to completion from a synchronous foreign call. On a thread that is
/// already inside a tokio runtime (e.g. a `LostListener` callback constructing a client),
/// `Runtime::block_on` would panic, so the wait moves to a scoped thread there.
fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(|| RUNTIME.block_on(fut)).join().expect("caerus-dls: blocking call panicked"))
    } else {
        RUNTIME.block_on(fut)
    }
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Everything a Caerus DLS call can fail with: one variant per stable code of core's
/// `Error::code()` (the same codes as the Python and Node SDKs). The foreign exception's
/// message is the server's message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
#[uniffi(flat_error)]
pub enum DlsError {
    /// `LOCK_TIMEOUT`: the acquire timeout passed; the transaction is still active.
    LockTimeout { message: String },
    /// `DEADLOCK_VICTIM`: the server aborted the transaction to break a deadlock.
    DeadlockVictim { message: String },
    /// `TRANSACTION_LOST`: the transaction is no longer active; its locks are gone.
    TransactionLost { message: String },
    /// `TRANSACTION_NOT_FOUND`: the server does not know the transaction.
    TransactionNotFound { message: String },
    /// `INVALID_ARGUMENT`: a request field failed validation.
    InvalidArgument { message: String },
    /// `UNAUTHENTICATED`: the API key is missing or unknown.
    Unauthenticated { message: String },
    /// `PERMISSION_DENIED`: the API key may not use this namespace or transaction.
    PermissionDenied { message: String },
    /// `WAIT_CANCELLED`: the wait was withdrawn by a release of the same key.
    WaitCancelled { message: String },
    /// `ALREADY_WAITING`: the transaction already waits for another lock.
    AlreadyWaiting { message: String },
    /// `CURSOR_EXPIRED`: the event cursor is older than the server keeps.
    CursorExpired { message: String },
    /// `RESOURCE_EXHAUSTED`: a server limit (named in the message, with its flag) refused
    /// the request; nothing changed.
    ResourceExhausted { message: String },
    /// `UNAVAILABLE`: no leader could be reached before the retry deadline.
    Unavailable { message: String },
    /// `CONFIG`: the client configuration is invalid.
    Config { message: String },
    /// `INTERNAL`: anything else.
    Internal { message: String },
}

impl DlsError {
    /// The stable code, e.g. `"LOCK_TIMEOUT"`.
    pub fn code(&self) -> &'static str {
        match self {
            DlsError::LockTimeout { .. } => "LOCK_TIMEOUT",
            DlsError::DeadlockVictim { .. } => "DEADLOCK_VICTIM",
            DlsError::TransactionLost { .. } => "TRANSACTION_LOST",
            DlsError::TransactionNotFound { .. } => "TRANSACTION_NOT_FOUND",
            DlsError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            DlsError::Unauthenticated { .. } => "UNAUTHENTICATED",
            DlsError::PermissionDenied { .. } => "PERMISSION_DENIED",
            DlsError::WaitCancelled { .. } => "WAIT_CANCELLED",
            DlsError::AlreadyWaiting { .. } => "ALREADY_WAITING",
            DlsError::CursorExpired { .. } => "CURSOR_EXPIRED",
            DlsError::ResourceExhausted { .. } => "RESOURCE_EXHAUSTED",
            DlsError::Unavailable { .. } => "UNAVAILABLE",
            DlsError::Config { .. } => "CONFIG",
            DlsError::Internal { .. } => "INTERNAL",
        }
    }

    /// The server's (or client's) message, without the code.
    pub fn message(&self) -> &str {
        match self {
            DlsError::LockTimeout { message }
            | DlsError::DeadlockVictim { message }
            | DlsError::TransactionLost { message }
            | DlsError::TransactionNotFound { message }
            | DlsError::InvalidArgument { message }
            | DlsError::Unauthenticated { message }
            | DlsError::PermissionDenied { message }
            | DlsError::WaitCancelled { message }
            | DlsError::AlreadyWaiting { message }
            | DlsError::CursorExpired { message }
            | DlsError::ResourceExhausted { message }
            | DlsError::Unavailable { message }
            | DlsError::Config { message }
            | DlsError::Internal { message } => message,
        }
    }
}

/// A flat error crosses the boundary as its `Display`: the message alone, since the
/// variant already names the code.
impl std::fmt::Display for DlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for DlsError {}

impl From<core::Error> for DlsError {
    fn from(e: core::Error) -> Self {
        let message = e.message().to_string();
        match e.code() {
            "LOCK_TIMEOUT" => DlsError::LockTimeout { message },
            "DEADLOCK_VICTIM" => DlsError::DeadlockVictim { message },
            "TRANSACTION_LOST" => DlsError::TransactionLost { message },
            "TRANSACTION_NOT_FOUND" => DlsError::TransactionNotFound { message },
            "INVALID_ARGUMENT" => DlsError::InvalidArgument { message },
            "UNAUTHENTICATED" => DlsError::Unauthenticated { message },
            "PERMISSION_DENIED" => DlsError::PermissionDenied { message },
            "WAIT_CANCELLED" => DlsError::WaitCancelled { message },
            "ALREADY_WAITING" => DlsError::AlreadyWaiting { message },
            "CURSOR_EXPIRED" => DlsError::CursorExpired { message },
            "RESOURCE_EXHAUSTED" => DlsError::ResourceExhausted { message },
            "UNAVAILABLE" => DlsError::Unavailable { message },
            "CONFIG" => DlsError::Config { message },
            // INTERNAL and any code added to core later.
            code => {
                DlsError::Internal { message: if code == "INTERNAL" { message } else { format!("{code}: {message}") } }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LockMode {
    /// One holder at a time.
    Exclusive,
    /// Any number of SHARED_READ holders, no EXCLUSIVE one.
    SharedRead,
}

impl From<LockMode> for core::LockMode {
    fn from(m: LockMode) -> Self {
        match m {
            LockMode::Exclusive => core::LockMode::Exclusive,
            LockMode::SharedRead => core::LockMode::SharedRead,
        }
    }
}

impl From<core::LockMode> for LockMode {
    fn from(m: core::LockMode) -> Self {
        match m {
            core::LockMode::SharedRead => LockMode::SharedRead,
            _ => LockMode::Exclusive,
        }
    }
}

/// A granted lock.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Lock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// Cluster-wide, strictly increasing: hand it to the storage you protect.
    pub fencing_token: u64,
}

impl From<core::Lock> for Lock {
    fn from(l: core::Lock) -> Self {
        Lock { namespace: l.namespace, key: l.key, mode: l.mode.into(), fencing_token: l.fencing_token }
    }
}

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TransactionState {
    Active,
    Committed,
    Aborted,
    Expired,
}

impl From<core::TransactionState> for TransactionState {
    fn from(s: core::TransactionState) -> Self {
        match s {
            core::TransactionState::Active => TransactionState::Active,
            core::TransactionState::Committed => TransactionState::Committed,
            core::TransactionState::Expired => TransactionState::Expired,
            _ => TransactionState::Aborted,
        }
    }
}

/// The lock a transaction waits for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PendingLock {
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
    /// 1-based place in the key's queue.
    pub position: u32,
}

/// A transaction as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TransactionStatus {
    pub id: u64,
    pub state: TransactionState,
    pub name: Option<String>,
    pub priority: i32,
    pub lease_timeout_ms: u64,
    pub lease_remaining_ms: u64,
    pub locks: Vec<Lock>,
    pub waiting: Option<PendingLock>,
    pub end_reason: String,
}

impl From<core::TransactionStatus> for TransactionStatus {
    fn from(s: core::TransactionStatus) -> Self {
        TransactionStatus {
            id: s.id,
            state: s.state.into(),
            name: s.name,
            priority: s.priority,
            lease_timeout_ms: s.lease_timeout_ms,
            lease_remaining_ms: s.lease_remaining_ms,
            locks: s.locks.into_iter().map(Lock::from).collect(),
            waiting: s.waiting.map(|w| PendingLock {
                namespace: w.namespace,
                key: w.key,
                mode: w.mode.into(),
                position: w.position,
            }),
            end_reason: s.end_reason,
        }
    }
}

/// Why a transaction was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LostKind {
    Expired,
    Aborted,
    DeadlockVictim,
    /// The client could not confirm the lease in time (e.g. the cluster was unreachable).
    LeaseUnconfirmed,
    NotFound,
}

/// Why a transaction was lost, with the server's (or client's) message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LostReason {
    pub kind: LostKind,
    pub message: String,
}

impl From<core::LostReason> for LostReason {
    fn from(r: core::LostReason) -> Self {
        let kind = match r.kind {
            core::LostKind::Expired => LostKind::Expired,
            core::LostKind::Aborted => LostKind::Aborted,
            core::LostKind::DeadlockVictim => LostKind::DeadlockVictim,
            core::LostKind::NotFound => LostKind::NotFound,
            _ => LostKind::LeaseUnconfirmed,
        };
        LostReason { kind, message: r.message }
    }
}

/// Connection settings. Empty `endpoints` and a null `api_key` fall back to
/// `DLS_ENDPOINTS` / `CAERUS_API_KEY`, then `127.0.0.1:7070` and no key.
/// TLS: `https://host:port` endpoints (a bare `host:port` means TLS once a CA file or a
/// client certificate is set); the CA file is the cluster CA (PEM) the nodes'
/// certificates must chain to, the client certificate and key (PEM) are for nodes started
/// with `--tls-client-ca`. Null TLS files fall back to `DLS_CA_FILE`,
/// `DLS_CLIENT_CERT_FILE` and `DLS_CLIENT_KEY_FILE`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ClientConfig {
    #[uniffi(default)]
    pub endpoints: Vec<String>,
    #[uniffi(default)]
    pub api_key: Option<String>,
    #[uniffi(default)]
    pub connect_timeout_ms: Option<u64>,
    #[uniffi(default)]
    pub request_timeout_ms: Option<u64>,
    #[uniffi(default)]
    pub retry_deadline_ms: Option<u64>,
    #[uniffi(default)]
    pub ca_file: Option<String>,
    #[uniffi(default)]
    pub client_cert_file: Option<String>,
    #[uniffi(default)]
    pub client_key_file: Option<String>,
}

impl TryFrom<ClientConfig> for core::ClientConfig {
    type Error = core::Error;

    fn try_from(c: ClientConfig) -> Result<Self, core::Error> {
        let mut config = core::ClientConfig::from_env();
        if !c.endpoints.is_empty() {
            config.endpoints = c.endpoints;
        }
        if let Some(key) = c.api_key.filter(|k| !k.is_empty()) {
            config = config.with_api_key(key);
        }
        if let Some(ms) = c.connect_timeout_ms {
            config = config.with_connect_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = c.request_timeout_ms {
            config = config.with_request_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = c.retry_deadline_ms {
            config = config.with_retry_deadline(Duration::from_millis(ms));
        }
        let path = |p: Option<String>| p.filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
        config.with_tls_files(path(c.ca_file), path(c.client_cert_file), path(c.client_key_file))
    }
}

/// Options of a transaction; null fields take core's defaults.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TransactionOptions {
    /// Lease timeout in milliseconds (heartbeats keep it alive).
    #[uniffi(default)]
    pub timeout_ms: Option<u64>,
    /// Deadlock victim choice: lower priority is aborted first.
    #[uniffi(default)]
    pub priority: Option<i32>,
    /// A label shown by `dls locks` / `dls txn show` and in events.
    #[uniffi(default)]
    pub name: Option<String>,
}

impl From<TransactionOptions> for core::TransactionOptions {
    fn from(o: TransactionOptions) -> Self {
        let mut out = core::TransactionOptions::default();
        if let Some(ms) = o.timeout_ms {
            out = out.with_timeout_ms(ms);
        }
        if let Some(p) = o.priority {
            out = out.with_priority(p);
        }
        if let Some(n) = o.name {
            out = out.with_name(n);
        }
        out
    }
}

/// Kinds of events in the replicated log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum EventKind {
    DeadlockResolved,
    TransactionExpired,
    TransactionAborted,
    LockRevoked,
    /// A kind this SDK does not know yet.
    Unknown,
}

impl From<core::EventKind> for EventKind {
    fn from(k: core::EventKind) -> Self {
        match k {
            core::EventKind::DeadlockResolved => EventKind::DeadlockResolved,
            core::EventKind::TransactionExpired => EventKind::TransactionExpired,
            core::EventKind::TransactionAborted => EventKind::TransactionAborted,
            core::EventKind::LockRevoked => EventKind::LockRevoked,
            #[allow(unreachable_patterns)]
            _ => EventKind::Unknown,
        }
    }
}

/// A member of a deadlock cycle.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CycleMember {
    pub transaction_id: u64,
    pub transaction_name: String,
    pub priority: i32,
    /// The lock it waited for.
    pub namespace: String,
    pub key: String,
    pub mode: LockMode,
}

/// What an event is about, by kind.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum EventDetail {
    DeadlockResolved {
        cycle: Vec<CycleMember>,
        victim_transaction_id: u64,
        /// `LOWEST_PRIORITY_THEN_YOUNGEST`, `YOUNGEST` or `OLDEST`.
        policy: String,
    },
    TransactionExpired {
        transaction_id: u64,
        transaction_name: String,
        released_locks: Vec<Lock>,
    },
    TransactionAborted {
        transaction_id: u64,
        transaction_name: String,
        reason: String,
        operator: String,
        released_locks: Vec<Lock>,
    },
    LockRevoked {
        transaction_id: u64,
        namespace: String,
        key: String,
        mode: LockMode,
        fencing_token: u64,
        cause: String,
    },
    /// A kind added to the server after this SDK.
    Unknown,
}

/// One entry of the replicated event log.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Event {
    /// Position in the log: starts at 1, +1 per event.
    pub sequence: u64,
    /// Leader wall clock, ms since the Unix epoch.
    pub time_ms: i64,
    pub kind: EventKind,
    pub namespaces: Vec<String>,
    pub detail: EventDetail,
}

impl From<core::Event> for Event {
    fn from(e: core::Event) -> Self {
        let kind = e.kind().into();
        let detail = match e.detail {
            core::EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
                EventDetail::DeadlockResolved {
                    cycle: cycle
                        .into_iter()
                        .map(|m| CycleMember {
                            transaction_id: m.transaction_id,
                            transaction_name: m.transaction_name,
                            priority: m.priority,
                            namespace: m.namespace,
                            key: m.key,
                            mode: m.mode.into(),
                        })
                        .collect(),
                    victim_transaction_id,
                    policy: policy.as_str().to_string(),
                }
            }
            core::EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
                EventDetail::TransactionExpired {
                    transaction_id,
                    transaction_name,
                    released_locks: released_locks.into_iter().map(Lock::from).collect(),
                }
            }
            core::EventDetail::TransactionAborted {
                transaction_id,
                transaction_name,
                reason,
                operator,
                released_locks,
            } => EventDetail::TransactionAborted {
                transaction_id,
                transaction_name,
                reason,
                operator,
                released_locks: released_locks.into_iter().map(Lock::from).collect(),
            },
            core::EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
                EventDetail::LockRevoked {
                    transaction_id,
                    namespace,
                    key,
                    mode: mode.into(),
                    fencing_token,
                    cause: cause.map(|c| c.as_str().to_string()).unwrap_or_default(),
                }
            }
            _ => EventDetail::Unknown,
        };
        Event { sequence: e.sequence, time_ms: e.time_ms, kind, namespaces: e.namespaces, detail }
    }
}

/// Filters of an event watch.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct WatchOptions {
    /// First sequence wanted (0 = the oldest the server keeps).
    #[uniffi(default = 0)]
    pub from_sequence: u64,
    /// Only events touching a namespace with one of these prefixes (empty = all).
    #[uniffi(default)]
    pub namespace_prefixes: Vec<String>,
    /// Only these kinds (empty = all).
    #[uniffi(default)]
    pub kinds: Vec<EventKind>,
    /// Skip the backlog: only events committed after the watch attaches.
    #[uniffi(default = false)]
    pub only_new: bool,
}

impl From<WatchOptions> for core::WatchOptions {
    fn from(o: WatchOptions) -> Self {
        let mut w = core::WatchOptions::new().with_from_sequence(o.from_sequence).with_only_new(o.only_new);
        for p in o.namespace_prefixes {
            w = w.with_namespace_prefix(p);
        }
        for k in o.kinds {
            let kind = match k {
                EventKind::DeadlockResolved => core::EventKind::DeadlockResolved,
                EventKind::TransactionExpired => core::EventKind::TransactionExpired,
                EventKind::TransactionAborted => core::EventKind::TransactionAborted,
                EventKind::LockRevoked => core::EventKind::LockRevoked,
                EventKind::Unknown => continue,
            };
            w = w.with_kind(kind);
        }
        w
    }
}

// ---------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------

/// Told once when a transaction is lost (lease expired, aborted, deadlock victim, lease
/// unconfirmed). Implemented in Kotlin / Swift; called on a runtime thread of the SDK, so
/// hand the work over to your own executor if it is long.
#[uniffi::export(with_foreign)]
pub trait LostListener: Send + Sync {
    /// The transaction's locks may already belong to someone else: stop the work.
    fn on_lost(&self, reason: LostReason);
}

/// Connection to a cluster.
#[derive(uniffi::Object)]
pub struct DlsClient {
    client: core::DlsClient,
}

#[uniffi::export]
impl DlsClient {
    /// Validates the configuration and prepares lazy connections (no I/O yet).
    #[uniffi::constructor]
    pub fn new(config: ClientConfig) -> Result<Arc<Self>, DlsError> {
        let config = core::ClientConfig::try_from(config)?;
        let client = block_on(core::DlsClient::connect(config))?;
        Ok(Arc::new(DlsClient { client }))
    }

    /// A client configured from `DLS_ENDPOINTS`, `CAERUS_API_KEY` and the TLS variables.
    #[uniffi::constructor]
    pub fn from_env() -> Result<Arc<Self>, DlsError> {
        let client = block_on(core::DlsClient::connect(core::ClientConfig::from_env()))?;
        Ok(Arc::new(DlsClient { client }))
    }

    /// Begins a transaction; core heartbeats it until it commits, aborts or is lost.
    pub async fn begin_transaction(&self, options: TransactionOptions) -> Result<Arc<Transaction>, DlsError> {
        let client = self.client.clone();
        let tx = on_runtime(async move { Ok(client.begin_transaction(options.into()).await?) }).await?;
        Ok(Arc::new(Transaction { tx, ended: Arc::new(watch::channel(false).0) }))
    }

    /// Any transaction's status, by id.
    pub async fn transaction_status(&self, id: u64) -> Result<TransactionStatus, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.transaction_status(id).await?.into()) }).await
    }

    /// Operator call (admin key on a server with keys): aborts any transaction and
    /// returns its final state.
    pub async fn abort_transaction(&self, id: u64, reason: String) -> Result<TransactionState, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.abort_transaction(id, &reason).await?.into()) }).await
    }

    /// Follows the event log from `options.from_sequence`, across leader changes.
    pub async fn watch_events(&self, options: WatchOptions) -> Result<Arc<EventStream>, DlsError> {
        let client = self.client.clone();
        let stream = on_runtime(async move { Ok(client.watch_events(options.into()).await?) }).await?;
        let backlog_end = stream.backlog_end();
        Ok(Arc::new(EventStream {
            stream: Arc::new(Mutex::new(Some(stream))),
            closed: Arc::new(watch::channel(false).0),
            backlog_end,
        }))
    }
}

/// A running transaction. Its lease is heartbeated in Rust until it commits, aborts or
/// is lost.
#[derive(uniffi::Object)]
pub struct Transaction {
    tx: core::Transaction,
    /// Turns true once this handle committed or aborted, which silences the lost listener.
    ended: Arc<watch::Sender<bool>>,
}

#[uniffi::export]
impl Transaction {
    /// The server's id of the transaction.
    pub fn id(&self) -> u64 {
        self.tx.id()
    }

    /// The lease the server granted, in milliseconds.
    pub fn lease_ms(&self) -> u64 {
        self.tx.lease().as_millis() as u64
    }

    /// Waits for the lock in FIFO order, up to `timeout_ms` (null: the server's default).
    /// Throws `LockTimeout` (the transaction stays active) or `DeadlockVictim`.
    #[uniffi::method(default(timeout_ms))]
    pub async fn acquire_lock(
        &self,
        namespace: String,
        key: String,
        mode: LockMode,
        timeout_ms: Option<u64>,
    ) -> Result<Lock, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move {
            let mut opts = core::AcquireOptions::default();
            if let Some(ms) = timeout_ms {
                opts = opts.with_timeout_ms(ms);
            }
            Ok(tx.acquire_lock(&namespace, &key, mode.into(), opts).await?.into())
        })
        .await
    }

    /// Releases one lock (or withdraws the wait for it); false if it was not held.
    pub async fn release(&self, namespace: String, key: String) -> Result<bool, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.release(&namespace, &key).await?) }).await
    }

    /// The transaction as the leader sees it.
    pub async fn status(&self) -> Result<TransactionStatus, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.status().await?.into()) }).await
    }

    /// Commits: releases every lock and stops the heartbeat.
    pub async fn commit(&self) -> Result<(), DlsError> {
        let tx = self.tx.clone();
        let result = on_runtime(async move { Ok(tx.commit().await?) }).await;
        if result.is_ok() {
            self.ended.send_replace(true);
        }
        result
    }

    /// Aborts: releases every lock and stops the heartbeat.
    pub async fn abort(&self) -> Result<(), DlsError> {
        let tx = self.tx.clone();
        let result = on_runtime(async move { Ok(tx.abort().await?) }).await;
        if result.is_ok() {
            self.ended.send_replace(true);
        }
        result
    }

    /// True once the transaction is lost.
    pub fn is_lost(&self) -> bool {
        self.tx.is_lost()
    }

    /// Why the transaction was lost, or null while it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.tx.lost_reason().map(Into::into)
    }

    /// Returns when the transaction is lost; never if it ends normally, so race it against
    /// the work it guards (cancel the call to stop waiting).
    pub async fn await_lost(&self) -> LostReason {
        let tx = self.tx.clone();
        match on_runtime(async move { Ok(tx.lost().await) }).await {
            Ok(reason) => reason.into(),
            // Only a failed runtime task gets here.
            Err(e) => LostReason { kind: LostKind::LeaseUnconfirmed, message: e.to_string() },
        }
    }

    /// Calls `listener.on_lost(reason)` once if the transaction is lost; never after this
    /// handle committed or aborted. Each call adds a listener.
    pub fn set_lost_listener(&self, listener: Arc<dyn LostListener>) {
        let mut lost = self.tx.lost_signal();
        let mut ended = self.ended.subscribe();
        RUNTIME.spawn(async move {
            let reason = tokio::select! {
                seen = lost.wait_for(Option::is_some) => seen.ok().and_then(|r| r.clone()),
                _ = ended.wait_for(|e| *e) => None,
            };
            if let Some(reason) = reason {
                listener.on_lost(reason.into());
            }
        });
    }
}

/// An event watch: call `next()` until it returns null; `cancel()` stops it.
#[derive(uniffi::Object)]
pub struct EventStream {
    stream: Arc<Mutex<Option<core::EventStream>>>,
    closed: Arc<watch::Sender<bool>>,
    backlog_end: Option<u64>,
}

#[uniffi::export]
impl EventStream {
    /// The last sequence committed when the watch attached (null if the server did not say).
    pub fn backlog_end(&self) -> Option<u64> {
        self.backlog_end
    }

    /// The next event, or null once the stream is closed. Throws (once) when the stream
    /// ends with an error, e.g. `CursorExpired`.
    pub async fn next(&self) -> Result<Option<Event>, DlsError> {
        let stream = Arc::clone(&self.stream);
        let mut closed = self.closed.subscribe();
        on_runtime(async move {
            if *closed.borrow() {
                return Ok(None);
            }
            let mut guard = tokio::select! {
                g = stream.lock() => g,
                _ = closed.wait_for(|c| *c) => return Ok(None),
            };
            let Some(s) = guard.as_mut() else { return Ok(None) };
            let next = tokio::select! {
                n = s.next_event() => n,
                _ = closed.wait_for(|c| *c) => return Ok(None),
            };
            match next {
                Some(Ok(event)) => Ok(Some(event.into())),
                Some(Err(e)) => {
                    *guard = None;
                    Err(e.into())
                }
                None => {
                    *guard = None;
                    Ok(None)
                }
            }
        })
        .await
    }

    /// Stops the watch: a pending `next()` returns null and the server stream is dropped.
    pub fn cancel(&self) {
        self.closed.send_replace(true);
        if let Ok(mut guard) = self.stream.try_lock() {
            *guard = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_code_maps_to_the_same_code() {
        let cases = [
            core::Error::LockTimeout { message: "m".into() },
            core::Error::DeadlockVictim { message: "m".into(), deadlock: None },
            core::Error::TransactionLost { message: "m".into(), cause: None },
            core::Error::TransactionNotFound { message: "m".into() },
            core::Error::InvalidArgument { message: "m".into() },
            core::Error::Unauthenticated { message: "m".into() },
            core::Error::PermissionDenied { message: "m".into() },
            core::Error::WaitCancelled { message: "m".into() },
            core::Error::AlreadyWaiting { message: "m".into() },
            core::Error::CursorExpired { message: "m".into() },
            core::Error::ResourceExhausted { message: "m".into() },
            core::Error::Unavailable { message: "m".into() },
            core::Error::Config { message: "m".into() },
            core::Error::Internal { message: "m".into() },
        ];
        for e in cases {
            let mapped = DlsError::from(e.clone());
            assert_eq!(mapped.code(), e.code());
            assert_eq!(mapped.to_string(), "m");
        }
    }

    #[test]
    fn client_can_be_built_inside_a_runtime_thread() {
        let built = RUNTIME.block_on(async {
            tokio::spawn(async {
                DlsClient::new(ClientConfig {
                    endpoints: vec!["127.0.0.1:1".into()],
                    api_key: None,
                    connect_timeout_ms: None,
                    request_timeout_ms: None,
                    retry_deadline_ms: None,
                    ca_file: None,
                    client_cert_file: None,
                    client_key_file: None,
                })
                .is_ok()
            })
            .await
            .unwrap()
        });
        assert!(built);
    }

    #[test]
    fn config_falls_back_to_defaults() {
        let c: core::ClientConfig = ClientConfig {
            endpoints: vec!["10.0.0.1:7070".into()],
            api_key: None,
            connect_timeout_ms: Some(100),
            request_timeout_ms: None,
            retry_deadline_ms: None,
            ca_file: Some("ca.pem".into()),
            client_cert_file: None,
            client_key_file: None,
        }
        .try_into()
        .unwrap();
        assert_eq!(c.endpoints, vec!["10.0.0.1:7070".to_string()]);
        assert_eq!(c.connect_timeout, Duration::from_millis(100));
        assert_eq!(c.ca_file, Some("ca.pem".into()));
    }
}

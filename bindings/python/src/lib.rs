//! `caerus._native`: the Python extension of Caerus DLS, a thin layer over `caerus-core`.
//!
//! Every call goes to the core client; nothing here retries, heartbeats or decides about
//! locks. Each operation exists twice: `name` returns an asyncio awaitable (the future
//! runs on the shared tokio runtime), `name_blocking` runs the same future to completion
//! with the GIL released. The Python package `caerus` builds its asyncio and sync APIs on
//! top of these.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caerus_core as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::Mutex;

/// The tokio runtime shared by the awaitables and the blocking calls; it also runs the
/// transactions' heartbeats, so they go on while Python code sleeps or blocks.
fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// The one mapping from `caerus_core::Error` to the Python hierarchy: the exception class
/// is chosen by `caerus.errors._from_code` from the stable code.
fn to_py_err(error: core::Error) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("caerus.errors")
            .and_then(|m| m.getattr("_from_code"))
            .and_then(|f| f.call1((error.code(), error.message())));
        match made {
            Ok(exception) => PyErr::from_value(exception),
            Err(import_failed) => import_failed,
        }
    })
}

/// Turns a core future into an asyncio awaitable.
fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, core::Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move { fut.await.map_err(to_py_err) })
}

/// Runs a core future to completion on the runtime with the GIL released. Every 100 ms it
/// takes the GIL back to let Python handle signals, so Ctrl-C interrupts a long wait (the
/// future is then dropped, which cancels the call).
fn blocking<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T, core::Error>> + Send,
    T: Send,
{
    let mut fut = Box::pin(fut);
    loop {
        let step = py
            .detach(|| runtime().block_on(async { tokio::time::timeout(Duration::from_millis(100), &mut fut).await }));
        match step {
            Ok(result) => return result.map_err(to_py_err),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}

fn parse_mode(mode: &Bound<'_, PyAny>) -> PyResult<core::LockMode> {
    if let Ok(mode) = mode.extract::<LockMode>() {
        return Ok(mode.into());
    }
    let name: String = match mode.getattr("value") {
        Ok(value) => value.extract()?,
        Err(_) => mode.extract()?,
    };
    name.parse::<core::LockMode>().map_err(|e| PyValueError::new_err(core::Error::from(e).message().to_string()))
}

fn millis(name: &str, value: Option<f64>, default: Duration) -> PyResult<Duration> {
    match value {
        None => Ok(default),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Duration::from_secs_f64(ms / 1000.0)),
        Some(ms) => Err(PyValueError::new_err(format!("{name} must be a positive number of milliseconds, got {ms}"))),
    }
}

/// How a lock is held: `EXCLUSIVE` (one holder) or `SHARED_READ` (any number of readers,
/// no writer).
#[pyclass(eq, eq_int, frozen, hash, from_py_object, module = "caerus")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum LockMode {
    /// Write lock: one holder at a time, no readers beside it.
    EXCLUSIVE,
    /// Read lock: any number of readers at once, no writer beside them.
    SHARED_READ,
}

#[pymethods]
impl LockMode {
    /// The wire name, `"EXCLUSIVE"` or `"SHARED_READ"`.
    #[getter]
    fn value(&self) -> &'static str {
        core::LockMode::from(*self).as_str()
    }

    fn __str__(&self) -> &'static str {
        self.value()
    }
}

impl From<LockMode> for core::LockMode {
    fn from(mode: LockMode) -> Self {
        match mode {
            LockMode::EXCLUSIVE => core::LockMode::Exclusive,
            LockMode::SHARED_READ => core::LockMode::SharedRead,
        }
    }
}

impl From<core::LockMode> for LockMode {
    fn from(mode: core::LockMode) -> Self {
        match mode {
            core::LockMode::Exclusive => LockMode::EXCLUSIVE,
            core::LockMode::SharedRead => LockMode::SHARED_READ,
        }
    }
}

/// A granted lock. `fencing_token` is cluster-wide and strictly increasing: pass it to the
/// storage you protect, which should reject writes with a lower token than it has seen.
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct Lock {
    /// The lock's namespace.
    namespace: String,
    /// The lock's key.
    key: String,
    /// The mode it is held in.
    mode: LockMode,
    /// The grant's fencing token.
    fencing_token: u64,
}

#[pymethods]
impl Lock {
    fn __repr__(&self) -> String {
        format!(
            "Lock(namespace={:?}, key={:?}, mode={}, fencing_token={})",
            self.namespace,
            self.key,
            self.mode.value(),
            self.fencing_token
        )
    }
}

impl From<core::Lock> for Lock {
    fn from(l: core::Lock) -> Self {
        Lock { namespace: l.namespace, key: l.key, mode: l.mode.into(), fencing_token: l.fencing_token }
    }
}

/// A lock request waiting in a key's queue.
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct PendingLock {
    /// The namespace waited for.
    namespace: String,
    /// The key waited for.
    key: String,
    /// The mode asked for.
    mode: LockMode,
    /// Place in the queue (0 = next).
    position: u32,
}

/// A transaction as the leader sees it.
#[pyclass(frozen, get_all, module = "caerus")]
pub struct TransactionStatus {
    /// The transaction id.
    id: u64,
    /// `"ACTIVE"`, `"COMMITTED"`, `"ABORTED"` or `"EXPIRED"`.
    state: String,
    /// Its label, if any.
    name: Option<String>,
    /// Its deadlock-victim priority.
    priority: i32,
    /// Its lease length.
    lease_timeout_ms: u64,
    /// Time left on the lease.
    lease_remaining_ms: u64,
    /// The locks it holds.
    locks: Vec<Lock>,
    /// The lock it waits for, if any.
    waiting: Option<PendingLock>,
    /// Why it ended ("" while active).
    end_reason: String,
}

#[pymethods]
impl TransactionStatus {
    fn __repr__(&self) -> String {
        format!("TransactionStatus(id={}, state={:?}, locks={})", self.id, self.state, self.locks.len())
    }
}

impl From<core::TransactionStatus> for TransactionStatus {
    fn from(s: core::TransactionStatus) -> Self {
        TransactionStatus {
            id: s.id,
            state: s.state.as_str().to_string(),
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

/// Why a transaction was lost. `kind` is `"EXPIRED"`, `"ABORTED"`, `"DEADLOCK_VICTIM"`,
/// `"LEASE_UNCONFIRMED"` or `"NOT_FOUND"`.
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct LostReason {
    /// What kind of loss.
    kind: String,
    /// Details, including the server's message when there is one.
    message: String,
}

#[pymethods]
impl LostReason {
    fn __repr__(&self) -> String {
        format!("LostReason(kind={:?}, message={:?})", self.kind, self.message)
    }

    fn __str__(&self) -> String {
        format!("{}: {}", self.kind, self.message)
    }
}

impl From<core::LostReason> for LostReason {
    fn from(r: core::LostReason) -> Self {
        LostReason { kind: r.kind.as_str().to_string(), message: r.message }
    }
}

/// One entry of the cluster's event log. `kind` is `"DEADLOCK_RESOLVED"`,
/// `"TRANSACTION_EXPIRED"`, `"TRANSACTION_ABORTED"` or `"LOCK_REVOKED"`; `detail` holds
/// the kind's fields as a dict (e.g. `transaction_id`, `fencing_token`, `cycle`).
#[pyclass(frozen, get_all, module = "caerus")]
pub struct Event {
    /// Position in the log: starts at 1, +1 per event.
    sequence: u64,
    /// Leader wall clock when proposed, ms since the Unix epoch.
    time_ms: i64,
    /// Namespaces the event touches.
    namespaces: Vec<String>,
    /// The event kind.
    kind: String,
    /// The kind's fields.
    detail: Py<PyDict>,
}

#[pymethods]
impl Event {
    fn __repr__(&self) -> String {
        format!("Event(sequence={}, kind={:?}, namespaces={:?})", self.sequence, self.kind, self.namespaces)
    }
}

fn lock_dicts<'py>(py: Python<'py>, locks: Vec<core::Lock>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    locks.into_iter().map(|l| Bound::new(py, Lock::from(l)).map(Bound::into_any)).collect()
}

fn event_to_py(py: Python<'_>, e: core::Event) -> PyResult<Event> {
    let kind = e.kind().as_str().to_string();
    let d = PyDict::new(py);
    match e.detail {
        core::EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
            let members = cycle
                .into_iter()
                .map(|m| {
                    let md = PyDict::new(py);
                    md.set_item("transaction_id", m.transaction_id)?;
                    md.set_item("transaction_name", m.transaction_name)?;
                    md.set_item("priority", m.priority)?;
                    md.set_item("namespace", m.namespace)?;
                    md.set_item("key", m.key)?;
                    md.set_item("mode", LockMode::from(m.mode))?;
                    Ok(md)
                })
                .collect::<PyResult<Vec<_>>>()?;
            d.set_item("cycle", members)?;
            d.set_item("victim_transaction_id", victim_transaction_id)?;
            d.set_item("policy", policy.as_str())?;
        }
        core::EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
            d.set_item("transaction_id", transaction_id)?;
            d.set_item("transaction_name", transaction_name)?;
            d.set_item("released_locks", lock_dicts(py, released_locks)?)?;
        }
        core::EventDetail::TransactionAborted {
            transaction_id,
            transaction_name,
            reason,
            operator,
            released_locks,
        } => {
            d.set_item("transaction_id", transaction_id)?;
            d.set_item("transaction_name", transaction_name)?;
            d.set_item("reason", reason)?;
            d.set_item("operator", operator)?;
            d.set_item("released_locks", lock_dicts(py, released_locks)?)?;
        }
        core::EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
            d.set_item("transaction_id", transaction_id)?;
            d.set_item("namespace", namespace)?;
            d.set_item("key", key)?;
            d.set_item("mode", LockMode::from(mode))?;
            d.set_item("fencing_token", fencing_token)?;
            d.set_item("cause", cause.map(|c| c.as_str()))?;
        }
        other => {
            d.set_item("unknown", format!("{other:?}"))?;
        }
    }
    Ok(Event { sequence: e.sequence, time_ms: e.time_ms, namespaces: e.namespaces, kind, detail: d.unbind() })
}

/// Holders and waiters of one key (from `list_locks`).
#[pyclass(frozen, get_all, module = "caerus")]
pub struct KeyLocks {
    /// The namespace.
    namespace: String,
    /// The key.
    key: String,
    /// Holders as dicts: transaction_id, transaction_name, mode, fencing_token, since_ms.
    holders: Py<PyAny>,
    /// Waiters as dicts: transaction_id, transaction_name, mode, position,
    /// blocking_transaction_ids, since_ms, upgrade.
    waiters: Py<PyAny>,
}

fn key_locks_to_py(py: Python<'_>, k: core::KeyLocks) -> PyResult<KeyLocks> {
    let holders = k
        .holders
        .into_iter()
        .map(|h| {
            let d = PyDict::new(py);
            d.set_item("transaction_id", h.transaction_id)?;
            d.set_item("transaction_name", h.transaction_name)?;
            d.set_item("mode", LockMode::from(h.mode))?;
            d.set_item("fencing_token", h.fencing_token)?;
            d.set_item("since_ms", h.since_ms)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let waiters = k
        .waiters
        .into_iter()
        .map(|w| {
            let d = PyDict::new(py);
            d.set_item("transaction_id", w.transaction_id)?;
            d.set_item("transaction_name", w.transaction_name)?;
            d.set_item("mode", LockMode::from(w.mode))?;
            d.set_item("position", w.position)?;
            d.set_item("blocking_transaction_ids", w.blocking_transaction_ids)?;
            d.set_item("since_ms", w.since_ms)?;
            d.set_item("upgrade", w.upgrade)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(KeyLocks {
        namespace: k.namespace,
        key: k.key,
        holders: holders.into_pyobject(py)?.into_any().unbind(),
        waiters: waiters.into_pyobject(py)?.into_any().unbind(),
    })
}

/// A native transaction handle. Use `caerus.Transaction` / `caerus.sync.Transaction`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeTransaction {
    /// `None` only while dropping (see `Drop`).
    tx: std::sync::Mutex<Option<core::Transaction>>,
}

impl NativeTransaction {
    fn tx(&self) -> core::Transaction {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone().expect("transaction handle in use after drop")
    }
}

impl Drop for NativeTransaction {
    /// Dropping the last handle of an active transaction aborts it in the background,
    /// which needs the runtime: enter it, whatever thread the garbage collector runs on.
    fn drop(&mut self) {
        let tx = self.tx.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        let _guard = runtime().enter();
        drop(tx);
    }
}

fn acquire_fut(
    tx: core::Transaction,
    namespace: String,
    key: String,
    mode: core::LockMode,
    timeout_ms: Option<u64>,
) -> impl Future<Output = Result<Lock, core::Error>> + Send {
    let mut opts = core::AcquireOptions::default();
    if let Some(ms) = timeout_ms {
        opts = opts.with_timeout_ms(ms);
    }
    async move { tx.acquire_lock(&namespace, &key, mode, opts).await.map(Lock::from) }
}

#[pymethods]
impl NativeTransaction {
    /// The transaction id assigned by the server.
    #[getter]
    fn id(&self) -> u64 {
        self.tx().id()
    }

    /// The lease length the server applied, in milliseconds.
    #[getter]
    fn lease_ms(&self) -> u64 {
        u64::try_from(self.tx().lease().as_millis()).unwrap_or(u64::MAX)
    }

    /// True once the transaction is lost (its locks may belong to someone else).
    #[getter]
    fn is_lost(&self) -> bool {
        self.tx().is_lost()
    }

    /// Why the transaction was lost, or None.
    #[getter]
    fn lost_reason(&self) -> Option<LostReason> {
        self.tx().lost_reason().map(LostReason::from)
    }

    #[pyo3(signature = (namespace, key, mode, timeout_ms=None))]
    fn acquire_lock<'py>(
        &self,
        py: Python<'py>,
        namespace: String,
        key: String,
        mode: &Bound<'py, PyAny>,
        timeout_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mode = parse_mode(mode)?;
        awaitable(py, acquire_fut(self.tx(), namespace, key, mode, timeout_ms))
    }

    #[pyo3(signature = (namespace, key, mode, timeout_ms=None))]
    fn acquire_lock_blocking(
        &self,
        py: Python<'_>,
        namespace: String,
        key: String,
        mode: &Bound<'_, PyAny>,
        timeout_ms: Option<u64>,
    ) -> PyResult<Lock> {
        let mode = parse_mode(mode)?;
        blocking(py, acquire_fut(self.tx(), namespace, key, mode, timeout_ms))
    }

    fn release<'py>(&self, py: Python<'py>, namespace: String, key: String) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx();
        awaitable(py, async move { tx.release(&namespace, &key).await })
    }

    fn release_blocking(&self, py: Python<'_>, namespace: String, key: String) -> PyResult<bool> {
        let tx = self.tx();
        blocking(py, async move { tx.release(&namespace, &key).await })
    }

    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx();
        awaitable(py, async move { tx.status().await.map(TransactionStatus::from) })
    }

    fn status_blocking(&self, py: Python<'_>) -> PyResult<TransactionStatus> {
        let tx = self.tx();
        blocking(py, async move { tx.status().await.map(TransactionStatus::from) })
    }

    fn commit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx();
        awaitable(py, async move { tx.commit().await })
    }

    fn commit_blocking(&self, py: Python<'_>) -> PyResult<()> {
        let tx = self.tx();
        blocking(py, async move { tx.commit().await })
    }

    fn abort<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx();
        awaitable(py, async move { tx.abort().await })
    }

    fn abort_blocking(&self, py: Python<'_>) -> PyResult<()> {
        let tx = self.tx();
        blocking(py, async move { tx.abort().await })
    }

    /// Awaitable that resolves with a `LostReason` when the transaction is lost; never
    /// resolves if it ends normally.
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx();
        awaitable(py, async move { Ok(LostReason::from(tx.lost().await)) })
    }

    /// Blocks until the transaction is lost (returns the reason) or `timeout_ms` passes
    /// (returns None). Without a timeout it waits until lost.
    #[pyo3(signature = (timeout_ms=None))]
    fn lost_blocking(&self, py: Python<'_>, timeout_ms: Option<f64>) -> PyResult<Option<LostReason>> {
        let tx = self.tx();
        let limit = match timeout_ms {
            None => None,
            Some(ms) => Some(millis("timeout_ms", Some(ms.max(0.001)), Duration::ZERO)?),
        };
        blocking(py, async move {
            let lost = async { LostReason::from(tx.lost().await) };
            Ok(match limit {
                None => Some(lost.await),
                Some(limit) => tokio::time::timeout(limit, lost).await.ok(),
            })
        })
    }
}

/// A native event stream. Use `DlsClient.watch_events`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeEventStream {
    stream: Arc<Mutex<core::EventStream>>,
    backlog_end: Option<u64>,
}

async fn next_event(stream: Arc<Mutex<core::EventStream>>) -> Result<Option<core::Event>, core::Error> {
    stream.lock().await.next_event().await.transpose()
}

fn wrap_event(event: Option<core::Event>) -> PyResult<Option<Event>> {
    Python::attach(|py| event.map(|e| event_to_py(py, e)).transpose())
}

#[pymethods]
impl NativeEventStream {
    /// The last sequence committed when the stream attached (None if the server did not say).
    #[getter]
    fn backlog_end(&self) -> Option<u64> {
        self.backlog_end
    }

    /// Awaitable of the next `Event`, or None once the stream has ended.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stream = Arc::clone(&self.stream);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let event = next_event(stream).await.map_err(to_py_err)?;
            wrap_event(event)
        })
    }

    /// The next `Event` (blocking), or None once the stream has ended.
    fn next_blocking(&self, py: Python<'_>) -> PyResult<Option<Event>> {
        let stream = Arc::clone(&self.stream);
        let event = blocking(py, next_event(stream))?;
        wrap_event(event)
    }
}

/// A native client. Use `caerus.DlsClient` / `caerus.sync.DlsClient`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeClient {
    client: core::DlsClient,
}

fn tx_options(timeout_ms: Option<u64>, priority: i32, name: Option<String>) -> core::TransactionOptions {
    let mut opts = core::TransactionOptions::default().with_priority(priority);
    if let Some(ms) = timeout_ms {
        opts = opts.with_timeout_ms(ms);
    }
    if let Some(name) = name {
        opts = opts.with_name(name);
    }
    opts
}

async fn begin_fut(client: core::DlsClient, opts: core::TransactionOptions) -> Result<NativeTransaction, core::Error> {
    let tx = client.begin_transaction(opts).await?;
    Ok(NativeTransaction { tx: std::sync::Mutex::new(Some(tx)) })
}

fn watch_options(
    from_sequence: u64,
    namespace_prefixes: Vec<String>,
    kinds: Vec<String>,
    only_new: bool,
) -> PyResult<core::WatchOptions> {
    let mut opts = core::WatchOptions::new().with_from_sequence(from_sequence).with_only_new(only_new);
    for prefix in namespace_prefixes {
        opts = opts.with_namespace_prefix(prefix);
    }
    for kind in kinds {
        let kind: core::EventKind = kind.parse().map_err(to_py_err)?;
        opts = opts.with_kind(kind);
    }
    Ok(opts)
}

async fn watch_fut(client: core::DlsClient, opts: core::WatchOptions) -> Result<NativeEventStream, core::Error> {
    let stream = client.watch_events(opts).await?;
    let backlog_end = stream.backlog_end();
    Ok(NativeEventStream { stream: Arc::new(Mutex::new(stream)), backlog_end })
}

async fn list_locks_fut(client: core::DlsClient, prefix: String) -> Result<Vec<core::KeyLocks>, core::Error> {
    client.list_locks(&prefix).await
}

fn key_locks_list(list: Vec<core::KeyLocks>) -> PyResult<Vec<KeyLocks>> {
    Python::attach(|py| list.into_iter().map(|k| key_locks_to_py(py, k)).collect())
}

#[pymethods]
impl NativeClient {
    /// `endpoints`: `host:port` list (None: `$DLS_ENDPOINTS`, default 127.0.0.1:7070).
    /// `api_key`: None reads `$CAERUS_API_KEY`; `use_env_key=False` sends none.
    /// TLS files: None reads `$DLS_CA_FILE`, `$DLS_CLIENT_CERT_FILE`, `$DLS_CLIENT_KEY_FILE`.
    #[new]
    #[pyo3(signature = (endpoints=None, api_key=None, use_env_key=true, connect_timeout_ms=None, request_timeout_ms=None, retry_deadline_ms=None, ca_file=None, client_cert_file=None, client_key_file=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        endpoints: Option<Vec<String>>,
        api_key: Option<String>,
        use_env_key: bool,
        connect_timeout_ms: Option<f64>,
        request_timeout_ms: Option<f64>,
        retry_deadline_ms: Option<f64>,
        ca_file: Option<PathBuf>,
        client_cert_file: Option<PathBuf>,
        client_key_file: Option<PathBuf>,
    ) -> PyResult<Self> {
        let mut config = match endpoints {
            Some(endpoints) => core::ClientConfig::new(endpoints),
            None => core::ClientConfig::from_env(),
        };
        if let Some(key) = api_key {
            config = config.with_api_key(key);
        } else if !use_env_key {
            config = config.without_api_key();
        }
        config = config
            .with_connect_timeout(millis(
                "connect_timeout_ms",
                connect_timeout_ms,
                core::ClientConfig::DEFAULT_CONNECT_TIMEOUT,
            )?)
            .with_request_timeout(millis(
                "request_timeout_ms",
                request_timeout_ms,
                core::ClientConfig::DEFAULT_REQUEST_TIMEOUT,
            )?)
            .with_retry_deadline(millis(
                "retry_deadline_ms",
                retry_deadline_ms,
                core::ClientConfig::DEFAULT_RETRY_DEADLINE,
            )?)
            .with_tls_files(ca_file, client_cert_file, client_key_file)
            .map_err(to_py_err)?;
        let client = blocking(py, core::DlsClient::connect(config))?;
        Ok(NativeClient { client })
    }

    #[pyo3(signature = (timeout_ms=None, priority=0, name=None))]
    fn begin_transaction<'py>(
        &self,
        py: Python<'py>,
        timeout_ms: Option<u64>,
        priority: i32,
        name: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, begin_fut(self.client.clone(), tx_options(timeout_ms, priority, name)))
    }

    #[pyo3(signature = (timeout_ms=None, priority=0, name=None))]
    fn begin_transaction_blocking(
        &self,
        py: Python<'_>,
        timeout_ms: Option<u64>,
        priority: i32,
        name: Option<String>,
    ) -> PyResult<NativeTransaction> {
        blocking(py, begin_fut(self.client.clone(), tx_options(timeout_ms, priority, name)))
    }

    fn transaction_status<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        awaitable(py, async move { client.transaction_status(id).await.map(TransactionStatus::from) })
    }

    fn transaction_status_blocking(&self, py: Python<'_>, id: u64) -> PyResult<TransactionStatus> {
        let client = self.client.clone();
        blocking(py, async move { client.transaction_status(id).await.map(TransactionStatus::from) })
    }

    #[pyo3(signature = (from_sequence=0, namespace_prefixes=Vec::new(), kinds=Vec::new(), only_new=false))]
    fn watch_events<'py>(
        &self,
        py: Python<'py>,
        from_sequence: u64,
        namespace_prefixes: Vec<String>,
        kinds: Vec<String>,
        only_new: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = watch_options(from_sequence, namespace_prefixes, kinds, only_new)?;
        awaitable(py, watch_fut(self.client.clone(), opts))
    }

    #[pyo3(signature = (from_sequence=0, namespace_prefixes=Vec::new(), kinds=Vec::new(), only_new=false))]
    fn watch_events_blocking(
        &self,
        py: Python<'_>,
        from_sequence: u64,
        namespace_prefixes: Vec<String>,
        kinds: Vec<String>,
        only_new: bool,
    ) -> PyResult<NativeEventStream> {
        let opts = watch_options(from_sequence, namespace_prefixes, kinds, only_new)?;
        blocking(py, watch_fut(self.client.clone(), opts))
    }

    #[pyo3(signature = (namespace_prefix=String::new()))]
    fn list_locks<'py>(&self, py: Python<'py>, namespace_prefix: String) -> PyResult<Bound<'py, PyAny>> {
        let fut = list_locks_fut(self.client.clone(), namespace_prefix);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let list = fut.await.map_err(to_py_err)?;
            key_locks_list(list)
        })
    }

    #[pyo3(signature = (namespace_prefix=String::new()))]
    fn list_locks_blocking(&self, py: Python<'_>, namespace_prefix: String) -> PyResult<Vec<KeyLocks>> {
        let list = blocking(py, list_locks_fut(self.client.clone(), namespace_prefix))?;
        key_locks_list(list)
    }

    /// Operator abort of any transaction; resolves to its final state name.
    #[pyo3(signature = (id, reason=String::new()))]
    fn abort_transaction<'py>(&self, py: Python<'py>, id: u64, reason: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        awaitable(py, async move { client.abort_transaction(id, &reason).await.map(|s| s.as_str()) })
    }

    #[pyo3(signature = (id, reason=String::new()))]
    fn abort_transaction_blocking(&self, py: Python<'_>, id: u64, reason: String) -> PyResult<&'static str> {
        let client = self.client.clone();
        blocking(py, async move { client.abort_transaction(id, &reason).await.map(|s| s.as_str()) })
    }
}

/// Native part of the Caerus DLS Python SDK; import `caerus` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LockMode>()?;
    m.add_class::<Lock>()?;
    m.add_class::<PendingLock>()?;
    m.add_class::<TransactionStatus>()?;
    m.add_class::<LostReason>()?;
    m.add_class::<Event>()?;
    m.add_class::<KeyLocks>()?;
    m.add_class::<NativeTransaction>()?;
    m.add_class::<NativeEventStream>()?;
    m.add_class::<NativeClient>()?;
    Ok(())
}

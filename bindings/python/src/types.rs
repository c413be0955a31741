//! The values the SDK hands to Python (locks, statuses, lost reasons, lock listings) and
//! the argument conversions from Python (lock modes, millisecond durations).

use std::time::Duration;

use caerus_core as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A lock mode from Python: a `LockMode`, an enum with a `value` (e.g. a Python `Enum`),
/// or the wire name.
pub(crate) fn parse_mode(mode: &Bound<'_, PyAny>) -> PyResult<core::LockMode> {
    if let Ok(mode) = mode.extract::<LockMode>() {
        return Ok(mode);
    }
    let name: String = match mode.getattr("value") {
        Ok(value) => value.extract()?,
        Err(_) => mode.extract()?,
    };
    name.parse::<core::LockMode>().map_err(|e| PyValueError::new_err(core::Error::from(e).message().to_string()))
}

/// A duration given in (possibly fractional) milliseconds; None takes `default`.
pub(crate) fn millis(name: &str, value: Option<f64>, default: Duration) -> PyResult<Duration> {
    match value {
        None => Ok(default),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Duration::from_secs_f64(ms / 1000.0)),
        Some(ms) => Err(PyValueError::new_err(format!("{name} must be a positive number of milliseconds, got {ms}"))),
    }
}

/// The lock mode class is the shared type itself (`caerus-types` with its `pyo3` feature),
/// and so are the classes of the values core declares with this SDK's shape (`caerus-core`
/// with its `pyo3` feature). The classes below are declared here because Python sees them
/// in another shape: states, causes and kinds as strings, durations as ms, lock listings
/// as dicts.
pub(crate) use core::{Lock, LockMode, PendingLock, QueuePosition, TokenCheck};

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
    /// Why it ended, in words ("" while active).
    end_reason: String,
    /// What ended it: `"COMMITTED"`, `"CLIENT_ABORT"`, `"LEASE_EXPIRED"`, `"DEADLOCK_VICTIM"`
    /// or `"OPERATOR_ABORT"`; None while active.
    end_cause: Option<&'static str>,
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
            locks: s.locks,
            waiting: s.waiting,
            end_reason: s.end_reason,
            end_cause: s.end_cause.map(|c| c.as_str()),
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
    /// What ended it on the server (`"LEASE_EXPIRED"`, `"MAX_DURATION_EXCEEDED"`, …), when
    /// the server said; `None` for a lease this client could not confirm.
    end_cause: Option<String>,
}

#[pymethods]
impl LostReason {
    fn __repr__(&self) -> String {
        format!("LostReason(kind={:?}, message={:?}, end_cause={:?})", self.kind, self.message, self.end_cause)
    }

    fn __str__(&self) -> String {
        format!("{}: {}", self.kind, self.message)
    }
}

impl From<core::LostReason> for LostReason {
    fn from(r: core::LostReason) -> Self {
        let end_cause = r.end_cause.map(|c| c.as_str().to_string());
        LostReason { kind: r.kind.as_str().to_string(), message: r.message, end_cause }
    }
}

/// Why and until when a listed key grants nothing: its holder was revoked in a namespace
/// with a lock-delay (see `DlsClient.set_lock_delay`).
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct KeyDelay {
    /// When the key may be granted again (leader clock, ms since the Unix epoch).
    until_ms: i64,
    /// The revoked holder whose end started the delay.
    transaction_id: u64,
    /// How that holder ended: `"LEASE_EXPIRED"`, `"OPERATOR_ABORT"`, `"DEADLOCK_VICTIM"` or
    /// `"MAX_DURATION_EXCEEDED"`; None if the server sent a cause this SDK does not know.
    cause: Option<&'static str>,
}

#[pymethods]
impl KeyDelay {
    fn __repr__(&self) -> String {
        format!(
            "KeyDelay(until_ms={}, transaction_id={}, cause={})",
            self.until_ms,
            self.transaction_id,
            self.cause.map_or("None".to_string(), |c| format!("{c:?}"))
        )
    }
}

impl From<core::KeyDelay> for KeyDelay {
    fn from(d: core::KeyDelay) -> Self {
        KeyDelay { until_ms: d.until_ms, transaction_id: d.transaction_id, cause: d.cause.map(|c| c.as_str()) }
    }
}

/// A lock-delay rule (from `lock_delays`).
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct LockDelayRule {
    /// Namespaces starting with this prefix (`""` = every namespace).
    namespace_prefix: String,
    /// How long a revoked holder's keys grant nothing, in ms.
    delay_ms: u64,
}

#[pymethods]
impl LockDelayRule {
    fn __repr__(&self) -> String {
        format!("LockDelayRule(namespace_prefix={:?}, delay_ms={})", self.namespace_prefix, self.delay_ms)
    }
}

impl From<core::LockDelayRule> for LockDelayRule {
    fn from(r: core::LockDelayRule) -> Self {
        LockDelayRule { namespace_prefix: r.namespace_prefix, delay_ms: duration_ms(r.delay) }
    }
}

/// An API key kept by the cluster (from `list_api_keys`; never its secret).
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct ApiKeyInfo {
    /// Its name.
    name: String,
    /// Allowed namespace prefixes (empty = every namespace).
    namespace_prefixes: Vec<String>,
    /// May call the operator API.
    admin: bool,
    /// When it stops working (the cluster's clock, ms since the epoch), or None.
    expires_at_ms: Option<i64>,
    /// The admin key that created it.
    created_by: String,
    /// When it was created (the cluster's clock, ms since the epoch).
    created_at_ms: i64,
}

#[pymethods]
impl ApiKeyInfo {
    fn __repr__(&self) -> String {
        format!(
            "ApiKeyInfo(name={:?}, namespace_prefixes={:?}, admin={})",
            self.name, self.namespace_prefixes, self.admin
        )
    }
}

impl From<core::ApiKeyInfo> for ApiKeyInfo {
    fn from(k: core::ApiKeyInfo) -> Self {
        ApiKeyInfo {
            name: k.name,
            namespace_prefixes: k.namespace_prefixes,
            admin: k.admin,
            expires_at_ms: k.expires_at_ms,
            created_by: k.created_by,
            created_at_ms: k.created_at_ms,
        }
    }
}

/// A duration as whole milliseconds (saturating).
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Holders, waiters and lock-delay of one key (from `list_locks`).
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
    /// The lock-delay keeping the key from granting anything, or None.
    delay: Option<KeyDelay>,
    /// A semaphore's permit count (holders and waiters all SEMAPHORE); 0 for a lock.
    permits: u32,
}

/// One key of a core lock listing on its way to Python: its dicts are built when the
/// result crosses into Python, where the GIL is held.
pub(crate) struct KeyLocksOut(pub(crate) core::KeyLocks);

impl<'py> IntoPyObject<'py> for KeyLocksOut {
    type Target = KeyLocks;
    type Output = Bound<'py, KeyLocks>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Bound::new(py, key_locks_to_py(py, self.0)?)
    }
}

fn key_locks_to_py(py: Python<'_>, k: core::KeyLocks) -> PyResult<KeyLocks> {
    let holders = k
        .holders
        .into_iter()
        .map(|h| {
            let d = PyDict::new(py);
            d.set_item("transaction_id", h.transaction_id)?;
            d.set_item("transaction_name", h.transaction_name)?;
            d.set_item("mode", h.mode)?;
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
            d.set_item("mode", w.mode)?;
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
        delay: k.delay.map(KeyDelay::from),
        permits: k.permits,
    })
}

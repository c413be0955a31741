//! The cluster's event log as Python sees it: `Event` values and the native event stream.

use std::sync::Arc;

use caerus_core as core;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::Mutex;

use crate::errors::to_py_err;
use crate::twins::pymethods_with_twins;

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

/// A core event on its way to Python: its detail dict is built when the result crosses
/// into Python, where the GIL is held.
pub(crate) struct EventOut(core::Event);

impl<'py> IntoPyObject<'py> for EventOut {
    type Target = Event;
    type Output = Bound<'py, Event>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Bound::new(py, event_to_py(py, self.0)?)
    }
}

fn lock_dicts<'py>(py: Python<'py>, locks: Vec<core::Lock>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    locks.into_iter().map(|l| Bound::new(py, l).map(Bound::into_any)).collect()
}

fn event_to_py(py: Python<'_>, e: core::Event) -> PyResult<Event> {
    let kind = e.kind().as_str().to_string();
    let d = PyDict::new(py);
    match e.detail {
        core::EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
            d.set_item("cycle", crate::errors::cycle_dicts(py, &cycle)?)?;
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
            d.set_item("mode", mode)?;
            d.set_item("fencing_token", fencing_token)?;
            d.set_item("cause", cause.map(|c| c.as_str()))?;
        }
        other => {
            d.set_item("unknown", format!("{other:?}"))?;
        }
    }
    Ok(Event { sequence: e.sequence, time_ms: e.time_ms, namespaces: e.namespaces, kind, detail: d.unbind() })
}

/// The filters of `DlsClient.watch_events`; an unknown kind name is refused here, before
/// the watch starts.
pub(crate) fn watch_options(
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
        let kind = kind.parse::<core::EventKind>().map_err(|e| to_py_err(e.into()))?;
        opts = opts.with_kind(kind);
    }
    Ok(opts)
}

/// A native event stream. Use `DlsClient.watch_events`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeEventStream {
    stream: Arc<Mutex<core::EventStream>>,
    backlog_end: Option<u64>,
}

impl NativeEventStream {
    /// Starts a watch on `client`.
    pub(crate) async fn open(client: core::DlsClient, opts: core::WatchOptions) -> Result<Self, core::Error> {
        let stream = client.watch_events(opts).await?;
        let backlog_end = stream.backlog_end();
        Ok(NativeEventStream { stream: Arc::new(Mutex::new(stream)), backlog_end })
    }
}

async fn next_event(stream: Arc<Mutex<core::EventStream>>) -> Result<Option<EventOut>, core::Error> {
    Ok(stream.lock().await.next_event().await.transpose()?.map(EventOut))
}

pymethods_with_twins! {
    impl NativeEventStream {
        /// The last sequence committed when the stream attached (None if the server did not say).
        #[getter]
        fn backlog_end(&self) -> Option<u64> {
            self.backlog_end
        }
    }
    twins {
        /// The next `Event`, or None once the stream has ended.
        fn next / next_blocking(&self) -> Option<EventOut> {
            next_event(Arc::clone(&self.stream))
        }
    }
}

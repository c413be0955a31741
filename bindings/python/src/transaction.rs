//! The native transaction handle behind `caerus.Transaction` and `caerus.sync.Transaction`.

use std::time::Duration;

use caerus_core as core;
use pyo3::prelude::*;

use crate::asyncio_bridge::awaitable;
use crate::runtime::{blocking, runtime};
use crate::slots::{parse_outcome, SlotClaim, SlotRun};
use crate::twins::pymethods_with_twins;
use crate::types::{millis, parse_mode, Lock, LostReason, TransactionStatus};

/// A native transaction handle. Use `caerus.Transaction` / `caerus.sync.Transaction`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeTransaction {
    /// `None` only while dropping (see `Drop`).
    tx: std::sync::Mutex<Option<core::Transaction>>,
}

impl NativeTransaction {
    pub(crate) fn new(tx: core::Transaction) -> Self {
        NativeTransaction { tx: std::sync::Mutex::new(Some(tx)) }
    }

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

fn acquire_options(timeout_ms: Option<u64>) -> core::AcquireOptions {
    let mut opts = core::AcquireOptions::default();
    if let Some(ms) = timeout_ms {
        opts = opts.with_timeout_ms(ms);
    }
    opts
}

/// The caller's W3C trace context (`traceparent`, `tracestate`), sent with an acquire.
type Trace = (Option<String>, Option<String>);

/// Core's progress callback calling the Python `on_queued(QueuePosition)` (if any) on the
/// runtime thread that read the `queued` message. The asyncio wrapper hands it over to the
/// event loop; an exception in it is reported as unraisable and does not end the wait.
fn queued_callback(on_queued: Option<Py<PyAny>>) -> impl FnMut(&core::QueuePosition) + Send {
    move |q| {
        if let Some(callback) = &on_queued {
            Python::attach(|py| {
                if let Err(e) = callback.call1(py, (q.clone(),)) {
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            });
        }
    }
}

fn acquire_fut(
    tx: core::Transaction,
    (namespace, key, mode): (String, String, core::LockMode),
    timeout_ms: Option<u64>,
    on_queued: Option<Py<PyAny>>,
    (traceparent, tracestate): Trace,
) -> impl std::future::Future<Output = Result<Lock, core::Error>> + Send {
    let mut opts = acquire_options(timeout_ms);
    if let Some(traceparent) = traceparent {
        opts = opts.with_traceparent(traceparent, tracestate);
    }
    async move {
        let progress = queued_callback(on_queued);
        tx.acquire_lock_with_progress(&namespace, &key, mode, opts, progress).await
    }
}

fn permit_fut(
    tx: core::Transaction,
    (namespace, key, permits): (String, String, u32),
    timeout_ms: Option<u64>,
    on_queued: Option<Py<PyAny>>,
) -> impl std::future::Future<Output = Result<Lock, core::Error>> + Send {
    let opts = acquire_options(timeout_ms);
    async move {
        let progress = queued_callback(on_queued);
        tx.acquire_permit_with_progress(&namespace, &key, permits, opts, progress).await
    }
}

/// The locks of an all-or-nothing acquire: each `(namespace, key)` (EXCLUSIVE) or
/// `(namespace, key, mode)`.
fn lock_requests(locks: &Bound<'_, PyAny>) -> PyResult<Vec<core::LockRequest>> {
    let mut out = Vec::new();
    for (i, item) in locks.try_iter()?.enumerate() {
        let item = item?;
        let request = if let Ok((namespace, key, mode)) = item.extract::<(String, String, Bound<'_, PyAny>)>() {
            core::LockRequest::new(namespace, key, parse_mode(&mode)?)
        } else if let Ok((namespace, key)) = item.extract::<(String, String)>() {
            core::LockRequest::exclusive(namespace, key)
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "locks[{i}] must be a (namespace, key) or (namespace, key, mode) tuple"
            )));
        };
        out.push(request);
    }
    Ok(out)
}

fn acquire_all_fut(
    tx: core::Transaction,
    locks: Vec<core::LockRequest>,
    timeout_ms: Option<u64>,
    on_queued: Option<Py<PyAny>>,
) -> impl std::future::Future<Output = Result<Vec<Lock>, core::Error>> + Send {
    let opts = acquire_options(timeout_ms);
    async move {
        let progress = queued_callback(on_queued);
        tx.acquire_locks_with_progress(&locks, opts, progress).await
    }
}

pymethods_with_twins! {
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

        /// Awaitable that resolves with a `LostReason` when the transaction is lost; never
        /// resolves if it ends normally.
        fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let tx = self.tx();
            awaitable(py, async move { Ok(LostReason::from(tx.lost().await)) })
        }

        /// Blocks until the transaction is lost (returns the reason) or `timeout_ms` passes
        /// (returns None). Without a timeout it waits until lost. Not a twin of `lost`: a
        /// blocking caller needs the time limit that an awaitable gets from asyncio.
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
    twins {
        #[pyo3(signature = (namespace, key, mode, timeout_ms=None, on_queued=None, traceparent=None, tracestate=None))]
        fn acquire_lock / acquire_lock_blocking(
            &self,
            namespace: String,
            key: String,
            mode: &Bound<'_, PyAny>,
            timeout_ms: Option<u64>,
            on_queued: Option<Py<PyAny>>,
            traceparent: Option<String>,
            tracestate: Option<String>,
        ) -> Lock {
            let trace = (traceparent, tracestate);
            acquire_fut(self.tx(), (namespace, key, parse_mode(mode)?), timeout_ms, on_queued, trace)
        }

        #[pyo3(signature = (namespace, key, permits, timeout_ms=None, on_queued=None))]
        fn acquire_permit / acquire_permit_blocking(
            &self,
            namespace: String,
            key: String,
            permits: u32,
            timeout_ms: Option<u64>,
            on_queued: Option<Py<PyAny>>,
        ) -> Lock {
            permit_fut(self.tx(), (namespace, key, permits), timeout_ms, on_queued)
        }

        #[pyo3(signature = (locks, timeout_ms=None, on_queued=None))]
        fn acquire_locks / acquire_locks_blocking(
            &self,
            locks: &Bound<'_, PyAny>,
            timeout_ms: Option<u64>,
            on_queued: Option<Py<PyAny>>,
        ) -> Vec<Lock> {
            acquire_all_fut(self.tx(), lock_requests(locks)?, timeout_ms, on_queued)
        }

        fn release / release_blocking(&self, namespace: String, key: String) -> bool {
            let tx = self.tx();
            async move { tx.release(&namespace, &key).await }
        }

        fn downgrade / downgrade_blocking(&self, namespace: String, key: String) -> Option<Lock> {
            let tx = self.tx();
            async move { tx.downgrade(&namespace, &key).await }
        }

        /// Claims the schedule slot (of `period_ms`, aligned to the Unix epoch, by the
        /// cluster's clock) of a lock this transaction holds EXCLUSIVE: run the job only
        /// when the claim's `run` is True, then `finish_slot`.
        #[pyo3(signature = (namespace, key, period_ms, retry_failed=false))]
        fn claim_slot / claim_slot_blocking(
            &self,
            namespace: String,
            key: String,
            period_ms: u64,
            retry_failed: bool,
        ) -> SlotClaim {
            let tx = self.tx();
            let period = Duration::from_millis(period_ms);
            async move { Ok(SlotClaim::from(tx.claim_slot(&namespace, &key, period, retry_failed).await?)) }
        }

        /// Records how a claimed slot's run ended ("SUCCEEDED", "FAILED" with `exit_code`,
        /// or "LOST"); returns the cluster's record.
        #[pyo3(signature = (claim, outcome, exit_code=None))]
        fn finish_slot / finish_slot_blocking(
            &self,
            claim: PyRef<'_, SlotClaim>,
            outcome: String,
            exit_code: Option<i32>,
        ) -> SlotRun {
            let tx = self.tx();
            let claim = claim.to_core();
            let outcome = parse_outcome(&outcome, exit_code)?;
            async move { Ok(SlotRun::from(tx.finish_slot(&claim, outcome).await?)) }
        }

        fn status / status_blocking(&self) -> TransactionStatus {
            let tx = self.tx();
            async move { tx.status().await.map(TransactionStatus::from) }
        }

        fn commit / commit_blocking(&self) -> () {
            let tx = self.tx();
            async move { tx.commit().await }
        }

        fn abort / abort_blocking(&self) -> () {
            let tx = self.tx();
            async move { tx.abort().await }
        }
    }
}

//! How a core future's result reaches asyncio. The tokio task that ran the future queues a
//! completion and wakes the event loop through a socket the loop watches (`add_reader`);
//! the loop thread, which holds the GIL anyway, then sets the Python futures' results. No
//! tokio thread ever waits for the GIL, there is no extra thread hop, and a burst of
//! completions costs the loop one wake-up.
//!
//! Windows' default loop (Proactor) has no `add_reader`, so there the task that queues the
//! first completion of a burst takes the GIL once and hands the drain to the loop with
//! `call_soon_threadsafe`; later completions of the burst ride on it as above.

use std::future::Future;
#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use caerus_core as core;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{intern, IntoPyObjectExt};

use crate::errors::to_py_err;
use crate::runtime::runtime;

/// A result waiting to be handed to its Python future on the loop thread.
type Completion = Box<dyn FnOnce(Python<'_>) + Send>;

/// One event loop's completion queue and what wakes it: a socket pair the loop watches, or
/// on Windows a weak reference to the loop for `call_soon_threadsafe`.
struct LoopWakeup {
    pending: Mutex<Vec<Completion>>,
    /// True while a wake-up is on its way: later completions ride on it.
    armed: AtomicBool,
    #[cfg(unix)]
    tx: UnixStream,
    #[cfg(unix)]
    rx: UnixStream,
    /// Weak, so that the loop's entry in `wakeup_for`'s `WeakKeyDictionary` can still go.
    #[cfg(not(unix))]
    event_loop: Py<PyAny>,
}

impl LoopWakeup {
    #[cfg(unix)]
    fn new(_event_loop: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(LoopWakeup { pending: Mutex::new(Vec::new()), armed: AtomicBool::new(false), tx, rx })
    }

    #[cfg(not(unix))]
    fn new(event_loop: &Bound<'_, PyAny>) -> PyResult<Self> {
        let weak = event_loop.py().import("weakref")?.getattr("ref")?.call1((event_loop,))?;
        Ok(LoopWakeup { pending: Mutex::new(Vec::new()), armed: AtomicBool::new(false), event_loop: weak.unbind() })
    }

    /// From any thread: queue `done` and make sure the loop will drain the queue.
    fn push(self: &Arc<Self>, done: Completion) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).push(done);
        if !self.armed.swap(true, Ordering::AcqRel) {
            self.wake();
        }
    }

    #[cfg(unix)]
    fn wake(self: &Arc<Self>) {
        // WouldBlock means the socket already holds unread bytes: the loop will wake.
        let _ = (&self.tx).write(&[1]);
    }

    #[cfg(not(unix))]
    fn wake(self: &Arc<Self>) {
        Python::attach(|py| {
            let event_loop = match self.event_loop.bind(py).call0() {
                Ok(event_loop) if !event_loop.is_none() => event_loop,
                // The loop is gone: nobody awaits these completions any more.
                _ => return,
            };
            let waker = LoopWaker { wakeup: Arc::clone(self) };
            // A closed loop refuses (RuntimeError): its futures can no longer be awaited either.
            let _ = event_loop.call_method1(intern!(py, "call_soon_threadsafe"), (waker,));
        });
    }

    /// On the loop thread: the completions queued so far. Disarms before taking the queue,
    /// so a completion queued meanwhile either is taken now or sends a new wake-up.
    fn drain(&self) -> Vec<Completion> {
        #[cfg(unix)]
        {
            let mut buf = [0u8; 64];
            while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        }
        self.armed.store(false, Ordering::Release);
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The reader callback registered with the loop: runs the queued completions.
#[pyclass(frozen, module = "caerus._native")]
struct LoopWaker {
    wakeup: Arc<LoopWakeup>,
}

#[pymethods]
impl LoopWaker {
    fn __call__(&self, py: Python<'_>) {
        for done in self.wakeup.drain() {
            done(py);
        }
    }
}

/// The done-callback of every awaitable: stops the tokio task when the Python future is
/// cancelled (dropping a core future cancels its call). After a normal result the task has
/// finished and aborting it does nothing.
#[pyclass(frozen, module = "caerus._native")]
struct AbortTask(tokio::task::AbortHandle);

#[pymethods]
impl AbortTask {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.0.abort();
    }
}

/// The wake-up of `event_loop`, made and registered (`add_reader`) on its first use. Kept
/// in a `WeakKeyDictionary`, so a loop that is gone takes its socket pair with it; a loop
/// type without weak references (none in the standard library) goes in a plain dict.
fn wakeup_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<LoopWakeup>> {
    static WEAK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static STRONG: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let weak = WEAK
        .get_or_try_init(py, || py.import("weakref")?.getattr("WeakKeyDictionary")?.call0().map(Bound::unbind))?
        .bind(py);
    let strong =
        STRONG.get_or_try_init(py, || Ok::<_, PyErr>(pyo3::types::PyDict::new(py).into_any().unbind()))?.bind(py);
    for map in [weak, strong] {
        let found = map.call_method1(intern!(py, "get"), (event_loop,))?;
        if !found.is_none() {
            return Ok(Arc::clone(&found.cast::<LoopWaker>()?.get().wakeup));
        }
    }
    let wakeup = Arc::new(LoopWakeup::new(event_loop)?);
    let waker = Py::new(py, LoopWaker { wakeup: Arc::clone(&wakeup) })?;
    #[cfg(unix)]
    event_loop.call_method1(intern!(py, "add_reader"), (wakeup.rx.as_raw_fd(), waker.clone_ref(py)))?;
    match weak.set_item(event_loop, &waker) {
        Err(e) if e.is_instance_of::<PyTypeError>(py) => strong.set_item(event_loop, &waker)?,
        other => other?,
    }
    Ok(wakeup)
}

/// Turns a core future into an asyncio future of the running loop; cancelling the Python
/// future cancels the core call.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, core::Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let event_loop = GET_RUNNING_LOOP.import(py, "asyncio", "get_running_loop")?.call0()?;
    let wakeup = wakeup_for(py, &event_loop)?;
    let py_future = event_loop.call_method0(intern!(py, "create_future"))?;
    let target = py_future.clone().unbind();
    let task = runtime().spawn(async move {
        let result = fut.await;
        wakeup.push(Box::new(move |py| settle(py, target.bind(py), result)));
    });
    py_future.call_method1(intern!(py, "add_done_callback"), (AbortTask(task.abort_handle()),))?;
    Ok(py_future)
}

/// Sets the outcome on the Python future unless it was cancelled meanwhile.
fn settle<T>(py: Python<'_>, future: &Bound<'_, PyAny>, result: Result<T, core::Error>)
where
    T: for<'a> IntoPyObject<'a>,
{
    if future.call_method0(intern!(py, "done")).and_then(|d| d.is_truthy()).unwrap_or(true) {
        return;
    }
    let set = match result.map_err(to_py_err).and_then(|value| value.into_py_any(py)) {
        Ok(value) => future.call_method1(intern!(py, "set_result"), (value,)),
        Err(error) => future.call_method1(intern!(py, "set_exception"), (error.into_value(py),)),
    };
    if let Err(error) = set {
        error.write_unraisable(py, Some(future));
    }
}

//! Where core's futures run: the shared tokio runtime, and a blocking call with the GIL
//! released (asyncio awaitables: [`crate::asyncio_bridge`]).

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use caerus_core as core;
use pyo3::prelude::*;

use crate::errors::to_py_err;

/// The tokio runtime shared by the awaitables and the blocking calls; it also runs the
/// transactions' heartbeats, so they go on while Python code sleeps or blocks.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("caerus-dls")
            .enable_all()
            .build()
            .expect("caerus-dls: cannot start the tokio runtime")
    });
    &RUNTIME
}

/// Runs a core future to completion on the runtime with the GIL released. Every 100 ms it
/// takes the GIL back to let Python handle signals, so Ctrl-C interrupts a long wait (the
/// future is then dropped, which cancels the call).
pub(crate) fn blocking<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
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

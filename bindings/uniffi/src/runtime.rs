//! The tokio runtime that runs core's futures for the foreign side, and the two ways a
//! foreign call waits for one (awaited by a coroutine / Swift task, or blocking).

use std::future::Future;
use std::sync::LazyLock;

use crate::errors::DlsError;

/// The runtime that carries core's connections, heartbeats and calls. Foreign executors
/// (Kotlin coroutines, Swift tasks) poll the join handles of the tasks spawned on it.
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
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
pub(crate) async fn on_runtime<T, F>(fut: F) -> Result<T, DlsError>
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
pub(crate) fn block_on<F>(fut: F) -> F::Output
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

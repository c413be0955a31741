//! Where core's futures run: an asyncio awaitable (see [`crate::asyncio_bridge`]) or a
//! blocking call with the GIL released, and the macro that makes both from one method
//! definition.

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

/// Declares the class's `#[pymethods]` block: the methods in `impl Type { ... }` as they
/// are, and for each `fn name / name_blocking(&self, args) -> Out { body }` in `twins { ... }`
/// an awaitable `name` and a `name_blocking` that returns `Out`. The body evaluates to the
/// core future (`Output = Result<Out, core::Error>`); `?` in it reports a bad argument
/// before anything is sent. One definition keeps the two APIs from drifting apart, and
/// both names stay spelled out so a search for either finds it.
macro_rules! pymethods_with_twins {
    (
        impl $ty:ident { $($plain:tt)* }
        twins {
            $(
                $(#[$attr:meta])*
                fn $name:ident / $blocking:ident (&$self:ident $(, $arg:ident : $argty:ty)* $(,)?) -> $out:ty $body:block
            )*
        }
    ) => {
        #[pyo3::pymethods]
        impl $ty {
            $($plain)*

            $(
                $(#[$attr])*
                fn $name<'py>(
                    &$self,
                    py: pyo3::Python<'py>,
                    $($arg: $argty),*
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    $crate::asyncio_bridge::awaitable(py, $body)
                }

                $(#[$attr])*
                fn $blocking(&$self, py: pyo3::Python<'_>, $($arg: $argty),*) -> pyo3::PyResult<$out> {
                    $crate::runtime::blocking(py, $body)
                }
            )*
        }
    };
}

pub(crate) use pymethods_with_twins;

//! The macro that makes an asyncio awaitable and a blocking twin of one method definition.

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
                // A Python method's keyword arguments are its options, however many.
                #[allow(clippy::too_many_arguments)]
                fn $name<'py>(
                    &$self,
                    py: pyo3::Python<'py>,
                    $($arg: $argty),*
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    $crate::asyncio_bridge::awaitable(py, $body)
                }

                $(#[$attr])*
                #[allow(clippy::too_many_arguments)]
                fn $blocking(&$self, py: pyo3::Python<'_>, $($arg: $argty),*) -> pyo3::PyResult<$out> {
                    $crate::runtime::blocking(py, $body)
                }
            )*
        }
    };
}

pub(crate) use pymethods_with_twins;

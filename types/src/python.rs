//! What Python sees of the shared types beyond the derived class (feature `pyo3`).

use pyo3::prelude::*;

use crate::LockMode;

#[pymethods]
impl LockMode {
    /// The wire name, `"EXCLUSIVE"` or `"SHARED_READ"` (as a Python `Enum` member's value).
    #[getter]
    fn value(&self) -> &'static str {
        self.as_str()
    }

    fn __str__(&self) -> &'static str {
        self.as_str()
    }
}

//! The one mapping from core's error to the Python exception hierarchy.

use caerus_core as core;
use pyo3::prelude::*;

/// The exception class is chosen by `caerus.errors._from_code` from the stable code, so the
/// hierarchy lives in Python and the codes stay the same as the other SDKs'.
pub(crate) fn to_py_err(error: core::Error) -> PyErr {
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

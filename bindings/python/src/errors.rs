//! The one mapping from core's error to the Python exception hierarchy.

use caerus_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// The SDKs' error table (`caerus_types::ErrorClass::all()`) as `(code, stem, retryable,
/// description)` tuples: `caerus.errors` makes its exception classes from it.
pub(crate) fn error_classes<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    core::ErrorClass::all().map(|c| (c.code, c.stem, c.retryable, c.description).into_pyobject(py)).collect()
}

/// The exception class is chosen by `caerus.errors._from_code` from the stable code, so the
/// hierarchy lives in Python and the codes stay the same as the other SDKs'. What ended the
/// transaction and the broken deadlock travel as data (`end_cause`, `deadlock`).
pub(crate) fn to_py_err(error: core::Error) -> PyErr {
    Python::attach(|py| {
        let made = (|| {
            let end_cause = error.end_cause().map(|c| c.as_str());
            let deadlock = match &error {
                core::Error::DeadlockVictim { deadlock: Some(d), .. } => Some(deadlock_dict(py, d)?),
                _ => None,
            };
            let kwargs = PyDict::new(py);
            kwargs.set_item("end_cause", end_cause)?;
            kwargs.set_item("deadlock", deadlock)?;
            py.import("caerus.errors")?.getattr("_from_code")?.call((error.code(), error.message()), Some(&kwargs))
        })();
        match made {
            Ok(exception) => PyErr::from_value(exception),
            Err(import_failed) => import_failed,
        }
    })
}

/// A deadlock's cycle as dicts, shared with the `DEADLOCK_RESOLVED` events.
pub(crate) fn cycle_dicts<'py>(py: Python<'py>, cycle: &[core::CycleMember]) -> PyResult<Vec<Bound<'py, PyDict>>> {
    cycle
        .iter()
        .map(|m| {
            let md = PyDict::new(py);
            md.set_item("transaction_id", m.transaction_id)?;
            md.set_item("transaction_name", &m.transaction_name)?;
            md.set_item("priority", m.priority)?;
            md.set_item("namespace", &m.namespace)?;
            md.set_item("key", &m.key)?;
            md.set_item("mode", m.mode)?;
            Ok(md)
        })
        .collect()
}

/// A broken deadlock as a dict, as a `DEADLOCK_RESOLVED` event's detail (`events.rs`) has
/// it: `cycle` (members with `transaction_id`, `transaction_name`, `priority`, `namespace`,
/// `key`, `mode`), `victim_transaction_id`, `policy`.
pub(crate) fn deadlock_dict<'py>(py: Python<'py>, d: &core::Deadlock) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("cycle", cycle_dicts(py, &d.cycle)?)?;
    out.set_item("victim_transaction_id", d.victim_transaction_id)?;
    out.set_item("policy", d.policy.as_str())?;
    Ok(out)
}

//! What Python sees of core's values beyond their derived classes (feature `pyo3`, which
//! only the Python SDK turns on): `repr`, truth value, and the getters of a class that
//! shows only some fields. The classes are declared where the types are, with `cfg_attr`,
//! so the SDK keeps no copy of them.

use pyo3::prelude::*;

use crate::{KeyHolder, Lock, LockMode, PendingLock, QueuePosition, TokenCheck};

#[pymethods]
impl Lock {
    fn __repr__(&self) -> String {
        format!(
            "Lock(namespace={:?}, key={:?}, mode={}, fencing_token={})",
            self.namespace,
            self.key,
            self.mode.as_str(),
            self.fencing_token
        )
    }
}

#[pymethods]
impl QueuePosition {
    fn __repr__(&self) -> String {
        format!(
            "QueuePosition(position={}, blocking_transaction_ids={:?})",
            self.position, self.blocking_transaction_ids
        )
    }
}

#[pymethods]
impl TokenCheck {
    fn __repr__(&self) -> String {
        format!(
            "TokenCheck(current={}, current_tokens={:?})",
            if self.current { "True" } else { "False" },
            self.current_tokens
        )
    }

    fn __bool__(&self) -> bool {
        self.current
    }
}

#[pymethods]
impl KeyHolder {
    fn __repr__(&self) -> String {
        format!(
            "KeyHolder(transaction_id={}, transaction_name={:?}, fencing_token={})",
            self.transaction_id, self.transaction_name, self.fencing_token
        )
    }
}

#[pymethods]
impl PendingLock {
    /// The requested lock's namespace.
    #[getter]
    fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The requested lock's key.
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    /// The requested mode.
    #[getter]
    fn mode(&self) -> LockMode {
        self.mode
    }

    /// 1 = next in line.
    #[getter]
    fn position(&self) -> u32 {
        self.position
    }
}

//! `caerus._native`: the Python extension of Caerus DLS, a thin layer over `caerus-core`.
//!
//! Every call goes to the core client; nothing here retries, heartbeats or decides about
//! locks. Each operation exists twice: `name` returns an asyncio awaitable (the future
//! runs on the shared tokio runtime), `name_blocking` runs the same future to completion
//! with the GIL released; both come from one definition ([`twins::pymethods_with_twins`]).
//! The Python package `caerus` builds its asyncio and sync APIs on top of these.

mod asyncio_bridge;
mod client;
mod errors;
mod events;
mod key_watch;
mod runtime;
mod slots;
mod transaction;
mod twins;
mod types;

use pyo3::prelude::*;

/// Native part of the Caerus DLS Python SDK; import `caerus` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<types::LockMode>()?;
    m.add_class::<types::Lock>()?;
    m.add_class::<types::TokenCheck>()?;
    m.add_class::<types::QueuePosition>()?;
    m.add_class::<types::PendingLock>()?;
    m.add_class::<types::TransactionStatus>()?;
    m.add_class::<types::LostReason>()?;
    m.add_class::<events::Event>()?;
    m.add_class::<types::KeyLocks>()?;
    m.add_class::<types::KeyDelay>()?;
    m.add_class::<types::LockDelayRule>()?;
    m.add_class::<types::ApiKeyInfo>()?;
    m.add_class::<slots::SlotClaim>()?;
    m.add_class::<slots::SlotRun>()?;
    m.add_class::<transaction::NativeTransaction>()?;
    m.add_class::<events::NativeEventStream>()?;
    m.add_class::<key_watch::KeyHolder>()?;
    m.add_class::<key_watch::KeyChange>()?;
    m.add_class::<key_watch::KeyUpdate>()?;
    m.add_class::<key_watch::NativeKeyWatch>()?;
    m.add_class::<client::NativeClient>()?;
    m.add("ERROR_CLASSES", errors::error_classes(m.py())?)?;
    Ok(())
}

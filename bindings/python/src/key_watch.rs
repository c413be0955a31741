//! Who holds one key, followed as it changes (`DlsClient.watch_key`): the values and the
//! native stream. Leader election is built on it in Python (`caerus.Election`).

use std::sync::Arc;

use caerus_core as core;
use pyo3::prelude::*;
use tokio::sync::Mutex;

use crate::twins::pymethods_with_twins;
use crate::types::LockMode;

/// A transaction holding the watched key.
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct KeyHolder {
    /// The holding transaction.
    transaction_id: u64,
    /// Its label (in an election, the candidate's name).
    transaction_name: String,
    /// The mode held.
    mode: LockMode,
    /// The grant's fencing token.
    fencing_token: u64,
    /// When it was granted (leader clock, ms since the Unix epoch).
    since_ms: i64,
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

impl From<core::KeyHolder> for KeyHolder {
    fn from(h: core::KeyHolder) -> Self {
        KeyHolder {
            transaction_id: h.transaction_id,
            transaction_name: h.transaction_name,
            mode: h.mode,
            fencing_token: h.fencing_token,
            since_ms: h.since_ms,
        }
    }
}

/// One change of a watched key's holders.
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct KeyChange {
    /// `"GRANTED"`, `"RELEASED"`, `"EXPIRED"`, `"REVOKED"` or `"DOWNGRADED"`.
    kind: &'static str,
    /// To whom (for a departure: the holder as it was).
    holder: KeyHolder,
    /// Why the holder's transaction ended (EXPIRED, REVOKED), e.g. `"OPERATOR_ABORT"`.
    end_cause: Option<&'static str>,
}

#[pymethods]
impl KeyChange {
    fn __repr__(&self) -> String {
        format!("KeyChange(kind={:?}, transaction_id={})", self.kind, self.holder.transaction_id)
    }
}

/// The holders of a watched key, and what changed since the previous update.
#[pyclass(frozen, get_all, module = "caerus")]
pub struct KeyUpdate {
    /// Everyone holding the key now (empty: free), oldest grant first.
    holders: Vec<KeyHolder>,
    /// Empty in the first update of a watch.
    changes: Vec<KeyChange>,
    /// True for the first update: the state the watch starts from.
    initial: bool,
}

#[pymethods]
impl KeyUpdate {
    fn __repr__(&self) -> String {
        format!("KeyUpdate(holders={}, changes={}, initial={})", self.holders.len(), self.changes.len(), self.initial)
    }
}

impl From<core::KeyUpdate> for KeyUpdate {
    fn from(u: core::KeyUpdate) -> Self {
        KeyUpdate {
            holders: u.holders.into_iter().map(KeyHolder::from).collect(),
            changes: u
                .changes
                .into_iter()
                .map(|c| KeyChange {
                    kind: c.kind.as_str(),
                    holder: c.holder.into(),
                    end_cause: c.end_cause.map(|e| e.as_str()),
                })
                .collect(),
            initial: u.initial,
        }
    }
}

/// A native key watch. Use `DlsClient.watch_key`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeKeyWatch {
    watch: Arc<Mutex<core::KeyWatch>>,
}

impl NativeKeyWatch {
    pub(crate) async fn open(client: core::DlsClient, namespace: String, key: String) -> Result<Self, core::Error> {
        let watch = client.watch_key(&namespace, &key).await?;
        Ok(NativeKeyWatch { watch: Arc::new(Mutex::new(watch)) })
    }
}

async fn next_update(watch: Arc<Mutex<core::KeyWatch>>) -> Result<Option<KeyUpdate>, core::Error> {
    Ok(watch.lock().await.next_update().await.transpose()?.map(KeyUpdate::from))
}

pymethods_with_twins! {
    impl NativeKeyWatch {}
    twins {
        /// The next `KeyUpdate`, or None once the watch has ended.
        fn next / next_blocking(&self) -> Option<KeyUpdate> {
            next_update(Arc::clone(&self.watch))
        }
    }
}

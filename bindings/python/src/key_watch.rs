//! Who holds one key, followed as it changes (`DlsClient.watch_key`): the values and the
//! native stream. Leader election is built on it in Python (`caerus.Election`).

use std::sync::Arc;

use caerus_core as core;
use pyo3::prelude::*;
use tokio::sync::Mutex;

use crate::twins::pymethods_with_twins;

/// The holder class is core's `KeyHolder` itself (`caerus-core` with its `pyo3` feature).
pub(crate) use core::KeyHolder;

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
            holders: u.holders,
            changes: u
                .changes
                .into_iter()
                .map(|c| KeyChange {
                    kind: c.kind.as_str(),
                    holder: c.holder,
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

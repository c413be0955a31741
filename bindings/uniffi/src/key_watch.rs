//! Who holds one key, followed as it changes (`DlsClient.watchKey`); the election helpers
//! are written over it in Kotlin (`Dls.kt`) and Swift.

use std::sync::Arc;

use caerus_core as core;
use tokio::sync::Mutex;

use crate::errors::DlsError;
use crate::runtime::on_runtime;
use crate::types::{EndCause, LockMode};

/// A transaction holding a watched key.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct KeyHolder {
    pub transaction_id: u64,
    /// Its label: in an election, the candidate's name.
    pub transaction_name: String,
    pub mode: LockMode,
    pub fencing_token: u64,
    pub since_ms: i64,
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

/// How a key's holders changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum KeyChangeKind {
    Granted,
    Released,
    Expired,
    Revoked,
    Downgraded,
    /// A kind this SDK does not know yet.
    Unknown,
}

/// One change of a watched key's holders.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct KeyChange {
    pub kind: KeyChangeKind,
    pub holder: KeyHolder,
    /// Why the holder's transaction ended (Expired, Revoked).
    pub end_cause: Option<EndCause>,
}

/// The holders of a watched key and what changed since the previous update.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct KeyUpdate {
    pub holders: Vec<KeyHolder>,
    /// Empty in the first update.
    pub changes: Vec<KeyChange>,
    /// True for the first update: the state the watch starts from.
    pub initial: bool,
}

impl From<core::KeyUpdate> for KeyUpdate {
    fn from(u: core::KeyUpdate) -> Self {
        let kind = |k: core::KeyChangeKind| match k {
            core::KeyChangeKind::Granted => KeyChangeKind::Granted,
            core::KeyChangeKind::Released => KeyChangeKind::Released,
            core::KeyChangeKind::Expired => KeyChangeKind::Expired,
            core::KeyChangeKind::Revoked => KeyChangeKind::Revoked,
            core::KeyChangeKind::Downgraded => KeyChangeKind::Downgraded,
            _ => KeyChangeKind::Unknown,
        };
        KeyUpdate {
            holders: u.holders.into_iter().map(KeyHolder::from).collect(),
            changes: u
                .changes
                .into_iter()
                .map(|c| KeyChange { kind: kind(c.kind), holder: c.holder.into(), end_cause: c.end_cause })
                .collect(),
            initial: u.initial,
        }
    }
}

/// A key watch: `next()` until null. Close it (`close()` / `use {}`) when done.
#[derive(uniffi::Object)]
pub struct KeyWatch {
    watch: Arc<Mutex<Option<core::KeyWatch>>>,
}

impl KeyWatch {
    pub(crate) fn new(watch: core::KeyWatch) -> Self {
        KeyWatch { watch: Arc::new(Mutex::new(Some(watch))) }
    }
}

#[uniffi::export]
impl KeyWatch {
    /// The next update, or null once the watch ended. Throws (once) when it ends with an error.
    pub async fn next(&self) -> Result<Option<KeyUpdate>, DlsError> {
        let watch = Arc::clone(&self.watch);
        on_runtime(async move {
            let mut guard = watch.lock().await;
            let Some(w) = guard.as_mut() else { return Ok(None) };
            match w.next_update().await {
                Some(Ok(u)) => Ok(Some(u.into())),
                Some(Err(e)) => {
                    *guard = None;
                    Err(e.into())
                }
                None => {
                    *guard = None;
                    Ok(None)
                }
            }
        })
        .await
    }
}

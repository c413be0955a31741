//! Who holds one key, followed as it changes (`DlsClient.watchKey`); the election helpers
//! are written over it in Kotlin (`Dls.kt`) and Swift.

use std::sync::Arc;

use caerus_core as core;
use tokio::sync::Mutex;

use crate::errors::DlsError;
use crate::runtime::on_runtime;
use crate::types::{EndCause, LockMode};

// The values are core's own types (`uniffi::remote`: the lists below are checked against
// core's declarations at compile time; nothing is converted). See `types.rs`.

pub type KeyHolder = core::KeyHolder;

/// A transaction holding a watched key.
#[uniffi::remote(Record)]
pub struct KeyHolder {
    pub transaction_id: u64,
    /// Its label: in an election, the candidate's name.
    pub transaction_name: String,
    pub mode: LockMode,
    pub fencing_token: u64,
    pub since_ms: i64,
}

pub type KeyChangeKind = core::KeyChangeKind;

/// How a key's holders changed.
#[uniffi::remote(Enum)]
pub enum KeyChangeKind {
    Granted,
    Released,
    Expired,
    Revoked,
    Downgraded,
}

pub type KeyChange = core::KeyChange;

/// One change of a watched key's holders.
#[uniffi::remote(Record)]
pub struct KeyChange {
    pub kind: KeyChangeKind,
    pub holder: KeyHolder,
    /// Why the holder's transaction ended (Expired, Revoked).
    pub end_cause: Option<EndCause>,
}

pub type KeyUpdate = core::KeyUpdate;

/// The holders of a watched key and what changed since the previous update.
#[uniffi::remote(Record)]
pub struct KeyUpdate {
    pub holders: Vec<KeyHolder>,
    /// Empty in the first update.
    pub changes: Vec<KeyChange>,
    /// True for the first update: the state the watch starts from.
    pub initial: bool,
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
                Some(Ok(u)) => Ok(Some(u)),
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

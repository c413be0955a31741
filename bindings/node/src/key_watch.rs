//! Following who holds a key.

use std::sync::Arc;

use napi::bindgen_prelude::BigInt;
use napi::Result;
use napi_derive::napi;
use tokio::sync::Mutex;

use crate::events::stream_item;

/// A transaction holding a watched key.
#[napi(object)]
pub struct JsKeyHolder {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub mode: String,
    pub fencing_token: BigInt,
    pub since_ms: f64,
}

impl From<caerus_core::KeyHolder> for JsKeyHolder {
    fn from(h: caerus_core::KeyHolder) -> Self {
        JsKeyHolder {
            transaction_id: BigInt::from(h.transaction_id),
            transaction_name: h.transaction_name,
            mode: h.mode.as_str().to_string(),
            fencing_token: BigInt::from(h.fencing_token),
            since_ms: h.since_ms as f64,
        }
    }
}

/// One change of a watched key's holders.
#[napi(object)]
pub struct JsKeyChange {
    /// `GRANTED`, `RELEASED`, `EXPIRED`, `REVOKED` or `DOWNGRADED`.
    pub kind: String,
    pub holder: JsKeyHolder,
    pub end_cause: Option<String>,
}

/// The holders of a watched key and what changed since the previous update.
#[napi(object)]
pub struct JsKeyUpdate {
    pub holders: Vec<JsKeyHolder>,
    pub changes: Vec<JsKeyChange>,
    pub initial: bool,
}

impl From<caerus_core::KeyUpdate> for JsKeyUpdate {
    fn from(u: caerus_core::KeyUpdate) -> Self {
        JsKeyUpdate {
            holders: u.holders.into_iter().map(JsKeyHolder::from).collect(),
            changes: u
                .changes
                .into_iter()
                .map(|c| JsKeyChange {
                    kind: c.kind.as_str().to_string(),
                    holder: c.holder.into(),
                    end_cause: c.end_cause.map(|e| e.as_str().to_string()),
                })
                .collect(),
            initial: u.initial,
        }
    }
}

/// A key watch (`watchKey` in the JS wrapper turns it into an async iterator).
#[napi]
pub struct NativeKeyWatch {
    pub(crate) watch: Arc<Mutex<Option<caerus_core::KeyWatch>>>,
}

#[napi]
impl NativeKeyWatch {
    /// The next update, or null once the watch ended. Rejects (once) when it ends with an error.
    #[napi]
    pub async fn next(&self) -> Result<Option<JsKeyUpdate>> {
        let mut guard = self.watch.lock().await;
        let Some(watch) = guard.as_mut() else { return Ok(None) };
        let next = watch.next_update().await;
        stream_item(&mut *guard, next)
    }

    /// Stops the watch (the server stream is dropped); a pending `next` still finishes.
    #[napi]
    pub fn close(&self) {
        if let Ok(mut guard) = self.watch.try_lock() {
            *guard = None;
        }
    }
}

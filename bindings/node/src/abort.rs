//! Cancelling a call from JavaScript (`AbortSignal` in `index.js`).

use napi::Result;
use napi_derive::napi;
use tokio::sync::watch;

use crate::errors::coded;

/// Cancels the call it is handed to: `index.js` calls `abort()` when the caller's
/// `AbortSignal` fires. The call's core future is dropped, which withdraws a waiting
/// acquire on the server (core's `withdraw`).
#[napi]
pub struct NativeAbort {
    pub(crate) aborted: watch::Sender<bool>,
}

#[napi]
impl NativeAbort {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeAbort { aborted: watch::channel(false).0 }
    }

    #[napi]
    pub fn abort(&self) {
        self.aborted.send_replace(true);
    }
}

impl Default for NativeAbort {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `call` until it ends or `abort` fires; then drops it (`ABORTED`; `index.js` rejects
/// with the signal's reason instead).
pub(crate) async fn abortable<T>(
    abort: Option<watch::Receiver<bool>>,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(mut abort) = abort else { return call.await };
    tokio::select! {
        result = call => result,
        _ = abort.wait_for(|aborted| *aborted) => Err(coded("ABORTED", "the call was aborted by its AbortSignal")),
    }
}

//! A running transaction: acquires, slots, commit and abort, and the lost signal.

use std::sync::Arc;

use caerus_core::{LockRequest, QueuePosition, SlotClaim, Transaction};
use napi::bindgen_prelude::{spawn, BigInt, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;
use tokio::sync::watch;

use crate::abort::{abortable, NativeAbort};
use crate::errors::to_js;
use crate::options::acquire_options;
use crate::promise_bridge::promise;
use crate::slots::{slot_outcome, JsSlotClaim, JsSlotRun};
use crate::types::{mode_of, ms_of, JsLock, JsLockRequest, JsLostReason, JsQueuePosition, JsTransactionStatus};

/// A JS callback called from the runtime without keeping the process alive.
pub(crate) type Callback<T> = ThreadsafeFunction<T, (), T, Status, false, true>;

/// Core's progress callback calling the JS `onQueued` (if any) on the event loop.
pub(crate) fn queued_callback(on_queued: Option<Callback<JsQueuePosition>>) -> impl FnMut(&QueuePosition) + Send {
    move |q| {
        if let Some(callback) = &on_queued {
            let position = JsQueuePosition {
                position: q.position,
                blocking_transaction_ids: q.blocking_transaction_ids.iter().map(|&id| BigInt::from(id)).collect(),
            };
            callback.call(position, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// A running transaction (`Transaction` in the JS wrapper).
#[napi]
pub struct NativeTransaction {
    tx: Transaction,
    /// Turns true when this handle committed or aborted, which ends `on_lost`'s wait.
    ended: Arc<watch::Sender<bool>>,
}

impl NativeTransaction {
    pub(crate) fn new(tx: Transaction) -> Self {
        NativeTransaction { tx, ended: Arc::new(watch::channel(false).0) }
    }

    /// Commit or abort; a success silences `on_lost` for good.
    fn end<'env>(&self, env: &'env Env, commit: bool) -> Result<Unknown<'env>> {
        let (tx, ended) = (self.tx.clone(), Arc::clone(&self.ended));
        promise(env, async move {
            let result = if commit { tx.commit().await } else { tx.abort().await };
            if result.is_ok() {
                ended.send_replace(true);
            }
            result.map_err(to_js)
        })
    }
}

#[napi]
impl NativeTransaction {
    #[napi(getter)]
    pub fn id(&self) -> BigInt {
        BigInt::from(self.tx.id())
    }

    #[napi(getter)]
    pub fn lease_ms(&self) -> f64 {
        self.tx.lease().as_millis() as f64
    }

    #[napi(ts_return_type = "Promise<JsLock>")]
    // One positional argument per option: index.js is the only caller.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_lock<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        mode: Option<String>,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let opts = acquire_options(timeout_ms).map(|o| match traceparent {
            Some(tp) => o.with_traceparent(tp, tracestate),
            None => o,
        });
        let mode = mode_of(mode);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let lock = tx.acquire_lock_with_progress(&namespace, &key, mode?, opts?, progress).await;
                lock.map(JsLock::from).map_err(to_js)
            })
            .await
        })
    }

    /// One permit of the semaphore `namespace`/`key` of `permits` permits.
    #[napi(ts_return_type = "Promise<JsLock>")]
    // One positional argument per option: index.js is the only caller.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_permit<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        permits: u32,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let opts = acquire_options(timeout_ms);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let lock = tx.acquire_permit_with_progress(&namespace, &key, permits, opts?, progress).await;
                lock.map(JsLock::from).map_err(to_js)
            })
            .await
        })
    }

    /// Every lock of `locks` together or none (all-or-nothing, one token per lock).
    #[napi(ts_return_type = "Promise<JsLock[]>")]
    pub fn acquire_locks<'env>(
        &self,
        env: &'env Env,
        locks: Vec<JsLockRequest>,
        timeout_ms: Option<f64>,
        on_queued: Option<Callback<JsQueuePosition>>,
        abort: Option<&NativeAbort>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let wanted: Result<Vec<LockRequest>> =
            locks.into_iter().map(|l| Ok(LockRequest::new(l.namespace, l.key, mode_of(l.mode)?))).collect();
        let opts = acquire_options(timeout_ms);
        let abort = abort.map(|a| a.aborted.subscribe());
        promise(env, async move {
            let progress = queued_callback(on_queued);
            abortable(abort, async {
                let granted = tx.acquire_locks_with_progress(&wanted?, opts?, progress).await.map_err(to_js)?;
                Ok(granted.into_iter().map(JsLock::from).collect::<Vec<_>>())
            })
            .await
        })
    }

    /// Claims the schedule slot (of `period_ms`, aligned to the Unix epoch, by the cluster's
    /// clock) of a lock the transaction holds EXCLUSIVE.
    #[napi(ts_return_type = "Promise<JsSlotClaim>")]
    pub fn claim_slot<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        period_ms: f64,
        retry_failed: bool,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let period = ms_of(Some(period_ms), "periodMs").map(|ms| std::time::Duration::from_millis(ms.unwrap_or(0)));
        promise(env, async move {
            let claim = tx.claim_slot(&namespace, &key, period?, retry_failed).await.map_err(to_js)?;
            Ok(JsSlotClaim::from(claim))
        })
    }

    /// Records how the run of a claimed slot ended; resolves with the cluster's record.
    #[napi(ts_return_type = "Promise<JsSlotRun>")]
    pub fn finish_slot<'env>(
        &self,
        env: &'env Env,
        claim: JsSlotClaim,
        outcome: String,
        exit_code: Option<i32>,
    ) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        let outcome = slot_outcome(&outcome, exit_code);
        let claim = SlotClaim {
            namespace: claim.namespace,
            key: claim.key,
            slot: claim.slot as u64,
            run: claim.run,
            attempt: claim.attempt,
            last_run: None,
        };
        promise(env, async move { Ok(JsSlotRun::from(tx.finish_slot(&claim, outcome?).await.map_err(to_js)?)) })
    }

    /// EXCLUSIVE -> SHARED_READ in place, same token; null if the lock was not held.
    #[napi(ts_return_type = "Promise<JsLock | null>")]
    pub fn downgrade<'env>(&self, env: &'env Env, namespace: String, key: String) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.downgrade(&namespace, &key).await.map(|l| l.map(JsLock::from)).map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env, namespace: String, key: String) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.release(&namespace, &key).await.map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<JsTransactionStatus>")]
    pub fn status<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let tx = self.tx.clone();
        promise(env, async move { tx.status().await.map(JsTransactionStatus::from).map_err(to_js) })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        self.end(env, true)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn abort<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        self.end(env, false)
    }

    /// Stops the heartbeat without telling the server (after a failed abort).
    #[napi]
    pub fn abandon(&self) {
        self.tx.abandon();
    }

    /// Why the transaction was lost, or null while it is not.
    #[napi]
    pub fn lost_reason(&self) -> Option<JsLostReason> {
        self.tx.lost_reason().map(Into::into)
    }

    /// Calls `callback(reason)` once when core's lost signal fires; never after this
    /// handle committed or aborted. The callback is a weak threadsafe function: waiting for
    /// the signal does not keep the Node process alive, and the task holds only the signal
    /// channel, not the transaction.
    #[napi]
    pub fn on_lost(&self, callback: Callback<JsLostReason>) {
        let mut lost = self.tx.lost_signal();
        let mut ended = self.ended.subscribe();
        spawn(async move {
            let reason = tokio::select! {
                seen = lost.wait_for(Option::is_some) => seen.ok().and_then(|r| r.clone()),
                _ = ended.wait_for(|e| *e) => None,
            };
            if let Some(reason) = reason {
                callback.call(reason.into(), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
    }
}

//! A running transaction and the listener told when it is lost.

use std::sync::Arc;

use caerus_core as core;
use tokio::sync::watch;

use crate::errors::DlsError;
use crate::runtime::{on_runtime, RUNTIME};
use crate::slots::{SlotClaim, SlotOutcome, SlotRun};
use crate::types::{Lock, LockMode, LockRequest, LostKind, LostReason, QueuePosition, TransactionStatus};

/// Told once when a transaction is lost (lease expired, aborted, deadlock victim, lease
/// unconfirmed). Implemented in Kotlin / Swift; called on a runtime thread of the SDK, so
/// hand the work over to your own executor if it is long.
#[uniffi::export(with_foreign)]
pub trait LostListener: Send + Sync {
    /// The transaction's locks may already belong to someone else: stop the work.
    fn on_lost(&self, reason: LostReason);
}

/// Told each time a waiting acquire's place in the queue changes. Implemented in Kotlin /
/// Swift; called on a runtime thread of the SDK, so keep it short.
#[uniffi::export(with_foreign)]
pub trait QueueListener: Send + Sync {
    fn on_queued(&self, position: QueuePosition);
}

/// Core's progress callback calling the foreign listener, if any.
fn queued_callback(listener: Option<Arc<dyn QueueListener>>) -> impl FnMut(&core::QueuePosition) + Send {
    move |q| {
        if let Some(listener) = &listener {
            listener.on_queued(q.clone());
        }
    }
}

fn acquire_options(timeout_ms: Option<u64>) -> core::AcquireOptions {
    let mut opts = core::AcquireOptions::default();
    if let Some(ms) = timeout_ms {
        opts = opts.with_timeout_ms(ms);
    }
    opts
}

/// A running transaction. Its lease is heartbeated in Rust until it commits, aborts or
/// is lost.
#[derive(uniffi::Object)]
pub struct Transaction {
    tx: core::Transaction,
    /// Turns true once this handle committed or aborted, which silences the lost listener.
    ended: Arc<watch::Sender<bool>>,
}

impl Transaction {
    pub(crate) fn new(tx: core::Transaction) -> Self {
        Transaction { tx, ended: Arc::new(watch::channel(false).0) }
    }
}

#[uniffi::export]
impl Transaction {
    /// The server's id of the transaction; 0 until its first call reached the server
    /// (`transaction()` and `withTransaction` begin with the first acquire).
    pub fn id(&self) -> u64 {
        self.tx.id()
    }

    /// The lease the server granted, in milliseconds (the requested one until it began).
    pub fn lease_ms(&self) -> u64 {
        self.tx.lease().as_millis() as u64
    }

    /// Waits for the lock in FIFO order, up to `timeout_ms` (null: the server's default;
    /// 0: a try-lock). `on_queued` hears each change of the request's place in the queue.
    /// Throws `LockTimeout` (the transaction stays active) or `DeadlockVictim`.
    #[uniffi::method(default(timeout_ms = None, on_queued = None))]
    pub async fn acquire_lock(
        &self,
        namespace: String,
        key: String,
        mode: LockMode,
        timeout_ms: Option<u64>,
        on_queued: Option<Arc<dyn QueueListener>>,
    ) -> Result<Lock, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move {
            let (opts, progress) = (acquire_options(timeout_ms), queued_callback(on_queued));
            Ok(tx.acquire_lock_with_progress(&namespace, &key, mode, opts, progress).await?)
        })
        .await
    }

    /// Takes one permit of the counted semaphore `namespace`/`key` of `permits` permits: up
    /// to that many transactions hold it at once, a fencing token each (mode SEMAPHORE), the
    /// others wait in arrival order. Everyone on the key must name the same count, and a
    /// semaphore key takes no EXCLUSIVE or SHARED_READ request (`InvalidArgument`). Release it
    /// like a lock. `timeout_ms` and `on_queued` as for `acquire_lock`.
    #[uniffi::method(default(timeout_ms = None, on_queued = None))]
    pub async fn acquire_permit(
        &self,
        namespace: String,
        key: String,
        permits: u32,
        timeout_ms: Option<u64>,
        on_queued: Option<Arc<dyn QueueListener>>,
    ) -> Result<Lock, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move {
            let (opts, progress) = (acquire_options(timeout_ms), queued_callback(on_queued));
            Ok(tx.acquire_permit_with_progress(&namespace, &key, permits, opts, progress).await?)
        })
        .await
    }

    /// Takes every lock of `locks` together or none of them (all-or-nothing, one fencing
    /// token per lock, in the order given), waiting in each key's FIFO queue up to
    /// `timeout_ms` (0: a try-lock; null: the server's default). Throws `LockTimeout` (the
    /// transaction stays active, holding nothing new) or `DeadlockVictim`. `on_queued`
    /// hears the request's place (the furthest over the keys it waits for).
    #[uniffi::method(default(timeout_ms = None, on_queued = None))]
    pub async fn acquire_locks(
        &self,
        locks: Vec<LockRequest>,
        timeout_ms: Option<u64>,
        on_queued: Option<Arc<dyn QueueListener>>,
    ) -> Result<Vec<Lock>, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move {
            let (opts, progress) = (acquire_options(timeout_ms), queued_callback(on_queued));
            Ok(tx.acquire_locks_with_progress(&locks, opts, progress).await?)
        })
        .await
    }

    /// Turns a held EXCLUSIVE lock into SHARED_READ in place, keeping its fencing token
    /// (queued readers come in). Returns the lock as now held, or null if it was not held.
    pub async fn downgrade(&self, namespace: String, key: String) -> Result<Option<Lock>, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.downgrade(&namespace, &key).await?) }).await
    }

    /// Claims the schedule slot (of `period_ms`, aligned to the Unix epoch, by the cluster's
    /// clock) of a lock this transaction holds EXCLUSIVE: run the job only when the claim's
    /// `run` is true, then `finish_slot`. `retry_failed`: a failed or lost slot may run again.
    pub async fn claim_slot(
        &self,
        namespace: String,
        key: String,
        period_ms: u64,
        retry_failed: bool,
    ) -> Result<SlotClaim, DlsError> {
        let tx = self.tx.clone();
        let period = std::time::Duration::from_millis(period_ms);
        on_runtime(async move { Ok(tx.claim_slot(&namespace, &key, period, retry_failed).await?.into()) }).await
    }

    /// Records how a claimed run ended (before the lock is released: a run whose lock goes
    /// first is recorded LOST); returns the cluster's record.
    pub async fn finish_slot(&self, claim: SlotClaim, outcome: SlotOutcome) -> Result<SlotRun, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.finish_slot(&claim.into(), outcome).await?.into()) }).await
    }

    /// Releases one lock (or withdraws the wait for it); false if it was not held.
    pub async fn release(&self, namespace: String, key: String) -> Result<bool, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.release(&namespace, &key).await?) }).await
    }

    /// The transaction as the leader sees it.
    pub async fn status(&self) -> Result<TransactionStatus, DlsError> {
        let tx = self.tx.clone();
        on_runtime(async move { Ok(tx.status().await?.into()) }).await
    }

    /// Commits: releases every lock and stops the heartbeat.
    pub async fn commit(&self) -> Result<(), DlsError> {
        let tx = self.tx.clone();
        let result = on_runtime(async move { Ok(tx.commit().await?) }).await;
        if result.is_ok() {
            self.ended.send_replace(true);
        }
        result
    }

    /// Aborts: releases every lock and stops the heartbeat.
    pub async fn abort(&self) -> Result<(), DlsError> {
        let tx = self.tx.clone();
        let result = on_runtime(async move { Ok(tx.abort().await?) }).await;
        if result.is_ok() {
            self.ended.send_replace(true);
        }
        result
    }

    /// True once the transaction is lost.
    pub fn is_lost(&self) -> bool {
        self.tx.is_lost()
    }

    /// Why the transaction was lost, or null while it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.tx.lost_reason()
    }

    /// Returns when the transaction is lost; never if it ends normally, so race it against
    /// the work it guards (cancel the call to stop waiting).
    pub async fn await_lost(&self) -> LostReason {
        let tx = self.tx.clone();
        match on_runtime(async move { Ok(tx.lost().await) }).await {
            Ok(reason) => reason,
            // Only a failed runtime task gets here.
            Err(e) => LostReason { kind: LostKind::LeaseUnconfirmed, message: e.to_string(), end_cause: None },
        }
    }

    /// Calls `listener.on_lost(reason)` once if the transaction is lost; never after this
    /// handle committed or aborted. Each call adds a listener.
    pub fn set_lost_listener(&self, listener: Arc<dyn LostListener>) {
        let mut lost = self.tx.lost_signal();
        let mut ended = self.ended.subscribe();
        RUNTIME.spawn(async move {
            let reason = tokio::select! {
                seen = lost.wait_for(Option::is_some) => seen.ok().and_then(|r| r.clone()),
                _ = ended.wait_for(|e| *e) => None,
            };
            if let Some(reason) = reason {
                listener.on_lost(reason);
            }
        });
    }
}

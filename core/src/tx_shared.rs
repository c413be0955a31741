//! The state a transaction's handles share with its heartbeat task: where it stands, when
//! its lease was last acknowledged, and the signal that it was lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::Wire;
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::warn;

use crate::acquire_stream::AfterGrant;
use crate::error::{Error, Result};
use crate::heartbeat_batch::Heartbeats;
use crate::lease_budget::LeaseBudget;
use crate::router::{new_request_id, CallOptions, Router};
use crate::types::{EndCause, LostKind, LostReason, TransactionStatus};

/// Where a transaction stands from this client's point of view.
#[derive(Debug, Clone)]
pub(crate) enum Phase {
    Active,
    Committed,
    Aborted,
    Lost(LostReason),
}

/// State shared by all clones of a [`Transaction`] and its heartbeat task.
pub(crate) struct TxShared {
    pub(crate) id: u64,
    pub(crate) router: Arc<Router>,
    /// The client's heartbeat queue this transaction's renewals go through.
    pub(crate) heartbeats: Arc<Heartbeats>,
    /// The lease and how it is spent: the lost signal at `last_ack + lost_after`, the holder
    /// stopped by `last_ack + renew_deadline`.
    pub(crate) budget: LeaseBudget,
    pub(crate) phase: Mutex<Phase>,
    /// Send time of the last heartbeat the leader acknowledged (at first: of the begin
    /// call). The server's lease runs from a later instant, so `last_ack + lease` is a
    /// point the server's lease cannot end before.
    last_ack: Mutex<Instant>,
    /// Commit/abort calls in flight. While one runs, a "not active" answer elsewhere is
    /// most likely that very call taking effect, so only the end call decides the outcome.
    pub(crate) ending: AtomicUsize,
    /// The transaction handle's lost signal (created before the server named the
    /// transaction, so a deferred transaction can be watched from the start).
    pub(crate) lost_tx: watch::Sender<Option<LostReason>>,
    pub(crate) stop: Notify,
    /// The task reading this transaction's open acquire stream (the lost stream), if any:
    /// one per transaction, stopped when the transaction ends here.
    lost_stream: Mutex<Option<AbortHandle>>,
    /// One id per end kind, kept for the transaction's life: calling commit again after
    /// an unknown outcome then gets the first attempt's result rather than "not active".
    commit_request_id: String,
    abort_request_id: String,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TxShared {
    pub(crate) fn new(
        id: u64,
        router: Arc<Router>,
        heartbeats: Arc<Heartbeats>,
        budget: LeaseBudget,
        begun_at: Instant,
        lost_tx: watch::Sender<Option<LostReason>>,
    ) -> Self {
        TxShared {
            id,
            router,
            heartbeats,
            budget,
            phase: Mutex::new(Phase::Active),
            last_ack: Mutex::new(begun_at),
            ending: AtomicUsize::new(0),
            lost_tx,
            stop: Notify::new(),
            lost_stream: Mutex::new(None),
            commit_request_id: new_request_id(),
            abort_request_id: new_request_id(),
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        lock(&self.phase).clone()
    }

    pub(crate) fn is_active(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Active)
    }

    pub(crate) fn is_ending(&self) -> bool {
        self.ending.load(Ordering::SeqCst) > 0
    }

    pub(crate) fn last_ack(&self) -> Instant {
        *lock(&self.last_ack)
    }

    /// When the holder must have stopped: the renew deadline from the last acknowledged
    /// heartbeat (it no longer moves once the transaction is lost).
    pub(crate) fn renew_deadline(&self) -> Instant {
        self.last_ack() + self.budget.renew_deadline()
    }

    /// When the lost signal fires unless a heartbeat is acknowledged first.
    pub(crate) fn lost_at(&self) -> Instant {
        self.last_ack() + self.budget.lost_after()
    }

    pub(crate) fn acknowledged(&self, sent_at: Instant) {
        let mut last = lock(&self.last_ack);
        if sent_at > *last {
            *last = sent_at;
        }
    }

    /// Moves an active transaction to lost and tells every listener. Returns false if it
    /// had already ended or been lost.
    pub(crate) fn mark_lost(&self, reason: LostReason) -> bool {
        {
            let mut phase = lock(&self.phase);
            if !matches!(*phase, Phase::Active) {
                return false;
            }
            *phase = Phase::Lost(reason.clone());
        }
        warn!(
            transaction_id = self.id,
            kind = reason.kind.as_str(),
            message = %reason.message,
            "transaction lost; its locks can no longer be trusted"
        );
        self.lost_tx.send_replace(Some(reason));
        self.stop.notify_one();
        self.stop_lost_stream();
        true
    }

    pub(crate) fn mark_ended(&self, committed: bool) {
        {
            let mut phase = lock(&self.phase);
            if matches!(*phase, Phase::Active) {
                *phase = if committed { Phase::Committed } else { Phase::Aborted };
            }
        }
        self.stop.notify_one();
        self.stop_lost_stream();
    }

    /// Whether a lost stream is being read: a further acquire need not open another.
    pub(crate) fn has_lost_stream(&self) -> bool {
        lock(&self.lost_stream).as_ref().is_some_and(|task| !task.is_finished())
    }

    /// Reads `after_grant` in the background and fires the lost signal at once if the server
    /// reports that it ended the transaction. Keeps the newest stream: the older one ends
    /// on its own (its lock released, or the transaction over).
    pub(crate) fn follow_lost_stream(self: &Arc<Self>, after_grant: AfterGrant) {
        let shared = Arc::clone(self);
        let task = tokio::spawn(async move {
            if let Some(lost) = after_grant.lost().await {
                shared.server_ended(&lost);
            }
        });
        if let Some(older) = lock(&self.lost_stream).replace(task.abort_handle()) {
            older.abort();
        }
    }

    /// The lost stream's report: the server ended the transaction.
    fn server_ended(&self, lost: &pb::LockStreamLost) {
        // A commit or abort of ours in flight decides the outcome itself (as with status).
        if self.is_ending() {
            return;
        }
        self.mark_lost(match EndCause::from_wire(lost.end_cause) {
            Some(cause) => LostReason::ended_by(cause, lost.message.clone()),
            None => LostReason::without_cause(LostKind::Aborted, lost.message.clone()),
        });
    }

    /// Stops reading the lost stream (the transaction ended here, or its handles are gone).
    pub(crate) fn stop_lost_stream(&self) {
        if let Some(task) = lock(&self.lost_stream).take() {
            task.abort();
        }
    }

    /// Declares the transaction lost once its lost signal is due, even if the heartbeat
    /// task has not run yet (busy runtime): the holder's time to stop is running out.
    pub(crate) fn check_lease(&self) {
        if !self.is_active() || self.is_ending() {
            return;
        }
        if Instant::now() >= self.lost_at() {
            self.mark_lost(self.lease_unconfirmed(None));
        }
    }

    /// The loss of a lease no heartbeat could renew in time.
    pub(crate) fn lease_unconfirmed(&self, last_error: Option<&Error>) -> LostReason {
        let now = Instant::now();
        let silent = now.saturating_duration_since(self.last_ack());
        let stop_within = self.renew_deadline().saturating_duration_since(now);
        let mut message = format!(
            "lease could not be renewed for {} ms (heartbeats have {} ms of the {} ms lease); stop within {} ms, \
             before the server can expire it",
            silent.as_millis(),
            self.budget.lost_after().as_millis(),
            self.budget.lease().as_millis(),
            stop_within.as_millis(),
        );
        if let Some(e) = last_error {
            message.push_str(&format!(" (last error: {e})"));
        }
        LostReason::without_cause(LostKind::LeaseUnconfirmed, message)
    }

    /// Short budget for the status query that classifies a loss: the lost signal waits
    /// for it, and a guessed kind is better than a late signal.
    pub(crate) fn quick_options(&self) -> CallOptions {
        let budget = self.router.request_timeout.min(Duration::from_secs(1));
        CallOptions {
            deadline: Instant::now() + budget,
            attempt_timeout: budget,
            max_backoff: Duration::from_millis(100),
            overrun: Duration::ZERO,
        }
    }

    pub(crate) async fn fetch_status(&self, options: CallOptions) -> Result<TransactionStatus> {
        let request = pb::GetTransactionStatusRequest { transaction_id: self.id };
        let routed = self
            .router
            .unary(
                "GetTransactionStatus",
                request,
                options,
                |mut c, r| async move { c.get_transaction_status(r).await },
            )
            .await?;
        TransactionStatus::try_from(routed.value)
    }

    /// Works out why the server calls the transaction not active: from the end cause its
    /// answer (`error`) carried, else (the transaction was still ending) from a status query.
    pub(crate) async fn lost_reason_of(&self, error: &Error) -> LostReason {
        let message = error.message().to_string();
        if let Some(cause) = error.end_cause() {
            return LostReason::ended_by(cause, message);
        }
        match self.fetch_status(self.quick_options()).await {
            Ok(status) => match status.end_cause {
                Some(cause) => LostReason::ended_by(cause, message),
                None => LostReason::without_cause(LostKind::Aborted, message),
            },
            Err(Error::TransactionNotFound { .. }) => LostReason::without_cause(LostKind::NotFound, message),
            Err(_) => LostReason::without_cause(LostKind::Aborted, message),
        }
    }

    /// Turns an error that means "this transaction is gone" into the lost signal, and
    /// returns the error to report. A loss the server attributes to a deadlock is reported
    /// as [`Error::DeadlockVictim`] whichever call heard of it first (the acquire that was
    /// chosen, or a later call answered "not active").
    pub(crate) async fn observe(&self, error: Error) -> Error {
        if self.is_active() && !self.is_ending() {
            let reason = match &error {
                Error::DeadlockVictim { message, .. } => {
                    Some(LostReason::ended_by(EndCause::DeadlockVictim, message.clone()))
                }
                Error::TransactionLost { .. } => Some(self.lost_reason_of(&error).await),
                Error::TransactionNotFound { message } => {
                    Some(LostReason::without_cause(LostKind::NotFound, message.clone()))
                }
                _ => None,
            };
            if let Some(reason) = reason {
                self.mark_lost(reason);
            }
        }
        match (error, self.phase()) {
            (Error::TransactionLost { message, .. }, Phase::Lost(reason))
                if reason.kind == LostKind::DeadlockVictim =>
            {
                Error::DeadlockVictim { message, deadlock: None }
            }
            (error, _) => error,
        }
    }

    pub(crate) async fn end(&self, commit: bool) -> Result<pb::EndTransactionResponse> {
        let request = pb::EndTransactionRequest {
            transaction_id: self.id,
            commit,
            request_id: if commit { self.commit_request_id.clone() } else { self.abort_request_id.clone() },
        };
        let routed = self
            .router
            .unary("EndTransaction", request, self.router.default_options(), |mut c, r| async move {
                c.end_transaction(r).await
            })
            .await?;
        Ok(routed.value)
    }
}

/// Marks an end call in flight for as long as it lives, also when its future is dropped.
pub(crate) struct EndingGuard<'a>(&'a TxShared);

impl<'a> EndingGuard<'a> {
    pub(crate) fn new(shared: &'a TxShared) -> Self {
        shared.ending.fetch_add(1, Ordering::SeqCst);
        EndingGuard(shared)
    }
}

impl Drop for EndingGuard<'_> {
    fn drop(&mut self) {
        self.0.ending.fetch_sub(1, Ordering::SeqCst);
    }
}

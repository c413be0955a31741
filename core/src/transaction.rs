//! Transactions: the handle users hold, its shared state, and the calls made through it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::v1::acquire_lock_response::Event;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::Wire;
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::router::{attempt_timed_out, deadline_after, CallOptions, Router, BACKOFF_CAP};
use crate::types::{
    ms_to_wire, AcquireOptions, EndCause, Lock, LockMode, LostKind, LostReason, QueuePosition, TransactionState,
    TransactionStatus,
};

/// Where a transaction stands from this client's point of view.
#[derive(Debug, Clone)]
enum Phase {
    Active,
    Committed,
    Aborted,
    Lost(LostReason),
}

/// State shared by all clones of a [`Transaction`] and its heartbeat task.
pub(crate) struct TxShared {
    pub(crate) id: u64,
    pub(crate) router: Arc<Router>,
    pub(crate) lease: Duration,
    phase: Mutex<Phase>,
    /// Send time of the last heartbeat the leader acknowledged (at first: of the begin
    /// call). The server's lease runs from a later instant, so `last_ack + lease` is a
    /// point the server's lease cannot end before.
    last_ack: Mutex<Instant>,
    /// Commit/abort calls in flight. While one runs, a "not active" answer elsewhere is
    /// most likely that very call taking effect, so only the end call decides the outcome.
    ending: AtomicUsize,
    lost_tx: watch::Sender<Option<LostReason>>,
    pub(crate) stop: Notify,
    /// One id per end kind, kept for the transaction's life: calling commit again after
    /// an unknown outcome then gets the first attempt's result rather than "not active".
    commit_request_id: String,
    abort_request_id: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn new_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl TxShared {
    pub(crate) fn new(id: u64, router: Arc<Router>, lease: Duration, begun_at: Instant) -> Self {
        TxShared {
            id,
            router,
            lease,
            phase: Mutex::new(Phase::Active),
            last_ack: Mutex::new(begun_at),
            ending: AtomicUsize::new(0),
            lost_tx: watch::Sender::new(None),
            stop: Notify::new(),
            commit_request_id: new_request_id(),
            abort_request_id: new_request_id(),
        }
    }

    fn phase(&self) -> Phase {
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
        true
    }

    fn mark_ended(&self, committed: bool) {
        {
            let mut phase = lock(&self.phase);
            if matches!(*phase, Phase::Active) {
                *phase = if committed { Phase::Committed } else { Phase::Aborted };
            }
        }
        self.stop.notify_one();
    }

    /// Declares the transaction lost once a whole lease passed without an acknowledged
    /// heartbeat, even if the heartbeat task has not run yet (busy runtime): the server
    /// may already have expired it.
    pub(crate) fn check_lease(&self) {
        if !self.is_active() || self.is_ending() {
            return;
        }
        let silent = Instant::now().saturating_duration_since(self.last_ack());
        if silent >= self.lease {
            self.mark_lost(lease_unconfirmed(silent, None));
        }
    }

    /// Short budget for the status query that classifies a loss: the lost signal waits
    /// for it, and a guessed kind is better than a late signal.
    fn quick_options(&self) -> CallOptions {
        let budget = self.router.request_timeout.min(Duration::from_secs(1));
        CallOptions {
            deadline: Instant::now() + budget,
            attempt_timeout: budget,
            max_backoff: Duration::from_millis(100),
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
    /// answer carried, else (the transaction was still ending) from a status query.
    pub(crate) async fn lost_kind(&self, error: &Error) -> LostKind {
        if let Some(cause) = error.end_cause() {
            return LostKind::from_cause(cause);
        }
        match self.fetch_status(self.quick_options()).await {
            Ok(status) => status.end_cause.map(LostKind::from_cause).unwrap_or(LostKind::Aborted),
            Err(Error::TransactionNotFound { .. }) => LostKind::NotFound,
            Err(_) => LostKind::Aborted,
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
                    Some(LostReason { kind: LostKind::DeadlockVictim, message: message.clone() })
                }
                Error::TransactionLost { message, .. } => {
                    Some(LostReason { kind: self.lost_kind(&error).await, message: message.clone() })
                }
                Error::TransactionNotFound { message } => {
                    Some(LostReason { kind: LostKind::NotFound, message: message.clone() })
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

    async fn end(&self, commit: bool) -> Result<pb::EndTransactionResponse> {
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

/// The error a call reports for a lost transaction: [`Error::DeadlockVictim`] when a
/// deadlock cost it its locks, else [`Error::TransactionLost`].
pub(crate) fn lost_error(reason: &LostReason, message: String) -> Error {
    match reason.kind {
        LostKind::DeadlockVictim => Error::DeadlockVictim { message, deadlock: None },
        LostKind::Expired => Error::TransactionLost { message, cause: Some(EndCause::LeaseExpired) },
        _ => Error::lost(message),
    }
}

pub(crate) fn lease_unconfirmed(silent: Duration, last_error: Option<&Error>) -> LostReason {
    let mut message =
        format!("lease could not be renewed for {} ms; the server may have expired it", silent.as_millis());
    if let Some(e) = last_error {
        message.push_str(&format!(" (last error: {e})"));
    }
    LostReason { kind: LostKind::LeaseUnconfirmed, message }
}

/// Marks an end call in flight for as long as it lives, also when its future is dropped.
struct EndingGuard<'a>(&'a TxShared);

impl<'a> EndingGuard<'a> {
    fn new(shared: &'a TxShared) -> Self {
        shared.ending.fetch_add(1, Ordering::SeqCst);
        EndingGuard(shared)
    }
}

impl Drop for EndingGuard<'_> {
    fn drop(&mut self) {
        self.0.ending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Owns the heartbeat; dropped when the last [`Transaction`] clone is.
struct TxHandle {
    shared: Arc<TxShared>,
    heartbeat: AbortHandle,
}

impl Drop for TxHandle {
    fn drop(&mut self) {
        self.heartbeat.abort();
        let shared = &self.shared;
        let was_active = {
            let mut phase = lock(&shared.phase);
            let active = matches!(*phase, Phase::Active);
            if active {
                *phase = Phase::Aborted;
            }
            active
        };
        if !was_active {
            return;
        }
        // Nobody can use the transaction any more; aborting frees its locks now rather
        // than after the lease. Without a runtime the lease expiry does it instead.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            debug!(
                transaction_id = shared.id,
                "transaction dropped outside a tokio runtime; the server will expire it"
            );
            return;
        };
        debug!(transaction_id = shared.id, "last handle of an active transaction dropped; aborting it");
        let shared = Arc::clone(shared);
        runtime.spawn(async move {
            if let Err(e) = shared.end(false).await {
                debug!(transaction_id = shared.id, error = %e, "best-effort abort failed");
            }
        });
    }
}

/// A running transaction.
///
/// Cheap to clone; all clones share one heartbeat, which keeps the lease alive until the
/// transaction is committed, aborted or lost. When the last clone of a still-active
/// transaction is dropped, the heartbeat stops and the transaction is aborted in the
/// background.
#[derive(Clone)]
pub struct Transaction {
    handle: Arc<TxHandle>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.handle.shared.id)
            .field("lease", &self.handle.shared.lease)
            .field("phase", &self.handle.shared.phase())
            .finish()
    }
}

impl Transaction {
    pub(crate) fn start(shared: TxShared) -> Transaction {
        let shared = Arc::new(shared);
        let task = tokio::spawn(crate::heartbeat::run(Arc::clone(&shared)));
        Transaction { handle: Arc::new(TxHandle { shared, heartbeat: task.abort_handle() }) }
    }

    pub(crate) fn shared(&self) -> &TxShared {
        &self.handle.shared
    }

    /// The transaction id assigned by the server.
    pub fn id(&self) -> u64 {
        self.shared().id
    }

    /// The lease length the server applied.
    pub fn lease(&self) -> Duration {
        self.shared().lease
    }

    /// Fails unless the transaction is active as far as this client knows.
    pub(crate) fn ensure_active(&self) -> Result<()> {
        let shared = self.shared();
        shared.check_lease();
        match shared.phase() {
            Phase::Active => Ok(()),
            Phase::Lost(reason) => Err(lost_error(&reason, format!("transaction {} was lost: {reason}", shared.id))),
            Phase::Committed => Err(Error::lost(format!("transaction {} was already committed", shared.id))),
            Phase::Aborted => Err(Error::lost(format!("transaction {} was already aborted", shared.id))),
        }
    }

    /// Takes a lock, waiting up to `opts.timeout_ms` in the key's queue.
    ///
    /// Returns the lock with its fencing token. Fails with [`Error::LockTimeout`] when the
    /// wait times out (the transaction stays active), [`Error::DeadlockVictim`] or
    /// [`Error::TransactionLost`] when the transaction ended while waiting.
    pub async fn acquire_lock(&self, namespace: &str, key: &str, mode: LockMode, opts: AcquireOptions) -> Result<Lock> {
        self.acquire_lock_with_progress(namespace, key, mode, opts, |_| {}).await
    }

    /// Like [`acquire_lock`](Self::acquire_lock), calling `on_queued` whenever the
    /// request's place in the queue changes.
    pub async fn acquire_lock_with_progress(
        &self,
        namespace: &str,
        key: &str,
        mode: LockMode,
        opts: AcquireOptions,
        mut on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Lock> {
        self.ensure_active()?;
        let shared = self.shared();
        let message = pb::AcquireLockRequest {
            transaction_id: shared.id,
            namespace: namespace.to_string(),
            key: key.to_string(),
            mode: mode.to_wire(),
            timeout_ms: ms_to_wire("acquire timeout_ms", opts.timeout_ms)?,
            request_id: new_request_id(),
            begin: None,
        };
        let attach = stream_acquire(&shared.router, message, opts.timeout_ms, |progress| {
            if let AcquireProgress::Queued(position) = progress {
                on_queued(position);
            }
        });
        // A lost transaction's wait is pointless and its grant worthless: stop at once
        // rather than when the server (or a broken stream) says so.
        let result = tokio::select! {
            result = attach => result,
            reason = self.lost() => Err(lost_error(
                &reason,
                format!("transaction {} was lost while waiting for {namespace}/{key}: {reason}", shared.id),
            )),
        };
        match result {
            // The lease may have lapsed while the grant was on its way.
            Ok(lock) => self.ensure_active().map(|()| lock),
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Releases one lock early. Returns whether the transaction held it (or waited for
    /// it: the wait is then withdrawn and its acquire fails with [`Error::WaitCancelled`]).
    pub async fn release(&self, namespace: &str, key: &str) -> Result<bool> {
        self.ensure_active()?;
        let shared = self.shared();
        let request = pb::ReleaseLockRequest {
            transaction_id: shared.id,
            namespace: namespace.to_string(),
            key: key.to_string(),
            request_id: new_request_id(),
        };
        let result = shared
            .router
            .unary("ReleaseLock", request, shared.router.default_options(), |mut c, r| async move {
                c.release_lock(r).await
            })
            .await;
        match result {
            Ok(routed) => Ok(routed.value.released),
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Reads the transaction from the leader: state, held locks, pending wait.
    pub async fn status(&self) -> Result<TransactionStatus> {
        let shared = self.shared();
        match shared.fetch_status(shared.router.default_options()).await {
            Ok(status) => {
                if !shared.is_ending() {
                    if let Some(cause) = status.end_cause {
                        shared.mark_lost(LostReason {
                            kind: LostKind::from_cause(cause),
                            message: format!("transaction {} is {}: {}", shared.id, status.state, status.end_reason),
                        });
                    }
                }
                Ok(status)
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Commits: ends the transaction and releases its locks.
    ///
    /// Fails with [`Error::TransactionLost`] if the transaction was lost (or aborted)
    /// before the commit took effect ([`Error::DeadlockVictim`] if a deadlock cost it its
    /// locks). Committing twice is fine.
    pub async fn commit(&self) -> Result<()> {
        let shared = self.shared();
        match shared.phase() {
            Phase::Active => {}
            Phase::Committed => return Ok(()),
            Phase::Aborted | Phase::Lost(_) => return self.ensure_active(),
        }
        let guard = EndingGuard::new(shared);
        let result = shared.end(true).await;
        match result {
            Ok(response) => {
                let state = TransactionState::from_wire(response.state);
                if state == Some(TransactionState::Committed) {
                    shared.mark_ended(true);
                    debug!(transaction_id = shared.id, "committed");
                    Ok(())
                } else {
                    shared.mark_ended(false);
                    let state = state.map_or_else(|| format!("unknown state {}", response.state), |s| s.to_string());
                    Err(Error::lost(format!("commit of transaction {} ended it as {state}", shared.id)))
                }
            }
            Err(e) => {
                let (kind, message) = match &e {
                    Error::TransactionLost { message, .. } => (shared.lost_kind(&e).await, message.clone()),
                    Error::DeadlockVictim { message, .. } => (LostKind::DeadlockVictim, message.clone()),
                    Error::TransactionNotFound { message } => (LostKind::NotFound, message.clone()),
                    // Not an answer about the transaction: it is still active as far as
                    // anyone knows, and the heartbeat keeps running.
                    _ => return Err(e),
                };
                drop(guard);
                let reason = LostReason { kind, message: message.clone() };
                shared.mark_lost(reason.clone());
                Err(lost_error(&reason, format!("commit of transaction {} failed: {message}", shared.id)))
            }
        }
    }

    /// Aborts: ends the transaction and releases its locks. Aborting a transaction that
    /// already ended (or was lost) succeeds.
    pub async fn abort(&self) -> Result<()> {
        let shared = self.shared();
        if !shared.is_active() {
            return Ok(());
        }
        let _guard = EndingGuard::new(shared);
        match shared.end(false).await {
            Ok(_) => {
                shared.mark_ended(false);
                debug!(transaction_id = shared.id, "aborted");
                Ok(())
            }
            // Already over on the server: what the caller asked for is true.
            Err(Error::TransactionLost { .. } | Error::DeadlockVictim { .. } | Error::TransactionNotFound { .. }) => {
                shared.mark_ended(false);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Stops the heartbeat without telling the server, leaving the lease to run out.
    pub(crate) fn abandon(&self) {
        self.shared().mark_ended(false);
    }

    /// True once the transaction is lost: its locks may already belong to someone else.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the transaction was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared().check_lease();
        match self.shared().phase() {
            Phase::Lost(reason) => Some(reason),
            _ => None,
        }
    }

    /// Resolves when the transaction is lost. If it ends normally (commit or abort) this
    /// never resolves, so race it against the work it guards.
    pub async fn lost(&self) -> LostReason {
        let mut rx = self.lost_signal();
        let seen = rx.wait_for(Option::is_some).await.map(|r| r.clone());
        match seen {
            Ok(Some(reason)) => reason,
            _ => std::future::pending().await,
        }
    }

    /// A watch channel that turns `Some(reason)` when the transaction is lost.
    pub fn lost_signal(&self) -> watch::Receiver<Option<LostReason>> {
        self.shared().lost_tx.subscribe()
    }
}

/// What an AcquireLock stream reports before its grant.
pub(crate) enum AcquireProgress<'a> {
    /// A one-shot start: the transaction the server began for the request.
    Begun(&'a pb::BeginTransactionResponse),
    /// The request's place in the queue changed.
    Queued(&'a QueuePosition),
}

/// Runs one AcquireLock request until its grant, following the leader and re-attaching
/// (same request id) across failures. A one-shot start switches to a plain re-attach to
/// its transaction once the server has named it.
pub(crate) async fn stream_acquire(
    router: &Router,
    mut message: pb::AcquireLockRequest,
    timeout_ms: u64,
    mut on_progress: impl FnMut(AcquireProgress<'_>) + Send,
) -> Result<Lock> {
    let (namespace, key) = (message.namespace.clone(), message.key.clone());
    // The server ends the wait itself after timeout_ms; the extra retry budget covers
    // elections and re-attaching before that answer can be heard.
    let deadline = deadline_after(Duration::from_millis(timeout_ms).saturating_add(router.retry_deadline));
    let mut attempts = router.attempts(
        "AcquireLock",
        CallOptions { deadline, attempt_timeout: router.request_timeout, max_backoff: BACKOFF_CAP },
    );
    let mut last_position: Option<QueuePosition> = None;
    'attach: loop {
        let (uri, mut client) = match attempts.next() {
            Ok((uri, channel)) => (uri, LockServiceClient::new(channel)),
            Err(e) => return Err(e),
        };
        // No gRPC timeout on the request: the stream legitimately lives as long as the
        // wait. Only opening it is bounded.
        let open_timeout = attempts.attempt_timeout();
        let opened = tokio::time::timeout(open_timeout, client.acquire_lock(router.request(message.clone()))).await;
        let mut stream = match opened {
            Ok(Ok(response)) => {
                attempts.succeeded(&uri, response.metadata());
                response.into_inner()
            }
            Ok(Err(status)) => {
                attempts.failed(status).await?;
                continue 'attach;
            }
            Err(_) => {
                attempts.failed(attempt_timed_out(&uri, open_timeout)).await?;
                continue 'attach;
            }
        };
        loop {
            let next = match tokio::time::timeout_at(deadline, stream.message()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(Error::Unavailable {
                        message: format!(
                            "no final answer to the acquire of {namespace}/{key} from {uri} \
                             within the acquire timeout plus the retry deadline; the request \
                             may still be pending or granted (check the transaction status)"
                        ),
                    })
                }
            };
            match next {
                Ok(Some(response)) => {
                    if let Some(begun) = &response.begun {
                        if message.begin.is_some() {
                            on_progress(AcquireProgress::Begun(begun));
                            message.transaction_id = begun.transaction_id;
                            message.begin = None;
                        }
                    }
                    match response.event {
                        Some(Event::Queued(queued)) => {
                            attempts.progressed();
                            let position = QueuePosition::from(queued);
                            // A re-attached stream repeats the current position first.
                            if last_position.as_ref() != Some(&position) {
                                on_progress(AcquireProgress::Queued(&position));
                                last_position = Some(position);
                            }
                        }
                        Some(Event::Granted(granted)) => return Lock::try_from(granted),
                        None => {}
                    }
                }
                Ok(None) => {
                    let status = tonic::Status::unavailable(format!(
                        "acquire stream from {uri} ended without a grant or a status"
                    ));
                    attempts.failed(status).await?;
                    continue 'attach;
                }
                Err(status) => {
                    debug!(
                        transaction_id = message.transaction_id,
                        code = ?status.code(),
                        message = status.message(),
                        "acquire stream ended with a status"
                    );
                    attempts.failed(status).await?;
                    continue 'attach;
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::ClientConfig;

    /// A transaction whose cluster vanished right after begin: nothing listens any more.
    pub(crate) fn orphan(lease: Duration) -> Transaction {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let config = ClientConfig::new([addr.to_string()])
            .without_api_key()
            .with_connect_timeout(Duration::from_millis(50))
            .with_request_timeout(Duration::from_millis(50))
            .with_retry_deadline(Duration::from_millis(200));
        let router = Arc::new(Router::new(&config).unwrap());
        Transaction::start(TxShared::new(7, router, lease, Instant::now()))
    }

    #[tokio::test]
    async fn unconfirmed_lease_is_reported_lost_on_time() {
        let lease = Duration::from_millis(400);
        let started = Instant::now();
        let tx = orphan(lease);
        assert!(!tx.is_lost());
        let reason = tokio::time::timeout(Duration::from_secs(3), tx.lost()).await.expect("lost must fire");
        let after = started.elapsed();
        assert_eq!(reason.kind, LostKind::LeaseUnconfirmed);
        assert!(reason.message.contains("lease could not be renewed"), "{reason}");
        // Never before the lease could have run out, and promptly after.
        assert!(after >= lease, "{after:?}");
        assert!(after < lease + Duration::from_secs(1), "{after:?}");
        assert!(tx.is_lost());
        assert_eq!(tx.lost_reason(), Some(reason.clone()));
        assert_eq!(*tx.lost_signal().borrow(), Some(reason));

        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "TRANSACTION_LOST");
        assert_eq!(tx.release("ns", "k").await.unwrap_err().code(), "TRANSACTION_LOST");
        assert_eq!(tx.commit().await.unwrap_err().code(), "TRANSACTION_LOST");
        tx.abort().await.unwrap();
    }

    #[tokio::test]
    async fn a_deadlock_loss_is_reported_as_deadlock_victim_by_every_later_call() {
        let tx = orphan(Duration::from_secs(60));
        // What the server answers a victim's later calls.
        let heard = Error::TransactionLost {
            message: "transaction 7 is ABORTED (deadlock victim (policy oldest): cycle 7 waits for ns/a)".into(),
            cause: Some(EndCause::DeadlockVictim),
        };
        let err = tx.shared().observe(heard).await;
        assert_eq!(err.code(), "DEADLOCK_VICTIM", "{err}");
        assert_eq!(tx.lost_reason().map(|r| r.kind), Some(LostKind::DeadlockVictim));
        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "DEADLOCK_VICTIM", "{err}");
        assert_eq!(tx.commit().await.unwrap_err().code(), "DEADLOCK_VICTIM");
        // Other losses keep their generic error.
        let other = orphan(Duration::from_secs(60));
        let err = other
            .shared()
            .observe(Error::TransactionLost {
                message: r#"transaction 7 is ABORTED (aborted by operator "ops": deadlock victim)"#.into(),
                cause: Some(EndCause::OperatorAbort),
            })
            .await;
        assert_eq!(err.code(), "TRANSACTION_LOST");
        assert_eq!(other.lost_reason().map(|r| r.kind), Some(LostKind::Aborted));
    }

    #[tokio::test]
    async fn lease_check_does_not_wait_for_the_heartbeat_task() {
        let tx = orphan(Duration::from_millis(100));
        // Block this thread (current-thread runtime: the heartbeat task cannot run).
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(tx.lost_reason().map(|r| r.kind), Some(LostKind::LeaseUnconfirmed));
    }

    #[tokio::test]
    async fn acquire_stops_waiting_when_lost() {
        let tx = orphan(Duration::from_millis(300));
        let started = Instant::now();
        let err = tx
            .acquire_lock("ns", "k", LockMode::SharedRead, AcquireOptions::default().with_timeout_ms(60_000))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "TRANSACTION_LOST", "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn clones_share_state_and_drop_stops_the_heartbeat() {
        let tx = orphan(Duration::from_secs(60));
        let clone = tx.clone();
        assert_eq!(clone.id(), 7);
        let weak = Arc::downgrade(&tx.handle.shared);
        drop(tx);
        assert!(!clone.is_lost());
        drop(clone);
        // The heartbeat task is aborted and the best-effort abort gives up on its own;
        // then nothing keeps the transaction alive.
        tokio::time::timeout(Duration::from_secs(3), async {
            while weak.upgrade().is_some() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("transaction state must be freed after the last handle drops");
    }
}

//! Transactions: the handle users hold, its shared state, and the calls made through it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::Wire;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::debug;

use crate::acquire_stream::{stream_acquire, AcquireCall, AcquireProgress, AfterGrant};
use crate::error::{Error, Result};
use crate::heartbeat_batch::Heartbeats;
use crate::lease_budget::LeaseBudget;
use crate::router::{new_request_id, Router};
use crate::tx_shared::{lock, EndingGuard, Phase, TxShared};
use crate::types::{
    ms_to_wire, AcquireOptions, EndCause, Lock, LockMode, LockRequest, LostKind, LostReason, QueuePosition,
    TransactionOptions, TransactionState, TransactionStatus,
};
use crate::withdraw::{Holds, PendingAcquire, Withdrawals, Withdrawn};

/// The error a call reports for a lost transaction: [`Error::DeadlockVictim`] when a
/// deadlock cost it its locks, else [`Error::TransactionLost`] with what ended it, when the
/// server said (a reached maximum duration stays that, not a lapsed lease).
pub(crate) fn lost_error(reason: &LostReason, message: String) -> Error {
    match reason.kind {
        LostKind::DeadlockVictim => Error::DeadlockVictim { message, deadlock: None },
        _ => Error::TransactionLost { message, cause: reason.end_cause },
    }
}

/// Owns the heartbeat; dropped when the last [`Transaction`] clone is.
struct TxHandle {
    shared: Arc<TxShared>,
    heartbeat: AbortHandle,
}

impl TxHandle {
    fn spawn(shared: TxShared) -> TxHandle {
        let shared = Arc::new(shared);
        let task = tokio::spawn(crate::heartbeat::run(Arc::clone(&shared)));
        TxHandle { shared, heartbeat: task.abort_handle() }
    }
}

impl Drop for TxHandle {
    fn drop(&mut self) {
        self.heartbeat.abort();
        let shared = &self.shared;
        shared.stop_lost_stream();
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

/// A transaction.
///
/// Cheap to clone; all clones share one heartbeat, which keeps the lease alive until the
/// transaction is committed, aborted or lost. When the last clone of a still-active
/// transaction is dropped, the heartbeat stops and the transaction is aborted in the
/// background.
///
/// A transaction from [`DlsClient::transaction`](crate::DlsClient::transaction) (and the
/// one [`with_transaction`](crate::DlsClient::with_transaction) runs) is *deferred*: it
/// begins with its first call, and when that call is an acquire, the begin and the lock
/// travel in one request (the one-shot acquire: one round trip and one replicated write
/// fewer). Until then [`id`](Self::id) is 0, nothing is held and nothing can be lost.
#[derive(Clone)]
pub struct Transaction {
    inner: Arc<TxInner>,
}

struct TxInner {
    /// The server's transaction, once the server has named it.
    started: OnceLock<TxHandle>,
    /// How a deferred transaction begins; `None` when it was begun before the handle existed.
    deferred: Option<Deferred>,
    /// One call at a time begins a deferred transaction; the others wait for its id.
    begin_gate: tokio::sync::Mutex<()>,
    /// The begin gate is held by the withdrawal of a given-up first acquire (see
    /// [`Transaction::abort`]).
    withdrawing_begin: AtomicBool,
    /// A deferred transaction committed (`true`) or aborted before anything was sent.
    ended_unstarted: Mutex<Option<bool>>,
    /// Turns `Some(reason)` when the transaction is lost (shared with [`TxShared`]).
    lost_tx: watch::Sender<Option<LostReason>>,
    /// Acquires keep their stream open to hear at once that the server ended the
    /// transaction ([`TransactionOptions::lost_stream`]).
    lost_stream: bool,
    /// Given-up acquires being withdrawn: lock calls wait for them (`withdraw`).
    withdrawals: Withdrawals,
    /// What the transaction holds, as its calls saw it (what a withdrawal gives back).
    holds: Holds,
}

/// What a deferred transaction needs to begin.
pub(crate) struct Deferred {
    pub(crate) router: Arc<Router>,
    pub(crate) heartbeats: Arc<Heartbeats>,
    /// Built once: every attempt to begin (one-shot or plain) carries the same request id,
    /// so a begin the server applied but whose answer was lost is found again, not repeated.
    pub(crate) begin: pb::BeginTransactionRequest,
    /// [`TransactionOptions::lost_stream`].
    pub(crate) lost_stream: bool,
    /// [`TransactionOptions::stop_grace_ms`], checked against the lease.
    pub(crate) stop_grace: Duration,
}

impl Withdrawn for Transaction {
    fn calls(&self) -> Option<&Arc<Router>> {
        self.router()
    }

    fn txn_id(&self) -> u64 {
        self.id()
    }

    fn holds(&self) -> &Holds {
        &self.inner.holds
    }

    fn withdrawals(&self) -> &Withdrawals {
        &self.inner.withdrawals
    }

    fn begin_gate(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.begin_gate
    }

    fn withdrawing_begin(&self) -> &AtomicBool {
        &self.inner.withdrawing_begin
    }

    fn begun_elsewhere(&self, begun: &pb::BeginTransactionResponse, sent_at: Instant) {
        if self.started().is_some() {
            return;
        }
        if let Err(e) = self.set_started(begun, sent_at) {
            debug!(error = %e, "a given-up one-shot acquire began a transaction this client cannot follow");
            return;
        }
        if *lock(&self.inner.ended_unstarted) == Some(false) {
            // Aborted by the caller while this withdrawal ran: the transaction it found is
            // ended now, not kept alive by the heartbeat that just started.
            let tx = self.clone();
            tokio::spawn(async move {
                if let Err(e) = tx.abort().await {
                    debug!(error = %e, "could not abort a transaction a given-up acquire began");
                }
            });
        }
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Transaction");
        match self.started() {
            Some(shared) => d.field("id", &shared.id).field("lease", &shared.budget).field("phase", &shared.phase()),
            None => d.field("id", &0).field("deferred", &true).field("ended", &*lock(&self.inner.ended_unstarted)),
        };
        d.finish()
    }
}

/// The holder's grace of `opts`, refused unless the lease can honour it.
pub(crate) fn stop_grace(opts: &TransactionOptions) -> Result<Duration> {
    let budget = LeaseBudget::new(Duration::from_millis(opts.timeout_ms), Duration::from_millis(opts.stop_grace_ms))?;
    Ok(budget.stop_grace())
}

/// The begin request for `opts` (validated here, before anything is sent).
pub(crate) fn begin_request(opts: TransactionOptions) -> Result<pb::BeginTransactionRequest> {
    Ok(pb::BeginTransactionRequest {
        timeout_ms: ms_to_wire("transaction timeout_ms", opts.timeout_ms)?,
        priority: opts.priority,
        name: opts.name.unwrap_or_default(),
        request_id: new_request_id(),
        max_duration_ms: ms_to_wire("transaction max_duration_ms", opts.max_duration_ms.unwrap_or(0))?,
    })
}

impl Transaction {
    /// A transaction that begins with its first call.
    pub(crate) fn deferred(deferred: Deferred) -> Transaction {
        Transaction {
            inner: Arc::new(TxInner {
                started: OnceLock::new(),
                lost_stream: deferred.lost_stream,
                deferred: Some(deferred),
                begin_gate: tokio::sync::Mutex::new(()),
                withdrawing_begin: AtomicBool::new(false),
                ended_unstarted: Mutex::new(None),
                lost_tx: watch::Sender::new(None),
                withdrawals: Withdrawals::default(),
                holds: Holds::default(),
            }),
        }
    }

    /// A handle (and its heartbeat) for a transaction the server already began.
    #[cfg(test)]
    pub(crate) fn start(shared: TxShared) -> Transaction {
        let lost_tx = shared.lost_tx.clone();
        let started = OnceLock::new();
        let _ = started.set(TxHandle::spawn(shared));
        Transaction {
            inner: Arc::new(TxInner {
                started,
                deferred: None,
                begin_gate: tokio::sync::Mutex::new(()),
                withdrawing_begin: AtomicBool::new(false),
                ended_unstarted: Mutex::new(None),
                lost_tx,
                lost_stream: false,
                withdrawals: Withdrawals::default(),
                holds: Holds::default(),
            }),
        }
    }

    /// The server's transaction, if it has begun.
    pub(crate) fn started(&self) -> Option<&TxShared> {
        self.inner.started.get().map(|handle| &*handle.shared)
    }

    /// The router its calls go through.
    pub(crate) fn router(&self) -> Option<&Arc<Router>> {
        match (self.started(), &self.inner.deferred) {
            (Some(shared), _) => Some(&shared.router),
            (None, Some(deferred)) => Some(&deferred.router),
            (None, None) => None,
        }
    }

    /// Whether the next acquire should keep its stream open: the lost stream is on and no
    /// acquire of this transaction has one open yet (one stream per transaction is enough
    /// to hear of its end; a second opens only once the first has ended).
    fn stay_open(&self) -> bool {
        self.inner.lost_stream && !self.started().is_some_and(TxShared::has_lost_stream)
    }

    /// Hands a granted acquire's open stream to the transaction's lost-stream reader.
    fn follow_lost_stream(&self, after_grant: Option<AfterGrant>) {
        if let (Some(after_grant), Some(handle)) = (after_grant, self.inner.started.get()) {
            handle.shared.follow_lost_stream(after_grant);
        }
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &TxShared {
        self.started().expect("a started transaction")
    }

    /// Records what the server began for this handle and starts the heartbeat. Called with
    /// the begin gate held.
    fn set_started(&self, begun: &pb::BeginTransactionResponse, sent_at: Instant) -> Result<()> {
        let deferred = self.inner.deferred.as_ref().ok_or_else(|| Error::internal("begun twice"))?;
        let lease_ms = u64::try_from(begun.lease_timeout_ms).ok().filter(|ms| *ms > 0).ok_or_else(|| {
            Error::internal(format!(
                "server granted transaction {} a lease of {} ms",
                begun.transaction_id, begun.lease_timeout_ms
            ))
        })?;
        debug!(transaction_id = begun.transaction_id, lease_ms, "transaction started");
        // The lease runs from when the server handled the request, which is after it was
        // sent: counting from the send time errs on the safe side.
        let shared = TxShared::new(
            begun.transaction_id,
            Arc::clone(&deferred.router),
            Arc::clone(&deferred.heartbeats),
            LeaseBudget::clamped(Duration::from_millis(lease_ms), deferred.stop_grace),
            sent_at,
            self.inner.lost_tx.clone(),
        );
        let _ = self.inner.started.set(TxHandle::spawn(shared));
        Ok(())
    }

    /// The server's transaction, beginning a deferred one now if it has not begun (for the
    /// calls that need an id: status).
    async fn begun(&self) -> Result<&TxShared> {
        if let Some(shared) = self.started() {
            return Ok(shared);
        }
        let deferred = self.inner.deferred.as_ref().ok_or_else(|| Error::internal("transaction without a begin"))?;
        let _gate = self.inner.begin_gate.lock().await;
        if let Some(shared) = self.started() {
            return Ok(shared);
        }
        self.ensure_active()?;
        let sent_at = Instant::now();
        let routed = deferred
            .router
            .unary(
                "BeginTransaction",
                deferred.begin.clone(),
                deferred.router.default_options(),
                |mut c, r| async move { c.begin_transaction(r).await },
            )
            .await?;
        self.set_started(&routed.value, sent_at)?;
        self.started().ok_or_else(|| Error::internal("begun transaction missing"))
    }

    /// Begins a deferred transaction now (one `BeginTransaction` call) unless it has begun.
    pub async fn begin(&self) -> Result<()> {
        self.begun().await.map(|_| ())
    }

    /// The transaction id assigned by the server; 0 while a deferred transaction has not
    /// reached the server yet.
    pub fn id(&self) -> u64 {
        self.started().map_or(0, |shared| shared.id)
    }

    /// The lease length the server applied (the requested length until the server has
    /// begun a deferred transaction).
    pub fn lease(&self) -> Duration {
        match (self.started(), &self.inner.deferred) {
            (Some(shared), _) => shared.budget.lease(),
            (None, Some(deferred)) => Duration::from_millis(deferred.begin.timeout_ms.max(0) as u64),
            (None, None) => Duration::ZERO,
        }
    }

    /// How the lease is spent ([`LeaseBudget`]): when the lost signal fires and when the
    /// holder must have stopped, counted from the last acknowledged heartbeat.
    pub fn lease_budget(&self) -> LeaseBudget {
        match (self.started(), &self.inner.deferred) {
            (Some(shared), _) => shared.budget,
            (None, Some(deferred)) => LeaseBudget::clamped(self.lease(), deferred.stop_grace),
            (None, None) => LeaseBudget::clamped(Duration::ZERO, Duration::ZERO),
        }
    }

    /// The instant by which the holder must have stopped the work its locks protect unless
    /// a heartbeat is acknowledged first: the renew deadline ([`LeaseBudget`]), a margin
    /// before the server can expire the lease. It no longer moves once the transaction is
    /// lost (`dls lock` kills its command by then, whatever its grace). `None` while a
    /// deferred transaction has not begun.
    pub fn renew_deadline(&self) -> Option<std::time::Instant> {
        self.started().map(|shared| shared.renew_deadline().into_std())
    }

    /// Fails unless the transaction is active as far as this client knows.
    pub(crate) fn ensure_active(&self) -> Result<()> {
        let Some(shared) = self.started() else {
            return match *lock(&self.inner.ended_unstarted) {
                Some(true) => Err(Error::lost("the transaction was already committed (before it began)")),
                Some(false) => Err(Error::lost("the transaction was already aborted (before it began)")),
                None => Ok(()),
            };
        };
        shared.check_lease();
        match shared.phase() {
            Phase::Active => Ok(()),
            Phase::Lost(reason) => Err(lost_error(&reason, format!("transaction {} was lost: {reason}", shared.id))),
            Phase::Committed => Err(Error::lost(format!("transaction {} was already committed", shared.id))),
            Phase::Aborted => Err(Error::lost(format!("transaction {} was already aborted", shared.id))),
        }
    }

    /// For commit and abort: the server's transaction, or `None` when a deferred one never
    /// began, in which case it is ended here (nothing was sent, nothing is held).
    async fn started_or_end_here(&self, committed: bool) -> Result<Option<&TxShared>> {
        if let Some(shared) = self.started() {
            return Ok(Some(shared));
        }
        let _gate = match self.inner.begin_gate.try_lock() {
            Ok(gate) => gate,
            // A given-up first acquire is being withdrawn: it follows its request to learn
            // whether the server began the transaction, which may take as long as the
            // acquire did. An abort does not wait for that (the caller's timeout bounds the
            // call); the withdrawal ends what it finds (`begun_elsewhere`).
            Err(_) if !committed && self.inner.withdrawing_begin.load(Ordering::SeqCst) => {
                lock(&self.inner.ended_unstarted).get_or_insert(false);
                return Ok(self.started());
            }
            Err(_) => self.inner.begin_gate.lock().await,
        };
        if let Some(shared) = self.started() {
            return Ok(Some(shared));
        }
        let mut ended = lock(&self.inner.ended_unstarted);
        match (*ended, committed) {
            (None, _) => *ended = Some(committed),
            (Some(false), true) => return Err(Error::lost("the transaction was already aborted (before it began)")),
            (Some(_), _) => {}
        }
        Ok(None)
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
        on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Lock> {
        self.acquire_one(namespace, key, (mode, 0), opts, on_queued).await
    }

    /// Takes one permit of the counted semaphore `namespace/key` of `permits` permits: up
    /// to `permits` transactions hold it at once, each with its own fencing token (the
    /// lock comes back in mode [`LockMode::Semaphore`]); the others wait in arrival order.
    /// Every user of the key must name the same count while it is in use, and a semaphore
    /// key takes no EXCLUSIVE or SHARED_READ request (`INVALID_ARGUMENT` either way).
    /// Release it like a lock. Fails like [`acquire_lock`](Self::acquire_lock).
    pub async fn acquire_permit(&self, namespace: &str, key: &str, permits: u32, opts: AcquireOptions) -> Result<Lock> {
        self.acquire_permit_with_progress(namespace, key, permits, opts, |_| {}).await
    }

    /// Like [`acquire_permit`](Self::acquire_permit), calling `on_queued` whenever the
    /// request's place in the queue changes.
    pub async fn acquire_permit_with_progress(
        &self,
        namespace: &str,
        key: &str,
        permits: u32,
        opts: AcquireOptions,
        on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Lock> {
        self.ensure_active()?;
        // A permit cannot ride on the begin of a deferred transaction: it begins first.
        self.begun().await?;
        self.acquire_one(namespace, key, (LockMode::Semaphore, permits), opts, on_queued).await
    }

    /// One lock (`permits` 0) or one semaphore permit, in one AcquireLock stream.
    async fn acquire_one(
        &self,
        namespace: &str,
        key: &str,
        (mode, permits): (LockMode, u32),
        opts: AcquireOptions,
        mut on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Lock> {
        self.ensure_active()?;
        let timeout_ms = ms_to_wire("acquire timeout_ms", opts.timeout_ms)?;
        self.inner.withdrawals.settled().await;
        // A deferred transaction that has not begun takes its first lock in the begin
        // request; the gate keeps other calls from beginning it meanwhile and opens as soon
        // as the server names the transaction (the wait may go on long after).
        let mut gate = None;
        if self.started().is_none() {
            let guard = self.inner.begin_gate.lock().await;
            if self.started().is_none() {
                self.ensure_active()?;
                gate = Some(guard);
            }
        }
        let (router, transaction_id, begin) = match (self.started(), &self.inner.deferred) {
            (Some(shared), _) => (&shared.router, shared.id, None),
            (None, Some(deferred)) => (&deferred.router, 0, Some(deferred.begin.clone())),
            (None, None) => return Err(Error::internal("transaction without a begin")),
        };
        let message = AcquireCall::One(
            pb::AcquireLockRequest {
                transaction_id,
                namespace: namespace.to_string(),
                key: key.to_string(),
                mode: mode.to_wire(),
                timeout_ms,
                request_id: new_request_id(),
                begin,
                stay_open: self.stay_open(),
                permits,
            },
            opts.trace.clone(),
        );
        let sent_at = Instant::now();
        // Withdrawn in the background if this call is given up before its answer.
        let pending = PendingAcquire::new(self, &message, sent_at);
        let mut start_error = None;
        let attach = stream_acquire(router, message, opts.timeout_ms, |progress| match progress {
            AcquireProgress::Begun(begun) => {
                if gate.take().is_some() {
                    start_error = self.set_started(begun, sent_at).err();
                }
            }
            AcquireProgress::Queued(position) => {
                pending.queued();
                on_queued(position)
            }
        });
        // A lost transaction's wait is pointless and its grant worthless: stop at once
        // rather than when the server (or a broken stream) says so.
        let result = tokio::select! {
            result = attach => {
                pending.settle(&result);
                result
            }
            reason = self.lost() => {
                pending.disarm();
                Err(lost_error(
                    &reason,
                    format!("transaction {} was lost while waiting for {namespace}/{key}: {reason}", self.id()),
                ))
            }
        };
        if let Some(e) = start_error {
            return Err(e);
        }
        match (result, self.started()) {
            // The lease may have lapsed while the grant was on its way.
            (Ok((locks, after_grant)), Some(_)) => {
                self.inner.holds.granted(&locks);
                self.follow_lost_stream(after_grant);
                self.ensure_active()
                    .and_then(|()| locks.into_iter().next().ok_or_else(|| Error::internal("a grant without a lock")))
            }
            (Ok(_), None) => {
                Err(Error::internal("the server granted a one-shot acquire without naming its transaction"))
            }
            (Err(e), Some(shared)) => Err(shared.observe(e).await),
            (Err(e), None) => Err(e),
        }
    }

    /// Takes several locks at once, all or nothing: every lock is granted together (one
    /// fencing token each, in the order asked) or none is. While any is unavailable the
    /// request waits in the queue of every key it still needs, holding its place there, so
    /// keys need no ordering by hand and nothing is held half-way. Locks the transaction
    /// already holds in a covering mode come back with their existing tokens.
    ///
    /// Fails like [`acquire_lock`](Self::acquire_lock); also `INVALID_ARGUMENT` for an
    /// empty list, a key named twice or more than 64 locks.
    pub async fn acquire_locks(&self, locks: &[LockRequest], opts: AcquireOptions) -> Result<Vec<Lock>> {
        self.acquire_locks_with_progress(locks, opts, |_| {}).await
    }

    /// Like [`acquire_locks`](Self::acquire_locks), calling `on_queued` whenever the
    /// request's place changes (its furthest position over the keys it waits for).
    pub async fn acquire_locks_with_progress(
        &self,
        locks: &[LockRequest],
        opts: AcquireOptions,
        mut on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Vec<Lock>> {
        self.ensure_active()?;
        let timeout_ms = ms_to_wire("acquire timeout_ms", opts.timeout_ms)?;
        self.inner.withdrawals.settled().await;
        let shared = self.begun().await?;
        let call = AcquireCall::All(pb::AcquireLocksRequest {
            transaction_id: shared.id,
            locks: locks
                .iter()
                .map(|l| pb::LockRequest { namespace: l.namespace.clone(), key: l.key.clone(), mode: l.mode.to_wire() })
                .collect(),
            timeout_ms,
            request_id: new_request_id(),
            stay_open: self.stay_open(),
        });
        // Withdrawn in the background if this call is given up before its answer.
        let pending = PendingAcquire::new(self, &call, Instant::now());
        let attach = stream_acquire(&shared.router, call, opts.timeout_ms, |progress| {
            if let AcquireProgress::Queued(position) = progress {
                pending.queued();
                on_queued(position)
            }
        });
        let result = tokio::select! {
            result = attach => {
                pending.settle(&result);
                result
            }
            reason = self.lost() => {
                pending.disarm();
                Err(lost_error(
                    &reason,
                    format!("transaction {} was lost while waiting for {} locks: {reason}", shared.id, locks.len()),
                ))
            }
        };
        match result {
            Ok((granted, after_grant)) => {
                self.inner.holds.granted(&granted);
                self.follow_lost_stream(after_grant);
                self.ensure_active().map(|()| granted)
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Releases one lock early. Returns whether the transaction held it (or waited for
    /// it: the wait is then withdrawn and its acquire fails with [`Error::WaitCancelled`]).
    pub async fn release(&self, namespace: &str, key: &str) -> Result<bool> {
        self.ensure_active()?;
        self.inner.withdrawals.settled().await;
        let shared = match self.started() {
            Some(shared) => shared,
            None => {
                // A first acquire may be naming the transaction right now: wait for it.
                let _gate = self.inner.begin_gate.lock().await;
                match self.started() {
                    Some(shared) => shared,
                    None => return self.ensure_active().map(|()| false),
                }
            }
        };
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
            Ok(routed) => {
                self.inner.holds.released(namespace, key);
                Ok(routed.value.released)
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Turns an EXCLUSIVE lock this transaction holds into SHARED_READ in place, keeping its
    /// fencing token: no moment in which another writer could take the key, and readers
    /// queued behind it come in. Returns the lock as held now, or `None` when the
    /// transaction does not hold it. A SHARED_READ hold is returned as it is.
    pub async fn downgrade(&self, namespace: &str, key: &str) -> Result<Option<Lock>> {
        self.ensure_active()?;
        self.inner.withdrawals.settled().await;
        let Some(shared) = self.started() else {
            // Nothing was ever acquired: nothing to downgrade.
            return Ok(None);
        };
        let request = pb::DowngradeLockRequest {
            transaction_id: shared.id,
            namespace: namespace.to_string(),
            key: key.to_string(),
            request_id: new_request_id(),
        };
        let result = shared
            .router
            .unary("DowngradeLock", request, shared.router.default_options(), |mut c, r| async move {
                c.downgrade_lock(r).await
            })
            .await;
        match result {
            Ok(routed) => {
                let held = routed.value.lock.filter(|_| routed.value.held).map(Lock::try_from).transpose()?;
                self.inner.holds.granted(held.as_slice());
                Ok(held)
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Reads the transaction from the leader: state, held locks, pending wait.
    pub async fn status(&self) -> Result<TransactionStatus> {
        let shared = self.begun().await?;
        match shared.fetch_status(shared.router.default_options()).await {
            Ok(status) => {
                if !shared.is_ending() {
                    if let Some(cause) = status.end_cause {
                        shared.mark_lost(LostReason::ended_by(
                            cause,
                            format!("transaction {} is {}: {}", shared.id, status.state, status.end_reason),
                        ));
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
        let Some(shared) = self.started_or_end_here(true).await? else {
            return Ok(());
        };
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
                let reason = match &e {
                    Error::TransactionLost { .. } => shared.lost_reason_of(&e).await,
                    Error::DeadlockVictim { message, .. } => {
                        LostReason::ended_by(EndCause::DeadlockVictim, message.clone())
                    }
                    Error::TransactionNotFound { message } => {
                        LostReason::without_cause(LostKind::NotFound, message.clone())
                    }
                    // Not an answer about the transaction: it is still active as far as
                    // anyone knows, and the heartbeat keeps running.
                    _ => return Err(e),
                };
                drop(guard);
                let message = reason.message.clone();
                shared.mark_lost(reason.clone());
                Err(lost_error(&reason, format!("commit of transaction {} failed: {message}", shared.id)))
            }
        }
    }

    /// Aborts: ends the transaction and releases its locks. Aborting a transaction that
    /// already ended (or was lost) succeeds.
    pub async fn abort(&self) -> Result<()> {
        let Some(shared) = self.started_or_end_here(false).await? else {
            return Ok(());
        };
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

    /// Stops the heartbeat without telling the server, leaving the lease to run out: the
    /// clean-up after an abort that failed (no leader), so a lease nobody uses ends.
    pub fn abandon(&self) {
        match self.started() {
            Some(shared) => shared.mark_ended(false),
            None => {
                lock(&self.inner.ended_unstarted).get_or_insert(false);
            }
        }
    }

    /// True once the transaction is lost: its locks may already belong to someone else.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the transaction was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        let shared = self.started()?;
        shared.check_lease();
        match shared.phase() {
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
        self.inner.lost_tx.subscribe()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::ClientConfig;
    use tokio::time::Instant;

    use crate::heartbeat_batch::Heartbeats;

    /// A router to an address nothing listens on.
    fn dead_router() -> Arc<Router> {
        dead_router_retrying(Duration::from_millis(200))
    }

    /// A router to an address nothing listens on, retrying calls for `retry_deadline`.
    fn dead_router_retrying(retry_deadline: Duration) -> Arc<Router> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let config = ClientConfig::new([addr.to_string()])
            .without_api_key()
            .with_connect_timeout(Duration::from_millis(50))
            .with_request_timeout(Duration::from_millis(50))
            .with_retry_deadline(retry_deadline);
        Arc::new(Router::new(&config).unwrap())
    }

    /// A deferred transaction on a cluster nobody runs: any call that reaches for the
    /// server fails UNAVAILABLE, so the ones that succeed sent nothing.
    fn deferred_on_dead_cluster() -> Transaction {
        deferred_on(dead_router())
    }

    fn deferred_on(router: Arc<Router>) -> Transaction {
        let opts = TransactionOptions { timeout_ms: 4_000, ..TransactionOptions::default() };
        Transaction::deferred(Deferred {
            heartbeats: Arc::new(Heartbeats::new(&router)),
            router,
            begin: begin_request(opts).unwrap(),
            lost_stream: false,
            stop_grace: Duration::ZERO,
        })
    }

    #[tokio::test]
    async fn a_deferred_transaction_sends_nothing_until_its_first_call() {
        let tx = deferred_on_dead_cluster();
        assert_eq!(tx.id(), 0);
        assert_eq!(tx.lease(), Duration::from_millis(4_000));
        assert!(!tx.is_lost());
        // Nothing is held: releasing is a no-op, and ending needs no server.
        assert!(!tx.release("ns", "k").await.unwrap());
        tx.commit().await.unwrap();
        tx.commit().await.unwrap();
        tx.abort().await.unwrap();
        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "TRANSACTION_LOST", "{err}");
        assert!(err.message().contains("already committed"), "{err}");

        let tx = deferred_on_dead_cluster();
        tx.abort().await.unwrap();
        assert_eq!(tx.commit().await.unwrap_err().code(), "TRANSACTION_LOST");
        assert_eq!(tx.status().await.unwrap_err().code(), "TRANSACTION_LOST");
    }

    #[tokio::test]
    async fn a_first_acquire_and_its_abort_end_at_the_wait_when_the_cluster_never_answers() {
        // Retrying for 10 s, but the caller waits 1 s for the lock: without an answer from
        // the cluster, the acquire gives up then, not after the wait plus the retry budget.
        let tx = deferred_on(dead_router_retrying(Duration::from_secs(10)));
        let started = Instant::now();
        let opts = AcquireOptions::default().with_timeout_ms(1_000);
        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, opts).await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        assert!(took >= Duration::from_millis(700) && took < Duration::from_millis(1_800), "{took:?}");
        // The acquire is withdrawn in the background (it may have begun the transaction):
        // the abort does not wait for that.
        let started = Instant::now();
        tx.abort().await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(300), "{:?}", started.elapsed());
        assert_eq!(tx.commit().await.unwrap_err().code(), "TRANSACTION_LOST");
        // A try-lock needs an answer: it has the retry budget (here 1 s; the last backoff
        // that would pass it is not slept).
        let tx = deferred_on(dead_router_retrying(Duration::from_secs(1)));
        let started = Instant::now();
        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(0));
        assert_eq!(err.await.unwrap_err().code(), "UNAVAILABLE");
        assert!(started.elapsed() >= Duration::from_millis(700), "{:?}", started.elapsed());
    }

    #[test]
    fn a_stop_grace_the_lease_cannot_honour_is_refused_before_anything_is_sent() {
        let opts = TransactionOptions::default().with_stop_grace(Duration::from_secs(10));
        let err = stop_grace(&opts).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{err}");
        assert!(err.message().contains("the largest grace for this lease is 8.85s"), "{err}");
        let opts = TransactionOptions::default().with_stop_grace(Duration::from_millis(8_850));
        assert_eq!(stop_grace(&opts).unwrap(), Duration::from_millis(8_850));
    }

    #[tokio::test]
    async fn a_deferred_transactions_first_call_begins_it_and_reports_failures() {
        // The first acquire (one-shot) and a status (plain begin) both reach for the
        // server; with none there they fail and the transaction stays unbegun and usable.
        let tx = deferred_on_dead_cluster();
        let err = tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        assert_eq!(tx.status().await.unwrap_err().code(), "UNAVAILABLE");
        assert_eq!(tx.id(), 0);
        assert!(!tx.is_lost());
        tx.commit().await.unwrap();
    }

    /// A transaction whose cluster vanished right after begin: nothing listens any more.
    pub(crate) fn orphan(lease: Duration) -> Transaction {
        orphan_on(dead_router(), lease)
    }

    /// A started transaction whose calls go through `router`.
    fn orphan_on(router: Arc<Router>, lease: Duration) -> Transaction {
        Transaction::start(TxShared::new(
            7,
            Arc::clone(&router),
            Arc::new(Heartbeats::new(&router)),
            LeaseBudget::clamped(lease, Duration::ZERO),
            Instant::now(),
            watch::Sender::new(None),
        ))
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
        // At the renew deadline (a margin before the server could expire the lease), never
        // before it, and promptly.
        let deadline = LeaseBudget::new(lease, Duration::ZERO).unwrap().renew_deadline();
        assert!(deadline < lease);
        assert!(after >= deadline, "{after:?}");
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
        // The acquire would go on trying for 60 s: the lost lease ends it first.
        let tx = orphan_on(dead_router_retrying(Duration::from_secs(60)), Duration::from_millis(300));
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
        let weak = Arc::downgrade(&tx.inner.started.get().expect("started").shared);
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

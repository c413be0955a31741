//! Withdrawing an acquire its caller gave up on: a dropped future (a cancelled task,
//! coroutine or promise, an interrupted blocking call) or a stream the client stopped
//! following without an answer. The request must not stay queued on the server and be
//! granted to nobody: in the background, the client makes sure the server has it (a
//! re-attach with the same request id, so a request still on its way cannot arrive after
//! the withdrawal), withdraws it (`CancelWait`, which touches nothing the transaction
//! holds), and gives back what it was granted meanwhile: a lock the transaction did not
//! hold is released, an upgrade is turned back into the SHARED_READ hold it was.
//!
//! The transaction's next acquire, release and downgrade wait for the withdrawal, so it
//! never takes back a lock a later call asked for again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::Wire;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;
use tracing::debug;

use crate::acquire_stream::{stream_acquire, AcquireCall, AcquireProgress};
use crate::error::Error;
use crate::router::{new_request_id, Router};
use crate::tx_shared::lock;
use crate::types::{Lock, LockMode};

/// What a withdrawal needs of the transaction it works for (the `Transaction` handle):
/// named here, so that the transaction can use withdrawals without a circle between them.
pub(crate) trait Withdrawn: Clone + Send + Sync + 'static {
    /// Where the transaction's calls go (`None`: it has none).
    fn calls(&self) -> Option<&Arc<Router>>;
    /// The server's id of the transaction (0: not begun yet).
    fn txn_id(&self) -> u64;
    fn holds(&self) -> &Holds;
    fn withdrawals(&self) -> &Withdrawals;
    /// Held while a call may begin the transaction.
    fn begin_gate(&self) -> &tokio::sync::Mutex<()>;
    /// Set while a withdrawal holds the begin gate: an abort then does not wait for it.
    fn withdrawing_begin(&self) -> &AtomicBool;
    /// The server named the transaction a given-up first acquire began (`sent_at`: when
    /// that acquire was sent). Called with the begin gate held.
    fn begun_elsewhere(&self, begun: &pb::BeginTransactionResponse, sent_at: Instant);
}

/// Withdrawals of a transaction still under way; its lock calls wait until there are none.
#[derive(Default)]
pub(crate) struct Withdrawals {
    pending: AtomicUsize,
    settled: Notify,
}

impl Withdrawals {
    /// Returns once no withdrawal is under way.
    pub(crate) async fn settled(&self) {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            settled.await;
        }
    }

    fn start(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    fn finish(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.settled.notify_waiters();
    }
}

/// The locks a transaction holds as far as its calls through this client saw (grants,
/// releases, downgrades): what a withdrawal may give back and what it must leave alone.
#[derive(Default)]
pub(crate) struct Holds(Mutex<HashMap<(String, String), LockMode>>);

impl Holds {
    pub(crate) fn granted(&self, locks: &[Lock]) {
        let mut held = lock(&self.0);
        for l in locks {
            held.insert((l.namespace.clone(), l.key.clone()), l.mode);
        }
    }

    pub(crate) fn released(&self, namespace: &str, key: &str) {
        lock(&self.0).remove(&(namespace.to_string(), key.to_string()));
    }

    fn mode(&self, namespace: &str, key: &str) -> Option<LockMode> {
        lock(&self.0).get(&(namespace.to_string(), key.to_string())).copied()
    }
}

/// One lock of a request and what the transaction held of it when the request was sent.
struct Asked {
    namespace: String,
    key: String,
    mode: LockMode,
    held_before: Option<LockMode>,
}

/// An acquire on its way. Dropped while armed, it withdraws the request in the background.
pub(crate) struct PendingAcquire<T: Withdrawn> {
    tx: T,
    call: AcquireCall,
    /// When the request was first sent (a one-shot start's lease counts from it).
    sent_at: Instant,
    asked: Vec<Asked>,
    /// The server answered that the request waits (it has the request).
    queued: AtomicBool,
    runtime: Option<tokio::runtime::Handle>,
    armed: bool,
}

impl<T: Withdrawn> PendingAcquire<T> {
    pub(crate) fn new(tx: &T, call: &AcquireCall, sent_at: Instant) -> PendingAcquire<T> {
        let holds = tx.holds();
        let asked = requested(call)
            .into_iter()
            .map(|(namespace, key, mode)| Asked { held_before: holds.mode(&namespace, &key), namespace, key, mode })
            .collect();
        PendingAcquire {
            tx: tx.clone(),
            call: call.clone(),
            sent_at,
            asked,
            queued: AtomicBool::new(false),
            runtime: tokio::runtime::Handle::try_current().ok(),
            armed: true,
        }
    }

    /// The server said the request waits.
    pub(crate) fn queued(&self) {
        self.queued.store(true, Ordering::Relaxed);
    }

    /// The call ends with `result`: nothing to withdraw unless the request may still wait
    /// (no final answer was heard).
    pub(crate) fn settle<R>(mut self, result: &Result<R, Error>) {
        self.armed = matches!(result, Err(Error::Unavailable { .. } | Error::Internal { .. }));
    }

    /// The transaction was lost: the server ends its waits itself.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl<T: Withdrawn> Drop for PendingAcquire<T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(runtime) = self.runtime.take() else {
            debug!("an acquire was given up outside a tokio runtime; its wait ends by its timeout");
            return;
        };
        let withdrawal = Withdrawal {
            tx: self.tx.clone(),
            call: self.call.clone(),
            sent_at: self.sent_at,
            asked: std::mem::take(&mut self.asked),
            answered: self.queued.load(Ordering::Relaxed),
        };
        // Counted now, before the caller can make its next call; uncounted when the task
        // ends, or is dropped unrun (a runtime shutting down).
        let settling = Settling::start(self.tx.clone());
        runtime.spawn(async move {
            let tx = &settling.0;
            let budget = tx.calls().map_or(Duration::ZERO, |r| r.retry_deadline);
            if tokio::time::timeout(budget, withdrawal.run()).await.is_err() {
                debug!(
                    transaction_id = tx.txn_id(),
                    "withdrawing a given-up acquire took too long; its timeout ends it"
                );
            }
        });
    }
}

/// Marks the begin gate as held by a withdrawal while it lives.
struct WithdrawingBegin<'a>(&'a AtomicBool);

impl<'a> WithdrawingBegin<'a> {
    fn new(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        WithdrawingBegin(flag)
    }
}

impl Drop for WithdrawingBegin<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One withdrawal under way, counted in its transaction's [`Withdrawals`] while it lives.
struct Settling<T: Withdrawn>(T);

impl<T: Withdrawn> Settling<T> {
    fn start(tx: T) -> Settling<T> {
        tx.withdrawals().start();
        Settling(tx)
    }
}

impl<T: Withdrawn> Drop for Settling<T> {
    fn drop(&mut self) {
        self.0.withdrawals().finish();
    }
}

struct Withdrawal<T: Withdrawn> {
    tx: T,
    call: AcquireCall,
    sent_at: Instant,
    asked: Vec<Asked>,
    answered: bool,
}

/// What the server had done with the request when the withdrawal reached it.
enum Found {
    Waiting,
    Granted,
    Over,
}

impl<T: Withdrawn> Withdrawal<T> {
    async fn run(mut self) {
        let Some(router) = self.tx.calls() else { return };
        let router = router.clone();
        let mut found = Found::Waiting;
        if !self.answered {
            found = match self.first_answer(&router).await {
                Some(found) => found,
                None => return,
            };
        }
        let txn = self.tx.txn_id();
        if txn == 0 {
            return;
        }
        if let Found::Waiting = found {
            let request = pb::CancelWaitRequest { transaction_id: txn, request_id: self.request_id() };
            let answer = router
                .unary(
                    "CancelWait",
                    request,
                    router.default_options(),
                    |mut c, r| async move { c.cancel_wait(r).await },
                )
                .await;
            found = match answer {
                Ok(routed) if routed.value.granted => Found::Granted,
                Ok(routed) => {
                    debug!(transaction_id = txn, cancelled = routed.value.cancelled, "given-up acquire withdrawn");
                    Found::Over
                }
                Err(e) => {
                    debug!(transaction_id = txn, error = %e, "could not withdraw a given-up acquire");
                    Found::Over
                }
            };
        }
        if let Found::Granted = found {
            self.give_back(&router, txn).await;
        }
    }

    /// Follows the request (same request id) to its first answer, so that the server has it
    /// before it is withdrawn. `None` when it has ended (or cannot be followed).
    async fn first_answer(&mut self, router: &Router) -> Option<Found> {
        // A one-shot start the server named already re-attaches to its transaction; one it
        // has not named yet keeps the begin gate, as the first call of a transaction does.
        let mut _gate = None;
        if let AcquireCall::One(m, ..) = &mut self.call {
            if m.begin.is_some() {
                let gate = self.tx.begin_gate().lock().await;
                match self.tx.txn_id() {
                    0 => _gate = Some((gate, WithdrawingBegin::new(self.tx.withdrawing_begin()))),
                    txn => {
                        m.transaction_id = txn;
                        m.begin = None;
                    }
                }
            }
        }
        let (queued_tx, queued_rx) = oneshot::channel();
        let mut queued_tx = Some(queued_tx);
        let (tx, sent_at) = (&self.tx, self.sent_at);
        let timeout_ms = match &self.call {
            AcquireCall::One(m, ..) => m.timeout_ms,
            AcquireCall::All(m) => m.timeout_ms,
        };
        let follow = stream_acquire(router, self.call.clone(), timeout_ms.max(0) as u64, |progress| match progress {
            AcquireProgress::Begun(begun) => tx.begun_elsewhere(begun, sent_at),
            AcquireProgress::Queued(_) => {
                if let Some(q) = queued_tx.take() {
                    let _ = q.send(());
                }
            }
        });
        tokio::select! {
            result = follow => match result {
                Ok(_) => Some(Found::Granted),
                Err(e) => {
                    debug!(error = %e, "a given-up acquire ended before it was withdrawn");
                    None
                }
            },
            Ok(()) = queued_rx => Some(Found::Waiting),
        }
    }

    fn request_id(&self) -> String {
        match &self.call {
            AcquireCall::One(m, ..) => m.request_id.clone(),
            AcquireCall::All(m) => m.request_id.clone(),
        }
    }

    /// The request was granted but nobody wants it: release each lock the transaction did
    /// not hold before, turn an upgrade back into SHARED_READ, leave a re-acquired hold.
    async fn give_back(&self, router: &Router, txn: u64) {
        for asked in &self.asked {
            let (namespace, key) = (asked.namespace.clone(), asked.key.clone());
            let outcome = match (asked.held_before, asked.mode) {
                (None, _) => {
                    let request =
                        pb::ReleaseLockRequest { transaction_id: txn, namespace, key, request_id: new_request_id() };
                    let released = router
                        .unary("ReleaseLock", request, router.default_options(), |mut c, r| async move {
                            c.release_lock(r).await
                        })
                        .await;
                    released.map(|_| self.tx.holds().released(&asked.namespace, &asked.key))
                }
                (Some(LockMode::SharedRead), LockMode::Exclusive) => {
                    let request =
                        pb::DowngradeLockRequest { transaction_id: txn, namespace, key, request_id: new_request_id() };
                    let downgraded = router
                        .unary("DowngradeLock", request, router.default_options(), |mut c, r| async move {
                            c.downgrade_lock(r).await
                        })
                        .await;
                    downgraded.map(|_| ())
                }
                _ => Ok(()),
            };
            if let Err(e) = outcome {
                debug!(transaction_id = txn, error = %e, "could not give back a lock granted to a given-up acquire");
            }
        }
    }
}

/// Every lock a request asks for, with its mode.
fn requested(call: &AcquireCall) -> Vec<(String, String, LockMode)> {
    let mode = |raw: i32| LockMode::from_wire(raw).unwrap_or(LockMode::Exclusive);
    match call {
        AcquireCall::One(m, ..) => vec![(m.namespace.clone(), m.key.clone(), mode(m.mode))],
        AcquireCall::All(m) => m.locks.iter().map(|l| (l.namespace.clone(), l.key.clone(), mode(l.mode))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lock_calls_wait_until_every_withdrawal_settled() {
        let w = std::sync::Arc::new(Withdrawals::default());
        w.settled().await;
        w.start();
        w.start();
        let waiting = tokio::spawn({
            let w = w.clone();
            async move { w.settled().await }
        });
        w.finish();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one withdrawal is still under way");
        w.finish();
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("settled").unwrap();
    }

    #[test]
    fn holds_follow_grants_releases_and_downgrades() {
        let holds = Holds::default();
        let lock = |mode| Lock { namespace: "n".into(), key: "k".into(), mode, fencing_token: 1 };
        holds.granted(&[lock(LockMode::Exclusive)]);
        assert_eq!(holds.mode("n", "k"), Some(LockMode::Exclusive));
        holds.granted(&[lock(LockMode::SharedRead)]);
        assert_eq!(holds.mode("n", "k"), Some(LockMode::SharedRead));
        holds.released("n", "k");
        assert_eq!(holds.mode("n", "k"), None);
    }
}

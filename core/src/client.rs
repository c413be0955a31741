//! The client entry point: connecting and starting transactions.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use caerus_proto::v1 as pb;
use futures::FutureExt;
use tracing::debug;

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::heartbeat_batch::Heartbeats;
use crate::router::Router;
use crate::transaction::{begin_request, lost_error, stop_grace, Deferred, Transaction};
use crate::types::{
    AcquireOptions, Lock, LockMode, LostKind, LostReason, TokenCheck, TransactionOptions, TransactionStatus,
};

/// A connection to a Caerus DLS cluster. Cheap to clone; clones share connections and
/// the knowledge of who the leader is.
#[derive(Clone)]
pub struct DlsClient {
    router: Arc<Router>,
    heartbeats: Arc<Heartbeats>,
}

impl std::fmt::Debug for DlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DlsClient").field("router", &self.router).finish()
    }
}

impl DlsClient {
    /// Checks the configuration and prepares connections to every endpoint.
    ///
    /// Connections are opened on first use, so this succeeds while the cluster is still
    /// starting or electing a leader; calls then retry until `retry_deadline`. Must run
    /// inside a tokio runtime, which the client's connections and heartbeats then use.
    pub async fn connect(config: ClientConfig) -> Result<DlsClient> {
        let router = Router::new(&config)?;
        debug!(endpoints = ?router.endpoints(), "client ready");
        let router = Arc::new(router);
        let heartbeats = Arc::new(Heartbeats::new(&router));
        Ok(DlsClient { router, heartbeats })
    }

    /// The routing and retry machinery every call goes through.
    pub(crate) fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// Starts a transaction and its heartbeat (one `BeginTransaction` call).
    pub async fn begin_transaction(&self, opts: TransactionOptions) -> Result<Transaction> {
        let tx = self.transaction(opts)?;
        tx.begin().await?;
        Ok(tx)
    }

    /// A transaction that begins with its first call: when that is an acquire, the begin
    /// and the lock go in one request (the one-shot acquire), a round trip and a replicated
    /// write fewer than [`begin_transaction`](Self::begin_transaction) then
    /// [`Transaction::acquire_lock`]. Nothing is sent here; a bad option is reported now.
    pub fn transaction(&self, opts: TransactionOptions) -> Result<Transaction> {
        Ok(Transaction::deferred(Deferred {
            router: Arc::clone(&self.router),
            heartbeats: Arc::clone(&self.heartbeats),
            lost_stream: opts.lost_stream,
            stop_grace: stop_grace(&opts)?,
            begin: begin_request(opts)?,
        }))
    }

    /// Starts a transaction and takes its first lock in one call (see
    /// [`transaction`](Self::transaction)). If the lock is not granted the transaction is
    /// aborted and the error returned.
    pub async fn begin_with_lock(
        &self,
        opts: TransactionOptions,
        namespace: &str,
        key: &str,
        mode: LockMode,
        acquire: AcquireOptions,
    ) -> Result<(Transaction, Lock)> {
        let tx = self.transaction(opts)?;
        match tx.acquire_lock(namespace, key, mode, acquire).await {
            Ok(lock) => Ok((tx, lock)),
            Err(e) => {
                // Nothing is held; end the transaction now rather than at its lease.
                let _ = tx.abort().await;
                Err(e)
            }
        }
    }

    /// Runs `body` inside a transaction: commits if it returns `Ok`, aborts if it returns
    /// `Err` or panics (the panic then continues).
    ///
    /// If the lease is lost while `body` runs, `body` is dropped (cancelled at its next
    /// `.await`) and the result is [`Error::TransactionLost`] ([`Error::DeadlockVictim`]
    /// when the server aborted it to break a deadlock), so work guarded by the locks stops
    /// as soon as the locks may belong to someone else.
    pub async fn with_transaction<T, E, F, Fut>(&self, opts: TransactionOptions, body: F) -> std::result::Result<T, E>
    where
        F: FnOnce(Transaction) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        run_transaction(self.transaction(opts)?, body).await
    }

    /// Runs `body` holding one lock: begins a transaction with the lock in one request,
    /// then runs and ends it as [`with_transaction`](Self::with_transaction) does (commit
    /// on `Ok`, abort on `Err` or panic, `body` cancelled if the lease is lost). `body`
    /// gets the transaction (for more locks, or its lost signal) and the lock (its
    /// fencing token).
    pub async fn with_lock<T, E, F, Fut>(
        &self,
        namespace: &str,
        key: &str,
        mode: LockMode,
        acquire: AcquireOptions,
        opts: TransactionOptions,
        body: F,
    ) -> std::result::Result<T, E>
    where
        F: FnOnce(Transaction, Lock) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        let (tx, lock) = self.begin_with_lock(opts, namespace, key, mode, acquire).await?;
        run_transaction(tx, move |tx| body(tx, lock)).await
    }

    /// Reads any transaction's status by id.
    pub async fn transaction_status(&self, id: u64) -> Result<TransactionStatus> {
        let request = pb::GetTransactionStatusRequest { transaction_id: id };
        let routed = self
            .router
            .unary("GetTransactionStatus", request, self.router.default_options(), |mut c, r| async move {
                c.get_transaction_status(r).await
            })
            .await?;
        TransactionStatus::try_from(routed.value)
    }

    /// Whether `fencing_token` is a current grant of `namespace`/`key` (held right now),
    /// as of everything committed before the call. For storage that cannot keep the last
    /// token it accepted; storage that can should compare tokens itself (no round trip).
    /// Returns the check and the tokens of the key's current holders.
    pub async fn verify_fencing_token(&self, namespace: &str, key: &str, fencing_token: u64) -> Result<TokenCheck> {
        let request = pb::VerifyFencingTokenRequest { namespace: namespace.into(), key: key.into(), fencing_token };
        let routed = self
            .router
            .unary("VerifyFencingToken", request, self.router.default_options(), |mut c, r| async move {
                c.verify_fencing_token(r).await
            })
            .await?;
        Ok(TokenCheck { current: routed.value.current, current_tokens: routed.value.current_tokens })
    }
}

/// The body of [`DlsClient::with_transaction`] once the transaction has begun.
async fn run_transaction<T, E, F, Fut>(tx: Transaction, body: F) -> std::result::Result<T, E>
where
    F: FnOnce(Transaction) -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
    E: From<Error>,
{
    let outcome = {
        let work = AssertUnwindSafe(body(tx.clone())).catch_unwind();
        tokio::select! {
            // The body's own result wins a tie: when its acquire was the deadlock victim it
            // returns that error in the same instant the lost signal fires.
            biased;
            outcome = work => Some(outcome),
            _ = tx.lost() => None,
        }
    };
    match outcome {
        None => {
            let reason = tx
                .lost_reason()
                .unwrap_or_else(|| LostReason::without_cause(LostKind::Aborted, "the transaction ended elsewhere"));
            let message = format!("transaction {} was lost while its body ran: {reason}", tx.id());
            Err(E::from(lost_error(&reason, message)))
        }
        Some(Ok(Ok(value))) => match tx.commit().await {
            Ok(()) => Ok(value),
            Err(error) => {
                // The outcome may be unknown (e.g. no leader): abort so the locks are
                // not held until the lease runs out. After a commit that did happen the
                // abort is a harmless "not active".
                abort_quietly(&tx, "failed commit").await;
                Err(E::from(error))
            }
        },
        Some(Ok(Err(error))) => {
            abort_quietly(&tx, "failed body").await;
            Err(error)
        }
        Some(Err(panic)) => {
            abort_quietly(&tx, "panicking body").await;
            std::panic::resume_unwind(panic)
        }
    }
}

/// Aborts and stops the heartbeat even if the abort fails or the body kept a clone of the
/// transaction: `with_transaction` owns the transaction's whole life.
async fn abort_quietly(tx: &Transaction, after: &str) {
    if let Err(e) = tx.abort().await {
        debug!(transaction_id = tx.id(), error = %e, "abort after {after} failed");
    }
    tx.abandon();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{AcquireOptions, LockMode};
    use std::time::Duration;
    use tokio::time::Instant;

    fn quick(endpoints: Vec<String>) -> ClientConfig {
        ClientConfig::new(endpoints)
            .without_api_key()
            .with_connect_timeout(Duration::from_millis(100))
            .with_request_timeout(Duration::from_millis(100))
            .with_retry_deadline(Duration::from_millis(400))
    }

    #[tokio::test]
    async fn connect_rejects_bad_config() {
        let err = DlsClient::connect(quick(vec!["ftp://x:1".into()])).await.unwrap_err();
        assert_eq!(err.code(), "CONFIG");
        let err = DlsClient::connect(quick(vec![])).await.unwrap_err();
        assert_eq!(err.code(), "CONFIG");
    }

    /// Nothing listens: connect succeeds (lazily), calls retry until the deadline and
    /// then name what they tried.
    #[tokio::test]
    async fn closed_port_gives_unavailable_after_the_retry_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = DlsClient::connect(quick(vec![addr.to_string()])).await.unwrap();
        let started = Instant::now();
        let err = client.begin_transaction(TransactionOptions::default()).await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        assert!(err.message().contains(&addr.to_string()), "{err}");
        // The transport's cause is kept, not just tonic's "tcp connect error".
        assert!(err.message().to_lowercase().contains("refused"), "{err}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    /// A node that accepts connections but never speaks: attempts time out and the call
    /// still ends at the deadline instead of hanging.
    #[tokio::test]
    async fn silent_node_does_not_hang_calls() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                open.push(sock);
            }
        });
        let client = DlsClient::connect(quick(vec![addr.to_string()])).await.unwrap();
        let started = Instant::now();
        let err = client.transaction_status(1).await.unwrap_err();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));

        let err = client
            .with_transaction(TransactionOptions::default(), |tx| async move {
                tx.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default()).await.map(|_| ())
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        hold.abort();
    }

    use crate::transaction::tests::orphan;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn body_is_cancelled_when_the_lease_is_lost() {
        let tx = orphan(Duration::from_millis(300));
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = SetOnDrop(Arc::clone(&dropped));
        let started = Instant::now();
        let result: std::result::Result<(), Error> = run_transaction(tx, |_tx| async move {
            let _flag = flag;
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        })
        .await;
        let err = result.unwrap_err();
        assert_eq!(err.code(), "TRANSACTION_LOST", "{err}");
        assert!(err.message().contains("LEASE_UNCONFIRMED"), "{err}");
        assert!(dropped.load(Ordering::SeqCst), "body future must be dropped");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_deadlock_victim_body_reports_deadlock_victim() {
        let victim =
            Error::DeadlockVictim { message: "transaction 7 was aborted as a deadlock victim".into(), deadlock: None };
        // The body's acquire was chosen: it returns the error as the lost signal fires.
        let tx = orphan(Duration::from_secs(60));
        let result: std::result::Result<(), Error> = run_transaction(tx, |tx| {
            let victim = victim.clone();
            async move { Err(tx.shared().observe(victim).await) }
        })
        .await;
        assert_eq!(result.unwrap_err().code(), "DEADLOCK_VICTIM");
        // The body was busy elsewhere when the transaction was chosen.
        let tx = orphan(Duration::from_secs(60));
        let keep = tx.clone();
        let body = run_transaction(tx, |_tx| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<(), Error>(())
        });
        let (result, ()) = tokio::join!(body, async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = keep.shared().observe(victim.clone()).await;
        });
        let err = result.unwrap_err();
        assert_eq!(err.code(), "DEADLOCK_VICTIM", "{err}");
    }

    #[derive(Debug, PartialEq)]
    enum AppError {
        Mine(&'static str),
        Dls(String),
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Dls(e.code().to_string())
        }
    }

    #[tokio::test]
    async fn body_error_is_returned_and_heartbeat_stops() {
        let tx = orphan(Duration::from_secs(60));
        let keep = tx.clone();
        let result: std::result::Result<(), AppError> =
            run_transaction(tx, |_tx| async move { Err(AppError::Mine("nope")) }).await;
        assert_eq!(result, Err(AppError::Mine("nope")));
        // Even with a clone kept alive and the abort unanswered, the transaction is over.
        assert!(!keep.is_lost());
        assert_eq!(
            keep.acquire_lock("n", "k", LockMode::Exclusive, AcquireOptions::default()).await.unwrap_err().code(),
            "TRANSACTION_LOST"
        );
    }

    #[tokio::test]
    async fn failed_commit_is_the_error() {
        let tx = orphan(Duration::from_secs(60));
        let result: std::result::Result<u32, AppError> = run_transaction(tx, |_tx| async move { Ok(5) }).await;
        assert_eq!(result, Err(AppError::Dls("UNAVAILABLE".into())));
    }

    #[tokio::test]
    async fn panic_in_body_aborts_and_resumes() {
        let tx = orphan(Duration::from_secs(60));
        let keep = tx.clone();
        let outcome = AssertUnwindSafe(run_transaction(tx, |_tx| async move {
            if keep_going() {
                panic!("boom");
            }
            Ok::<(), Error>(())
        }))
        .catch_unwind()
        .await;
        let panic = outcome.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"boom"));
        assert!(keep.release("n", "k").await.is_err_and(|e| e.code() == "TRANSACTION_LOST"));
    }

    fn keep_going() -> bool {
        true
    }
}

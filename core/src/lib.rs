//! Rust client for Caerus DLS, a raft-replicated distributed lock service.
//!
//! Locks are taken inside a [`Transaction`] whose lease the client keeps alive with
//! heartbeats. Every grant carries a fencing token: a cluster-wide, strictly increasing
//! number to hand to the storage you protect, which should reject writes carrying a lower
//! token than the last one it accepted.
//!
//! The client finds the raft leader by itself, follows redirects, and retries across
//! elections with request ids that make retries safe (the server returns the first
//! outcome instead of doing the work twice). If the lease can no longer be confirmed, the
//! transaction is reported lost ([`Transaction::lost`]) at its renew deadline, a margin
//! before the server can expire it ([`LeaseBudget`]).
//!
//! ```no_run
//! use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, TransactionOptions};
//!
//! # async fn run() -> Result<(), Error> {
//! let client = DlsClient::connect(ClientConfig::from_env()).await?;
//! let token = client
//!     .with_transaction(TransactionOptions::default(), |tx| async move {
//!         let lock = tx
//!             .acquire_lock("billing-jobs", "monthly-billing-job", LockMode::Exclusive,
//!                           AcquireOptions::default())
//!             .await?;
//!         // ... do the work, passing lock.fencing_token to the storage ...
//!         Ok::<_, Error>(lock.fencing_token)
//!     })
//!     .await?;
//! println!("done with token {token}");
//! # Ok(())
//! # }
//! ```
//!
//! The body of [`DlsClient::with_transaction`] is committed when it returns `Ok`, aborted
//! when it returns `Err` or panics, and cancelled if the lease is lost meanwhile.
//!
//! Beyond locks: [`DlsClient::watch_events`] follows the cluster's event log (deadlocks
//! resolved, expiries, operator aborts, revoked locks) across leader changes, and the
//! operator calls [`DlsClient::list_locks`], [`DlsClient::abort_transaction`] and
//! [`DlsClient::cluster_status`] need an admin key on a server with API keys.

#![warn(missing_docs)]

mod acquire_stream;
mod admin;
mod api_keys;
mod client;
mod config;
mod deadlock;
mod error;
mod events;
mod heartbeat;
mod heartbeat_batch;
mod http_probe;
mod key_watch;
mod lanes;
mod lease_budget;
mod resume;
mod router;
mod slots;
mod tls_hint;
mod transaction;
mod tx_shared;
mod types;
mod withdraw;

#[cfg(feature = "pyo3")]
mod python;

pub use admin::{
    AbortOutcome, AddMemberOptions, ClusterMember, ClusterStatus, KeyDelay, KeyLocks, LockDelayRule, LockHolder,
    LockWaiter, MemberInfo, Membership, NewLeader, SnapshotPieces,
};
pub use api_keys::{ApiKeyInfo, ApiKeyLimits, ApiKeySecret, NewApiKey};
pub use caerus_types::{ErrorClass, ErrorKind};
pub use client::DlsClient;
pub use config::{
    ClientConfig, API_KEY_ENV, CA_FILE_ENV, CLIENT_CERT_FILE_ENV, CLIENT_KEY_FILE_ENV, DEFAULT_ENDPOINT, ENDPOINTS_ENV,
};
pub use deadlock::{CycleMember, Deadlock};
pub use error::{Error, Result};
pub use events::{ApiKeyChange, Event, EventDetail, EventKind, EventStream, VictimPolicy, WatchOptions};
pub use key_watch::{Election, KeyChange, KeyChangeKind, KeyHolder, KeyUpdate, KeyWatch, Leadership};
pub use lease_budget::LeaseBudget;
pub use slots::{SlotClaim, SlotOutcome, SlotRun, SlotRunState};
pub use transaction::Transaction;
pub use types::{
    AcquireOptions, EndCause, Lock, LockMode, LockRequest, LostKind, LostReason, PendingLock, QueuePosition,
    TokenCheck, TraceParent, TransactionOptions, TransactionState, TransactionStatus,
};

#[cfg(test)]
mod send_sync {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}
    fn assert_send_sync<T: Send + Sync + 'static>() {}

    /// Handles cross threads and tasks; bindings and `tokio::spawn` rely on it.
    #[test]
    fn handles_and_futures_are_send() {
        assert_send_sync::<DlsClient>();
        assert_send_sync::<Transaction>();
        assert_send_sync::<Error>();
        assert_send_sync::<ClientConfig>();
        assert_send_sync::<Event>();
        fn assert_send_only<T: Send + 'static>() {}
        assert_send_only::<EventStream>();
        fn futures(client: DlsClient, tx: Transaction) {
            assert_send(&DlsClient::connect(ClientConfig::from_env()));
            assert_send(&client.begin_transaction(TransactionOptions::default()));
            assert_send(&client.transaction_status(1));
            assert_send(&client.with_transaction(TransactionOptions::default(), |tx| async move { tx.commit().await }));
            assert_send(&tx.acquire_lock("n", "k", LockMode::Exclusive, AcquireOptions::default()));
            assert_send(&tx.acquire_lock_with_progress(
                "n",
                "k",
                LockMode::SharedRead,
                AcquireOptions::default(),
                |_| {},
            ));
            assert_send(&tx.release("n", "k"));
            assert_send(&tx.status());
            assert_send(&tx.commit());
            assert_send(&tx.abort());
            assert_send(&tx.lost());
            assert_send(&client.watch_events(WatchOptions::default()));
            assert_send(&client.list_locks(""));
            assert_send(&client.abort_transaction(1, "r"));
            assert_send(&client.cluster_status());
            assert_send(&client.cluster_status_of("a:1"));
        }
        let _ = futures;
    }
}

//! The client side of a test: transactions, grants and what must hold across restarts.

use caerus_core::{
    AcquireOptions, ClientConfig, DlsClient, Error, Lock, LockMode, Transaction, TransactionOptions, TransactionState,
};

use crate::poll::PATIENCE;

/// Transaction options with a lease of `lease_ms`.
pub fn opts(lease_ms: u64) -> TransactionOptions {
    TransactionOptions::default().with_timeout_ms(lease_ms)
}

/// Acquire options that wait up to `ms`.
pub fn wait(ms: u64) -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(ms)
}

/// Takes `ns/key` exclusively; the lock must be free.
pub async fn take(tx: &Transaction, key: &str) -> Lock {
    tx.acquire_lock("ns", key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(1_000)).await.unwrap()
}

/// Starts an exclusive acquire of `ns/key` in the background and returns once the server
/// has queued it (so it is an edge of the wait-for graph).
pub async fn queued(tx: &Transaction, key: &'static str) -> tokio::task::JoinHandle<Result<Lock, Error>> {
    let (seen, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let tx = tx.clone();
    let wait = tokio::spawn(async move {
        let opts = AcquireOptions::default().with_timeout_ms(60_000);
        tx.acquire_lock_with_progress("ns", key, LockMode::Exclusive, opts, move |_| {
            let _ = seen.send(());
        })
        .await
    });
    match tokio::time::timeout(PATIENCE, queued.recv()).await {
        Ok(Some(())) => wait,
        Ok(None) => panic!("the acquire of ns/{key} ended without queueing: {:?}", wait.await.unwrap()),
        Err(_) => panic!("the acquire of ns/{key} was not queued within {PATIENCE:?}"),
    }
}

/// After a restart: `holder` is still active and holds exactly `held`, another transaction
/// cannot take `ns/kept`, and the next grant's token is above `held`'s (the counter
/// survived). Commits both.
pub async fn assert_kept_across_restart(c: &DlsClient, holder: &Transaction, held: &Lock) {
    let st = holder.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert_eq!(st.locks, vec![held.clone()]);
    let other = c.begin_transaction(opts(10_000)).await.unwrap();
    let err = other.acquire_lock("ns", "kept", LockMode::Exclusive, wait(200)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "the lock must still be held: {err:?}");
    let next = other.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(next.fencing_token > held.fencing_token, "the counter must survive the restart");
    holder.commit().await.unwrap();
    other.commit().await.unwrap();
}

/// A client of the whole cluster without an API key, patient through elections.
pub async fn patient_client(endpoints: Vec<String>) -> DlsClient {
    let config = ClientConfig::new(endpoints).without_api_key().with_retry_deadline(PATIENCE);
    DlsClient::connect(config).await.unwrap()
}

/// A grant on a fresh key arrives (the cluster serves).
pub async fn assert_next_grant(client: &DlsClient) {
    let tx = client.begin_transaction(opts(5_000)).await.unwrap();
    let key = format!("next-{:032x}", rand::random::<u128>());
    tx.acquire_lock("ns", &key, LockMode::Exclusive, wait(10_000)).await.unwrap();
    tx.commit().await.unwrap();
}

/// Grants `n` locks `ns/<prefix><i>`, one transaction each (committed), checking that every
/// token is above the one before and above `above`; returns the highest.
pub async fn grant_many(c: &DlsClient, prefix: &str, n: usize, above: u64) -> u64 {
    let mut last = above;
    for i in 0..n {
        let t = c.begin_transaction(opts(10_000)).await.unwrap();
        let l = t.acquire_lock("ns", &format!("{prefix}{i}"), LockMode::Exclusive, wait(2000)).await.unwrap();
        assert!(l.fencing_token > last, "token {} after {last}", l.fencing_token);
        last = l.fencing_token;
        t.commit().await.unwrap();
    }
    last
}

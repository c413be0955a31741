//! A contended workload over a cluster under faults, and the checks of its history:
//! mutual exclusion, rising fencing tokens, acknowledged grants kept.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{DlsClient, LockMode, TransactionState};

use crate::client::{opts, wait};

/// One grant a workload client saw, and whether its transaction committed.
#[derive(Clone, Debug)]
pub struct GrantRecord {
    pub key: String,
    pub token: u64,
    pub txn: u64,
    pub granted_at: Instant,
    /// When the commit was sent; None if the transaction did not commit (lost, or the
    /// answer did not come).
    pub released_at: Option<Instant>,
}

/// Several clients taking the same few keys exclusively, over and over, recording every
/// grant; errors during elections and membership changes are expected and skipped.
pub struct ContendedWorkload {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    history: Arc<Mutex<Vec<GrantRecord>>>,
}

impl ContendedWorkload {
    pub fn start(client: &DlsClient, workers: usize, keys: &[&str]) -> ContendedWorkload {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let history = Arc::new(Mutex::new(Vec::new()));
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let tasks = (0..workers)
            .map(|w| {
                let (client, stopped, history, keys) = (client.clone(), stopped.clone(), history.clone(), keys.clone());
                tokio::spawn(async move {
                    let mut round = w;
                    while !*stopped.borrow() {
                        round += 1;
                        let key = &keys[round % keys.len()];
                        let Ok(tx) = client.begin_transaction(opts(3_000)).await else { continue };
                        match tx.acquire_lock("contended", key, LockMode::Exclusive, wait(2_000)).await {
                            Ok(lock) => {
                                let granted_at = Instant::now();
                                tokio::time::sleep(Duration::from_millis(3)).await;
                                let sent = Instant::now();
                                let committed = tx.commit().await.is_ok();
                                history.lock().unwrap().push(GrantRecord {
                                    key: key.clone(),
                                    token: lock.fencing_token,
                                    txn: tx.id(),
                                    granted_at,
                                    released_at: committed.then_some(sent),
                                });
                            }
                            Err(_) => {
                                let _ = tx.abort().await;
                            }
                        }
                    }
                })
            })
            .collect();
        ContendedWorkload { stop, tasks, history }
    }

    /// Grants recorded so far.
    pub fn grants(&self) -> usize {
        self.history.lock().unwrap().len()
    }

    /// Stops the clients and returns every grant they saw.
    pub async fn stop(self) -> Vec<GrantRecord> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.await.unwrap();
        }
        Arc::try_unwrap(self.history).unwrap().into_inner().unwrap()
    }

    /// Stops the workload and checks its history: mutual exclusion, rising tokens, every
    /// acknowledged grant still known to `client`'s cluster. Returns the grants.
    pub async fn stop_and_check(self, client: &DlsClient) -> Vec<GrantRecord> {
        let history = self.stop().await;
        assert_no_two_holders_and_rising_tokens(&history);
        assert_acknowledged_grants_kept(client, &history).await;
        history
    }
}

/// Mutual exclusion and fencing over a workload's history: per key, tokens strictly rise in
/// the order the grants arrived, and no grant arrived while a committed holder of the same
/// key still held it (between its grant and its commit).
pub fn assert_no_two_holders_and_rising_tokens(history: &[GrantRecord]) {
    let mut by_key: BTreeMap<&str, Vec<&GrantRecord>> = Default::default();
    for g in history {
        by_key.entry(&g.key).or_default().push(g);
    }
    for (key, mut grants) in by_key {
        grants.sort_by_key(|g| g.granted_at);
        for pair in grants.windows(2) {
            assert!(pair[1].token > pair[0].token, "{key}: token {} after {}", pair[1].token, pair[0].token);
            if let Some(released) = pair[0].released_at {
                assert!(
                    pair[1].granted_at >= released,
                    "{key}: txn {} was granted (token {}) while txn {} still held it (token {})",
                    pair[1].txn,
                    pair[1].token,
                    pair[0].txn,
                    pair[0].token
                );
            }
        }
    }
}

/// Every acknowledged grant survived: each committed transaction is still known as
/// COMMITTED, and the cluster's token counter is at least the highest token handed out.
pub async fn assert_acknowledged_grants_kept(client: &DlsClient, history: &[GrantRecord]) {
    for g in history.iter().filter(|g| g.released_at.is_some()) {
        let st = client.transaction_status(g.txn).await.unwrap();
        assert_eq!(st.state, TransactionState::Committed, "txn {} (token {})", g.txn, g.token);
    }
    let highest = history.iter().map(|g| g.token).max().unwrap_or(0);
    let status = client.cluster_status().await.unwrap();
    assert!(status.last_fencing_token >= highest, "token counter {} < {highest}", status.last_fencing_token);
}

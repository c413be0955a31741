//! The attacking side of a soak: every attack of `server/tests/attacks`, over and over, from
//! loopback addresses other than the legitimate clients' 127.0.0.1.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};
use caerus_testkit::{attack, Cluster};
use rand::Rng;

const LOCK_PATH: &str = "/caerus.dls.v1.LockService/AcquireLock";

/// The attacks a soak can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Attack {
    /// Half-open connections to every port, from four addresses.
    HalfOpen,
    /// Connections of 20,000 calls without a body, past the stream bound.
    BodyLess,
    /// Calls with a key nobody issued, in tight loops.
    UnknownKeys,
    /// One valid key's waits through a follower, on a key it holds itself.
    Flood,
}

/// How many of each attack went out.
#[derive(Default)]
pub struct Tally {
    half_open: AtomicU64,
    body_less: AtomicU64,
    unknown_keys: AtomicU64,
    flood_waits: AtomicU64,
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} half-open connections, {} connections of 20,000 calls without a body, {} calls with unknown keys, \
             {} waits of one key through a follower",
            self.half_open.load(Relaxed),
            self.body_less.load(Relaxed),
            self.unknown_keys.load(Relaxed),
            self.flood_waits.load(Relaxed)
        )
    }
}

pub struct Attackers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tally: Arc<Tally>,
}

impl Attackers {
    /// Starts every attack against `cluster`; `flood_key` is a valid key of its own.
    pub fn start(cluster: &Cluster, flood_key: &str, which: &[Attack]) -> Attackers {
        let tally = Arc::new(Tally::default());
        let ports: Vec<String> =
            cluster.nodes.iter().flat_map(|n| [n.addr.clone(), n.http_addr.clone(), n.peer_addr.clone()]).collect();
        let clients: Vec<String> = cluster.endpoints();
        let mut tasks = Vec::new();
        let on = |a: Attack| which.contains(&a);
        // Half-open connections to every port (100 each, from four addresses), renewed every 2 s.
        if on(Attack::HalfOpen) {
            tasks.push(tokio::spawn({
                let (ports, tally) = (ports.clone(), tally.clone());
                async move {
                    loop {
                        let mut held = Vec::new();
                        for port in &ports {
                            held.extend(attack::half_open(port, 4, 25, b"PRI * HTTP/2.0\r\n").await);
                        }
                        tally.half_open.fetch_add(held.len() as u64, Relaxed);
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            }));
        }
        // Calls without a body on one connection, ignoring the stream bound.
        if on(Attack::BodyLess) {
            tasks.push(tokio::spawn({
                let (clients, tally) = (clients.clone(), tally.clone());
                async move {
                    loop {
                        let to = &clients[rand::thread_rng().gen_range(0..clients.len())];
                        attack::body_less_streams(
                            to,
                            attack::attacker_ip(4),
                            LOCK_PATH,
                            20_000,
                            Duration::from_secs(5),
                        )
                        .await;
                        tally.body_less.fetch_add(1, Relaxed);
                    }
                }
            }));
        }
        // Calls with keys nobody issued.
        for _ in 0..if on(Attack::UnknownKeys) { 8 } else { 0 } {
            tasks.push(tokio::spawn({
                let (clients, tally) = (clients.clone(), tally.clone());
                async move {
                    let config = ClientConfig::new(clients)
                        .with_api_key("dls_not-a-key-anyone-issued")
                        .with_retry_deadline(Duration::from_millis(200));
                    let Ok(client) = DlsClient::connect(config).await else { return };
                    loop {
                        let _ = client.begin_transaction(TransactionOptions::default()).await;
                        tally.unknown_keys.fetch_add(1, Relaxed);
                    }
                }
            }));
        }
        // One valid key fills a follower with waits on a key it holds itself.
        if on(Attack::Flood) {
            let follower = clients.last().expect("a node").clone();
            tasks.push(tokio::spawn({
                let (key, tally) = (flood_key.to_string(), tally.clone());
                async move {
                    let config = ClientConfig::new(vec![follower]).with_api_key(key);
                    let Ok(client) = DlsClient::connect(config).await else { return };
                    let Ok(holder) =
                        client.begin_transaction(TransactionOptions::default().with_timeout_ms(60_000)).await
                    else {
                        return;
                    };
                    let _ = holder.acquire_lock("flood", "hot", LockMode::Exclusive, AcquireOptions::default()).await;
                    let waits = Arc::new(tokio::sync::Semaphore::new(512));
                    loop {
                        let Ok(slot) = waits.clone().acquire_owned().await else { return };
                        let (client, tally) = (client.clone(), tally.clone());
                        tokio::spawn(async move {
                            if let Ok(tx) = client.begin_transaction(TransactionOptions::default()).await {
                                let opts = AcquireOptions::default().with_timeout_ms(3_000);
                                let _ = tx.acquire_lock("flood", "hot", LockMode::Exclusive, opts).await;
                                let _ = tx.abort().await;
                            }
                            tally.flood_waits.fetch_add(1, Relaxed);
                            drop(slot);
                        });
                    }
                }
            }));
        }
        Attackers { tasks, tally }
    }

    pub async fn stop(self) -> Arc<Tally> {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        self.tally
    }
}

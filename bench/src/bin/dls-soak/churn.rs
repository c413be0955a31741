//! The legitimate side of a soak: clients taking a lock, holding it a moment and committing,
//! over and over, on 32 keys (so some cycles wait for others), timing each cycle.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};

/// The clients' cycles: completed, failed, and each completed one's duration (ms).
#[derive(Default)]
pub struct Tally {
    pub ok: u64,
    pub errors: u64,
    pub durations_ms: Vec<f64>,
}

impl Tally {
    /// p50, p99 and the largest duration, in ms.
    pub fn percentiles(&self) -> (f64, f64, f64) {
        let mut d = self.durations_ms.clone();
        if d.is_empty() {
            return (0.0, 0.0, 0.0);
        }
        d.sort_by(f64::total_cmp);
        let at = |q: f64| d[((d.len() - 1) as f64 * q).round() as usize];
        (at(0.5), at(0.99), d[d.len() - 1])
    }
}

pub struct Churn {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tally: Arc<Mutex<Tally>>,
}

impl Churn {
    pub async fn start(endpoints: Vec<String>, key: &str, clients: usize) -> Churn {
        let config = ClientConfig::new(endpoints).with_api_key(key);
        // Four connections' worth of clients, as a few service instances would have.
        let mut shared = Vec::new();
        for _ in 0..4 {
            shared.push(DlsClient::connect(config.clone()).await.expect("a client"));
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let tally = Arc::new(Mutex::new(Tally::default()));
        let tasks = (0..clients)
            .map(|i| {
                let (client, stopped, tally) = (shared[i % shared.len()].clone(), stopped.clone(), tally.clone());
                tokio::spawn(async move {
                    let mut round = i;
                    while !*stopped.borrow() {
                        round += 1;
                        let started = Instant::now();
                        let done = cycle(&client, &format!("k{}", round % 32)).await;
                        let mut t = tally.lock().unwrap();
                        match done {
                            Ok(()) => {
                                t.ok += 1;
                                t.durations_ms.push(started.elapsed().as_secs_f64() * 1e3);
                            }
                            Err(_) => t.errors += 1,
                        }
                    }
                })
            })
            .collect();
        Churn { stop, tasks, tally }
    }

    pub async fn stop(self) -> Tally {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        std::mem::take(&mut *self.tally.lock().unwrap())
    }
}

async fn cycle(client: &DlsClient, key: &str) -> caerus_core::Result<()> {
    let tx = client.begin_transaction(TransactionOptions::default().with_timeout_ms(5_000)).await?;
    let acquired =
        tx.acquire_lock("soak", key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(10_000)).await;
    if let Err(e) = acquired {
        let _ = tx.abort().await;
        return Err(e);
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    tx.commit().await
}

//! The acquire of an `acquire` or `acquire_all` step, and such an acquire started with
//! `"wait": false`: it runs as a task while the scenario goes on, recording the queue
//! positions it is told, until `await` collects its outcome.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use caerus_core::{AcquireOptions, Error, Lock, LockMode, LockRequest, QueuePosition, Transaction};
use tokio::task::JoinHandle;

/// How long a step waits for the server: a hang guard, not a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(10);

/// What an acquire step asks for: one lock (`acquire`), one semaphore permit (`acquire` in
/// mode SEMAPHORE, with `permits`) or several locks at once (`acquire_all`).
pub enum Wanted {
    One { namespace: String, key: String, mode: LockMode },
    Permit { namespace: String, key: String, permits: u32 },
    All(Vec<LockRequest>),
}

/// What such an acquire was granted.
#[derive(Clone, Debug)]
pub enum Acquired {
    One(Lock),
    /// In the order asked.
    All(Vec<Lock>),
}

impl Wanted {
    /// Runs the acquire, telling `on_queued` every queue position the server reports.
    pub async fn acquire(
        &self,
        tx: &Transaction,
        timeout_ms: u64,
        on_queued: impl FnMut(&QueuePosition) + Send,
    ) -> Result<Acquired, Error> {
        let opts = AcquireOptions::default().with_timeout_ms(timeout_ms);
        match self {
            Wanted::One { namespace, key, mode } => {
                tx.acquire_lock_with_progress(namespace, key, *mode, opts, on_queued).await.map(Acquired::One)
            }
            Wanted::Permit { namespace, key, permits } => {
                tx.acquire_permit_with_progress(namespace, key, *permits, opts, on_queued).await.map(Acquired::One)
            }
            Wanted::All(locks) => tx.acquire_locks_with_progress(locks, opts, on_queued).await.map(Acquired::All),
        }
    }
}

#[derive(Default)]
struct Progress {
    queued: Vec<QueuePosition>,
    /// Queue messages already matched by `expect_queued` (they are consumed in order).
    consumed: usize,
    outcome: Option<Result<Acquired, Error>>,
}

pub struct Background {
    progress: Arc<Mutex<Progress>>,
    task: JoinHandle<()>,
}

impl Background {
    pub fn start(tx: Transaction, wanted: Wanted, timeout_ms: u64) -> Background {
        let progress = Arc::new(Mutex::new(Progress::default()));
        let shared = Arc::clone(&progress);
        let task = tokio::spawn(async move {
            let seen = Arc::clone(&shared);
            let outcome =
                wanted.acquire(&tx, timeout_ms, move |q| seen.lock().expect("progress").queued.push(q.clone())).await;
            shared.lock().expect("progress").outcome = Some(outcome);
        });
        Background { progress, task }
    }

    /// The next queue message at `position`, skipping earlier ones at other positions.
    pub async fn queued_at(&self, position: u32) -> Result<QueuePosition> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            {
                let mut p = self.progress.lock().expect("progress");
                while p.consumed < p.queued.len() {
                    let q = p.queued[p.consumed].clone();
                    p.consumed += 1;
                    if q.position == position {
                        return Ok(q);
                    }
                }
                let seen: Vec<u32> = p.queued.iter().map(|q| q.position).collect();
                if let Some(outcome) = &p.outcome {
                    let how = match outcome {
                        Ok(Acquired::One(lock)) => format!("granted with token {}", lock.fencing_token),
                        Ok(Acquired::All(locks)) => format!("granted {} locks", locks.len()),
                        Err(e) => format!("error {}: {}", e.code(), e.message()),
                    };
                    bail!("acquire ended ({how}) before queued position {position}; positions seen {seen:?}");
                }
                if Instant::now() > deadline {
                    bail!("no queued position {position} within {PATIENCE:?}; positions seen {seen:?}");
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The acquire's final outcome (waits for it).
    pub async fn outcome(&self) -> Result<Result<Acquired, Error>> {
        loop {
            if let Some(outcome) = self.progress.lock().expect("progress").outcome.clone() {
                return Ok(outcome);
            }
            if self.task.is_finished() {
                bail!("background acquire task ended without an outcome");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub fn abandon(&self) {
        self.task.abort();
    }
}

//! Shared client plumbing: a pool of `DlsClient`s (each one HTTP/2 connection that many
//! transactions multiplex on), a bounded worker pool over an index range, percentiles.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient};

/// Namespace of every lock this tool takes.
pub const NAMESPACE: &str = "bench-state";

/// `n` clients on `endpoints`.
pub async fn clients(endpoints: &[String], n: usize) -> anyhow::Result<Arc<Vec<DlsClient>>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let config = ClientConfig::new(endpoints.to_vec()).with_request_timeout(Duration::from_secs(30));
        v.push(DlsClient::connect(config).await.map_err(|e| anyhow::anyhow!("connect: {e}"))?);
    }
    Ok(Arc::new(v))
}

/// Runs `job(i)` for every i in 0..total on `workers` tasks; returns each worker's outputs.
/// `done` counts finished jobs (for progress lines).
pub async fn for_each<T, F, Fut>(total: usize, workers: usize, done: Arc<AtomicUsize>, job: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let job = Arc::new(job);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (next, job, done) = (next.clone(), job.clone(), done.clone());
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return anyhow::Ok(out);
                }
                out.push(job(i).await?);
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let mut all = Vec::with_capacity(total);
    while let Some(r) = set.join_next().await {
        all.extend(r??);
    }
    Ok(all)
}

/// The `p` quantile (0..=1) of sorted `v`, nearest rank.
pub fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Prints a progress line on stderr.
pub fn progress(step: &str, msg: impl std::fmt::Display) {
    eprintln!("[dls-state {step}] {msg}");
}

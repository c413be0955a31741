//! Waiting for something that should happen promptly, with a deadline that fails loudly.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `check` every 50 ms until it returns Some, or fails after `within` saying `what`.
pub async fn eventually<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    eventually_async(within, what, || std::future::ready(check())).await
}

/// Polls the async `check` every 50 ms until it returns Some, or fails after `within`
/// saying `what`.
pub async fn eventually_async<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

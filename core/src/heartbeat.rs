//! The per-transaction heartbeat task that keeps the lease alive and notices its loss.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use crate::error::Error;
use crate::router::CallOptions;
use crate::tx_shared::TxShared;
use crate::types::{EndCause, LostKind, LostReason};

/// Floor of the retry interval after a failed heartbeat.
const MIN_RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// Intervals derived from the time heartbeats have before the lost signal (the renew
/// window: [`LeaseBudget::lost_after`](crate::LeaseBudget::lost_after)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// Between acknowledged heartbeats: a third of the window leaves two more chances.
    pub interval: Duration,
    /// After a failed heartbeat: sooner, so a short election costs little of the window.
    pub retry_interval: Duration,
    /// Bound of one attempt, so a hung node cannot eat the whole window.
    pub attempt_timeout: Duration,
    /// How long a due heartbeat may wait to share its call with others of the same client
    /// (`heartbeat_batch`): an eighth of the interval keeps well over two chances per window.
    pub gather: Duration,
}

impl Schedule {
    pub(crate) fn new(window: Duration, request_timeout: Duration) -> Self {
        let interval = (window / 3).max(Duration::from_millis(1));
        Schedule {
            interval,
            retry_interval: (window / 10).max(MIN_RETRY_INTERVAL),
            attempt_timeout: request_timeout.min(interval.max(MIN_RETRY_INTERVAL)),
            gather: interval / 8,
        }
    }
}

/// Runs until the transaction ends or is lost; aborted when the last handle drops.
pub(crate) async fn run(shared: Arc<TxShared>) {
    let schedule = Schedule::new(shared.budget.lost_after(), shared.router.request_timeout);
    let mut next = shared.last_ack() + schedule.interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shared.stop.notified() => {}
        }
        if !shared.is_active() {
            return;
        }
        let lost_at = shared.lost_at();
        if Instant::now() >= lost_at {
            if shared.is_ending() {
                // A commit/abort is deciding the outcome right now; its answer wins.
                next = Instant::now() + schedule.retry_interval;
                continue;
            }
            shared.mark_lost(shared.lease_unconfirmed(None));
            return;
        }
        let options = CallOptions {
            deadline: lost_at,
            attempt_timeout: schedule.attempt_timeout,
            max_backoff: schedule.retry_interval,
            overrun: Duration::ZERO,
        };
        let call = shared.heartbeats.renew(shared.id, schedule.gather, options);
        // Never wait past the lost signal: by then the answer no longer matters.
        let result = tokio::select! {
            r = tokio::time::timeout_at(lost_at, call) => r.ok(),
            _ = shared.stop.notified() => return,
        };
        if !shared.is_active() {
            return;
        }
        let now = Instant::now();
        let error = match result {
            Some(Ok(sent_at)) => {
                shared.acknowledged(sent_at);
                next = sent_at + schedule.interval;
                continue;
            }
            Some(Err(e)) => Some(e),
            None => None,
        };
        if shared.is_ending() {
            next = now + schedule.retry_interval;
            continue;
        }
        match &error {
            Some(e @ (Error::TransactionLost { .. } | Error::DeadlockVictim { .. })) => {
                let reason = match e {
                    Error::DeadlockVictim { .. } => LostReason::ended_by(EndCause::DeadlockVictim, e.message()),
                    _ => shared.lost_reason_of(e).await,
                };
                shared.mark_lost(reason);
                return;
            }
            Some(Error::TransactionNotFound { message }) => {
                shared.mark_lost(LostReason::without_cause(LostKind::NotFound, message.clone()));
                return;
            }
            _ => {}
        }
        let silent = now.saturating_duration_since(shared.last_ack());
        if now >= shared.lost_at() {
            shared.mark_lost(shared.lease_unconfirmed(error.as_ref()));
            return;
        }
        debug!(
            transaction_id = shared.id,
            error = error.as_ref().map(|e| e.to_string()).unwrap_or_default(),
            silent_ms = silent.as_millis() as u64,
            "heartbeat not acknowledged; retrying soon"
        );
        // Retry soon, and at the latest exactly at the lost signal, so the holder gets all
        // of its grace.
        next = (now + schedule.retry_interval).min(shared.lost_at());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_from_lease() {
        let s = Schedule::new(Duration::from_secs(15), Duration::from_secs(5));
        assert_eq!(s.interval, Duration::from_secs(5));
        assert_eq!(s.retry_interval, Duration::from_millis(1500));
        assert_eq!(s.attempt_timeout, Duration::from_secs(5));
        assert_eq!(s.gather, Duration::from_millis(625));

        let s = Schedule::new(Duration::from_millis(300), Duration::from_secs(5));
        assert_eq!(s.interval, Duration::from_millis(100));
        assert_eq!(s.retry_interval, Duration::from_millis(50));
        assert_eq!(s.attempt_timeout, Duration::from_millis(100));

        let s = Schedule::new(Duration::from_secs(60), Duration::from_secs(5));
        assert_eq!(s.attempt_timeout, Duration::from_secs(5));
    }
}

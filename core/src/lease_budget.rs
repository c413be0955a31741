//! How a lease's length is spent on the client: when the lost signal must fire so that the
//! holder has stopped before the server can expire the lease and grant the lock to
//! someone else. The rule and its arithmetic are in `docs/leases.md`.
//!
//! The server cannot expire a lease earlier than one full lease after the client *sent*
//! its last acknowledged heartbeat (the leader renews it on receipt, later; a deposed
//! leader acknowledges nothing; a new leader restarts every lease at full length). The
//! client therefore counts from that send time and gives up its lease a margin before the
//! lease ends: the *renew deadline*. A holder that needs time to stop (`dls lock`'s
//! `--kill-grace`, [`TransactionOptions::stop_grace_ms`](crate::TransactionOptions)) gets
//! its lost signal that much earlier, so the signal plus the grace still ends at the renew
//! deadline.

use std::time::Duration;

use crate::error::{Error, Result};

/// Part of the lease kept for clock rate drift: the client's clock and the leader's may each
/// run up to 0.5 % off (ten times what NTP ever slews, 500 ppm) in opposite directions.
const CLOCK_RATE_DIVISOR: u32 = 100;
/// Kept for one election on top: the time by which a leader's acknowledgement could trail
/// its successor's restart of the lease if the election rules were bent (a follower that
/// restarted forgets whom it heard from), plus the time to deliver the signal and SIGKILL.
/// A failover of the default server settings takes about half of it.
const ELECTION_MARGIN: Duration = Duration::from_secs(1);
/// Leases shorter than five election margins keep a fifth of the lease instead.
const ELECTION_MARGIN_DIVISOR: u32 = 5;
/// Heartbeats get at least this part of the lease before the lost signal (a third: the
/// default lease rides out a failover with time to spare).
const MIN_RENEW_WINDOW_DIVISOR: u32 = 3;

/// How a transaction's lease is spent: heartbeats until the lost signal, then the holder's
/// grace to stop, then a margin before the server can expire the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBudget {
    lease: Duration,
    stop_grace: Duration,
}

impl LeaseBudget {
    /// The budget of a lease of `lease` whose holder needs `stop_grace` to stop once it is
    /// told the lock is lost. `INVALID_ARGUMENT` when the grace does not fit (the message
    /// names the largest that does).
    pub fn new(lease: Duration, stop_grace: Duration) -> Result<LeaseBudget> {
        let max = Self::max_stop_grace(lease);
        if stop_grace > max {
            return Err(Error::invalid_argument(format!(
                "a stop grace of {} does not fit a lease of {}: the holder must have stopped {} before the \
                 server can expire the lease, and heartbeats need at least {} of it; the largest grace for this \
                 lease is {} (or lengthen the lease)",
                show(stop_grace),
                show(lease),
                show(Self::margin(lease)),
                show(lease / MIN_RENEW_WINDOW_DIVISOR),
                show(max),
            )));
        }
        Ok(LeaseBudget { lease, stop_grace })
    }

    /// Like [`new`](Self::new), cutting the grace down to what the lease allows.
    pub(crate) fn clamped(lease: Duration, stop_grace: Duration) -> LeaseBudget {
        LeaseBudget { lease, stop_grace: stop_grace.min(Self::max_stop_grace(lease)) }
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The holder's grace to stop after the lost signal.
    pub fn stop_grace(&self) -> Duration {
        self.stop_grace
    }

    /// The part of the lease kept between the renew deadline and the earliest moment the
    /// server may expire the lease: clock rate drift and one election.
    pub fn margin(lease: Duration) -> Duration {
        lease / CLOCK_RATE_DIVISOR + ELECTION_MARGIN.min(lease / ELECTION_MARGIN_DIVISOR)
    }

    /// How long after sending the last acknowledged heartbeat the holder must have stopped:
    /// the lease less [`margin`](Self::margin).
    pub fn renew_deadline(&self) -> Duration {
        self.lease.saturating_sub(Self::margin(self.lease))
    }

    /// How long after sending the last acknowledged heartbeat the lost signal fires: the
    /// renew deadline less the grace. Heartbeats must succeed within it.
    pub fn lost_after(&self) -> Duration {
        self.renew_deadline().saturating_sub(self.stop_grace)
    }

    /// The largest grace a lease of `lease` allows: the renew deadline less a third of the
    /// lease for heartbeats.
    pub fn max_stop_grace(lease: Duration) -> Duration {
        lease.saturating_sub(Self::margin(lease)).saturating_sub(lease / MIN_RENEW_WINDOW_DIVISOR)
    }
}

/// A duration for people: whole milliseconds, in seconds when round enough.
fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms.is_multiple_of(10) {
        format!("{}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_default_lease_keeps_a_margin_for_drift_and_an_election() {
        let lease = Duration::from_secs(15);
        assert_eq!(LeaseBudget::margin(lease), ms(1_150));
        let sdk = LeaseBudget::new(lease, Duration::ZERO).unwrap();
        assert_eq!(sdk.renew_deadline(), ms(13_850));
        assert_eq!(sdk.lost_after(), ms(13_850), "without a grace the signal fires at the renew deadline");
        assert_eq!(LeaseBudget::max_stop_grace(lease), ms(8_850));
        let lock = LeaseBudget::new(lease, Duration::from_secs(5)).unwrap();
        assert_eq!(lock.lost_after(), ms(8_850));
        assert_eq!(lock.lost_after() + lock.stop_grace(), lock.renew_deadline());
    }

    #[test]
    fn short_leases_keep_a_fifth_for_the_election() {
        assert_eq!(LeaseBudget::margin(ms(1_000)), ms(210));
        assert_eq!(LeaseBudget::margin(ms(100)), ms(21));
        assert_eq!(LeaseBudget::new(ms(100), Duration::ZERO).unwrap().lost_after(), ms(79));
        assert_eq!(LeaseBudget::margin(Duration::from_secs(60)), ms(1_600));
    }

    #[test]
    fn a_grace_the_lease_cannot_honour_is_refused_naming_the_largest() {
        let lease = Duration::from_secs(15);
        let max = LeaseBudget::max_stop_grace(lease);
        assert!(LeaseBudget::new(lease, max).is_ok());
        let err = LeaseBudget::new(lease, max + ms(1)).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.message().contains("the largest grace for this lease is 8.85s"), "{err}");
        let err = LeaseBudget::new(lease, Duration::from_secs(10)).unwrap_err();
        assert!(err.message().contains("a stop grace of 10s does not fit a lease of 15s"), "{err}");
        // Whatever the grace, the signal plus the grace never passes the renew deadline, and
        // that never passes the lease.
        for lease_ms in [100, 250, 1_000, 2_000, 15_000, 60_000, 3_600_000] {
            let lease = ms(lease_ms);
            let b = LeaseBudget::clamped(lease, Duration::from_secs(86_400));
            assert!(b.lost_after() + b.stop_grace() <= b.renew_deadline());
            assert!(b.renew_deadline() < lease);
            assert!(b.lost_after() >= lease / MIN_RENEW_WINDOW_DIVISOR - ms(1), "{lease:?}: {b:?}");
        }
    }
}

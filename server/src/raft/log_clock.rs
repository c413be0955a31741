//! The log's clock: the time inside the replicated state, run forward on this node.
//!
//! Every entry carries the proposing leader's time (`LogCommand::now_ms`); the lock table
//! keeps the highest it applied (`LockTable::clock_ms`) and decides with it when a
//! lock-delay or a bounded transaction's maximum duration ends. That time must not follow
//! any node's wall clock: a leader whose clock was an hour ahead wrote times an hour ahead,
//! and once it ran on the right clock again, a 10 s lock-delay written then took an hour to
//! end (its proposals carried times behind the table's, which never moves back); a clock
//! stepped forward on a leader would end every delay at once.
//!
//! So this node runs the log's time forward from the newest time it applied, by its own
//! monotonic clock: the leader stamps its entries with it, and the timers that propose a
//! delay's end convert the table's times to instants with it. The wall clock is read only
//! for a log that holds no time yet (a new cluster's first entries). A whole cluster's
//! downtime does not count (nobody ran the clock): delays and maximum durations that span
//! it last that much longer, and the times shown (`since`, `until`) lag the wall clock by
//! it; a delay never ends early.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The log's time on this node: the newest time applied, and the instant it was reached.
#[derive(Debug, Default)]
pub struct LogClock {
    anchor: Mutex<Option<(u64, Instant)>>,
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl LogClock {
    /// The log's time at `now` (ms since the Unix epoch).
    pub fn at(&self, now: Instant) -> u64 {
        match *self.anchor.lock().expect("clock lock") {
            Some((ms, at)) => ms.saturating_add(now.saturating_duration_since(at).as_millis() as u64),
            None => wall_ms(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.at(Instant::now())
    }

    /// The applied log's time is `clock_ms`: run on from it when it is ahead of this node's
    /// (entries of a leader whose monotonic clock ran faster, a restart, a snapshot).
    pub fn observe(&self, clock_ms: u64, now: Instant) {
        if clock_ms == 0 {
            return;
        }
        let mut anchor = self.anchor.lock().expect("clock lock");
        let ahead = match *anchor {
            Some((ms, at)) => clock_ms > ms.saturating_add(now.saturating_duration_since(at).as_millis() as u64),
            None => true,
        };
        if ahead {
            *anchor = Some((clock_ms, now));
        }
    }

    /// The instant at which the log's clock reads `ms` (`now` if it has passed).
    pub fn instant_of(&self, ms: u64, now: Instant) -> Instant {
        now + Duration::from_millis(ms.saturating_sub(self.at(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_from_the_newest_time_applied_by_the_monotonic_clock() {
        let clock = LogClock::default();
        let wall = wall_ms();
        assert!(clock.now_ms() >= wall, "no time applied yet: the wall clock");
        let t0 = Instant::now();
        // The log's time is an hour ahead of this node's wall clock.
        let log = wall + 3_600_000;
        clock.observe(log, t0);
        assert_eq!(clock.at(t0 + Duration::from_secs(10)), log + 10_000);
        // A 10 s delay written at the log's time ends 10 s later, whatever the wall says.
        assert_eq!(clock.instant_of(log + 10_000, t0), t0 + Duration::from_secs(10));
        assert_eq!(clock.instant_of(log - 5, t0), t0, "passed: now");
        // Entries behind this node's run-on time (its own, stamped before they applied)
        // do not hold it back; entries ahead move it on.
        clock.observe(log + 1_000, t0 + Duration::from_secs(5));
        assert_eq!(clock.at(t0 + Duration::from_secs(10)), log + 10_000);
        clock.observe(log + 20_000, t0 + Duration::from_secs(10));
        assert_eq!(clock.at(t0 + Duration::from_secs(11)), log + 21_000);
    }
}

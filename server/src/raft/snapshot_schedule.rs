//! When a node takes a snapshot.
//!
//! openraft 0.9 can only count entries (`SnapshotPolicy::LogsSinceLast`), so a table that
//! remembers 100,000 finished transactions (a 30–37 MB file) was written again every
//! `--snapshot-every` entries: at 2,000 entries/s, every 5 seconds on every node, each write
//! ending in an `fsync` of tens of MB on the disk the raft logs sync to, which showed in the
//! hot key's p99 (docs/bench.md). The node asks for snapshots itself instead: after
//! `--snapshot-every` entries, or, once the last snapshot is large, after as many entries as
//! it takes for a new one to cost at most [`BYTES_PER_ENTRY`] of snapshot per entry applied
//! since (a raft entry itself writes ~100–300 bytes of log), but never more than
//! [`MAX_STRETCH`] times `--snapshot-every` (the log a restart replays stays bounded).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::sync::Notify;

/// Snapshot bytes written per entry applied, at most, once snapshots are large.
pub const BYTES_PER_ENTRY: u64 = 1024;
/// The most entries between two snapshots, in multiples of `--snapshot-every`.
pub const MAX_STRETCH: u64 = 16;

/// Entries to apply after a snapshot of `last_bytes` before the next one is due.
pub fn entries_between(every: u64, last_bytes: u64) -> u64 {
    every.max(last_bytes / BYTES_PER_ENTRY).min(every.saturating_mul(MAX_STRETCH))
}

/// Decides, after each applied batch, whether to ask raft for a snapshot; a task of the
/// node waits on [`asked`](Self::asked) and triggers it.
#[derive(Debug)]
pub struct SnapshotSchedule {
    every: u64,
    /// The applied index when a snapshot was last asked for (0: never).
    asked_at: AtomicU64,
    wake: Notify,
}

/// The current snapshot file, as the schedule needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastSnapshot {
    /// Its last log index (0 when there is none).
    pub index: u64,
    pub bytes: u64,
}

impl SnapshotSchedule {
    pub fn new(every: u64) -> SnapshotSchedule {
        SnapshotSchedule { every: every.max(1), asked_at: AtomicU64::new(0), wake: Notify::new() }
    }

    /// Entries applied up to `index`; `last` is the current snapshot. Asks for a snapshot
    /// when one is due and none was asked for since `last`, or the one asked for has not
    /// come within another interval (raft ignores a request while it builds or installs
    /// one). Returns whether it asked.
    pub fn applied(&self, index: u64, last: LastSnapshot) -> bool {
        let between = entries_between(self.every, last.bytes);
        let asked = self.asked_at.load(Relaxed);
        let waiting_for_asked = asked > last.index && index < asked.saturating_add(between);
        if index < last.index.saturating_add(between) || waiting_for_asked {
            return false;
        }
        self.asked_at.store(index, Relaxed);
        self.wake.notify_one();
        true
    }

    /// Returns once a snapshot was asked for since the last call.
    pub async fn asked(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(index: u64, bytes: u64) -> LastSnapshot {
        LastSnapshot { index, bytes }
    }

    #[test]
    fn small_snapshots_come_every_so_many_entries_large_ones_less_often_up_to_a_cap() {
        assert_eq!(entries_between(10_000, 0), 10_000);
        assert_eq!(entries_between(10_000, 8 * 1024 * 1024), 10_000); // 8 MiB: 8,192 entries' worth
        assert_eq!(entries_between(10_000, 33_000_000), 32_226);
        assert_eq!(entries_between(10_000, 1 << 40), 160_000);
        assert_eq!(entries_between(10, 10_125), 10);
    }

    #[test]
    fn asks_once_per_interval_and_again_if_nothing_came() {
        let s = SnapshotSchedule::new(100);
        assert!(!s.applied(99, last(0, 0)));
        assert!(s.applied(100, last(0, 0)));
        // Asked; until a snapshot comes, not again within the next interval.
        assert!(!s.applied(150, last(0, 0)));
        assert!(!s.applied(199, last(0, 0)));
        assert!(s.applied(200, last(0, 0)), "the request was lost: ask again");
        // The snapshot at 200 came: the next is due 100 entries after it.
        assert!(!s.applied(250, last(200, 1000)));
        assert!(s.applied(300, last(200, 1000)));
    }

    #[test]
    fn a_large_last_snapshot_stretches_the_interval() {
        let s = SnapshotSchedule::new(100);
        let big = last(1_000, 500 * 1024); // 500 entries' worth
        assert!(!s.applied(1_100, big));
        assert!(!s.applied(1_499, big));
        assert!(s.applied(1_500, big));
    }

    #[tokio::test]
    async fn asking_wakes_the_waiting_task() {
        let s = std::sync::Arc::new(SnapshotSchedule::new(1));
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.asked().await }
        });
        assert!(s.applied(5, last(0, 0)));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.unwrap().unwrap();
    }
}

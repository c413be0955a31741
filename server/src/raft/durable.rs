//! How far this node's raft log is on disk, so that the leader can write its own log in
//! parallel with replicating it.
//!
//! openraft 0.9 waits for the leader's own append to be flushed before it sends the
//! entries to followers, which puts the leader's `fdatasync` (0.25–0.3 ms here) in series
//! with the followers' on every write. Raft does not need that order (the leader may
//! write its log while followers write theirs, as long as it counts itself towards a
//! majority only once its own copy is on disk), so the leader's log store reports its
//! appends done at once and this watermark enforces the rest:
//! - the state machine applies an entry (and so answers its client) only once it is
//!   durable here;
//! - AppendEntries leave only once this node's commit index is durable here, so no
//!   follower applies an entry that is not on a majority of disks;
//! - the commit index is persisted only within the durable part of the log.
//!
//! Followers still acknowledge only what they have synced, so an entry raft counts as
//! committed is on the leader's disk and on a majority of followers' disks before anyone
//! acts on it.

use std::io;
use std::time::Duration;

use tokio::sync::watch;

/// Index of the first entry not yet known durable (entries below it are on disk), or a
/// failed sync: after that nothing more counts as durable and waiters get the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Next(u64),
    Failed,
}

pub struct Durable {
    mark: watch::Sender<Mark>,
}

impl Durable {
    /// Everything before `next` is on disk.
    pub fn new(next: u64) -> Durable {
        Durable { mark: watch::channel(Mark::Next(next)).0 }
    }

    /// A sync covered every entry before `next`.
    pub fn advance(&self, next: u64) {
        self.mark.send_if_modified(|m| match m {
            Mark::Next(n) if *n < next => {
                *n = next;
                true
            }
            _ => false,
        });
    }

    /// Entries from `index` on were removed (a follower's log truncated by a new leader).
    pub fn cut(&self, index: u64) {
        self.mark.send_if_modified(|m| match m {
            Mark::Next(n) if *n > index => {
                *n = index;
                true
            }
            _ => false,
        });
    }

    /// A sync failed: the log's state on disk is unknown from here on.
    pub fn fail(&self) {
        self.mark.send_replace(Mark::Failed);
    }

    /// Whether a sync failed: from then on nothing written counts as on disk.
    pub fn failed(&self) -> bool {
        *self.mark.borrow() == Mark::Failed
    }

    /// Whether the entry at `index` is on disk.
    pub fn covers(&self, index: u64) -> bool {
        matches!(*self.mark.borrow(), Mark::Next(n) if n > index)
    }

    /// Waits until the entry at `index` is on disk, for at most `limit`.
    pub async fn wait_for(&self, index: u64, limit: Duration) -> io::Result<()> {
        if self.covers(index) {
            return Ok(());
        }
        let mut rx = self.mark.subscribe();
        let reached = async {
            let m = rx.wait_for(|m| match m {
                Mark::Next(n) => *n > index,
                Mark::Failed => true,
            });
            m.await.map(|m| *m)
        };
        match tokio::time::timeout(limit, reached).await {
            Ok(Ok(Mark::Next(_))) => Ok(()),
            Ok(_) => Err(io::Error::other("syncing the raft log failed; this node cannot go on")),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("raft log entry {index} not on disk after {limit:?}; is the disk stalled?"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn waits_until_a_sync_covers_the_entry() {
        let d = std::sync::Arc::new(Durable::new(5));
        assert!(d.covers(4) && !d.covers(5));
        d.wait_for(4, SHORT).await.unwrap();
        let waiter = tokio::spawn({
            let d = d.clone();
            async move { d.wait_for(7, Duration::from_secs(5)).await }
        });
        d.advance(7);
        tokio::time::sleep(SHORT).await;
        assert!(!waiter.is_finished(), "a sync of the entries before 7 does not cover 7");
        d.advance(8);
        assert!(d.covers(7));
        waiter.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn cut_moves_back_and_advance_never_does() {
        let d = Durable::new(10);
        d.advance(3);
        assert!(d.covers(9));
        d.cut(6);
        assert!(d.covers(5) && !d.covers(6));
        assert_eq!(d.wait_for(6, SHORT).await.unwrap_err().kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_failed_sync_fails_every_waiter() {
        let d = Durable::new(2);
        d.fail();
        assert!(!d.covers(0));
        assert_eq!(d.wait_for(1, SHORT).await.unwrap_err().kind(), io::ErrorKind::Other);
        d.advance(9);
        assert!(!d.covers(3), "nothing counts as durable after a failed sync");
        assert!(d.failed());
    }
}

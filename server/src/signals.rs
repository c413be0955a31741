//! Wake-ups for streams waiting on a transaction (AcquireLock progress).
//!
//! Apply effects bump per-transaction counters; a waiting stream subscribes before it
//! reads the table, so a change between its read and its wait is never missed. Two
//! counters, because the two kinds of change are worth different haste: an outcome (a
//! grant, the end of the wait or of the transaction) is read at once, while a move of
//! the queue ahead (only the position and blockers differ) happens on every grant of a
//! busy key for every waiter behind it, and streams coalesce those.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::locks::TxnId;

/// How many times each kind of change happened to a transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Outcome changes: grants, ended waits, ended transactions, a replaced table.
    pub outcome: u64,
    /// Moves of the queue ahead of the transaction's wait.
    pub queue: u64,
}

#[derive(Default)]
pub struct Signals {
    senders: Mutex<HashMap<TxnId, watch::Sender<Changes>>>,
}

impl Signals {
    pub fn subscribe(&self, txn: TxnId) -> watch::Receiver<Changes> {
        let mut s = self.senders.lock().expect("signals lock");
        s.entry(txn).or_insert_with(|| watch::channel(Changes::default()).0).subscribe()
    }

    /// The outcome of `txn`'s wait, or `txn` itself, changed.
    pub fn notify(&self, txn: TxnId) {
        self.bump(txn, |c| c.outcome += 1);
    }

    /// Requests ahead of `txn`'s wait left its queue.
    pub fn queue_moved(&self, txn: TxnId) {
        self.bump(txn, |c| c.queue += 1);
    }

    fn bump(&self, txn: TxnId, change: impl FnOnce(&mut Changes)) {
        let mut s = self.senders.lock().expect("signals lock");
        if let Some(tx) = s.get(&txn) {
            tx.send_modify(change);
            // Nobody listens any more: drop the entry so the map stays bounded.
            if tx.receiver_count() == 0 {
                s.remove(&txn);
            }
        }
    }

    /// Everything may have changed (the table was replaced by a snapshot).
    pub fn notify_all(&self) {
        let s = self.senders.lock().expect("signals lock");
        for tx in s.values() {
            tx.send_modify(|c| c.outcome += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_change_is_counted_apart_and_only_for_subscribers() {
        let signals = Signals::default();
        signals.notify(7); // nobody listens yet: nothing kept
        let mut rx = signals.subscribe(7);
        signals.queue_moved(7);
        signals.queue_moved(7);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), Changes { outcome: 0, queue: 2 });
        signals.notify(7);
        signals.notify_all();
        assert_eq!(*rx.borrow_and_update(), Changes { outcome: 2, queue: 2 });
        drop(rx);
        signals.notify(7);
        assert!(signals.senders.lock().unwrap().is_empty(), "an entry nobody listens to is dropped");
    }
}

//! Wake-ups for streams waiting on a transaction (AcquireLock progress).
//!
//! Apply effects bump a transaction's channels; a waiting stream subscribes before it
//! reads the table, so a change between its read and its wait is never missed. Two
//! channels, because the two kinds of change are worth different haste: an outcome (a
//! grant, the end of the wait or of the transaction) is read at once, while a move of
//! the queue ahead (only the position and blockers differ) happens on every grant of a
//! busy key for every waiter behind it. A stream stops listening to moves until it has
//! read the last one, so a burst of grants wakes each waiter once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::locks::TxnId;

struct Senders {
    outcome: watch::Sender<()>,
    queue: watch::Sender<()>,
}

/// One stream's view of a transaction's changes. The last one dropped takes the
/// transaction's channels with it: most transactions are never waited on again (a
/// granted acquire), and channels kept until each transaction ended would make idle
/// holders cost the leader memory for nothing (figures in docs/bench.md).
pub struct Subscription {
    /// Grants, ended waits, the end of the transaction, a replaced table.
    pub outcome: watch::Receiver<()>,
    /// Requests ahead of the transaction's wait left its queue.
    pub queue: watch::Receiver<()>,
    txn: TxnId,
    wakeups: Arc<TxnWakeups>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut s = self.wakeups.senders.lock().expect("txn wakeups lock");
        // Under the map's lock no one can subscribe meanwhile; 1 = this subscription.
        if s.get(&self.txn).is_some_and(|senders| senders.outcome.receiver_count() <= 1) {
            s.remove(&self.txn);
        }
    }
}

#[derive(Default)]
pub struct TxnWakeups {
    senders: Mutex<HashMap<TxnId, Senders>>,
    /// `stay_open` acquire streams open after their grant, per transaction (see `hold`).
    holding: Mutex<HashMap<TxnId, usize>>,
}

/// The most `stay_open` streams one transaction may keep open after their grants. One is
/// enough to hear of its end (the SDKs keep one); the cap bounds what a client can make
/// the leader keep for a transaction that heartbeats for ever.
pub const MAX_HOLDING_STREAMS_PER_TXN: usize = 16;

/// A `stay_open` stream's place among its transaction's ([`TxnWakeups::hold`]); freed on drop.
pub struct HoldingSlot {
    txn: TxnId,
    wakeups: Arc<TxnWakeups>,
}

impl Drop for HoldingSlot {
    fn drop(&mut self) {
        let mut h = self.wakeups.holding.lock().expect("txn wakeups lock");
        if let Some(n) = h.get_mut(&self.txn) {
            *n -= 1;
            if *n == 0 {
                h.remove(&self.txn);
            }
        }
    }
}

impl TxnWakeups {
    pub fn subscribe(self: &Arc<Self>, txn: TxnId) -> Subscription {
        let mut s = self.senders.lock().expect("txn wakeups lock");
        let tx = s.entry(txn).or_insert_with(|| Senders { outcome: watch::channel(()).0, queue: watch::channel(()).0 });
        Subscription { outcome: tx.outcome.subscribe(), queue: tx.queue.subscribe(), txn, wakeups: self.clone() }
    }

    /// A place for one more `stay_open` stream of `txn` after its grant, or `None` when it
    /// already has [`MAX_HOLDING_STREAMS_PER_TXN`] (that stream then ends after the grant).
    pub fn hold(self: &Arc<Self>, txn: TxnId) -> Option<HoldingSlot> {
        let mut h = self.holding.lock().expect("txn wakeups lock");
        let n = h.entry(txn).or_insert(0);
        if *n >= MAX_HOLDING_STREAMS_PER_TXN {
            return None;
        }
        *n += 1;
        Some(HoldingSlot { txn, wakeups: self.clone() })
    }

    /// The outcomes of `outcomes`' waits (or the transactions themselves) changed, and
    /// requests ahead of `moves`' waits left their queues. One lock for an applied
    /// batch: a grant on a busy key moves every waiter behind it.
    pub fn changed(&self, outcomes: impl IntoIterator<Item = TxnId>, moves: impl IntoIterator<Item = TxnId>) {
        let s = self.senders.lock().expect("txn wakeups lock");
        for txn in outcomes {
            if let Some(senders) = s.get(&txn) {
                senders.outcome.send_replace(());
            }
        }
        for txn in moves {
            if let Some(senders) = s.get(&txn) {
                senders.queue.send_replace(());
            }
        }
    }

    /// Everything may have changed (the table was replaced by a snapshot).
    pub fn notify_all(&self) {
        let s = self.senders.lock().expect("txn wakeups lock");
        for senders in s.values() {
            senders.outcome.send_replace(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_queue_moves_reach_their_own_channel_and_only_subscribers() {
        let wakeups = Arc::new(TxnWakeups::default());
        wakeups.changed([7], []); // nobody listens yet: nothing kept
        assert!(wakeups.senders.lock().unwrap().is_empty());
        let mut sub = wakeups.subscribe(7);
        wakeups.changed([], [7]);
        assert!(sub.queue.has_changed().unwrap());
        assert!(!sub.outcome.has_changed().unwrap());
        sub.queue.borrow_and_update();
        wakeups.changed([7], []);
        assert!(sub.outcome.has_changed().unwrap());
        assert!(!sub.queue.has_changed().unwrap());
        sub.outcome.borrow_and_update();
        wakeups.notify_all();
        assert!(sub.outcome.has_changed().unwrap());

        // The channels go with the last subscription, not before.
        let second = wakeups.subscribe(7);
        drop(sub);
        wakeups.changed([7], []);
        assert!(second.outcome.has_changed().unwrap(), "the remaining subscription still hears");
        drop(second);
        assert!(wakeups.senders.lock().unwrap().is_empty(), "an entry nobody listens to is dropped");
    }

    #[test]
    fn holding_streams_are_capped_per_transaction_and_freed_on_drop() {
        let wakeups = Arc::new(TxnWakeups::default());
        let slots: Vec<_> = (0..MAX_HOLDING_STREAMS_PER_TXN).map(|_| wakeups.hold(7).expect("a place")).collect();
        assert!(wakeups.hold(7).is_none(), "past the cap");
        assert!(wakeups.hold(8).is_some(), "another transaction has its own places");
        drop(slots);
        assert!(wakeups.holding.lock().unwrap().is_empty(), "every place freed");
        assert!(wakeups.hold(7).is_some());
    }
}

//! Wake-ups for streams waiting on a transaction (AcquireLock progress).
//!
//! Apply effects bump a per-transaction counter; a waiting stream subscribes before it
//! reads the table, so a change between its read and its wait is never missed.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::locks::TxnId;

#[derive(Default)]
pub struct Signals {
    senders: Mutex<HashMap<TxnId, watch::Sender<u64>>>,
}

impl Signals {
    pub fn subscribe(&self, txn: TxnId) -> watch::Receiver<u64> {
        let mut s = self.senders.lock().expect("signals lock");
        s.entry(txn).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    pub fn notify(&self, txn: TxnId) {
        let mut s = self.senders.lock().expect("signals lock");
        if let Some(tx) = s.get(&txn) {
            tx.send_modify(|v| *v += 1);
            // Nobody listens any more: drop the entry so the map stays bounded.
            if tx.receiver_count() == 0 {
                s.remove(&txn);
            }
        }
    }

    pub fn notify_all(&self) {
        let s = self.senders.lock().expect("signals lock");
        for tx in s.values() {
            tx.send_modify(|v| *v += 1);
        }
    }
}

//! The lock table as an operator lists it: per key, its holders and its queue.

use std::collections::BTreeMap;

use super::{Engine, EngineResult, Principal};
use crate::locks::{Held, KeyDelay, LockKey, LockMode, TxnId};

/// One key with holders or waiters, or under a lock-delay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyView {
    pub lock: LockKey,
    pub holders: Vec<LockHolder>,
    /// In queue order.
    pub waiters: Vec<LockWaiter>,
    /// The lock-delay that keeps it from granting anything, if any.
    pub delay: Option<KeyDelay>,
    /// How long that delay still lasts, by the log's time (see `raft::log_clock`).
    pub delay_remaining_ms: u64,
    /// A semaphore's permit count (0 for a lock).
    pub permits: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    pub txn: TxnId,
    pub txn_name: String,
    pub held: Held,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockWaiter {
    pub txn: TxnId,
    pub txn_name: String,
    pub mode: LockMode,
    /// 1 is next in line.
    pub position: u32,
    /// The transactions it waits for (its wait-for edges).
    pub blockers: Vec<TxnId>,
    pub since_ms: u64,
    /// It holds the key already and waits to upgrade its mode.
    pub upgrade: bool,
}

impl Engine {
    /// The keys in namespaces starting with `prefix` that `who` may see, as of everything
    /// committed before the call.
    pub async fn list_locks(&self, who: &Principal, prefix: &str) -> EngineResult<Vec<KeyView>> {
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let st = self.node.state().read().expect("state lock");
        let name = |txn| st.table.txn(txn).map(|t| t.name.clone()).unwrap_or_default();
        let shown = |lock: &LockKey| lock.namespace.starts_with(prefix) && who.sees_namespace(&lock.namespace);
        let log_now = self.node.log_clock().now_ms();
        let mut views: BTreeMap<LockKey, KeyView> = st
            .table
            .keys()
            .filter(|(lock, _)| shown(lock))
            .map(|(lock, k)| KeyView {
                delay: st.table.key_delay(lock).copied(),
                delay_remaining_ms: st.table.key_delay(lock).map_or(0, |d| d.until_ms.saturating_sub(log_now)),
                permits: k.permits,
                lock: lock.clone(),
                holders: k
                    .holders
                    .iter()
                    .map(|(&txn, held)| LockHolder { txn, txn_name: name(txn), held: *held })
                    .collect(),
                waiters: k
                    .queue
                    .iter()
                    .enumerate()
                    .map(|(i, (slot, w))| LockWaiter {
                        txn: w.txn,
                        txn_name: name(w.txn),
                        mode: w.mode,
                        position: i as u32 + 1,
                        blockers: k.blockers(*slot),
                        since_ms: w.since_ms,
                        upgrade: k.holders.contains_key(&w.txn),
                    })
                    .collect(),
            })
            .map(|v| (v.lock.clone(), v))
            .collect();
        // A delayed key nobody holds or waits for is not in the table's keys.
        for (lock, delay) in st.table.delayed_keys().filter(|(lock, _)| shown(lock)) {
            views.entry(lock.clone()).or_insert_with(|| KeyView {
                lock: lock.clone(),
                holders: Vec::new(),
                waiters: Vec::new(),
                delay: Some(*delay),
                delay_remaining_ms: delay.until_ms.saturating_sub(log_now),
                permits: 0,
            });
        }
        Ok(views.into_values().collect())
    }
}

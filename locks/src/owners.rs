//! Active transactions per owner (API key name): an index derived from the table, for the
//! leader's per-key limit, so that check does not walk every transaction.
//!
//! Not part of snapshots: after a table is restored or installed the index is empty, and
//! the first read builds it from the transactions; from then on begin and finish keep it
//! up to date. Until it is built they leave it alone, so it never counts anything twice.

use std::collections::HashMap;
use std::sync::OnceLock;

#[derive(Clone, Debug, Default)]
pub struct ActiveByOwner(OnceLock<HashMap<String, usize>>);

/// Derived data: two tables with the same transactions are equal whether or not their
/// index was built yet.
impl PartialEq for ActiveByOwner {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ActiveByOwner {
    /// `owner`'s count; `active_owners` lists the owner of every active transaction, read
    /// only if the index is not built yet.
    pub fn count<'a, I: Iterator<Item = &'a str>>(&self, owner: &str, active_owners: impl FnOnce() -> I) -> usize {
        let index = self.0.get_or_init(|| {
            let mut m = HashMap::new();
            for o in active_owners() {
                *m.entry(o.to_string()).or_default() += 1;
            }
            m
        });
        index.get(owner).copied().unwrap_or(0)
    }

    pub fn add(&mut self, owner: &str) {
        if let Some(m) = self.0.get_mut() {
            *m.entry(owner.to_string()).or_default() += 1;
        }
    }

    pub fn remove(&mut self, owner: &str) {
        if let Some(m) = self.0.get_mut() {
            if let Some(n) = m.get_mut(owner) {
                *n -= 1;
                if *n == 0 {
                    m.remove(owner);
                }
            }
        }
    }
}

//! Lock-delay, as in Chubby and Consul: when a holder is revoked (its lease lapsed, it was
//! aborted by an operator or as a deadlock victim, or its maximum duration passed), its
//! keys in namespaces that have a delay stay unavailable for that long, so a process that
//! still believes it holds the lock (a long pause, a partition) has time to notice before
//! the next holder starts. It protects resources that cannot check fencing tokens. A normal
//! release, commit or client abort is never delayed: that client knows it let go.
//!
//! The rules (namespace prefix → delay) are replicated state, set by an operator through
//! `Command::SetLockDelay`, so every replica delays the same keys for the same time. A
//! delayed key grants nothing (queued requests keep their place, new ones queue behind
//! them, a try-lock is refused); its holders that were not revoked keep their holds. The
//! end is the leader's to propose (`Command::EndLockDelay`) and applies only once the log's
//! clock has reached it, like a bounded transaction's end.
//!
//! Rules and delayed keys are not part of the table's serde form (older snapshots keep
//! decoding); snapshot files carry them as sections, written only when non-empty so a
//! cluster that never used the feature writes snapshots an older version still reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::command::{Outcome, Rejection};
use super::super::types::{EndCause, Held, LockKey, TxnId};
use super::{Effect, LockTable};

/// The longest lock-delay an operator may set (Chubby and Consul cap theirs at a minute;
/// this leaves room for slower resources without letting a typo freeze a key for days).
pub const MAX_LOCK_DELAY_MS: u64 = 10 * 60 * 1000;
/// At most this many rules, so the per-revocation prefix match stays cheap.
pub const MAX_LOCK_DELAY_RULES: usize = 256;

/// Why and until when a key grants nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDelay {
    /// The log's clock (ms since the epoch) at which the key may be granted again.
    pub until_ms: u64,
    /// The revoked holder whose end started the delay (the latest, when several did).
    pub txn: TxnId,
    pub cause: EndCause,
    /// The last fencing token issued when the delay began: no hold of the key has a larger
    /// one while the delay lasts.
    pub after_token: u64,
}

/// The replicated lock-delay state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct LockDelays {
    /// Namespace prefix → delay in ms ("" = every namespace). The longest matching prefix
    /// decides.
    rules: BTreeMap<String, u64>,
    delayed: BTreeMap<LockKey, KeyDelay>,
}

impl LockDelays {
    /// The delay for keys of `namespace` (0 = none).
    fn delay_for(&self, namespace: &str) -> u64 {
        self.rules
            .iter()
            .filter(|(p, _)| namespace.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map_or(0, |(_, d)| *d)
    }

    pub(super) fn sections(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        if !self.rules.is_empty() {
            out.push((RULES.to_string(), bincode::serialize(&self.rules).expect("a map of strings encodes")));
        }
        if !self.delayed.is_empty() {
            out.push((DELAYED.to_string(), bincode::serialize(&self.delayed).expect("a map of keys encodes")));
        }
        out
    }

    /// Restores section `name` if it is one of this module's; false if it is not.
    pub(super) fn restore_section(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        let bad = |e: bincode::Error| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}"));
        match name {
            RULES => self.rules = bincode::deserialize(bytes).map_err(bad)?,
            DELAYED => self.delayed = bincode::deserialize(bytes).map_err(bad)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Section names in snapshot files.
const RULES: &str = "lock-delay-rules";
const DELAYED: &str = "delayed-keys";

/// Why a lock-delay rule cannot be set, or None. The API checks the same at the edge; the
/// apply checks again so a log entry can never hold a rule the table has no bound for.
pub fn invalid_lock_delay(prefix: &str, delay_ms: u64, rules: usize, known: bool) -> Option<String> {
    if delay_ms > MAX_LOCK_DELAY_MS {
        return Some(format!(
            "lock-delay of {delay_ms} ms for prefix {prefix:?} is above the maximum of {MAX_LOCK_DELAY_MS} ms"
        ));
    }
    if delay_ms > 0 && !known && rules >= MAX_LOCK_DELAY_RULES {
        return Some(format!(
            "there are already {rules} lock-delay rules (the maximum); remove one (delay 0) before adding {prefix:?}"
        ));
    }
    None
}

impl LockTable {
    /// Sets the lock-delay of namespaces starting with `prefix` (0 removes the rule). Keys
    /// already delayed keep their end. Answers the previous delay of that prefix.
    pub(super) fn set_lock_delay(&mut self, prefix: &str, delay_ms: u64) -> Outcome {
        let rules = &mut self.lock_delays.rules;
        if let Some(why) = invalid_lock_delay(prefix, delay_ms, rules.len(), rules.contains_key(prefix)) {
            return Outcome::Rejected(Rejection::Invalid(why));
        }
        let previous_ms = if delay_ms == 0 { rules.remove(prefix) } else { rules.insert(prefix.to_string(), delay_ms) };
        Outcome::LockDelaySet { previous_ms: previous_ms.unwrap_or(0) }
    }

    /// `txn` was revoked by `cause` while holding `held`: delays those of its keys whose
    /// namespace has a lock-delay. Called before the keys are granted onward.
    pub(super) fn delay_revoked_keys(&mut self, txn: TxnId, cause: EndCause, held: &[(LockKey, Held)]) {
        if self.lock_delays.rules.is_empty() || !cause.revokes() {
            return;
        }
        for (lock, _) in held {
            let delay = self.lock_delays.delay_for(&lock.namespace);
            if delay == 0 {
                continue;
            }
            let until_ms = self.clock_ms.saturating_add(delay);
            let entry = self.lock_delays.delayed.entry(lock.clone()).or_insert(KeyDelay {
                until_ms,
                txn,
                cause,
                after_token: self.last_token,
            });
            if entry.until_ms <= until_ms {
                *entry = KeyDelay { until_ms, txn, cause, after_token: entry.after_token.min(self.last_token) };
            }
            self.effects.push(Effect::LockDelayed { key: lock.clone(), until_ms: entry.until_ms });
        }
    }

    /// Ends the delays of `keys` that are due by the log's clock and grants the keys to
    /// their queues. A key not delayed, or not due yet (a leader whose clock runs ahead
    /// proposed it early: it asks again), is left as it is. Answers how many ended.
    pub(super) fn end_lock_delays(&mut self, keys: &[LockKey]) -> Outcome {
        let mut ended = 0;
        for lock in keys {
            let due = self.lock_delays.delayed.get(lock).is_some_and(|d| d.until_ms <= self.clock_ms);
            if due {
                self.lock_delays.delayed.remove(lock);
                ended += 1;
                self.promote(lock);
            }
        }
        Outcome::LockDelaysEnded { ended }
    }

    /// Whether `lock` grants nothing now because of a lock-delay.
    pub fn is_delayed(&self, lock: &LockKey) -> bool {
        !self.lock_delays.delayed.is_empty() && self.lock_delays.delayed.contains_key(lock)
    }

    /// The lock-delay `lock` is under, if any.
    pub fn key_delay(&self, lock: &LockKey) -> Option<&KeyDelay> {
        self.lock_delays.delayed.get(lock)
    }

    /// Every delayed key, in (namespace, key) order.
    pub fn delayed_keys(&self) -> impl Iterator<Item = (&LockKey, &KeyDelay)> {
        self.lock_delays.delayed.iter()
    }

    /// The lock-delay rules: namespace prefix and delay, in prefix order.
    pub fn lock_delay_rules(&self) -> impl Iterator<Item = (&str, u64)> {
        self.lock_delays.rules.iter().map(|(p, d)| (p.as_str(), *d))
    }

    /// The delay revoked holders of keys in `namespace` leave behind (0 = none).
    pub fn lock_delay_for(&self, namespace: &str) -> u64 {
        self.lock_delays.delay_for(namespace)
    }
}

//! The replicated event log: what operators and other services are told about.
//!
//! Events are appended inside `apply`, so every replica holds the same log with the same
//! sequence numbers; a watcher that resumes from a cursor on a new leader misses nothing.
//! The log is bounded: the oldest events are dropped past [`MAX_EVENTS`].

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use super::api_key::ApiKeyChange;
use super::types::{EndCause, Held, LockKey, LockMode, TxnId, VictimPolicy};

/// How many events are retained.
pub const MAX_EVENTS: usize = 10_000;

/// A member of a wait-for cycle and the lock it waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleMember {
    pub txn: TxnId,
    pub name: String,
    pub priority: i32,
    pub lock: LockKey,
    pub mode: LockMode,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventDetail {
    DeadlockResolved {
        cycle: Vec<CycleMember>,
        victim: TxnId,
        policy: VictimPolicy,
    },
    TransactionExpired {
        txn: TxnId,
        name: String,
        released: Vec<(LockKey, Held)>,
    },
    TransactionAborted {
        txn: TxnId,
        name: String,
        reason: String,
        operator: String,
        released: Vec<(LockKey, Held)>,
    },
    /// `cause` is the [`EndCause`]'s description (that is its form in snapshots); read it
    /// back with [`revoke_cause`].
    LockRevoked {
        txn: TxnId,
        lock: LockKey,
        held: Held,
        cause: String,
    },
    /// A cluster API key was created, revoked, rotated or expired: `by` is the admin key
    /// that did it ("" for an expiry, which the cluster does); never a secret or a hash.
    /// `namespaces` are the key's prefixes (none for a key of every namespace).
    ApiKeyChanged {
        change: ApiKeyChange,
        key: String,
        by: String,
        namespaces: Vec<String>,
    },
}

/// What ended the holder of a revoked lock, from the stored `LockRevoked::cause`. Only the
/// revoking causes are ever stored there (see `LockTable::finish`).
pub fn revoke_cause(stored: &str) -> Option<EndCause> {
    [EndCause::LeaseExpired, EndCause::DeadlockVictim, EndCause::OperatorAbort]
        .into_iter()
        .find(|c| c.describe() == stored)
}

/// Kinds of events (declared once, in `caerus-types`; snake_case in config files).
pub use caerus_types::EventKind;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    /// Leader clock of the entry that produced it.
    pub at_ms: u64,
    pub detail: EventDetail,
}

impl Event {
    pub fn kind(&self) -> EventKind {
        match self.detail {
            EventDetail::DeadlockResolved { .. } => EventKind::DeadlockResolved,
            EventDetail::TransactionExpired { .. } => EventKind::TransactionExpired,
            EventDetail::TransactionAborted { .. } => EventKind::TransactionAborted,
            EventDetail::LockRevoked { .. } => EventKind::LockRevoked,
            EventDetail::ApiKeyChanged { .. } => EventKind::ApiKeyChanged,
        }
    }

    /// The filter rule shared by WatchEvents and webhooks: one of `kinds` (empty = any),
    /// touching a namespace that starts with one of `prefixes` (empty = any).
    pub fn matches<'a>(&self, kinds: impl IntoIterator<Item = &'a EventKind>, prefixes: &[String]) -> bool {
        let mut kinds = kinds.into_iter().peekable();
        let kind_ok = kinds.peek().is_none() || kinds.any(|k| *k == self.kind());
        let ns_ok = prefixes.is_empty()
            || self.namespaces().iter().any(|ns| prefixes.iter().any(|p| ns.starts_with(p.as_str())));
        kind_ok && ns_ok
    }

    /// Namespaces the event touches, sorted and without repeats.
    pub fn namespaces(&self) -> Vec<String> {
        let mut ns: Vec<String> = match &self.detail {
            EventDetail::DeadlockResolved { cycle, .. } => cycle.iter().map(|m| m.lock.namespace.clone()).collect(),
            EventDetail::TransactionExpired { released, .. } | EventDetail::TransactionAborted { released, .. } => {
                released.iter().map(|(l, _)| l.namespace.clone()).collect()
            }
            EventDetail::LockRevoked { lock, .. } => vec![lock.namespace.clone()],
            EventDetail::ApiKeyChanged { namespaces, .. } => namespaces.clone(),
        };
        ns.sort();
        ns.dedup();
        ns
    }
}

/// The bounded log itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLog {
    last_seq: u64,
    events: VecDeque<Event>,
}

/// A cursor older than the retained log.
#[derive(Debug, PartialEq, Eq)]
pub struct CursorExpired {
    pub oldest: u64,
}

impl EventLog {
    pub fn push(&mut self, at_ms: u64, detail: EventDetail) {
        self.last_seq += 1;
        self.events.push_back(Event { seq: self.last_seq, at_ms, detail });
        while self.events.len() > MAX_EVENTS {
            self.events.pop_front();
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The first retained sequence number (last + 1 when empty).
    pub fn oldest_seq(&self) -> u64 {
        self.events.front().map_or(self.last_seq + 1, |e| e.seq)
    }

    /// Up to `limit` events with sequence >= `from` (0 = the oldest retained).
    pub fn since(&self, from: u64, limit: usize) -> Result<Vec<Event>, CursorExpired> {
        let oldest = self.oldest_seq();
        let from = if from == 0 { oldest } else { from };
        // Events before `oldest` were dropped: resuming there would silently skip some.
        if from < oldest {
            return Err(CursorExpired { oldest });
        }
        let skip = from.saturating_sub(oldest) as usize;
        Ok(self.events.iter().skip(skip).take(limit).cloned().collect())
    }

    /// The retained deadlock that chose `victim`, for its error detail. A transaction is
    /// aborted at most once, so the newest match is the only one.
    pub fn deadlock_of(&self, victim: TxnId) -> Option<(&[CycleMember], VictimPolicy)> {
        self.events.iter().rev().find_map(|e| match &e.detail {
            EventDetail::DeadlockResolved { cycle, victim: v, policy } if *v == victim => Some((&cycle[..], *policy)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revoked(n: u64) -> EventDetail {
        EventDetail::LockRevoked {
            txn: n,
            lock: LockKey::new("ns", "k"),
            held: Held { mode: LockMode::Exclusive, token: super::super::types::FencingToken(n), since_ms: 0 },
            cause: EndCause::LeaseExpired.describe().into(),
        }
    }

    #[test]
    fn cursors_resume_without_gaps_and_expire_past_retention() {
        let mut log = EventLog::default();
        assert_eq!(log.since(0, 10).unwrap(), vec![]);
        for i in 1..=3 {
            log.push(i, revoked(i));
        }
        let seqs = |v: Vec<Event>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(log.since(0, 10).unwrap()), vec![1, 2, 3]);
        assert_eq!(seqs(log.since(2, 10).unwrap()), vec![2, 3]);
        assert_eq!(seqs(log.since(4, 10).unwrap()), Vec::<u64>::new());
        for i in 4..=(MAX_EVENTS as u64 + 5) {
            log.push(i, revoked(i));
        }
        assert_eq!(log.oldest_seq(), 6);
        assert_eq!(log.since(3, 10), Err(CursorExpired { oldest: 6 }));
        assert_eq!(seqs(log.since(6, 2).unwrap()), vec![6, 7]);
    }

    #[test]
    fn the_deadlock_of_a_victim_is_found_while_retained() {
        let mut log = EventLog::default();
        let member = |txn| CycleMember {
            txn,
            name: String::new(),
            priority: 0,
            lock: LockKey::new("ns", format!("k{txn}")),
            mode: LockMode::Exclusive,
        };
        let cycle = vec![member(1), member(2)];
        log.push(1, EventDetail::DeadlockResolved { cycle: cycle.clone(), victim: 2, policy: VictimPolicy::Youngest });
        log.push(2, revoked(2));
        assert_eq!(log.deadlock_of(2), Some((&cycle[..], VictimPolicy::Youngest)));
        assert_eq!(log.deadlock_of(1), None);
        for i in 0..MAX_EVENTS as u64 {
            log.push(3 + i, revoked(i));
        }
        assert_eq!(log.deadlock_of(2), None, "forgotten with the event");
    }
}

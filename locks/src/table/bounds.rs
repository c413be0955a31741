//! Bounded transactions: a maximum duration set at begin, after which the leader ends the
//! transaction (`Command::EndOverdue`) however its lease is renewed.
//!
//! The deadlines are not part of the table's serde form: snapshots written before they
//! existed must keep decoding. Snapshot files carry them as a named section after the
//! table (see [`LockTable::sections`]); a file without the section has no bounded
//! transactions.

use std::collections::BTreeMap;

use super::super::command::{Begin, BeginOption, Outcome, Rejection};
use super::super::events::EventDetail;
use super::super::types::{EndCause, TxnId, TxnState};
use super::{Effect, LockTable};

/// The section name of the deadlines in snapshot files.
const DEADLINES: &str = "txn-deadlines";

impl LockTable {
    /// A begin with options. Returns the transaction and its lease (a retried begin finds
    /// the transaction it started, options unchanged).
    pub(super) fn begin_with(&mut self, begin: &Begin, options: &[BeginOption]) -> (TxnId, u64) {
        let fresh = begin.request_id.as_ref().is_none_or(|r| !self.knows_begin(r));
        let (txn, lease_ms) =
            self.begin(begin.request_id.clone(), begin.lease_ms, begin.priority, &begin.name, &begin.owner);
        if fresh {
            for option in options {
                match option {
                    BeginOption::MaxDurationMs(ms) => {
                        let deadline_ms = self.clock_ms.saturating_add(*ms);
                        self.deadlines.insert(txn, deadline_ms);
                        self.effects.push(Effect::DeadlineSet { txn, deadline_ms });
                    }
                }
            }
        }
        (txn, lease_ms)
    }

    /// Ends `txn` if its deadline has passed by the log's clock; otherwise nothing (a
    /// leader whose clock ran ahead proposed it early: it asks again later).
    pub(super) fn end_overdue(&mut self, txn: TxnId) -> Outcome {
        let t = match self.active(txn) {
            Ok(t) => t,
            Err(r) => return Outcome::Rejected(r),
        };
        let Some(&deadline) = self.deadlines.get(&txn) else { return Outcome::None };
        if self.clock_ms < deadline {
            return Outcome::None;
        }
        let max = deadline.saturating_sub(t.begun_at_ms);
        let (name, released) = self.held_by(txn);
        self.events.push(self.clock_ms, EventDetail::TransactionExpired { txn, name, released });
        let why = format!("max duration of {max} ms exceeded");
        let count = self.finish(txn, EndCause::MaxDurationExceeded, &why).len() as u32;
        Outcome::Ended { state: TxnState::Expired, released: count }
    }

    /// When bounded transaction `txn` ends (ms since the epoch, the leaders' clocks).
    pub fn deadline(&self, txn: TxnId) -> Option<u64> {
        self.deadlines.get(&txn).copied()
    }

    /// Every bounded active transaction with its deadline.
    pub fn deadlines(&self) -> impl Iterator<Item = (TxnId, u64)> + '_ {
        self.deadlines.iter().map(|(t, d)| (*t, *d))
    }

    /// The deadlines as a snapshot section.
    pub(super) fn deadlines_section(&self) -> (String, Vec<u8>) {
        let deadlines = bincode::serialize(&self.deadlines).expect("a map of integers encodes");
        (DEADLINES.to_string(), deadlines)
    }

    /// Restores section `name` if it holds the deadlines; false if it does not.
    pub(super) fn restore_deadlines(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        if name != DEADLINES {
            return Ok(false);
        }
        self.deadlines = bincode::deserialize::<BTreeMap<TxnId, u64>>(bytes)
            .map_err(|e| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}")))?;
        Ok(true)
    }
}

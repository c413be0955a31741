//! What each request of a transaction turned into, kept so a retry with the same request
//! id gets the same answer; and the bound that keeps a long-lived transaction using fresh
//! request ids from growing without end.
//!
//! Past [`MAX_REQUEST_RECORDS`] the oldest *settled* record is forgotten: a release, an
//! acquire whose wait ended, or a grant of a lock the transaction no longer holds with
//! that token. Only if none is settled, the oldest grant of a lock still held goes: a retry
//! of it is answered the same anyway, since re-acquiring a held lock returns the existing
//! grant and token. The record of the pending wait is never forgotten (its stream and its
//! re-attach read it). Forgetting happens inside apply and depends only on the log (the
//! age of a record is a table-wide counter), so every replica forgets the same records:
//! refusing instead would make a healthy long-lived transaction fail for doing its work.
//!
//! Once anything was forgotten the log keeps a marker, so tenancy checks that rely on
//! every namespace a transaction ever asked for know its history is no longer complete.

use serde::{Deserialize, Serialize};

use super::queue::Slot;
use super::types::{FencingToken, Grant, Held, LockKey, LockMode, WaitEnd};
use super::vec_map::VecMap;

/// Records kept per transaction. A retry is answered from its record while fewer than this
/// many newer requests of the same transaction have been recorded; a client retries one
/// request for seconds, and a transaction rarely has more than a few in flight.
pub const MAX_REQUEST_RECORDS: usize = 64;

/// What a transaction's request turned into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestRecord {
    Acquire {
        lock: LockKey,
        mode: LockMode,
        status: AcquireRecord,
    },
    Release {
        lock: LockKey,
        released: bool,
    },
    /// An all-or-nothing acquire of several locks (new variants go last: snapshots of
    /// older versions keep decoding).
    AcquireAll {
        locks: Vec<(LockKey, LockMode)>,
        status: AllRecord,
    },
    /// A downgrade and the hold it left (None: the lock was not held).
    Downgrade {
        lock: LockKey,
        held: Option<Held>,
    },
}

impl RequestRecord {
    /// Every lock the request names.
    pub fn locks(&self) -> impl Iterator<Item = &LockKey> {
        let (one, many) = match self {
            RequestRecord::Acquire { lock, .. }
            | RequestRecord::Release { lock, .. }
            | RequestRecord::Downgrade { lock, .. } => (Some(lock), &[][..]),
            RequestRecord::AcquireAll { locks, .. } => (None, &locks[..]),
        };
        one.into_iter().chain(many.iter().map(|(l, _)| l))
    }
}

/// The stored part of an all-or-nothing acquire's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllRecord {
    /// Queued in each of these keys' queues (the locks not already held in a covering
    /// mode), all slots under the same ticket.
    Waiting {
        queued: Vec<(LockKey, Slot)>,
    },
    Granted(Vec<Grant>),
    Ended(WaitEnd),
}

/// The stored part of an acquire's status; a queue position is computed on read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcquireRecord {
    Waiting,
    Granted { token: FencingToken, mode: LockMode },
    Ended(WaitEnd),
}

/// A record and its age (larger = newer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Stored", into = "Stored")]
pub struct Recorded {
    seq: u64,
    record: RequestRecord,
}

/// How a record is stored. Snapshots written before records had an age hold the first two
/// variants (laid out exactly as `RequestRecord`'s); they read back as the oldest records.
#[derive(Clone, Serialize, Deserialize)]
enum Stored {
    Acquire { lock: LockKey, mode: LockMode, status: AcquireRecord },
    Release { lock: LockKey, released: bool },
    Aged { seq: u64, record: RequestRecord },
}

impl From<Stored> for Recorded {
    fn from(s: Stored) -> Recorded {
        match s {
            Stored::Acquire { lock, mode, status } => {
                Recorded { seq: 0, record: RequestRecord::Acquire { lock, mode, status } }
            }
            Stored::Release { lock, released } => {
                Recorded { seq: 0, record: RequestRecord::Release { lock, released } }
            }
            Stored::Aged { seq, record } => Recorded { seq, record },
        }
    }
}

impl From<Recorded> for Stored {
    fn from(r: Recorded) -> Stored {
        Stored::Aged { seq: r.seq, record: r.record }
    }
}

/// How readily a record may be forgotten: settled first, then grants still held; the
/// pending wait never (`None`).
fn eviction_class(record: &RequestRecord, held: &VecMap<LockKey, Held>) -> Option<u8> {
    match record {
        RequestRecord::Release { .. }
        | RequestRecord::Downgrade { .. }
        | RequestRecord::Acquire { status: AcquireRecord::Ended(_), .. } => Some(0),
        RequestRecord::Acquire { lock, status: AcquireRecord::Granted { token, .. }, .. } => {
            Some(if held.get(lock).is_some_and(|h| h.token == *token) { 1 } else { 0 })
        }
        RequestRecord::Acquire { status: AcquireRecord::Waiting, .. } => None,
        RequestRecord::AcquireAll { status: AllRecord::Ended(_), .. } => Some(0),
        RequestRecord::AcquireAll { status: AllRecord::Granted(grants), .. } => {
            let all_held = grants.iter().all(|g| held.get(&g.lock).is_some_and(|h| h.token == g.token));
            Some(if all_held { 1 } else { 0 })
        }
        RequestRecord::AcquireAll { status: AllRecord::Waiting { .. }, .. } => None,
    }
}

/// The key of the marker entry kept once records were forgotten: no request id is empty,
/// so it never collides with a request, and it keeps the stored format a plain map.
const FORGOT: &str = "";

/// One transaction's request records by request id. Serialized as the map it wraps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestLog(VecMap<String, Recorded>);

impl RequestLog {
    pub fn get(&self, request_id: &str) -> Option<&RequestRecord> {
        self.0.get(request_id).filter(|_| request_id != FORGOT).map(|r| &r.record)
    }

    pub fn get_mut(&mut self, request_id: &str) -> Option<&mut RequestRecord> {
        self.0.get_mut(request_id).filter(|_| request_id != FORGOT).map(|r| &mut r.record)
    }

    /// Every remembered record, by request id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &RequestRecord)> {
        self.0.iter().filter(|(id, _)| id.as_str() != FORGOT).map(|(id, r)| (id, &r.record))
    }

    pub fn len(&self) -> usize {
        self.0.len() - usize::from(self.forgot_any())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether older records were forgotten: [`RequestLog::iter`] is then not the whole
    /// history of the transaction.
    pub fn forgot_any(&self) -> bool {
        self.0.contains_key(FORGOT)
    }

    /// Records `record` as the newest (`seq` from the table's counter), then forgets the
    /// oldest records beyond [`MAX_REQUEST_RECORDS`] (see the module doc).
    pub fn insert(&mut self, request_id: String, seq: u64, record: RequestRecord, held: &VecMap<LockKey, Held>) {
        self.0.insert(request_id, Recorded { seq, record });
        while self.len() > MAX_REQUEST_RECORDS {
            let oldest = self
                .0
                .iter()
                .filter(|(id, _)| id.as_str() != FORGOT)
                .filter_map(|(id, r)| Some(((eviction_class(&r.record, held)?, r.seq), id)))
                .min()
                .map(|(_, id)| id.clone());
            let Some(id) = oldest else { break };
            self.0.remove(&id);
            if !self.forgot_any() {
                let marker = RequestRecord::Release { lock: LockKey::new("", ""), released: false };
                self.0.insert(FORGOT.to_string(), Recorded { seq: 0, record: marker });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(key: &str) -> RequestRecord {
        RequestRecord::Release { lock: LockKey::new("ns", key), released: true }
    }

    fn granted(key: &str, token: u64) -> RequestRecord {
        let status = AcquireRecord::Granted { token: FencingToken(token), mode: LockMode::Exclusive };
        RequestRecord::Acquire { lock: LockKey::new("ns", key), mode: LockMode::Exclusive, status }
    }

    #[test]
    fn settled_records_go_first_then_held_grants_never_the_wait() {
        let mut held = VecMap::new();
        held.insert(
            LockKey::new("ns", "kept"),
            Held { mode: LockMode::Exclusive, token: FencingToken(1), since_ms: 0 },
        );
        let mut log = RequestLog::default();
        let waiting = RequestRecord::Acquire {
            lock: LockKey::new("ns", "w"),
            mode: LockMode::Exclusive,
            status: AcquireRecord::Waiting,
        };
        log.insert("wait".into(), 1, waiting.clone(), &held);
        log.insert("grant".into(), 2, granted("kept", 1), &held);
        for i in 0..MAX_REQUEST_RECORDS as u64 {
            log.insert(format!("r{i}"), 10 + i, release("x"), &held);
        }
        assert_eq!(log.len(), MAX_REQUEST_RECORDS);
        assert!(log.forgot_any() && log.iter().all(|(id, _)| !id.is_empty()));
        assert!(log.get("").is_none());
        // The two oldest releases went; the wait and the older held grant stay.
        assert!(log.get("r1").is_none() && log.get("r2").is_some());
        assert_eq!(log.get("wait"), Some(&waiting));
        assert!(log.get("grant").is_some());
        // Once nothing settled is left, held grants go, oldest first; never the wait.
        let mut log = RequestLog::default();
        log.insert("wait".into(), 1, waiting.clone(), &held);
        for i in 0..MAX_REQUEST_RECORDS as u64 + 5 {
            log.insert(format!("g{i}"), 10 + i, granted("kept", 1), &held);
        }
        assert_eq!(log.len(), MAX_REQUEST_RECORDS);
        assert!(log.get("wait").is_some() && log.get("g5").is_none() && log.get("g6").is_some());
    }

    #[test]
    fn records_of_snapshots_without_ages_still_decode() {
        let old: VecMap<String, RequestRecord> = [("a".to_string(), release("x"))].into_iter().collect();
        let bytes = bincode::serialize(&old).unwrap();
        let log: RequestLog = bincode::deserialize(&bytes).unwrap();
        assert_eq!(log.get("a"), Some(&release("x")));
        assert!(!log.forgot_any());
        let again: RequestLog = bincode::deserialize(&bincode::serialize(&log).unwrap()).unwrap();
        assert_eq!(again, log);
    }
}

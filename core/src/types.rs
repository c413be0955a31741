//! Public value types and their conversions to and from the wire messages.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use caerus_proto::v1 as pb;

use crate::error::{Error, Result};

/// How a lock is held. Two holders of one key are compatible only if both are `SharedRead`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Write lock: one holder at a time, no readers beside it.
    Exclusive,
    /// Read lock: any number of readers at once, no writer beside them.
    SharedRead,
}

impl LockMode {
    /// The wire name: `"EXCLUSIVE"` or `"SHARED_READ"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LockMode::Exclusive => "EXCLUSIVE",
            LockMode::SharedRead => "SHARED_READ",
        }
    }

    pub(crate) fn to_proto(self) -> i32 {
        match self {
            LockMode::Exclusive => pb::LockMode::Exclusive as i32,
            LockMode::SharedRead => pb::LockMode::SharedRead as i32,
        }
    }

    pub(crate) fn from_proto(value: i32) -> Result<Self> {
        match pb::LockMode::try_from(value) {
            Ok(pb::LockMode::Exclusive) => Ok(LockMode::Exclusive),
            Ok(pb::LockMode::SharedRead) => Ok(LockMode::SharedRead),
            _ => Err(Error::internal(format!("server sent an unknown lock mode {value}"))),
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LockMode {
    type Err = Error;

    /// Accepts `EXCLUSIVE`, `SHARED_READ`, `SHARED` and `SHARED-READ`, in any case.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "EXCLUSIVE" => Ok(LockMode::Exclusive),
            "SHARED_READ" | "SHARED" | "SHARED-READ" => Ok(LockMode::SharedRead),
            _ => Err(Error::invalid_argument(format!("unknown lock mode {s:?} (expected EXCLUSIVE or SHARED_READ)"))),
        }
    }
}

/// A lock held by a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key inside the namespace.
    pub key: String,
    /// The mode held (may be stronger than asked: EXCLUSIVE when the transaction already
    /// held the key exclusively).
    pub mode: LockMode,
    /// Cluster-wide strictly increasing token of this grant. Hand it to the storage you
    /// write to and have it reject writes carrying a lower token.
    pub fencing_token: u64,
}

impl TryFrom<pb::Granted> for Lock {
    type Error = Error;
    fn try_from(g: pb::Granted) -> Result<Self> {
        Ok(Lock {
            mode: LockMode::from_proto(g.mode)?,
            namespace: g.namespace,
            key: g.key,
            fencing_token: g.fencing_token,
        })
    }
}

impl TryFrom<pb::HeldLock> for Lock {
    type Error = Error;
    fn try_from(h: pb::HeldLock) -> Result<Self> {
        Ok(Lock {
            mode: LockMode::from_proto(h.mode)?,
            namespace: h.namespace,
            key: h.key,
            fencing_token: h.fencing_token,
        })
    }
}

/// Where a waiting lock request stands in its key's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuePosition {
    /// 1 = next in line.
    pub position: u32,
    /// Transactions this request waits for (holders and earlier waiters).
    pub blocking_transaction_ids: Vec<u64>,
}

impl From<pb::Queued> for QueuePosition {
    fn from(q: pb::Queued) -> Self {
        QueuePosition { position: q.position, blocking_transaction_ids: q.blocking_transaction_ids }
    }
}

/// State of a transaction. `Active` is the only live one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// Running; may acquire and hold locks.
    Active,
    /// Ended by commit; its locks were released.
    Committed,
    /// Ended by abort (by the client, or by the server e.g. as a deadlock victim).
    Aborted,
    /// Its lease lapsed; the server released its locks.
    Expired,
}

impl TransactionState {
    /// The wire name, e.g. `"ACTIVE"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            TransactionState::Active => "ACTIVE",
            TransactionState::Committed => "COMMITTED",
            TransactionState::Aborted => "ABORTED",
            TransactionState::Expired => "EXPIRED",
        }
    }

    pub(crate) fn from_proto(value: i32) -> Result<Self> {
        match pb::TransactionState::try_from(value) {
            Ok(pb::TransactionState::Active) => Ok(TransactionState::Active),
            Ok(pb::TransactionState::Committed) => Ok(TransactionState::Committed),
            Ok(pb::TransactionState::Aborted) => Ok(TransactionState::Aborted),
            Ok(pb::TransactionState::Expired) => Ok(TransactionState::Expired),
            _ => Err(Error::internal(format!("server sent an unknown transaction state {value}"))),
        }
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lock request that is waiting in a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLock {
    /// The requested lock's namespace.
    pub namespace: String,
    /// The requested lock's key.
    pub key: String,
    /// The requested mode.
    pub mode: LockMode,
    /// 1 = next in line.
    pub position: u32,
    /// The request id of the waiting acquire call.
    pub request_id: String,
}

impl TryFrom<pb::PendingLock> for PendingLock {
    type Error = Error;
    fn try_from(p: pb::PendingLock) -> Result<Self> {
        Ok(PendingLock {
            mode: LockMode::from_proto(p.mode)?,
            namespace: p.namespace,
            key: p.key,
            position: p.position,
            request_id: p.request_id,
        })
    }
}

/// A transaction as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionStatus {
    /// The transaction id.
    pub id: u64,
    /// Its current state.
    pub state: TransactionState,
    /// Its label from begin, if it was given one.
    pub name: Option<String>,
    /// Its deadlock-victim priority.
    pub priority: i32,
    /// Its lease length in milliseconds.
    pub lease_timeout_ms: u64,
    /// Milliseconds left on the lease (0 when not active).
    pub lease_remaining_ms: u64,
    /// Locks held now (empty once ended).
    pub locks: Vec<Lock>,
    /// The pending lock request, if it is waiting.
    pub waiting: Option<PendingLock>,
    /// Why a finished transaction ended, e.g. "committed", "lease expired"; empty while active.
    pub end_reason: String,
}

impl TryFrom<pb::GetTransactionStatusResponse> for TransactionStatus {
    type Error = Error;
    fn try_from(r: pb::GetTransactionStatusResponse) -> Result<Self> {
        Ok(TransactionStatus {
            id: r.transaction_id,
            state: TransactionState::from_proto(r.state)?,
            name: Some(r.name).filter(|n| !n.is_empty()),
            priority: r.priority,
            lease_timeout_ms: non_negative(r.lease_timeout_ms),
            lease_remaining_ms: non_negative(r.lease_remaining_ms),
            locks: r.locks.into_iter().map(Lock::try_from).collect::<Result<_>>()?,
            waiting: r.waiting.map(PendingLock::try_from).transpose()?,
            end_reason: r.end_reason,
        })
    }
}

fn non_negative(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Why a transaction was lost: the server no longer holds (or may no longer hold) its locks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostReason {
    /// What kind of loss.
    pub kind: LostKind,
    /// Details, including the server's message when there is one.
    pub message: String,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Kinds of transaction loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostKind {
    /// The server expired the lease.
    Expired,
    /// The transaction was aborted by someone other than this handle.
    Aborted,
    /// The server aborted it to break a deadlock.
    DeadlockVictim,
    /// Heartbeats went unacknowledged for a whole lease: the server may have expired it,
    /// so the client must assume it did.
    LeaseUnconfirmed,
    /// The server does not know the transaction.
    NotFound,
}

impl LostKind {
    /// Stable SCREAMING_SNAKE name, e.g. `"LEASE_UNCONFIRMED"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LostKind::Expired => "EXPIRED",
            LostKind::Aborted => "ABORTED",
            LostKind::DeadlockVictim => "DEADLOCK_VICTIM",
            LostKind::LeaseUnconfirmed => "LEASE_UNCONFIRMED",
            LostKind::NotFound => "NOT_FOUND",
        }
    }

    /// Guesses the kind from a server message such as "transaction 7 is EXPIRED (lease
    /// expired)"; `None` when the message does not say.
    ///
    /// The server's own phrase comes before any text an operator gave as an abort reason
    /// (`... ABORTED (aborted by operator "ops": stuck lease)`), so the earliest phrase
    /// found decides.
    pub(crate) fn from_message(message: &str) -> Option<LostKind> {
        const PHRASES: [(&str, LostKind); 5] = [
            ("deadlock victim", LostKind::DeadlockVictim),
            ("aborted by", LostKind::Aborted),
            ("expired", LostKind::Expired),
            ("lease", LostKind::Expired),
            ("deadlock", LostKind::DeadlockVictim),
        ];
        let m = message.to_ascii_lowercase();
        PHRASES
            .iter()
            .filter_map(|(phrase, kind)| m.find(phrase).map(|at| (at, *kind)))
            .min_by_key(|(at, _)| *at)
            .map(|(_, kind)| kind)
            .or_else(|| m.contains("abort").then_some(LostKind::Aborted))
    }

    /// The kind a finished server state stands for; `None` while active.
    pub(crate) fn from_final_state(state: TransactionState, end_reason: &str) -> Option<LostKind> {
        match state {
            TransactionState::Active => None,
            TransactionState::Expired => Some(LostKind::Expired),
            // The server's reason starts with the phrase; an operator's reason comes after
            // "aborted by operator" and cannot pass for it.
            TransactionState::Aborted if end_reason.trim_start().to_ascii_lowercase().starts_with("deadlock") => {
                Some(LostKind::DeadlockVictim)
            }
            // A commit by another handle of the same transaction never reaches here (the
            // handle knows it is ending); a foreign commit is, for this holder, an abort.
            TransactionState::Aborted | TransactionState::Committed => Some(LostKind::Aborted),
        }
    }
}

impl fmt::Display for LostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of [`DlsClient::begin_transaction`](crate::DlsClient::begin_transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionOptions {
    /// Lease length in milliseconds (100..=3600000); the client heartbeats every third of it.
    /// Default 15000.
    pub timeout_ms: u64,
    /// Deadlock-victim preference: higher is less likely to be aborted. Default 0.
    pub priority: i32,
    /// Label shown in status and server events, at most 256 bytes.
    pub name: Option<String>,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions { timeout_ms: 15_000, priority: 0, name: None }
    }
}

impl TransactionOptions {
    /// Default options: 15 s lease, priority 0, no name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the lease length in milliseconds.
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Sets the lease length (rounded down to milliseconds).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.with_timeout_ms(duration_ms(timeout))
    }

    /// Sets the deadlock-victim priority.
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the label.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// Options of [`Transaction::acquire_lock`](crate::Transaction::acquire_lock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    /// How long to wait in the queue, in milliseconds (1..=3600000). Default 10000.
    pub timeout_ms: u64,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        AcquireOptions { timeout_ms: 10_000 }
    }
}

impl AcquireOptions {
    /// Default options: wait up to 10 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the wait timeout in milliseconds.
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Sets the wait timeout (rounded down to milliseconds).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.with_timeout_ms(duration_ms(timeout))
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds as the wire's `int64`, refusing values that would wrap negative.
pub(crate) fn ms_to_wire(field: &str, ms: u64) -> Result<i64> {
    i64::try_from(ms).map_err(|_| Error::invalid_argument(format!("{field} {ms} ms is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_mode_parsing() {
        for s in ["EXCLUSIVE", "exclusive", "Exclusive", " exclusive "] {
            assert_eq!(s.parse::<LockMode>().unwrap(), LockMode::Exclusive, "{s}");
        }
        for s in ["SHARED_READ", "shared_read", "shared", "SHARED", "shared-read"] {
            assert_eq!(s.parse::<LockMode>().unwrap(), LockMode::SharedRead, "{s}");
        }
        for s in ["", "read", "write", "LOCK_MODE_UNSPECIFIED", "exclusive2"] {
            let err = s.parse::<LockMode>().unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{s}");
        }
    }

    #[test]
    fn lock_mode_round_trip() {
        for m in [LockMode::Exclusive, LockMode::SharedRead] {
            assert_eq!(LockMode::from_proto(m.to_proto()).unwrap(), m);
            assert_eq!(m.to_string().parse::<LockMode>().unwrap(), m);
        }
        assert!(LockMode::from_proto(0).is_err());
        assert!(LockMode::from_proto(99).is_err());
    }

    #[test]
    fn status_conversion() {
        let r = pb::GetTransactionStatusResponse {
            transaction_id: 7,
            state: pb::TransactionState::Active as i32,
            name: String::new(),
            priority: 3,
            lease_timeout_ms: 15000,
            lease_remaining_ms: -5,
            locks: vec![pb::HeldLock {
                namespace: "ns".into(),
                key: "k".into(),
                mode: pb::LockMode::SharedRead as i32,
                fencing_token: 42,
            }],
            waiting: Some(pb::PendingLock {
                namespace: "ns".into(),
                key: "k2".into(),
                mode: pb::LockMode::Exclusive as i32,
                position: 2,
                request_id: "r".into(),
            }),
            end_reason: String::new(),
        };
        let s = TransactionStatus::try_from(r).unwrap();
        assert_eq!(s.id, 7);
        assert_eq!(s.state, TransactionState::Active);
        assert_eq!(s.name, None);
        assert_eq!(s.lease_remaining_ms, 0);
        assert_eq!(s.locks[0].fencing_token, 42);
        assert_eq!(s.locks[0].mode, LockMode::SharedRead);
        assert_eq!(s.waiting.unwrap().position, 2);
    }

    #[test]
    fn lost_kind_from_message_and_state() {
        assert_eq!(
            LostKind::from_message("transaction 4 is not active (EXPIRED: lease expired)"),
            Some(LostKind::Expired)
        );
        assert_eq!(LostKind::from_message("aborted as a deadlock victim"), Some(LostKind::DeadlockVictim));
        assert_eq!(LostKind::from_message("transaction 4 is ABORTED"), Some(LostKind::Aborted));
        assert_eq!(LostKind::from_message("not active"), None);
        // What the server says to a victim's later calls, and to an acquire it ended.
        assert_eq!(
            LostKind::from_message(
                "transaction 5 is ABORTED (deadlock victim (policy oldest): cycle 5 waits for ns/a, 6 waits for ns/b)"
            ),
            Some(LostKind::DeadlockVictim)
        );
        assert_eq!(
            LostKind::from_message("transaction 5 was aborted as a deadlock victim (policy youngest): cycle ..."),
            Some(LostKind::DeadlockVictim)
        );
        // An operator's reason cannot pass for the server's phrase.
        assert_eq!(
            LostKind::from_message(r#"transaction 5 is ABORTED (aborted by operator "ops": deadlock victim lease)"#),
            Some(LostKind::Aborted)
        );
        assert_eq!(
            LostKind::from_message("transaction 5 ended while waiting: EXPIRED (lease expired)"),
            Some(LostKind::Expired)
        );
        assert_eq!(
            LostKind::from_message("transaction 5's lease lapsed; its expiry is being committed"),
            Some(LostKind::Expired)
        );
        assert_eq!(
            LostKind::from_final_state(TransactionState::Aborted, r#"aborted by operator "x": deadlock"#),
            Some(LostKind::Aborted)
        );
        assert_eq!(
            LostKind::from_final_state(TransactionState::Aborted, "deadlock victim"),
            Some(LostKind::DeadlockVictim)
        );
        assert_eq!(LostKind::from_final_state(TransactionState::Expired, ""), Some(LostKind::Expired));
        assert_eq!(LostKind::from_final_state(TransactionState::Active, ""), None);
    }

    #[test]
    fn option_defaults_and_builders() {
        let t = TransactionOptions::default();
        assert_eq!((t.timeout_ms, t.priority, t.name), (15_000, 0, None));
        let t = TransactionOptions::new().with_timeout(Duration::from_secs(3)).with_priority(5).with_name("w");
        assert_eq!(t.timeout_ms, 3000);
        assert_eq!(t.priority, 5);
        assert_eq!(t.name.as_deref(), Some("w"));
        assert_eq!(AcquireOptions::default().timeout_ms, 10_000);
        assert_eq!(AcquireOptions::new().with_timeout_ms(5).timeout_ms, 5);
        assert!(ms_to_wire("timeout_ms", u64::MAX).is_err());
    }
}

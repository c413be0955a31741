//! Public value types and their conversions to and from the wire messages.

use std::fmt;
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::Wire;

use crate::error::{Error, Result};

/// The modes, states and end causes the server, this client and every binding share
/// (declared once, in `caerus-types`).
pub use caerus_types::{EndCause, LockMode, TransactionState};

impl From<caerus_types::ParseError> for Error {
    fn from(e: caerus_types::ParseError) -> Self {
        Error::invalid_argument(e.0)
    }
}

/// A wire enum field the server must have set to a known value.
pub(crate) fn required<T: Wire>(what: &str, raw: i32) -> Result<T> {
    T::from_wire(raw).ok_or_else(|| Error::internal(format!("server sent an unknown {what} {raw}")))
}

/// A lock held by a transaction.
#[cfg_attr(feature = "pyo3", pyo3::pyclass(frozen, get_all, module = "caerus"))]
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
            mode: required("lock mode", g.mode)?,
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
            mode: required("lock mode", h.mode)?,
            namespace: h.namespace,
            key: h.key,
            fencing_token: h.fencing_token,
        })
    }
}

// No rustdoc links in the docs of a Python class: they are its docstrings too.
/// The answer of `DlsClient::verify_fencing_token`.
#[cfg_attr(feature = "pyo3", pyo3::pyclass(frozen, get_all, module = "caerus"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenCheck {
    /// Whether the token is held on the key right now.
    pub current: bool,
    /// The tokens of the key's current holders (several for SHARED_READ, none when free).
    pub current_tokens: Vec<u64>,
}

/// One lock of an all-or-nothing [`acquire_locks`](crate::Transaction::acquire_locks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRequest {
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key inside the namespace.
    pub key: String,
    /// The mode asked for.
    pub mode: LockMode,
}

impl LockRequest {
    /// A request for `namespace`/`key` in `mode`.
    pub fn new(namespace: impl Into<String>, key: impl Into<String>, mode: LockMode) -> Self {
        LockRequest { namespace: namespace.into(), key: key.into(), mode }
    }

    /// An EXCLUSIVE request.
    pub fn exclusive(namespace: impl Into<String>, key: impl Into<String>) -> Self {
        Self::new(namespace, key, LockMode::Exclusive)
    }

    /// A SHARED_READ request.
    pub fn shared(namespace: impl Into<String>, key: impl Into<String>) -> Self {
        Self::new(namespace, key, LockMode::SharedRead)
    }
}

/// Where a waiting lock request stands in its key's queue.
#[cfg_attr(feature = "pyo3", pyo3::pyclass(frozen, get_all, module = "caerus"))]
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

/// A lock request that is waiting in a queue.
// Python sees every field but the request id, which is the client's business (getters in
// python.rs).
#[cfg_attr(feature = "pyo3", pyo3::pyclass(frozen, module = "caerus"))]
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
            mode: required("lock mode", p.mode)?,
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
    /// Why a finished transaction ended, in words, e.g. "committed", "lease expired"; empty
    /// while active.
    pub end_reason: String,
    /// What ended it; `None` while active (or from a server older than this field).
    pub end_cause: Option<EndCause>,
}

impl TryFrom<pb::GetTransactionStatusResponse> for TransactionStatus {
    type Error = Error;
    fn try_from(r: pb::GetTransactionStatusResponse) -> Result<Self> {
        Ok(TransactionStatus {
            id: r.transaction_id,
            state: required("transaction state", r.state)?,
            name: Some(r.name).filter(|n| !n.is_empty()),
            priority: r.priority,
            lease_timeout_ms: non_negative(r.lease_timeout_ms),
            lease_remaining_ms: non_negative(r.lease_remaining_ms),
            locks: r.locks.into_iter().map(Lock::try_from).collect::<Result<_>>()?,
            waiting: r.waiting.map(PendingLock::try_from).transpose()?,
            end_reason: r.end_reason,
            end_cause: EndCause::from_wire(r.end_cause),
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
    /// What ended the transaction on the server, when the server said so: `None` for a
    /// lease this client could not confirm, or a transaction the server no longer knows.
    /// Kept apart from `kind`, which folds a lapsed lease and a reached maximum duration
    /// into `Expired`.
    pub end_cause: Option<EndCause>,
}

impl LostReason {
    /// A loss the server explained: ended by `cause`.
    pub(crate) fn ended_by(cause: EndCause, message: impl Into<String>) -> LostReason {
        LostReason { kind: LostKind::from_cause(cause), message: message.into(), end_cause: Some(cause) }
    }

    /// A loss without a cause from the server (an unconfirmed lease, an unknown
    /// transaction, one ended by someone we cannot name).
    pub(crate) fn without_cause(kind: LostKind, message: impl Into<String>) -> LostReason {
        LostReason { kind, message: message.into(), end_cause: None }
    }
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

    /// What a transaction ended by `cause` is, for its holder. A commit by another handle
    /// of the same transaction never reaches here (the handle knows it is ending); a
    /// foreign commit is, for this holder, an abort.
    pub fn from_cause(cause: EndCause) -> LostKind {
        match cause {
            EndCause::LeaseExpired | EndCause::MaxDurationExceeded => LostKind::Expired,
            EndCause::DeadlockVictim => LostKind::DeadlockVictim,
            EndCause::Committed | EndCause::ClientAbort | EndCause::OperatorAbort => LostKind::Aborted,
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
    /// Lease length in milliseconds (100..=3600000). The client heartbeats every third of
    /// the time it has before its lost signal (see `stop_grace_ms`). Default 15000.
    pub timeout_ms: u64,
    /// Deadlock-victim preference: higher is less likely to be aborted. Default 0.
    pub priority: i32,
    /// Label shown in status and server events, at most 256 bytes.
    pub name: Option<String>,
    /// The longest the transaction may live, in milliseconds (100..=604800000), however its
    /// lease is renewed: past it the server ends it (lost with cause
    /// [`EndCause::MaxDurationExceeded`]) and releases its locks. `None` (default): no bound.
    pub max_duration_ms: Option<u64>,
    /// Learn at once that the server ended the transaction (lease expired, deadlock victim,
    /// operator abort, maximum duration) instead of at the next heartbeat: acquires keep
    /// their stream open after the grant (`stay_open`) and the lost signal fires as soon as
    /// the server reports the end. Costs one open stream per transaction while it holds
    /// locks. Heartbeats run as before and stay the authority (the stream ends without a
    /// signal on a leader change). Default false.
    pub lost_stream: bool,
    /// How long the holder needs to stop its work once told the lock is lost, in
    /// milliseconds: the lost signal fires this much before the renew deadline, so the
    /// signal plus this grace still ends a margin before the server can expire the lease
    /// ([`LeaseBudget`](crate::LeaseBudget)). At most
    /// [`LeaseBudget::max_stop_grace`](crate::LeaseBudget::max_stop_grace) of the lease
    /// (`INVALID_ARGUMENT` otherwise, before anything is sent). Default 0.
    pub stop_grace_ms: u64,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions {
            timeout_ms: 15_000,
            priority: 0,
            name: None,
            max_duration_ms: None,
            lost_stream: false,
            stop_grace_ms: 0,
        }
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

    /// Bounds the transaction's life to `max_duration_ms` from its begin (see the field).
    pub fn with_max_duration_ms(mut self, max_duration_ms: u64) -> Self {
        self.max_duration_ms = Some(max_duration_ms);
        self
    }

    /// Turns the lost stream on or off (see the field).
    pub fn with_lost_stream(mut self, lost_stream: bool) -> Self {
        self.lost_stream = lost_stream;
        self
    }

    /// Sets the holder's grace to stop after the lost signal (see the field).
    pub fn with_stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace_ms = duration_ms(grace);
        self
    }
}

/// Options of [`Transaction::acquire_lock`](crate::Transaction::acquire_lock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    /// How long to wait in the queue, in milliseconds (0..=3600000; 0 answers at once
    /// without queueing: a try-lock). Default 10000.
    pub timeout_ms: u64,
    /// W3C Trace Context of the caller's span (`traceparent`, optionally `tracestate`),
    /// sent with the acquire: a node exporting spans (`--otlp-endpoint`) makes its wait,
    /// grant and release spans children of it. The server ignores a malformed one.
    pub trace: Option<TraceParent>,
}

/// A W3C `traceparent` (`00-<trace id>-<parent span id>-<flags>`) and its `tracestate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The `traceparent` value, e.g. `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
    pub traceparent: String,
    /// The `tracestate` value (vendor data), passed along unchanged.
    pub tracestate: Option<String>,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        AcquireOptions { timeout_ms: 10_000, trace: None }
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

    /// Sends the caller's W3C trace context with the acquire (see [`AcquireOptions::trace`]).
    /// Values that are not valid in gRPC metadata are not sent.
    pub fn with_traceparent(mut self, traceparent: impl Into<String>, tracestate: Option<String>) -> Self {
        self.trace = Some(TraceParent { traceparent: traceparent.into(), tracestate });
        self
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
    fn lock_mode_parsing_errors_are_invalid_arguments() {
        for s in ["", "read", "write", "LOCK_MODE_UNSPECIFIED", "exclusive2"] {
            let err = Error::from(s.parse::<LockMode>().unwrap_err());
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{s}");
        }
        assert_eq!(required::<LockMode>("lock mode", 99).unwrap_err().code(), "INTERNAL");
        assert_eq!(required::<LockMode>("lock mode", LockMode::SharedRead.to_wire()).unwrap(), LockMode::SharedRead);
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
            end_cause: 0,
        };
        let s = TransactionStatus::try_from(r).unwrap();
        assert_eq!(s.id, 7);
        assert_eq!(s.state, TransactionState::Active);
        assert_eq!(s.name, None);
        assert_eq!(s.lease_remaining_ms, 0);
        assert_eq!(s.locks[0].fencing_token, 42);
        assert_eq!(s.locks[0].mode, LockMode::SharedRead);
        assert_eq!(s.waiting.unwrap().position, 2);
        assert_eq!(s.end_cause, None);
    }

    #[test]
    fn lost_kind_follows_the_end_cause() {
        assert_eq!(LostKind::from_cause(EndCause::LeaseExpired), LostKind::Expired);
        assert_eq!(LostKind::from_cause(EndCause::DeadlockVictim), LostKind::DeadlockVictim);
        for c in [EndCause::OperatorAbort, EndCause::ClientAbort, EndCause::Committed] {
            assert_eq!(LostKind::from_cause(c), LostKind::Aborted, "{c}");
        }
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

//! The value types every part of Caerus DLS shares: the server's lock table, the core
//! client and the language bindings name modes, states, end causes, victim policies and
//! error kinds with these, so each is declared once. Their wire forms are the enums of
//! `caerus.dls.v1` (proto/), which the server and the client convert to and from.
//!
//! The serde forms are part of the replicated log and snapshot format: variants are only
//! ever appended, never reordered or removed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A name that is not one of a type's values; the message lists the accepted ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

#[cfg(feature = "pyo3")]
mod python;

/// How a lock is held. Two holders of one key are compatible only if both are `SharedRead`.
/// In Python it is `caerus.LockMode` (`EXCLUSIVE`, `SHARED_READ`).
#[cfg_attr(
    feature = "pyo3",
    pyo3::pyclass(eq, eq_int, frozen, hash, from_py_object, module = "caerus", rename_all = "SCREAMING_SNAKE_CASE")
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockMode {
    /// Write lock: one holder at a time, no readers beside it.
    Exclusive,
    /// Read lock: any number of readers at once, no writer beside them.
    SharedRead,
    /// One permit of a counted semaphore: up to the key's declared number of holders at
    /// once, each with its own fencing token. A semaphore key takes no other mode. New
    /// modes go last: the table's snapshots encode modes by position.
    Semaphore,
}

impl LockMode {
    /// Whether a holder in `self` may coexist with a holder in `other`. Inlined across
    /// the crate boundary: the lock table calls it for every queued request it scans.
    #[inline]
    /// Semaphore permits are compatible with each other; how many may be held at once is
    /// the key's permit count, which the lock table enforces.
    pub fn compatible_with(self, other: LockMode) -> bool {
        matches!(
            (self, other),
            (LockMode::SharedRead, LockMode::SharedRead) | (LockMode::Semaphore, LockMode::Semaphore)
        )
    }

    /// Whether holding `self` already satisfies a request for `wanted`.
    #[inline]
    pub fn covers(self, wanted: LockMode) -> bool {
        match (self, wanted) {
            (LockMode::Semaphore, LockMode::Semaphore) => true,
            (LockMode::Semaphore, _) | (_, LockMode::Semaphore) => false,
            (LockMode::Exclusive, _) => true,
            (LockMode::SharedRead, w) => w == LockMode::SharedRead,
        }
    }

    /// The wire name: `"EXCLUSIVE"` or `"SHARED_READ"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Exclusive => "EXCLUSIVE",
            LockMode::SharedRead => "SHARED_READ",
            LockMode::Semaphore => "SEMAPHORE",
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LockMode {
    type Err = ParseError;

    /// Accepts `EXCLUSIVE`, `SHARED_READ`, `SHARED` and `SHARED-READ`, in any case.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_uppercase().as_str() {
            "EXCLUSIVE" => Ok(LockMode::Exclusive),
            "SHARED_READ" | "SHARED" | "SHARED-READ" => Ok(LockMode::SharedRead),
            "SEMAPHORE" => Ok(LockMode::Semaphore),
            _ => Err(ParseError(format!("unknown lock mode {s:?} (expected EXCLUSIVE, SHARED_READ or SEMAPHORE)"))),
        }
    }
}

/// State of a transaction. `Active` is the only live one; the others are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TransactionState {
    /// Running; may acquire and hold locks.
    Active,
    /// Ended by commit; its locks were released.
    Committed,
    /// Ended by abort (by the client, an operator, or the server as a deadlock victim).
    Aborted,
    /// Its lease lapsed; the server released its locks.
    Expired,
}

impl TransactionState {
    /// The wire name, e.g. `"ACTIVE"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransactionState::Active => "ACTIVE",
            TransactionState::Committed => "COMMITTED",
            TransactionState::Aborted => "ABORTED",
            TransactionState::Expired => "EXPIRED",
        }
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What ended a transaction. The server records it when the transaction ends and sends it
/// as data (status, errors, events), so no client has to read it out of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EndCause {
    /// EndTransaction(commit = true).
    Committed,
    /// EndTransaction(commit = false).
    ClientAbort,
    /// The lease lapsed without a heartbeat.
    LeaseExpired,
    /// Aborted by the server to break a wait-for cycle.
    DeadlockVictim,
    /// Aborted by an operator (AdminService.AbortTransaction).
    OperatorAbort,
    /// Ended by the server when its maximum duration (set at begin) passed, heartbeats or
    /// not. New causes go last: the table's snapshots encode causes by position.
    MaxDurationExceeded,
}

impl EndCause {
    /// The final state a transaction ended this way is in.
    #[inline]
    pub fn state(self) -> TransactionState {
        match self {
            EndCause::Committed => TransactionState::Committed,
            EndCause::LeaseExpired | EndCause::MaxDurationExceeded => TransactionState::Expired,
            EndCause::ClientAbort | EndCause::DeadlockVictim | EndCause::OperatorAbort => TransactionState::Aborted,
        }
    }

    /// Whether the server took the transaction's locks away (rather than the client giving
    /// them up): those releases are reported as revoked locks.
    #[inline]
    pub fn revokes(self) -> bool {
        matches!(
            self,
            EndCause::LeaseExpired | EndCause::DeadlockVictim | EndCause::OperatorAbort | EndCause::MaxDurationExceeded
        )
    }

    /// The wire name, e.g. `"LEASE_EXPIRED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndCause::Committed => "COMMITTED",
            EndCause::ClientAbort => "CLIENT_ABORT",
            EndCause::LeaseExpired => "LEASE_EXPIRED",
            EndCause::DeadlockVictim => "DEADLOCK_VICTIM",
            EndCause::OperatorAbort => "OPERATOR_ABORT",
            EndCause::MaxDurationExceeded => "MAX_DURATION_EXCEEDED",
        }
    }

    /// The cause in words, for messages and logs.
    pub fn describe(self) -> &'static str {
        match self {
            EndCause::Committed => "committed",
            EndCause::ClientAbort => "aborted by the client",
            EndCause::LeaseExpired => "lease expired",
            EndCause::DeadlockVictim => "deadlock victim",
            EndCause::OperatorAbort => "aborted by operator",
            EndCause::MaxDurationExceeded => "max duration exceeded",
        }
    }
}

impl fmt::Display for EndCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kinds of replicated events. Their serde form (snake_case, `deadlock_resolved`) is the
/// one webhook configuration files use; the wire name is `as_str`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A wait-for cycle was found and broken by aborting a victim.
    DeadlockResolved,
    /// A transaction's lease lapsed and the server expired it.
    TransactionExpired,
    /// An operator aborted a transaction.
    TransactionAborted,
    /// The server took a lock from its holder (expiry, deadlock victim, operator abort).
    LockRevoked,
    /// A cluster API key was created, revoked, rotated or expired.
    ApiKeyChanged,
}

impl EventKind {
    /// Every kind, in wire order.
    pub const ALL: [EventKind; 5] = [
        EventKind::DeadlockResolved,
        EventKind::TransactionExpired,
        EventKind::TransactionAborted,
        EventKind::LockRevoked,
        EventKind::ApiKeyChanged,
    ];

    /// The wire name, e.g. `"DEADLOCK_RESOLVED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::DeadlockResolved => "DEADLOCK_RESOLVED",
            EventKind::TransactionExpired => "TRANSACTION_EXPIRED",
            EventKind::TransactionAborted => "TRANSACTION_ABORTED",
            EventKind::LockRevoked => "LOCK_REVOKED",
            EventKind::ApiKeyChanged => "API_KEY_CHANGED",
        }
    }

    /// The name in configuration files, e.g. `"deadlock_resolved"`.
    pub fn config_name(self) -> &'static str {
        match self {
            EventKind::DeadlockResolved => "deadlock_resolved",
            EventKind::TransactionExpired => "transaction_expired",
            EventKind::TransactionAborted => "transaction_aborted",
            EventKind::LockRevoked => "lock_revoked",
            EventKind::ApiKeyChanged => "api_key_changed",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = ParseError;

    /// The wire or configuration name in any case, with `-` for `_` (`deadlock-resolved`).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let wanted = s.trim().to_ascii_uppercase().replace('-', "_");
        EventKind::ALL.into_iter().find(|k| k.as_str() == wanted).ok_or_else(|| {
            let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.config_name()).collect();
            ParseError(format!("unknown event kind {s:?} (expected one of {})", names.join(", ")))
        })
    }
}

/// How a watched key's holders changed (`WatchKey`). The server computes it, the client
/// hands it on, and every SDK exposes it under this name (Python and Node as `as_str`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyChangeKind {
    /// A new grant.
    Granted,
    /// The holder let go (released, committed or aborted).
    Released,
    /// The holder's lease (or maximum duration) ran out.
    Expired,
    /// The holder was aborted (deadlock victim, operator).
    Revoked,
    /// EXCLUSIVE became SHARED_READ, same token.
    Downgraded,
}

impl KeyChangeKind {
    /// The wire name, e.g. `"GRANTED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyChangeKind::Granted => "GRANTED",
            KeyChangeKind::Released => "RELEASED",
            KeyChangeKind::Expired => "EXPIRED",
            KeyChangeKind::Revoked => "REVOKED",
            KeyChangeKind::Downgraded => "DOWNGRADED",
        }
    }
}

impl fmt::Display for KeyChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which member of a deadlock cycle is aborted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VictimPolicy {
    /// Lowest priority; among equals the youngest (latest begun).
    #[default]
    LowestPriorityThenYoungest,
    /// Latest begun.
    Youngest,
    /// Earliest begun.
    Oldest,
}

impl VictimPolicy {
    /// The wire name, e.g. `"LOWEST_PRIORITY_THEN_YOUNGEST"`.
    pub fn as_str(self) -> &'static str {
        match self {
            VictimPolicy::LowestPriorityThenYoungest => "LOWEST_PRIORITY_THEN_YOUNGEST",
            VictimPolicy::Youngest => "YOUNGEST",
            VictimPolicy::Oldest => "OLDEST",
        }
    }

    /// The name in the server's configuration, e.g. `"lowest-priority-then-youngest"`.
    pub fn config_name(self) -> &'static str {
        match self {
            VictimPolicy::LowestPriorityThenYoungest => "lowest-priority-then-youngest",
            VictimPolicy::Youngest => "youngest",
            VictimPolicy::Oldest => "oldest",
        }
    }
}

impl fmt::Display for VictimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VictimPolicy {
    type Err = ParseError;

    /// Accepts the configuration and the wire names, in any case, and `priority` /
    /// `lowest-priority` for the default.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "lowest-priority-then-youngest" | "lowest-priority" | "priority" => {
                Ok(VictimPolicy::LowestPriorityThenYoungest)
            }
            "youngest" => Ok(VictimPolicy::Youngest),
            "oldest" => Ok(VictimPolicy::Oldest),
            other => Err(ParseError(format!(
                "unknown victim policy {other:?}; use lowest-priority-then-youngest, youngest or oldest"
            ))),
        }
    }
}

/// Machine-readable kinds of failure, one vocabulary for every language: the server
/// attaches one to every error status (`x-dls-error` and the error detail), the client maps
/// it to its error type. Mirrors `caerus.dls.v1.ErrorKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The acquire timeout passed before the lock could be granted.
    LockTimeout,
    /// The transaction was aborted to break a deadlock.
    DeadlockVictim,
    /// The transaction is no longer active; its locks are gone.
    TransactionLost,
    /// No such transaction.
    TransactionNotFound,
    /// A field failed validation.
    InvalidArgument,
    /// Missing or unknown API key.
    Unauthenticated,
    /// The key may not use this namespace or this transaction.
    PermissionDenied,
    /// This node is not the leader, or there is none yet.
    NotLeader,
    /// The wait was withdrawn by ReleaseLock.
    WaitCancelled,
    /// The transaction already waits for another lock.
    AlreadyWaiting,
    /// The cluster could not commit in time, or the leader is shedding load.
    Unavailable,
    /// An event cursor older than the retained log.
    CursorExpired,
    /// A server limit refused the request; nothing changed.
    ResourceExhausted,
    /// A membership change does not fit the current membership.
    MembershipRefused,
    /// A server-side failure that is none of the above.
    Internal,
    /// A cluster API key of that name exists already.
    ApiKeyExists,
    /// No cluster API key of that name.
    ApiKeyNotFound,
}

impl ErrorKind {
    /// Every kind, in wire order.
    pub const ALL: [ErrorKind; 17] = [
        ErrorKind::LockTimeout,
        ErrorKind::DeadlockVictim,
        ErrorKind::TransactionLost,
        ErrorKind::TransactionNotFound,
        ErrorKind::InvalidArgument,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        ErrorKind::NotLeader,
        ErrorKind::WaitCancelled,
        ErrorKind::AlreadyWaiting,
        ErrorKind::Unavailable,
        ErrorKind::CursorExpired,
        ErrorKind::ResourceExhausted,
        ErrorKind::MembershipRefused,
        ErrorKind::Internal,
        ErrorKind::ApiKeyExists,
        ErrorKind::ApiKeyNotFound,
    ];

    /// The wire name, e.g. `"LOCK_TIMEOUT"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::LockTimeout => "LOCK_TIMEOUT",
            ErrorKind::DeadlockVictim => "DEADLOCK_VICTIM",
            ErrorKind::TransactionLost => "TRANSACTION_LOST",
            ErrorKind::TransactionNotFound => "TRANSACTION_NOT_FOUND",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Unauthenticated => "UNAUTHENTICATED",
            ErrorKind::PermissionDenied => "PERMISSION_DENIED",
            ErrorKind::NotLeader => "NOT_LEADER",
            ErrorKind::WaitCancelled => "WAIT_CANCELLED",
            ErrorKind::AlreadyWaiting => "ALREADY_WAITING",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::CursorExpired => "CURSOR_EXPIRED",
            ErrorKind::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorKind::MembershipRefused => "MEMBERSHIP_REFUSED",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::ApiKeyExists => "API_KEY_EXISTS",
            ErrorKind::ApiKeyNotFound => "API_KEY_NOT_FOUND",
        }
    }

    /// The stem of the error class SDKs raise for this kind, e.g. `"LockTimeout"`: Python's
    /// `caerus.LockTimeout`, Node's `LockTimeoutError`, Kotlin's `DlsException.LockTimeout`,
    /// Swift's `DlsError.LockTimeout`. A kind the client folds into another has that one's
    /// class: `NotLeader` is retried and, when retries run out, is `Unavailable`; the API key
    /// kinds are a wrong argument of an operator call.
    pub fn class_stem(self) -> &'static str {
        match self {
            ErrorKind::LockTimeout => "LockTimeout",
            ErrorKind::DeadlockVictim => "DeadlockVictim",
            ErrorKind::TransactionLost => "TransactionLost",
            ErrorKind::TransactionNotFound => "TransactionNotFound",
            ErrorKind::InvalidArgument | ErrorKind::ApiKeyExists | ErrorKind::ApiKeyNotFound => "InvalidArgument",
            ErrorKind::Unauthenticated => "Unauthenticated",
            ErrorKind::PermissionDenied => "PermissionDenied",
            ErrorKind::WaitCancelled => "WaitCancelled",
            ErrorKind::AlreadyWaiting => "AlreadyWaiting",
            ErrorKind::NotLeader | ErrorKind::Unavailable => "Unavailable",
            ErrorKind::CursorExpired => "CursorExpired",
            ErrorKind::ResourceExhausted => "ResourceExhausted",
            ErrorKind::MembershipRefused => "MembershipRefused",
            ErrorKind::Internal => "Internal",
        }
    }

    /// The kind whose error class the SDKs raise for this one (itself for most kinds).
    pub fn raised_as(self) -> ErrorKind {
        match self {
            ErrorKind::NotLeader => ErrorKind::Unavailable,
            ErrorKind::ApiKeyExists | ErrorKind::ApiKeyNotFound => ErrorKind::InvalidArgument,
            kind => kind,
        }
    }

    /// Whether an SDK has an error class of this kind's own (not folded into another's).
    pub fn has_own_class(self) -> bool {
        self.raised_as() == self
    }

    /// Whether the same call may succeed if simply made again later, with nothing changed
    /// (the core client already retries these within its retry deadline).
    pub fn retryable(self) -> bool {
        matches!(self, ErrorKind::NotLeader | ErrorKind::Unavailable)
    }

    /// What the error means, in one line: the doc string of the SDKs' error classes.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::LockTimeout => {
                "The acquire timeout passed before the lock was granted; the transaction stays active."
            }
            ErrorKind::DeadlockVictim => "The server aborted the transaction to break a deadlock; its locks are gone.",
            ErrorKind::TransactionLost => {
                "The transaction is no longer active (lease expired, aborted, ended): stop the work."
            }
            ErrorKind::TransactionNotFound => "The server does not know the transaction.",
            ErrorKind::InvalidArgument => {
                "A request field failed validation (empty namespace, key too long, timeout 0, ...)."
            }
            ErrorKind::Unauthenticated => "The API key is missing or unknown to the server.",
            ErrorKind::PermissionDenied => "The API key may not use this namespace or this transaction.",
            ErrorKind::NotLeader => "This node is not the leader, or there is none yet.",
            ErrorKind::WaitCancelled => "The wait for a lock was withdrawn by a release of the same key.",
            ErrorKind::AlreadyWaiting => "The transaction already waits for another lock (one wait at a time).",
            ErrorKind::Unavailable => "No leader could be reached before the retry deadline. Safe to retry later.",
            ErrorKind::CursorExpired => "An event watch asked for events older than the server still keeps.",
            ErrorKind::ResourceExhausted => {
                "A server limit (named in the message, with its flag) refused the request; nothing changed."
            }
            ErrorKind::MembershipRefused => "A membership change does not fit the current membership; nothing changed.",
            ErrorKind::Internal => "Anything else: an unexpected gRPC status or a malformed answer.",
            ErrorKind::ApiKeyExists => "A cluster API key of that name exists already.",
            ErrorKind::ApiKeyNotFound => "No cluster API key of that name.",
        }
    }
}

/// One error class of the SDKs: the table Python, Node, Kotlin and Swift build their error
/// classes from, so a kind added to [`ErrorKind`] reaches every language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorClass {
    /// The stable code, `Error::code()` of the core client, e.g. `"LOCK_TIMEOUT"`.
    pub code: &'static str,
    /// The class name stem, e.g. `"LockTimeout"`.
    pub stem: &'static str,
    /// The server's kind, `None` for the client's own `CONFIG`.
    pub kind: Option<ErrorKind>,
    /// Whether making the same call again later may succeed.
    pub retryable: bool,
    /// What the error means, in one line.
    pub description: &'static str,
}

impl ErrorClass {
    /// The client's own error: its configuration is invalid (no endpoints, malformed
    /// address, bad API key). No server sends it.
    pub const CONFIG: ErrorClass = ErrorClass {
        code: "CONFIG",
        stem: "Config",
        kind: None,
        retryable: false,
        description: "The client configuration is invalid (no endpoints, malformed address, bad API key).",
    };

    /// Every class an SDK raises: one per kind with its own class, in wire order, then `CONFIG`.
    pub fn all() -> impl Iterator<Item = ErrorClass> {
        ErrorKind::ALL.into_iter().filter(|k| k.has_own_class()).map(ErrorClass::of).chain([ErrorClass::CONFIG])
    }

    /// The class of a kind (the class it is raised as, for a folded kind).
    pub fn of(kind: ErrorKind) -> ErrorClass {
        let kind = kind.raised_as();
        ErrorClass {
            code: kind.as_str(),
            stem: kind.class_stem(),
            kind: Some(kind),
            retryable: kind.retryable(),
            description: kind.describe(),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ErrorKind {
    type Err = ParseError;

    /// The wire name, in any case.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let upper = s.trim().to_ascii_uppercase();
        let known = ErrorKind::ALL.into_iter().find(|k| k.as_str() == upper);
        known.ok_or_else(|| ParseError(format!("unknown error kind {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_leniently_and_print_their_wire_names() {
        for (text, mode) in [
            ("exclusive", LockMode::Exclusive),
            ("shared-read", LockMode::SharedRead),
            ("SHARED", LockMode::SharedRead),
        ] {
            assert_eq!(text.parse::<LockMode>().unwrap(), mode);
        }
        assert!("write".parse::<LockMode>().unwrap_err().0.contains("EXCLUSIVE, SHARED_READ or SEMAPHORE"));
        assert_eq!(LockMode::SharedRead.to_string(), "SHARED_READ");
    }

    #[test]
    fn only_readers_or_permits_are_compatible() {
        use LockMode::*;
        assert!(SharedRead.compatible_with(SharedRead));
        assert!(!SharedRead.compatible_with(Exclusive) && !Exclusive.compatible_with(SharedRead));
        assert!(!Exclusive.compatible_with(Exclusive));
        assert!(Exclusive.covers(SharedRead) && Exclusive.covers(Exclusive) && SharedRead.covers(SharedRead));
        assert!(!SharedRead.covers(Exclusive));
        assert!(Semaphore.compatible_with(Semaphore) && Semaphore.covers(Semaphore));
        for m in [Exclusive, SharedRead] {
            assert!(!Semaphore.compatible_with(m) && !m.compatible_with(Semaphore), "{m}");
            assert!(!Semaphore.covers(m) && !m.covers(Semaphore), "{m}");
        }
        assert_eq!("semaphore".parse::<LockMode>().unwrap(), Semaphore);
    }

    #[test]
    fn causes_name_their_final_state_and_whether_locks_were_revoked() {
        assert_eq!(EndCause::Committed.state(), TransactionState::Committed);
        assert_eq!(EndCause::LeaseExpired.state(), TransactionState::Expired);
        assert_eq!(EndCause::MaxDurationExceeded.state(), TransactionState::Expired);
        assert!(EndCause::MaxDurationExceeded.revokes());
        for c in [EndCause::ClientAbort, EndCause::DeadlockVictim, EndCause::OperatorAbort] {
            assert_eq!(c.state(), TransactionState::Aborted, "{c}");
        }
        assert!(!EndCause::Committed.revokes() && !EndCause::ClientAbort.revokes());
        assert!(
            EndCause::LeaseExpired.revokes() && EndCause::DeadlockVictim.revokes() && EndCause::OperatorAbort.revokes()
        );
    }

    #[test]
    fn error_kinds_round_trip_through_their_names() {
        for k in ErrorKind::ALL {
            assert_eq!(k.as_str().to_ascii_lowercase().parse::<ErrorKind>().unwrap(), k);
        }
        assert!("SOMETHING_NEW".parse::<ErrorKind>().is_err());
    }

    #[test]
    fn every_error_kind_has_a_class_and_every_class_a_distinct_name() {
        for k in ErrorKind::ALL {
            let class = ErrorClass::of(k);
            assert!(!class.stem.is_empty() && !class.description.is_empty(), "{k}");
            assert!(class.stem.chars().next().unwrap().is_ascii_uppercase(), "{k}: {}", class.stem);
            assert!(ErrorClass::all().any(|c| c == class), "{k} is raised as a class of the table");
            assert_eq!(class.kind.map(ErrorKind::has_own_class), Some(true), "{k}");
            assert_eq!(k.class_stem(), k.raised_as().class_stem(), "{k}");
        }
        let classes: Vec<ErrorClass> = ErrorClass::all().collect();
        for (i, c) in classes.iter().enumerate() {
            assert!(classes[i + 1..].iter().all(|d| d.stem != c.stem && d.code != c.code), "{c:?} twice");
        }
        assert_eq!(ErrorClass::of(ErrorKind::NotLeader).stem, "Unavailable");
        assert_eq!(ErrorClass::of(ErrorKind::MembershipRefused).code, "MEMBERSHIP_REFUSED");
        assert_eq!(classes.last(), Some(&ErrorClass::CONFIG));
    }

    #[test]
    fn event_kinds_parse_wire_and_config_names() {
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), k);
            assert_eq!(k.config_name().parse::<EventKind>().unwrap(), k);
            assert_eq!(k.config_name().replace('_', "-").parse::<EventKind>().unwrap(), k);
        }
        assert!("deadlocks".parse::<EventKind>().unwrap_err().0.contains("deadlock_resolved"));
    }

    #[test]
    fn victim_policies_parse_config_and_wire_names() {
        for p in [VictimPolicy::LowestPriorityThenYoungest, VictimPolicy::Youngest, VictimPolicy::Oldest] {
            assert_eq!(p.config_name().parse::<VictimPolicy>().unwrap(), p);
            assert_eq!(p.as_str().parse::<VictimPolicy>().unwrap(), p);
        }
        assert!("random".parse::<VictimPolicy>().unwrap_err().0.contains("youngest or oldest"));
    }
}

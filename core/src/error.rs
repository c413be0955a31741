//! The client's error type and its mapping from gRPC statuses.

use caerus_proto::v1 as pb;
use caerus_proto::{metadata, Wire};
use caerus_types::{EndCause, ErrorClass, ErrorKind};
use tonic::{Code, Status};

use crate::deadlock::Deadlock;

/// Result alias used throughout the client.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything a Caerus DLS call can fail with.
///
/// Each variant keeps the server's message where there is one. [`Error::code`] gives a
/// stable machine-readable name that language bindings expose unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The acquire timeout passed before the lock could be granted. The transaction is
    /// still active and keeps the locks it already holds.
    #[error("lock not acquired before the acquire timeout: {message}")]
    LockTimeout {
        /// What happened, as reported by the server.
        message: String,
    },
    /// The server aborted the transaction to break a deadlock; its locks are gone.
    #[error("transaction aborted as a deadlock victim: {message}")]
    DeadlockVictim {
        /// What happened, as reported by the server.
        message: String,
        /// The cycle that was broken and the policy that chose this transaction, when the
        /// server still had them (its event log is bounded).
        deadlock: Option<Box<Deadlock>>,
    },
    /// The transaction is no longer active (lease expired, aborted or already ended); its
    /// locks are gone, so stop the work they protected.
    #[error("transaction lost: {message}")]
    TransactionLost {
        /// What happened, as reported by the server or observed by the client.
        message: String,
        /// What ended it, as the server recorded it; `None` when the server did not say
        /// (e.g. the transaction is still ending) or the client noticed the loss itself.
        cause: Option<EndCause>,
    },
    /// The server does not know the transaction (never existed, or finished and forgotten).
    #[error("transaction not found: {message}")]
    TransactionNotFound {
        /// What happened, as reported by the server.
        message: String,
    },
    /// A request field failed validation; the message names the field.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// Which field is wrong and why.
        message: String,
        /// When the key is a counted semaphore asked for with another permit count or as a
        /// lock: the count it is in use with (the server's `x-dls-semaphore-permits`).
        semaphore_permits: Option<u32>,
    },
    /// The API key is missing or unknown to the server.
    #[error("unauthenticated: {message}")]
    Unauthenticated {
        /// What happened, as reported by the server.
        message: String,
    },
    /// The API key may not use this namespace or this transaction.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// What happened, as reported by the server.
        message: String,
        /// When the API key may not use the call's namespace: the namespace prefixes it is
        /// limited to (the server's `x-dls-key-namespaces-bin`). `None` for other denials
        /// (an operator call without an admin key, another key's transaction).
        key_namespaces: Option<Vec<String>>,
    },
    /// The wait for a lock was withdrawn by a `release` of the same key.
    #[error("lock wait cancelled: {message}")]
    WaitCancelled {
        /// What happened, as reported by the server.
        message: String,
    },
    /// The transaction already waits for another lock; a transaction waits for one lock
    /// at a time.
    #[error("transaction already waits for another lock: {message}")]
    AlreadyWaiting {
        /// What happened, as reported by the server.
        message: String,
    },
    /// An event watch asked for events older than the server still keeps (it keeps the
    /// most recent ones only); the message names the oldest retained sequence. Resume from
    /// there, accepting the gap, or watch only new events.
    #[error("event cursor expired: {message}")]
    CursorExpired {
        /// What happened, as reported by the server.
        message: String,
    },
    /// A server limit refused the request (too many active transactions for the API key,
    /// locks in the transaction, waiters on the lock, or event watches); nothing changed.
    /// The message names the limit and the server flag that sets it. Not retried: the
    /// condition lasts until something ends or the operator raises the limit.
    #[error("resource exhausted: {message}")]
    ResourceExhausted {
        /// Which limit refused the request, as reported by the server.
        message: String,
    },
    /// A membership change does not fit the current membership (the node is already a
    /// member, is not one, is the last voter, has not caught up, or another change is in
    /// progress); nothing changed. The message says what to do.
    #[error("membership change refused: {message}")]
    MembershipRefused {
        /// Why, as reported by the server.
        message: String,
    },
    /// No leader could be reached before the retry deadline (retries exhausted, cluster
    /// unreachable or without a leader). Safe to retry later.
    #[error("cluster unavailable: {message}")]
    Unavailable {
        /// Which endpoints were tried and the last error seen.
        message: String,
    },
    /// The client configuration is invalid (no endpoints, malformed address, bad API key).
    #[error("invalid client configuration: {message}")]
    Config {
        /// What is wrong with the configuration.
        message: String,
    },
    /// Anything else: an unexpected gRPC status or a malformed answer.
    #[error("internal error: {message}")]
    Internal {
        /// What happened, including the gRPC code when there is one.
        message: String,
    },
}

impl Error {
    /// The server's kind this error is (the class every SDK raises for it), `None` for the
    /// client's own [`Error::Config`].
    pub fn kind(&self) -> Option<ErrorKind> {
        Some(match self {
            Error::LockTimeout { .. } => ErrorKind::LockTimeout,
            Error::DeadlockVictim { .. } => ErrorKind::DeadlockVictim,
            Error::TransactionLost { .. } => ErrorKind::TransactionLost,
            Error::TransactionNotFound { .. } => ErrorKind::TransactionNotFound,
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            Error::Unauthenticated { .. } => ErrorKind::Unauthenticated,
            Error::PermissionDenied { .. } => ErrorKind::PermissionDenied,
            Error::WaitCancelled { .. } => ErrorKind::WaitCancelled,
            Error::AlreadyWaiting { .. } => ErrorKind::AlreadyWaiting,
            Error::CursorExpired { .. } => ErrorKind::CursorExpired,
            Error::ResourceExhausted { .. } => ErrorKind::ResourceExhausted,
            Error::MembershipRefused { .. } => ErrorKind::MembershipRefused,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Internal { .. } => ErrorKind::Internal,
            Error::Config { .. } => return None,
        })
    }

    /// The SDKs' error class of this error (its code, class name stem, description).
    pub fn class(&self) -> ErrorClass {
        self.kind().map_or(ErrorClass::CONFIG, ErrorClass::of)
    }

    /// Stable SCREAMING_SNAKE name of the error kind, e.g. `"LOCK_TIMEOUT"`: the wire name of
    /// [`Error::kind`], or `"CONFIG"`.
    pub fn code(&self) -> &'static str {
        self.class().code
    }

    /// The message carried by the error, without the kind prefix of `Display`.
    pub fn message(&self) -> &str {
        match self {
            Error::LockTimeout { message }
            | Error::DeadlockVictim { message, .. }
            | Error::TransactionLost { message, .. }
            | Error::TransactionNotFound { message }
            | Error::InvalidArgument { message, .. }
            | Error::Unauthenticated { message }
            | Error::PermissionDenied { message, .. }
            | Error::WaitCancelled { message }
            | Error::AlreadyWaiting { message }
            | Error::CursorExpired { message }
            | Error::ResourceExhausted { message }
            | Error::MembershipRefused { message }
            | Error::Unavailable { message }
            | Error::Config { message }
            | Error::Internal { message } => message,
        }
    }

    /// What ended the transaction, for a [`Error::TransactionLost`] or
    /// [`Error::DeadlockVictim`] the server explained.
    pub fn end_cause(&self) -> Option<EndCause> {
        match self {
            Error::DeadlockVictim { .. } => Some(EndCause::DeadlockVictim),
            Error::TransactionLost { cause, .. } => *cause,
            _ => None,
        }
    }

    pub(crate) fn lost(message: impl Into<String>) -> Self {
        Error::TransactionLost { message: message.into(), cause: None }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::Config { message: message.into() }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Error::Internal { message: message.into() }
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Self {
        Error::InvalidArgument { message: message.into(), semaphore_permits: None }
    }

    /// An INVALID_ARGUMENT or PERMISSION_DENIED answer with the facts the server attached.
    fn refused(code: Code, message: String, status: &Status) -> Self {
        let md = status.metadata();
        match code {
            Code::PermissionDenied => Error::PermissionDenied {
                message,
                key_namespaces: md.get_bin(metadata::KEY_NAMESPACES).and_then(|v| v.to_bytes().ok()).map(|bytes| {
                    String::from_utf8_lossy(&bytes).lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
                }),
            },
            _ => Error::InvalidArgument {
                message,
                semaphore_permits: md
                    .get(metadata::SEMAPHORE_PERMITS)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok()),
            },
        }
    }
}

/// The `x-dls-error` value of a status, if the server attached one.
pub(crate) fn error_kind(status: &Status) -> Option<&str> {
    status.metadata().get(metadata::ERROR_KIND).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}

/// The `x-dls-retry-after-ms` hint of an overloaded leader's UNAVAILABLE answer.
pub(crate) fn retry_after(status: &Status) -> Option<std::time::Duration> {
    let ms = status.metadata().get(metadata::RETRY_AFTER_MS)?.to_str().ok()?.trim().parse().ok()?;
    Some(std::time::Duration::from_millis(ms))
}

/// The `x-dls-leader-addr` hint of a follower's UNAVAILABLE answer.
pub(crate) fn leader_addr(status: &Status) -> Option<&str> {
    status.metadata().get(metadata::LEADER_ADDR).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}

/// The HTTP status of an answer that was plain HTTP, not gRPC (no `grpc-status`): tonic maps
/// it to a gRPC code and keeps the HTTP status only in this message. Such a peer is not a
/// DLS node's gRPC port, most often its HTTP port (the one users open in a browser).
pub(crate) fn plain_http_status(status: &Status) -> Option<u16> {
    status.message().strip_prefix("grpc-status header missing, mapped from HTTP status code ")?.trim().parse().ok()
}

/// The error for `endpoint` answering a call in plain HTTP with `http_status`: the gRPC
/// code tonic made of it (UNIMPLEMENTED for a 404) would send the user looking for a
/// missing feature rather than at the port they gave.
pub(crate) fn not_grpc(endpoint: &str, http_status: u16) -> Error {
    Error::config(format!(
        "{endpoint} answered plain HTTP (status {http_status}), not gRPC: it looks like the HTTP port \
         (Playground, /metrics); DLS clients use the gRPC port (default 7070, `--listen`)"
    ))
}

fn status_message(status: &Status) -> String {
    if status.message().is_empty() {
        // An empty message would leave the user with only the variant name; the code's
        // description at least says which failure it was.
        status.code().description().to_string()
    } else {
        status.message().to_string()
    }
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        let message = status_message(&status);
        let detail = caerus_proto::error_detail(&status);
        // The kind is the server's deliberate classification, so it outranks the code:
        // e.g. FAILED_PRECONDITION is both "transaction lost" and "already waiting".
        let kind = detail
            .as_ref()
            .and_then(|d| ErrorKind::from_wire(d.kind))
            .or_else(|| error_kind(&status).and_then(|k| k.parse().ok()));
        if let Some(kind) = kind {
            if let Some(err) = Error::of_kind(kind, message.clone(), detail, &status) {
                return err;
            }
        }
        match status.code() {
            Code::Aborted | Code::FailedPrecondition => Error::lost(message),
            Code::NotFound => Error::TransactionNotFound { message },
            code @ (Code::InvalidArgument | Code::PermissionDenied) => Error::refused(code, message, &status),
            Code::Unauthenticated => Error::Unauthenticated { message },
            Code::Unavailable => Error::Unavailable { message },
            // The only OUT_OF_RANGE of the API is an expired event cursor.
            Code::OutOfRange => Error::CursorExpired { message },
            Code::ResourceExhausted => Error::ResourceExhausted { message },
            // DEADLINE_EXCEEDED and CANCELLED mean "lock timeout" / "wait withdrawn" only when
            // the server says so; bare, they come from transports and proxies.
            code => Error::Internal { message: format!("gRPC status {code:?}: {message}") },
        }
    }
}

impl Error {
    /// The error of a kind the server named, with what its detail adds. `None` for
    /// INTERNAL, which is told apart by the status code (and names it).
    fn of_kind(kind: ErrorKind, message: String, detail: Option<pb::ErrorDetail>, status: &Status) -> Option<Error> {
        Some(match kind {
            ErrorKind::LockTimeout => Error::LockTimeout { message },
            ErrorKind::DeadlockVictim => {
                let deadlock = detail.and_then(|d| d.deadlock).and_then(|d| Deadlock::try_from(d).ok()).map(Box::new);
                Error::DeadlockVictim { message, deadlock }
            }
            ErrorKind::TransactionLost => {
                Error::TransactionLost { message, cause: detail.and_then(|d| EndCause::from_wire(d.end_cause)) }
            }
            ErrorKind::TransactionNotFound => Error::TransactionNotFound { message },
            ErrorKind::InvalidArgument => Error::refused(Code::InvalidArgument, message, status),
            ErrorKind::Unauthenticated => Error::Unauthenticated { message },
            ErrorKind::PermissionDenied => Error::refused(Code::PermissionDenied, message, status),
            ErrorKind::NotLeader | ErrorKind::Unavailable => Error::Unavailable { message },
            ErrorKind::WaitCancelled => Error::WaitCancelled { message },
            ErrorKind::AlreadyWaiting => Error::AlreadyWaiting { message },
            ErrorKind::CursorExpired => Error::CursorExpired { message },
            ErrorKind::ResourceExhausted => Error::ResourceExhausted { message },
            ErrorKind::MembershipRefused => Error::MembershipRefused { message },
            // The SDKs' errors have no kinds of their own for these (yet): a wrong name is a
            // wrong argument.
            ErrorKind::ApiKeyExists | ErrorKind::ApiKeyNotFound => Error::invalid_argument(message),
            ErrorKind::Internal => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn status_with(code: Code, msg: &str, kind: Option<&str>, leader: Option<&str>) -> Status {
        let mut s = Status::new(code, msg);
        if let Some(k) = kind {
            s.metadata_mut().insert(metadata::ERROR_KIND, MetadataValue::try_from(k).unwrap());
        }
        if let Some(l) = leader {
            s.metadata_mut().insert(metadata::LEADER_ADDR, MetadataValue::try_from(l).unwrap());
        }
        s
    }

    #[test]
    fn a_refusal_carries_the_facts_the_server_attached() {
        let mut s =
            status_with(Code::InvalidArgument, "ns/k is a semaphore with 3 permits", Some("INVALID_ARGUMENT"), None);
        s.metadata_mut().insert(metadata::SEMAPHORE_PERMITS, MetadataValue::from(3u32));
        let err = Error::from(s);
        assert!(matches!(err, Error::InvalidArgument { semaphore_permits: Some(3), .. }), "{err:?}");
        assert_eq!(err.message(), "ns/k is a semaphore with 3 permits", "the words are the server's");
        let mut s = status_with(Code::PermissionDenied, "may not use namespace", None, None);
        s.metadata_mut().insert_bin(
            metadata::KEY_NAMESPACES,
            tonic::metadata::BinaryMetadataValue::from_bytes("billing-\nrépertoire".as_bytes()),
        );
        let err = Error::from(s);
        let want = vec!["billing-".to_string(), "répertoire".to_string()];
        assert!(matches!(&err, Error::PermissionDenied { key_namespaces: Some(ns), .. } if *ns == want), "{err:?}");
        let plain =
            Error::from(status_with(Code::PermissionDenied, "not an admin key", Some("PERMISSION_DENIED"), None));
        assert!(matches!(plain, Error::PermissionDenied { key_namespaces: None, .. }), "{plain:?}");
    }

    #[test]
    fn metadata_outranks_code() {
        let cases = [
            (Code::DeadlineExceeded, "LOCK_TIMEOUT", "LOCK_TIMEOUT"),
            (Code::Aborted, "DEADLOCK_VICTIM", "DEADLOCK_VICTIM"),
            (Code::Aborted, "TRANSACTION_LOST", "TRANSACTION_LOST"),
            (Code::FailedPrecondition, "TRANSACTION_LOST", "TRANSACTION_LOST"),
            (Code::FailedPrecondition, "ALREADY_WAITING", "ALREADY_WAITING"),
            (Code::NotFound, "TRANSACTION_NOT_FOUND", "TRANSACTION_NOT_FOUND"),
            (Code::InvalidArgument, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (Code::Unauthenticated, "UNAUTHENTICATED", "UNAUTHENTICATED"),
            (Code::PermissionDenied, "PERMISSION_DENIED", "PERMISSION_DENIED"),
            (Code::Cancelled, "WAIT_CANCELLED", "WAIT_CANCELLED"),
            (Code::Unavailable, "NOT_LEADER", "UNAVAILABLE"),
            (Code::Unavailable, "UNAVAILABLE", "UNAVAILABLE"),
            (Code::OutOfRange, "CURSOR_EXPIRED", "CURSOR_EXPIRED"),
            (Code::ResourceExhausted, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"),
            (Code::FailedPrecondition, "MEMBERSHIP_REFUSED", "MEMBERSHIP_REFUSED"),
            // A code the kind would not normally travel with: the kind still wins.
            (Code::Internal, "LOCK_TIMEOUT", "LOCK_TIMEOUT"),
            (Code::Unknown, "lock_timeout", "LOCK_TIMEOUT"),
        ];
        for (code, kind, want) in cases {
            let err = Error::from(status_with(code, "server says so", Some(kind), None));
            assert_eq!(err.code(), want, "{code:?} + {kind}");
            assert_eq!(err.message(), "server says so");
        }
    }

    #[test]
    fn codes_without_metadata() {
        let cases = [
            (Code::Aborted, "TRANSACTION_LOST"),
            (Code::FailedPrecondition, "TRANSACTION_LOST"),
            (Code::NotFound, "TRANSACTION_NOT_FOUND"),
            (Code::InvalidArgument, "INVALID_ARGUMENT"),
            (Code::Unauthenticated, "UNAUTHENTICATED"),
            (Code::PermissionDenied, "PERMISSION_DENIED"),
            (Code::Unavailable, "UNAVAILABLE"),
            (Code::OutOfRange, "CURSOR_EXPIRED"),
            (Code::DeadlineExceeded, "INTERNAL"),
            (Code::Cancelled, "INTERNAL"),
            (Code::Unknown, "INTERNAL"),
            (Code::Internal, "INTERNAL"),
            (Code::ResourceExhausted, "RESOURCE_EXHAUSTED"),
        ];
        for (code, want) in cases {
            assert_eq!(Error::from(status_with(code, "m", None, None)).code(), want, "{code:?}");
        }
    }

    #[test]
    fn every_kind_the_server_names_is_raised_as_its_class() {
        for kind in ErrorKind::ALL {
            let code = if kind == ErrorKind::Internal { Code::Internal } else { Code::Unknown };
            let err = Error::from(status_with(code, "m", Some(kind.as_str()), None));
            assert_eq!(err.class(), ErrorClass::of(kind), "{kind}");
            assert_eq!(err.code(), kind.raised_as().as_str(), "{kind}");
        }
        assert_eq!(Error::config("m").class(), ErrorClass::CONFIG);
    }

    #[test]
    fn unknown_kind_falls_back_to_code() {
        let err = Error::from(status_with(Code::NotFound, "gone", Some("SOMETHING_NEW"), None));
        assert_eq!(err, Error::TransactionNotFound { message: "gone".into() });
    }

    #[test]
    fn the_error_detail_carries_the_end_cause_and_the_deadlock() {
        let mut lost = status_with(Code::FailedPrecondition, "transaction 4 is EXPIRED", None, None);
        let detail = pb::ErrorDetail {
            kind: ErrorKind::TransactionLost.to_wire(),
            transaction_id: 4,
            end_cause: EndCause::LeaseExpired.to_wire(),
            deadlock: None,
        };
        caerus_proto::set_error_detail(&mut lost, &detail);
        let err = Error::from(lost);
        assert_eq!(err.code(), "TRANSACTION_LOST");
        assert_eq!(err.end_cause(), Some(EndCause::LeaseExpired));

        let mut victim = Status::aborted("chosen");
        let cycle = [(5, "a"), (6, "b")].map(|(txn, key)| pb::CycleMember {
            transaction_id: txn,
            key: key.into(),
            namespace: "ns".into(),
            mode: pb::LockMode::Exclusive as i32,
            ..Default::default()
        });
        let deadlock = pb::DeadlockResolved {
            cycle: cycle.to_vec(),
            victim_transaction_id: 6,
            policy: pb::VictimPolicy::Youngest as i32,
        };
        let detail = pb::ErrorDetail {
            kind: ErrorKind::DeadlockVictim.to_wire(),
            transaction_id: 6,
            end_cause: EndCause::DeadlockVictim.to_wire(),
            deadlock: Some(deadlock),
        };
        caerus_proto::set_error_detail(&mut victim, &detail);
        let Error::DeadlockVictim { deadlock: Some(d), .. } = Error::from(victim) else {
            panic!("a victim with its cycle")
        };
        assert_eq!(d.victim_transaction_id, 6);
        assert_eq!(d.policy, caerus_types::VictimPolicy::Youngest);
        assert_eq!(d.cycle.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(), ["a", "b"]);

        // Without a detail (an older server) the kind still decides; the cause is unknown.
        let err = Error::from(status_with(Code::Aborted, "lost", Some("TRANSACTION_LOST"), None));
        assert_eq!((err.code(), err.end_cause()), ("TRANSACTION_LOST", None));
    }

    #[test]
    fn internal_names_the_grpc_code_and_keeps_the_message() {
        let err = Error::from(status_with(Code::DataLoss, "disk on fire", None, None));
        let text = err.to_string();
        assert!(text.contains("DataLoss"), "{text}");
        assert!(text.contains("disk on fire"), "{text}");
    }

    #[test]
    fn empty_message_is_replaced_by_code_description() {
        let err = Error::from(Status::new(Code::PermissionDenied, ""));
        assert!(!err.message().is_empty());
    }

    #[test]
    fn display_keeps_server_message() {
        let err = Error::from(status_with(
            Code::DeadlineExceeded,
            "waited 10000 ms for billing/a",
            Some("LOCK_TIMEOUT"),
            None,
        ));
        assert_eq!(err.to_string(), "lock not acquired before the acquire timeout: waited 10000 ms for billing/a");
    }

    #[test]
    fn leader_address_extraction() {
        let s = status_with(Code::Unavailable, "not leader", Some("NOT_LEADER"), Some("10.0.0.2:7070"));
        assert_eq!(leader_addr(&s), Some("10.0.0.2:7070"));
        assert_eq!(error_kind(&s), Some("NOT_LEADER"));
        let blank = status_with(Code::Unavailable, "electing", None, Some("  "));
        assert_eq!(leader_addr(&blank), None);
        assert_eq!(leader_addr(&Status::unavailable("x")), None);
    }

    #[test]
    fn a_plain_http_answer_is_recognised_by_tonics_message() {
        let http = Status::new(Code::Unimplemented, "grpc-status header missing, mapped from HTTP status code 404");
        assert_eq!(plain_http_status(&http), Some(404));
        assert_eq!(plain_http_status(&Status::unimplemented("unknown method Begin")), None);
        let err = not_grpc("http://127.0.0.1:7071", 404);
        assert_eq!(err.code(), "CONFIG");
        assert!(err.message().starts_with("http://127.0.0.1:7071 answered plain HTTP (status 404), not gRPC"), "{err}");
        assert!(err.message().contains("gRPC port (default 7070, `--listen`)"), "{err}");
    }
}

//! The one error the foreign side sees, and its mapping from core's error.

use caerus_core as core;
use core::{ErrorClass, ErrorKind};

use crate::types::{CycleMember, EndCause};

/// A deadlock the server broke, as the victim's error reports it: the cycle in wait-for
/// order (each member waits for the next, the last for the first), the aborted member and
/// the policy that chose it (`LOWEST_PRIORITY_THEN_YOUNGEST`, `YOUNGEST` or `OLDEST`), as
/// a `DeadlockResolved` event's detail has them.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Deadlock {
    pub cycle: Vec<CycleMember>,
    pub victim_transaction_id: u64,
    pub policy: String,
}

impl From<&core::Deadlock> for Deadlock {
    fn from(d: &core::Deadlock) -> Self {
        Deadlock {
            cycle: d.cycle.clone(),
            victim_transaction_id: d.victim_transaction_id,
            policy: d.policy.as_str().to_string(),
        }
    }
}

/// Everything a Caerus DLS call can fail with: one variant per class of the SDKs' error
/// table (`caerus_types::ErrorClass::all()`, the same classes as the Python and Node SDKs);
/// a test checks that the variants and the table agree. `message` is the server's message
/// (Kotlin names it `detail`: a Kotlin exception's `message` is its own); a lost
/// transaction's variants say what ended it and a deadlock victim's the broken cycle.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
pub enum DlsError {
    /// `LOCK_TIMEOUT`: the acquire timeout passed; the transaction is still active.
    LockTimeout { message: String },
    /// `DEADLOCK_VICTIM`: the server aborted the transaction to break a deadlock.
    DeadlockVictim {
        message: String,
        /// Always `DEADLOCK_VICTIM` (as on a `TransactionLost`, for one way to read both).
        end_cause: Option<EndCause>,
        /// The broken cycle; `None` when the server no longer had it (its event log is bounded).
        deadlock: Option<Deadlock>,
    },
    /// `TRANSACTION_LOST`: the transaction is no longer active; its locks are gone.
    TransactionLost {
        message: String,
        /// What ended it, as the server recorded it (`LEASE_EXPIRED`, `OPERATOR_ABORT`, ...);
        /// `None` when the server did not say (e.g. the client noticed the loss itself).
        end_cause: Option<EndCause>,
    },
    /// `TRANSACTION_NOT_FOUND`: the server does not know the transaction.
    TransactionNotFound { message: String },
    /// `INVALID_ARGUMENT`: a request field failed validation.
    InvalidArgument { message: String },
    /// `UNAUTHENTICATED`: the API key is missing or unknown.
    Unauthenticated { message: String },
    /// `PERMISSION_DENIED`: the API key may not use this namespace or transaction.
    PermissionDenied { message: String },
    /// `WAIT_CANCELLED`: the wait was withdrawn by a release of the same key.
    WaitCancelled { message: String },
    /// `ALREADY_WAITING`: the transaction already waits for another lock.
    AlreadyWaiting { message: String },
    /// `CURSOR_EXPIRED`: the event cursor is older than the server keeps.
    CursorExpired { message: String },
    /// `RESOURCE_EXHAUSTED`: a server limit (named in the message, with its flag) refused
    /// the request; nothing changed.
    ResourceExhausted { message: String },
    /// `MEMBERSHIP_REFUSED`: a membership change does not fit the current membership;
    /// nothing changed.
    MembershipRefused { message: String },
    /// `UNAVAILABLE`: no leader could be reached before the retry deadline.
    Unavailable { message: String },
    /// `CONFIG`: the client configuration is invalid.
    Config { message: String },
    /// `INTERNAL`: anything else.
    Internal { message: String },
}

impl DlsError {
    /// The server's kind, `None` for [`DlsError::Config`].
    pub fn kind(&self) -> Option<ErrorKind> {
        Some(match self {
            DlsError::LockTimeout { .. } => ErrorKind::LockTimeout,
            DlsError::DeadlockVictim { .. } => ErrorKind::DeadlockVictim,
            DlsError::TransactionLost { .. } => ErrorKind::TransactionLost,
            DlsError::TransactionNotFound { .. } => ErrorKind::TransactionNotFound,
            DlsError::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            DlsError::Unauthenticated { .. } => ErrorKind::Unauthenticated,
            DlsError::PermissionDenied { .. } => ErrorKind::PermissionDenied,
            DlsError::WaitCancelled { .. } => ErrorKind::WaitCancelled,
            DlsError::AlreadyWaiting { .. } => ErrorKind::AlreadyWaiting,
            DlsError::CursorExpired { .. } => ErrorKind::CursorExpired,
            DlsError::ResourceExhausted { .. } => ErrorKind::ResourceExhausted,
            DlsError::MembershipRefused { .. } => ErrorKind::MembershipRefused,
            DlsError::Unavailable { .. } => ErrorKind::Unavailable,
            DlsError::Internal { .. } => ErrorKind::Internal,
            DlsError::Config { .. } => return None,
        })
    }

    /// The stable code, e.g. `"LOCK_TIMEOUT"`.
    pub fn code(&self) -> &'static str {
        self.kind().map_or(ErrorClass::CONFIG, ErrorClass::of).code
    }

    /// The server's (or client's) message, without the code.
    pub fn message(&self) -> &str {
        match self {
            DlsError::LockTimeout { message }
            | DlsError::DeadlockVictim { message, .. }
            | DlsError::TransactionLost { message, .. }
            | DlsError::TransactionNotFound { message }
            | DlsError::InvalidArgument { message }
            | DlsError::Unauthenticated { message }
            | DlsError::PermissionDenied { message }
            | DlsError::WaitCancelled { message }
            | DlsError::AlreadyWaiting { message }
            | DlsError::CursorExpired { message }
            | DlsError::ResourceExhausted { message }
            | DlsError::MembershipRefused { message }
            | DlsError::Unavailable { message }
            | DlsError::Config { message }
            | DlsError::Internal { message } => message,
        }
    }
}

#[uniffi::export]
impl DlsError {
    /// The stable code of the error, e.g. `"LOCK_TIMEOUT"`, as in the Rust, Python and Node
    /// SDKs (Kotlin's and Swift's `code` read it).
    pub fn error_code(&self) -> String {
        self.code().to_string()
    }
}

/// One class of the error table every SDK shares (`caerus_types::ErrorClass`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ErrorClassInfo {
    /// The stable code, e.g. `LOCK_TIMEOUT`.
    pub code: String,
    /// The class name, e.g. `LockTimeout` (`DlsException.LockTimeout`, `DlsError.LockTimeout`).
    pub stem: String,
    /// Whether making the same call again later may succeed.
    pub retryable: bool,
    /// What the error means, in one line.
    pub description: String,
}

/// The SDKs' error table: the classes of [`DlsError`], one per variant.
#[uniffi::export]
pub fn error_classes() -> Vec<ErrorClassInfo> {
    ErrorClass::all()
        .map(|c| ErrorClassInfo {
            code: c.code.to_string(),
            stem: c.stem.to_string(),
            retryable: c.retryable,
            description: c.description.to_string(),
        })
        .collect()
}

impl std::fmt::Display for DlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for DlsError {}

impl From<core::Error> for DlsError {
    fn from(e: core::Error) -> Self {
        let message = e.message().to_string();
        let end_cause = e.end_cause();
        let Some(kind) = e.kind() else { return DlsError::Config { message } };
        match kind {
            ErrorKind::LockTimeout => DlsError::LockTimeout { message },
            ErrorKind::DeadlockVictim => {
                let deadlock = match &e {
                    core::Error::DeadlockVictim { deadlock, .. } => deadlock.as_deref().map(Deadlock::from),
                    _ => None,
                };
                DlsError::DeadlockVictim { message, end_cause, deadlock }
            }
            ErrorKind::TransactionLost => DlsError::TransactionLost { message, end_cause },
            ErrorKind::TransactionNotFound => DlsError::TransactionNotFound { message },
            ErrorKind::InvalidArgument | ErrorKind::ApiKeyExists | ErrorKind::ApiKeyNotFound => {
                DlsError::InvalidArgument { message }
            }
            ErrorKind::Unauthenticated => DlsError::Unauthenticated { message },
            ErrorKind::PermissionDenied => DlsError::PermissionDenied { message },
            ErrorKind::WaitCancelled => DlsError::WaitCancelled { message },
            ErrorKind::AlreadyWaiting => DlsError::AlreadyWaiting { message },
            ErrorKind::CursorExpired => DlsError::CursorExpired { message },
            ErrorKind::ResourceExhausted => DlsError::ResourceExhausted { message },
            ErrorKind::MembershipRefused => DlsError::MembershipRefused { message },
            ErrorKind::NotLeader | ErrorKind::Unavailable => DlsError::Unavailable { message },
            ErrorKind::Internal => DlsError::Internal { message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each class of the table, as core raises it.
    fn core_error_of(class: ErrorClass) -> core::Error {
        let message = "m".to_string();
        match class.kind {
            None => core::Error::Config { message },
            Some(ErrorKind::LockTimeout) => core::Error::LockTimeout { message },
            Some(ErrorKind::DeadlockVictim) => core::Error::DeadlockVictim { message, deadlock: None },
            Some(ErrorKind::TransactionLost) => core::Error::TransactionLost { message, cause: None },
            Some(ErrorKind::TransactionNotFound) => core::Error::TransactionNotFound { message },
            Some(ErrorKind::InvalidArgument) => core::Error::InvalidArgument { message, semaphore_permits: None },
            Some(ErrorKind::Unauthenticated) => core::Error::Unauthenticated { message },
            Some(ErrorKind::PermissionDenied) => core::Error::PermissionDenied { message, key_namespaces: None },
            Some(ErrorKind::WaitCancelled) => core::Error::WaitCancelled { message },
            Some(ErrorKind::AlreadyWaiting) => core::Error::AlreadyWaiting { message },
            Some(ErrorKind::CursorExpired) => core::Error::CursorExpired { message },
            Some(ErrorKind::ResourceExhausted) => core::Error::ResourceExhausted { message },
            Some(ErrorKind::MembershipRefused) => core::Error::MembershipRefused { message },
            Some(ErrorKind::Unavailable) => core::Error::Unavailable { message },
            Some(ErrorKind::Internal) => core::Error::Internal { message },
            Some(kind) => panic!("{kind} has no class of its own, yet is in the table"),
        }
    }

    #[test]
    fn every_class_of_the_table_is_a_variant_with_its_code() {
        let mut seen = std::collections::HashSet::new();
        for class in ErrorClass::all() {
            let e = core_error_of(class);
            assert_eq!(e.class(), class);
            let mapped = DlsError::from(e);
            assert_eq!(mapped.code(), class.code);
            assert_eq!(mapped.to_string(), "m");
            // The Kotlin / Swift class name is the variant's name: the table's stem.
            assert!(format!("{mapped:?}").starts_with(&format!("{} ", class.stem)), "{mapped:?} vs {}", class.stem);
            seen.insert(std::mem::discriminant(&mapped));
        }
        assert_eq!(seen.len(), ErrorClass::all().count(), "one variant per class");
    }

    #[test]
    fn a_lost_transaction_keeps_its_cause_and_a_victim_its_cycle() {
        let lost = core::Error::TransactionLost { message: "m".into(), cause: Some(EndCause::LeaseExpired) };
        assert_eq!(
            DlsError::from(lost),
            DlsError::TransactionLost { message: "m".into(), end_cause: Some(EndCause::LeaseExpired) }
        );
        let member = |id: u64, key: &str| core::CycleMember {
            transaction_id: id,
            transaction_name: format!("t{id}"),
            priority: 1,
            namespace: "ns".into(),
            key: key.into(),
            mode: core::LockMode::Exclusive,
        };
        let deadlock = core::Deadlock {
            cycle: vec![member(5, "a"), member(6, "b")],
            victim_transaction_id: 6,
            policy: core::VictimPolicy::Youngest,
        };
        let victim = core::Error::DeadlockVictim { message: "m".into(), deadlock: Some(Box::new(deadlock)) };
        let DlsError::DeadlockVictim { end_cause, deadlock: Some(d), .. } = DlsError::from(victim) else {
            panic!("a victim with its cycle")
        };
        assert_eq!(end_cause, Some(EndCause::DeadlockVictim));
        assert_eq!((d.victim_transaction_id, d.policy.as_str()), (6, "YOUNGEST"));
        assert_eq!(
            d.cycle.iter().map(|m| (m.transaction_id, m.key.as_str())).collect::<Vec<_>>(),
            [(5, "a"), (6, "b")]
        );
        assert_eq!(error_classes().len(), ErrorClass::all().count());
    }

    #[test]
    fn kotlin_renames_every_variant() {
        // A variant left out would give its Kotlin class a field `message` beside the
        // exception's own: the generated Kotlin would not compile.
        let config = include_str!("../uniffi.toml");
        for class in ErrorClass::all() {
            let line = format!("\"DlsError.{}.message\" = \"detail\"", class.stem);
            assert!(config.lines().any(|l| l.trim() == line), "uniffi.toml lacks {line}");
        }
    }

    #[test]
    fn the_committed_swift_error_carries_the_cause_and_the_cycle() {
        // `make check-swift` keeps the committed file equal to the generated one.
        let swift = include_str!("../swift/Sources/CaerusDls/CaerusDls.swift");
        let case = |name: &str| {
            let start = swift.find(&format!("case {name}(message: String")).unwrap_or_else(|| panic!("no case {name}"));
            let rest = &swift[start + 1..];
            rest[..rest.find("\n    case ").unwrap_or(rest.len()).min(rest.find("\n}").unwrap_or(rest.len()))]
                .to_string()
        };
        let victim = case("DeadlockVictim");
        assert!(victim.contains("endCause: EndCause?") && victim.contains("deadlock: Deadlock?"), "{victim}");
        assert!(case("TransactionLost").contains("endCause: EndCause?"));
        for class in ErrorClass::all() {
            case(class.stem);
        }
    }
}

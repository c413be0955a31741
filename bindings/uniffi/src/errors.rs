//! The one flat error the foreign side sees, and its mapping from core's error.

use caerus_core as core;
use core::{ErrorClass, ErrorKind};

/// Everything a Caerus DLS call can fail with: one variant per class of the SDKs' error
/// table (`caerus_types::ErrorClass::all()`, the same classes as the Python and Node SDKs);
/// a test checks that the variants and the table agree. The foreign exception's message is
/// the server's message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
#[uniffi(flat_error)]
pub enum DlsError {
    /// `LOCK_TIMEOUT`: the acquire timeout passed; the transaction is still active.
    LockTimeout { message: String },
    /// `DEADLOCK_VICTIM`: the server aborted the transaction to break a deadlock.
    DeadlockVictim { message: String },
    /// `TRANSACTION_LOST`: the transaction is no longer active; its locks are gone.
    TransactionLost { message: String },
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
            | DlsError::DeadlockVictim { message }
            | DlsError::TransactionLost { message }
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

/// A flat error crosses the boundary as its `Display`: the message alone, since the
/// variant already names the code.
impl std::fmt::Display for DlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for DlsError {}

impl From<core::Error> for DlsError {
    fn from(e: core::Error) -> Self {
        let message = e.message().to_string();
        let Some(kind) = e.kind() else { return DlsError::Config { message } };
        match kind {
            ErrorKind::LockTimeout => DlsError::LockTimeout { message },
            ErrorKind::DeadlockVictim => DlsError::DeadlockVictim { message },
            ErrorKind::TransactionLost => DlsError::TransactionLost { message },
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
}

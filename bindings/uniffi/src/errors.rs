//! The one flat error the foreign side sees, and its mapping from core's error.

use caerus_core as core;

/// Everything a Caerus DLS call can fail with: one variant per stable code of core's
/// `Error::code()` (the same codes as the Python and Node SDKs). The foreign exception's
/// message is the server's message.
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
    /// `UNAVAILABLE`: no leader could be reached before the retry deadline.
    Unavailable { message: String },
    /// `CONFIG`: the client configuration is invalid.
    Config { message: String },
    /// `INTERNAL`: anything else.
    Internal { message: String },
}

impl DlsError {
    /// The stable code, e.g. `"LOCK_TIMEOUT"`.
    pub fn code(&self) -> &'static str {
        match self {
            DlsError::LockTimeout { .. } => "LOCK_TIMEOUT",
            DlsError::DeadlockVictim { .. } => "DEADLOCK_VICTIM",
            DlsError::TransactionLost { .. } => "TRANSACTION_LOST",
            DlsError::TransactionNotFound { .. } => "TRANSACTION_NOT_FOUND",
            DlsError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            DlsError::Unauthenticated { .. } => "UNAUTHENTICATED",
            DlsError::PermissionDenied { .. } => "PERMISSION_DENIED",
            DlsError::WaitCancelled { .. } => "WAIT_CANCELLED",
            DlsError::AlreadyWaiting { .. } => "ALREADY_WAITING",
            DlsError::CursorExpired { .. } => "CURSOR_EXPIRED",
            DlsError::ResourceExhausted { .. } => "RESOURCE_EXHAUSTED",
            DlsError::Unavailable { .. } => "UNAVAILABLE",
            DlsError::Config { .. } => "CONFIG",
            DlsError::Internal { .. } => "INTERNAL",
        }
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
        match e.code() {
            "LOCK_TIMEOUT" => DlsError::LockTimeout { message },
            "DEADLOCK_VICTIM" => DlsError::DeadlockVictim { message },
            "TRANSACTION_LOST" => DlsError::TransactionLost { message },
            "TRANSACTION_NOT_FOUND" => DlsError::TransactionNotFound { message },
            "INVALID_ARGUMENT" => DlsError::InvalidArgument { message },
            "UNAUTHENTICATED" => DlsError::Unauthenticated { message },
            "PERMISSION_DENIED" => DlsError::PermissionDenied { message },
            "WAIT_CANCELLED" => DlsError::WaitCancelled { message },
            "ALREADY_WAITING" => DlsError::AlreadyWaiting { message },
            "CURSOR_EXPIRED" => DlsError::CursorExpired { message },
            "RESOURCE_EXHAUSTED" => DlsError::ResourceExhausted { message },
            "UNAVAILABLE" => DlsError::Unavailable { message },
            "CONFIG" => DlsError::Config { message },
            // INTERNAL and any code added to core later.
            code => {
                DlsError::Internal { message: if code == "INTERNAL" { message } else { format!("{code}: {message}") } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_code_maps_to_the_same_code() {
        let cases = [
            core::Error::LockTimeout { message: "m".into() },
            core::Error::DeadlockVictim { message: "m".into(), deadlock: None },
            core::Error::TransactionLost { message: "m".into(), cause: None },
            core::Error::TransactionNotFound { message: "m".into() },
            core::Error::InvalidArgument { message: "m".into(), semaphore_permits: None },
            core::Error::Unauthenticated { message: "m".into() },
            core::Error::PermissionDenied { message: "m".into(), key_namespaces: None },
            core::Error::WaitCancelled { message: "m".into() },
            core::Error::AlreadyWaiting { message: "m".into() },
            core::Error::CursorExpired { message: "m".into() },
            core::Error::ResourceExhausted { message: "m".into() },
            core::Error::Unavailable { message: "m".into() },
            core::Error::Config { message: "m".into() },
            core::Error::Internal { message: "m".into() },
        ];
        for e in cases {
            let mapped = DlsError::from(e.clone());
            assert_eq!(mapped.code(), e.code());
            assert_eq!(mapped.to_string(), "m");
        }
    }
}

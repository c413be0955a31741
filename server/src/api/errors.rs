//! One mapping from server errors to gRPC statuses, so a code means the same thing on
//! every RPC. Each status also carries `x-dls-error` (the proto's ErrorKind name), the
//! encoded `ErrorDetail` (`x-dls-error-detail-bin`: the kind, the transaction, what ended
//! it, the deadlock that chose it) and, for a follower, the leader's address.

use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::{metadata, Wire};
use caerus_types::ErrorKind;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::locks::{EndCause, Rejection, TxnId, WaitEnd};
use crate::request::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A field failed validation; the message names the field and the rule.
    #[error("{0}")]
    InvalidArgument(String),
    /// Missing or unknown API key.
    #[error("{0}")]
    Unauthenticated(String),
    /// The key may not use this namespace or transaction.
    #[error("{0}")]
    PermissionDenied(String),
    /// The key is limited to namespaces under `prefixes` (sent as `x-dls-key-namespaces-bin`),
    /// and the call's namespace is not one of them.
    #[error("{message}")]
    OutsideNamespaces { message: String, prefixes: Vec<String> },
    /// The key is a semaphore of `declared` permits (sent as `x-dls-semaphore-permits`),
    /// asked for with another count or as a lock.
    #[error("{message}")]
    SemaphoreMismatch { message: String, declared: u32 },
    /// Unknown transaction.
    #[error("transaction {0} not found (unknown, or finished and forgotten)")]
    NotFound(TxnId),
    /// The transaction is no longer active; `code` is ABORTED inside a wait,
    /// FAILED_PRECONDITION otherwise. `cause` is what ended it, when it has ended.
    #[error("{message}")]
    TransactionLost { message: String, code: Code, txn: TxnId, cause: Option<EndCause> },
    /// The transaction was aborted to break a deadlock: the cycle and the policy, while the
    /// event log still has them.
    #[error("{message}")]
    DeadlockVictim { message: String, txn: TxnId, deadlock: Option<pb::DeadlockResolved> },
    /// The acquire timeout passed.
    #[error("{0}")]
    LockTimeout(String),
    /// WatchEvents from a cursor older than the retained log.
    #[error("{0}")]
    CursorExpired(String),
    /// The wait was withdrawn by ReleaseLock.
    #[error("{0}")]
    WaitCancelled(String),
    /// The transaction already waits for another lock.
    #[error("{0}")]
    AlreadyWaiting(String),
    /// This node is not the leader.
    #[error("{}", crate::request::error::not_leader_message(.leader))]
    NotLeader { leader: Option<(u64, String)> },
    /// The cluster could not commit in time; retry with the same request_id.
    #[error("{0}")]
    Unavailable(String),
    /// A configured limit refused the request; nothing changed. The message names the
    /// limit and its flag.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The leader sheds new work while its proposal queue is full; retry after the hint
    /// (sent as `x-dls-retry-after-ms`) with the same request_id.
    #[error("{message}")]
    Overloaded { message: String, retry_after: Duration },
    /// A membership change does not fit the current membership; nothing changed.
    #[error("{0}")]
    MembershipRefused(String),
    /// The request needs a feature level some member does not read yet; nothing changed.
    /// FAILED_PRECONDITION with the kind MEMBERSHIP_REFUSED: the membership (its oldest
    /// node) is what refuses, and it is the same answer once those nodes are upgraded.
    #[error("{0}")]
    BelowFeatureLevel(String),
    /// A cluster API key of that name exists already (in the cluster or the keys file).
    #[error("{0}")]
    AlreadyExists(String),
    /// No cluster API key of that name.
    #[error("{0}")]
    KeyNotFound(String),
    /// The call needs something this node does not have (keys required).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A bug or storage failure.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// The gRPC code and the ErrorKind (`x-dls-error`) this error is answered with.
    pub fn code_and_kind(&self) -> (Code, ErrorKind) {
        match self {
            ApiError::InvalidArgument(_) | ApiError::SemaphoreMismatch { .. } => {
                (Code::InvalidArgument, ErrorKind::InvalidArgument)
            }
            ApiError::Unauthenticated(_) => (Code::Unauthenticated, ErrorKind::Unauthenticated),
            ApiError::PermissionDenied(_) | ApiError::OutsideNamespaces { .. } => {
                (Code::PermissionDenied, ErrorKind::PermissionDenied)
            }
            ApiError::NotFound(_) => (Code::NotFound, ErrorKind::TransactionNotFound),
            ApiError::TransactionLost { code, .. } => (*code, ErrorKind::TransactionLost),
            ApiError::DeadlockVictim { .. } => (Code::Aborted, ErrorKind::DeadlockVictim),
            ApiError::LockTimeout(_) => (Code::DeadlineExceeded, ErrorKind::LockTimeout),
            ApiError::CursorExpired(_) => (Code::OutOfRange, ErrorKind::CursorExpired),
            ApiError::WaitCancelled(_) => (Code::Cancelled, ErrorKind::WaitCancelled),
            ApiError::AlreadyWaiting(_) => (Code::FailedPrecondition, ErrorKind::AlreadyWaiting),
            ApiError::NotLeader { .. } => (Code::Unavailable, ErrorKind::NotLeader),
            ApiError::Unavailable(_) | ApiError::Overloaded { .. } => (Code::Unavailable, ErrorKind::Unavailable),
            ApiError::ResourceExhausted(_) => (Code::ResourceExhausted, ErrorKind::ResourceExhausted),
            ApiError::MembershipRefused(_) | ApiError::BelowFeatureLevel(_) => {
                (Code::FailedPrecondition, ErrorKind::MembershipRefused)
            }
            ApiError::AlreadyExists(_) => (Code::AlreadyExists, ErrorKind::ApiKeyExists),
            ApiError::KeyNotFound(_) => (Code::NotFound, ErrorKind::ApiKeyNotFound),
            // Only a node without keys answers it (no cluster keys there): the nearest kind.
            ApiError::FailedPrecondition(_) => (Code::FailedPrecondition, ErrorKind::InvalidArgument),
            ApiError::Internal(_) => (Code::Internal, ErrorKind::Internal),
        }
    }

    /// The structured part of the answer: the kind and, where they apply, the transaction,
    /// what ended it and the deadlock that chose it.
    pub fn detail(&self) -> pb::ErrorDetail {
        let mut detail = pb::ErrorDetail { kind: self.code_and_kind().1.to_wire(), ..Default::default() };
        match self {
            ApiError::NotFound(txn) => detail.transaction_id = *txn,
            ApiError::TransactionLost { txn, cause, .. } => {
                detail.transaction_id = *txn;
                detail.end_cause = super::convert::cause(*cause);
            }
            ApiError::DeadlockVictim { txn, deadlock, .. } => {
                detail.transaction_id = *txn;
                detail.end_cause = EndCause::DeadlockVictim.to_wire();
                detail.deadlock = deadlock.clone();
            }
            _ => {}
        }
        detail
    }

    /// A transaction that is no longer active, answered outside a wait.
    pub fn not_active(txn: TxnId, cause: Option<EndCause>, message: String) -> ApiError {
        ApiError::TransactionLost { message, code: Code::FailedPrecondition, txn, cause }
    }

    /// How a wait that ended without a grant is reported on the AcquireLock stream.
    pub fn from_wait_end(txn: TxnId, end: &WaitEnd) -> ApiError {
        match end {
            WaitEnd::TimedOut => {
                ApiError::LockTimeout(format!("acquire timeout passed; transaction {txn} is still active"))
            }
            WaitEnd::Cancelled => {
                ApiError::WaitCancelled(format!("the wait of transaction {txn} was withdrawn by ReleaseLock"))
            }
            WaitEnd::TxnEnded { cause: EndCause::DeadlockVictim, reason, .. } => ApiError::DeadlockVictim {
                message: format!("transaction {txn} was aborted as a {reason}"),
                txn,
                deadlock: None,
            },
            WaitEnd::TxnEnded { state, cause, reason } => ApiError::TransactionLost {
                message: format!("transaction {txn} ended while waiting: {state} ({reason})"),
                code: Code::Aborted,
                txn,
                cause: Some(*cause),
            },
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::NotFound(txn) => ApiError::NotFound(txn),
            Rejection::NotActive { txn, cause, .. } => ApiError::not_active(txn, cause, r.to_string()),
            r @ Rejection::AlreadyWaiting { .. } => ApiError::AlreadyWaiting(r.to_string()),
            // A claim without holding the lock EXCLUSIVE is a misuse: a transaction that lost
            // its lock is not active any more and is answered so first.
            r @ (Rejection::RequestIdReused(_) | Rejection::Invalid(_) | Rejection::NotHeldExclusive { .. }) => {
                ApiError::InvalidArgument(r.to_string())
            }
            r @ Rejection::NestedBatch => ApiError::Internal(r.to_string()),
            r @ (Rejection::OutsideScope { .. } | Rejection::ApiKeyOutsideScope { .. }) => {
                ApiError::PermissionDenied(r.to_string())
            }
            r @ Rejection::ApiKeyExists(_) => ApiError::AlreadyExists(r.to_string()),
            r @ Rejection::ApiKeyNotFound(_) => ApiError::KeyNotFound(r.to_string()),
            Rejection::SemaphoreMismatch { declared, .. } => {
                ApiError::SemaphoreMismatch { message: r.to_string(), declared }
            }
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidArgument(m) => ApiError::InvalidArgument(m),
            EngineError::PermissionDenied(m) => ApiError::PermissionDenied(m),
            EngineError::OutsideNamespaces { message, prefixes } => ApiError::OutsideNamespaces { message, prefixes },
            EngineError::NotFound(txn) => ApiError::NotFound(txn),
            EngineError::TransactionLost { txn, cause, message } => ApiError::not_active(txn, cause, message),
            EngineError::Rejected(r) => r.into(),
            EngineError::CursorExpired(m) => ApiError::CursorExpired(m),
            EngineError::NotLeader { leader } => ApiError::NotLeader { leader },
            EngineError::Unavailable(m) => ApiError::Unavailable(m),
            EngineError::ResourceExhausted(m) => ApiError::ResourceExhausted(m),
            EngineError::Overloaded { message, retry_after } => ApiError::Overloaded { message, retry_after },
            EngineError::MembershipRefused(m) => ApiError::MembershipRefused(m),
            EngineError::BelowFeatureLevel(m) => ApiError::BelowFeatureLevel(m),
            EngineError::Internal(m) => ApiError::Internal(m),
        }
    }
}

impl From<EngineError> for Status {
    fn from(e: EngineError) -> Status {
        ApiError::from(e).into()
    }
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        let (code, kind) = e.code_and_kind();
        let mut status = Status::new(code, e.to_string());
        caerus_proto::set_error_detail(&mut status, &e.detail());
        let md = status.metadata_mut();
        md.insert(metadata::ERROR_KIND, MetadataValue::from_static(kind.as_str()));
        if let ApiError::NotLeader { leader: Some((id, addr)) } = &e {
            if let Ok(v) = addr.parse() {
                md.insert(metadata::LEADER_ADDR, v);
            }
            md.insert(metadata::LEADER_ID, MetadataValue::from(*id));
        }
        if let ApiError::Overloaded { retry_after, .. } = &e {
            md.insert(metadata::RETRY_AFTER_MS, MetadataValue::from(retry_after.as_millis() as u64));
        }
        // Facts a client words its own advice from (the CLI names its flags), so that no
        // client parses the English message.
        match &e {
            ApiError::SemaphoreMismatch { declared, .. } => {
                md.insert(metadata::SEMAPHORE_PERMITS, MetadataValue::from(*declared));
            }
            ApiError::OutsideNamespaces { prefixes, .. } => {
                md.insert_bin(metadata::KEY_NAMESPACES, MetadataValue::from_bytes(prefixes.join("\n").as_bytes()));
            }
            _ => {}
        }
        status
    }
}

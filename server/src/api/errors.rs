//! One mapping from server errors to gRPC statuses, so a code means the same thing on
//! every RPC. Each status also carries `x-dls-error` (the proto's ErrorKind name), the
//! encoded `ErrorDetail` (`x-dls-error-detail-bin`: the kind, the transaction, what ended
//! it, the deadlock that chose it) and, for a follower, the leader's address.

use caerus_proto::v1 as pb;
use caerus_proto::{metadata, Wire};
use caerus_types::ErrorKind;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::locks::{EndCause, Rejection, TxnId, WaitEnd};
use crate::request::EngineError;

/// The answer of a call that failed: what the engine answered, or what only this layer
/// knows (the caller's key, a wait on the stream, the keys a node holds).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The engine's answer, the variants both layers share (validation, permissions,
    /// leadership, availability, limits, membership, internal errors). Built with `From`,
    /// which answers the engine's transaction-level refusals as the variants below.
    #[error(transparent)]
    Engine(EngineError),
    /// Missing or unknown API key.
    #[error("{0}")]
    Unauthenticated(String),
    /// The key is a semaphore of `declared` permits (sent as `x-dls-semaphore-permits`),
    /// asked for with another count or as a lock.
    #[error("{message}")]
    SemaphoreMismatch { message: String, declared: u32 },
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
    /// The wait was withdrawn by ReleaseLock.
    #[error("{0}")]
    WaitCancelled(String),
    /// The transaction already waits for another lock.
    #[error("{0}")]
    AlreadyWaiting(String),
    /// A cluster API key of that name exists already (in the cluster or the keys file).
    #[error("{0}")]
    AlreadyExists(String),
    /// No cluster API key of that name.
    #[error("{0}")]
    KeyNotFound(String),
    /// The call needs something this node does not have (keys required).
    #[error("{0}")]
    FailedPrecondition(String),
}

/// The gRPC code and the ErrorKind of each of the engine's answers.
fn engine_code_and_kind(e: &EngineError) -> (Code, ErrorKind) {
    match e {
        EngineError::InvalidArgument(_) => (Code::InvalidArgument, ErrorKind::InvalidArgument),
        EngineError::PermissionDenied(_) | EngineError::OutsideNamespaces { .. } => {
            (Code::PermissionDenied, ErrorKind::PermissionDenied)
        }
        EngineError::NotFound(_) => (Code::NotFound, ErrorKind::TransactionNotFound),
        EngineError::TransactionLost { .. } => (Code::FailedPrecondition, ErrorKind::TransactionLost),
        // `From<EngineError>` answers a rejection as its own variant; the same here.
        EngineError::Rejected(r) => ApiError::from(r.clone()).code_and_kind(),
        EngineError::CursorExpired(_) => (Code::OutOfRange, ErrorKind::CursorExpired),
        EngineError::NotLeader { .. } => (Code::Unavailable, ErrorKind::NotLeader),
        EngineError::Unavailable(_) | EngineError::Overloaded { .. } => (Code::Unavailable, ErrorKind::Unavailable),
        EngineError::ResourceExhausted(_) => (Code::ResourceExhausted, ErrorKind::ResourceExhausted),
        // FAILED_PRECONDITION with the kind MEMBERSHIP_REFUSED for a feature level too: the
        // membership (its oldest node) is what refuses, and it is the same answer once those
        // nodes are upgraded.
        EngineError::MembershipRefused(_) | EngineError::BelowFeatureLevel(_) => {
            (Code::FailedPrecondition, ErrorKind::MembershipRefused)
        }
        EngineError::Internal(_) => (Code::Internal, ErrorKind::Internal),
    }
}

impl ApiError {
    /// A field failed validation; the message names the field and the rule.
    pub fn invalid_argument(message: String) -> ApiError {
        ApiError::Engine(EngineError::InvalidArgument(message))
    }

    /// The key may not use this namespace, transaction or call.
    pub fn permission_denied(message: String) -> ApiError {
        ApiError::Engine(EngineError::PermissionDenied(message))
    }

    /// This node is not the leader; the leader's id and address when it is known.
    pub fn not_leader(leader: Option<(u64, String)>) -> ApiError {
        ApiError::Engine(EngineError::NotLeader { leader })
    }

    /// A bug or a storage failure.
    pub fn internal(message: String) -> ApiError {
        ApiError::Engine(EngineError::Internal(message))
    }

    /// The gRPC code and the ErrorKind (`x-dls-error`) this error is answered with.
    pub fn code_and_kind(&self) -> (Code, ErrorKind) {
        match self {
            ApiError::Engine(e) => engine_code_and_kind(e),
            ApiError::SemaphoreMismatch { .. } => (Code::InvalidArgument, ErrorKind::InvalidArgument),
            ApiError::Unauthenticated(_) => (Code::Unauthenticated, ErrorKind::Unauthenticated),
            ApiError::TransactionLost { code, .. } => (*code, ErrorKind::TransactionLost),
            ApiError::DeadlockVictim { .. } => (Code::Aborted, ErrorKind::DeadlockVictim),
            ApiError::LockTimeout(_) => (Code::DeadlineExceeded, ErrorKind::LockTimeout),
            ApiError::WaitCancelled(_) => (Code::Cancelled, ErrorKind::WaitCancelled),
            ApiError::AlreadyWaiting(_) => (Code::FailedPrecondition, ErrorKind::AlreadyWaiting),
            ApiError::AlreadyExists(_) => (Code::AlreadyExists, ErrorKind::ApiKeyExists),
            ApiError::KeyNotFound(_) => (Code::NotFound, ErrorKind::ApiKeyNotFound),
            // Only a node without keys answers it (no cluster keys there): the nearest kind.
            ApiError::FailedPrecondition(_) => (Code::FailedPrecondition, ErrorKind::InvalidArgument),
        }
    }

    /// The structured part of the answer: the kind and, where they apply, the transaction,
    /// what ended it and the deadlock that chose it.
    pub fn detail(&self) -> pb::ErrorDetail {
        let mut detail = pb::ErrorDetail { kind: self.code_and_kind().1.to_wire(), ..Default::default() };
        match self {
            ApiError::Engine(EngineError::NotFound(txn)) => detail.transaction_id = *txn,
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
            Rejection::NotFound(txn) => ApiError::Engine(EngineError::NotFound(txn)),
            Rejection::NotActive { txn, cause, .. } => ApiError::not_active(txn, cause, r.to_string()),
            r @ Rejection::AlreadyWaiting { .. } => ApiError::AlreadyWaiting(r.to_string()),
            // A claim without holding the lock EXCLUSIVE is a misuse: a transaction that lost
            // its lock is not active any more and is answered so first.
            r @ (Rejection::RequestIdReused(_) | Rejection::Invalid(_) | Rejection::NotHeldExclusive { .. }) => {
                ApiError::invalid_argument(r.to_string())
            }
            r @ Rejection::NestedBatch => ApiError::internal(r.to_string()),
            r @ (Rejection::OutsideScope { .. } | Rejection::ApiKeyOutsideScope { .. }) => {
                ApiError::permission_denied(r.to_string())
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
            EngineError::TransactionLost { txn, cause, message } => ApiError::not_active(txn, cause, message),
            EngineError::Rejected(r) => r.into(),
            e => ApiError::Engine(e),
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
        if let ApiError::Engine(EngineError::NotLeader { leader: Some((id, addr)) }) = &e {
            if let Ok(v) = addr.parse() {
                md.insert(metadata::LEADER_ADDR, v);
            }
            md.insert(metadata::LEADER_ID, MetadataValue::from(*id));
        }
        if let ApiError::Engine(EngineError::Overloaded { retry_after, .. }) = &e {
            md.insert(metadata::RETRY_AFTER_MS, MetadataValue::from(retry_after.as_millis() as u64));
        }
        // Facts a client words its own advice from (the CLI names its flags), so that no
        // client parses the English message.
        match &e {
            ApiError::SemaphoreMismatch { declared, .. } => {
                md.insert(metadata::SEMAPHORE_PERMITS, MetadataValue::from(*declared));
            }
            ApiError::Engine(EngineError::OutsideNamespaces { prefixes, .. }) => {
                md.insert_bin(metadata::KEY_NAMESPACES, MetadataValue::from_bytes(prefixes.join("\n").as_bytes()));
            }
            _ => {}
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn answer(e: impl Into<ApiError>) -> (Code, String, String) {
        let status = Status::from(e.into());
        let kind = status.metadata().get(metadata::ERROR_KIND).unwrap().to_str().unwrap().to_string();
        (status.code(), kind, status.message().to_string())
    }

    /// The engine's answers keep their code, kind and message whether they come through
    /// `ApiError::Engine` or a rejection, and the facts a client acts on stay in metadata.
    #[test]
    fn the_engines_answers_keep_their_status_kind_message_and_metadata() {
        let leader = Some((2, "10.0.0.2:7070".to_string()));
        let status = Status::from(EngineError::NotLeader { leader: leader.clone() });
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(status.message(), "this node is not the leader; the leader is node 2 at 10.0.0.2:7070");
        assert_eq!(status.metadata().get(metadata::ERROR_KIND).unwrap(), "NOT_LEADER");
        assert_eq!(status.metadata().get(metadata::LEADER_ADDR).unwrap(), "10.0.0.2:7070");
        assert_eq!(status.metadata().get(metadata::LEADER_ID).unwrap(), "2");
        assert_eq!(Status::from(ApiError::not_leader(leader)).metadata().get(metadata::LEADER_ID).unwrap(), "2");

        let overloaded =
            Status::from(EngineError::Overloaded { message: "busy".into(), retry_after: Duration::from_millis(40) });
        assert_eq!(overloaded.metadata().get(metadata::RETRY_AFTER_MS).unwrap(), "40");
        assert_eq!(
            answer(EngineError::Internal("x".into())),
            (Code::Internal, "INTERNAL".into(), "internal error: x".into())
        );
        assert_eq!(
            answer(EngineError::NotFound(7)),
            (
                Code::NotFound,
                "TRANSACTION_NOT_FOUND".into(),
                "transaction 7 not found (unknown, or finished and forgotten)".into()
            )
        );
        assert_eq!(ApiError::from(EngineError::NotFound(7)).detail().transaction_id, 7);
        assert_eq!(answer(EngineError::BelowFeatureLevel("n".into())).0, Code::FailedPrecondition);
        assert_eq!(answer(EngineError::BelowFeatureLevel("n".into())).1, "MEMBERSHIP_REFUSED");
        // A transaction-level refusal is answered as outside a wait: FAILED_PRECONDITION.
        let lost = EngineError::TransactionLost { txn: 3, cause: None, message: "gone".into() };
        assert_eq!(answer(lost), (Code::FailedPrecondition, "TRANSACTION_LOST".into(), "gone".into()));
        let rejected = EngineError::Rejected(Rejection::NotFound(9));
        assert_eq!(engine_code_and_kind(&rejected), (Code::NotFound, ErrorKind::TransactionNotFound));
        assert_eq!(answer(rejected).0, Code::NotFound);
    }
}

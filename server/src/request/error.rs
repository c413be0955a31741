//! What the engine answers when it cannot do what was asked, in domain terms.
//! `api::errors` maps each variant to one gRPC status; the engine knows nothing of gRPC.

use std::time::Duration;

use crate::locks::{EndCause, Rejection, TxnId};
use crate::raft::types::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A request does not fit what the engine checks itself (a membership change's
    /// addresses); the message names the field and the rule.
    #[error("{0}")]
    InvalidArgument(String),
    /// The caller may not use this namespace or transaction.
    #[error("{0}")]
    PermissionDenied(String),
    /// The caller's key is limited to namespaces under `prefixes`, and this one is not.
    #[error("{message}")]
    OutsideNamespaces { message: String, prefixes: Vec<String> },
    /// Unknown transaction.
    #[error("transaction {0} not found (unknown, or finished and forgotten)")]
    NotFound(TxnId),
    /// The transaction is no longer active, or its lease lapsed; nothing was renewed.
    /// `cause` is what ended it, when that is known.
    #[error("{message}")]
    TransactionLost { txn: TxnId, cause: Option<EndCause>, message: String },
    /// The lock table refused the command; nothing changed.
    #[error("{0}")]
    Rejected(Rejection),
    /// Reading the event log from a cursor older than what it retains.
    #[error("{0}")]
    CursorExpired(String),
    /// This node is not the leader; the leader's id and address when it is known.
    #[error("{}", not_leader_message(.leader))]
    NotLeader { leader: Option<(NodeId, String)> },
    /// The cluster could not commit or confirm in time; retry with the same request id.
    #[error("{0}")]
    Unavailable(String),
    /// A configured limit refused the request; nothing changed. The message names the
    /// limit and its flag.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The proposal queue is full: new work is shed; retry after `retry_after`.
    #[error("{message}")]
    Overloaded { message: String, retry_after: Duration },
    /// A membership change does not fit the current membership; nothing changed.
    #[error("{0}")]
    MembershipRefused(String),
    /// The request needs a feature level some member does not read; nothing was proposed.
    /// The message names each node to upgrade.
    #[error("{0}")]
    BelowFeatureLevel(String),
    /// A bug or a storage failure.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What a client is told when this node cannot serve: the leader to go to, or to wait for
/// an election. The engine's and the RPC layer's NOT_LEADER say the same.
pub fn not_leader_message(leader: &Option<(NodeId, String)>) -> String {
    match leader {
        Some((id, addr)) => format!("this node is not the leader; the leader is node {id} at {addr}"),
        None => "this node is not the leader; no leader is elected yet, retry shortly".to_string(),
    }
}

impl From<Rejection> for EngineError {
    fn from(r: Rejection) -> Self {
        EngineError::Rejected(r)
    }
}

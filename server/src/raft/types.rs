//! The raft type configuration and short aliases for openraft's generic types.

use serde::{Deserialize, Serialize};

use crate::locks::{LogCommand, Outcome};

/// Raft node identifier (`--node-id`).
pub type NodeId = u64;

/// A cluster member's two addresses, part of the replicated membership.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Where clients reach it (the address a follower's redirect names).
    pub addr: String,
    /// Where its peers reach it: the raft transport, never served on the client port.
    pub peer_addr: String,
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (peers: {})", self.addr, self.peer_addr)
    }
}

openraft::declare_raft_types!(
    /// Raft types of the lock service: log entries are lock commands, responses outcomes.
    pub TypeConfig:
        D = LogCommand,
        R = Outcome,
        NodeId = NodeId,
        Node = Member,
        // A snapshot file on disk, streamed chunk by chunk to and from followers.
        SnapshotData = super::snapshot_file::SnapshotFile,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type Node = Member;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type Snapshot = openraft::storage::Snapshot<TypeConfig>;
pub type RaftError<E = openraft::error::Infallible> = openraft::error::RaftError<NodeId, E>;
pub type RPCError<E = openraft::error::Infallible> = openraft::error::RPCError<NodeId, Node, RaftError<E>>;
pub type ClientWriteError = openraft::error::ClientWriteError<NodeId, Node>;
pub type CheckIsLeaderError = openraft::error::CheckIsLeaderError<NodeId, Node>;
pub type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;
pub type ForwardToLeader = openraft::error::ForwardToLeader<NodeId, Node>;

/// Encoding of everything raft stores or sends: compact and fast; all types are ours or
/// openraft's plain serde types.
pub mod codec {
    use serde::{de::DeserializeOwned, Serialize};

    pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, bincode::Error> {
        bincode::serialize(v)
    }

    pub fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, bincode::Error> {
        bincode::deserialize(b)
    }
}

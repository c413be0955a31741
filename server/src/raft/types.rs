//! The raft type configuration and short aliases for openraft's generic types.

use crate::locks::{LogCommand, Outcome};

/// Raft node identifier (`--node-id`).
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Raft types of the lock service: log entries are lock commands, responses outcomes.
    pub TypeConfig:
        D = LogCommand,
        R = Outcome,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        // A snapshot file on disk, streamed chunk by chunk to and from followers.
        SnapshotData = super::snapshot_store::SnapshotFile,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type Node = openraft::BasicNode;
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

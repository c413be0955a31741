//! The Caerus DLS wire contract, generated from `proto/caerus/dls/v1/*.proto`.
//!
//! `v1` is the public client API (`LockService`); `raft` is the internal node-to-node
//! service and must never be exposed to clients.

#![allow(clippy::all)]

/// Public client API: package `caerus.dls.v1`.
pub mod v1 {
    tonic::include_proto!("caerus.dls.v1");
}

/// Internal raft transport between nodes: package `caerus.dls.raft.v1`.
pub mod raft {
    tonic::include_proto!("caerus.dls.raft.v1");
}

/// Metadata keys shared by server and clients, so both sides name them once.
pub mod metadata {
    /// `host:port` of the current leader, attached to UNAVAILABLE answers from a follower.
    pub const LEADER_ADDR: &str = "x-dls-leader-addr";
    /// Node id of the current leader, beside [`LEADER_ADDR`].
    pub const LEADER_ID: &str = "x-dls-leader-id";
    /// Machine-readable error kind (see `ErrorKind` in the proto docs), beside the gRPC status.
    pub const ERROR_KIND: &str = "x-dls-error";
    /// Standard bearer-token header carrying the API key.
    pub const AUTHORIZATION: &str = "authorization";
}

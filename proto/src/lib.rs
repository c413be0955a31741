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
    /// On a WatchEvents stream's response headers: the sequence the stream starts from
    /// (resolves `from_sequence = 0` and `only_new`), so a client can resume exactly.
    pub const FIRST_SEQUENCE: &str = "x-dls-first-sequence";
    /// On a WatchEvents stream's response headers: the last event sequence committed when
    /// the stream attached (the end of the backlog; 0 = no events yet).
    pub const LAST_SEQUENCE: &str = "x-dls-last-sequence";
    /// Standard bearer-token header carrying the API key.
    pub const AUTHORIZATION: &str = "authorization";
}

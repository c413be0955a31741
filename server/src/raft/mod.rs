//! Raft plumbing around the lock table: storage (log segment files, the vote and metadata in `raft-meta`), the state machine adapter and
//! the peer network, group commit of proposals. Nothing here knows lock semantics.

pub(crate) mod append_stream;
pub(crate) mod bootstrap;
pub mod durable;
pub mod identity;
pub(crate) mod log_clock;
pub mod log_store;
pub mod meta;
pub(crate) mod network;
pub(crate) mod peer_auth;
pub(crate) mod peer_roster;
pub(crate) mod peer_tls;
pub(crate) mod proposer;
pub(crate) mod quorum_clock;
pub(crate) mod replicated;
pub mod restore;
pub(crate) mod sled_migration;
pub(crate) mod snapshot_file;
pub(crate) mod snapshot_schedule;
pub mod snapshot_store;
pub mod state_machine;
pub mod store_error;
pub mod types;
pub mod wal;

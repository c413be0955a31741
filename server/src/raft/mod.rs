//! Raft plumbing around the lock table: storage (log segment files, the vote and metadata in `raft-meta`), the state machine adapter and
//! the peer network, group commit of proposals. Nothing here knows lock semantics.

pub mod append_stream;
pub mod bootstrap;
pub mod durable;
pub mod identity;
pub mod log_clock;
pub mod log_store;
pub mod meta;
pub mod network;
pub mod peer_auth;
pub mod peer_roster;
pub mod peer_tls;
pub mod proposer;
pub mod quorum_clock;
pub mod replicated;
pub mod restore;
pub mod sled_migration;
pub mod snapshot_file;
pub mod snapshot_schedule;
pub mod snapshot_store;
pub mod state_machine;
pub mod store_error;
pub mod types;
pub mod wal;

//! Caerus DLS lock server library; the `dls` binary is a thin CLI over it.
//!
//! - `locks` (the `caerus-locks` crate): the lock semantics, a pure deterministic state machine.
//! - `raft/`: openraft storage (sled), state-machine adapter and peer network.
//! - `lease`: leader-side lease and acquire-timeout timers.
//! - `limits`: the bounds on what clients can make a node hold, checked before proposing.
//! - `node`: wires raft, storage and timers into one node; `members`: online membership
//!   changes on it.
//! - `api/`: gRPC services, auth, validation and the error-to-status mapping.

pub mod api;
pub mod certs;
pub mod cli;
pub mod config;
pub mod http;
pub mod lease;
pub mod limits;
pub mod members;
pub mod metrics;
pub mod node;
pub mod raft;
pub mod security;
pub mod serve;
pub mod signals;
pub mod tls;
pub mod webhooks;

/// The lock semantics live in their own crate (`caerus-locks`); the server applies them.
pub use caerus_locks as locks;

//! Caerus DLS lock server library. The `dls` binary (`cli/`, crate caerus-cli) runs it
//! (`serve::run`) and holds the operator commands, clients of the cluster like any user.
//!
//! - `locks` (the `caerus-locks` crate): the lock semantics, a pure deterministic state machine.
//! - `raft/`: openraft storage (log segments, checked metadata, snapshot files), state-machine adapter and peer network.
//! - `lease`: leader-side lease and acquire-timeout timers.
//! - `limits`: the bounds on what clients can make a node hold, checked before proposing;
//!   `conn`: the bounds on what anyone who reaches a port can hold before authenticating.
//! - `node`: wires raft, storage and timers into one node; `members`: online membership
//!   changes on it; `handoff`: a leader hands leadership to a caught-up voter (on SIGTERM,
//!   or `dls members transfer-leader`).
//! - `engine/`: the one way into a node's lock table for clients (begin, acquire, release,
//!   end, status, heartbeats, events, operator calls), with its own error type.
//! - `api/`: gRPC services (the edge: authentication, validation, translation to the
//!   wire, the error-to-status mapping); `http/` serves the same services as JSON.
//! - `webhooks/`: the leader POSTs events to HTTP endpoints.
//! - `versions/`: the version handshake between nodes, the cluster's feature level and its
//!   gate on new features, the data directory's level.
//! - `txn_wakeups`, `key_wakeups`: applied effects wake the streams waiting on a
//!   transaction (AcquireLock) or watching a key (WatchKey).
//! - `listeners`: where a node listens; `conn/`, `serve`: the ports' accept loops and routers.
//! - `platform/`: what differs between Unix and Windows (file I/O, signals, child processes).
//! - `metrics` (cluster-wide and per namespace), `telemetry/`: what operators see of a node.

mod api;
mod certs;
mod config;
mod conn;
mod engine;
mod exposition;
mod handoff;
mod http;
mod key_wakeups;
mod lease;
mod limits;
mod listeners;
mod members;
mod metrics;
mod node;
mod platform;
pub mod raft;
mod request;
mod secret_files;
mod security;
pub mod serve;
mod telemetry;
mod tls;
mod txn_wakeups;
mod versions;
mod webhooks;

// The modules are private to the crate, so rustc's dead-code lint sees what nothing calls.
// What the `dls` binary (caerus-cli) uses besides `serve::run`: its commands that work on
// files rather than through a running cluster (keys, certificates, snapshots), the flags of
// `dls serve`, and the child process and signals of `dls lock`. `raft` is public for the
// storage suite in tests/ and the recovery example, which drive the log and its files.
pub use api::auth::add_key;
pub use certs::{run as write_certs, CertsCommand};
pub use config::{parse_peers, ServeArgs};
#[cfg(windows)]
pub use platform::child;
pub use platform::signals;

/// The lock semantics live in their own crate (`caerus-locks`); the server applies them.
pub use caerus_locks as locks;

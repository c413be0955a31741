//! Real `dls` clusters for the server's integration tests, the chaos suite and the
//! benchmarks: one place that picks ports, lays out data directories, starts, kills, pauses,
//! wipes and restarts nodes, so a fix to start-up or port allocation lands once. Nothing is
//! mocked: every node is a `dls serve` process.
//!
//! - [`attack`]: what a client without a key can send a port (half-open connections,
//!   HTTP/2 frames by hand, calls without a body), and a process's memory.
//! - [`cluster`]: [`Cluster`], [`Node`] and the [`Spec`] they start from.
//! - [`probe`]: who leads, asked of the nodes; raw gRPC clients.
//! - [`proxy`]: TCP proxies in front of the nodes whose links can be cut, delayed or
//!   blocked one way.
//! - [`disk`]: tmpfs data directories that fill up, torn log tails.
//! - [`client`]: the client side of a test: transactions, grants, what survives a restart.
//! - [`workload`]: a contended workload under faults and the checks of its history.
//! - [`cli`]: the `dls` binary and its operator commands (certificates, keys).
//! - [`http`]: plain HTTP calls to a node's operator port.
//! - [`ports`], [`poll`]: free ports; polling with a deadline.

pub mod attack;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod disk;
pub mod http;
pub mod poll;
pub mod ports;
pub mod probe;
pub mod proxy;
pub mod workload;

pub use cli::{add_key, client_tls, dls, dls_bin, make_certs, tls_flags};
pub use client::{assert_kept_across_restart, assert_next_grant, grant_many, opts, patient_client, queued, take, wait};
pub use cluster::{signal_pid, Cluster, Node, Proxies, Spec};
pub use http::{http_get, http_post};
pub use poll::{eventually, eventually_async, PATIENCE};
pub use ports::{free_port, free_ports};
pub use probe::{raw_client, raw_tls_client};
pub use workload::{
    assert_acknowledged_grants_kept, assert_no_two_holders_and_rising_tokens, ContendedWorkload, GrantRecord,
};

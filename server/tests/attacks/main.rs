//! Attacks on a node by anyone who can reach its ports, each a test against real `dls`
//! processes: what the attacker tries, and that the node stays up, bounded and fair.
//! One test binary for all of them (one link, one process per `cargo test` run).

#[path = "../common/mod.rs"]
mod common;
mod ports;

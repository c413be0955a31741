//! Attacks on a node by anyone who can reach its ports, each a test against real `dls`
//! processes: what a client without a key, a key of another tenant, or a node certificate of
//! the cluster CA could do, and that it no longer can. One test binary (one link, one process
//! per `cargo test` run), a module per area.

#[path = "../common/mod.rs"]
mod common;

mod keys;
mod ports;
mod shares;

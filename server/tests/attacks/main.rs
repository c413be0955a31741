//! Attacks on a running node, each against real `dls` processes: what a client without a
//! key, a key of another tenant, or a node certificate of the cluster CA could do, and that
//! it no longer can. One test binary, a module per area.

#[path = "../common/mod.rs"]
mod common;

mod keys;

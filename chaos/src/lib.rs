//! Jepsen-style fault injection for Caerus DLS.
//!
//! - [`cluster`]: the real `dls` processes under test and their proxies.
//! - [`fault`]: the faults by name, and the groups `--faults` selects.
//! - [`history`]: every operation the clients performed (invoke, ok, fail, unknown).
//! - [`checker`]: judges a history: the fenced register, hold intervals, fencing tokens,
//!   terminal transactions.
//! - [`linearizable`]: a Wing–Gong search per key for an order of the lock operations that
//!   fits a reader-writer lock with rising fencing tokens.
//! - [`membership`]: faults of the cluster's life cycle (a wiped follower, membership
//!   changes during a partition).
//! - [`register`]: the fenced register (the ledger pattern) the lock holders write to.
//! - [`proxy`]: a TCP proxy in front of every node that the harness uses to cut, delay or
//!   one-way block the links between nodes.
//! - [`disk`]: tmpfs data directories and torn log tails.
//! - [`storage_faults`]: faults of a node's storage (a full disk, a torn log tail).
//! - [`stats`]: small helpers for the figures printed at the end of a run.

pub mod checker;
pub mod cluster;
pub mod disk;
pub mod fault;
pub mod history;
pub mod linearizable;
pub mod membership;
pub mod proxy;
pub mod register;
pub mod stats;
pub mod storage_faults;

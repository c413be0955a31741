//! Jepsen-style fault injection for Caerus DLS, over real clusters from the test kit
//! (caerus-testkit: processes, proxies, tmpfs disks).
//!
//! - [`run`]: a whole run, from starting the cluster to the verdict.
//! - [`cluster`]: the cluster under test: behind the kit's proxies, maybe on tmpfs and
//!   under libfaketime.
//! - [`workload`]: the clients' recorded transactions, and the harness's own.
//! - [`fault`]: the faults by name, and the groups `--faults` selects.
//! - [`inject`]: injects one [`fault::Fault`].
//! - [`client_faults`]: a client frozen or cut off while it holds or awaits a lock.
//! - [`stall`]: the stalled client subprocess and its line protocol.
//! - [`rolling`]: a rolling restart or upgrade under load, and the pauses it causes.
//! - [`membership`]: faults of the cluster's life cycle (a wiped follower, membership
//!   changes during a partition).
//! - [`storage_faults`]: faults of a node's storage (a full disk, a torn log tail).
//! - [`history`]: every operation the clients performed (invoke, ok, fail, unknown).
//! - [`checker`]: judges a history: the fenced register, hold intervals, fencing tokens,
//!   terminal transactions.
//! - [`linearizable`]: a Wing–Gong search per key for an order of the lock operations that
//!   fits a reader-writer lock with rising fencing tokens.
//! - [`register`]: the fenced register (the ledger pattern) the lock holders write to.
//! - [`report`]: the verdict and the figures printed at the end of a run.
//! - [`stats`]: small helpers for those figures.

pub mod checker;
pub mod client_faults;
pub mod cluster;
pub mod fault;
pub mod history;
pub mod inject;
pub mod linearizable;
pub mod membership;
pub mod register;
pub mod report;
pub mod rolling;
pub mod run;
pub mod stall;
pub mod stats;
pub mod storage_faults;
pub mod workload;

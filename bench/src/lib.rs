//! The benchmarks' shared code: `dls-bench` (one workload against DLS, Redis or etcd) and
//! `dls-state` (the state-size and overhead figures of a 3-node DLS cluster) both build on it.
//!
//! - [`target`]: the systems under test behind one trait; [`workload`]: what the clients do;
//!   [`checker`]: safety checked while they do it; [`report`]: the comparison table.
//! - [`group_commit`], [`scrape`]: a node's Prometheus metrics over its HTTP port.
//! - [`procstat`]: CPU and memory of a process from /proc.

pub mod checker;
pub mod group_commit;
pub mod procstat;
pub mod report;
pub mod scrape;
pub mod target;
pub mod workload;

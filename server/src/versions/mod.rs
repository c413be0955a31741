//! Versions and feature levels across the cluster (DESIGN.md, "Versions and upgrades").
//!
//! Every node asks every member on the peer port (`PeerDiscoveryService.ClusterState`)
//! which version it runs and which feature level it reads (`reports`); the leader raises
//! the cluster's level through raft once every member reads the new one, and lowers it
//! for a rolling downgrade while nothing of the higher level was used (`watch`). Before a
//! command is proposed, [`Versions::gate`] refuses it when some member could not read it.
//! The data directory records the highest level written into it (`data_level`).

pub mod data_level;
pub mod reports;
pub mod watch;

use std::sync::{Arc, RwLock};

use crate::locks::feature_level::{BASE_LEVEL, LEVEL};
use crate::locks::{Command, FeatureLevels};
use crate::raft::types::NodeId;

pub use data_level::DataLevel;
pub use reports::{Report, Reports};

/// How long a request of a level every member reads waits for the leader to raise the
/// cluster's level (see `watch`) before it is refused.
pub const RAISE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// This build's version as peers and `dls status` show it.
pub const VERSION: &str = crate::cli::VERSION;

/// The levels a `--feature-level` may name.
pub fn parse_level(raw: &str) -> Result<u32, String> {
    let level: u32 = raw.parse().map_err(|_| format!("{raw:?} is not a feature level (a number)"))?;
    if !(BASE_LEVEL..=LEVEL).contains(&level) {
        return Err(format!("this dls reads feature levels {BASE_LEVEL} to {LEVEL}; {level} is not one of them"));
    }
    Ok(level)
}

/// What this node knows of the versions of the cluster's members.
pub struct Versions {
    /// The highest level this node reads and advertises (`--feature-level`).
    pub own_level: u32,
    pub reports: RwLock<Reports>,
    pub data: Arc<DataLevel>,
}

impl Versions {
    pub fn new(own_level: u32, data: Arc<DataLevel>) -> Arc<Versions> {
        Arc::new(Versions { own_level, reports: RwLock::default(), data })
    }

    /// Whether the leader is about to raise the cluster's level to at least `level`: every
    /// member said it reads it.
    pub fn raising(&self, members: &[NodeId], cluster: FeatureLevels, level: u32) -> bool {
        let reports = self.reports.read().expect("reports lock");
        reports.target(members, cluster, std::time::Instant::now()).is_some_and(|t| t >= level)
    }

    /// Refuses `cmd` when the cluster's level is below the command's, or when a member said
    /// it reads less (the level is about to be lowered): naming each such member with its
    /// version. The message is for the operator: it says which nodes to upgrade.
    pub fn gate(&self, cmd: &Command, cluster: FeatureLevels, members: &[NodeId]) -> Result<(), String> {
        let needed = cmd.feature_level();
        if cmd.is_level_change() || needed <= BASE_LEVEL {
            return Ok(());
        }
        let reports = self.reports.read().expect("reports lock");
        let below = reports.below(members, needed);
        if cluster.level >= needed && below.iter().all(|(_, r)| r.is_none()) {
            // Only a member that answered with a lower level closes an open gate: one that
            // is down now may come back at any level, and then says so.
            return Ok(());
        }
        let names = if below.is_empty() {
            "every member reads it now; the leader raises the level within a few seconds".to_string()
        } else {
            below.iter().map(|(id, r)| reports::describe(*id, r.as_ref())).collect::<Vec<_>>().join("; ")
        };
        Err(format!(
            "this request needs cluster feature level {needed}, but the cluster runs at level {}: {names}. Upgrade \
             those nodes first (see `dls status`); nothing was done",
            cluster.level
        ))
    }
}

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
    /// This build's version as peers and `dls status` show it, "0.1.0 (commit 1a2b3c4d5e6f)":
    /// the binary stamps it and hands it to `serve::run`, so a commit rebuilds the binary
    /// crate only, not this library.
    pub own_version: &'static str,
    /// The highest level this node reads and advertises (`--feature-level`).
    pub own_level: u32,
    pub reports: RwLock<Reports>,
}

impl Versions {
    pub fn new(own_version: &'static str, own_level: u32) -> Arc<Versions> {
        Arc::new(Versions { own_version, own_level, reports: RwLock::default() })
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::locks::LockKey;

    fn claim() -> Command {
        let lock = LockKey { namespace: "jobs".into(), key: "nightly".into() };
        Command::ClaimSlot { txn: 1, request_id: "r".into(), lock, period_ms: 60_000, retry_failed: false }
    }

    fn versions(reports: &[(NodeId, Option<&str>, u32)]) -> Arc<Versions> {
        let v = Versions::new("0.1.0 (commit test)", LEVEL);
        for (id, version, level) in reports {
            let report = Report { version: version.map(str::to_string), level: *level, at: Instant::now() };
            v.reports.write().unwrap().record(*id, report);
        }
        v
    }

    const AT_1: FeatureLevels = FeatureLevels { level: 1, used: 1 };
    const AT_2: FeatureLevels = FeatureLevels { level: 2, used: 1 };

    #[test]
    fn the_gate_names_each_node_below_the_level_and_lets_level_1_through() {
        let v = versions(&[(1, Some("0.2.0"), 2), (2, None, 1)]);
        let why = v.gate(&claim(), AT_1, &[1, 2, 3]).unwrap_err();
        assert!(why.contains("needs cluster feature level 2, but the cluster runs at level 1"), "{why}");
        assert!(why.contains("node 2 runs 0.1.0 or earlier (no version handshake) (level 1)"), "{why}");
        assert!(why.contains("node 3 has not answered"), "{why}");
        assert!(!why.contains("node 1"), "{why}");
        assert!(v.gate(&Command::Expire { txn: 1 }, AT_1, &[1, 2, 3]).is_ok());
        assert!(v.gate(&Command::SetFeatureLevel { level: 2 }, AT_1, &[1, 2, 3]).is_ok());
    }

    #[test]
    fn at_level_2_only_a_member_that_answered_lower_closes_the_gate() {
        let v = versions(&[(1, Some("0.2.0"), 2), (2, Some("0.2.0"), 2)]);
        assert!(v.gate(&claim(), AT_2, &[1, 2, 3]).is_ok(), "node 3 is down, not older");
        let v = versions(&[(1, Some("0.2.0"), 2), (2, Some("0.2.0 --feature-level 1"), 1)]);
        let why = v.gate(&claim(), AT_2, &[1, 2]).unwrap_err();
        assert!(why.contains("node 2 runs 0.2.0 --feature-level 1 (level 1)"), "{why}");
        assert!(!v.raising(&[1, 2], AT_1, 2));
        let v = versions(&[(1, Some("0.2.0"), 2), (2, Some("0.2.0"), 2)]);
        assert!(v.raising(&[1, 2], AT_1, 2), "every member reads 2: the raise is coming");
    }
}

//! What each member said about its version and feature level, and the level the cluster
//! may run at by those answers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::locks::feature_level::BASE_LEVEL;
use crate::locks::FeatureLevels;
use crate::raft::types::NodeId;

/// An answer older than this no longer counts as the member's word for a raise.
pub const FRESH: Duration = Duration::from_secs(10);

/// One member's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Its version; `None` for a node before the handshake (v0.1.0 answers no version).
    pub version: Option<String>,
    /// The highest level it reads (v0.1.0: level 1).
    pub level: u32,
    pub at: Instant,
}

impl Report {
    /// Decodes the handshake fields of a `ClusterState` answer: empty for v0.1.0.
    pub fn from_answer(version: String, level: u32, at: Instant) -> Report {
        let version = (!version.is_empty()).then_some(version);
        Report { version, level: level.max(BASE_LEVEL), at }
    }

    /// How `dls status` and refusals name the version.
    pub fn version_text(&self) -> &str {
        self.version.as_deref().unwrap_or("0.1.0 or earlier (no version handshake)")
    }
}

/// How a member is named in a refusal.
pub fn describe(id: NodeId, report: Option<&Report>) -> String {
    match report {
        Some(r) => format!("node {id} runs {} (level {})", r.version_text(), r.level),
        None => format!("node {id} has not answered (version unknown)"),
    }
}

/// The members' answers by node id (this node's own included).
#[derive(Clone, Debug, Default)]
pub struct Reports {
    by_node: BTreeMap<NodeId, Report>,
}

impl Reports {
    pub fn record(&mut self, id: NodeId, report: Report) {
        self.by_node.insert(id, report);
    }

    /// Forgets nodes that are no longer members.
    pub fn retain(&mut self, members: &[NodeId]) {
        self.by_node.retain(|id, _| members.contains(id));
    }

    pub fn get(&self, id: NodeId) -> Option<&Report> {
        self.by_node.get(&id)
    }

    /// The members that did not say they read `level`: with their answer, or `None` when
    /// they never answered.
    pub fn below(&self, members: &[NodeId], level: u32) -> Vec<(NodeId, Option<Report>)> {
        members
            .iter()
            .filter_map(|id| match self.by_node.get(id) {
                Some(r) if r.level >= level => None,
                r => Some((*id, r.cloned())),
            })
            .collect()
    }

    /// The level the leader should set now, if it should change: up to the lowest level
    /// every member said it reads (all of them answered within [`FRESH`]); down to the
    /// level of a member that speaks the handshake and reads less, unless entries above
    /// that level were used. A v0.1.0 member (no version) is never sent a level change: it
    /// could not decode one; the gate keeps new features from it instead.
    pub fn target(&self, members: &[NodeId], cluster: FeatureLevels, now: Instant) -> Option<u32> {
        let answers: Vec<&Report> = members.iter().filter_map(|id| self.by_node.get(id)).collect();
        let lowest_handshake = answers.iter().filter(|r| r.version.is_some()).map(|r| r.level).min();
        if let Some(low) = lowest_handshake.filter(|l| *l < cluster.level) {
            return (low >= cluster.used).then_some(low);
        }
        let all_fresh = answers.len() == members.len()
            && answers.iter().all(|r| r.version.is_some() && now.duration_since(r.at) < FRESH);
        let lowest = answers.iter().map(|r| r.level).min()?;
        (all_fresh && lowest > cluster.level).then_some(lowest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(level: u32, version: Option<&str>) -> Report {
        Report { version: version.map(str::to_string), level, at: Instant::now() }
    }

    fn levels(level: u32, used: u32) -> FeatureLevels {
        FeatureLevels { level, used }
    }

    #[test]
    fn the_level_rises_only_once_every_member_reads_it() {
        let now = Instant::now();
        let mut r = Reports::default();
        r.record(1, at(2, Some("new")));
        r.record(2, at(2, Some("new")));
        assert_eq!(r.target(&[1, 2, 3], levels(1, 1), now), None, "node 3 has not answered");
        r.record(3, at(1, None));
        assert_eq!(r.target(&[1, 2, 3], levels(1, 1), now), None, "node 3 runs v0.1.0");
        assert_eq!(r.below(&[1, 2, 3], 2).len(), 1);
        r.record(3, at(2, Some("new")));
        assert_eq!(r.target(&[1, 2, 3], levels(1, 1), now), Some(2));
        assert_eq!(r.target(&[1, 2, 3], levels(2, 1), now), None, "already there");
    }

    #[test]
    fn the_level_drops_for_a_downgraded_member_unless_the_higher_level_was_used() {
        let now = Instant::now();
        let mut r = Reports::default();
        r.record(1, at(2, Some("new")));
        r.record(2, at(1, Some("new --feature-level 1")));
        assert_eq!(r.target(&[1, 2], levels(2, 1), now), Some(1));
        assert_eq!(r.target(&[1, 2], levels(2, 2), now), None, "level 2 entries are in the log");
        r.record(2, at(1, None));
        assert_eq!(r.target(&[1, 2], levels(2, 1), now), None, "v0.1.0 is never sent a level change");
    }
}

//! Which node ids may make raft calls to this node: the members of the cluster as this
//! node knows them (voters and learners). Removing a node is what revokes its
//! certificate: once this node has seen the removal, its calls are refused, whatever
//! credentials they carry, until it is added again.
//!
//! A node cannot always know the current membership: one with no membership yet (new, or
//! joining with `--join`) learns it from its first leader, and one that knows no leader
//! (just restarted, or its leader went silent and it stands for election) may be behind a
//! membership change that added the node now leading. Such a node takes a call from an id
//! it has never seen removed; refusing it would leave the node behind for good. A node
//! that follows a leader refuses every non-member.

use std::collections::BTreeSet;

use super::types::NodeId;

#[derive(Debug, Default)]
pub struct PeerRoster {
    /// The membership as this node knows it (the latest configuration in its log).
    members: BTreeSet<NodeId>,
    /// Ids this process saw in an earlier membership and not in the current one.
    removed: BTreeSet<NodeId>,
    /// The leader this node follows, if any.
    leader: Option<NodeId>,
}

impl PeerRoster {
    /// Takes the membership and leader this node knows now.
    pub fn observe(&mut self, members: BTreeSet<NodeId>, leader: Option<NodeId>) {
        self.removed.extend(self.members.difference(&members));
        // Added again (or a removal that was never committed and was rolled back).
        self.removed.retain(|id| !members.contains(id));
        self.members = members;
        self.leader = leader;
    }

    /// Whether node `id` may call this node; the refusal says why and what to do.
    pub fn admit(&self, id: NodeId) -> Result<(), String> {
        if self.members.contains(&id) {
            return Ok(());
        }
        if self.removed.contains(&id) {
            return Err(format!(
                "node {id} was removed from the cluster (members now: {:?}); its calls are refused until it is added \
                 again (`dls members add {id} ...`, then start it empty with --join)",
                self.members
            ));
        }
        if self.members.is_empty() || self.leader.is_none() {
            // This node may be the one that is behind (see the module).
            return Ok(());
        }
        Err(format!(
            "node {id} is not a member of this cluster (members: {:?}); add it first (`dls members add {id} ...`)",
            self.members
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[NodeId]) -> BTreeSet<NodeId> {
        list.iter().copied().collect()
    }

    #[test]
    fn members_are_admitted_and_removed_or_unknown_nodes_are_refused() {
        let mut roster = PeerRoster::default();
        assert!(roster.admit(7).is_ok(), "no membership yet: a new or joining node learns it from its leader");
        roster.observe(ids(&[1, 2, 3]), Some(1));
        assert!(roster.admit(2).is_ok());
        let err = roster.admit(4).unwrap_err();
        assert!(err.contains("not a member") && err.contains("dls members add 4"), "{err}");

        roster.observe(ids(&[1, 2]), Some(1));
        let err = roster.admit(3).unwrap_err();
        assert!(err.contains("node 3 was removed"), "{err}");
        // Without a leader this node may be behind: an id it never saw is taken, a removed one never.
        roster.observe(ids(&[1, 2]), None);
        assert!(roster.admit(4).is_ok());
        assert!(roster.admit(3).is_err());
        // Added again: admitted again.
        roster.observe(ids(&[1, 2, 3]), Some(2));
        assert!(roster.admit(3).is_ok());
        roster.observe(ids(&[1, 2, 3]), Some(2));
        assert!(roster.removed.is_empty());
    }
}

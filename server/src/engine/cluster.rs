//! The cluster as this node sees it, membership changes, backups, and the gauges
//! `/metrics` shows.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use openraft::ServerState;

use super::{Engine, EngineError, EngineResult, Principal};
use crate::handoff;
use crate::limits::Limit;
use crate::members::{MemberView, Membership, MembershipError};
use crate::metrics::Gauges;
use crate::raft::types::{Member, NodeId, SnapshotMeta};

/// One member of the raft configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterMember {
    pub id: NodeId,
    pub addr: String,
    pub voter: bool,
    /// Its version and feature level as this node last heard them (see `versions`).
    pub version: MemberVersion,
}

/// A member's version and feature level; empty and 0 while it has not answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberVersion {
    pub version: String,
    pub feature_level: u32,
}

/// This node's view of the cluster.
#[derive(Clone, Debug)]
pub struct ClusterStatus {
    pub node_id: NodeId,
    /// The leader and its client address, when known.
    pub leader: Option<(NodeId, String)>,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub last_log_index: u64,
    pub role: ServerState,
    pub members: Vec<ClusterMember>,
    pub last_fencing_token: u64,
    /// Active transactions the caller may act on (a limited admin key counts only those).
    pub active_transactions: u64,
    pub last_event_sequence: u64,
    /// The cluster's feature level and the highest level used (as of the applied index).
    pub feature_level: u32,
    pub feature_level_used: u32,
    /// This node's version.
    pub version: String,
}

impl Engine {
    /// This node's view of the cluster; any node answers, leader or not.
    pub fn cluster_status(&self, who: &Principal) -> ClusterStatus {
        let node = &self.node;
        let m = node.raft_metrics();
        let membership = m.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(&id, n)| ClusterMember {
                id,
                addr: n.addr.clone(),
                voter: voters.contains(&id),
                version: self.member_version(id),
            })
            .collect();
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        let st = node.state().read().expect("state lock");
        let levels = st.table.feature_levels();
        ClusterStatus {
            node_id: node.id(),
            leader: node.leader(),
            term: m.current_term,
            commit_index: node.committed_index().max(applied_index),
            applied_index,
            last_log_index: m.last_log_index.unwrap_or(0),
            role: m.state,
            members,
            last_fencing_token: st.table.last_token(),
            active_transactions: st.table.active_txns().filter(|t| who.may_use(t)).count() as u64,
            last_event_sequence: st.table.events().last_seq(),
            feature_level: levels.level,
            feature_level_used: levels.used,
            version: self.node.versions().own_version.to_string(),
        }
    }

    /// Member `id`'s version and feature level as this node last heard them.
    pub fn member_version(&self, id: NodeId) -> MemberVersion {
        let reports = self.node.versions().reports.read().expect("reports lock");
        reports.get(id).map_or_else(MemberVersion::default, |r| MemberVersion {
            version: r.version_text().to_string(),
            feature_level: r.level,
        })
    }

    /// The membership with each member's replication progress (leader only).
    pub fn list_members(&self) -> EngineResult<Membership> {
        self.node.require_leader()?;
        self.membership()
    }

    fn membership(&self) -> EngineResult<Membership> {
        self.node.members().membership().map_err(|e| self.membership_error(e))
    }

    /// Adds `id` as a learner, waits until it caught up, then promotes it (unless
    /// `stay_learner`); the membership after.
    pub async fn add_member(
        &self,
        id: NodeId,
        member: Member,
        stay_learner: bool,
        catch_up: Duration,
    ) -> EngineResult<Membership> {
        self.node.require_leader()?;
        let members = self.node.members();
        members.add_member(id, member, stay_learner, catch_up).await.map_err(|e| self.membership_error(e))?;
        self.membership()
    }

    /// Promotes learner `id` to a voter once it caught up; the membership after.
    pub async fn promote_member(&self, id: NodeId, catch_up: Duration) -> EngineResult<Membership> {
        self.node.require_leader()?;
        self.node.members().promote_member(id, catch_up).await.map_err(|e| self.membership_error(e))?;
        self.membership()
    }

    /// Removes `id`; the members after. A removed leader may have stepped down already:
    /// then the answer is the membership it committed, without replication progress.
    pub async fn remove_member(&self, id: NodeId) -> EngineResult<Vec<MemberView>> {
        self.node.require_leader()?;
        self.node.members().remove_member(id).await.map_err(|e| self.membership_error(e))?;
        Ok(match self.node.members().membership() {
            Ok(m) => m.members,
            Err(_) => self.committed_members(),
        })
    }

    /// Hands leadership to `to` (or the most caught-up voter) and returns the new leader
    /// and its client address (see `handoff`).
    pub async fn transfer_leader(&self, to: Option<NodeId>) -> EngineResult<(NodeId, String)> {
        self.node.require_leader()?;
        let leader =
            handoff::hand_off(&self.node, to, handoff::HAND_OFF_WITHIN).await.map_err(|e| e.into_engine(&self.node))?;
        let addr = self.node.raft_metrics().membership_config.membership().get_node(&leader).map(|m| m.addr.clone());
        Ok((leader, addr.unwrap_or_default()))
    }

    /// The membership this node holds, without replication progress (it no longer leads).
    fn committed_members(&self) -> Vec<MemberView> {
        let m = self.node.raft_metrics();
        let config = m.membership_config.membership();
        let voters: Vec<u64> = config.voter_ids().collect();
        config
            .nodes()
            .map(|(&id, n)| MemberView { id, member: n.clone(), voter: voters.contains(&id), matched: 0 })
            .collect()
    }

    fn membership_error(&self, e: MembershipError) -> EngineError {
        match e {
            MembershipError::Invalid(m) => EngineError::InvalidArgument(m),
            MembershipError::Refused(m) => EngineError::MembershipRefused(m),
            MembershipError::NotLeader => self.node.not_leader(),
            MembershipError::Unavailable(m) => EngineError::Unavailable(m),
        }
    }

    /// A backup: the replicated state as of everything committed before the call, as a
    /// snapshot file open at its start (see `Node::backup`).
    pub async fn backup(&self) -> EngineResult<(SnapshotMeta, std::fs::File)> {
        self.node.backup().await
    }

    /// The values `/metrics` shows, read now; the state lock is held only to count, never
    /// across an await.
    pub fn gauges(&self) -> Gauges {
        let node = &self.node;
        let m = node.raft_metrics();
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        let (log_io, proposer, limits) = (node.log_io(), node.proposer(), node.limits());
        let mut g = Gauges {
            raft_term: m.current_term,
            is_leader: m.state == ServerState::Leader,
            serving: *node.leadership().borrow(),
            leader_id: m.current_leader.unwrap_or(0),
            // The stored commit index can trail what this node applied from a snapshot.
            commit_index: node.committed_index().max(applied_index),
            applied_index,
            voters: m.membership_config.membership().voter_ids().count() as u64,
            owed_index: node.owed(),
            log_append_flushes: log_io.append_flushes.load(Relaxed),
            log_entries_appended: log_io.entries_appended.load(Relaxed),
            log_flush_micros: log_io.flush_micros.load(Relaxed),
            log_flush_seconds: log_io.flush_seconds.counts(),
            proposed_commands: proposer.stats.commands.load(Relaxed),
            proposed_entries: proposer.stats.entries.load(Relaxed),
            queued_proposals: proposer.queued() as u64,
            shed_proposals: proposer.stats.shed.load(Relaxed),
            parked_proposals: proposer.stats.parked.load(Relaxed),
            forwarded_open: limits.forwarded(),
            refused: Limit::ALL.map(|l| limits.refused(l)),
            ..Gauges::default()
        };
        if let Some(stats) = node.tracer().map(|t| t.stats()) {
            g.spans_exported = stats.exported.load(Relaxed);
            g.spans_dropped = stats.dropped.load(Relaxed);
            g.span_export_failures = stats.failed_requests.load(Relaxed);
        }
        let st = node.state().read().expect("state lock");
        let table = &st.table;
        g.active_transactions = table.active_txns().count() as u64;
        for (_, k) in table.keys() {
            g.held_locks += k.holders.len() as u64;
            g.waiting_requests += k.queue.len() as u64;
        }
        g.last_fencing_token = table.last_token();
        g.last_event_sequence = table.events().last_seq();
        g
    }
}

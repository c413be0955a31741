//! Leadership hand-off: a leader that is asked to stop (SIGTERM) or to step aside (`dls
//! members transfer-leader`) makes a caught-up voter take over first, so clients see a
//! planned change of a few milliseconds instead of an election after a silence.
//!
//! openraft 0.9 has no transfer API; what its rules allow (`Engine::handle_vote_req`):
//! - a voter refuses a vote while the committed vote it holds was last refreshed within the
//!   leader lease (`election_timeout_max`): a follower refreshes it on every AppendEntries,
//!   so it refuses while the leader is alive;
//! - a leader refreshes its own vote only when it is elected, so once it has led longer than
//!   the lease it grants a vote to a candidate of a higher term whose log is at least as
//!   long as its own, and steps down;
//! - `trigger().elect()` makes a follower stand at once, whatever its election timer.
//!
//! So the leader closes its gate (new proposals, lease renewals and linearizable reads wait,
//! see `Node::past_handoff`), waits until the successor holds its whole log, and asks it over
//! the authenticated peer port (`TakeLeadership`) to stand. The successor's own vote and the
//! old leader's make a majority of three; the other voters follow the new leader's first
//! AppendEntries (a higher term). With five voters or more the others grant the vote only once
//! their lease lapsed, about one lease later.
//!
//! Safety: fencing tokens come from the log, so the new leader cannot hand one out again.
//! Leases are the subtle part: the leader acknowledges heartbeats on a recent quorum
//! acknowledgement (`QuorumClock`), on the premise that no other leader can be elected within
//! an election timeout of it. A hand-off breaks that premise on purpose, so the gate holds
//! heartbeats from before the successor is asked until the hand-off is over: every
//! acknowledgement the old leader gave was sent before the new leader exists, and the new
//! leader restarts every lease at full length when it starts serving. A hand-off that fails
//! (the successor died, did not catch up, lost the election) opens the gate again: a leader
//! that still leads serves on, one that lost leadership answers NOT_LEADER.

use std::time::{Duration, Instant};

use caerus_proto::raft::TakeLeadershipRequest;
use openraft::ServerState;

use crate::node::Node;
use crate::raft::types::{NodeId, RaftMetrics};
use crate::request::EngineError;

/// How long a hand-off may take, catch-up and election included: past it the leader gives
/// up and serves on (or, stopping, stops anyway). A caught-up successor takes over within
/// one round trip and an fsync of its vote.
pub const HAND_OFF_WITHIN: Duration = Duration::from_secs(2);
/// A voter whose last acknowledgement is older than this is taken for unreachable.
const REACHABLE_WITHIN: Duration = Duration::from_secs(1);
/// How often the catch-up and the election are checked on.
const POLL: Duration = Duration::from_millis(2);

/// Why leadership was not handed over. Unless the variant says otherwise this node still
/// leads and serves.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// This node does not lead.
    #[error("this node is not the leader")]
    NotLeader,
    /// The asked-for node is not in the membership.
    #[error("node {id} is not a member (members: {members:?})")]
    NotMember { id: NodeId, members: Vec<NodeId> },
    /// The asked-for node is a learner: it has no vote and cannot lead.
    #[error("node {0} is a learner: it cannot lead (promote it first with `dls members promote {0}`)")]
    Learner(NodeId),
    /// This node is the only voter.
    #[error("node {0} is the only voter: there is nobody to hand leadership to")]
    NoOtherVoter(NodeId),
    /// No voter (or not the asked-for one) acknowledged this leader lately.
    #[error("{0}")]
    Unreachable(String),
    /// The successor did not hold the whole log in time.
    #[error("node {id} did not catch up within {within:?} (it holds index {matched} of {last})")]
    NotCaughtUp { id: NodeId, matched: u64, last: u64, within: Duration },
    /// The successor refused to stand or could not be asked.
    #[error("node {id} was asked to take over and refused or could not be reached: {why}")]
    Refused { id: NodeId, why: String },
    /// The successor stood but did not become the leader in time; `still_leading` says
    /// whether this node kept leadership.
    #[error("node {id} did not take over within {within:?}{}", if *.still_leading { "; this node still leads" } else { "; an election is under way" })]
    NotTaken { id: NodeId, within: Duration, still_leading: bool },
}

impl HandoffError {
    /// The engine's answer to a client of `transfer-leader`.
    pub fn into_engine(self, node: &Node) -> EngineError {
        match self {
            HandoffError::NotLeader => node.not_leader(),
            e @ (HandoffError::NotMember { .. } | HandoffError::Learner(_) | HandoffError::NoOtherVoter(_)) => {
                EngineError::MembershipRefused(e.to_string())
            }
            e => EngineError::Unavailable(e.to_string()),
        }
    }
}

/// The voter to hand leadership to: `wanted` if it may lead, else the reachable voter with
/// the highest matched index (the lowest id among equals). `Ok(me)` when `wanted` is this
/// node (nothing to do).
pub fn successor(
    m: &RaftMetrics,
    me: NodeId,
    wanted: Option<NodeId>,
    acked: impl Fn(NodeId) -> Option<Instant>,
    now: Instant,
) -> Result<NodeId, HandoffError> {
    let config = m.membership_config.membership();
    let voters: Vec<NodeId> = config.voter_ids().collect();
    let matched =
        |id: NodeId| m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map_or(0, |l| l.index);
    let reachable = |id: NodeId| acked(id).is_some_and(|at| now.saturating_duration_since(at) < REACHABLE_WITHIN);
    if let Some(id) = wanted {
        if id == me {
            return Ok(me);
        }
        if config.get_node(&id).is_none() {
            return Err(HandoffError::NotMember { id, members: config.nodes().map(|(id, _)| *id).collect() });
        }
        if !voters.contains(&id) {
            return Err(HandoffError::Learner(id));
        }
        if !reachable(id) {
            return Err(HandoffError::Unreachable(format!(
                "node {id} has not answered this leader within the last {REACHABLE_WITHIN:?} (is it running?)"
            )));
        }
        return Ok(id);
    }
    let others: Vec<NodeId> = voters.into_iter().filter(|id| *id != me).collect();
    if others.is_empty() {
        return Err(HandoffError::NoOtherVoter(me));
    }
    others
        .iter()
        .copied()
        .filter(|id| reachable(*id))
        .max_by_key(|id| (matched(*id), std::cmp::Reverse(*id)))
        .ok_or_else(|| {
            HandoffError::Unreachable(format!(
                "no other voter ({others:?}) answered this leader within the last {REACHABLE_WITHIN:?}"
            ))
        })
}

/// Hands leadership to `wanted` (or the most caught-up voter) within `within`; the new
/// leader. See the module comment for the steps and why they are safe.
pub async fn hand_off(node: &Node, wanted: Option<NodeId>, within: Duration) -> Result<NodeId, HandoffError> {
    let started = Instant::now();
    let deadline = started + within;
    if node.require_leader().is_err() {
        return Err(HandoffError::NotLeader);
    }
    let me = node.id();
    let vote = node.raft_metrics().vote;
    let to = successor(&node.raft_metrics(), me, wanted, |id| node.quorum_clock().acked(id, &vote), started)?;
    if to == me {
        return Ok(me);
    }
    let _gate = node.close_gate().await;
    if node.require_leader().is_err() {
        // Another hand-off (or an election) came first.
        return Err(HandoffError::NotLeader);
    }
    tracing::info!(node = me, successor = to, "handing leadership over");

    // A leader grants a vote only once the lease of its own election has passed.
    if let Some(lease_over) = node.own_lease_over() {
        tokio::time::sleep_until(lease_over.min(deadline).into()).await;
    }
    let (term, last) = caught_up(node, to, deadline, within).await?;

    let Some(member) = node.raft_metrics().membership_config.membership().get_node(&to).cloned() else {
        return Err(HandoffError::NotMember { id: to, members: Vec::new() });
    };
    let mut client = node
        .peer_transport()
        .client(to, &member.peer_addr)
        .map_err(|e| HandoffError::Refused { id: to, why: e.to_string() })?;
    let ask = client.take_leadership(TakeLeadershipRequest { term, last_log_index: last });
    match tokio::time::timeout_at(deadline.into(), ask).await {
        Ok(Ok(_)) => {}
        Ok(Err(status)) => return Err(HandoffError::Refused { id: to, why: status.message().to_string() }),
        Err(_) => return Err(HandoffError::Refused { id: to, why: format!("no answer within {within:?}") }),
    }

    // Done once this node follows the successor: then NOT_LEADER answers name it.
    let mut server = node.raft().server_metrics();
    let taken = async {
        loop {
            {
                let m = server.borrow_and_update();
                if m.state != ServerState::Leader && m.current_leader == Some(to) {
                    return;
                }
            }
            if server.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    if tokio::time::timeout_at(deadline.into(), taken).await.is_err() {
        let still_leading = node.raft_metrics().state == ServerState::Leader;
        return Err(HandoffError::NotTaken { id: to, within, still_leading });
    }
    tracing::info!(node = me, leader = to, took_ms = started.elapsed().as_millis() as u64, "leadership handed over");
    Ok(to)
}

/// Waits until `to` holds this leader's whole log and nothing more is on its way into it
/// (the gate is closed; what was proposed before is applied); the term and last index.
async fn caught_up(node: &Node, to: NodeId, deadline: Instant, within: Duration) -> Result<(u64, u64), HandoffError> {
    loop {
        let m = node.raft_metrics();
        if m.state != ServerState::Leader {
            return Err(HandoffError::NotLeader);
        }
        let last = m.last_log_index.unwrap_or(0);
        let matched = m.replication.as_ref().and_then(|r| r.get(&to).cloned().flatten()).map_or(0, |l| l.index);
        let applied = m.last_applied.map_or(0, |l| l.index);
        if matched == last && applied == last && node.proposer().queued() == 0 {
            return Ok((m.vote.leader_id().get_term(), last));
        }
        if Instant::now() >= deadline {
            return Err(HandoffError::NotCaughtUp { id: to, matched, last, within });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The successor's side of `TakeLeadership`: stand for election if `from` is the leader this
/// node follows in `term` and this node holds the log up to `last_log_index`.
pub async fn take_over(node: &Node, from: NodeId, term: u64, last_log_index: u64) -> Result<(), String> {
    let m = node.raft_metrics();
    if m.current_leader != Some(from) || m.vote.leader_id().get_term() != term {
        return Err(format!(
            "node {} follows {:?} in term {}, not node {from} in term {term}",
            node.id(),
            m.current_leader,
            m.vote.leader_id().get_term()
        ));
    }
    if !m.membership_config.membership().voter_ids().any(|id| id == node.id()) {
        return Err(format!("node {} is not a voter", node.id()));
    }
    if let Some(owed) = node.owed() {
        return Err(format!("node {} owes log entries up to {owed} lost to disk damage", node.id()));
    }
    let have = m.last_log_index.unwrap_or(0);
    if have < last_log_index {
        return Err(format!("node {} holds the log up to index {have}, not {last_log_index}", node.id()));
    }
    tracing::info!(node = node.id(), from, term, "asked to take leadership over; standing for election");
    node.raft().trigger().elect().await.map_err(|e| format!("raft stopped: {e}"))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use openraft::{LogId, Membership, StoredMembership};

    use super::*;
    use crate::raft::types::Member;

    fn metrics(voters: &[NodeId], learners: &[NodeId], matched: &[(NodeId, u64)]) -> RaftMetrics {
        let nodes: BTreeMap<NodeId, Member> = voters
            .iter()
            .chain(learners)
            .map(|id| (*id, Member { addr: format!("127.0.0.1:{id}"), peer_addr: format!("127.0.0.1:1{id}") }))
            .collect();
        let membership = Membership::new(vec![voters.iter().copied().collect::<BTreeSet<_>>()], nodes);
        let mut m = RaftMetrics::new_initial(1);
        m.membership_config = Arc::new(StoredMembership::new(None, membership));
        m.replication = Some(
            matched
                .iter()
                .map(|(id, index)| (*id, Some(LogId::new(openraft::CommittedLeaderId::new(1, 1), *index))))
                .collect(),
        );
        m
    }

    #[test]
    fn the_most_caught_up_reachable_voter_is_chosen() {
        let now = Instant::now();
        let m = metrics(&[1, 2, 3, 4], &[5], &[(2, 7), (3, 9), (4, 9), (5, 10)]);
        let all = |_: NodeId| Some(now);
        assert_eq!(successor(&m, 1, None, all, now).unwrap(), 3, "highest matched, lowest id among equals");
        let not_3 = |id: NodeId| (id != 3).then_some(now);
        assert_eq!(successor(&m, 1, None, not_3, now).unwrap(), 4, "an unreachable voter is passed over");
        let nobody = |_: NodeId| None;
        assert!(matches!(successor(&m, 1, None, nobody, now), Err(HandoffError::Unreachable(_))));
        let stale = |_: NodeId| Some(now - Duration::from_secs(5));
        assert!(matches!(successor(&m, 1, None, stale, now), Err(HandoffError::Unreachable(_))));
    }

    #[test]
    fn an_asked_for_node_must_be_a_reachable_voter() {
        let now = Instant::now();
        let m = metrics(&[1, 2, 3], &[5], &[(2, 7), (3, 9), (5, 9)]);
        let all = |_: NodeId| Some(now);
        assert_eq!(successor(&m, 1, Some(2), all, now).unwrap(), 2, "asked for, though behind");
        assert_eq!(successor(&m, 1, Some(1), all, now).unwrap(), 1, "itself: nothing to do");
        assert!(matches!(successor(&m, 1, Some(5), all, now), Err(HandoffError::Learner(5))));
        assert!(matches!(successor(&m, 1, Some(9), all, now), Err(HandoffError::NotMember { id: 9, .. })));
        let not_2 = |id: NodeId| (id != 2).then_some(now);
        assert!(matches!(successor(&m, 1, Some(2), not_2, now), Err(HandoffError::Unreachable(_))));
        let alone = metrics(&[1], &[], &[]);
        assert!(matches!(successor(&alone, 1, None, all, now), Err(HandoffError::NoOtherVoter(1))));
    }
}

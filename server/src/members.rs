//! Online membership changes: add, promote and remove nodes through openraft's joint
//! consensus, on the leader. A new node first joins as a learner, which the leader catches
//! up (snapshot, then log) while it neither votes nor counts; only then is it promoted, so
//! a voter never lacks committed entries. The rules are written in docs/storage.md,
//! "Bootstrap and membership".

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;

use crate::raft::network::PeerTransport;
use crate::raft::types::{Member, NodeId, Raft};

/// How long a new member may take to catch up when the caller does not say.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_secs(60);
/// Longest catch-up wait a caller may ask for.
pub const MAX_CATCH_UP: Duration = Duration::from_secs(600);
/// A configuration change that cannot commit in this time (no quorum of the old or the new
/// voters) is reported instead of waited for.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// One member as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    pub id: NodeId,
    pub member: Member,
    pub voter: bool,
    /// The last log index the leader knows the member holds (0 = none).
    pub matched: u64,
}

/// The membership as the leader sees it.
#[derive(Clone, Debug)]
pub struct Membership {
    pub members: Vec<MemberView>,
    pub leader: NodeId,
    pub last_log_index: u64,
    /// A joint configuration (old and new voters) is in force: a change is half done.
    pub changing: bool,
}

/// Why a membership change was not made. Nothing changed unless the variant says so.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The request is malformed (id 0, an address that is not HOST:PORT, ...).
    #[error("{0}")]
    Invalid(String),
    /// The change does not fit the current membership; the message says what to do.
    #[error("{0}")]
    Refused(String),
    /// This node is not the leader.
    #[error("not the leader")]
    NotLeader,
    /// The change was proposed but not committed in time (no quorum?); it may still complete.
    #[error("{0}")]
    Unavailable(String),
}

type Result<T> = std::result::Result<T, MembershipError>;

/// `host:port` with a non-empty host and a numeric port.
pub fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok())
}

fn validate_new(id: NodeId, member: &Member) -> Result<()> {
    if id == 0 {
        return Err(MembershipError::Invalid("node_id must be at least 1".into()));
    }
    for (field, addr) in [("addr", &member.addr), ("peer_addr", &member.peer_addr)] {
        if !is_host_port(addr) {
            return Err(MembershipError::Invalid(format!("{field} {addr:?} must be HOST:PORT")));
        }
    }
    if member.addr == member.peer_addr {
        return Err(MembershipError::Invalid("the peer address must differ from the client address".into()));
    }
    Ok(())
}

/// Membership changes made through one node's raft.
pub struct Members<'a> {
    raft: &'a Raft,
    id: NodeId,
    /// How this node reaches peers: a new member's peer address must be one it may send
    /// its credentials to.
    transport: &'a PeerTransport,
}

impl<'a> Members<'a> {
    pub fn new(raft: &'a Raft, id: NodeId, transport: &'a PeerTransport) -> Self {
        Members { raft, id, transport }
    }

    /// The membership, read on the leader.
    pub fn membership(&self) -> Result<Membership> {
        let m = self.raft.metrics().borrow().clone();
        if m.current_leader != Some(self.id) || m.state != openraft::ServerState::Leader {
            return Err(MembershipError::NotLeader);
        }
        let config = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = config.voter_ids().collect();
        let last = m.last_log_index.unwrap_or(0);
        let matched = |id: NodeId| {
            if id == self.id {
                return last;
            }
            m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map_or(0, |l| l.index)
        };
        let members = config
            .nodes()
            .map(|(&id, member)| MemberView {
                id,
                member: member.clone(),
                voter: voters.contains(&id),
                matched: matched(id),
            })
            .collect();
        Ok(Membership { members, leader: self.id, last_log_index: last, changing: config.get_joint_config().len() > 1 })
    }

    /// Adds `id` as a learner, waits until it has caught up, then promotes it to a voter
    /// (unless `stay_learner`). Asking again for a learner with the same addresses resumes
    /// the wait, so a retry after a lost answer or a timeout is safe.
    pub async fn add_member(&self, id: NodeId, member: Member, stay_learner: bool, catch_up: Duration) -> Result<()> {
        validate_new(id, &member)?;
        // The leader replicates to a learner at once, with the cluster's credentials: an
        // address they may not travel to is refused before anything is committed.
        self.transport.may_send_credentials(&member.peer_addr).map_err(MembershipError::Refused)?;
        let current = self.membership()?;
        refuse_while_changing(&current)?;
        match current.members.iter().find(|m| m.id == id) {
            Some(m) if m.voter => {
                return Err(MembershipError::Refused(format!("node {id} is already a voter (at {})", m.member)))
            }
            Some(m) if m.member != member => {
                return Err(MembershipError::Refused(format!(
                    "node {id} is already a learner at {}; remove it first (`dls members remove {id}`) to change its addresses",
                    m.member
                )))
            }
            Some(_) => tracing::info!(node = id, "node is already a learner; waiting for it to catch up"),
            None => {
                if let Some(other) =
                    current.members.iter().find(|m| m.member.addr == member.addr || m.member.peer_addr == member.peer_addr)
                {
                    return Err(MembershipError::Refused(format!(
                        "node {} already uses these addresses ({}); give node {id} its own",
                        other.id, other.member
                    )));
                }
                tracing::info!(node = id, member = %member, "adding a learner");
                self.commit_change(ChangeMembers::AddNodes(BTreeMap::from([(id, member)]))).await?;
            }
        }
        if stay_learner {
            return Ok(());
        }
        self.promote_member(id, catch_up).await
    }

    /// Makes learner `id` a voter once it has caught up with the leader's log.
    pub async fn promote_member(&self, id: NodeId, catch_up: Duration) -> Result<()> {
        let current = self.membership()?;
        match current.members.iter().find(|m| m.id == id) {
            None => {
                return Err(MembershipError::Refused(format!(
                    "node {id} is not a member; add it with `dls members add {id} HOST:PORT/PEER_PORT`"
                )))
            }
            Some(m) if m.voter => return Err(MembershipError::Refused(format!("node {id} is already a voter"))),
            Some(_) => {}
        }
        refuse_while_changing(&current)?;
        self.wait_caught_up(id, current.last_log_index, catch_up).await?;
        tracing::info!(node = id, "learner caught up; promoting it to voter");
        self.commit_change(ChangeMembers::AddVoterIds(BTreeSet::from([id]))).await
    }

    /// Removes `id` (voter or learner). Removing this leader commits the change first; the
    /// leader then steps down and the remaining voters elect a new one.
    pub async fn remove_member(&self, id: NodeId) -> Result<()> {
        if id == 0 {
            return Err(MembershipError::Invalid("node_id must be at least 1".into()));
        }
        let current = self.membership()?;
        let Some(target) = current.members.iter().find(|m| m.id == id) else {
            let ids: Vec<NodeId> = current.members.iter().map(|m| m.id).collect();
            return Err(MembershipError::Refused(format!("node {id} is not a member (members: {ids:?})")));
        };
        refuse_while_changing(&current)?;
        let change = if target.voter {
            let voters = current.members.iter().filter(|m| m.voter).count();
            if voters == 1 {
                return Err(MembershipError::Refused(format!(
                    "node {id} is the last voter; add another voter first (`dls members add`)"
                )));
            }
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        };
        tracing::info!(node = id, voter = target.voter, leader = id == self.id, "removing a member");
        self.commit_change(change).await
    }

    /// Waits until the leader has replicated to `id` everything up to `target`.
    /// Finishes a joint configuration that nobody is finishing: one a former leader entered
    /// and lost leadership (or crashed) before leaving. While this node leads and the same
    /// joint configuration has stood since the last call (`seen` carries it between
    /// calls), it proposes the new voters alone (the second step of the change that was
    /// under way).
    pub async fn finish_stuck_joint(&self, seen: &mut Option<Option<u64>>) {
        let m = self.raft.metrics().borrow().clone();
        let configs = m.membership_config.membership().get_joint_config().clone();
        let leading = m.state == openraft::ServerState::Leader;
        let stuck = leading && configs.len() > 1;
        let id = m.membership_config.log_id().map(|l| l.index);
        if !stuck {
            *seen = None;
            return;
        }
        if *seen != Some(id) {
            *seen = Some(id);
            return;
        }
        let new_voters = configs.last().cloned().unwrap_or_default();
        tracing::warn!(voters = ?new_voters, "a joint configuration was left half done; finishing it");
        let finish = ChangeMembers::ReplaceAllVoters(new_voters);
        if let Err(e) = self.commit_change(finish).await {
            tracing::warn!("could not finish the joint configuration yet: {e}");
        }
    }

    async fn wait_caught_up(&self, id: NodeId, target: u64, within: Duration) -> Result<()> {
        let caught_up = |m: &openraft::RaftMetrics<NodeId, Member>| {
            let matched = m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map_or(0, |l| l.index);
            matched >= target || m.state != openraft::ServerState::Leader
        };
        let waited = self.raft.wait(Some(within)).metrics(caught_up, "learner catch-up").await;
        match waited {
            Ok(m) if m.state == openraft::ServerState::Leader => Ok(()),
            Ok(_) => Err(MembershipError::NotLeader),
            Err(_) => Err(MembershipError::Refused(format!(
                "node {id} is a learner but has not caught up within {within:?} (it needs log index {target}); \
                 start it with `dls serve --join` and an empty data directory, then run `dls members promote {id}`"
            ))),
        }
    }

    async fn commit_change(&self, change: ChangeMembers<NodeId, Member>) -> Result<()> {
        // openraft's change_membership takes two steps (enter the joint configuration, then
        // leave it), driven by its caller: cancelled in between (the RPC timed out, the
        // client went away), it would leave the cluster joint, needing a majority of the
        // old and of the new voters for every write. So it runs in a task of its own that
        // always finishes; this call only waits for it. (A leader change between the steps
        // is finished by `spawn_joint_finisher`.)
        let raft = self.raft.clone();
        // retain = false: a removed voter leaves the membership instead of staying a learner.
        let task = tokio::spawn(async move { raft.change_membership(change, false).await });
        match tokio::time::timeout(COMMIT_TIMEOUT, task).await {
            Ok(Err(join)) => Err(MembershipError::Unavailable(format!("the membership change task failed: {join}"))),
            Ok(Ok(r)) => commit_result(r),
            Err(_) => Err(MembershipError::Unavailable(format!(
                "the change was not committed within {COMMIT_TIMEOUT:?} (can a majority of the old and of the new voters \
                 be reached?); it goes on in the background: check `dls members list`"
            ))),
        }
    }
}

fn commit_result<T>(r: std::result::Result<T, RaftError<NodeId, ClientWriteError<NodeId, Member>>>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => Err(MembershipError::NotLeader),
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => Err(match e {
            ChangeMembershipError::InProgress(_) => {
                MembershipError::Refused(format!("another membership change is in progress ({e}); retry shortly"))
            }
            e => MembershipError::Refused(e.to_string()),
        }),
        Err(e) => Err(MembershipError::Unavailable(format!("raft could not change the membership: {e}"))),
    }
}

fn refuse_while_changing(current: &Membership) -> Result<()> {
    if current.changing {
        return Err(MembershipError::Refused(
            "a membership change is half done (joint configuration); retry when `dls members list` shows it finished"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_members_need_an_id_and_two_distinct_host_ports() {
        let m = |a: &str, p: &str| Member { addr: a.into(), peer_addr: p.into() };
        assert!(validate_new(4, &m("10.0.0.4:7070", "10.0.0.4:7080")).is_ok());
        assert!(matches!(validate_new(0, &m("h:1", "h:2")), Err(MembershipError::Invalid(_))));
        for (a, p) in [("h", "h:2"), ("h:1", "h:x"), (":1", "h:2"), ("h:1", "h:1"), ("h:99999", "h:2")] {
            assert!(matches!(validate_new(4, &m(a, p)), Err(MembershipError::Invalid(_))), "{a} {p}");
        }
    }
}

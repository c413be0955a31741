//! How a node with an empty raft log decides whether to bootstrap a new cluster, join an
//! existing one, or refuse to start (docs/storage.md, "Bootstrap and membership").
//!
//! A voter whose data directory was wiped must never take part in raft under its old id:
//! its vote is gone (it could vote twice in one term) and so are the entries it
//! acknowledged (it could help elect a leader that lacks them). So a node with an empty log
//! asks the members in `--peers` for their view over the peer port before raft traffic
//! reaches it, and:
//! - bootstraps (raft `initialize` with `--peers`) only when every listed member answered
//!   and none has committed anything yet, or, after [`MAJORITY_AFTER`], when a majority did
//!   (so a new cluster with one machine down still forms);
//! - joins (never initializes; waits to be replicated to as a learner) when started with
//!   `--join`, or when a running cluster lists it as a learner;
//! - refuses when a running cluster lists it as a voter (its log and vote were lost), when
//!   the cluster runs without it and it was not started with `--join`, and when a peer of a
//!   new cluster was started with another `--peers` list.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use caerus_proto::raft::{ClusterStateRequest, ClusterStateResponse};
use tonic::Request;

use super::network::PeerTransport;
use super::types::{Member, NodeId};

/// How long a new cluster waits for every listed member before a majority may bootstrap it.
pub const MAJORITY_AFTER: Duration = Duration::from_secs(5);
/// Most peers a pristine node remembers having asked it (far above any cluster's size).
pub const MAX_ASKERS: usize = 1024;
/// How long a node started with --join waits for members that still list it as a voter
/// (they have not applied its removal yet) before it refuses as a lost log.
pub const JOIN_SETTLE: Duration = Duration::from_secs(10);
/// Pause between two rounds of asking the peers.
const ROUND_PAUSE: Duration = Duration::from_millis(100);
/// A peer that does not answer within this long counts as unreachable for the round.
const ASK_TIMEOUT: Duration = Duration::from_millis(1000);
/// How often a waiting node says what it waits for.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// One peer's answer, as the decision needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerView {
    pub node_id: NodeId,
    pub cluster_id: String,
    pub initialized: bool,
    pub committed: u64,
    /// Members with `true` for voters.
    pub members: BTreeMap<NodeId, bool>,
}

impl PeerView {
    /// The cluster has elected a leader that committed through a quorum: a voter of it
    /// has state that must not be lost.
    fn running(&self) -> bool {
        self.initialized && self.committed > 0
    }
}

impl From<ClusterStateResponse> for PeerView {
    fn from(r: ClusterStateResponse) -> Self {
        PeerView {
            node_id: r.node_id,
            cluster_id: r.cluster_id,
            initialized: r.initialized,
            committed: r.committed_index,
            members: r.members.into_iter().map(|m| (m.node_id, m.voter)).collect(),
        }
    }
}

/// What the node does with its empty log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Bootstrap the cluster of `--peers` (every other listed node does the same).
    Initialize,
    /// Take the cluster's id and wait to be replicated to as a learner.
    Join { cluster_id: String },
    /// Do not start; the message says why and what to do.
    Refuse(String),
    /// Ask again; the text says what is missing.
    Wait(String),
}

/// What the node knows about itself when it decides.
pub struct Asker<'a> {
    pub id: NodeId,
    pub own: &'a Member,
    pub listed: &'a BTreeMap<NodeId, Member>,
    /// The id a new cluster of `--peers` gets.
    pub derived_id: &'a str,
    pub join: bool,
    pub data_dir: &'a std::path::Path,
    /// The peers forming a new cluster (not started with --join) that asked this node,
    /// still pristine, for its view and were told it is new (kept in memory only). Such a peer may have bootstrapped the cluster counting on
    /// this node; if it now runs a cluster listing this node as a voter, this node is its
    /// slower sibling, not a wiped voter: a wiped node is asked only by other pristine
    /// nodes, never by a member that is running (those do not ask).
    pub asked_by: &'a std::sync::Mutex<std::collections::BTreeSet<NodeId>>,
}

/// The refusal of a node whose log and vote were lost (`evidence` says how it knows), with
/// the way back.
pub fn lost_log(id: NodeId, data_dir: &std::path::Path, own: &Member, evidence: &str) -> String {
    format!(
        "node {id} has no raft log in {dir}, but {evidence}: its log and its vote were lost (a wiped or replaced \
         data directory). It must not vote or be counted again under this id until it is re-added. On a running \
         member: `dls members remove {id}`, then `dls members add {id} {addr}/{peer}`, then start this node with \
         an empty data directory and --join (or give it a new --node-id and add that instead).",
        dir = data_dir.display(),
        addr = own.addr,
        peer = own.peer_addr,
    )
}

impl Asker<'_> {
    /// Decides from the answers of the peers reached this round (unreachable ones are
    /// absent), `waited` after the node started asking.
    pub fn decide(&self, answers: &[PeerView], waited: Duration) -> Decision {
        let id = self.id;
        for a in answers.iter().filter(|a| a.initialized) {
            let voter = a.members.get(&id).copied();
            if voter == Some(true) && !self.join && self.asked_by.lock().expect("asked_by lock").contains(&a.node_id) {
                // A slower sibling of a cluster bootstrapped on its word (see `asked_by`): it
                // never voted or acknowledged anything, so it takes part as the voter it is.
                return Decision::Initialize;
            }
            if voter == Some(true) && (a.running() || self.join) {
                // A member that has not applied the removal yet still lists a node that
                // was removed and started again with --join: give the removal time to
                // reach every member before calling it a lost log.
                if self.join && waited < JOIN_SETTLE {
                    return Decision::Wait(format!(
                        "node {} still lists node {id} as a voter; waiting up to {JOIN_SETTLE:?} for its removal \
                         (`dls members remove {id}`) to reach every member",
                        a.node_id
                    ));
                }
                let refusal = lost_log(
                    id,
                    self.data_dir,
                    self.own,
                    &format!("node {} (cluster {}) lists node {id} as a voter", a.node_id, a.cluster_id),
                );
                // The one case that looks the same (docs/storage.md, "Known limits").
                return Decision::Refuse(format!(
                    "{refusal} If this node never ran before, it started more than {MAJORITY_AFTER:?} after a \
                     majority of its peers, which formed the cluster without it: the same commands bring it in."
                ));
            }
        }
        if let Some(a) =
            answers.iter().find(|a| a.initialized && (self.join || (a.running() && a.members.get(&id) == Some(&false))))
        {
            return Decision::Join { cluster_id: a.cluster_id.clone() };
        }
        if self.join {
            return Decision::Wait("no member of the cluster in --peers answered yet".into());
        }
        if let Some(a) = answers.iter().find(|a| a.running()) {
            return Decision::Refuse(format!(
                "the cluster of node {} (id {}) already runs and node {id} is not a member of it. Add it on a running \
                 member with `dls members add {id} {}/{}`, then start this node with --join",
                a.node_id, a.cluster_id, self.own.addr, self.own.peer_addr
            ));
        }
        if let Some(a) = answers.iter().find(|a| !a.cluster_id.is_empty() && a.cluster_id != self.derived_id) {
            return Decision::Refuse(format!(
                "node {} belongs to cluster {} but this node's --peers makes cluster {}: start every node of a new \
                 cluster with the same --peers list",
                a.node_id, a.cluster_id, self.derived_id
            ));
        }
        // Every peer reached is new, or bootstrapped the same member list moments ago.
        let reached = answers.len() + 1;
        let listed = self.listed.len();
        if reached == listed || (reached > listed / 2 && waited >= MAJORITY_AFTER) {
            return Decision::Initialize;
        }
        let missing: Vec<NodeId> =
            self.listed.keys().filter(|&&n| n != id && !answers.iter().any(|a| a.node_id == n)).copied().collect();
        Decision::Wait(format!(
            "{reached} of {listed} listed members reached (waiting for nodes {missing:?}; a majority suffices after {MAJORITY_AFTER:?})"
        ))
    }
}

/// Asks the listed peers until the decision is made. Never returns `Wait`.
pub async fn decide(transport: &PeerTransport, asker: &Asker<'_>) -> Decision {
    let started = Instant::now();
    let mut reported = started;
    loop {
        let asks = asker
            .listed
            .iter()
            .filter(|(&n, _)| n != asker.id)
            .map(|(&n, m)| ask(transport, asker.id, n, m, asker.join));
        let mut answers = Vec::new();
        let mut misaddressed = Vec::new();
        for answer in futures::future::join_all(asks).await.into_iter().flatten() {
            match answer {
                Ok(view) => answers.push(view),
                Err(wrong) => misaddressed.push(wrong),
            }
        }
        match asker.decide(&answers, started.elapsed()) {
            Decision::Wait(why) => {
                if reported.elapsed() >= REPORT_EVERY {
                    for wrong in &misaddressed {
                        tracing::warn!(node = asker.id, "{wrong}");
                    }
                    tracing::info!(node = asker.id, "not taking part in raft yet: {why}");
                    reported = Instant::now();
                }
                tokio::time::sleep(ROUND_PAUSE).await;
            }
            decided => return decided,
        }
    }
}

/// Asks one peer for its view: `None` when it cannot be reached, an error when another
/// node answers at its address (that answer must not count as the peer's).
async fn ask(
    transport: &PeerTransport,
    me: NodeId,
    peer: NodeId,
    member: &Member,
    joining: bool,
) -> Option<Result<PeerView, String>> {
    let mut client = transport.discovery(peer, &member.peer_addr).ok()?;
    let mut request = Request::new(ClusterStateRequest { node_id: me, joining });
    request.set_timeout(ASK_TIMEOUT);
    match tokio::time::timeout(ASK_TIMEOUT, client.cluster_state(request)).await {
        Ok(Ok(answer)) => {
            let view = PeerView::from(answer.into_inner());
            Some(if view.node_id == peer {
                Ok(view)
            } else {
                Err(format!(
                    "node {} answered at {}, the peer address --peers gives node {peer}: counted as unreachable; \
                     every node needs its own address in --peers",
                    view.node_id, member.peer_addr
                ))
            })
        }
        Ok(Err(status)) => {
            tracing::debug!(peer, "discovery call refused: {}", status.message());
            None
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(n: u64) -> BTreeMap<NodeId, Member> {
        (1..=n).map(|id| (id, Member { addr: format!("h:{id}"), peer_addr: format!("h:{}", id + 100) })).collect()
    }

    fn view(node_id: NodeId, committed: u64, members: &[(NodeId, bool)]) -> PeerView {
        PeerView {
            node_id,
            cluster_id: "c".into(),
            initialized: !members.is_empty(),
            committed,
            members: members.iter().copied().collect(),
        }
    }

    fn decide(id: NodeId, join: bool, answers: &[PeerView], waited: Duration) -> Decision {
        decide_asked(id, join, &[], answers, waited)
    }

    fn decide_asked(id: NodeId, join: bool, asked: &[NodeId], answers: &[PeerView], waited: Duration) -> Decision {
        let l = listed(3);
        let asked_by = std::sync::Mutex::new(asked.iter().copied().collect());
        let asker = Asker {
            id,
            own: &l[&id].clone(),
            listed: &l,
            derived_id: "c",
            join,
            data_dir: std::path::Path::new("/data"),
            asked_by: &asked_by,
        };
        asker.decide(answers, waited)
    }

    const VOTERS: &[(NodeId, bool)] = &[(1, true), (2, true), (3, true)];

    #[test]
    fn a_new_cluster_bootstraps_when_all_answer_or_a_majority_after_a_while() {
        let fresh = |n| view(n, 0, &[]);
        assert_eq!(decide(1, false, &[fresh(2), fresh(3)], Duration::ZERO), Decision::Initialize);
        assert!(matches!(decide(1, false, &[fresh(2)], Duration::ZERO), Decision::Wait(w) if w.contains("[3]")));
        assert_eq!(decide(1, false, &[fresh(2)], MAJORITY_AFTER), Decision::Initialize);
        assert!(matches!(decide(1, false, &[], MAJORITY_AFTER * 10), Decision::Wait(_)), "alone is no majority");
        // A peer that bootstrapped the same list a moment ago (nothing committed) is still new.
        assert_eq!(decide(3, false, &[view(1, 0, VOTERS), fresh(2)], Duration::ZERO), Decision::Initialize);
    }

    #[test]
    fn a_voter_of_a_running_cluster_with_an_empty_log_refuses() {
        let d = decide(3, false, &[view(1, 7, VOTERS)], Duration::ZERO);
        let Decision::Refuse(msg) = d else { panic!("{d:?}") };
        assert!(msg.contains("its log and its vote were lost"), "{msg}");
        assert!(msg.contains("dls members remove 3") && msg.contains("dls members add 3 h:3/h:103"), "{msg}");
        assert!(msg.contains("If this node never ran before, it started more than 5s after"), "{msg}");
        // --join does not make a listed voter safe either: it waits for the removal to
        // reach that member, then refuses.
        let d = decide(3, true, &[view(1, 0, VOTERS)], Duration::ZERO);
        assert!(matches!(&d, Decision::Wait(w) if w.contains("dls members remove 3")), "{d:?}");
        assert!(matches!(decide(3, true, &[view(1, 0, VOTERS)], JOIN_SETTLE), Decision::Refuse(_)));
    }

    /// Found by `make chaos` on 5 loaded nodes: a node slower to start than its siblings
    /// told them it was new, they bootstrapped and committed, and it then refused as a
    /// wiped voter. It takes part when a running member that lists it once asked it; a
    /// node asked only by other pristine nodes (two wiped at once) still refuses.
    #[test]
    fn a_slow_sibling_asked_by_a_member_that_now_runs_takes_part() {
        assert_eq!(decide_asked(3, false, &[1, 2], &[view(1, 7, VOTERS)], Duration::ZERO), Decision::Initialize);
        assert!(matches!(decide_asked(3, false, &[2], &[view(1, 7, VOTERS)], Duration::ZERO), Decision::Refuse(_)));
        assert!(matches!(decide_asked(3, false, &[], &[view(1, 7, VOTERS)], Duration::ZERO), Decision::Refuse(_)));
    }

    #[test]
    fn learners_and_join_nodes_join_and_never_initialize() {
        let with_learner = [(1, true), (2, true), (3, false)];
        assert_eq!(
            decide(3, false, &[view(1, 7, &with_learner)], Duration::ZERO),
            Decision::Join { cluster_id: "c".into() }
        );
        let without = [(1, true), (2, true)];
        assert_eq!(decide(3, true, &[view(1, 7, &without)], Duration::ZERO), Decision::Join { cluster_id: "c".into() });
        assert!(matches!(decide(3, true, &[view(1, 0, &[])], MAJORITY_AFTER), Decision::Wait(_)));
        // Not a member and not asked to join: refuse with the command that adds it.
        let Decision::Refuse(msg) = decide(3, false, &[view(1, 7, &without)], Duration::ZERO) else { panic!() };
        assert!(msg.contains("dls members add 3") && msg.contains("--join"), "{msg}");
    }

    #[test]
    fn peers_started_with_another_member_list_are_refused() {
        let mut other = view(2, 0, &[]);
        other.cluster_id = "other".into();
        let Decision::Refuse(msg) = decide(1, false, &[other], Duration::ZERO) else { panic!() };
        assert!(msg.contains("same --peers list"), "{msg}");
    }
}

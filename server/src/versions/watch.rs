//! The version handshake, on every node: asks each member which version and feature level
//! it runs, every [`POLL`] and whenever the membership changes; the leader then raises or
//! lowers the cluster's level through raft (`Reports::target`).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use caerus_proto::raft::ClusterStateRequest;
use tonic::Request;

use super::Report;
use crate::locks::{Command, Outcome};
use crate::node::Node;
use crate::raft::types::{Member, NodeId};

/// How often every member is asked.
pub const POLL: Duration = Duration::from_secs(1);
/// A member that does not answer within this long counts as not answering this round.
const ASK_TIMEOUT: Duration = Duration::from_millis(800);

/// Runs the handshake while the node lives.
pub fn spawn(node: &Arc<Node>) {
    let weak = Arc::downgrade(node);
    let mut metrics = node.raft().server_metrics();
    // A new leader moves the level as soon as it serves, not a poll later: a new
    // cluster's first requests find it raised already.
    let mut leading = node.leadership();
    tokio::spawn(async move {
        loop {
            if round(&weak).await.is_none() {
                return;
            }
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { return },
                changed = leading.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    });
}

/// One round: asks every member, then (on the leader) moves the level. `None` once the
/// node is gone.
async fn round(node: &Weak<Node>) -> Option<()> {
    let (members, me) = {
        let node = node.upgrade()?;
        let m = node.raft_metrics();
        let members: Vec<(NodeId, Member)> =
            m.membership_config.membership().nodes().map(|(id, n)| (*id, n.clone())).collect();
        (members, node.id())
    };
    let asks = members.iter().filter(|(id, _)| *id != me).map(|(id, m)| {
        let node = node.clone();
        let (id, addr) = (*id, m.peer_addr.clone());
        async move { (id, ask(&node, me, id, &addr).await) }
    });
    let answers = futures::future::join_all(asks).await;
    let node = node.upgrade()?;
    let ids: Vec<NodeId> = members.iter().map(|(id, _)| *id).collect();
    let versions = node.versions();
    {
        let mut reports = versions.reports.write().expect("reports lock");
        reports.retain(&ids);
        let now = Instant::now();
        reports
            .record(me, Report { version: Some(versions.own_version.to_string()), level: versions.own_level, at: now });
        for (id, answer) in answers {
            if let Some(report) = answer {
                reports.record(id, report);
            }
        }
    }
    if node.require_leader().is_ok() && !ids.is_empty() {
        let cluster = node.state().read().expect("state lock").table.feature_levels();
        let target = versions.reports.read().expect("reports lock").target(&ids, cluster, Instant::now());
        if let Some(level) = target {
            match node.propose(Command::SetFeatureLevel { level }).await {
                Ok(Outcome::FeatureLevelSet { .. }) => {
                    tracing::info!(from = cluster.level, to = level, "cluster feature level changed")
                }
                Ok(refused) => tracing::warn!(level, "feature level change refused: {refused:?}"),
                Err(e) => tracing::warn!(level, "feature level change not committed, will retry: {e}"),
            }
        }
    }
    Some(())
}

/// Asks one member; `None` when it does not answer.
async fn ask(node: &Weak<Node>, me: NodeId, id: NodeId, addr: &str) -> Option<Report> {
    let mut client = node.upgrade()?.peer_transport().discovery(id, addr).ok()?;
    // `joining`: this question says nothing about a new cluster being formed (see
    // `raft::bootstrap`), so a pristine member does not count it.
    let mut request = Request::new(ClusterStateRequest { node_id: me, joining: true });
    request.set_timeout(ASK_TIMEOUT);
    match tokio::time::timeout(ASK_TIMEOUT, client.cluster_state(request)).await {
        Ok(Ok(answer)) => {
            let answer = answer.into_inner();
            (answer.node_id == id).then(|| Report::from_answer(answer.version, answer.feature_level, Instant::now()))
        }
        _ => None,
    }
}

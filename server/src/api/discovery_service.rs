//! The peer discovery service: a node with an empty log asks its peers what they know
//! about the cluster before it bootstraps or joins (`raft::bootstrap`). Served on the peer
//! port only, behind the credentials gate.

use std::sync::Arc;

use caerus_proto::raft::peer_discovery_service_server::PeerDiscoveryService;
use caerus_proto::raft::{ClusterStateRequest, ClusterStateResponse, PeerMember};
use tonic::{Request, Response, Status};

use crate::node::Node;
use crate::raft::types::NodeId;

/// Answers other nodes' discovery calls.
pub struct Discovery {
    pub node: Arc<Node>,
}

#[tonic::async_trait]
impl PeerDiscoveryService for Discovery {
    async fn cluster_state(&self, req: Request<ClusterStateRequest>) -> Result<Response<ClusterStateResponse>, Status> {
        let state = cluster_state(&self.node);
        // Only a peer forming a new cluster counts (see `bootstrap::Asker::asked_by`),
        // never one joining.
        let asker = req.get_ref();
        if !state.initialized && !asker.joining {
            self.node.note_asker(asker.node_id);
        }
        Ok(Response::new(state))
    }
}

/// This node's view for a peer's discovery call.
fn cluster_state(node: &Node) -> ClusterStateResponse {
    let m = node.raft_metrics();
    let initialized = node.admitted() && m.membership_config.log_id().is_some();
    let config = m.membership_config.membership();
    let voters: Vec<NodeId> = config.voter_ids().collect();
    let members = config
        .nodes()
        .map(|(&id, n)| PeerMember {
            node_id: id,
            addr: n.addr.clone(),
            peer_addr: n.peer_addr.clone(),
            voter: voters.contains(&id),
        })
        .collect();
    ClusterStateResponse {
        cluster_id: node.cluster_id_for_peers(),
        node_id: node.id(),
        initialized,
        committed_index: node.committed_index().max(m.last_applied.map_or(0, |l| l.index)),
        members: if initialized { members } else { Vec::new() },
        leader_id: m.current_leader.unwrap_or(0),
        version: node.versions().own_version.to_string(),
        feature_level: node.versions().own_level,
    }
}

//! The peer port: raft, discovery and the calls followers forward, all behind the peer gate.
//!
//! The raft transport has a port of its own, behind the peer gate: nothing reaches openraft
//! from a caller that is not a node of this cluster. It serves before the node has decided
//! how to take part (`Node::bootstrap`), since its peers ask it too. Behind the same gate,
//! the client services answer the calls followers forward (never forwarding them again).

use std::sync::Arc;

use caerus_proto::raft::peer_discovery_service_server::PeerDiscoveryServiceServer;
use caerus_proto::raft::raft_service_server::RaftServiceServer;
use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;

use super::ports::{grpc_server, GrpcRouter, MAX_CLIENT_MESSAGE};
use crate::api::admin_service::AdminApi;
use crate::api::caller::PeerCaller;
use crate::api::discovery_service::Discovery;
use crate::api::lock_service::LockApi;
use crate::api::raft_service::RaftApi;
use crate::conn::RequestDeadline;
use crate::node::Node;
use crate::raft::network::MAX_RAFT_MESSAGE;
use crate::raft::peer_auth::{CredentialsGate, Gate};

/// The peer port's router. `max_forwarded_calls`: what a follower's one forwarding
/// connection may carry of its clients' calls.
pub(super) fn router(
    node: &Arc<Node>,
    lock_api: &Arc<LockApi>,
    admin_api: &Arc<AdminApi>,
    max_forwarded_calls: u64,
    stop: watch::Receiver<bool>,
) -> GrpcRouter {
    let raft_api = RaftServiceServer::new(RaftApi { node: node.clone(), stop })
        .max_decoding_message_size(MAX_RAFT_MESSAGE)
        .max_encoding_message_size(MAX_RAFT_MESSAGE);
    let gate = Gate(node.peer_auth().clone());
    let discovery = InterceptedService::new(
        PeerDiscoveryServiceServer::new(Discovery { node: node.clone() }),
        CredentialsGate(node.peer_auth().clone()),
    );
    let forwarded_locks = LockServiceServer::from_arc(lock_api.clone()).max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let forwarded_admin = AdminServiceServer::from_arc(admin_api.clone()).max_decoding_message_size(MAX_CLIENT_MESSAGE);
    // Raft messages may be large and slow to arrive (a snapshot): no request timeout here;
    // nothing reaches a handler before the peer gate has passed the caller, so a stranger's
    // streams are answered at once.
    let streams = u32::try_from(max_forwarded_calls).unwrap_or(u32::MAX).saturating_add(256);
    grpc_server(streams, RequestDeadline(None))
        .add_service(InterceptedService::new(raft_api, gate.clone()))
        .add_service(discovery)
        .add_service(InterceptedService::new(forwarded_locks, PeerCaller(gate.clone())))
        .add_service(InterceptedService::new(forwarded_admin, PeerCaller(gate)))
}

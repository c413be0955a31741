//! The client port's services: served here by the leader, passed on to it by followers
//! (`api::forward`); the HTTP API runs the very same services, forwarding included.

use std::sync::Arc;

use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;

use super::ports::{grpc_server, GrpcRouter, MAX_CLIENT_MESSAGE};
use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::forward::{Forwarder, ForwardingAdmin, ForwardingLocks};
use crate::api::key_check::KeyCheck;
use crate::api::lock_service::LockApi;
use crate::conn::RequestDeadline;
use crate::http;
use crate::node::Node;

/// The lock and admin services this node answers itself (as the leader, or for a follower
/// that forwarded a call), and the forwarding fronts clients reach.
pub(super) struct Services {
    pub lock_api: Arc<LockApi>,
    pub admin_api: Arc<AdminApi>,
    forwarder: Arc<Forwarder>,
}

impl Services {
    pub fn new(
        lock_api: LockApi,
        admin_api: AdminApi,
        node: Arc<Node>,
        keys: Arc<KeyRing>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Services {
            lock_api: Arc::new(lock_api),
            admin_api: Arc::new(admin_api),
            forwarder: Forwarder::new(node, keys, stop),
        }
    }

    fn locks(&self) -> ForwardingLocks {
        ForwardingLocks { local: self.lock_api.clone(), forwarder: self.forwarder.clone() }
    }

    fn admin(&self) -> ForwardingAdmin {
        ForwardingAdmin { local: self.admin_api.clone(), forwarder: self.forwarder.clone() }
    }

    /// What the HTTP API serves: the same services as the client port.
    pub fn gateway(&self) -> Arc<http::gateway::Gateway> {
        Arc::new(http::gateway::Gateway { lock: self.locks(), admin: self.admin() })
    }

    /// The client port's router. The key is checked from the headers, before a body is read
    /// (`api::key_check`); `streams` and `arrival` bound each connection (`conn`).
    pub fn router(&self, keys: Arc<KeyRing>, streams: u32, arrival: RequestDeadline) -> GrpcRouter {
        let key_check = KeyCheck(keys);
        let locks = InterceptedService::new(
            LockServiceServer::new(self.locks()).max_decoding_message_size(MAX_CLIENT_MESSAGE),
            key_check.clone(),
        );
        let admin = InterceptedService::new(
            AdminServiceServer::new(self.admin()).max_decoding_message_size(MAX_CLIENT_MESSAGE),
            key_check,
        );
        grpc_server(streams, arrival).add_service(locks).add_service(admin)
    }
}

//! Who leads: asked of the nodes themselves, over gRPC.

use std::time::{Duration, Instant};

use caerus_core::DlsClient;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::HeartbeatRequest;
use tonic::transport::{Channel, ClientTlsConfig};

use crate::Cluster;

pub async fn raw_client(addr: &str) -> LockServiceClient<Channel> {
    let ch = Channel::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
    LockServiceClient::new(ch)
}

/// A raw client of a TLS client port.
pub fn raw_tls_client(addr: &str, tls: &ClientTlsConfig) -> LockServiceClient<Channel> {
    let ch = Channel::from_shared(format!("https://{addr}")).unwrap().tls_config(tls.clone()).unwrap().connect_lazy();
    LockServiceClient::new(ch)
}

/// A leader answers a heartbeat for an unknown transaction with NOT_FOUND; candidates
/// answer UNAVAILABLE, and followers relay the leader's answer marked `x-dls-forwarded-to`.
pub(crate) async fn is_leader(addr: &str, key: Option<&str>, tls: Option<&ClientTlsConfig>) -> bool {
    matches!(probe(addr, key, tls).await, Err(s) if s.code() == tonic::Code::NotFound && !s.metadata().contains_key("x-dls-forwarded-to"))
}

/// Whether the node at `addr` serves calls: it leads, or it knows the leader and relays the
/// leader's answer (a follower that has not heard from a leader yet answers NOT_LEADER).
pub(crate) async fn serves(addr: &str, key: Option<&str>, tls: Option<&ClientTlsConfig>) -> bool {
    matches!(probe(addr, key, tls).await, Err(s) if s.code() == tonic::Code::NotFound)
}

async fn probe(addr: &str, key: Option<&str>, tls: Option<&ClientTlsConfig>) -> Result<(), tonic::Status> {
    let mut c = match tls {
        Some(tls) => raw_tls_client(addr, tls),
        None => raw_client(addr).await,
    };
    let mut req = tonic::Request::new(HeartbeatRequest { transaction_id: u64::MAX, ..Default::default() });
    if let Some(k) = key {
        req.metadata_mut().insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    req.set_timeout(Duration::from_millis(500));
    c.heartbeat(req).await.map(|_| ())
}

impl Cluster {
    /// The leader as the running, unpaused nodes see it: the leader of the highest term any
    /// of them reports. Under partitions an isolated old leader may still think it leads;
    /// the majority's newer term wins.
    pub async fn leader_by_term(&self, admin: &DlsClient) -> Option<u64> {
        let mut best: Option<(u64, u64)> = None;
        for id in self.running() {
            let addr = &self.node(id).listen;
            let st = tokio::time::timeout(Duration::from_millis(800), admin.cluster_status_of(addr)).await;
            if let Ok(Ok(s)) = st {
                if let Some(l) = s.leader_id {
                    if best.is_none_or(|(t, _)| s.term > t) {
                        best = Some((s.term, l));
                    }
                }
            }
        }
        best.map(|(_, l)| l)
    }

    /// Waits up to `within` for [`Cluster::leader_by_term`] to name a running node.
    pub async fn wait_for_leader_by_term(&self, admin: &DlsClient, within: Duration) -> Option<u64> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(l) = self.leader_by_term(admin).await {
                if self.running().contains(&l) {
                    return Some(l);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }
}

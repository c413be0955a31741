//! Runs a gRPC call for the HTTP API: first on this node's own `LockApi`/`AdminApi` (the
//! same code gRPC clients reach), and when this node is not the leader, on the leader over
//! gRPC with the caller's `authorization` copied. So the HTTP API works on every node and
//! keeps working through a leader change, without a second copy of any lock logic.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_proto::metadata;
use futures::Stream;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::transport::{Channel, ClientTlsConfig};
use tonic::{Code, Request, Status};

use crate::api::admin_service::AdminApi;
use crate::api::lock_service::LockApi;

/// How long a call keeps retrying while no leader is known or the leader moves. Longer
/// than an election, shorter than an HTTP client's patience.
const LEADER_PATIENCE: Duration = Duration::from_secs(8);
/// Pause between attempts while no leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A server stream, the same type whether it runs here or on the leader.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Where an attempt runs.
#[derive(Clone, Debug)]
pub enum Target {
    Local,
    Leader(Channel),
}

pub struct Gateway {
    pub lock: Arc<LockApi>,
    pub admin: Arc<AdminApi>,
    /// One lazily connected channel per leader address.
    channels: Mutex<HashMap<String, Channel>>,
    /// Set when the client port runs TLS: how to reach the leader's.
    tls: Option<ClientTlsConfig>,
}

/// The caller's credentials, copied onto every attempt.
#[derive(Clone, Default)]
pub struct Auth(Option<MetadataValue<tonic::metadata::Ascii>>);

impl Auth {
    pub fn from_headers(headers: &http::HeaderMap) -> Auth {
        let value = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        Auth(value)
    }

    pub fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Some(v) = &self.0 {
            req.metadata_mut().insert(metadata::AUTHORIZATION, v.clone());
        }
        req
    }
}

/// `Some(leader address)` when the status is a follower's NOT_LEADER answer naming one;
/// `Some("")` when no leader is known yet.
fn not_leader(s: &Status) -> Option<String> {
    let kind = s.metadata().get(metadata::ERROR_KIND).and_then(|v| v.to_str().ok());
    if s.code() != Code::Unavailable || kind != Some("NOT_LEADER") {
        return None;
    }
    Some(leader_addr(s.metadata()).unwrap_or_default())
}

fn leader_addr(md: &MetadataMap) -> Option<String> {
    md.get(metadata::LEADER_ADDR).and_then(|v| v.to_str().ok()).map(str::to_string)
}

impl Gateway {
    pub fn new(lock: Arc<LockApi>, admin: Arc<AdminApi>, tls: Option<ClientTlsConfig>) -> Gateway {
        Gateway { lock, admin, channels: Mutex::new(HashMap::new()), tls }
    }

    fn channel(&self, addr: &str) -> Result<Channel, Status> {
        let mut map = self.channels.lock().expect("channels lock");
        if let Some(ch) = map.get(addr) {
            return Ok(ch.clone());
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| Status::internal(format!("bad leader address {addr:?}: {e}")))?
            .connect_timeout(Duration::from_secs(2));
        if let Some(tls) = &self.tls {
            endpoint = endpoint
                .tls_config(tls.clone())
                .map_err(|e| Status::internal(format!("TLS to the leader at {addr}: {e}")))?;
        }
        let ch = endpoint.connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    /// Runs `attempt` here, then wherever NOT_LEADER points, until it answers with anything
    /// else or [`LEADER_PATIENCE`] passes. Callers give every state-changing request a
    /// request id, so a repeated attempt is answered from the first one's record.
    pub async fn call<T, F, Fut>(&self, attempt: F) -> Result<T, Status>
    where
        F: Fn(Target) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        // Counted from the first failure, so a long lock wait still survives a leader change.
        let mut first_failure: Option<Instant> = None;
        let mut target = Target::Local;
        loop {
            let remote = matches!(target, Target::Leader(_));
            let err = match attempt(target.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if first_failure.get_or_insert_with(Instant::now).elapsed() > LEADER_PATIENCE {
                return Err(err);
            }
            target = match not_leader(&err) {
                Some(addr) if !addr.is_empty() => {
                    tracing::debug!(leader = %addr, "HTTP API call forwarded to the leader");
                    Target::Leader(self.channel(&addr)?)
                }
                Some(_) => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    Target::Local
                }
                // The leader we forwarded to is gone (connection refused, reset): ask this
                // node again who leads now.
                None if remote && err.code() == Code::Unavailable => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    Target::Local
                }
                None => return Err(err),
            };
        }
    }

    /// Whether an error ends a stream only because leadership moved (resume elsewhere).
    pub fn is_leader_change(s: &Status) -> bool {
        not_leader(s).is_some() || (s.code() == Code::Unavailable && s.metadata().get(metadata::ERROR_KIND).is_none())
    }
}

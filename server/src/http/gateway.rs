//! Runs a gRPC call for the HTTP API through the client port's own services
//! (`api::forward`): this node's `LockApi`/`AdminApi` when it leads, the leader's over the
//! follower's hop to its peer port otherwise, the same way, under the same bounds, as a
//! gRPC client's call. The HTTP client is the client: its API key decides its share of a
//! follower's forwarded calls, and the leader counts its watches against its own address,
//! not against the node that relayed them. So the HTTP API works on every node, keeps
//! working through a leader change and in the partitions the hop is built for, without a
//! second copy of any lock logic or a second way to reach the leader.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use caerus_proto::metadata;
use futures::Stream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Code, Request, Status};

use crate::api::caller;
use crate::api::forward::{ForwardingAdmin, ForwardingLocks};
use crate::telemetry::trace_context::{TRACEPARENT, TRACESTATE};

/// How long a call keeps retrying while no leader is known or the leader moves. Longer
/// than an election, shorter than an HTTP client's patience.
const LEADER_PATIENCE: Duration = Duration::from_secs(8);
/// Pause between attempts while no leader answers.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A server stream, the same type whether it runs here or on the leader.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The client port's services, as the HTTP API calls them.
pub struct Gateway {
    pub lock: ForwardingLocks,
    pub admin: ForwardingAdmin,
}

/// The HTTP client behind a request: its credentials, trace context and address, put on
/// every attempt.
#[derive(Clone, Default)]
pub struct Caller {
    /// `authorization`, `traceparent` and `tracestate`, those the request had.
    passed_on: Vec<(&'static str, MetadataValue<Ascii>)>,
    addr: Option<SocketAddr>,
}

impl Caller {
    pub fn new(headers: &http::HeaderMap, addr: Option<SocketAddr>) -> Caller {
        let passed_on = [metadata::AUTHORIZATION, TRACEPARENT, TRACESTATE]
            .into_iter()
            .filter_map(|name| Some((name, headers.get(name)?.to_str().ok()?.parse().ok()?)))
            .collect();
        Caller { passed_on, addr }
    }

    pub fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        for (name, value) in &self.passed_on {
            req.metadata_mut().insert(*name, value.clone());
        }
        match self.addr {
            Some(addr) => caller::made_for(req, addr),
            None => req,
        }
    }
}

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let addr = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
        Ok(Caller::new(&parts.headers, addr))
    }
}

/// Whether a status is a NOT_LEADER answer (this node knows no leader, the hop to the
/// leader failed, or the leader stepped down).
fn not_leader(s: &Status) -> bool {
    let kind = s.metadata().get(metadata::ERROR_KIND).and_then(|v| v.to_str().ok());
    s.code() == Code::Unavailable && kind == Some("NOT_LEADER")
}

impl Gateway {
    /// Runs `attempt` until it answers with anything but NOT_LEADER or [`LEADER_PATIENCE`]
    /// passes: each attempt goes wherever the leader is then. Callers give every
    /// state-changing request a request id, so a repeated attempt is answered from the
    /// first one's record.
    pub async fn call<T, F, Fut>(&self, attempt: F) -> Result<T, Status>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        // Counted from the first failure, so a long lock wait still survives a leader change.
        let mut first_failure: Option<Instant> = None;
        loop {
            let err = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if !not_leader(&err) || first_failure.get_or_insert_with(Instant::now).elapsed() > LEADER_PATIENCE {
                return Err(err);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Whether an error ends a stream only because leadership moved (resume elsewhere).
    pub fn is_leader_change(s: &Status) -> bool {
        not_leader(s) || (s.code() == Code::Unavailable && s.metadata().get(metadata::ERROR_KIND).is_none())
    }
}

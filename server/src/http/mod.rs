//! The HTTP port: `/metrics` (Prometheus), `/healthz` and `/readyz` for operators (no
//! key needed, nothing that changes state); the HTTP/JSON API under `/api/v1` (same keys
//! and rules as gRPC, see `api`; browsers of other origins kept out, see `access`); and
//! the Playground page with its OpenAPI file.

pub mod access;
pub mod api;
pub mod gateway;
pub mod headers;
pub mod json;
pub mod key_sse;
pub mod playground;
pub mod query;
pub mod sse;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

use self::access::{Access, HttpAccessArgs};
use self::gateway::Gateway;
use crate::conn::deadline::{Arrival, TimedBody};
use crate::conn::{self, Conn, ConnectionArgs, PortGuard};
use crate::engine::Engine;
use crate::metrics::Gauges;
use crate::tls::{Protocol, ServerTls};

/// A node is ready while it applies within this many entries of the commit index: a
/// node replaying a long log (or a snapshot) would serve stale reads and should not get
/// traffic yet.
pub const MAX_READY_LAG: u64 = 100;

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds the port before the node starts, so a busy port fails at once and names the flag.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| {
        format!(
            "cannot listen on {addr} for the HTTP port (metrics, health; pick a free address with --http-listen or \
             DLS_HTTP_LISTEN)"
        )
    })
}

pub fn router(engine: Arc<Engine>, gateway: Arc<Gateway>, access: Arc<Access>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(engine)
        .merge(api::routes(gateway, access))
        .merge(playground::routes())
        .layer(axum::middleware::map_response(headers::protect))
}

/// The HTTP port as `serve` hands it over: bound, with its connection bounds.
pub struct Port {
    pub listener: TcpListener,
    pub guard: Arc<PortGuard>,
    pub tls: Option<Arc<ServerTls>>,
    pub connections: ConnectionArgs,
}

/// The largest request body the HTTP API reads; its requests are a few hundred bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Serves until `shutdown` resolves, over TLS when the port has it. Each connection is
/// HTTP/1.1 with a deadline for its headers (which is also its keep-alive idle timeout);
/// each request's body must arrive within the request timeout (`conn::deadline`).
pub async fn serve(
    port: Port,
    engine: Arc<Engine>,
    gateway: Arc<Gateway>,
    access: &HttpAccessArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = port.listener.local_addr()?;
    let scheme = if port.tls.is_some() { "https" } else { "http" };
    tracing::info!("metrics on {scheme}://{addr}/metrics (health: /healthz, readiness: /readyz)");
    tracing::info!("HTTP/JSON API on {scheme}://{addr}/api/v1 (OpenAPI: {scheme}://{addr}/openapi.json)");
    tracing::info!("playground on {scheme}://{addr}/playground");
    let access = Arc::new(Access::new(access, addr));
    let app = router(engine, gateway, access).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).layer(
        axum::middleware::from_fn_with_state(
            (port.connections.request_timeout(), port.guard.clone()),
            time_request_bodies,
        ),
    );
    let header_timeout = port.connections.http_header_timeout();
    match port.tls {
        None => {
            let plain = |tcp: TcpStream| async move { Ok(tcp) };
            let incoming = conn::incoming(port.listener, port.guard, Protocol::Http1, plain);
            serve_connections(incoming, app, header_timeout, shutdown).await
        }
        Some(tls) => {
            let incoming = conn::incoming(port.listener, port.guard, Protocol::Http1, crate::tls::upgrade(tls));
            serve_connections(incoming, app, header_timeout, shutdown).await
        }
    }
    Ok(())
}

/// Each connection gets its own HTTP/1.1 connection task, drained gracefully at shutdown;
/// every request carries the client's address (`ConnectInfo`).
async fn serve_connections<S, IO>(
    incoming: S,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) where
    S: Stream<Item = std::io::Result<Conn<IO>>>,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
    tokio::pin!(incoming, shutdown);
    loop {
        let stream = tokio::select! {
            next = incoming.next() => match next {
                Some(Ok(stream)) => stream,
                Some(Err(_)) => continue,
                None => break,
            },
            _ = &mut shutdown => break,
        };
        let peer = ConnectInfo(stream.peer());
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(peer);
            // A Router is always ready: no poll_ready needed before a call.
            tower_service::Service::call(&mut app.clone(), req)
        });
        let connection = graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
    }
    graceful.shutdown().await;
}

/// Every request body must arrive within the request timeout, and counts against the
/// port's requests still arriving until it has (see `conn::deadline`).
async fn time_request_bodies(
    State((limit, guard)): State<(Duration, Arc<PortGuard>)>,
    req: Request,
    next: Next,
) -> Response {
    let arrival = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| Arrival { guard, peer: c.0 });
    next.run(req.map(|body| Body::new(TimedBody::new(body, limit, arrival)))).await
}

async fn metrics(State(engine): State<Arc<Engine>>) -> Response {
    let text = engine.metrics().render(&engine.gauges());
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response()
}

async fn readyz(State(engine): State<Arc<Engine>>) -> Response {
    match readiness(&engine.gauges()) {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()).into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

/// Ready = this node can serve: it is a member of a cluster, it is not fetching entries it
/// lost to disk damage (it does not vote meanwhile), a leader is known (requests can be
/// served or redirected), and its table is nearly caught up with the log.
pub fn readiness(g: &Gauges) -> Result<(), String> {
    if g.voters == 0 {
        return Err("not ready: no cluster membership (a node not yet added, or an empty log)".into());
    }
    if let Some(owed) = g.owed_index {
        return Err(format!(
            "not ready: recovering raft log entries up to index {owed}, lost to disk damage, from the leader \
             (applied index {}); not voting until then",
            g.applied_index
        ));
    }
    if g.leader_id == 0 {
        return Err(format!("not ready: no leader known (term {})", g.raft_term));
    }
    // Elected, but catching up with what earlier terms committed: calls are neither served
    // nor redirected elsewhere until it is done.
    if g.is_leader && !g.serving {
        return Err(format!("not ready: elected leader in term {}, catching up before serving", g.raft_term));
    }
    let lag = g.apply_lag();
    if lag > MAX_READY_LAG {
        return Err(format!(
            "not ready: applied index {} is {lag} entries behind commit index {} (limit {MAX_READY_LAG})",
            g.applied_index, g.commit_index
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_membership_no_debt_a_leader_and_a_small_apply_lag() {
        let mut g =
            Gauges { voters: 3, leader_id: 0, commit_index: 5, applied_index: 5, raft_term: 3, ..Gauges::default() };
        assert_eq!(readiness(&g).unwrap_err(), "not ready: no leader known (term 3)");
        g.leader_id = 2;
        assert_eq!(readiness(&g), Ok(()));
        // The elected leader is ready once it serves.
        g.is_leader = true;
        assert!(readiness(&g).unwrap_err().contains("catching up before serving"));
        g.serving = true;
        assert_eq!(readiness(&g), Ok(()));
        g.commit_index = 5 + MAX_READY_LAG + 1;
        assert!(readiness(&g).unwrap_err().contains("entries behind commit index"));
        g.commit_index = 5;
        // A node that came up with no membership (it says who leads: its own old vote).
        g.voters = 0;
        assert!(readiness(&g).unwrap_err().contains("no cluster membership"));
        g.voters = 3;
        g.owed_index = Some(9);
        assert!(readiness(&g).unwrap_err().contains("recovering raft log entries up to index 9"));
    }
}

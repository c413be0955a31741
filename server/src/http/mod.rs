//! The HTTP port: `/metrics` (Prometheus), `/healthz` and `/readyz` for operators (no
//! key needed, nothing that changes state); the HTTP/JSON API under `/api/v1` (same keys
//! and rules as gRPC, see `api`; browsers of other origins kept out, see `access`); and
//! the Playground page with its OpenAPI file.

pub mod access;
pub mod api;
pub mod gateway;
pub mod json;
pub mod key_sse;
pub mod playground;
pub mod query;
pub mod sse;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::{Stream, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;

use self::access::{Access, HttpAccessArgs};
use self::gateway::Gateway;
use crate::engine::Engine;
use crate::metrics::Gauges;
use crate::tls::ServerTls;

/// A node is ready while it applies within this many entries of the commit index: a
/// node replaying a long log (or a snapshot) would serve stale reads and should not get
/// traffic yet.
pub const MAX_READY_LAG: u64 = 100;

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds the port before the node starts, so a busy port fails at once and names the flag.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {addr} for the HTTP port (metrics, health): {e}; \
             pick a free address with --http-listen or DLS_HTTP_LISTEN"
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
}

/// Serves until `shutdown` resolves, over TLS when `tls` is set.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    engine: Arc<Engine>,
    gateway: Arc<Gateway>,
    access: &HttpAccessArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!("metrics on {scheme}://{addr}/metrics (health: /healthz, readiness: /readyz)");
    tracing::info!("HTTP/JSON API on {scheme}://{addr}/api/v1 (OpenAPI: {scheme}://{addr}/openapi.json)");
    tracing::info!("playground on {scheme}://{addr}/playground");
    let access = Arc::new(Access::new(access, addr));
    let app = router(engine, gateway, access);
    match tls {
        None => axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| anyhow::anyhow!("HTTP port {addr} failed: {e}")),
        Some(tls) => {
            serve_tls(crate::tls::incoming(listener, tls), app, shutdown).await;
            Ok(())
        }
    }
}

/// The HTTP port over TLS: axum's `serve` takes plain TCP only, so each finished TLS
/// stream gets its own HTTP/1.1 connection here, drained gracefully at shutdown.
async fn serve_tls<S>(incoming: S, app: Router, shutdown: impl Future<Output = ()>)
where
    S: Stream<Item = std::io::Result<TlsStream<TcpStream>>>,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let http = hyper::server::conn::http1::Builder::new();
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
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
    }
    graceful.shutdown().await;
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

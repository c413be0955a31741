//! The ports' plumbing: binding a listener, the connection bounds of each port (`conn`), a
//! gRPC server with those bounds served over plain TCP or TLS, and what a port's end means.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tonic::transport::server::Router;
use tonic::transport::Server;
use tower_layer::{Identity, Stack};

use crate::conn::{self, fd_limit, ConnectionArgs, PortGuard, RequestDeadline};
use crate::listeners::Listeners;
use crate::tls::{Protocol, ServerTls};

/// Largest client request accepted (on the client port, and forwarded on the peer port);
/// real requests are well under 1 KiB.
pub(super) const MAX_CLIENT_MESSAGE: usize = 64 * 1024;
/// Streams a client may reset before the server accepted them, per connection, before
/// the connection is closed (h2's guard against "rapid reset" floods; its default is 20).
/// A client that gives up on calls under overload legitimately resets many at once; at 20
/// it would lose the whole connection, every call on it, instead of getting the
/// RESOURCE_EXHAUSTED / UNAVAILABLE answers. Still bounded per connection.
const MAX_PENDING_RESETS: usize = 256;

pub(super) async fn bind(addr: SocketAddr, port: &str, flag: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for the {port} (is another dls running? pick {flag})"))
}

/// Writes where the node listens to `path` (`--ports-file`) as JSON: a temporary file in the
/// same directory renamed over it, so a reader polling for the file never sees half of it.
pub(super) fn write_ports_file(path: &Path, bound: &Listeners) -> anyhow::Result<()> {
    let text = serde_json::json!({
        "client": bound.client.to_string(),
        "http": bound.http.to_string(),
        "peer": bound.peer.map(|p| p.to_string()),
    })
    .to_string();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, format!("{text}\n"))?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| anyhow::anyhow!("cannot write --ports-file {}: {e}", path.display()))
}

pub(super) type Served = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;
pub(super) type GrpcRouter = Router<Stack<RequestDeadline, Identity>>;

/// The three ports' bounds on connections (see `conn`).
pub(super) struct Ports {
    pub client: Arc<PortGuard>,
    pub peer: Arc<PortGuard>,
    pub http: Arc<PortGuard>,
}

impl Ports {
    pub fn resolve(args: &ConnectionArgs, nofile: Option<u64>) -> Ports {
        let (bounds, clipped) = fd_limit::bounds(args, nofile, fd_limit::open_now());
        if let Some(warning) = clipped {
            tracing::warn!("{warning}");
        }
        let guard = |port: &'static str| {
            let (_, b) = bounds.iter().find(|(p, _)| *p == port).expect("every port has bounds");
            PortGuard::new(port, b.clone())
        };
        Ports { client: guard("client"), peer: guard("peer"), http: guard("http") }
    }

    /// The ports this node opened (a single node has no peer port).
    pub fn opened(&self, peer: bool) -> Vec<Arc<PortGuard>> {
        let mut ports = vec![self.client.clone(), self.http.clone()];
        if peer {
            ports.push(self.peer.clone());
        }
        ports
    }
}

/// A gRPC server with the bounds of `conn` on what one connection may hold: `streams`, header
/// bytes, buffered request bytes, the requests still arriving (`arrival`), and pings that
/// free a vanished peer's connection.
pub(super) fn grpc_server(streams: u32, arrival: RequestDeadline) -> Server<Stack<RequestDeadline, Identity>> {
    Server::builder()
        .max_concurrent_streams(streams)
        .http2_max_header_list_size(conn::MAX_HEADER_LIST_BYTES)
        .initial_stream_window_size(conn::STREAM_WINDOW_BYTES)
        .initial_connection_window_size(conn::CONNECTION_WINDOW_BYTES)
        .http2_keepalive_interval(Some(conn::PING_INTERVAL))
        .http2_keepalive_timeout(Some(conn::PING_TIMEOUT))
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .layer(arrival)
}

/// Serves a gRPC router on a listener, over TLS when configured, until the stop signal.
pub(super) fn serve_grpc(
    router: GrpcRouter,
    listener: TcpListener,
    guard: Arc<PortGuard>,
    tls: Option<Arc<ServerTls>>,
    stop: watch::Receiver<bool>,
) -> Served {
    let port = guard.port;
    let failed = move |e: tonic::transport::Error| anyhow::Error::new(e).context(format!("the {port} port failed"));
    match tls {
        None => {
            let plain = |tcp: TcpStream| async move { Ok(tcp) };
            let incoming =
                conn::incoming_until(listener, guard, Protocol::Grpc, plain, super::shutdown::stopped(stop.clone()));
            Box::pin(async move {
                router.serve_with_incoming_shutdown(incoming, super::shutdown::stopped(stop)).await.map_err(failed)
            })
        }
        Some(tls) => {
            let upgrade = crate::tls::upgrade(tls);
            let incoming =
                conn::incoming_until(listener, guard, Protocol::Grpc, upgrade, super::shutdown::stopped(stop.clone()));
            Box::pin(async move {
                router.serve_with_incoming_shutdown(incoming, super::shutdown::stopped(stop)).await.map_err(failed)
            })
        }
    }
}

/// A port's server returned. That is expected only after the stop signal: a port that stops
/// serving by itself must end the node with an error (a non-zero exit a supervisor
/// restarts), never look like a clean shutdown.
pub(super) fn ended(port: &str, served: anyhow::Result<()>, stop: &watch::Receiver<bool>) -> anyhow::Result<()> {
    served?;
    if *stop.borrow() {
        return Ok(());
    }
    anyhow::bail!("the {port} stopped serving without being asked to; exiting so that the node is restarted")
}

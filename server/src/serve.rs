//! `dls serve`: start a node and serve its three ports (clients, peers, HTTP) and webhooks
//! until SIGINT/SIGTERM; SIGHUP reloads keys and certificates.
//!
//! A stop is graceful, in this order, so that clients move to another node at once rather
//! than after a call timeout: a leader first hands leadership to a caught-up voter
//! (`handoff`); then the client and peer ports stop accepting (new connections are refused)
//! and send GOAWAY; calls in flight are answered, and streams waiting here (forwarded lock
//! waits and watches) end with NOT_LEADER naming the leader, which the clients re-attach
//! to with the same request id; then raft stops.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use caerus_proto::raft::peer_discovery_service_server::PeerDiscoveryServiceServer;
use caerus_proto::raft::raft_service_server::RaftServiceServer;
use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use futures::future::{FusedFuture, FutureExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::Router;
use tonic::transport::Server;
use tower_layer::{Identity, Stack};

use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::caller::PeerCaller;
use crate::api::discovery_service::Discovery;
use crate::api::forward::{Forwarder, ForwardingAdmin, ForwardingLocks};
use crate::api::key_check::KeyCheck;
use crate::api::lock_service::LockApi;
use crate::api::raft_service::RaftApi;
use crate::config::ServeArgs;
use crate::conn::{self, fd_limit, ConnectionArgs, PortGuard, RequestDeadline};
use crate::engine::Engine;
use crate::handoff;
use crate::http;
use crate::node::{Node, PeerSettings};
use crate::raft::network::MAX_RAFT_MESSAGE;
use crate::raft::peer_auth::{CredentialsGate, Gate};
use crate::security::Security;
use crate::tls::{Protocol, ServerTls};
use crate::webhooks::{self, Dispatcher};

/// Largest client request accepted; real requests are well under 1 KiB.
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;
/// Streams a client may reset before the server accepted them, per connection, before
/// the connection is closed (h2's guard against "rapid reset" floods; its default is 20).
/// A client that gives up on calls under overload legitimately resets many at once; at 20
/// it would lose the whole connection, every call on it, instead of getting the
/// RESOURCE_EXHAUSTED / UNAVAILABLE answers. Still bounded per connection.
const MAX_PENDING_RESETS: usize = 256;
/// Open scrapes get this long to finish at shutdown.
const HTTP_DRAIN: Duration = Duration::from_secs(5);
/// Calls in flight get this long to finish at shutdown. Waiting streams are ended at the
/// start of it (NOT_LEADER naming the leader); a stream this node serves as the leader (a
/// single node, or a leader whose hand-off failed) is cut past it, and its client
/// re-attaches to another node.
const GRPC_DRAIN: Duration = Duration::from_secs(3);

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let nofile = fd_limit::raise();
    let (listen, cfg) = args.node_config()?;
    let keys = match &args.api_keys_file {
        Some(path) => {
            let ring = KeyRing::load(path)?;
            tracing::info!(keys = ring.key_count(), file = %path.display(), "API keys loaded; every call needs a key (SIGHUP reloads the file)");
            ring
        }
        None => KeyRing::open(),
    };
    let (security, warnings) = args.security.resolve(&listen, keys.has_keys())?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    if !keys.has_keys() {
        tracing::warn!("no --api-keys-file: every caller that reaches a port may do everything (fine on a laptop, not in production)");
    }
    let hooks = match &args.webhooks_file {
        Some(path) => {
            let hooks = webhooks::load(path)?;
            tracing::info!(webhooks = hooks.len(), file = %path.display(), "webhooks loaded; the leader delivers them");
            hooks
        }
        None => Vec::new(),
    };
    // Bind before starting raft so a busy port fails at once with a clear message.
    let listener = bind(listen.client, "client port", "--listen").await?;
    let peer_listener = match listen.peer {
        Some(addr) => Some(bind(addr, "peer port", "--peer-listen or the peer port in --peers").await?),
        None => None,
    };
    let http_listener = http::bind(listen.http).await?;
    let members = cfg.members.len();
    let peers = PeerSettings {
        secret: security.cluster_secret.clone(),
        tls: security.peer_tls_files.clone(),
        insecure: args.security.insecure,
    };
    let node = Node::start(cfg.clone(), peers).await?;
    // Asks the members their versions and raises or lowers the cluster's level (DESIGN.md,
    // "Versions and upgrades").
    crate::versions::watch::spawn(&node);
    // After the node opened its log and stores, so what they hold is counted.
    let ports = Ports::resolve(&args.connections, nofile);
    node.metrics().watch_ports(ports.opened(listen.peer.is_some()));

    let (stop_tx, stop) = watch::channel(false);
    {
        let node = node.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            hand_off_before_stopping(&node).await;
            let _ = stop_tx.send(true);
        });
    }
    let engine = Engine::new(node.clone());
    let dispatcher = Dispatcher::start(engine.clone(), hooks);

    let keys = Arc::new(keys);
    // Before any port serves: a key both in the file and in the cluster refuses the start.
    keys.follow_cluster(node.api_keys())?;
    spawn_reloads(keys.clone(), &security, node.clone());
    let lock_api =
        Arc::new(LockApi { engine: engine.clone(), keys: keys.clone(), policies: Arc::new(args.victim_policies()) });
    let admin_api = Arc::new(AdminApi { engine: engine.clone(), keys: keys.clone() });
    // The client port: served here by the leader, passed on to it by followers (`api::forward`).
    let forwarder = Forwarder::new(node.clone(), keys.clone(), stop.clone());
    let client_locks = ForwardingLocks { local: lock_api.clone(), forwarder: forwarder.clone() };
    let client_admin = ForwardingAdmin { local: admin_api.clone(), forwarder: forwarder.clone() };
    // The HTTP API runs the very same services as the client port, forwarding included.
    let gateway = Arc::new(http::gateway::Gateway {
        lock: ForwardingLocks { local: lock_api.clone(), forwarder: forwarder.clone() },
        admin: ForwardingAdmin { local: admin_api.clone(), forwarder },
    });
    let http_server = {
        let port = http::Port {
            listener: http_listener,
            guard: ports.http.clone(),
            tls: security.http_tls.clone(),
            connections: args.connections.clone(),
        };
        let (engine, stop, access) = (engine.clone(), stop.clone(), args.http_access.clone());
        tokio::spawn(async move { http::serve(port, engine, gateway, &access, stopped(stop)).await })
    };
    // Fused: at shutdown it may already have ended in the select below, and is drained only
    // if it has not.
    let http_server = async move {
        match http_server.await {
            Ok(served) => served,
            Err(e) => Err(anyhow::anyhow!("the HTTP port's task failed: {e}")),
        }
    }
    .fuse();
    tokio::pin!(http_server);
    // The key is checked from the headers, before a body is read (`api::key_check`).
    let key_check = KeyCheck(keys.clone());
    let client_locks = InterceptedService::new(
        LockServiceServer::new(client_locks).max_decoding_message_size(MAX_CLIENT_MESSAGE),
        key_check.clone(),
    );
    let client_admin = InterceptedService::new(
        AdminServiceServer::new(client_admin).max_decoding_message_size(MAX_CLIENT_MESSAGE),
        key_check,
    );
    let scheme = if security.grpc_tls.is_some() { "https" } else { "http" };
    tracing::info!(
        node = node.id(),
        cluster_id = %node.cluster_id(),
        client = %listen.client,
        peer = %listen.peer.map_or("none (single node)".to_string(), |p| p.to_string()),
        data_dir = %cfg.data_dir.display(),
        members,
        "dls serving; clients connect to {scheme}://{}", listen.client
    );
    // The raft transport has a port of its own, behind the peer gate: nothing reaches
    // openraft from a caller that is not a node of this cluster. It serves before the node
    // has decided how to take part (`Node::bootstrap`), since its peers ask it too. Behind
    // the same gate, the client services answer the calls followers forward (never
    // forwarding them again).
    let peer_server = match peer_listener {
        Some(peer_listener) => {
            let raft_api = RaftServiceServer::new(RaftApi { node: node.clone(), stop: stop.clone() })
                .max_decoding_message_size(MAX_RAFT_MESSAGE)
                .max_encoding_message_size(MAX_RAFT_MESSAGE);
            let gate = Gate(node.peer_auth().clone());
            let discovery = InterceptedService::new(
                PeerDiscoveryServiceServer::new(Discovery { node: node.clone() }),
                CredentialsGate(node.peer_auth().clone()),
            );
            let forwarded_locks =
                LockServiceServer::from_arc(lock_api.clone()).max_decoding_message_size(MAX_CLIENT_MESSAGE);
            let forwarded_admin =
                AdminServiceServer::from_arc(admin_api.clone()).max_decoding_message_size(MAX_CLIENT_MESSAGE);
            // Raft messages may be large and slow to arrive (a snapshot): no request timeout
            // here; nothing reaches a handler before the peer gate has passed the caller, so a
            // stranger's streams are answered at once. A follower's one forwarding connection
            // carries up to --max-forwarded-calls of its clients' calls.
            let streams = u32::try_from(args.limits.max_forwarded_calls).unwrap_or(u32::MAX).saturating_add(256);
            let router = grpc_server(streams, RequestDeadline(None))
                .add_service(InterceptedService::new(raft_api, gate.clone()))
                .add_service(discovery)
                .add_service(InterceptedService::new(forwarded_locks, PeerCaller(gate.clone())))
                .add_service(InterceptedService::new(forwarded_admin, PeerCaller(gate)));
            tokio::spawn(serve_grpc(router, peer_listener, ports.peer.clone(), security.peer_tls.clone(), stop.clone()))
        }
        None => tokio::spawn(std::future::pending::<anyhow::Result<()>>()),
    };
    let peer_server = async move {
        match peer_server.await {
            Ok(served) => served,
            Err(e) => Err(anyhow::anyhow!("the peer port's task failed: {e}")),
        }
    };
    tokio::pin!(peer_server);
    tokio::select! {
        decided = node.bootstrap() => decided?,
        // Asked to stop before the node took part in raft.
        served = &mut peer_server => {
            node.shutdown().await;
            return ended("peer port", served, &stop);
        }
        served = &mut http_server => {
            node.shutdown().await;
            return ended("HTTP port", served, &stop);
        }
    }
    let arrival = RequestDeadline(Some((args.connections.request_timeout(), ports.client.clone())));
    let client_router = grpc_server(args.connections.max_streams_per_connection, arrival)
        .add_service(client_locks)
        .add_service(client_admin);
    let client_server =
        serve_grpc(client_router, listener, ports.client.clone(), security.grpc_tls.clone(), stop.clone());
    let drain_over = {
        let stop = stop.clone();
        async move {
            stopped(stop).await;
            tokio::time::sleep(GRPC_DRAIN).await;
        }
    };
    tokio::select! {
        served = client_server => ended("client port", served, &stop)?,
        served = &mut peer_server => ended("peer port", served, &stop)?,
        served = &mut http_server => ended("HTTP port", served, &stop)?,
        _ = drain_over => tracing::warn!("gRPC calls still open {GRPC_DRAIN:?} after the stop signal; closing them"),
        why = node.raft_failed() => {
            // Whatever this node holds in memory or in the page cache past the failed write
            // cannot be trusted; a restart reads back only what is on disk, and meanwhile
            // the other nodes elect a leader that can write.
            tracing::error!("raft stopped on this node: {why}");
            anyhow::bail!(
                "raft stopped on this node: {why}. The node exits without acknowledging anything it could not \
                 write to disk; fix the disk (free space in --data-dir) and start it again: it recovers from \
                 its data directory and catches up from the leader"
            );
        }
    }
    tracing::info!("shutting down");
    if let Some(d) = dispatcher {
        d.stop().await;
    }
    if !http_server.is_terminated() && tokio::time::timeout(HTTP_DRAIN, &mut http_server).await.is_err() {
        tracing::warn!("HTTP port still busy after {HTTP_DRAIN:?}; closing it");
    }
    node.shutdown().await;
    Ok(())
}

async fn bind(addr: SocketAddr, port: &str, flag: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {addr} for the {port}: {e} (is another dls running? pick {flag})")
    })
}

type Served = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;
type GrpcRouter = Router<Stack<RequestDeadline, Identity>>;

/// The three ports' bounds on connections (see `conn`).
struct Ports {
    client: Arc<PortGuard>,
    peer: Arc<PortGuard>,
    http: Arc<PortGuard>,
}

impl Ports {
    fn resolve(args: &ConnectionArgs, nofile: Option<u64>) -> Ports {
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
    fn opened(&self, peer: bool) -> Vec<Arc<PortGuard>> {
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
fn grpc_server(streams: u32, arrival: RequestDeadline) -> Server<Stack<RequestDeadline, Identity>> {
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
fn serve_grpc(
    router: GrpcRouter,
    listener: TcpListener,
    guard: Arc<PortGuard>,
    tls: Option<Arc<ServerTls>>,
    stop: watch::Receiver<bool>,
) -> Served {
    let port = guard.port;
    let failed = move |e: tonic::transport::Error| anyhow::anyhow!("the {port} port failed: {e}");
    match tls {
        None => {
            let plain = |tcp: TcpStream| async move { Ok(tcp) };
            let incoming = conn::incoming_until(listener, guard, Protocol::Grpc, plain, stopped(stop.clone()));
            Box::pin(async move { router.serve_with_incoming_shutdown(incoming, stopped(stop)).await.map_err(failed) })
        }
        Some(tls) => {
            let upgrade = crate::tls::upgrade(tls);
            let incoming = conn::incoming_until(listener, guard, Protocol::Grpc, upgrade, stopped(stop.clone()));
            Box::pin(async move { router.serve_with_incoming_shutdown(incoming, stopped(stop)).await.map_err(failed) })
        }
    }
}

/// A port's server returned. That is expected only after the stop signal: a port that stops
/// serving by itself must end the node with an error (a non-zero exit a supervisor
/// restarts), never look like a clean shutdown.
fn ended(port: &str, served: anyhow::Result<()>, stop: &watch::Receiver<bool>) -> anyhow::Result<()> {
    served?;
    if *stop.borrow() {
        return Ok(());
    }
    anyhow::bail!("the {port} stopped serving without being asked to; exiting so that the node is restarted")
}

/// SIGHUP reloads the API keys file and every certificate. A file that fails to load is
/// reported and the previous version stays in use.
fn spawn_reloads(keys: Arc<KeyRing>, security: &Security, node: Arc<Node>) {
    let tls: Vec<(&'static str, Arc<ServerTls>)> = [
        ("client port TLS", security.grpc_tls.clone()),
        ("HTTP port TLS", security.http_tls.clone()),
        ("peer port TLS", security.peer_tls.clone()),
    ]
    .into_iter()
    .filter_map(|(what, t)| t.map(|t| (what, t)))
    .collect();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: keys and certificates will not be reloaded");
            return;
        };
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading API keys and certificates");
            match keys.reload() {
                Ok(n) if keys.has_keys() => tracing::info!(keys = n, "API keys reloaded"),
                Ok(_) => {}
                Err(e) => tracing::error!("API keys not reloaded, the previous keys stay in use: {e:#}"),
            }
            for (what, t) in &tls {
                match t.reload() {
                    Ok(()) => tracing::info!("{what} reloaded from {}", t.files().cert.display()),
                    Err(e) => tracing::error!("{what} not reloaded, the previous certificate stays in use: {e:#}"),
                }
            }
            if let Err(e) = node.peer_transport().reload_tls() {
                tracing::error!("peer client certificate not reloaded, the previous one stays in use: {e:#}");
            }
        }
    });
}

/// Resolves once shutdown was asked for; every server waits on its own copy.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A leader that is asked to stop hands leadership over first (bounded by
/// `HAND_OFF_WITHIN`); it stops whether or not that worked.
async fn hand_off_before_stopping(node: &Node) {
    if node.require_leader().is_err() {
        return;
    }
    tracing::info!("stop signal: handing leadership over before stopping");
    match handoff::hand_off(node, None, handoff::HAND_OFF_WITHIN).await {
        Ok(leader) => tracing::info!(leader, "leadership handed over; stopping"),
        // A lone voter has nobody to hand over to: not worth a warning.
        Err(handoff::HandoffError::NoOtherVoter(_)) => {}
        Err(e) => tracing::warn!("leadership not handed over, stopping anyway (the others elect a leader): {e}"),
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

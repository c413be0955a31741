//! `dls serve`: start a node and serve its three ports (clients, peers, HTTP) and webhooks
//! until SIGINT/SIGTERM; SIGHUP reloads keys and certificates.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use caerus_proto::raft::peer_discovery_service_server::PeerDiscoveryServiceServer;
use caerus_proto::raft::raft_service_server::RaftServiceServer;
use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::{Router, TcpIncoming};

use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::caller::PeerCaller;
use crate::api::discovery_service::Discovery;
use crate::api::forward::{Forwarder, ForwardingAdmin, ForwardingLocks};
use crate::api::lock_service::LockApi;
use crate::api::raft_service::RaftApi;
use crate::config::ServeArgs;
use crate::engine::Engine;
use crate::http;
use crate::node::{Node, PeerSettings};
use crate::raft::network::MAX_RAFT_MESSAGE;
use crate::raft::peer_auth::{CredentialsGate, Gate};
use crate::security::Security;
use crate::tls::ServerTls;
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
/// Calls in flight get this long to finish at shutdown. Some streams never end on their
/// own (a waiting AcquireLock, an event watch): past this they are cut, and their clients
/// re-attach to another node.
const GRPC_DRAIN: Duration = Duration::from_secs(3);

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
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
    let peers = PeerSettings { secret: security.cluster_secret.clone(), tls: security.peer_tls_files.clone() };
    let node = Node::start(cfg.clone(), peers).await?;

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let engine = Engine::new(node.clone());
    let dispatcher = Dispatcher::start(engine.clone(), hooks);

    let keys = Arc::new(keys);
    spawn_reloads(keys.clone(), &security, node.clone());
    let lock_api =
        Arc::new(LockApi { engine: engine.clone(), keys: keys.clone(), policies: Arc::new(args.victim_policies()) });
    let admin_api = Arc::new(AdminApi { engine: engine.clone(), keys: keys.clone() });
    // The client port: served here by the leader, passed on to it by followers (`api::forward`).
    let forwarder = Forwarder::new(node.clone(), keys.clone());
    let client_locks = ForwardingLocks { local: lock_api.clone(), forwarder: forwarder.clone() };
    let client_admin = ForwardingAdmin { local: admin_api.clone(), forwarder: forwarder.clone() };
    // The HTTP API runs the very same services as the client port, forwarding included.
    let gateway = Arc::new(http::gateway::Gateway {
        lock: ForwardingLocks { local: lock_api.clone(), forwarder: forwarder.clone() },
        admin: ForwardingAdmin { local: admin_api.clone(), forwarder },
    });
    let http_server = {
        let (engine, stop, tls, access) =
            (engine.clone(), stop.clone(), security.http_tls.clone(), args.http_access.clone());
        // The HTTP port is for operators: if it fails, locks keep being served.
        tokio::spawn(async move {
            if let Err(e) = http::serve(http_listener, tls, engine, gateway, &access, stopped(stop)).await {
                tracing::error!("{e:#}");
            }
        })
    };
    let client_locks = LockServiceServer::new(client_locks).max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let client_admin = AdminServiceServer::new(client_admin).max_decoding_message_size(MAX_CLIENT_MESSAGE);
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
            // A follower's forwarding connection carries many clients' calls, and their
            // cancellations: the same bound as on the client port.
            let router = tonic::transport::Server::builder()
                .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
                .add_service(InterceptedService::new(raft_api, gate.clone()))
                .add_service(discovery)
                .add_service(InterceptedService::new(forwarded_locks, PeerCaller(gate.clone())))
                .add_service(InterceptedService::new(forwarded_admin, PeerCaller(gate)));
            tokio::spawn(serve_grpc(router, peer_listener, security.peer_tls.clone(), stop.clone())?)
        }
        None => tokio::spawn(std::future::pending::<Result<(), tonic::transport::Error>>()),
    };
    let peer_server = async move {
        match peer_server.await {
            Ok(served) => served.map_err(anyhow::Error::from),
            Err(e) => Err(anyhow::anyhow!("the peer port's task failed: {e}")),
        }
    };
    tokio::pin!(peer_server);
    tokio::select! {
        decided = node.bootstrap() => decided?,
        // Asked to stop before the node took part in raft.
        served = &mut peer_server => {
            node.shutdown().await;
            return served;
        }
    }
    let client_router = tonic::transport::Server::builder()
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .add_service(client_locks)
        .add_service(client_admin);
    let client_server = serve_grpc(client_router, listener, security.grpc_tls.clone(), stop.clone())?;
    let drain_over = async {
        stopped(stop).await;
        tokio::time::sleep(GRPC_DRAIN).await;
    };
    tokio::select! {
        served = client_server => served?,
        served = &mut peer_server => served?,
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
    if tokio::time::timeout(HTTP_DRAIN, http_server).await.is_err() {
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

type Served = Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;

/// Serves a gRPC router on a listener, over TLS when configured, until the stop signal.
fn serve_grpc(
    router: Router,
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Served> {
    Ok(match tls {
        None => {
            // Nagle's algorithm off on every accepted connection: with it, a response's
            // trailing HTTP/2 frame waits for the client's delayed ACK (~40 ms per call). The
            // builder's own tcp_nodelay setting does not reach sockets accepted by our listener.
            let addr = listener.local_addr()?;
            let incoming = TcpIncoming::from_listener(listener, true, None)
                .map_err(|e| anyhow::anyhow!("cannot serve on {addr}: {e}"))?;
            Box::pin(router.serve_with_incoming_shutdown(incoming, stopped(stop)))
        }
        Some(tls) => Box::pin(router.serve_with_incoming_shutdown(crate::tls::incoming(listener, tls), stopped(stop))),
    })
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

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

//! `dls serve`: start a node and serve gRPC, the HTTP port and webhooks until
//! SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use caerus_proto::raft::raft_service_server::RaftServiceServer;
use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;

use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::lock_service::LockApi;
use crate::api::raft_service::RaftApi;
use crate::config::ServeArgs;
use crate::http;
use crate::node::Node;
use crate::raft::network::MAX_RAFT_MESSAGE;
use crate::webhooks::{self, Dispatcher};

/// Largest client request accepted; real requests are well under 1 KiB.
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;
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
            tracing::info!(keys = ring.key_count(), file = %path.display(), "API keys loaded; every call needs a key");
            ring
        }
        None => {
            tracing::warn!("no --api-keys-file: the server accepts every caller (fine on a laptop, not in production)");
            KeyRing::open()
        }
    };
    let hooks = match &args.webhooks_file {
        Some(path) => {
            let hooks = webhooks::load(path)?;
            tracing::info!(webhooks = hooks.len(), file = %path.display(), "webhooks loaded; the leader delivers them");
            hooks
        }
        None => Vec::new(),
    };
    // Bind before starting raft so a busy port fails at once with a clear message.
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e} (is another dls running? pick --listen)"))?;
    let http_listener = http::bind(args.http_listen).await?;
    let members = cfg.members.len();
    let node = Node::start(cfg.clone()).await?;

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let dispatcher = Dispatcher::start(node.clone(), hooks);

    let keys = Arc::new(keys);
    let lock_api =
        Arc::new(LockApi { node: node.clone(), keys: keys.clone(), policies: Arc::new(args.victim_policies()) });
    let admin_api = Arc::new(AdminApi { node: node.clone(), keys: keys.clone() });
    // The HTTP API runs the very same service objects as gRPC.
    let gateway = Arc::new(http::gateway::Gateway::new(lock_api.clone(), admin_api.clone()));
    let http_server = {
        let (node, stop, access) = (node.clone(), stop.clone(), args.http_access.clone());
        // The HTTP port is for operators: if it fails, locks keep being served.
        tokio::spawn(async move {
            if let Err(e) = http::serve(http_listener, node, gateway, &access, stopped(stop)).await {
                tracing::error!("{e:#}");
            }
        })
    };
    let lock_api = LockServiceServer::from_arc(lock_api).max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let admin_api = AdminServiceServer::from_arc(admin_api).max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let raft_api = RaftServiceServer::new(RaftApi { node: node.clone(), stop: stop.clone() })
        .max_decoding_message_size(MAX_RAFT_MESSAGE)
        .max_encoding_message_size(MAX_RAFT_MESSAGE);
    tracing::info!(
        node = cfg.id,
        %listen,
        data_dir = %cfg.data_dir.display(),
        members,
        "dls serving; clients connect to {listen}"
    );
    // Nagle's algorithm off on every accepted connection: with it, a response's trailing
    // HTTP/2 frame waits for the client's delayed ACK (~40 ms per call). The builder's own
    // tcp_nodelay setting does not reach sockets accepted by our listener.
    let incoming = TcpIncoming::from_listener(listener, true, None)
        .map_err(|e| anyhow::anyhow!("cannot serve on {listen}: {e}"))?;
    let server = tonic::transport::Server::builder()
        .add_service(lock_api)
        .add_service(admin_api)
        .add_service(raft_api)
        .serve_with_incoming_shutdown(incoming, stopped(stop.clone()));
    let drain_over = async {
        stopped(stop).await;
        tokio::time::sleep(GRPC_DRAIN).await;
    };
    tokio::select! {
        served = server => served?,
        _ = drain_over => tracing::warn!("gRPC calls still open {GRPC_DRAIN:?} after the stop signal; closing them"),
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

//! `dls serve`: start a node and serve gRPC until SIGINT/SIGTERM.

use std::sync::Arc;

use caerus_proto::raft::raft_service_server::RaftServiceServer;
use caerus_proto::v1::admin_service_server::AdminServiceServer;
use caerus_proto::v1::lock_service_server::LockServiceServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::lock_service::LockApi;
use crate::api::raft_service::RaftApi;
use crate::config::ServeArgs;
use crate::node::Node;
use crate::raft::network::MAX_RAFT_MESSAGE;

/// Largest client request accepted; real requests are well under 1 KiB.
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;

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
    // Bind before starting raft so a busy port fails at once with a clear message.
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e} (is another dls running? pick --listen)"))?;
    let members = cfg.members.len();
    let node = Node::start(cfg.clone()).await?;

    let keys = Arc::new(keys);
    let lock_api = LockServiceServer::new(LockApi {
        node: node.clone(),
        keys: keys.clone(),
        policies: Arc::new(args.victim_policies()),
    })
    .max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let admin_api = AdminServiceServer::new(AdminApi { node: node.clone(), keys: keys.clone() })
        .max_decoding_message_size(MAX_CLIENT_MESSAGE);
    let raft_api = RaftServiceServer::new(RaftApi { node: node.clone() })
        .max_decoding_message_size(MAX_RAFT_MESSAGE)
        .max_encoding_message_size(MAX_RAFT_MESSAGE);
    tracing::info!(
        node = cfg.id,
        %listen,
        data_dir = %cfg.data_dir.display(),
        members,
        "dls serving; clients connect to {listen}"
    );
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(lock_api)
        .add_service(admin_api)
        .add_service(raft_api)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown_signal())
        .await?;
    tracing::info!("shutting down");
    node.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

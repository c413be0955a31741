//! `dls serve`: start a node and serve its three ports (clients, peers, HTTP) and webhooks
//! until SIGINT/SIGTERM; SIGHUP reloads keys and certificates.
//!
//! A stop is graceful, in this order, so that clients move to another node at once rather
//! than after a call timeout: a leader first hands leadership to a caught-up voter
//! (`handoff`); then the client and peer ports stop accepting (new connections are refused)
//! and send GOAWAY; calls in flight are answered, and streams waiting here (forwarded lock
//! waits and watches) end with NOT_LEADER naming the leader, which the clients re-attach
//! to with the same request id; then raft stops.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{FusedFuture, FutureExt};

use crate::api::admin_service::AdminApi;
use crate::api::auth::KeyRing;
use crate::api::lock_service::LockApi;
use crate::config::ServeArgs;
use crate::conn::{fd_limit, RequestDeadline};
use crate::engine::Engine;
use crate::http;
use crate::listeners::Listeners;
use crate::node::{Node, PeerSettings};
use crate::webhooks::{self, Dispatcher, Webhook};

mod client;
mod peer;
mod ports;
mod reloads;
mod shutdown;

use ports::{bind, ended, serve_grpc, Ports, Served};
use shutdown::stopped;

/// Open scrapes get this long to finish at shutdown.
const HTTP_DRAIN: Duration = Duration::from_secs(5);
/// Calls in flight get this long to finish at shutdown. Waiting streams are ended at the
/// start of it (NOT_LEADER naming the leader); a stream this node serves as the leader (a
/// single node, or a leader whose hand-off failed) is cut past it, and its client
/// re-attaches to another node.
const GRPC_DRAIN: Duration = Duration::from_secs(3);

/// Serves one node until it is told to stop. `version` is the binary's own, "0.1.0 (commit
/// 1a2b3c4d5e6f)": it goes to peers in the version handshake and to clients in the cluster
/// status (`Versions::own_version`).
pub async fn run(args: ServeArgs, version: &'static str) -> anyhow::Result<()> {
    let nofile = fd_limit::raise();
    let (listen, mut cfg) = args.node_config()?;
    let keys = load_keys(&args)?;
    let (security, warnings) = args.security.resolve(&listen, keys.has_keys())?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    if !keys.has_keys() {
        tracing::warn!("no --api-keys-file: every caller that reaches a port may do everything (fine on a laptop, not in production)");
    }
    let hooks = load_webhooks(&args)?;
    // Bind before starting raft so a busy port fails at once with a clear message.
    let listener = bind(listen.client, "client port", "--listen").await?;
    let peer_listener = match listen.peer {
        Some(addr) => Some(bind(addr, "peer port", "--peer-listen or the peer port in --peers").await?),
        None => None,
    };
    let http_listener = http::bind(listen.http).await?;
    // From here on, where the node listens is what it bound (port 0 became a free port).
    let listen = Listeners {
        client: listener.local_addr()?,
        peer: peer_listener.as_ref().map(|l| l.local_addr()).transpose()?,
        http: http_listener.local_addr()?,
    };
    own_bound_addresses(&mut cfg, &args, &listen);
    if let Some(path) = &args.ports_file {
        ports::write_ports_file(path, &listen)?;
    }
    let members = cfg.members.len();
    let peers = PeerSettings {
        secret: security.cluster_secret.clone(),
        tls: security.peer_tls_files.clone(),
        insecure: args.security.insecure,
    };
    let node = Node::start(cfg.clone(), peers, version).await?;
    // Asks the members their versions and raises or lowers the cluster's level (DESIGN.md,
    // "Versions and upgrades").
    crate::versions::watch::spawn(&node);
    // After the node opened its log and stores, so what they hold is counted.
    let ports = Ports::resolve(&args.connections, nofile);
    node.metrics().watch_ports(ports.opened(listen.peer.is_some()));

    let stop = shutdown::on_signal(node.clone());
    let engine = Engine::new(node.clone());
    let dispatcher = Dispatcher::start(engine.clone(), hooks);

    let keys = Arc::new(keys);
    // Before any port serves: a key both in the file and in the cluster refuses the start.
    keys.follow_cluster(node.api_keys())?;
    reloads::spawn(keys.clone(), &security, node.clone());
    let services = client::Services::new(
        LockApi { engine: engine.clone(), keys: keys.clone(), policies: Arc::new(args.victim_policies()) },
        AdminApi { engine: engine.clone(), keys: keys.clone() },
        node.clone(),
        keys.clone(),
        stop.clone(),
    );
    let http_server = {
        let port = http::Port {
            listener: http_listener,
            guard: ports.http.clone(),
            tls: security.http_tls.clone(),
            connections: args.connections.clone(),
        };
        let (engine, gateway, stop, access) =
            (engine.clone(), services.gateway(), stop.clone(), args.http_access.clone());
        spawned("HTTP", tokio::spawn(async move { http::serve(port, engine, gateway, &access, stopped(stop)).await }))
    };
    // Fused: at shutdown it may already have ended in the select below, and is drained only
    // if it has not.
    let http_server = http_server.fuse();
    tokio::pin!(http_server);
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
    let peer_server = match peer_listener {
        Some(peer_listener) => {
            let router = peer::router(
                &node,
                &services.lock_api,
                &services.admin_api,
                args.limits.max_forwarded_calls,
                stop.clone(),
            );
            let served = serve_grpc(router, peer_listener, ports.peer.clone(), security.peer_tls.clone(), stop.clone());
            spawned("peer", tokio::spawn(served))
        }
        None => Box::pin(std::future::pending()),
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
    let client_router = services.router(keys.clone(), args.connections.max_streams_per_connection, arrival);
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

/// A member list built from port 0 (a single node's `--listen 127.0.0.1:0`) names the port
/// the node bound instead, since clients and leader redirects are told these addresses. A
/// node with --peers keeps the addresses the list gives: its peers were told them.
fn own_bound_addresses(cfg: &mut crate::node::NodeConfig, args: &ServeArgs, bound: &Listeners) {
    if args.peers.is_some() {
        return;
    }
    if let Some(own) = cfg.members.get_mut(&cfg.id) {
        if args.listen.is_some_and(|l| l.port() == 0) {
            own.addr = bound.client.to_string();
        }
        if let (Some(l), Some(peer)) = (args.peer_listen, bound.peer) {
            if l.port() == 0 {
                own.peer_addr = peer.to_string();
            }
        }
    }
}

/// The API keys file, if one was given; without one every caller may do everything.
fn load_keys(args: &ServeArgs) -> anyhow::Result<KeyRing> {
    let Some(path) = &args.api_keys_file else { return Ok(KeyRing::open()) };
    let ring = KeyRing::load(path)?;
    tracing::info!(keys = ring.key_count(), file = %path.display(), "API keys loaded; every call needs a key (SIGHUP reloads the file)");
    Ok(ring)
}

/// The webhooks file, if one was given.
fn load_webhooks(args: &ServeArgs) -> anyhow::Result<Vec<Webhook>> {
    let Some(path) = &args.webhooks_file else { return Ok(Vec::new()) };
    let hooks = webhooks::load(path)?;
    tracing::info!(webhooks = hooks.len(), file = %path.display(), "webhooks loaded; the leader delivers them");
    Ok(hooks)
}

/// A port's spawned server as a future of its result; a panicked task is an error naming it.
fn spawned(port: &'static str, task: tokio::task::JoinHandle<anyhow::Result<()>>) -> Served {
    Box::pin(async move {
        match task.await {
            Ok(served) => served,
            Err(e) => Err(anyhow::Error::new(e).context(format!("the {port} port's task failed"))),
        }
    })
}

//! SIGHUP: the API keys file and every certificate read again, without a restart.

use std::sync::Arc;

use crate::api::auth::KeyRing;
use crate::node::Node;
use crate::security::Security;
#[cfg(unix)]
use crate::tls::ServerTls;

/// SIGHUP reloads the API keys file and every certificate. A file that fails to load is
/// reported and the previous version stays in use.
#[cfg(unix)]
pub(super) fn spawn(keys: Arc<KeyRing>, security: &Security, node: Arc<Node>) {
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

/// Windows has no SIGHUP: keys and certificates are read at start only (restart the node
/// to load new ones).
#[cfg(windows)]
pub(super) fn spawn(_keys: Arc<KeyRing>, _security: &Security, _node: Arc<Node>) {}

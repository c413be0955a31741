//! How a node stops: SIGINT/SIGTERM, a leader's hand-off first, then one stop signal every
//! server waits on (see the order in `serve`'s module comment).

use std::sync::Arc;

use tokio::sync::watch;

use crate::handoff;
use crate::node::Node;

/// The stop signal: set once SIGINT or SIGTERM arrived and a leader has handed over (or
/// tried to).
pub(super) fn on_signal(node: Arc<Node>) -> watch::Receiver<bool> {
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        hand_off_before_stopping(&node).await;
        let _ = stop_tx.send(true);
    });
    stop
}

/// Resolves once shutdown was asked for; every server waits on its own copy.
pub(super) async fn stopped(mut stop: watch::Receiver<bool>) {
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

#[cfg(unix)]
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Windows: Ctrl+C or Ctrl+Break (see `platform::signals`).
#[cfg(windows)]
async fn shutdown_signal() {
    use crate::platform::signals::{signal, SignalKind};
    let mut brk = signal(SignalKind::terminate()).expect("Ctrl+Break handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = brk.recv() => {}
    }
}

//! The engine: the one way into a node's lock table. The gRPC services, the HTTP gateway
//! (through them), webhooks and `/metrics` call it; it alone reads the table, admits
//! requests against the limits and proposes raft commands, and it answers in domain types
//! (`crate::locks`, the views here) and [`EngineError`]. Callers authenticate and validate
//! at their edge; authorization that depends on the table (whose transaction is this?) is
//! decided here, under the same hold of the state lock as the read it protects.
//!
//! - `txn`: begin, release, end, abort, status, heartbeat.
//! - `acquire`: an acquire, from its proposal to the grant or the end of the wait.
//! - `events`: the event log for watchers and webhooks.
//! - `fencing`: whether a fencing token is the current grant of a key.
//! - `locks_view`: the locks of the table as an operator lists them.
//! - `slots`: claims of schedule slots, their finishes and the last runs.
//! - `api_keys`: API keys kept by the cluster (create, list, revoke, rotate).
//! - `cluster`: the cluster's state, membership changes, backups, metrics gauges.
//! - Who is calling and how a request fails ([`Principal`], [`EngineError`]) live a layer
//!   below, in `crate::request`, since `node` and `limits` name them too.

mod acquire;
pub mod api_keys;
mod cluster;
mod events;
mod fencing;
mod key_watch;
mod lock_delay;
mod locks_view;
mod slots;
mod txn;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

pub use crate::request::{EngineError, Principal};
pub use acquire::{AcquireAllRequest, AcquireStart, Acquisition, Followed, TxnLost, Wanted};
pub use events::EventStart;
pub use key_watch::{parse_cursor, KeyHolder, KeyState};
pub use slots::SlotRequest;
pub use txn::{Begun, WaitCancel};

use crate::locks::{LockKey, Outcome, Txn, TxnId, TxnState};
use crate::metrics::Metrics;
use crate::node::Node;
use crate::telemetry::trace_context::TraceContext;

pub type EngineResult<T> = Result<T, EngineError>;

/// A node's lock service, as its clients see it.
pub struct Engine {
    node: Arc<Node>,
    /// Held by a key create from its count to its apply (see `api_keys`).
    key_creates: tokio::sync::Mutex<()>,
}

impl Engine {
    pub fn new(node: Arc<Node>) -> Arc<Engine> {
        Arc::new(Engine { node, key_creates: tokio::sync::Mutex::new(()) })
    }

    /// A receiver that turns false when this node stops being the leader.
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.node.leadership()
    }

    /// This node's counters (webhooks report their deliveries there).
    pub fn metrics(&self) -> &Metrics {
        self.node.metrics()
    }

    /// Follows the acquire `request_id` of `lock` by `who` in the client's trace, when spans
    /// are exported (`--otlp-endpoint`); a no-op otherwise.
    pub fn trace_acquire(&self, who: &Principal, request_id: &str, lock: &LockKey, ctx: TraceContext) {
        if let Some(t) = self.node.tracer() {
            t.register(&who.name, request_id, lock, ctx);
        }
    }

    /// Stops following an acquire refused before it was proposed.
    pub fn untrace_acquire(&self, request_id: &str) {
        if let Some(t) = self.node.tracer() {
            t.unregister(request_id);
        }
    }

    /// Whether spans are exported: only then is a client's trace context worth reading.
    pub fn traces(&self) -> bool {
        self.node.tracer().is_some()
    }
}

/// Looks the transaction up, checks `who` may use it, and renews its lease when it is
/// active (every call of a transaction counts as a heartbeat).
fn touch(node: &Node, who: &Principal, txn: TxnId) -> EngineResult<()> {
    with_txn(node, who, txn, true, |_| ())
}

/// Looks the transaction up and checks `who` may use it; `renew` counts the call as a sign
/// of life; `f` reads the transaction under the same hold of the state lock (an end is
/// built there: see `Principal::scoped`).
fn with_txn<R>(node: &Node, who: &Principal, txn: TxnId, renew: bool, f: impl FnOnce(&Txn) -> R) -> EngineResult<R> {
    let st = node.state().read().expect("state lock");
    let t = st.table.txn(txn).ok_or(EngineError::NotFound(txn))?;
    who.check_txn(t)?;
    // Only the owner's calls count as signs of life (`Principal::check_renewal`). Renewed
    // under the state lock, as in `renew`; an expiring lease stays expiring (the command
    // itself will be refused).
    if renew && t.state == TxnState::Active && who.check_renewal(t).is_ok() {
        let _ = node.leases().renew(txn, Instant::now());
    }
    Ok(f(t))
}

/// The begin request id proposed for `who`'s client id ([`Principal::begin_request_id`]).
/// A begin an earlier version recorded under the client's own id is still found when this
/// key made it, so a retry across an upgrade gets its transaction; another key's record
/// under that id is passed over.
fn begin_request_id(node: &Node, who: &Principal, id: Option<String>) -> Option<String> {
    let id = id?;
    let scoped = who.begin_request_id(&id);
    if scoped == id {
        return Some(id);
    }
    let st = node.state().read().expect("state lock");
    let earlier = st.table.begun_by(&scoped).is_none() && st.table.begun_by(&id).is_some_and(|t| t.owner == who.name);
    Some(if earlier { id } else { scoped })
}

fn unexpected(o: Outcome) -> EngineError {
    EngineError::Internal(format!("unexpected outcome {o:?}"))
}

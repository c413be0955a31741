//! Coalesces the heartbeats of one client's transactions into shared Heartbeat calls.
//!
//! Each transaction keeps its own schedule (`heartbeat.rs`), but instead of one RPC per
//! heartbeat, the renewals due within a few milliseconds of each other travel together
//! in `more_transaction_ids`. A client holding 10,000 transactions then sends tens of
//! calls per second instead of thousands; on the leader the per-call cost (HTTP/2,
//! decoding, the leadership confirmation) was nearly all of a heartbeat's cost
//! (profiled; see docs/bench.md).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use caerus_proto::metadata;
use caerus_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::error::{Error, Result};
use crate::router::{CallOptions, Router};

/// Longest a heartbeat waits for others to share its call (the caller's own bound, a
/// small part of its interval, usually applies first).
const MAX_GATHER: Duration = Duration::from_secs(1);
/// Transactions per call (the server accepts up to 10,000).
const MAX_PER_CALL: usize = 2_000;

struct Pending {
    id: u64,
    /// How long this heartbeat may wait for company.
    gather: Duration,
    options: CallOptions,
    reply: oneshot::Sender<Result<Instant>>,
}

/// One client's heartbeats (shared by its clones and transactions): the queue of due
/// heartbeats, started on first use; the task behind it ends with the router.
pub(crate) struct Heartbeats {
    router: Weak<Router>,
    queue: OnceLock<mpsc::UnboundedSender<Pending>>,
}

impl Heartbeats {
    pub(crate) fn new(router: &Arc<Router>) -> Heartbeats {
        Heartbeats { router: Arc::downgrade(router), queue: OnceLock::new() }
    }

    /// Renews transaction `id`'s lease, sharing the call with other heartbeats due within
    /// `gather`. Returns when the call that carried it was sent (the lease runs from a later
    /// instant).
    pub(crate) async fn renew(&self, id: u64, gather: Duration, options: CallOptions) -> Result<Instant> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.router.clone(), rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        queue
            .send(Pending { id, gather: gather.min(MAX_GATHER), options, reply })
            .map_err(|_| Error::Unavailable { message: "the client is shutting down".into() })?;
        answer.await.unwrap_or_else(|_| Err(Error::Unavailable { message: "the heartbeat was dropped".into() }))
    }
}

async fn run(router: Weak<Router>, mut rx: mpsc::UnboundedReceiver<Pending>) {
    while let Some(first) = rx.recv().await {
        // Gather until the most impatient heartbeat in the batch must go.
        let mut until = Instant::now() + first.gather;
        let mut batch = vec![first];
        while batch.len() < MAX_PER_CALL {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(p)) => {
                    until = until.min(Instant::now() + p.gather);
                    batch.push(p);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let Some(router) = router.upgrade() else { return };
        tokio::spawn(send(router, batch));
    }
}

/// One Heartbeat call for the batch; every transaction gets its own answer.
async fn send(router: Arc<Router>, batch: Vec<Pending>) {
    let options = CallOptions {
        deadline: batch.iter().map(|p| p.options.deadline).min().expect("a batch is never empty"),
        attempt_timeout: batch.iter().map(|p| p.options.attempt_timeout).min().expect("non-empty"),
        max_backoff: batch.iter().map(|p| p.options.max_backoff).min().expect("non-empty"),
        overrun: Duration::ZERO,
    };
    let request =
        pb::HeartbeatRequest { transaction_id: 0, more_transaction_ids: batch.iter().map(|p| p.id).collect() };
    let call = router.unary("Heartbeat", request, options, |mut c, r| async move { c.heartbeat(r).await });
    let outcome = tokio::time::timeout_at(options.deadline, call).await;
    let routed = match outcome {
        Ok(Ok(routed)) => routed,
        Ok(Err(e)) => return answer_all(batch, Err(e)),
        Err(_) => {
            let e = Error::Unavailable { message: "no heartbeat answer before the lease deadline".into() };
            return answer_all(batch, Err(e));
        }
    };
    let results = routed.value.results;
    if results.len() != batch.len() {
        let e = Error::internal(format!("{} heartbeat results for {} transactions", results.len(), batch.len()));
        return answer_all(batch, Err(e));
    }
    for (pending, result) in batch.into_iter().zip(results) {
        let answer = if result.error_kind.is_empty() { Ok(routed.sent_at) } else { Err(result_error(&result)) };
        let _ = pending.reply.send(answer);
    }
}

fn answer_all(batch: Vec<Pending>, answer: Result<Instant>) {
    for pending in batch {
        let _ = pending.reply.send(answer.clone());
    }
}

/// The error the single-transaction call would have given, so callers classify it the
/// same way (lost, not found, denied...): the kind decides, as it does for any status.
fn result_error(result: &pb::HeartbeatResult) -> Error {
    let mut status = Status::new(Code::Unknown, result.error_message.clone());
    if let Ok(kind) = MetadataValue::try_from(result.error_kind.as_str()) {
        status.metadata_mut().insert(metadata::ERROR_KIND, kind);
    }
    if let Some(detail) = &result.error {
        caerus_proto::set_error_detail(&mut status, detail);
    }
    Error::from(status)
}

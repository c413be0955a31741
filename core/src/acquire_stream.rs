//! Following one acquire request (AcquireLock or AcquireLocks) to its grant: opening the
//! stream, reporting progress, following the leader and re-attaching with the same request
//! id across failures.

use std::pin::Pin;
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use futures::{Stream, StreamExt};
use tonic::transport::Channel;
use tracing::debug;

use crate::error::{Error, Result};
use crate::lanes::StreamPlace;
use crate::router::{attempt_timed_out, deadline_after, went_silent, CallOptions, Router, BACKOFF_CAP};
use crate::types::{Lock, QueuePosition, TraceParent};

/// What an acquire stream reports before its grant.
pub(crate) enum AcquireProgress<'a> {
    /// A one-shot start: the transaction the server began for the request.
    Begun(&'a pb::BeginTransactionResponse),
    /// The request's place in the queue changed.
    Queued(&'a QueuePosition),
}

/// One acquire request: a single lock (perhaps with a one-shot begin) or several, all or
/// nothing.
#[derive(Clone)]
pub(crate) enum AcquireCall {
    /// One lock, with the caller's trace context (sent as metadata on every attempt).
    One(pb::AcquireLockRequest, Option<TraceParent>),
    All(pb::AcquireLocksRequest),
}

/// A message of either stream, as far as following it goes.
enum Step {
    Begun(pb::BeginTransactionResponse),
    Queued(pb::Queued),
    Granted(Vec<pb::Granted>),
    /// After a `stay_open` grant: the server ended the transaction.
    Lost(pb::LockStreamLost),
    Nothing,
}

type Steps = Pin<Box<dyn Stream<Item = std::result::Result<Vec<Step>, tonic::Status>> + Send>>;

impl AcquireCall {
    fn stay_open(&self) -> bool {
        match self {
            AcquireCall::One(m, ..) => m.stay_open,
            AcquireCall::All(m) => m.stay_open,
        }
    }

    fn transaction_id(&self) -> u64 {
        match self {
            AcquireCall::One(m, ..) => m.transaction_id,
            AcquireCall::All(m) => m.transaction_id,
        }
    }

    /// The locks asked for, for messages.
    fn describe(&self) -> String {
        match self {
            AcquireCall::One(m, ..) => format!("{}/{}", m.namespace, m.key),
            AcquireCall::All(m) => {
                m.locks.iter().map(|l| format!("{}/{}", l.namespace, l.key)).collect::<Vec<_>>().join(", ")
            }
        }
    }

    /// Opens the stream on `client`.
    async fn open(
        &self,
        router: &Router,
        client: &mut LockServiceClient<Channel>,
    ) -> std::result::Result<tonic::Response<Steps>, tonic::Status> {
        use pb::{acquire_lock_response::Event as One, acquire_locks_response::Event as All};
        Ok(match self {
            AcquireCall::One(m, trace) => {
                client.acquire_lock(traced(router.request(m.clone()), trace)).await?.map(|s| {
                    let steps = s.map(|r| {
                        r.map(|r| {
                            let event = match r.event {
                                Some(One::Queued(q)) => Step::Queued(q),
                                Some(One::Granted(g)) => Step::Granted(vec![g]),
                                Some(One::Lost(l)) => Step::Lost(l),
                                None => Step::Nothing,
                            };
                            r.begun.map(Step::Begun).into_iter().chain([event]).collect()
                        })
                    });
                    Box::pin(steps) as Steps
                })
            }
            AcquireCall::All(m) => client.acquire_locks(router.request(m.clone())).await?.map(|s| {
                let steps = s.map(|r| {
                    r.map(|r| {
                        vec![match r.event {
                            Some(All::Queued(q)) => Step::Queued(q),
                            Some(All::Granted(g)) => Step::Granted(g.locks),
                            Some(All::Lost(l)) => Step::Lost(l),
                            None => Step::Nothing,
                        }]
                    })
                });
                Box::pin(steps) as Steps
            }),
        })
    }
}

/// `req` with the W3C trace context as `traceparent` / `tracestate` metadata (a value that
/// is not valid metadata is left out: tracing never fails a call).
fn traced<T>(mut req: tonic::Request<T>, trace: &Option<TraceParent>) -> tonic::Request<T> {
    let Some(t) = trace else { return req };
    let md = req.metadata_mut();
    if let Ok(v) = t.traceparent.parse() {
        md.insert("traceparent", v);
        if let Some(Ok(state)) = t.tracestate.as_deref().map(str::parse) {
            md.insert("tracestate", state);
        }
    }
    req
}

/// The rest of a `stay_open` acquire stream after its grant, with its place on its
/// connection (`lanes`), held while the stream is.
pub(crate) struct AfterGrant {
    steps: Steps,
    _place: StreamPlace,
}

impl AfterGrant {
    /// The server's report that it ended the transaction, or `None` when the stream ends
    /// any other way: OK (ended by the client, locks released) or an error (a leader
    /// change, a broken connection). Only the report counts; heartbeats decide the rest.
    pub(crate) async fn lost(mut self) -> Option<pb::LockStreamLost> {
        while let Some(Ok(steps)) = self.steps.next().await {
            if let Some(lost) = steps.into_iter().find_map(|step| match step {
                Step::Lost(lost) => Some(lost),
                _ => None,
            }) {
                return Some(lost);
            }
        }
        None
    }
}

/// Runs one acquire request until its grant (every lock, in the order asked), following
/// the leader and re-attaching (same request id) across failures. A one-shot start
/// switches to a plain re-attach to its transaction once the server has named it. With
/// `stay_open` in the request, also returns the stream, still open after the grant.
pub(crate) async fn stream_acquire(
    router: &Router,
    mut call: AcquireCall,
    timeout_ms: u64,
    mut on_progress: impl FnMut(AcquireProgress<'_>) + Send,
) -> Result<(Vec<Lock>, Option<AfterGrant>)> {
    let what = call.describe();
    let name = match call {
        AcquireCall::One(..) => "AcquireLock",
        AcquireCall::All(_) => "AcquireLocks",
    };
    let wait = Duration::from_millis(timeout_ms);
    // Once the cluster answers, the server ends the wait itself after timeout_ms; the extra
    // retry budget covers elections and re-attaching before that answer can be heard.
    let deadline = deadline_after(wait.saturating_add(router.retry_deadline));
    // While nothing is heard (the cluster is down, or has no leader), the call gives up
    // after its silence budget, counted from the start or from when a stream that was
    // heard broke: a caller's timeout bounds the call, not just the wait in the queue.
    let silence = router.silence_budget(wait);
    let unheard_until = || deadline.min(deadline_after(silence));
    let mut attempts = router.attempts(
        name,
        CallOptions {
            deadline: unheard_until(),
            attempt_timeout: router.request_timeout,
            max_backoff: BACKOFF_CAP,
            overrun: Duration::ZERO,
        },
    );
    let mut last_position: Option<QueuePosition> = None;
    'attach: loop {
        let (uri, channel, place) = attempts.next_stream()?;
        let mut client = LockServiceClient::new(channel);
        // No gRPC timeout on the request: the stream legitimately lives as long as the
        // wait. Only opening it is bounded.
        let open_timeout = attempts.attempt_timeout();
        let opened_at = tokio::time::Instant::now();
        let opened = tokio::time::timeout(open_timeout, call.open(router, &mut client)).await;
        let mut stream = match opened {
            Ok(Ok(response)) => {
                attempts.succeeded(&uri, response.metadata());
                response.into_inner()
            }
            Ok(Err(status)) => {
                attempts.failed(status).await?;
                continue 'attach;
            }
            Err(_) => {
                attempts.failed(attempt_timed_out(&uri, open_timeout)).await?;
                continue 'attach;
            }
        };
        // Whether this stream has said anything (begun, queued, granted): an open stream
        // that says nothing is no answer.
        let mut heard = false;
        loop {
            let until = if heard { deadline } else { attempts.deadline() };
            let next = tokio::select! {
                next = tokio::time::timeout_at(until, stream.next()) => next,
                () = router.silent_since(&uri, opened_at) => {
                    if heard {
                        attempts.set_deadline(unheard_until());
                    }
                    attempts.failed(went_silent(&uri)).await?;
                    continue 'attach;
                }
            };
            if heard && !matches!(next, Ok(Some(Ok(_)))) {
                attempts.set_deadline(unheard_until());
            }
            let next = match next {
                Ok(next) => next,
                Err(_) if !heard => {
                    attempts.failed(attempt_timed_out(&uri, opened_at.elapsed())).await?;
                    continue 'attach;
                }
                Err(_) => {
                    return Err(Error::Unavailable {
                        message: format!(
                            "no final answer to the acquire of {what} from {uri} \
                             within the acquire timeout plus the retry deadline; the request \
                             may still be pending or granted (check the transaction status)"
                        ),
                    })
                }
            };
            match next {
                Some(Ok(steps)) => {
                    heard = true;
                    for step in steps {
                        match step {
                            Step::Begun(begun) => {
                                if let AcquireCall::One(m, ..) = &mut call {
                                    if m.begin.is_some() {
                                        on_progress(AcquireProgress::Begun(&begun));
                                        m.transaction_id = begun.transaction_id;
                                        m.begin = None;
                                    }
                                }
                            }
                            Step::Queued(queued) => {
                                attempts.progressed();
                                let position = QueuePosition::from(queued);
                                // A re-attached stream repeats the current position first.
                                if last_position.as_ref() != Some(&position) {
                                    on_progress(AcquireProgress::Queued(&position));
                                    last_position = Some(position);
                                }
                            }
                            Step::Granted(grants) => {
                                let locks = grants.into_iter().map(Lock::try_from).collect::<Result<_>>()?;
                                return Ok((
                                    locks,
                                    call.stay_open().then(|| AfterGrant { steps: stream, _place: place }),
                                ));
                            }
                            // Only sent after a grant, which ends this loop.
                            Step::Lost(_) | Step::Nothing => {}
                        }
                    }
                }
                None => {
                    let status = tonic::Status::unavailable(format!(
                        "acquire stream from {uri} ended without a grant or a status"
                    ));
                    attempts.failed(status).await?;
                    continue 'attach;
                }
                Some(Err(status)) => {
                    debug!(
                        transaction_id = call.transaction_id(),
                        code = ?status.code(),
                        message = status.message(),
                        "acquire stream ended with a status"
                    );
                    attempts.failed(status).await?;
                    continue 'attach;
                }
            }
        }
    }
}

//! The public `LockService`: authenticate, validate, call the engine, and translate its
//! answers to the wire. Lock semantics live in `locks/`, the table behind `engine`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use caerus_proto::metadata;
use caerus_proto::v1::lock_service_server::LockService;
use caerus_proto::v1::{
    self as pb, acquire_lock_response::Event as AcquireEvent, acquire_locks_response::Event as AcquireAllEvent,
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::auth::{KeyHold, KeyRing};
use super::errors::ApiError;
use super::victim_policies::VictimPolicies;
use super::{caller, convert, validate};
use crate::engine::{
    parse_cursor, AcquireAllRequest, AcquireStart, Acquisition, Engine, EventStart, Followed, Principal, SlotRequest,
    TxnLost, WaitCancel, Wanted,
};
use crate::locks::{
    AcquireRequest, AcquireStatus, Begin, CycleMember, LockKey, SlotClaim, TxnId, VictimPolicy, WaitEnd,
};
use crate::telemetry::trace_context::{TraceContext, TRACEPARENT, TRACESTATE};

pub struct LockApi {
    pub engine: Arc<Engine>,
    pub keys: Arc<KeyRing>,
    pub policies: Arc<VictimPolicies>,
}

type ApiResult<T> = Result<T, ApiError>;

impl LockApi {
    fn principal<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        super::key_check::principal(&self.keys, req)
    }

    /// The principal of a call that opens a stream, and the hold that ends the stream when
    /// the key is revoked (every stream answer goes through [`KeyHold::guard`]).
    fn stream_principal<T>(&self, req: &Request<T>) -> ApiResult<(Principal, KeyHold)> {
        self.keys.authenticate_stream(req.metadata())
    }

    async fn begin(&self, req: Request<pb::BeginTransactionRequest>) -> ApiResult<pb::BeginTransactionResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let lease_ms = validate::lease_ms(r.timeout_ms)?;
        validate::txn_name(&r.name)?;
        let request_id = validate::request_id(&r.request_id)?;
        let options = validate::begin_options(r.max_duration_ms)?;
        let begin = Begin { request_id, lease_ms, priority: r.priority, name: r.name, owner: who.name.clone() };
        let begun = self.engine.begin(&who, begin, options).await?;
        Ok(pb::BeginTransactionResponse { transaction_id: begun.txn, lease_timeout_ms: begun.lease_ms as i64 })
    }

    async fn release(&self, req: Request<pb::ReleaseLockRequest>) -> ApiResult<pb::ReleaseLockResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let request_id = validate::request_id(&r.request_id)?;
        let released = self.engine.release(&who, txn, lock, request_id).await?;
        Ok(pb::ReleaseLockResponse { released })
    }

    async fn cancel_wait(&self, req: Request<pb::CancelWaitRequest>) -> ApiResult<pb::CancelWaitResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let request_id = validate::request_id(&r.request_id)?.ok_or_else(|| {
            ApiError::invalid_argument("request_id names the acquire to withdraw; it is empty".into())
        })?;
        let found = self.engine.cancel_wait(&who, txn, request_id).await?;
        Ok(pb::CancelWaitResponse { cancelled: found == WaitCancel::Cancelled, granted: found == WaitCancel::Granted })
    }

    async fn claim_slot(&self, req: Request<pb::ClaimSlotRequest>) -> ApiResult<pb::ClaimSlotResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let period_ms = validate::slot_period(r.period_ms)?;
        let request_id = validate::required_request_id(&r.request_id, "the claim")?;
        let req = SlotRequest { txn, lock: lock.clone(), period_ms, retry_failed: r.retry_failed, request_id };
        Ok(match self.engine.claim_slot(&who, req).await? {
            SlotClaim::Run { slot, attempt } => pb::ClaimSlotResponse { run: true, slot, attempt, last_run: None },
            SlotClaim::Skip { slot, run } => {
                pb::ClaimSlotResponse { run: false, slot, attempt: 0, last_run: Some(convert::slot_run(&lock, &run)) }
            }
        })
    }

    async fn finish_slot(&self, req: Request<pb::FinishSlotRequest>) -> ApiResult<pb::FinishSlotResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let result = validate::run_result(r.result, r.exit_code)?;
        let request_id = validate::required_request_id(&r.request_id, "the finish")?;
        let run = self.engine.finish_slot(&who, txn, lock.clone(), r.slot, result, request_id).await?;
        Ok(pb::FinishSlotResponse { run: Some(convert::slot_run(&lock, &run)) })
    }

    async fn downgrade(&self, req: Request<pb::DowngradeLockRequest>) -> ApiResult<pb::DowngradeLockResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let request_id = validate::request_id(&r.request_id)?;
        let held = self.engine.downgrade(&who, txn, lock.clone(), request_id).await?;
        Ok(pb::DowngradeLockResponse {
            held: held.is_some(),
            lock: held.map(|h| pb::Granted {
                fencing_token: h.token.0,
                namespace: lock.namespace,
                key: lock.key,
                mode: convert::mode(h.mode),
            }),
        })
    }

    async fn status(
        &self,
        req: Request<pb::GetTransactionStatusRequest>,
    ) -> ApiResult<pb::GetTransactionStatusResponse> {
        let who = self.principal(&req)?;
        let txn = validate::txn_id(req.into_inner().transaction_id)?;
        let t = self.engine.status(&who, txn).await?;
        Ok(pb::GetTransactionStatusResponse {
            transaction_id: t.txn,
            state: convert::state(t.state),
            name: t.name,
            priority: t.priority,
            lease_timeout_ms: t.lease_ms as i64,
            lease_remaining_ms: t.lease_remaining.as_millis() as i64,
            locks: t.held.iter().map(|(lock, held)| convert::held_lock(lock, held)).collect(),
            waiting: t.waiting.map(|w| pb::PendingLock {
                namespace: w.lock.namespace,
                key: w.lock.key,
                mode: convert::mode(w.mode),
                position: w.position,
                request_id: w.request_id,
            }),
            end_reason: t.end_reason,
            end_cause: convert::cause(t.end_cause),
        })
    }

    async fn heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> ApiResult<pb::HeartbeatResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        if r.transaction_id != 0 || r.more_transaction_ids.is_empty() {
            validate::txn_id(r.transaction_id)?;
        }
        validate::heartbeat_batch(r.more_transaction_ids.len())?;
        let first = (r.transaction_id != 0).then_some(r.transaction_id);
        let beat = self.engine.heartbeat(&who, first, &r.more_transaction_ids).await?;
        let results = beat
            .more
            .into_iter()
            .map(|(txn, renewed)| match renewed {
                Ok(left) => pb::HeartbeatResult {
                    transaction_id: txn,
                    lease_remaining_ms: left.as_millis() as i64,
                    ..Default::default()
                },
                Err(e) => {
                    let e = ApiError::from(e);
                    pb::HeartbeatResult {
                        transaction_id: txn,
                        lease_remaining_ms: 0,
                        error_kind: e.code_and_kind().1.to_string(),
                        error_message: e.to_string(),
                        error: Some(e.detail()),
                    }
                }
            })
            .collect();
        let lease_remaining_ms = beat.first.map_or(0, |left| left.as_millis() as i64);
        Ok(pb::HeartbeatResponse { lease_remaining_ms, results })
    }

    async fn end(&self, req: Request<pb::EndTransactionRequest>) -> ApiResult<pb::EndTransactionResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let request_id = validate::request_id(&r.request_id)?;
        let ended = self.engine.end(&who, txn, request_id, r.commit).await?;
        Ok(pb::EndTransactionResponse { state: convert::state(ended.state), released_locks: ended.released })
    }

    /// Validates an AcquireLock call and checks it with the engine; the wait itself runs
    /// in the response stream ([`acquire_stream`]). Also returns the lock, `stay_open` and
    /// the key's hold.
    fn prepare_acquire(
        &self,
        req: Request<pb::AcquireLockRequest>,
    ) -> ApiResult<(Acquisition, LockKey, bool, KeyHold)> {
        let (who, hold) = self.stream_principal(&req)?;
        let trace = self.trace_context(&req);
        let r = req.into_inner();
        // One-shot start: `begin` instead of a transaction id.
        let start = match (r.transaction_id, r.begin) {
            (0, Some(b)) => AcquireStart::Begin(
                Begin {
                    lease_ms: validate::lease_ms(b.timeout_ms)?,
                    name: validate::txn_name(&b.name).map(|()| b.name)?,
                    request_id: validate::request_id(&b.request_id)?,
                    priority: b.priority,
                    owner: who.name.clone(),
                },
                validate::begin_options(b.max_duration_ms)?,
            ),
            (_, Some(_)) => {
                return Err(ApiError::invalid_argument(
                    "set either transaction_id (an existing transaction) or begin (start one), not both".into(),
                ))
            }
            (txn, None) => AcquireStart::Txn(validate::txn_id(txn)?),
        };
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let mode = validate::mode(r.mode)?;
        let permits = validate::permits(mode, r.permits)?;
        let wait_ms = validate::wait_ms(r.timeout_ms)?;
        let request_id = validate::request_id(&r.request_id)?.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let victim_policy = self.policies.for_namespace(&lock.namespace);
        if let Some(ctx) = trace {
            // Before proposing: the grant may be applied before `acquire` returns.
            self.engine.trace_acquire(&who, &request_id, &lock, ctx);
        }
        let acquire =
            AcquireRequest { request_id: request_id.clone(), lock: lock.clone(), mode, wait_ms, victim_policy };
        let acquisition = self.engine.acquire(who, start, Wanted::One { acquire, permits }).inspect_err(|_| {
            self.engine.untrace_acquire(&request_id);
        })?;
        Ok((acquisition, lock, r.stay_open, hold))
    }

    /// The caller's W3C trace context, read only when spans are exported; a malformed one
    /// is ignored.
    fn trace_context<T>(&self, req: &Request<T>) -> Option<TraceContext> {
        if !self.engine.traces() {
            return None;
        }
        let md = req.metadata();
        let get = |name| md.get(name).and_then(|v| v.to_str().ok());
        TraceContext::parse(get(TRACEPARENT), get(TRACESTATE))
    }

    /// Validates an AcquireLocks call and checks it with the engine. Deadlocks are broken
    /// by the victim policy of the first lock's namespace. Also returns `stay_open` and the
    /// key's hold.
    fn prepare_acquire_all(&self, req: Request<pb::AcquireLocksRequest>) -> ApiResult<(Acquisition, bool, KeyHold)> {
        let (who, hold) = self.stream_principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let locks = validate::lock_list(&r.locks)?;
        for (lock, _) in &locks {
            who.check_namespace(&lock.namespace)?;
        }
        let wait_ms = validate::wait_ms(r.timeout_ms)?;
        let request_id = validate::request_id(&r.request_id)?.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let victim_policy = self.policies.for_namespace(&locks[0].0.namespace);
        let wanted = Wanted::All(AcquireAllRequest { request_id, locks, wait_ms, victim_policy });
        Ok((self.engine.acquire(who, AcquireStart::Txn(txn), wanted)?, r.stay_open, hold))
    }
}

/// The engine's updates of an acquire as AcquireLock messages: queue positions, then the
/// grant; a wait that ends without one ends the stream with its error. With `stay_open`,
/// `lost` if the server ends the transaction later.
fn acquire_stream(acquisition: Acquisition, lock: LockKey, stay_open: bool) -> AcquireStream {
    let updates = acquisition.follow_for_life(stay_open).map(move |followed| {
        let update = match followed? {
            Followed::Update(update) => update,
            Followed::Lost(lost) => {
                return Ok(pb::AcquireLockResponse { event: Some(AcquireEvent::Lost(lost_message(lost))), begun: None })
            }
        };
        let begun = update
            .begun
            .map(|b| pb::BeginTransactionResponse { transaction_id: b.txn, lease_timeout_ms: b.lease_ms as i64 });
        let event = match update.status {
            AcquireStatus::Granted { token, mode } => AcquireEvent::Granted(pb::Granted {
                fencing_token: token.0,
                namespace: lock.namespace.clone(),
                key: lock.key.clone(),
                mode: convert::mode(mode),
            }),
            AcquireStatus::Queued { position, blockers } => {
                AcquireEvent::Queued(pb::Queued { position, blocking_transaction_ids: blockers })
            }
            AcquireStatus::Ended(end) => return Err(wait_end_status(update.txn, &end, update.deadlock)),
            AcquireStatus::GrantedAll { .. } => {
                return Err(ApiError::internal("an all-or-nothing grant answered a single acquire".into()).into())
            }
        };
        Ok(pb::AcquireLockResponse { event: Some(event), begun })
    });
    Box::pin(updates)
}

/// The engine's updates of an all-or-nothing acquire as AcquireLocks messages.
fn acquire_all_stream(acquisition: Acquisition, stay_open: bool) -> AcquireAllStream {
    let updates = acquisition.follow_for_life(stay_open).map(move |followed| {
        let update = match followed? {
            Followed::Update(update) => update,
            Followed::Lost(lost) => {
                return Ok(pb::AcquireLocksResponse { event: Some(AcquireAllEvent::Lost(lost_message(lost))) })
            }
        };
        let event = match update.status {
            AcquireStatus::GrantedAll { grants } => AcquireAllEvent::Granted(pb::LocksGranted {
                locks: grants
                    .into_iter()
                    .map(|g| pb::Granted {
                        fencing_token: g.token.0,
                        namespace: g.lock.namespace,
                        key: g.lock.key,
                        mode: convert::mode(g.mode),
                    })
                    .collect(),
            }),
            AcquireStatus::Queued { position, blockers } => {
                AcquireAllEvent::Queued(pb::Queued { position, blocking_transaction_ids: blockers })
            }
            AcquireStatus::Ended(end) => return Err(wait_end_status(update.txn, &end, update.deadlock)),
            AcquireStatus::Granted { .. } => {
                return Err(ApiError::internal("a single grant answered an all-or-nothing acquire".into()).into())
            }
        };
        Ok(pb::AcquireLocksResponse { event: Some(event) })
    });
    Box::pin(updates)
}

/// The `lost` message of a `stay_open` stream.
fn lost_message(lost: TxnLost) -> pb::LockStreamLost {
    pb::LockStreamLost {
        transaction_id: lost.txn,
        end_cause: convert::cause(Some(lost.cause)),
        message: format!("transaction {} ended ({}): {}", lost.txn, lost.cause.as_str(), lost.reason),
    }
}

/// The status a wait that ended without a grant ends its stream with.
fn wait_end_status(txn: TxnId, end: &WaitEnd, deadlock: Option<(Vec<CycleMember>, VictimPolicy)>) -> Status {
    let mut error = ApiError::from_wait_end(txn, end);
    if let ApiError::DeadlockVictim { deadlock: d, .. } = &mut error {
        *d = deadlock.map(|(cycle, policy)| convert::deadlock(&cycle, txn, policy));
    }
    error.into()
}

/// Sends the response headers with the stream's first answer if it comes within
/// FIRST_ANSWER_WAIT (see `acquire_lock`).
async fn with_first_answer<T: Send + 'static>(
    mut updates: Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>,
) -> Result<Response<Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>>, Status> {
    match tokio::time::timeout(FIRST_ANSWER_WAIT, updates.next()).await {
        Ok(Some(Ok(first))) => Ok(Response::new(Box::pin(futures::stream::iter([Ok(first)]).chain(updates)))),
        Ok(Some(Err(status))) => Err(status),
        Ok(None) => Ok(Response::new(Box::pin(futures::stream::empty()))),
        Err(_) => Ok(Response::new(updates)),
    }
}

/// How long an AcquireLock's response headers wait for its first answer (see
/// `acquire_lock`).
const FIRST_ANSWER_WAIT: Duration = Duration::from_millis(20);

type AcquireStream = Pin<Box<dyn Stream<Item = Result<pb::AcquireLockResponse, Status>> + Send>>;
type AcquireAllStream = Pin<Box<dyn Stream<Item = Result<pb::AcquireLocksResponse, Status>> + Send>>;
type EventStream = Pin<Box<dyn Stream<Item = Result<pb::Event, Status>> + Send>>;
type KeyHoldersStream = Pin<Box<dyn Stream<Item = Result<pb::KeyHolders, Status>> + Send>>;

#[tonic::async_trait]
impl LockService for LockApi {
    async fn begin_transaction(
        &self,
        req: Request<pb::BeginTransactionRequest>,
    ) -> Result<Response<pb::BeginTransactionResponse>, Status> {
        Ok(Response::new(self.begin(req).await?))
    }

    type AcquireLockStream = AcquireStream;

    async fn acquire_lock(&self, req: Request<pb::AcquireLockRequest>) -> Result<Response<AcquireStream>, Status> {
        let (acquisition, lock, stay_open, hold) = self.prepare_acquire(req)?;
        let updates = hold.guard(acquire_stream(acquisition, lock, stay_open));
        // The first answer (the grant, the queue position or the error) comes once the
        // proposal is applied, within a millisecond or two: the response headers wait for
        // it and leave with it in one write to the client. Sent at once, they would cost
        // a write and a wake-up of the connection of their own, per acquire (measured:
        // docs/bench.md, "Leader CPU per write"). A slow commit does not hold them longer
        // than FIRST_ANSWER_WAIT, so a client's bound on opening the stream keeps meaning
        // what it did.
        with_first_answer(updates).await
    }

    type AcquireLocksStream = AcquireAllStream;

    async fn acquire_locks(&self, req: Request<pb::AcquireLocksRequest>) -> Result<Response<AcquireAllStream>, Status> {
        let (acquisition, stay_open, hold) = self.prepare_acquire_all(req)?;
        with_first_answer(hold.guard(acquire_all_stream(acquisition, stay_open))).await
    }

    async fn release_lock(
        &self,
        req: Request<pb::ReleaseLockRequest>,
    ) -> Result<Response<pb::ReleaseLockResponse>, Status> {
        Ok(Response::new(self.release(req).await?))
    }

    async fn cancel_wait(
        &self,
        req: Request<pb::CancelWaitRequest>,
    ) -> Result<Response<pb::CancelWaitResponse>, Status> {
        Ok(Response::new(self.cancel_wait(req).await?))
    }

    async fn claim_slot(&self, req: Request<pb::ClaimSlotRequest>) -> Result<Response<pb::ClaimSlotResponse>, Status> {
        Ok(Response::new(self.claim_slot(req).await?))
    }

    async fn finish_slot(
        &self,
        req: Request<pb::FinishSlotRequest>,
    ) -> Result<Response<pb::FinishSlotResponse>, Status> {
        Ok(Response::new(self.finish_slot(req).await?))
    }

    async fn downgrade_lock(
        &self,
        req: Request<pb::DowngradeLockRequest>,
    ) -> Result<Response<pb::DowngradeLockResponse>, Status> {
        Ok(Response::new(self.downgrade(req).await?))
    }

    async fn get_transaction_status(
        &self,
        req: Request<pb::GetTransactionStatusRequest>,
    ) -> Result<Response<pb::GetTransactionStatusResponse>, Status> {
        Ok(Response::new(self.status(req).await?))
    }

    async fn heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> Result<Response<pb::HeartbeatResponse>, Status> {
        Ok(Response::new(self.heartbeat(req).await?))
    }

    async fn verify_fencing_token(
        &self,
        req: Request<pb::VerifyFencingTokenRequest>,
    ) -> Result<Response<pb::VerifyFencingTokenResponse>, Status> {
        let who = self.principal(&req).map_err(Status::from)?;
        let r = req.into_inner();
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        if r.fencing_token == 0 {
            return Err(
                ApiError::invalid_argument("fencing_token must be above 0 (no grant has token 0)".into()).into()
            );
        }
        let check = self.engine.verify_token(&who, &lock, r.fencing_token).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::VerifyFencingTokenResponse {
            current: check.current,
            current_tokens: check.current_tokens,
        }))
    }

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, Status> {
        Ok(Response::new(self.end(req).await?))
    }

    type WatchEventsStream = EventStream;

    type WatchKeyStream = KeyHoldersStream;

    async fn watch_key(&self, req: Request<pb::WatchKeyRequest>) -> Result<Response<KeyHoldersStream>, Status> {
        let (who, hold) = self.stream_principal(&req)?;
        let remote = caller::client_addr(&req);
        let r = req.into_inner();
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        let resume_from =
            if r.cursor.is_empty() { None } else { Some(parse_cursor(&r.cursor).map_err(ApiError::from)?) };
        let states = self.engine.watch_key(who, remote, lock, resume_from).await.map_err(ApiError::from)?;
        let stream = states.map(|s| s.map(|s| convert::key_state(&s)).map_err(|e| Status::from(ApiError::from(e))));
        Ok(Response::new(hold.guard(Box::pin(stream))))
    }

    async fn watch_events(&self, req: Request<pb::WatchEventsRequest>) -> Result<Response<EventStream>, Status> {
        let (who, hold) = self.stream_principal(&req)?;
        let remote = caller::client_addr(&req);
        let r = req.into_inner();
        for p in &r.namespace_prefixes {
            validate::name("namespace_prefixes", p)?;
        }
        let start = if r.only_new { EventStart::OnlyNew } else { EventStart::At(r.from_sequence) };
        let kinds = r.kinds.iter().filter_map(|k| convert::event_kind_from_wire(*k)).collect();
        let watch = self.engine.watch_events(who, remote, start, kinds, r.namespace_prefixes).await?;
        let (from, last, mut events) = (watch.first, watch.last, watch.events);
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    _ = tx.closed() => return,
                };
                let sent = match event {
                    None => return,
                    Some(Ok(e)) => tx.send(Ok(convert::event(&e))).await,
                    Some(Err(e)) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        // Ended when the key is revoked: the receiver goes, and the task with it.
        let mut response = Response::new(hold.guard(Box::pin(ReceiverStream::new(rx))));
        let md = response.metadata_mut();
        md.insert(metadata::FIRST_SEQUENCE, from.into());
        md.insert(metadata::LAST_SEQUENCE, last.into());
        Ok(response)
    }
}

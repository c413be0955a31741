//! The public `LockService`: authenticate, validate, then either propose a command
//! through raft or read the table. Lock semantics live in `locks/`, not here.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_proto::metadata;
use caerus_proto::v1::lock_service_server::LockService;
use caerus_proto::v1::{self as pb, acquire_lock_response::Event as AcquireEvent};
use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::auth::{KeyRing, Principal};
use super::errors::ApiError;
use super::{convert, validate};
use crate::config::VictimPolicies;
use crate::lease::RenewError;
use crate::locks::{
    AcquireRequest, AcquireStatus, Begin, Command, EndCause, Event, EventKind, LockKey, Outcome, TxnId, TxnState,
};
use crate::node::Node;

pub struct LockApi {
    pub node: Arc<Node>,
    pub keys: Arc<KeyRing>,
    pub policies: Arc<VictimPolicies>,
}

type ApiResult<T> = Result<T, ApiError>;

fn unexpected(o: Outcome) -> ApiError {
    ApiError::Internal(format!("unexpected outcome {o:?}"))
}

/// Looks the transaction up, checks the caller may use it, and renews its lease when it
/// is active (every call of a transaction counts as a heartbeat).
fn touch(node: &Node, who: &Principal, txn: TxnId) -> ApiResult<()> {
    let st = node.state.read().expect("state lock");
    let t = st.table.txn(txn).ok_or(ApiError::NotFound(txn))?;
    who.check_txn(t)?;
    // Only the owner's calls count as signs of life: an operator inspecting a stuck
    // transaction must not keep it alive. Renewed under the state lock, as in `renew`; an
    // expiring lease stays expiring (the command itself will be refused).
    if t.state == TxnState::Active && t.owner == who.name {
        let _ = node.leases.renew(txn, Instant::now());
    }
    Ok(())
}

impl LockApi {
    fn principal<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        self.keys.authenticate(req.metadata())
    }

    async fn begin(&self, req: Request<pb::BeginTransactionRequest>) -> ApiResult<pb::BeginTransactionResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let lease_ms = validate::lease_ms(r.timeout_ms)?;
        validate::txn_name(&r.name)?;
        let request_id = validate::request_id(&r.request_id)?;
        self.node.require_leader()?;
        let admitted = self.node.limits.admit_begin(&self.node.state, &who, request_id.as_deref(), None)?;
        let cmd = Command::Begin { request_id, lease_ms, priority: r.priority, name: r.name, owner: who.name.clone() };
        match self.node.propose_admitted(cmd, admitted).await? {
            Outcome::Begun { txn, lease_ms } => {
                // A retried request id returns its transaction only to the same caller.
                touch(&self.node, &who, txn)?;
                Ok(pb::BeginTransactionResponse { transaction_id: txn, lease_timeout_ms: lease_ms as i64 })
            }
            o => Err(unexpected(o)),
        }
    }

    async fn release(&self, req: Request<pb::ReleaseLockRequest>) -> ApiResult<pb::ReleaseLockResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let request_id = validate::request_id(&r.request_id)?;
        self.node.require_leader()?;
        touch(&self.node, &who, txn)?;
        match self.node.propose(Command::Release { txn, request_id, lock }).await? {
            Outcome::Released { released } => Ok(pb::ReleaseLockResponse { released }),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    async fn status(
        &self,
        req: Request<pb::GetTransactionStatusRequest>,
    ) -> ApiResult<pb::GetTransactionStatusResponse> {
        let who = self.principal(&req)?;
        let txn = validate::txn_id(req.into_inner().transaction_id)?;
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        touch(&self.node, &who, txn)?;
        let remaining = self.node.leases.remaining(txn, Instant::now()).unwrap_or_default();
        let st = self.node.state.read().expect("state lock");
        let t = st.table.txn(txn).ok_or(ApiError::NotFound(txn))?;
        // Checked again on the state the answer is built from.
        who.check_txn(t)?;
        let visible = |lock: &LockKey| who.sees_namespace(&lock.namespace);
        let waiting = st.table.wait_view(txn).filter(|(pending, ..)| visible(&pending.lock)).map(
            |(pending, mode, position, _)| pb::PendingLock {
                namespace: pending.lock.namespace.clone(),
                key: pending.lock.key.clone(),
                mode: convert::mode(mode),
                position,
                request_id: pending.request_id.clone(),
            },
        );
        let active = t.state == TxnState::Active;
        Ok(pb::GetTransactionStatusResponse {
            transaction_id: txn,
            state: convert::state(t.state),
            name: t.name.clone(),
            priority: t.priority,
            lease_timeout_ms: t.lease_ms as i64,
            lease_remaining_ms: if active { remaining.as_millis() as i64 } else { 0 },
            locks: t
                .held
                .iter()
                .filter(|(lock, _)| visible(lock))
                .map(|(lock, held)| convert::held_lock(lock, held))
                .collect(),
            waiting,
            end_reason: t.end_reason.clone(),
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
        self.node.require_leader()?;
        // Confirm leadership first: a deposed leader must not acknowledge a lease. One
        // confirmation covers every transaction of the call.
        self.node.confirm_leadership().await?;
        let metrics = &self.node.metrics;
        metrics.heartbeat_calls.fetch_add(1, Ordering::Relaxed);
        metrics
            .heartbeat_renewals
            .fetch_add(r.more_transaction_ids.len() as u64 + u64::from(r.transaction_id != 0), Ordering::Relaxed);
        let lease_remaining_ms = match r.transaction_id {
            0 => 0,
            txn => self.renew(&who, txn)?,
        };
        let results = r
            .more_transaction_ids
            .iter()
            .map(|&txn| match self.renew(&who, txn) {
                Ok(ms) => pb::HeartbeatResult { transaction_id: txn, lease_remaining_ms: ms, ..Default::default() },
                Err(e) => pb::HeartbeatResult {
                    transaction_id: txn,
                    lease_remaining_ms: 0,
                    error_kind: e.code_and_kind().1.to_string(),
                    error_message: e.to_string(),
                    error: Some(e.detail()),
                },
            })
            .collect();
        Ok(pb::HeartbeatResponse { lease_remaining_ms, results })
    }

    /// Renews one lease after leadership was confirmed; the milliseconds left.
    ///
    /// The active check and the renewal happen under one hold of the state read lock, and
    /// lease timers follow applies under its write lock: an end applied before this point is
    /// seen here, so no heartbeat is acknowledged for a transaction that already ended.
    fn renew(&self, who: &Principal, txn: TxnId) -> ApiResult<i64> {
        let st = self.node.state.read().expect("state lock");
        let t = st.table.txn(txn).ok_or(ApiError::NotFound(txn))?;
        who.check_txn(t)?;
        if t.state != TxnState::Active {
            let message = format!("transaction {txn} is {} ({})", t.state, t.end_reason);
            return Err(ApiError::not_active(txn, t.end_cause, message));
        }
        match self.node.leases.renew(txn, Instant::now()) {
            Ok(left) => Ok(left.as_millis() as i64),
            Err(RenewError::Expiring) => Err(ApiError::not_active(
                txn,
                Some(EndCause::LeaseExpired),
                format!("transaction {txn}'s lease lapsed; its expiry is being committed"),
            )),
            Err(RenewError::Untracked) => Err(ApiError::not_active(
                txn,
                None,
                format!("transaction {txn} has no lease on this leader; it is ending"),
            )),
        }
    }

    async fn end(&self, req: Request<pb::EndTransactionRequest>) -> ApiResult<pb::EndTransactionResponse> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        let request_id = validate::request_id(&r.request_id)?;
        self.node.require_leader()?;
        touch(&self.node, &who, txn)?;
        match self.node.propose(Command::End { txn, request_id, commit: r.commit }).await? {
            Outcome::Ended { state, released } => {
                Ok(pb::EndTransactionResponse { state: convert::state(state), released_locks: released })
            }
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// Validates an AcquireLock call; the wait itself runs in [`follow_acquire`].
    fn prepare_acquire(&self, req: Request<pb::AcquireLockRequest>) -> ApiResult<AcquireCall> {
        let who = self.principal(&req)?;
        let r = req.into_inner();
        // One-shot start: `begin` instead of a transaction id.
        let begin = match (r.transaction_id, r.begin) {
            (0, Some(b)) => Some(Begin {
                lease_ms: validate::lease_ms(b.timeout_ms)?,
                name: validate::txn_name(&b.name).map(|()| b.name)?,
                request_id: validate::request_id(&b.request_id)?,
                priority: b.priority,
                owner: who.name.clone(),
            }),
            (_, Some(_)) => {
                return Err(ApiError::InvalidArgument(
                    "set either transaction_id (an existing transaction) or begin (start one), not both".into(),
                ))
            }
            (txn, None) => {
                validate::txn_id(txn)?;
                None
            }
        };
        let lock = validate::lock_key(&r.namespace, &r.key)?;
        who.check_namespace(&lock.namespace)?;
        let mode = validate::mode(r.mode)?;
        let wait_ms = validate::wait_ms(r.timeout_ms)?;
        let request_id = validate::request_id(&r.request_id)?.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        self.node.require_leader()?;
        let victim_policy = self.policies.for_namespace(&lock.namespace);
        let acquire = AcquireRequest { request_id, lock, mode, wait_ms, victim_policy };
        if begin.is_none() {
            touch(&self.node, &who, r.transaction_id)?;
        }
        Ok(AcquireCall { node: self.node.clone(), who, txn: r.transaction_id, begin, acquire })
    }
}

struct AcquireCall {
    node: Arc<Node>,
    who: Principal,
    /// 0 for a one-shot start.
    txn: TxnId,
    begin: Option<Begin>,
    acquire: AcquireRequest,
}

impl AcquireCall {
    fn is_one_shot(&self) -> bool {
        self.begin.is_some()
    }

    /// Proposes the acquire (or the one-shot begin + acquire) unless this request id is
    /// already known (a re-attach). Returns the transaction, what to tell the client about
    /// a transaction begun for it, and where the request stands.
    async fn start(&self) -> ApiResult<(TxnId, Option<pb::BeginTransactionResponse>, AcquireStatus)> {
        let a = &self.acquire;
        let Some(begin) = &self.begin else {
            let known = self.node.state.read().expect("state lock").table.recorded_acquire(
                self.txn,
                &a.request_id,
                &a.lock,
                a.mode,
            )?;
            if let Some(status) = known {
                return Ok((self.txn, None, status));
            }
            let admitted = self.node.limits.admit_acquire(&self.node.state, self.txn, &a.lock)?;
            let cmd = Command::Acquire {
                txn: self.txn,
                request_id: a.request_id.clone(),
                lock: a.lock.clone(),
                mode: a.mode,
                wait_ms: a.wait_ms,
                victim_policy: a.victim_policy,
            };
            return match self.node.propose_admitted(cmd, admitted).await? {
                Outcome::Acquire(status) => Ok((self.txn, None, status)),
                Outcome::Rejected(r) => Err(r.into()),
                o => Err(unexpected(o)),
            };
        };
        let admitted =
            self.node.limits.admit_begin(&self.node.state, &self.who, begin.request_id.as_deref(), Some(&a.lock))?;
        let cmd = Command::BeginAcquire { begin: begin.clone(), acquire: a.clone() };
        match self.node.propose_admitted(cmd, admitted).await? {
            Outcome::BegunAcquire { txn, lease_ms, acquire } => {
                // A retried begin request id answers only the caller that started it.
                touch(&self.node, &self.who, txn)?;
                let begun = pb::BeginTransactionResponse { transaction_id: txn, lease_timeout_ms: lease_ms as i64 };
                match *acquire {
                    Outcome::Acquire(status) => Ok((txn, Some(begun), status)),
                    Outcome::Rejected(r) => Err(r.into()),
                    o => Err(unexpected(o)),
                }
            }
            o => Err(unexpected(o)),
        }
    }
}

/// Proposes the acquire (unless this request id is already known: a re-attach), then
/// streams queue progress until the grant or the end of the wait. If the client goes
/// away the stream is dropped but the wait stays: it ends by its timeout or the
/// transaction's lease.
///
/// A stream polled by the response body itself, not a task feeding a channel: a waiting
/// request then costs the leader a few KiB less each (measured ~7 KiB of the ~15 KiB per
/// waiter; 10,000 waiters are 70 MiB).
fn follow_acquire(call: AcquireCall) -> impl Stream<Item = Result<pb::AcquireLockResponse, Status>> + Send {
    async_stream::try_stream! {
        let node = call.node.clone();
        let (request_id, lock) = (call.acquire.request_id.clone(), call.acquire.lock.clone());
        // Subscribe before the first read, so no change between read and wait is missed. A
        // one-shot start learns its transaction from the proposal: it subscribes then and
        // reads the status again.
        let early = (!call.is_one_shot()).then(|| node.signals.subscribe(call.txn));
        let mut leadership = node.leadership();
        let (txn, mut begun, mut status) = call.start().await?;
        let read_status = |node: &Node| -> ApiResult<AcquireStatus> {
            node.state.read().expect("state lock").table.acquire_status(txn, &request_id)?.ok_or_else(|| {
                ApiError::Internal(format!("acquire request {request_id} vanished from transaction {txn}"))
            })
        };
        let mut changes = match early {
            Some(changes) => changes,
            None => {
                let changes = node.signals.subscribe(txn);
                status = read_status(&node)?;
                changes
            }
        };
        let mut last_position = None;
        loop {
            match status {
                AcquireStatus::Granted { token, mode } => {
                    let granted = pb::Granted {
                        fencing_token: token.0,
                        namespace: lock.namespace.clone(),
                        key: lock.key.clone(),
                        mode: convert::mode(mode),
                    };
                    let event = Some(AcquireEvent::Granted(granted));
                    yield pb::AcquireLockResponse { event, begun: begun.take() };
                    break;
                }
                AcquireStatus::Ended(end) => {
                    let mut error = ApiError::from_wait_end(txn, &end);
                    if let ApiError::DeadlockVictim { deadlock, .. } = &mut error {
                        let st = node.state.read().expect("state lock");
                        *deadlock = st.table.events().deadlock_of(txn).map(|(cycle, policy)| convert::deadlock(cycle, txn, policy));
                    }
                    Err(error)?
                }
                AcquireStatus::Queued { position, blockers } => {
                    if last_position != Some(position) {
                        last_position = Some(position);
                        let queued = pb::Queued { position, blocking_transaction_ids: blockers };
                        let event = Some(AcquireEvent::Queued(queued));
                        yield pb::AcquireLockResponse { event, begun: begun.take() };
                    }
                }
            }
            // Wait for something worth a table read: an outcome at once, moves of the queue
            // ahead at most once per QUEUE_REFRESH (the latest position is what is sent).
            // While a refresh is due, moves are not listened to: they wake nobody.
            let mut refresh = None;
            let deposed = loop {
                let deadline = refresh.unwrap_or_else(|| tokio::time::Instant::now() + SAFETY_NET);
                tokio::select! {
                    changed = changes.outcome.changed() => {
                        if changed.is_err() {
                            changes = node.signals.subscribe(txn);
                        }
                        break false;
                    }
                    moved = changes.queue.changed(), if refresh.is_none() => {
                        if moved.is_err() {
                            changes = node.signals.subscribe(txn);
                        }
                        refresh = Some(tokio::time::Instant::now() + QUEUE_REFRESH);
                    }
                    _ = leadership.wait_for(|leading| !leading) => break true,
                    _ = tokio::time::sleep_until(deadline) => break false,
                }
            };
            if deposed {
                // The wait lives on in the replicated table; the client re-attaches to
                // the new leader with the same request id.
                Err(ApiError::NotLeader { leader: node.leader() })?;
            }
            // Every move so far is covered by the read below.
            changes.queue.borrow_and_update();
            status = read_status(&node)?;
        }
    }
}

/// At most this often a waiting stream reads its new queue position after requests ahead
/// of it left the queue. Without it, every grant on a key with N waiters cost N table
/// reads and N messages (measured, 64 clients on one key: 607-673 lock cycles/s with a
/// message per grant, 918-1,185 with this).
const QUEUE_REFRESH: Duration = Duration::from_millis(100);
/// A waiting stream reads the table at least this often, a net against a missed wake-up.
const SAFETY_NET: Duration = Duration::from_secs(1);

type AcquireStream = Pin<Box<dyn Stream<Item = Result<pb::AcquireLockResponse, Status>> + Send>>;
type EventStream = Pin<Box<dyn Stream<Item = Result<pb::Event, Status>> + Send>>;

/// Events sent per table read; bounds the time the state lock is held.
const EVENT_BATCH: usize = 256;

/// Which events a watcher asked for, and who it is (what it may see).
struct EventFilter {
    prefixes: Vec<String>,
    kinds: Vec<EventKind>,
    who: Principal,
}

impl EventFilter {
    /// The event as this watcher gets it (other tenants' parts removed), if it wants it.
    fn pass(&self, e: &Event) -> Option<pb::Event> {
        let visible = self.who.redact(e)?;
        visible.matches(&self.kinds, &self.prefixes).then(|| convert::event(&visible))
    }
}

/// Streams the event log from `next` (0 = oldest retained), then follows new events.
/// Ends with NOT_LEADER when this node stops leading; the client resumes elsewhere from
/// its cursor.
async fn follow_events(
    node: Arc<Node>,
    mut next: u64,
    filter: EventFilter,
    out: &mpsc::Sender<Result<pb::Event, Status>>,
) -> ApiResult<()> {
    let mut changes = node.events.clone();
    let mut leadership = node.leadership();
    loop {
        changes.borrow_and_update();
        let batch = {
            let st = node.state.read().expect("state lock");
            let log = st.table.events();
            if next == 0 {
                next = log.oldest_seq();
            }
            log.since(next, EVENT_BATCH).map_err(|e| {
                ApiError::CursorExpired(format!(
                    "event {next} is no longer retained; the oldest retained event is {} (resume from there, or use only_new)",
                    e.oldest
                ))
            })?
        };
        let full = batch.len() == EVENT_BATCH;
        for e in batch {
            next = e.seq + 1;
            if let Some(e) = filter.pass(&e) {
                if out.send(Ok(e)).await.is_err() {
                    return Ok(());
                }
            }
        }
        if full {
            continue;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Ok(()) },
            _ = leadership.wait_for(|leading| !leading) => return Err(ApiError::NotLeader { leader: node.leader() }),
            _ = out.closed() => return Ok(()),
        }
    }
}

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
        let call = self.prepare_acquire(req)?;
        Ok(Response::new(Box::pin(follow_acquire(call))))
    }

    async fn release_lock(
        &self,
        req: Request<pb::ReleaseLockRequest>,
    ) -> Result<Response<pb::ReleaseLockResponse>, Status> {
        Ok(Response::new(self.release(req).await?))
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

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, Status> {
        Ok(Response::new(self.end(req).await?))
    }

    type WatchEventsStream = EventStream;

    async fn watch_events(&self, req: Request<pb::WatchEventsRequest>) -> Result<Response<EventStream>, Status> {
        let who = self.principal(&req)?;
        let remote = super::forward::client_addr(&req);
        let r = req.into_inner();
        for p in &r.namespace_prefixes {
            validate::name("namespace_prefixes", p)?;
        }
        self.node.require_leader()?;
        // Held by the stream's task: freed when the stream ends, or the client drops it.
        let slot = self.node.limits.admit_watch(&who, remote)?;
        // Start from a state that includes everything committed before the call.
        self.node.linearizable_read().await?;
        let (from, last) = {
            let st = self.node.state.read().expect("state lock");
            let log = st.table.events();
            let from = match (r.only_new, r.from_sequence) {
                (true, _) => log.last_seq() + 1,
                (false, 0) => log.oldest_seq(),
                (false, n) => n,
            };
            (from, log.last_seq())
        };
        let kinds = r.kinds.iter().filter_map(|k| convert::event_kind_from_wire(*k)).collect();
        let filter = EventFilter { prefixes: r.namespace_prefixes, kinds, who };
        let (tx, rx) = mpsc::channel(64);
        let node = self.node.clone();
        tokio::spawn(async move {
            if let Err(e) = follow_events(node, from, filter, &tx).await {
                let _ = tx.send(Err(e.into())).await;
            }
            drop(slot);
        });
        let mut response = Response::new(Box::pin(ReceiverStream::new(rx)) as EventStream);
        let md = response.metadata_mut();
        md.insert(metadata::FIRST_SEQUENCE, from.into());
        md.insert(metadata::LAST_SEQUENCE, last.into());
        Ok(response)
    }
}

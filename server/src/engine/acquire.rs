//! An acquire, from its proposal to the grant or the end of the wait. The caller gets the
//! updates as a stream; if it goes away the stream is dropped but the wait stays in the
//! table: it ends by its timeout or the transaction's lease.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;

use super::{begin_request_id, touch, unexpected, Begun, Engine, EngineError, EngineResult, Principal};
use crate::locks::{
    AcquireRequest, AcquireStatus, Begin, BeginOption, Command, CycleMember, EndCause, LockKey, LockMode, LockTable,
    Outcome, Rejection, TxnId, TxnState, VictimPolicy, WaitEnd,
};
use crate::node::Node;
use crate::raft::proposer::Timing;

/// At most this often a waiting stream reads its new queue position after requests ahead
/// of it left the queue: every grant on a key with N waiters would otherwise cost N table
/// reads and N messages (figures in docs/bench.md).
const QUEUE_REFRESH: Duration = Duration::from_millis(100);
/// A waiting stream reads the table at least this often, a net against a missed wake-up.
const SAFETY_NET: Duration = Duration::from_secs(1);
/// The same net for a `stay_open` stream after its grant. Longer: such streams live as long
/// as their transactions, and every end of a transaction wakes its streams anyway.
const HOLD_SAFETY_NET: Duration = Duration::from_secs(10);

/// What a `stay_open` acquire stream follows: the acquire's updates, then (after the grant)
/// the end of the transaction if the server ended it.
#[derive(Clone, Debug, PartialEq)]
pub enum Followed {
    Update(AcquireUpdate),
    Lost(TxnLost),
}

/// A transaction the server ended while it held the locks of a `stay_open` acquire: its
/// lease expired, it was a deadlock victim, an operator aborted it or it ran past its
/// maximum duration.
#[derive(Clone, Debug, PartialEq)]
pub struct TxnLost {
    pub txn: TxnId,
    pub cause: EndCause,
    pub reason: String,
}

/// Where a granted transaction stands for a `stay_open` stream.
enum Holding {
    Still,
    /// Ended by its client, or the locks were released: the stream ends quietly.
    Done,
    Lost(TxnLost),
}

/// The transaction an acquire is for.
pub enum AcquireStart {
    /// An active transaction of the caller's.
    Txn(TxnId),
    /// A one-shot start: begin a transaction (owned by the caller), with its options, and
    /// acquire in it.
    Begin(Begin, Vec<BeginOption>),
}

/// What a waiting acquire tells its caller: a new queue position, then the grant or the
/// end of the wait. `begun` is set on the first update of a one-shot start.
#[derive(Clone, Debug, PartialEq)]
pub struct AcquireUpdate {
    pub txn: TxnId,
    pub begun: Option<Begun>,
    /// `Queued` (sent when the position changed), `Granted` or `Ended` (both final).
    pub status: AcquireStatus,
    /// For a wait that ended with the transaction chosen as a deadlock victim: the cycle and
    /// the policy, while the event log still has them.
    pub deadlock: Option<(Vec<CycleMember>, VictimPolicy)>,
}

/// An all-or-nothing acquire of several locks in an existing transaction.
#[derive(Clone, Debug)]
pub struct AcquireAllRequest {
    pub request_id: String,
    pub locks: Vec<(LockKey, LockMode)>,
    pub wait_ms: u64,
    pub victim_policy: VictimPolicy,
}

/// What an acquire asks for: one lock (or, with `permits` > 0, one permit of a semaphore
/// of that many), or several locks all at once.
#[derive(Clone, Debug)]
pub enum Wanted {
    One { acquire: AcquireRequest, permits: u32 },
    All(AcquireAllRequest),
}

impl Wanted {
    fn request_id(&self) -> &str {
        match self {
            Wanted::One { acquire: a, .. } => &a.request_id,
            Wanted::All(a) => &a.request_id,
        }
    }

    fn wait_ms(&self) -> u64 {
        match self {
            Wanted::One { acquire: a, .. } => a.wait_ms,
            Wanted::All(a) => a.wait_ms,
        }
    }

    fn locks(&self) -> Vec<LockKey> {
        match self {
            Wanted::One { acquire: a, .. } => vec![a.lock.clone()],
            Wanted::All(a) => a.locks.iter().map(|(l, _)| l.clone()).collect(),
        }
    }

    /// The recorded answer if this request id was seen before for this very request.
    fn recorded(&self, table: &LockTable, txn: TxnId) -> Result<Option<AcquireStatus>, Rejection> {
        match self {
            Wanted::One { acquire: a, .. } => table.recorded_acquire(txn, &a.request_id, &a.lock, a.mode),
            Wanted::All(a) => table.recorded_acquire_all(txn, &a.request_id, &a.locks),
        }
    }

    fn grantable_now(&self, table: &LockTable, txn: TxnId) -> bool {
        match self {
            Wanted::One { acquire: a, .. } => table.grantable_now(txn, &a.lock, a.mode),
            Wanted::All(a) => table.all_grantable_now(txn, &a.locks),
        }
    }

    /// Whether the table would refuse the request as invalid for what its keys are now (a
    /// lock mode on a semaphore, or the reverse): such a request is proposed and answered
    /// INVALID_ARGUMENT by the apply, never taken for a busy key.
    fn mismatched(&self, table: &LockTable) -> bool {
        match self {
            Wanted::One { acquire: a, permits } => table.check_key_kind(&a.lock, a.mode, *permits).is_err(),
            Wanted::All(a) => a.locks.iter().any(|(lock, mode)| table.check_key_kind(lock, *mode, 0).is_err()),
        }
    }

    /// When to propose it: parked to ride with the next write when the table would queue
    /// it now (its key is held or others wait), so a hot key's hand-over and the last
    /// holder's next acquire share one entry (see `raft::proposer`). `txn` is `None` for a
    /// one-shot start (no transaction yet). A try-lock, or a request the apply will refuse,
    /// goes at once.
    fn timing(&self, table: &LockTable, txn: Option<TxnId>) -> Timing {
        let idle = txn.is_none_or(|t| table.txn(t).is_some_and(|t| t.state == TxnState::Active && t.waiting.is_none()));
        // No transaction holds anything under this id: a one-shot start's view of the key.
        let who = txn.unwrap_or(TxnId::MAX);
        if self.wait_ms() == 0 || !idle || self.mismatched(table) || self.grantable_now(table, who) {
            Timing::Now
        } else {
            Timing::WithNextWrite
        }
    }

    fn command(&self, txn: TxnId) -> Command {
        match self.clone() {
            Wanted::One { acquire: a, permits } if permits > 0 => Command::AcquirePermit {
                txn,
                request_id: a.request_id,
                lock: a.lock,
                permits,
                wait_ms: a.wait_ms,
                victim_policy: a.victim_policy,
            },
            Wanted::One { acquire: a, .. } => Command::Acquire {
                txn,
                request_id: a.request_id,
                lock: a.lock,
                mode: a.mode,
                wait_ms: a.wait_ms,
                victim_policy: a.victim_policy,
            },
            Wanted::All(a) => Command::AcquireAll {
                txn,
                request_id: a.request_id,
                locks: a.locks,
                wait_ms: a.wait_ms,
                victim_policy: a.victim_policy,
            },
        }
    }
}

/// An acquire checked and ready to be proposed: [`Acquisition::follow`] runs it.
pub struct Acquisition {
    node: Arc<Node>,
    who: Principal,
    start: AcquireStart,
    wanted: Wanted,
}

impl Engine {
    /// Checks an acquire before anything is proposed: this node leads, and `who` may use
    /// the transaction (a sign of life of it, as every call of a transaction). A one-shot
    /// start takes one lock only.
    pub fn acquire(&self, who: Principal, start: AcquireStart, wanted: Wanted) -> EngineResult<Acquisition> {
        self.node.require_leader()?;
        let start = match (start, &wanted) {
            (AcquireStart::Txn(txn), _) => {
                touch(&self.node, &who, txn)?;
                AcquireStart::Txn(txn)
            }
            (AcquireStart::Begin(..), Wanted::One { permits: 1.., .. }) => {
                return Err(EngineError::InvalidArgument(
                    "a SEMAPHORE permit needs an existing transaction (transaction_id), not a one-shot begin".into(),
                ))
            }
            (AcquireStart::Begin(begin, options), Wanted::One { .. }) => {
                let request_id = begin_request_id(&self.node, &who, begin.request_id);
                AcquireStart::Begin(Begin { owner: who.name.clone(), request_id, ..begin }, options)
            }
            (AcquireStart::Begin(..), Wanted::All(_)) => {
                return Err(EngineError::InvalidArgument(
                    "an all-or-nothing acquire needs an existing transaction (transaction_id)".into(),
                ))
            }
        };
        Ok(Acquisition { node: self.node.clone(), who, start, wanted })
    }
}

/// A try-lock (no wait) the table refuses is answered without a raft write: a refusal
/// changes nothing. A refusal is confirmed after a read-index round, so the table holds
/// every write committed before the request (a release the caller already saw is never
/// answered "locked"). A try the table would grant, or one it would reject (the
/// transaction ended, or already waits), is proposed at once, without that round; the
/// apply decides, and refuses the same way if the key was taken meanwhile.
async fn refused_without_a_write(node: &Node, txn: TxnId, wanted: &Wanted) -> EngineResult<bool> {
    let refused = || {
        let st = node.state().read().expect("state lock");
        let idle = st.table.txn(txn).is_some_and(|t| t.state == TxnState::Active && t.waiting.is_none());
        idle && !wanted.mismatched(&st.table) && !wanted.grantable_now(&st.table, txn)
    };
    if !refused() {
        return Ok(false);
    }
    node.linearizable_read().await?;
    Ok(refused())
}

impl Acquisition {
    /// Proposes the acquire (or the one-shot begin + acquire) unless this request id is
    /// already known (a re-attach). Returns the transaction, the one begun for it, and
    /// where the request stands.
    async fn start(&self) -> EngineResult<(TxnId, Option<Begun>, AcquireStatus)> {
        let (node, wanted) = (&self.node, &self.wanted);
        let (begin, options, a) = match (&self.start, wanted) {
            (AcquireStart::Begin(begin, options), Wanted::One { acquire: a, .. }) => (begin, options, a),
            (AcquireStart::Begin(..), Wanted::All(_)) => unreachable!("refused by Engine::acquire"),
            (AcquireStart::Txn(txn), _) => {
                let txn = *txn;
                // One read of the table: a retry's recorded answer, and when to propose.
                let (known, timing) = {
                    let st = node.state().read().expect("state lock");
                    (wanted.recorded(&st.table, txn)?, wanted.timing(&st.table, Some(txn)))
                };
                if let Some(status) = known {
                    return Ok((txn, None, status));
                }
                if wanted.wait_ms() == 0 && refused_without_a_write(node, txn, wanted).await? {
                    return Ok((txn, None, AcquireStatus::Ended(WaitEnd::TimedOut)));
                }
                let admitted = node.limits().admit_acquire(node.state(), txn, &wanted.locks())?;
                return match node.propose_admitted(&self.who, wanted.command(txn), admitted, timing).await? {
                    Outcome::Acquire(status) => Ok((txn, None, status)),
                    Outcome::Rejected(r) => Err(r.into()),
                    o => Err(unexpected(o)),
                };
            }
        };
        let admitted =
            node.limits().admit_begin(node.state(), &self.who, begin.request_id.as_deref(), Some(&a.lock))?;
        // Without options the command older nodes know, so a mixed-version cluster keeps
        // working for clients that do not use them.
        let cmd = if options.is_empty() {
            Command::BeginAcquire { begin: begin.clone(), acquire: a.clone() }
        } else {
            Command::BeginWith { begin: begin.clone(), options: options.clone(), acquire: Some(a.clone()) }
        };
        let timing = wanted.timing(&node.state().read().expect("state lock").table, None);
        match node.propose_admitted(&self.who, cmd, admitted, timing).await? {
            Outcome::BegunAcquire { txn, lease_ms, acquire } => {
                // A retried begin request id answers only the caller that started it.
                touch(node, &self.who, txn)?;
                let begun = Begun { txn, lease_ms };
                match *acquire {
                    Outcome::Acquire(status) => Ok((txn, Some(begun), status)),
                    Outcome::Rejected(r) => Err(r.into()),
                    o => Err(unexpected(o)),
                }
            }
            o => Err(unexpected(o)),
        }
    }

    /// Proposes the acquire, then follows it until the grant or the end of the wait. Ends
    /// with NOT_LEADER when this node stops leading: the wait lives on in the replicated
    /// table, and the caller re-attaches to the new leader with the same request id.
    ///
    /// A stream polled by its consumer, not a task feeding a channel: a waiting request
    /// costs the leader only its state here (figures in docs/bench.md).
    pub fn follow(self) -> impl Stream<Item = EngineResult<AcquireUpdate>> + Send {
        async_stream::try_stream! {
            let node = self.node.clone();
            let request_id = self.wanted.request_id().to_string();
            // Subscribe before the first read, so no change between read and wait is missed. A
            // one-shot start learns its transaction from the proposal: it subscribes then and
            // reads the status again.
            let early = match self.start {
                AcquireStart::Txn(txn) => Some(node.txn_wakeups().subscribe(txn)),
                AcquireStart::Begin(..) => None,
            };
            let mut leadership = node.leadership();
            let (txn, mut begun, mut status) = self.start().await?;
            let read_status = |node: &Node| -> EngineResult<AcquireStatus> {
                node.state().read().expect("state lock").table.acquire_status(txn, &request_id)?.ok_or_else(|| {
                    EngineError::Internal(format!("acquire request {request_id} vanished from transaction {txn}"))
                })
            };
            let mut changes = match early {
                Some(changes) => changes,
                None => {
                    let changes = node.txn_wakeups().subscribe(txn);
                    status = read_status(&node)?;
                    changes
                }
            };
            let mut last_position = None;
            loop {
                match status {
                    AcquireStatus::Granted { .. } | AcquireStatus::GrantedAll { .. } => {
                        yield AcquireUpdate { txn, begun: begun.take(), status, deadlock: None };
                        break;
                    }
                    AcquireStatus::Ended(ref end) => {
                        let deadlock = match end {
                            WaitEnd::TxnEnded { cause: EndCause::DeadlockVictim, .. } => {
                                let st = node.state().read().expect("state lock");
                                st.table.events().deadlock_of(txn).map(|(cycle, policy)| (cycle.to_vec(), policy))
                            }
                            _ => None,
                        };
                        yield AcquireUpdate { txn, begun: begun.take(), status, deadlock };
                        break;
                    }
                    AcquireStatus::Queued { position, .. } => {
                        if last_position != Some(position) {
                            last_position = Some(position);
                            yield AcquireUpdate { txn, begun: begun.take(), status, deadlock: None };
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
                                changes = node.txn_wakeups().subscribe(txn);
                            }
                            break false;
                        }
                        moved = changes.queue.changed(), if refresh.is_none() => {
                            if moved.is_err() {
                                changes = node.txn_wakeups().subscribe(txn);
                            }
                            refresh = Some(tokio::time::Instant::now() + QUEUE_REFRESH);
                        }
                        _ = leadership.wait_for(|leading| !leading) => break true,
                        _ = tokio::time::sleep_until(deadline) => break false,
                    }
                };
                if deposed {
                    Err(node.deposed().await)?;
                }
                // Every move so far is covered by the read below.
                changes.queue.borrow_and_update();
                status = read_status(&node)?;
            }
        }
    }
}

impl Acquisition {
    /// [`follow`](Self::follow), and with `stay_open` the life of the transaction after the
    /// grant: ends quietly when the client ends it or releases the locks, with
    /// [`Followed::Lost`] when the server ends it, and with NOT_LEADER when this node stops
    /// leading (the client's heartbeats still tell it). One table read per change of the
    /// transaction, no task: a consumer that goes away drops the subscription with the stream.
    pub fn follow_for_life(self, stay_open: bool) -> impl Stream<Item = EngineResult<Followed>> + Send {
        let node = self.node.clone();
        let locks = self.wanted.locks();
        async_stream::try_stream! {
            let mut granted = None;
            for await update in self.follow() {
                let update = update?;
                if matches!(update.status, AcquireStatus::Granted { .. } | AcquireStatus::GrantedAll { .. }) {
                    granted = Some(update.txn);
                }
                yield Followed::Update(update);
            }
            // Past the cap of open streams per transaction, this one ends as without
            // stay_open: the others (and the client's heartbeats) still tell the end.
            let slot = match (stay_open, granted) {
                (true, Some(txn)) => node.txn_wakeups().hold(txn).map(|slot| (txn, slot)),
                _ => None,
            };
            if let Some((txn, _slot)) = slot {
                if let Some(lost) = until_the_end(&node, txn, &locks).await? {
                    yield Followed::Lost(lost);
                }
            }
        }
    }
}

/// Waits until `txn` ends or holds none of `locks`. Subscribes before each read, so an end
/// applied between the grant and here is seen by the first read.
async fn until_the_end(node: &Arc<Node>, txn: TxnId, locks: &[LockKey]) -> EngineResult<Option<TxnLost>> {
    let mut changes = node.txn_wakeups().subscribe(txn);
    let mut leadership = node.leadership();
    loop {
        match holding(node, txn, locks) {
            Holding::Still => {}
            Holding::Done => return Ok(None),
            Holding::Lost(lost) => return Ok(Some(lost)),
        }
        tokio::select! {
            changed = changes.outcome.changed() => {
                if changed.is_err() {
                    changes = node.txn_wakeups().subscribe(txn);
                }
            }
            _ = leadership.wait_for(|leading| !leading) => break,
            _ = tokio::time::sleep(HOLD_SAFETY_NET) => {}
        }
    }
    Err(node.deposed().await)
}

fn holding(node: &Node, txn: TxnId, locks: &[LockKey]) -> Holding {
    let st = node.state().read().expect("state lock");
    // Forgotten after its retention: long ended, nothing left to report.
    let Some(t) = st.table.txn(txn) else { return Holding::Done };
    if t.state != TxnState::Active {
        return match t.end_cause {
            Some(cause) if cause.revokes() => Holding::Lost(TxnLost { txn, cause, reason: t.end_reason.clone() }),
            _ => Holding::Done,
        };
    }
    if locks.iter().any(|lock| t.held.contains_key(lock)) {
        Holding::Still
    } else {
        Holding::Done
    }
}

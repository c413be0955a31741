//! A transaction's life: begin, release, end (or an operator's abort), its status, and
//! the heartbeats that keep its lease.

use std::time::{Duration, Instant};

use super::{begin_request_id, touch, unexpected, with_txn, Engine, EngineError, EngineResult, Principal};
use crate::lease::RenewError;
use crate::locks::{
    AcquireStatus, Begin, BeginOption, Command, EndCause, Held, LockKey, LockMode, Outcome, TxnId, TxnState, WaitEnd,
};
use crate::raft::proposer::Timing;

/// A transaction begun.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Begun {
    pub txn: TxnId,
    pub lease_ms: u64,
}

/// A transaction ended: its final state and how many locks it released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    pub state: TxnState,
    pub released: u32,
}

/// What withdrawing a waiting acquire request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitCancel {
    /// It waited and is withdrawn now.
    Cancelled,
    /// It had been granted: the transaction holds its locks.
    Granted,
    /// It ended otherwise before (timed out, withdrawn), or this leader never saw it.
    NotWaiting,
}

/// The lock a transaction waits for, and where it stands in the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingView {
    pub lock: LockKey,
    pub mode: LockMode,
    pub position: u32,
    pub request_id: String,
}

/// A transaction as its caller may see it: only locks in namespaces the caller sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnStatus {
    pub txn: TxnId,
    pub state: TxnState,
    pub name: String,
    pub priority: i32,
    pub lease_ms: u64,
    /// Zero unless the transaction is active.
    pub lease_remaining: Duration,
    pub held: Vec<(LockKey, Held)>,
    pub waiting: Option<PendingView>,
    pub end_reason: String,
    /// What ended it, once it has ended.
    pub end_cause: Option<EndCause>,
}

/// The answer to a heartbeat: the first transaction's lease (when one was named; its
/// failure fails the call), then each further transaction's lease or why it was not renewed.
#[derive(Debug)]
pub struct Heartbeat {
    pub first: Option<Duration>,
    pub more: Vec<(TxnId, EngineResult<Duration>)>,
}

impl Engine {
    /// Begins a transaction owned by `who` (`begin.owner` is set to it). A retried request
    /// id returns its transaction; request ids are scoped to the key (`begin_request_id`).
    pub async fn begin(&self, who: &Principal, begin: Begin, options: Vec<BeginOption>) -> EngineResult<Begun> {
        let node = &self.node;
        node.require_leader()?;
        let request_id = begin_request_id(node, who, begin.request_id);
        let admitted = node.limits().admit_begin(node.state(), who, request_id.as_deref(), None)?;
        let begin = Begin { owner: who.name.clone(), request_id, ..begin };
        // Without options the command older nodes know (see `Acquisition::start`).
        let cmd = if options.is_empty() {
            let Begin { request_id, lease_ms, priority, name, owner } = begin;
            Command::Begin { request_id, lease_ms, priority, name, owner }
        } else {
            Command::BeginWith { begin, options, acquire: None }
        };
        match node.propose_admitted(who, cmd, admitted, Timing::Now).await? {
            Outcome::Begun { txn, lease_ms } => {
                touch(&self.node, who, txn)?;
                Ok(Begun { txn, lease_ms })
            }
            o => Err(unexpected(o)),
        }
    }

    /// Releases `lock` (or withdraws the transaction's wait for it); whether it was held.
    pub async fn release(
        &self,
        who: &Principal,
        txn: TxnId,
        lock: LockKey,
        request_id: Option<String>,
    ) -> EngineResult<bool> {
        self.node.require_leader()?;
        touch(&self.node, who, txn)?;
        match self.node.propose_for(who, Command::Release { txn, request_id, lock }).await? {
            Outcome::Released { released } => Ok(released),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// Withdraws the transaction's acquire `request_id` while it waits, with the command the
    /// acquire timeout uses: nothing the transaction holds changes (a waiting upgrade keeps
    /// its SHARED_READ hold), and no later request for the same key is touched, unlike a
    /// release of the key.
    pub async fn cancel_wait(&self, who: &Principal, txn: TxnId, request_id: String) -> EngineResult<WaitCancel> {
        self.node.require_leader()?;
        let waiting = with_txn(&self.node, who, txn, true, |t| match t.state {
            TxnState::Active => Ok(t.waiting.as_ref().is_some_and(|p| p.request_id == request_id)),
            state => Err(EngineError::TransactionLost {
                txn,
                cause: t.end_cause,
                message: format!("transaction {txn} is {state} ({})", t.end_reason),
            }),
        })??;
        match self.node.propose_for_client(who, Command::CancelWait { txn, request_id }).await? {
            Outcome::Acquire(AcquireStatus::Ended(WaitEnd::TimedOut)) if waiting => Ok(WaitCancel::Cancelled),
            Outcome::Acquire(AcquireStatus::Granted { .. } | AcquireStatus::GrantedAll { .. }) => {
                Ok(WaitCancel::Granted)
            }
            Outcome::Acquire(_) | Outcome::None => Ok(WaitCancel::NotWaiting),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// EXCLUSIVE -> SHARED_READ in place, same token. Returns the hold after it, or None
    /// when the transaction does not hold the lock.
    pub async fn downgrade(
        &self,
        who: &Principal,
        txn: TxnId,
        lock: LockKey,
        request_id: Option<String>,
    ) -> EngineResult<Option<Held>> {
        self.node.require_leader()?;
        touch(&self.node, who, txn)?;
        match self.node.propose_for(who, Command::Downgrade { txn, request_id, lock }).await? {
            Outcome::Downgraded { held } => Ok(held),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// Commits (or aborts) the transaction, releasing everything it holds.
    pub async fn end(
        &self,
        who: &Principal,
        txn: TxnId,
        request_id: Option<String>,
        commit: bool,
    ) -> EngineResult<Ended> {
        self.node.require_leader()?;
        let cmd = with_txn(&self.node, who, txn, true, |t| who.scoped(t, Command::End { txn, request_id, commit }))?;
        ended(self.node.propose_for(who, cmd).await?)
    }

    /// An operator aborts a transaction (`who` must be allowed to act on it; see
    /// `Principal::may_use`). Not a sign of life of the transaction.
    pub async fn abort(
        &self,
        who: &Principal,
        txn: TxnId,
        request_id: Option<String>,
        reason: String,
    ) -> EngineResult<Ended> {
        self.node.require_leader()?;
        let abort = Command::Abort { txn, request_id, operator: who.name.clone(), reason };
        let cmd = with_txn(&self.node, who, txn, false, |t| who.scoped(t, abort))?;
        ended(self.node.propose_for(who, cmd).await?)
    }

    /// The transaction as of everything committed before the call (a linearizable read).
    pub async fn status(&self, who: &Principal, txn: TxnId) -> EngineResult<TxnStatus> {
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        touch(&self.node, who, txn)?;
        let remaining = self.node.leases().remaining(txn, Instant::now()).unwrap_or_default();
        let st = self.node.state().read().expect("state lock");
        let t = st.table.txn(txn).ok_or(EngineError::NotFound(txn))?;
        // Checked again on the state the answer is built from.
        who.check_txn(t)?;
        let visible = |lock: &LockKey| who.sees_namespace(&lock.namespace);
        let waiting = st.table.wait_view(txn).filter(|(pending, ..)| visible(&pending.lock)).map(
            |(pending, mode, position, _)| PendingView {
                lock: pending.lock.clone(),
                mode,
                position,
                request_id: pending.request_id.clone(),
            },
        );
        let active = t.state == TxnState::Active;
        Ok(TxnStatus {
            txn,
            state: t.state,
            name: t.name.clone(),
            priority: t.priority,
            lease_ms: t.lease_ms,
            lease_remaining: if active { remaining } else { Duration::ZERO },
            held: t.held.iter().filter(|(lock, _)| visible(lock)).map(|(lock, held)| (lock.clone(), *held)).collect(),
            waiting,
            end_reason: t.end_reason.clone(),
            end_cause: t.end_cause,
        })
    }

    /// Renews the leases of `first` (if any) and of `more`, after one confirmation that
    /// this node still leads: a deposed leader must not acknowledge a lease.
    pub async fn heartbeat(&self, who: &Principal, first: Option<TxnId>, more: &[TxnId]) -> EngineResult<Heartbeat> {
        self.node.require_leader()?;
        self.node.confirm_leadership().await?;
        let metrics = self.node.metrics();
        metrics.heartbeat_calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics
            .heartbeat_renewals
            .fetch_add(more.len() as u64 + u64::from(first.is_some()), std::sync::atomic::Ordering::Relaxed);
        let first = match first {
            None => None,
            Some(txn) => Some(self.renew(who, txn)?),
        };
        let more = more.iter().map(|&txn| (txn, self.renew(who, txn))).collect();
        Ok(Heartbeat { first, more })
    }

    /// Renews one lease after leadership was confirmed; the time left.
    ///
    /// The active check and the renewal happen under one hold of the state read lock, and
    /// lease timers follow applies under its write lock: an end applied before this point is
    /// seen here, so no heartbeat is acknowledged for a transaction that already ended.
    fn renew(&self, who: &Principal, txn: TxnId) -> EngineResult<Duration> {
        let st = self.node.state().read().expect("state lock");
        let t = st.table.txn(txn).ok_or(EngineError::NotFound(txn))?;
        who.check_txn(t)?;
        who.check_renewal(t)?;
        if t.state != TxnState::Active {
            let message = format!("transaction {txn} is {} ({})", t.state, t.end_reason);
            return Err(EngineError::TransactionLost { txn, cause: t.end_cause, message });
        }
        self.node.leases().renew(txn, Instant::now()).map_err(|e| match e {
            RenewError::Expiring => EngineError::TransactionLost {
                txn,
                cause: Some(EndCause::LeaseExpired),
                message: format!("transaction {txn}'s lease lapsed; its expiry is being committed"),
            },
            RenewError::Untracked => EngineError::TransactionLost {
                txn,
                cause: None,
                message: format!("transaction {txn} has no lease on this leader; it is ending"),
            },
        })
    }
}

fn ended(outcome: Outcome) -> EngineResult<Ended> {
    match outcome {
        Outcome::Ended { state, released } => Ok(Ended { state, released }),
        Outcome::Rejected(r) => Err(r.into()),
        o => Err(unexpected(o)),
    }
}

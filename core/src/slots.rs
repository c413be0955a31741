//! At most once per schedule slot, decided by the cluster: a job run under an EXCLUSIVE
//! lock claims the slot the cluster's clock is in ([`Transaction::claim_slot`]), runs only
//! when the claim says so, and reports how it ended ([`Transaction::finish_slot`]).
//!
//! Slots are aligned to the Unix epoch (`slot = floor(t / period)`) and `t` is the
//! leader's clock when the claim is applied, so a host whose clock is off or whose cron
//! fired late finds that the slot already ran. A run whose transaction lets go of the lock
//! (or ends) before its finish is recorded as lost; a failed or lost slot runs again only
//! for a claim with `retry_failed`.

use std::time::Duration;

use caerus_proto::v1 as pb;

use crate::error::{Error, Result};
use crate::router::new_request_id;
use crate::transaction::Transaction;

/// Where a slot's run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRunState {
    /// Claimed; its transaction holds the lock and has not finished it.
    Running,
    /// Finished with success.
    Succeeded,
    /// Finished with a failure.
    Failed,
    /// Its transaction let go of the lock before a finish, or the client lost the lock.
    Lost,
}

impl SlotRunState {
    /// The wire name without its prefix: RUNNING, SUCCEEDED, FAILED, LOST.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotRunState::Running => "RUNNING",
            SlotRunState::Succeeded => "SUCCEEDED",
            SlotRunState::Failed => "FAILED",
            SlotRunState::Lost => "LOST",
        }
    }

    fn from_wire(raw: i32) -> Result<SlotRunState> {
        match pb::SlotRunState::try_from(raw) {
            Ok(pb::SlotRunState::SlotRunRunning) => Ok(SlotRunState::Running),
            Ok(pb::SlotRunState::SlotRunSucceeded) => Ok(SlotRunState::Succeeded),
            Ok(pb::SlotRunState::SlotRunFailed) => Ok(SlotRunState::Failed),
            Ok(pb::SlotRunState::SlotRunLost) => Ok(SlotRunState::Lost),
            _ => Err(Error::internal(format!("server sent an unknown slot run state {raw}"))),
        }
    }
}

/// How a job run for a slot ended, as its claimer reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotOutcome {
    /// The job succeeded.
    Succeeded,
    /// The job failed, with its exit code when it had one.
    Failed {
        /// The process's exit code (None: killed by a signal, or not a process).
        exit_code: Option<i32>,
    },
    /// The lock was lost while the job ran.
    Lost,
}

/// The last run of a key claimed per schedule slot, as the cluster remembers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRun {
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key.
    pub key: String,
    /// The period it was claimed with.
    pub period: Duration,
    /// Its slot: floor(started_at_ms / period).
    pub slot: u64,
    /// The transaction that ran it.
    pub transaction_id: u64,
    /// That transaction's name (who ran it).
    pub transaction_name: String,
    /// The API key that began that transaction ("" without keys).
    pub api_key: String,
    /// When it was claimed (the cluster's clock, ms since the Unix epoch).
    pub started_at_ms: i64,
    /// When it ended (0 while running).
    pub finished_at_ms: i64,
    /// Where it stands.
    pub state: SlotRunState,
    /// The job's exit code, when it finished with one.
    pub exit_code: Option<i32>,
    /// Why it was lost, in words.
    pub reason: String,
    /// Runs of this slot so far, this one included.
    pub attempt: u32,
}

impl TryFrom<pb::SlotRun> for SlotRun {
    type Error = Error;
    fn try_from(r: pb::SlotRun) -> Result<SlotRun> {
        Ok(SlotRun {
            state: SlotRunState::from_wire(r.state)?,
            namespace: r.namespace,
            key: r.key,
            period: Duration::from_millis(r.period_ms),
            slot: r.slot,
            transaction_id: r.transaction_id,
            transaction_name: r.transaction_name,
            api_key: r.api_key,
            started_at_ms: r.started_at_ms,
            finished_at_ms: r.finished_at_ms,
            exit_code: r.exit_code,
            reason: r.reason,
            attempt: r.attempt,
        })
    }
}

/// The cluster's answer to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotClaim {
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key.
    pub key: String,
    /// The slot the cluster's clock is in (or, for a retried claim, the one first claimed).
    pub slot: u64,
    /// True: run the job, then [`Transaction::finish_slot`]. False: skip it.
    pub run: bool,
    /// When `run`: runs of this slot so far, this one included.
    pub attempt: u32,
    /// When not `run`: the run that has the slot.
    pub last_run: Option<SlotRun>,
}

impl Transaction {
    /// Claims the schedule slot of `namespace/key` (period `period`, aligned to the Unix
    /// epoch) that the cluster's clock is in, for a job this transaction runs while it
    /// holds that lock EXCLUSIVE. Run the job only when [`SlotClaim::run`] is true, then
    /// report it with [`Transaction::finish_slot`]. `retry_failed`: a slot whose run failed
    /// or was lost may run again. Retried safely across leader changes.
    pub async fn claim_slot(
        &self,
        namespace: &str,
        key: &str,
        period: Duration,
        retry_failed: bool,
    ) -> Result<SlotClaim> {
        self.ensure_active()?;
        let shared = self.started().ok_or_else(|| {
            Error::invalid_argument("a schedule slot is claimed while holding its lock; acquire it EXCLUSIVE first")
        })?;
        let request = pb::ClaimSlotRequest {
            transaction_id: shared.id,
            namespace: namespace.to_string(),
            key: key.to_string(),
            period_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            retry_failed,
            request_id: new_request_id(),
        };
        let result =
            shared
                .router
                .unary("ClaimSlot", request, shared.router.default_options(), |mut c, r| async move {
                    c.claim_slot(r).await
                })
                .await;
        match result {
            Ok(routed) => {
                let r = routed.value;
                Ok(SlotClaim {
                    namespace: namespace.to_string(),
                    key: key.to_string(),
                    slot: r.slot,
                    run: r.run,
                    attempt: r.attempt,
                    last_run: r.last_run.map(SlotRun::try_from).transpose()?,
                })
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }

    /// Reports how the run of a slot this transaction claimed ended; answers the cluster's
    /// record of it. The first report decides. Call it before releasing the lock or ending
    /// the transaction: a run whose lock goes first is recorded as lost.
    pub async fn finish_slot(&self, claim: &SlotClaim, outcome: SlotOutcome) -> Result<SlotRun> {
        self.ensure_active()?;
        let shared = self.started().ok_or_else(|| Error::invalid_argument("this transaction claimed no slot"))?;
        let (result, exit_code) = match outcome {
            SlotOutcome::Succeeded => (pb::SlotRunState::SlotRunSucceeded, Some(0)),
            SlotOutcome::Failed { exit_code } => (pb::SlotRunState::SlotRunFailed, exit_code),
            SlotOutcome::Lost => (pb::SlotRunState::SlotRunLost, None),
        };
        let request = pb::FinishSlotRequest {
            transaction_id: shared.id,
            namespace: claim.namespace.clone(),
            key: claim.key.clone(),
            slot: claim.slot,
            result: result as i32,
            exit_code,
            request_id: new_request_id(),
        };
        let result =
            shared
                .router
                .unary("FinishSlot", request, shared.router.default_options(), |mut c, r| async move {
                    c.finish_slot(r).await
                })
                .await;
        match result {
            Ok(routed) => {
                let run = routed.value.run.ok_or_else(|| Error::internal("FinishSlot answered no run"))?;
                SlotRun::try_from(run)
            }
            Err(e) => Err(shared.observe(e).await),
        }
    }
}

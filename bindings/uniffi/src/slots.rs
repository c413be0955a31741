//! At most once per schedule slot (core `Transaction::claim_slot` / `finish_slot`): the
//! states and outcomes are core's own enums (`uniffi::remote`, see `types.rs`); the run and
//! the claim are declared here because core's run holds its period as a `Duration`, which
//! the foreign side gets as `period_ms`.

use caerus_core as core;

pub type SlotRunState = core::SlotRunState;

/// Where a slot's run stands.
#[uniffi::remote(Enum)]
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

pub type SlotOutcome = core::SlotOutcome;

/// How a claimed run ended, as its claimer reports it.
#[uniffi::remote(Enum)]
pub enum SlotOutcome {
    Succeeded,
    /// With the process's exit code when it had one.
    Failed {
        exit_code: Option<i32>,
    },
    /// The lock was lost while the job ran.
    Lost,
}

/// A key's run for a schedule slot, as the cluster remembers it (times: the cluster's clock,
/// ms since the Unix epoch; `finished_at_ms` 0 while running).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SlotRun {
    pub namespace: String,
    pub key: String,
    pub period_ms: u64,
    pub slot: u64,
    pub transaction_id: u64,
    pub transaction_name: String,
    pub api_key: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub state: SlotRunState,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub attempt: u32,
}

impl From<core::SlotRun> for SlotRun {
    fn from(r: core::SlotRun) -> Self {
        SlotRun {
            period_ms: u64::try_from(r.period.as_millis()).unwrap_or(u64::MAX),
            state: r.state,
            namespace: r.namespace,
            key: r.key,
            slot: r.slot,
            transaction_id: r.transaction_id,
            transaction_name: r.transaction_name,
            api_key: r.api_key,
            started_at_ms: r.started_at_ms,
            finished_at_ms: r.finished_at_ms,
            exit_code: r.exit_code,
            reason: r.reason,
            attempt: r.attempt,
        }
    }
}

/// The cluster's answer to a claim: run the job only when `run` is true.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SlotClaim {
    pub namespace: String,
    pub key: String,
    pub slot: u64,
    pub run: bool,
    pub attempt: u32,
    /// When not run: the run that has the slot.
    pub last_run: Option<SlotRun>,
}

impl From<core::SlotClaim> for SlotClaim {
    fn from(c: core::SlotClaim) -> Self {
        SlotClaim {
            namespace: c.namespace,
            key: c.key,
            slot: c.slot,
            run: c.run,
            attempt: c.attempt,
            last_run: c.last_run.map(SlotRun::from),
        }
    }
}

impl From<SlotClaim> for core::SlotClaim {
    fn from(c: SlotClaim) -> Self {
        core::SlotClaim {
            namespace: c.namespace,
            key: c.key,
            slot: c.slot,
            run: c.run,
            attempt: c.attempt,
            last_run: None,
        }
    }
}

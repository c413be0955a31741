//! At most once per schedule slot (core `Transaction::claim_slot` / `finish_slot`): the
//! claim and run records handed to Python, and the outcome taken from it.

use caerus_core as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A key's run for a schedule slot, as the cluster remembers it. `state` is "RUNNING",
/// "SUCCEEDED", "FAILED" or "LOST"; times are the cluster's clock (ms since the epoch).
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct SlotRun {
    /// The lock's namespace.
    namespace: String,
    /// The lock's key.
    key: String,
    /// The period it was claimed with, in milliseconds.
    period_ms: u64,
    /// Its slot: floor(started_at_ms / period_ms).
    slot: u64,
    /// The transaction that ran it.
    transaction_id: u64,
    /// That transaction's name (who ran it).
    transaction_name: String,
    /// The API key that began that transaction ("" without keys).
    api_key: String,
    /// When it was claimed.
    started_at_ms: i64,
    /// When it ended (0 while running).
    finished_at_ms: i64,
    /// "RUNNING", "SUCCEEDED", "FAILED" or "LOST".
    state: &'static str,
    /// The job's exit code, when it finished with one.
    exit_code: Option<i32>,
    /// Why it was lost, in words.
    reason: String,
    /// Runs of this slot so far, this one included.
    attempt: u32,
}

#[pymethods]
impl SlotRun {
    fn __repr__(&self) -> String {
        format!(
            "SlotRun(namespace={:?}, key={:?}, slot={}, state={}, exit_code={:?}, attempt={}, transaction_name={:?})",
            self.namespace, self.key, self.slot, self.state, self.exit_code, self.attempt, self.transaction_name
        )
    }
}

impl From<core::SlotRun> for SlotRun {
    fn from(r: core::SlotRun) -> Self {
        SlotRun {
            period_ms: u64::try_from(r.period.as_millis()).unwrap_or(u64::MAX),
            state: r.state.as_str(),
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

/// The cluster's answer to a claim: `run` True means run the job, then `finish_slot`;
/// False means skip it (`last_run` is the run that has the slot).
#[pyclass(frozen, get_all, module = "caerus")]
#[derive(Clone)]
pub struct SlotClaim {
    /// The lock's namespace.
    namespace: String,
    /// The lock's key.
    key: String,
    /// The slot the cluster's clock is in (or, for a retried claim, the one first claimed).
    slot: u64,
    /// True: run the job, then `finish_slot`. False: skip it.
    run: bool,
    /// When `run`: runs of this slot so far, this one included.
    attempt: u32,
    /// When not `run`: the run that has the slot.
    last_run: Option<SlotRun>,
}

#[pymethods]
impl SlotClaim {
    fn __repr__(&self) -> String {
        format!(
            "SlotClaim(namespace={:?}, key={:?}, slot={}, run={}, attempt={})",
            self.namespace,
            self.key,
            self.slot,
            if self.run { "True" } else { "False" },
            self.attempt
        )
    }
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

impl SlotClaim {
    /// The core claim it came from (what `finish_slot` names).
    pub(crate) fn to_core(&self) -> core::SlotClaim {
        core::SlotClaim {
            namespace: self.namespace.clone(),
            key: self.key.clone(),
            slot: self.slot,
            run: self.run,
            attempt: self.attempt,
            last_run: None,
        }
    }
}

/// How a run ended, from Python: "SUCCEEDED", "FAILED" (with `exit_code`) or "LOST".
pub(crate) fn parse_outcome(outcome: &str, exit_code: Option<i32>) -> PyResult<core::SlotOutcome> {
    match outcome.to_ascii_uppercase().as_str() {
        "SUCCEEDED" if exit_code.is_none_or(|c| c == 0) => Ok(core::SlotOutcome::Succeeded),
        "FAILED" => Ok(core::SlotOutcome::Failed { exit_code }),
        "LOST" => Ok(core::SlotOutcome::Lost),
        _ => Err(PyValueError::new_err(format!(
            "outcome must be 'SUCCEEDED' (exit_code None or 0), 'FAILED' or 'LOST', got {outcome:?} with exit_code {exit_code:?}"
        ))),
    }
}

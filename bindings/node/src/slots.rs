//! Schedule slots: claims, runs and how a run ended.

use caerus_core::{SlotClaim, SlotOutcome, SlotRun};
use napi::bindgen_prelude::BigInt;
use napi::Result;
use napi_derive::napi;

use crate::errors::invalid;

/// A key's run for a schedule slot, as the cluster remembers it (`claimSlot`, `finishSlot`).
#[napi(object)]
pub struct JsSlotRun {
    pub namespace: String,
    pub key: String,
    pub period_ms: f64,
    /// floor(startedAtMs / periodMs): below 2^53 for every allowed period.
    pub slot: f64,
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub api_key: String,
    /// The cluster's clock, ms since the Unix epoch (finishedAtMs 0 while running).
    pub started_at_ms: f64,
    pub finished_at_ms: f64,
    /// RUNNING, SUCCEEDED, FAILED or LOST.
    pub state: String,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub attempt: u32,
}

impl From<SlotRun> for JsSlotRun {
    fn from(r: SlotRun) -> Self {
        JsSlotRun {
            period_ms: r.period.as_millis() as f64,
            slot: r.slot as f64,
            transaction_id: BigInt::from(r.transaction_id),
            state: r.state.as_str().to_string(),
            started_at_ms: r.started_at_ms as f64,
            finished_at_ms: r.finished_at_ms as f64,
            namespace: r.namespace,
            key: r.key,
            transaction_name: r.transaction_name,
            api_key: r.api_key,
            exit_code: r.exit_code,
            reason: r.reason,
            attempt: r.attempt,
        }
    }
}

/// The cluster's answer to `claimSlot`: run the job only when `run` is true.
#[napi(object)]
pub struct JsSlotClaim {
    pub namespace: String,
    pub key: String,
    pub slot: f64,
    pub run: bool,
    pub attempt: u32,
    pub last_run: Option<JsSlotRun>,
}

impl From<SlotClaim> for JsSlotClaim {
    fn from(c: SlotClaim) -> Self {
        JsSlotClaim {
            namespace: c.namespace,
            key: c.key,
            slot: c.slot as f64,
            run: c.run,
            attempt: c.attempt,
            last_run: c.last_run.map(JsSlotRun::from),
        }
    }
}

/// How a run ended, from JS: SUCCEEDED, FAILED (with an exit code) or LOST.
pub(crate) fn slot_outcome(outcome: &str, exit_code: Option<i32>) -> Result<SlotOutcome> {
    match outcome {
        "SUCCEEDED" if exit_code.is_none_or(|c| c == 0) => Ok(SlotOutcome::Succeeded),
        "FAILED" => Ok(SlotOutcome::Failed { exit_code }),
        "LOST" => Ok(SlotOutcome::Lost),
        _ => Err(invalid(format!(
            "finishSlot needs outcome 'SUCCEEDED' (exitCode null or 0), 'FAILED' or 'LOST', got {outcome:?} with exitCode {exit_code:?}"
        ))),
    }
}

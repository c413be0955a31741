//! The values of schedule slots (see `table::slots` for the rule): a key's last run, a
//! claim's answer, a finish's result, and the bounds of a period.

use serde::{Deserialize, Serialize};

use super::types::TxnId;

/// The shortest schedule period: shorter ones are a loop, not a schedule.
pub const MIN_SLOT_PERIOD_MS: u64 = 1_000;
/// The longest: a bit over a year (fixed periods only; a calendar month is not one).
pub const MAX_SLOT_PERIOD_MS: u64 = 400 * 24 * 3_600 * 1_000;
/// A record is kept this many periods after its slot is over...
pub const SLOT_KEEP_PERIODS: u64 = 2;
/// ... and at least this long, so short schedules still show their last run for a while.
pub const SLOT_KEEP_MIN_MS: u64 = 10 * 60 * 1_000;

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunState {
    /// Claimed; its transaction holds the key and has not finished it.
    Running,
    /// Finished with success (exit code 0).
    Succeeded,
    /// Finished with a failure (`exit_code`, when there was one).
    Failed,
    /// Its transaction let go of the key (or the client said the lock was lost) before a
    /// finish: whether the job did its work is unknown.
    Lost,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Lost => "lost",
        }
    }
}

/// How a run ended, as its claimer reports it (`Command::FinishSlot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunResult {
    /// The job succeeded.
    Succeeded,
    /// The job failed; its exit code when it had one (a signal has none).
    Failed { exit_code: Option<i32> },
    /// The client lost the lock while the job ran (its lost signal fired).
    Lost,
}

/// The last run of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRun {
    /// The period it was claimed with, and its slot (`started_ms / period_ms`).
    pub period_ms: u64,
    pub slot: u64,
    pub txn: TxnId,
    /// The claim's request id (a retried claim gets the same answer).
    pub request_id: String,
    /// The API key whose transaction claimed it ("" without keys): whose share it counts in.
    pub owner: String,
    /// The claiming transaction's name (who ran it, for people).
    pub holder: String,
    /// The log's clock at the claim and at the end (0 while running).
    pub started_ms: u64,
    pub finished_ms: u64,
    pub state: RunState,
    pub exit_code: Option<i32>,
    /// Why it was lost, in words ("" otherwise).
    pub reason: String,
    /// Runs of this slot so far, this one included (more than 1 after retries).
    pub attempt: u32,
    /// The finish's request id, once finished by its claimer.
    pub finish_request: Option<String>,
}

impl SlotRun {
    /// Whether it started inside slot `slot` of `period_ms`.
    pub(crate) fn started_in(&self, slot: u64, period_ms: u64) -> bool {
        let start = slot.saturating_mul(period_ms);
        self.started_ms >= start && self.started_ms < start.saturating_add(period_ms)
    }

    /// When the record may be forgotten (the log's clock): its slot's end plus the keep time,
    /// and at least `SLOT_KEEP_MIN_MS` after it ended; never while it runs (None). A function
    /// of the record alone, so a replica restored from a snapshot forgets it at the same entry
    /// as one that applied the whole log.
    pub(crate) fn expires_at(&self) -> Option<u64> {
        if self.state == RunState::Running {
            return None;
        }
        let slot_end = self.slot.saturating_add(1).saturating_mul(self.period_ms);
        let kept = slot_end.saturating_add(self.period_ms.saturating_mul(SLOT_KEEP_PERIODS).max(SLOT_KEEP_MIN_MS));
        Some(kept.max(self.finished_ms.saturating_add(SLOT_KEEP_MIN_MS)))
    }
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlotClaim {
    /// Run the job: slot `slot` is this transaction's (attempt 1, or a retry of a failed
    /// or lost run).
    Run { slot: u64, attempt: u32 },
    /// Do not run it: slot `slot` already has a run (`run`: running, succeeded, or failed
    /// or lost without `retry_failed`).
    Skip { slot: u64, run: SlotRun },
}

/// Why a period cannot be used, or None. The API checks the same at the edge.
pub fn invalid_slot_period(period_ms: u64) -> Option<String> {
    (!(MIN_SLOT_PERIOD_MS..=MAX_SLOT_PERIOD_MS).contains(&period_ms)).then(|| {
        format!(
            "a schedule period of {period_ms} ms is outside {MIN_SLOT_PERIOD_MS}..={MAX_SLOT_PERIOD_MS} ms (1 s to 400 days)"
        )
    })
}

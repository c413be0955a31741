//! The lock semantics: a pure, deterministic state machine (no raft, no clock, no I/O). The
//! server applies its commands in log order on every replica; see `table` for the rules.

pub mod api_key;
pub mod command;
pub mod deadlock;
pub mod events;
pub mod feature_level;
mod owners;
pub mod queue;
pub mod requests;
pub mod schedule;
pub mod table;
pub mod types;
pub mod vec_map;

#[cfg(test)]
mod table_all_tests;
#[cfg(test)]
mod table_delay_tests;
#[cfg(test)]
mod table_props;
#[cfg(test)]
mod table_semaphore_tests;
#[cfg(test)]
mod table_slot_tests;
#[cfg(test)]
mod table_tests;

pub use command::{AcquireRequest, AcquireStatus, Begin, BeginOption, Command, LogCommand, Outcome, Rejection};
pub use events::{revoke_cause, CycleMember, Event, EventDetail, EventKind};
pub use feature_level::FeatureLevels;
pub use table::{
    invalid_lock_delay, invalid_new_key, invalid_slot_period, ApiKey, ApiKeyChange, Effect, KeyActor, KeyDelay,
    KeyLimits, LockTable, NewApiKey, RunResult, RunState, SlotClaim, SlotRun, Txn, MAX_KEY_NAME, MAX_LOCK_DELAY_MS,
    MAX_LOCK_DELAY_RULES, MAX_PERMITS, MAX_SLOT_PERIOD_MS, MIN_SLOT_PERIOD_MS,
};
pub use types::{EndCause, FencingToken, Grant, Held, LockKey, LockMode, TxnId, TxnState, VictimPolicy, WaitEnd};

//! Input validation at the edge: nothing malformed reaches raft.

use caerus_proto::v1::LockMode as WireMode;

use super::errors::ApiError;
use caerus_proto::v1 as pb;

use crate::engine::api_keys;
use crate::engine::EngineError;
use crate::locks::{self, LockKey, LockMode};

/// Longest namespace, key or transaction name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest lease or acquire timeout: one hour. Longer is almost surely a unit mistake.
pub const MAX_TIMEOUT_MS: i64 = 3_600_000;
/// Shortest lease: heartbeats every third of it must be able to make it.
pub const MIN_LEASE_MS: i64 = 100;
/// Longest request id.
pub const MAX_REQUEST_ID: usize = 64;
/// Locks one all-or-nothing AcquireLocks may ask for.
pub const MAX_LOCKS_PER_REQUEST: usize = 64;
/// Transactions one Heartbeat call may renew besides its own (`more_transaction_ids`).
pub const MAX_HEARTBEAT_BATCH: usize = 10_000;

fn bad(msg: String) -> ApiError {
    ApiError::invalid_argument(msg)
}

/// A namespace or key: non-empty, at most 256 bytes, no control characters.
pub fn name(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() {
        return Err(bad(format!("{field} must not be empty")));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(bad(format!("{field} is {} bytes; the limit is {MAX_NAME_BYTES}", value.len())));
    }
    if value.chars().any(char::is_control) {
        return Err(bad(format!("{field} must not contain control characters")));
    }
    Ok(())
}

pub fn lock_key(namespace: &str, key: &str) -> Result<LockKey, ApiError> {
    name("namespace", namespace)?;
    name("key", key)?;
    Ok(LockKey::new(namespace, key))
}

/// The locks of an AcquireLocks: 1 to 64, each valid, no key twice (the error names the
/// offending entry by its index).
pub fn lock_list(locks: &[caerus_proto::v1::LockRequest]) -> Result<Vec<(LockKey, LockMode)>, ApiError> {
    if locks.is_empty() {
        return Err(bad("locks is empty; name at least one lock".into()));
    }
    if locks.len() > MAX_LOCKS_PER_REQUEST {
        return Err(bad(format!(
            "locks names {} locks; the limit is {MAX_LOCKS_PER_REQUEST} per request (split the request or take fewer keys)",
            locks.len()
        )));
    }
    let mut out: Vec<(LockKey, LockMode)> = Vec::with_capacity(locks.len());
    for (i, l) in locks.iter().enumerate() {
        let at = |e: ApiError| match e {
            ApiError::Engine(EngineError::InvalidArgument(m)) => bad(format!("locks[{i}]: {m}")),
            e => e,
        };
        let lock = lock_key(&l.namespace, &l.key).map_err(at)?;
        let mode = mode(l.mode).map_err(at)?;
        if mode == LockMode::Semaphore {
            return Err(bad(format!(
                "locks[{i}]: SEMAPHORE permits are taken one key at a time with AcquireLock; AcquireLocks takes EXCLUSIVE and SHARED_READ locks"
            )));
        }
        if out.iter().any(|(seen, _)| *seen == lock) {
            return Err(bad(format!(
                "locks[{i}]: {lock} is named twice; name each key once, with the strongest mode needed"
            )));
        }
        out.push((lock, mode));
    }
    Ok(out)
}

pub fn mode(raw: i32) -> Result<LockMode, ApiError> {
    match WireMode::try_from(raw) {
        Ok(WireMode::Exclusive) => Ok(LockMode::Exclusive),
        Ok(WireMode::SharedRead) => Ok(LockMode::SharedRead),
        Ok(WireMode::Semaphore) => Ok(LockMode::Semaphore),
        Ok(WireMode::Unspecified) => {
            Err(bad("mode must be EXCLUSIVE, SHARED_READ or SEMAPHORE (got LOCK_MODE_UNSPECIFIED)".into()))
        }
        Err(_) => Err(bad(format!(
            "mode {raw} is not a LockMode; use EXCLUSIVE (1), SHARED_READ (2) or SEMAPHORE (3, with permits)"
        ))),
    }
}

/// A semaphore's permit count: 1..=MAX_PERMITS with mode SEMAPHORE, 0 with any other mode.
pub fn permits(mode: LockMode, permits: u32) -> Result<u32, ApiError> {
    let max = crate::locks::MAX_PERMITS;
    match mode {
        LockMode::Semaphore if (1..=max).contains(&permits) => Ok(permits),
        LockMode::Semaphore => {
            Err(bad(format!("mode SEMAPHORE needs permits (the semaphore's count) between 1 and {max}; got {permits}")))
        }
        _ if permits == 0 => Ok(0),
        _ => Err(bad(format!("permits is only for mode SEMAPHORE; got permits {permits} with mode {mode}"))),
    }
}

pub fn timeout(field: &str, ms: i64, min: i64) -> Result<u64, ApiError> {
    if ms < min || ms > MAX_TIMEOUT_MS {
        return Err(bad(format!("{field} is {ms} ms; it must be between {min} and {MAX_TIMEOUT_MS} ms")));
    }
    Ok(ms as u64)
}

/// Longest maximum duration of a transaction: a week.
pub const MAX_TXN_DURATION_MS: i64 = 7 * 24 * 3_600_000;

/// A lock-delay rule: the prefix may be empty (every namespace), else a valid namespace
/// start; the delay 0 (remove the rule) up to the table's maximum.
pub fn lock_delay(prefix: &str, delay_ms: i64) -> Result<u64, ApiError> {
    if !prefix.is_empty() {
        name("namespace_prefix", prefix)?;
    }
    let max = crate::locks::MAX_LOCK_DELAY_MS;
    if !(0..=max as i64).contains(&delay_ms) {
        return Err(bad(format!(
            "delay_ms is {delay_ms}; it must be between 0 (remove the rule) and {max} ms (10 minutes)"
        )));
    }
    Ok(delay_ms as u64)
}

/// The options of a begin: `max_duration_ms` 0 (no bound) or 100 ms..=7 days.
pub fn begin_options(max_duration_ms: i64) -> Result<Vec<crate::locks::BeginOption>, ApiError> {
    if max_duration_ms == 0 {
        return Ok(Vec::new());
    }
    if !(MIN_LEASE_MS..=MAX_TXN_DURATION_MS).contains(&max_duration_ms) {
        return Err(bad(format!(
            "max_duration_ms is {max_duration_ms} ms; it must be 0 (no bound) or between {MIN_LEASE_MS} and \
             {MAX_TXN_DURATION_MS} ms (7 days)"
        )));
    }
    Ok(vec![crate::locks::BeginOption::MaxDurationMs(max_duration_ms as u64)])
}

pub fn lease_ms(ms: i64) -> Result<u64, ApiError> {
    timeout("timeout_ms (the transaction lease)", ms, MIN_LEASE_MS)
}

/// 0 is a try-lock: granted at once or refused without waiting.
pub fn wait_ms(ms: i64) -> Result<u64, ApiError> {
    timeout("timeout_ms (the acquire timeout)", ms, 0)
}

/// A request id: empty (not retry-safe) or 1-64 characters of `[A-Za-z0-9._:-]`.
pub fn request_id(raw: &str) -> Result<Option<String>, ApiError> {
    if raw.is_empty() {
        return Ok(None);
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if raw.len() > MAX_REQUEST_ID || !raw.chars().all(ok_char) {
        return Err(bad(format!(
            "request_id must be 1-{MAX_REQUEST_ID} characters of [A-Za-z0-9._:-] (a UUID works), got {:?}",
            raw.chars().take(80).collect::<String>()
        )));
    }
    Ok(Some(raw.to_string()))
}

pub fn txn_name(raw: &str) -> Result<(), ApiError> {
    if raw.len() > MAX_NAME_BYTES || raw.chars().any(char::is_control) {
        return Err(bad(format!(
            "the transaction's name must be at most {MAX_NAME_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

pub fn heartbeat_batch(len: usize) -> Result<(), ApiError> {
    if len > MAX_HEARTBEAT_BATCH {
        return Err(bad(format!(
            "more_transaction_ids has {len} entries; send at most {MAX_HEARTBEAT_BATCH} per Heartbeat call"
        )));
    }
    Ok(())
}

/// A request id that must be there: `what` names the call that needs it for safe retries.
pub fn required_request_id(raw: &str, what: &str) -> Result<String, ApiError> {
    request_id(raw)?
        .ok_or_else(|| bad(format!("request_id is empty; {what} needs one so a retry is not counted twice")))
}

/// A schedule period (see `locks::table::slots`).
pub fn slot_period(period_ms: u64) -> Result<u64, ApiError> {
    match crate::locks::invalid_slot_period(period_ms) {
        Some(why) => Err(bad(format!("period_ms: {why}"))),
        None => Ok(period_ms),
    }
}

/// How a run ended, as FinishSlot reports it.
pub fn run_result(state: i32, exit_code: Option<i32>) -> Result<crate::locks::RunResult, ApiError> {
    use crate::locks::RunResult;
    use caerus_proto::v1::SlotRunState as S;
    match S::try_from(state) {
        Ok(S::SlotRunSucceeded) if exit_code.is_none_or(|c| c == 0) => Ok(RunResult::Succeeded),
        Ok(S::SlotRunSucceeded) => {
            Err(bad(format!("result SLOT_RUN_SUCCEEDED with exit_code {exit_code:?}; a success exits 0")))
        }
        Ok(S::SlotRunFailed) => Ok(RunResult::Failed { exit_code }),
        Ok(S::SlotRunLost) => Ok(RunResult::Lost),
        _ => Err(bad(format!("result must be SLOT_RUN_SUCCEEDED, SLOT_RUN_FAILED or SLOT_RUN_LOST, got {state}"))),
    }
}

pub fn txn_id(id: u64) -> Result<u64, ApiError> {
    if id == 0 {
        return Err(bad("transaction_id must be set (transaction ids start at 1)".into()));
    }
    Ok(id)
}

/// A cluster API key's name as the lock table takes it.
pub fn api_key_name(name: String) -> Result<String, ApiError> {
    if name.trim().is_empty() || name.len() > locks::MAX_KEY_NAME || name.chars().any(char::is_control) {
        return Err(ApiError::invalid_argument(format!(
            "name must be 1 to {} bytes without control characters",
            locks::MAX_KEY_NAME
        )));
    }
    Ok(name)
}

/// A rotation's grace: 0 to 30 days.
pub fn key_grace(ms: i64) -> Result<u64, ApiError> {
    u64::try_from(ms).ok().filter(|&g| g <= api_keys::MAX_GRACE_MS).ok_or_else(|| {
        ApiError::invalid_argument(format!("grace_ms must be 0 to {} (30 days)", api_keys::MAX_GRACE_MS))
    })
}

/// A `CreateApiKey` request, checked by the same rule the lock table applies.
pub fn new_api_key(r: pb::CreateApiKeyRequest) -> Result<api_keys::KeyRequest, ApiError> {
    let name = api_key_name(r.name)?;
    let expires_in_ms = u64::try_from(r.expires_in_ms)
        .ok()
        .filter(|&e| e <= api_keys::MAX_EXPIRY_MS)
        .ok_or_else(|| ApiError::invalid_argument("expires_in_ms must be 0 (never) to 10 years".into()))?;
    let request_id = request_id(&r.request_id)?.unwrap_or_default();
    let l = r.limits.unwrap_or_default();
    let some = |n: u64| (n > 0).then_some(n);
    let limits = locks::KeyLimits {
        max_txns: some(l.max_transactions),
        max_watches: some(l.max_watches),
        max_slot_records: some(l.max_slot_records),
    };
    let namespaces = (!r.namespace_prefixes.is_empty()).then_some(r.namespace_prefixes);
    let check = locks::NewApiKey {
        name: name.clone(),
        sha256: [0; 32],
        namespaces: namespaces.clone(),
        admin: r.admin,
        expires_at_ms: None,
        limits,
    };
    if let Some(why) = locks::invalid_new_key(&check) {
        return Err(ApiError::invalid_argument(why));
    }
    Ok(api_keys::KeyRequest { name, namespaces, admin: r.admin, expires_in_ms, limits, request_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keys_and_ids_are_checked() {
        assert!(lock_key("billing", "job").is_ok());
        assert!(lock_key("", "job").is_err());
        assert!(lock_key("billing", &"k".repeat(257)).is_err());
        assert!(lock_key("billing", &"k".repeat(256)).is_ok());
        assert!(lock_key("bil\nling", "job").is_err());
        assert_eq!(request_id("").unwrap(), None);
        assert!(request_id("6f1c-AB_9.x:1").unwrap().is_some());
        assert!(request_id("has space").is_err());
        assert!(request_id(&"a".repeat(65)).is_err());
    }

    #[test]
    fn timeouts_and_modes_are_bounded() {
        assert!(lease_ms(0).is_err());
        assert!(lease_ms(-5).is_err());
        assert!(lease_ms(99).is_err());
        assert!(lease_ms(MAX_TIMEOUT_MS + 1).is_err());
        assert_eq!(wait_ms(1).unwrap(), 1);
        assert_eq!(wait_ms(0).unwrap(), 0, "a try-lock");
        assert!(wait_ms(-1).is_err());
        assert!(wait_ms(MAX_TIMEOUT_MS + 1).is_err());
        assert!(mode(0).is_err());
        assert!(mode(7).is_err());
        assert_eq!(mode(2).unwrap(), LockMode::SharedRead);
    }
}

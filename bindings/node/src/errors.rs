//! How core's errors cross into JavaScript: each rejection carries its kind, message, end
//! cause and broken deadlock as fields of one JSON record (the error's message, marked by
//! `ENVELOPE_TAG`), which `index.js` turns into the error class of its code. A record,
//! not words: nothing is read back out of a sentence. The classes come from the shared
//! table (`caerus_types::ErrorClass`), which the addon exports as `errorClasses()`.

use caerus_core::{Deadlock, Error as CoreError, ErrorClass};
use napi::{Error, Status};
use napi_derive::napi;
use serde_json::{json, Value};

/// The first key of every error record, so the wrapper tells one from a napi error of its own.
const ENVELOPE_TAG: &str = "caerusDlsError";

/// A core error as a JS error carrying its record.
pub(crate) fn to_js(e: CoreError) -> Error {
    let deadlock = match &e {
        CoreError::DeadlockVictim { deadlock: Some(d), .. } => deadlock_json(d),
        _ => Value::Null,
    };
    envelope(e.code(), e.message(), e.end_cause().map(|c| c.as_str()), deadlock)
}

/// An error of the addon's own with a stable code (`INVALID_ARGUMENT`, `ABORTED`).
pub(crate) fn coded(code: &str, message: &str) -> Error {
    envelope(code, message, None, Value::Null)
}

/// An `INVALID_ARGUMENT` of the addon's own: a value JavaScript passed does not fit.
pub(crate) fn invalid(message: impl AsRef<str>) -> Error {
    coded("INVALID_ARGUMENT", message.as_ref())
}

fn envelope(code: &str, message: &str, end_cause: Option<&str>, deadlock: Value) -> Error {
    let record = json!({
        ENVELOPE_TAG: 1,
        "code": code,
        "message": message,
        "endCause": end_cause,
        "deadlock": deadlock,
    });
    Error::new(Status::GenericFailure, record.to_string())
}

/// The deadlock as a `DEADLOCK_RESOLVED` event's detail has it (camelCase); transaction
/// ids are decimal strings, which the wrapper turns into bigints like the events' ones.
fn deadlock_json(d: &Deadlock) -> Value {
    let cycle: Vec<Value> = d
        .cycle
        .iter()
        .map(|m| {
            json!({
                "transactionId": m.transaction_id.to_string(),
                "transactionName": m.transaction_name,
                "priority": m.priority,
                "namespace": m.namespace,
                "key": m.key,
                "mode": m.mode.as_str(),
            })
        })
        .collect();
    json!({
        "cycle": cycle,
        "victimTransactionId": d.victim_transaction_id.to_string(),
        "policy": d.policy.as_str(),
    })
}

/// One class of the shared error table.
#[napi(object)]
pub struct JsErrorClass {
    /// The stable code, e.g. `LOCK_TIMEOUT`.
    pub code: String,
    /// The class name stem, e.g. `LockTimeout` (the class is `LockTimeoutError`).
    pub stem: String,
    /// Whether making the same call again later may succeed.
    pub retryable: bool,
    /// What the error means, in one line.
    pub description: String,
}

/// The SDKs' error table; `index.js` makes its error classes from it.
#[napi]
pub fn error_classes() -> Vec<JsErrorClass> {
    ErrorClass::all()
        .map(|c| JsErrorClass {
            code: c.code.to_string(),
            stem: c.stem.to_string(),
            retryable: c.retryable,
            description: c.description.to_string(),
        })
        .collect()
}

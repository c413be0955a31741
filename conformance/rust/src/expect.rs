//! Comparing a call's outcome with a step's `expect`.
//!
//! Through the core client the error kind (`Error::code()`, the `x-dls-error` names) and the
//! server's message (`Error::message()`, for `message_contains`) are visible; the gRPC
//! status code is a raw-client check and is not compared.

use anyhow::{bail, Result};
use caerus_core::Error;
use serde_json::{Map, Value};

/// The step's `expect.ok` checks when the outcome is a success that was expected; `None`
/// when an expected error happened. Anything else is a failure.
pub fn outcome<'a, T>(step: &'a Value, result: &Result<T, Error>) -> Result<Option<&'a Map<String, Value>>> {
    static NO_CHECKS: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let expect = step.get("expect");
    match (expect.and_then(|e| e.get("error")), result) {
        (Some(want), Ok(_)) => bail!("expected error {}, got ok", describe(want)),
        (Some(want), Err(e)) => {
            if want.get("kind").and_then(Value::as_str) != Some(e.code()) {
                bail!("expected error {}, got {}: {}", describe(want), e.code(), e.message());
            }
            if let Some(words) = want.get("message_contains").and_then(Value::as_str) {
                if !e.message().contains(words) {
                    bail!("expected error {} saying {words:?}, got {}: {}", describe(want), e.code(), e.message());
                }
            }
            Ok(None)
        }
        (None, Err(e)) => bail!("expected ok, got {}: {}", e.code(), e.message()),
        (None, Ok(_)) => Ok(Some(
            expect
                .and_then(|e| e.get("ok"))
                .and_then(Value::as_object)
                .unwrap_or_else(|| NO_CHECKS.get_or_init(Map::new)),
        )),
    }
}

fn describe(want: &Value) -> String {
    format!(
        "{}/{}",
        want.get("code").and_then(Value::as_str).unwrap_or("-"),
        want.get("kind").and_then(Value::as_str).unwrap_or("-")
    )
}

pub fn eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<()> {
    if got != want {
        bail!("{what}: expected {want:?}, got {got:?}");
    }
    Ok(())
}

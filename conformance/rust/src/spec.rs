//! Reading step fields: `${ns}` substitution, `{"repeat", "times"}` strings, defaults.

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

/// A string value of the scenario file, with `${ns}` replaced.
pub fn text(v: &Value, ns: &str) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.replace("${ns}", ns)),
        Value::Object(o) => {
            let unit = text(o.get("repeat").ok_or_else(|| anyhow!("repeat object without \"repeat\""))?, ns)?;
            let times =
                o.get("times").and_then(Value::as_u64).ok_or_else(|| anyhow!("repeat object without \"times\""))?;
            Ok(unit.repeat(times as usize))
        }
        other => bail!("expected a string, got {other}"),
    }
}

/// `step[name]` as a string, or `default` (also substituted) when absent.
pub fn field(step: &Value, name: &str, default: &str, ns: &str) -> Result<String> {
    match step.get(name) {
        Some(v) => text(v, ns),
        None => Ok(default.replace("${ns}", ns)),
    }
}

/// `step[name]` as a number the core client can carry (u64), or `default`.
pub fn millis(step: &Value, name: &str, default: u64) -> Result<u64> {
    match step.get(name) {
        None => Ok(default),
        Some(v) => v.as_u64().ok_or_else(|| anyhow!("{name} {v} cannot be expressed through the core client")),
    }
}

pub fn str_of<'a>(step: &'a Value, name: &str) -> Result<&'a str> {
    step.get(name).and_then(Value::as_str).ok_or_else(|| anyhow!("step has no string \"{name}\""))
}

//! `watch` / `expect_watch`: a key watch (`DlsClient::watch_key`) read update by update, and
//! the comparison of its holders and changes with a step's checks.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Context, Result};
use caerus_core::{KeyChange, KeyChangeKind, KeyHolder, KeyUpdate, KeyWatch};
use serde_json::{Map, Value};

use crate::background::PATIENCE;
use crate::expect::eq;
use crate::spec::text;

/// The next update of `watch`; an error if the watch ends or nothing comes within the patience.
pub async fn next(watch: &mut KeyWatch) -> Result<KeyUpdate> {
    match tokio::time::timeout(PATIENCE, watch.next_update()).await {
        Err(_) => bail!("no key watch update within {PATIENCE:?}"),
        Ok(None) => bail!("the key watch ended"),
        Ok(Some(Err(e))) => bail!("the key watch failed: {}: {}", e.code(), e.message()),
        Ok(Some(Ok(u))) => Ok(u),
    }
}

/// `expect_watch`: reads updates until it has at least as many changes as the step expects
/// (one at least), and returns the changes read and the last update.
pub async fn read_changes(watch: &mut KeyWatch, checks: &Map<String, Value>) -> Result<(Vec<KeyChange>, KeyUpdate)> {
    let want = checks.get("changes").and_then(Value::as_array).map_or(0, Vec::len);
    let mut changes = Vec::new();
    loop {
        let u = next(watch).await?;
        changes.extend(u.changes.iter().cloned());
        if changes.len() >= want {
            return Ok((changes, u));
        }
    }
}

pub fn kind_name(kind: KeyChangeKind) -> &'static str {
    kind.as_str()
}

fn show_holder(h: &KeyHolder) -> String {
    format!("txn {} {:?} {}#{}", h.transaction_id, h.transaction_name, h.mode.as_str(), h.fencing_token)
}

fn show_change(c: &KeyChange) -> String {
    let cause = c.end_cause.map(|e| format!(" ({})", e.as_str())).unwrap_or_default();
    format!("{} {}{cause}", kind_name(c.kind), show_holder(&c.holder))
}

/// The transaction ids and saved tokens a comparison names.
pub struct Names<'a> {
    pub ns: &'a str,
    pub txn_ids: HashMap<String, u64>,
    pub tokens: &'a HashMap<String, u64>,
}

impl Names<'_> {
    fn holder(&self, what: &str, w: &Value, h: &KeyHolder) -> Result<()> {
        if let Some(name) = w.get("txn").and_then(Value::as_str) {
            let id = *self.txn_ids.get(name).ok_or_else(|| anyhow!("no transaction {name:?}"))?;
            eq(&format!("{what} transaction (want {name})"), h.transaction_id, id)?;
        }
        if let Some(name) = w.get("name") {
            eq(&format!("{what} transaction_name"), h.transaction_name.clone(), text(name, self.ns)?)?;
        }
        if let Some(mode) = w.get("mode").and_then(Value::as_str) {
            eq(&format!("{what} mode"), h.mode.as_str(), mode)?;
        }
        if let Some(t) = w.get("token").and_then(Value::as_str) {
            let token = *self.tokens.get(t).ok_or_else(|| anyhow!("no saved token {t:?}"))?;
            eq(&format!("{what} fencing token (want {t})"), h.fencing_token, token)?;
        }
        Ok(())
    }

    /// `holders` (in order, exactly) and `changes` (in order, exactly).
    pub fn check(&self, checks: &Map<String, Value>, holders: &[KeyHolder], changes: &[KeyChange]) -> Result<()> {
        if let Some(want) = checks.get("holders").and_then(Value::as_array) {
            let got: Vec<String> = holders.iter().map(show_holder).collect();
            if want.len() != holders.len() {
                bail!("holders: expected {}, got {got:?}", want.len());
            }
            for (i, (w, h)) in want.iter().zip(holders).enumerate() {
                self.holder(&format!("holders[{i}]"), w, h).with_context(|| format!("holders {got:?}"))?;
            }
        }
        if let Some(want) = checks.get("changes").and_then(Value::as_array) {
            let got: Vec<String> = changes.iter().map(show_change).collect();
            if want.len() != changes.len() {
                bail!("changes: expected {}, got {got:?}", want.len());
            }
            for (i, (w, c)) in want.iter().zip(changes).enumerate() {
                let what = format!("changes[{i}]");
                let check = || -> Result<()> {
                    if let Some(kind) = w.get("kind").and_then(Value::as_str) {
                        eq(&format!("{what} kind"), kind_name(c.kind), kind)?;
                    }
                    if let Some(cause) = w.get("end_cause").and_then(Value::as_str) {
                        eq(&format!("{what} end_cause"), c.end_cause.map_or("none", |e| e.as_str()), cause)?;
                    }
                    self.holder(&what, w, &c.holder)
                };
                check().with_context(|| format!("changes {got:?}"))?;
            }
        }
        Ok(())
    }
}

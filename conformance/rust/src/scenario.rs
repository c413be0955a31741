//! One scenario: its transactions, saved tokens and background acquires, and each step
//! mapped onto the core client's API (see "Writing an SDK runner" in the README).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use caerus_core::{
    DlsClient, KeyLocks, KeyWatch, Lock, LockMode, LockRequest, TokenCheck, TransactionOptions, TransactionStatus,
};
use serde_json::{Map, Value};

use crate::background::{Acquired, Background, Wanted, PATIENCE};
use crate::expect::{self, eq};
use crate::spec::{field, millis, str_of, text};
use crate::watch;

/// The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
const GRANT_CHECKS: [&str; 4] = ["mode", "token_equals", "token_greater_than", "save_token"];

pub struct Scenario {
    client: DlsClient,
    ns: String,
    txns: HashMap<String, caerus_core::Transaction>,
    tokens: HashMap<String, u64>,
    handles: HashMap<String, Background>,
    watches: HashMap<String, KeyWatch>,
}

impl Scenario {
    pub fn new(client: DlsClient, ns: String) -> Scenario {
        Scenario {
            client,
            ns,
            txns: HashMap::new(),
            tokens: HashMap::new(),
            handles: HashMap::new(),
            watches: HashMap::new(),
        }
    }

    /// Runs every step; on the first failure says which step and why.
    pub async fn run(mut self, spec: &Value) -> Result<()> {
        let steps = spec["steps"].as_array().ok_or_else(|| anyhow!("scenario has no steps"))?;
        let mut result = Ok(());
        for (i, step) in steps.iter().enumerate() {
            if let Err(e) = self.step(step).await {
                result = Err(anyhow!("step {} ({}): {e:#}", i + 1, step["op"].as_str().unwrap_or("?")));
                break;
            }
        }
        // Leave nothing behind for later scenarios, whatever happened.
        for h in self.handles.values() {
            h.abandon();
        }
        self.watches.clear();
        for tx in self.txns.values() {
            let _ = tx.abort().await;
        }
        result
    }

    fn txn(&self, step: &Value) -> Result<&caerus_core::Transaction> {
        if step.get("txn_id").is_some() {
            bail!("a literal txn_id cannot be expressed through the core client (raw-only)");
        }
        let name = str_of(step, "txn")?;
        self.txns.get(name).ok_or_else(|| anyhow!("transaction {name:?} was not begun"))
    }

    fn token(&self, checks: &Map<String, Value>, name: &str) -> Result<Option<u64>> {
        match checks.get(name).and_then(Value::as_str) {
            None => Ok(None),
            Some(saved) => self.tokens.get(saved).copied().map(Some).ok_or_else(|| anyhow!("no saved token {saved:?}")),
        }
    }

    fn mode(step: &Value) -> Result<LockMode> {
        match step.get("mode") {
            None => Ok(LockMode::Exclusive),
            Some(Value::String(m)) if m == "EXCLUSIVE" => Ok(LockMode::Exclusive),
            Some(Value::String(m)) if m == "SHARED_READ" => Ok(LockMode::SharedRead),
            Some(Value::String(m)) if m == "SEMAPHORE" => Ok(LockMode::Semaphore),
            Some(other) => bail!("mode {other} cannot be expressed through the core client (raw-only)"),
        }
    }

    async fn step(&mut self, step: &Value) -> Result<()> {
        let ns = self.ns.clone();
        let op = str_of(step, "op")?;
        match op {
            "begin" => {
                let name = field(step, "name", "", &ns)?;
                let priority = step.get("priority").and_then(Value::as_i64).unwrap_or(0);
                let mut opts = TransactionOptions::default()
                    .with_timeout_ms(millis(step, "timeout_ms", 15_000)?)
                    .with_priority(i32::try_from(priority).context("priority")?);
                if !name.is_empty() {
                    opts = opts.with_name(name);
                }
                if step.get("max_duration_ms").is_some() {
                    opts = opts.with_max_duration_ms(millis(step, "max_duration_ms", 0)?);
                }
                if step.get("lost_stream").and_then(Value::as_bool) == Some(true) {
                    opts = opts.with_lost_stream(true);
                }
                let result = self.client.begin_transaction(opts).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    let tx = result.expect("checked ok");
                    if let Some(ms) = checks.get("lease_timeout_ms").and_then(Value::as_u64) {
                        eq("lease_timeout_ms", tx.lease(), Duration::from_millis(ms))?;
                    }
                    if let Some(other) = checks.get("same_txn_as").and_then(Value::as_str) {
                        let other = self.txns.get(other).ok_or_else(|| anyhow!("no transaction {other:?}"))?;
                        eq("transaction id", tx.id(), other.id())?;
                    }
                    self.txns.insert(str_of(step, "txn")?.to_string(), tx);
                }
            }
            "acquire" | "acquire_all" => {
                let tx = self.txn(step)?.clone();
                let wanted = if op == "acquire" {
                    let (namespace, key) = (field(step, "namespace", "${ns}", &ns)?, field(step, "key", "", &ns)?);
                    let permits = u32::try_from(millis(step, "permits", 0)?).context("permits")?;
                    match Self::mode(step)? {
                        // A permit, of any count (the server judges it): acquire_permit.
                        LockMode::Semaphore => Wanted::Permit { namespace, key, permits },
                        mode if permits == 0 => Wanted::One { namespace, key, mode },
                        _ => bail!("permits with a lock mode cannot be expressed through the core client (raw-only)"),
                    }
                } else {
                    let locks = step.get("locks").and_then(Value::as_array).context("step has no \"locks\" list")?;
                    let locks = locks
                        .iter()
                        .map(|w| {
                            Ok(LockRequest::new(
                                field(w, "namespace", "${ns}", &ns)?,
                                field(w, "key", "", &ns)?,
                                Self::mode(w)?,
                            ))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Wanted::All(locks)
                };
                let timeout_ms = millis(step, "timeout_ms", 10_000)?;
                if step.get("wait").and_then(Value::as_bool) == Some(false) {
                    let handle = str_of(step, "handle")?.to_string();
                    self.handles.insert(handle, Background::start(tx, wanted, timeout_ms));
                    return Ok(());
                }
                let result = wanted.acquire(&tx, timeout_ms, |_| {}).await;
                self.check_acquired(step, result)?;
            }
            "expect_queued" => {
                let h = self.handle(step)?;
                let position = step.get("position").and_then(Value::as_u64).context("position")? as u32;
                let q = h.queued_at(position).await?;
                for name in step.get("blocked_by").and_then(Value::as_array).into_iter().flatten() {
                    let name = name.as_str().context("blocked_by names a transaction")?;
                    let id = self.txns.get(name).ok_or_else(|| anyhow!("no transaction {name:?}"))?.id();
                    if !q.blocking_transaction_ids.contains(&id) {
                        bail!(
                            "queued at {position} but not blocked by {name} ({id}); blockers {:?}",
                            q.blocking_transaction_ids
                        );
                    }
                }
            }
            "await" => {
                let result = self.handle(step)?.outcome().await?;
                self.check_acquired(step, result)?;
            }
            "downgrade" => {
                let tx = self.txn(step)?;
                let result =
                    tx.downgrade(&field(step, "namespace", "${ns}", &ns)?, &field(step, "key", "", &ns)?).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    let lock = result.expect("checked ok");
                    if let Some(want) = checks.get("held").and_then(Value::as_bool) {
                        eq("held", lock.is_some(), want)?;
                    }
                    match lock {
                        Some(lock) => self.check_grant(checks, &lock)?,
                        None => {
                            if let Some(c) = GRANT_CHECKS.iter().find(|c| checks.contains_key(**c)) {
                                bail!("{c}: the lock is not held (held=false)");
                            }
                        }
                    }
                }
            }
            "verify_token" => {
                let token = match step.get("token") {
                    Some(Value::String(saved)) => {
                        *self.tokens.get(saved).ok_or_else(|| anyhow!("no saved token {saved:?}"))?
                    }
                    Some(literal) => literal.as_u64().with_context(|| format!("token {literal} is not a u64"))?,
                    None => bail!("step has no \"token\""),
                };
                let result = self
                    .client
                    .verify_fencing_token(
                        &field(step, "namespace", "${ns}", &ns)?,
                        &field(step, "key", "", &ns)?,
                        token,
                    )
                    .await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    self.check_verify(checks, &result.expect("checked ok"))?;
                }
            }
            "release" => {
                let tx = self.txn(step)?;
                let result = tx.release(&field(step, "namespace", "${ns}", &ns)?, &field(step, "key", "", &ns)?).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    if let Some(want) = checks.get("released").and_then(Value::as_bool) {
                        eq("released", result.expect("checked ok"), want)?;
                    }
                }
            }
            "status" => {
                let result = match step.get("txn_id") {
                    Some(id) => self.client.transaction_status(id.as_u64().context("txn_id")?).await,
                    None => self.txn(step)?.status().await,
                };
                if let Some(checks) = expect::outcome(step, &result)? {
                    self.check_status(checks, &result.expect("checked ok"))?;
                }
            }
            "heartbeat" => {
                // The core client heartbeats by itself; the scenario's later status shows
                // the lease was kept. Heartbeat errors are only expected in raw-only scenarios.
                self.txn(step)?;
                if step.get("expect").and_then(|e| e.get("error")).is_some() {
                    bail!("an explicit heartbeat error cannot be expressed through the core client (raw-only)");
                }
            }
            "end" => {
                let tx = self.txn(step)?;
                let commit = step.get("commit").and_then(Value::as_bool).unwrap_or(true);
                let result = if commit { tx.commit().await } else { tx.abort().await };
                if let Some(checks) = expect::outcome(step, &result)? {
                    if let Some(state) = checks.get("state").and_then(Value::as_str) {
                        eq("state", state, if commit { "COMMITTED" } else { "ABORTED" })?;
                    }
                    // released_locks is not exposed by the core client.
                }
            }
            "await_status" => {
                // The core client heartbeats by itself: `heartbeat` needs nothing more here.
                let checks = step.get("expect").and_then(|e| e.get("ok")).and_then(Value::as_object).cloned();
                let checks = checks.unwrap_or_default();
                let within = Duration::from_millis(millis(step, "within_ms", PATIENCE.as_millis() as u64)?);
                let deadline = Instant::now() + within;
                loop {
                    let status =
                        self.txn(step)?.status().await.map_err(|e| anyhow!("status: {}: {}", e.code(), e.message()))?;
                    match self.check_status(&checks, &status) {
                        Ok(()) => break,
                        // An ended transaction no longer changes.
                        Err(e) if status.state.as_str() != "ACTIVE" || Instant::now() > deadline => {
                            return Err(e.context(format!("state {}", status.state.as_str())));
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            }
            "sleep_ms" => {
                tokio::time::sleep(Duration::from_millis(step.get("ms").and_then(Value::as_u64).context("ms")?)).await
            }
            "watch" => {
                if step.get("resume").is_some() {
                    bail!("a watch cursor cannot be expressed through the core client (raw-only)");
                }
                let handle = str_of(step, "handle")?.to_string();
                let result = self
                    .client
                    .watch_key(&field(step, "namespace", "${ns}", &ns)?, &field(step, "key", "", &ns)?)
                    .await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    let mut w = result.expect("checked ok");
                    let first = watch::next(&mut w).await?;
                    if let Some(initial) = checks.get("initial").and_then(Value::as_bool) {
                        eq("initial", first.initial, initial)?;
                    }
                    Self::no_cursor(checks)?;
                    self.names().check(checks, &first.holders, &first.changes)?;
                    self.watches.insert(handle, w);
                }
            }
            "expect_watch" => {
                let handle = str_of(step, "handle")?;
                let checks = step.get("expect").and_then(|e| e.get("ok")).and_then(Value::as_object).cloned();
                let checks = checks.unwrap_or_default();
                Self::no_cursor(&checks)?;
                let w = self.watches.get_mut(handle).ok_or_else(|| anyhow!("no watch {handle:?}"))?;
                let (changes, last) = watch::read_changes(w, &checks).await?;
                self.names().check(&checks, &last.holders, &changes)?;
            }
            "unwatch" => {
                let handle = str_of(step, "handle")?;
                self.watches.remove(handle).ok_or_else(|| anyhow!("no watch {handle:?}"))?;
            }
            "expect_lost" => {
                let tx = self.txn(step)?;
                let within = Duration::from_millis(millis(step, "within_ms", PATIENCE.as_millis() as u64)?);
                let started = Instant::now();
                let reason = tokio::time::timeout(within, tx.lost())
                    .await
                    .map_err(|_| anyhow!("the transaction was not reported lost within {within:?}"))?;
                let checks = step.get("expect").and_then(|e| e.get("ok")).and_then(Value::as_object);
                if let Some(kind) = checks.and_then(|c| c.get("lost_kind")).and_then(Value::as_str) {
                    eq("lost kind", reason.kind.as_str(), kind)
                        .with_context(|| format!("lost after {:?}: {}", started.elapsed(), reason.message))?;
                }
                // end_cause (the LockStreamLost message's) is not visible through the core client.
            }
            "expect_streams_closed" => {
                // The core client shows no stream; it must not have reported the transaction lost.
                if let Some(reason) = self.txn(step)?.lost_reason() {
                    bail!("the transaction was reported lost: {reason}");
                }
            }
            "set_lock_delay" => {
                let prefix = field(step, "namespace_prefix", "${ns}", &ns)?;
                let delay = Duration::from_millis(millis(step, "delay_ms", 0)?);
                let result = self.client.set_lock_delay(&prefix, delay).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    if let Some(ms) = checks.get("previous_delay_ms").and_then(Value::as_u64) {
                        eq("previous_delay_ms", result.expect("checked ok"), Duration::from_millis(ms))?;
                    }
                }
            }
            "lock_delays" => {
                let result = self.client.lock_delays().await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    if let Some(want) = checks.get("rules").and_then(Value::as_array) {
                        // Only this scenario's rules: other runs may share the server.
                        let got: Vec<(String, Duration)> = result
                            .expect("checked ok")
                            .into_iter()
                            .filter(|r| r.namespace_prefix.starts_with(&ns))
                            .map(|r| (r.namespace_prefix, r.delay))
                            .collect();
                        let want = want
                            .iter()
                            .map(|w| {
                                let prefix = field(w, "namespace_prefix", "", &ns)?;
                                Ok((prefix, Duration::from_millis(millis(w, "delay_ms", 0)?)))
                            })
                            .collect::<Result<Vec<_>>>()?;
                        eq("rules", got, want)?;
                    }
                }
            }
            "operator_abort" => {
                let id = match step.get("txn_id") {
                    Some(id) => id.as_u64().context("txn_id")?,
                    None => self.txn(step)?.id(),
                };
                let result = self.client.abort_transaction(id, &field(step, "reason", "", &ns)?).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    if let Some(state) = checks.get("state").and_then(Value::as_str) {
                        eq("state", result.expect("checked ok").as_str(), state)?;
                    }
                }
            }
            "list_key" => {
                let (namespace, key) = (field(step, "namespace", "${ns}", &ns)?, field(step, "key", "", &ns)?);
                let result = self.client.list_locks(&namespace).await;
                if let Some(checks) = expect::outcome(step, &result)? {
                    let listed =
                        result.expect("checked ok").into_iter().find(|k| k.namespace == namespace && k.key == key);
                    self.check_listed(checks, listed.as_ref())?;
                }
            }
            other => bail!("unknown op {other:?}"),
        }
        Ok(())
    }

    /// The id of the scenario's transaction `name` (a holder, waiter or delay entry's `txn`).
    fn txn_id(&self, name: &Value) -> Result<u64> {
        let name = name.as_str().context("txn names a transaction")?;
        Ok(self.txns.get(name).ok_or_else(|| anyhow!("no transaction {name:?}"))?.id())
    }

    /// `list_key`'s checks on the key's ListLocks entry (`None`: the key is not listed, so it
    /// has no holders, waiters or delay).
    fn check_listed(&self, checks: &Map<String, Value>, k: Option<&KeyLocks>) -> Result<()> {
        if let Some(want) = checks.get("listed").and_then(Value::as_bool) {
            eq("listed", k.is_some(), want)?;
        }
        let (holders, waiters) = k.map_or((&[][..], &[][..]), |k| (&k.holders[..], &k.waiters[..]));
        let show = |id: u64, mode: LockMode| format!("txn {id} {mode}");
        if let Some(want) = checks.get("holders").and_then(Value::as_array) {
            let got: Vec<String> = holders.iter().map(|h| show(h.transaction_id, h.mode)).collect();
            eq("number of holders", holders.len(), want.len()).with_context(|| format!("holders {got:?}"))?;
            for (i, (w, h)) in want.iter().zip(holders).enumerate() {
                if let Some(name) = w.get("txn") {
                    eq(&format!("holders[{i}] transaction (want {name})"), h.transaction_id, self.txn_id(name)?)?;
                }
                if let Some(mode) = w.get("mode").and_then(Value::as_str) {
                    eq(&format!("holders[{i}] mode"), h.mode.as_str(), mode)?;
                }
                if let Some(t) = self.token(w.as_object().context("a holder entry is an object")?, "token")? {
                    eq(&format!("holders[{i}] fencing token"), h.fencing_token, t)?;
                }
            }
        }
        if let Some(want) = checks.get("waiters").and_then(Value::as_array) {
            let got: Vec<String> = waiters.iter().map(|w| show(w.transaction_id, w.mode)).collect();
            eq("number of waiters", waiters.len(), want.len()).with_context(|| format!("waiters {got:?}"))?;
            for (i, (w, q)) in want.iter().zip(waiters).enumerate() {
                if let Some(name) = w.get("txn") {
                    eq(&format!("waiters[{i}] transaction (want {name})"), q.transaction_id, self.txn_id(name)?)?;
                }
                if let Some(mode) = w.get("mode").and_then(Value::as_str) {
                    eq(&format!("waiters[{i}] mode"), q.mode.as_str(), mode)?;
                }
            }
        }
        match (checks.get("delay"), k.and_then(|k| k.delay.as_ref())) {
            (None, _) | (Some(Value::Null), None) => {}
            (Some(Value::Null), Some(d)) => bail!("expected no delay, got {d:?}"),
            (Some(_), None) => bail!("expected a delay, got none"),
            (Some(w), Some(d)) => {
                if d.until_ms <= 0 {
                    bail!("delayed until {} ms", d.until_ms);
                }
                if let Some(name) = w.get("txn") {
                    eq(&format!("delay transaction (want {name})"), d.transaction_id, self.txn_id(name)?)?;
                }
                if let Some(cause) = w.get("cause").and_then(Value::as_str) {
                    eq("delay cause", d.cause.map_or("none", |c| c.as_str()), cause)?;
                }
            }
        }
        Ok(())
    }

    /// The names a watch comparison uses: transactions' ids and saved tokens.
    fn names(&self) -> watch::Names<'_> {
        watch::Names {
            ns: &self.ns,
            txn_ids: self.txns.iter().map(|(name, tx)| (name.clone(), tx.id())).collect(),
            tokens: &self.tokens,
        }
    }

    fn no_cursor(checks: &Map<String, Value>) -> Result<()> {
        if checks.contains_key("save_cursor") {
            bail!("a watch cursor cannot be expressed through the core client (raw-only)");
        }
        Ok(())
    }

    fn handle(&self, step: &Value) -> Result<&Background> {
        let name = str_of(step, "handle")?;
        self.handles.get(name).ok_or_else(|| anyhow!("no background acquire {name:?}"))
    }

    /// The ok checks of an `acquire` (one grant) or `acquire_all` (every grant, `locks`).
    fn check_acquired(&mut self, step: &Value, result: Result<Acquired, caerus_core::Error>) -> Result<()> {
        let Some(checks) = expect::outcome(step, &result)? else { return Ok(()) };
        match result.expect("checked ok") {
            Acquired::One(lock) => self.check_grant(checks, &lock),
            Acquired::All(locks) => self.check_grants(checks, &locks),
        }
    }

    /// acquire_all's `locks` check against the grants in the order asked; each entry's saved
    /// token is stored before the next entry is checked.
    fn check_grants(&mut self, checks: &Map<String, Value>, locks: &[Lock]) -> Result<()> {
        let Some(want) = checks.get("locks").and_then(Value::as_array) else { return Ok(()) };
        let got: Vec<String> = locks.iter().map(|l| format!("{}:{}#{}", l.key, l.mode, l.fencing_token)).collect();
        if want.len() != locks.len() {
            bail!("locks: expected {} grants, got {got:?}", want.len());
        }
        for (i, (w, lock)) in want.iter().zip(locks).enumerate() {
            let namespace = field(w, "namespace", "${ns}", &self.ns)?;
            let key = field(w, "key", "", &self.ns)?;
            eq(&format!("locks[{i}] lock"), (lock.namespace.as_str(), lock.key.as_str()), (&namespace, &key))?;
            let entry = w.as_object().with_context(|| format!("locks[{i}] is not an object"))?;
            self.check_grant(entry, lock).with_context(|| format!("locks[{i}]"))?;
        }
        Ok(())
    }

    fn check_verify(&self, checks: &Map<String, Value>, check: &TokenCheck) -> Result<()> {
        if let Some(want) = checks.get("current").and_then(Value::as_bool) {
            eq("current", check.current, want)?;
        }
        if let Some(names) = checks.get("current_tokens").and_then(Value::as_array) {
            let mut want = names
                .iter()
                .map(|n| {
                    let n = n.as_str().context("current_tokens names saved tokens")?;
                    self.tokens.get(n).copied().ok_or_else(|| anyhow!("no saved token {n:?}"))
                })
                .collect::<Result<Vec<u64>>>()?;
            let mut got = check.current_tokens.clone();
            // Sorted, so the holders compare as a set.
            want.sort_unstable();
            got.sort_unstable();
            eq("current_tokens", got, want)?;
        }
        Ok(())
    }

    /// The grant checks (mode, tokens) on one granted lock.
    fn check_grant(&mut self, checks: &Map<String, Value>, lock: &Lock) -> Result<()> {
        if let Some(mode) = checks.get("mode").and_then(Value::as_str) {
            eq("mode", lock.mode.as_str(), mode)?;
        }
        if let Some(t) = self.token(checks, "token_equals")? {
            eq("fencing token", lock.fencing_token, t)?;
        }
        if let Some(t) = self.token(checks, "token_greater_than")? {
            if lock.fencing_token <= t {
                bail!("fencing token {} is not greater than {t}", lock.fencing_token);
            }
        }
        if let Some(name) = checks.get("save_token").and_then(Value::as_str) {
            self.tokens.insert(name.to_string(), lock.fencing_token);
        }
        Ok(())
    }

    fn check_status(&self, checks: &Map<String, Value>, s: &TransactionStatus) -> Result<()> {
        let ns = &self.ns;
        if let Some(state) = checks.get("state").and_then(Value::as_str) {
            eq("state", s.state.as_str(), state)?;
        }
        if let Some(name) = checks.get("name") {
            eq("name", s.name.clone().unwrap_or_default(), text(name, ns)?)?;
        }
        if let Some(p) = checks.get("priority").and_then(Value::as_i64) {
            eq("priority", i64::from(s.priority), p)?;
        }
        if let Some(ms) = checks.get("lease_timeout_ms").and_then(Value::as_u64) {
            eq("lease_timeout_ms", s.lease_timeout_ms, ms)?;
        }
        if let Some(want) = checks.get("end_cause").and_then(Value::as_str) {
            let got = s.end_cause.map_or("none", |c| c.as_str());
            if got != want {
                bail!("end_cause: got {got}, want {want}");
            }
        }
        if let Some(want) = checks.get("locks").and_then(Value::as_array) {
            let show = |l: &Lock| format!("{}:{}#{}", l.key, l.mode, l.fencing_token);
            let got: Vec<String> = s.locks.iter().map(show).collect();
            let mut unmatched: Vec<&Lock> = s.locks.iter().collect();
            for w in want {
                let namespace = field(w, "namespace", "${ns}", ns)?;
                let key = field(w, "key", "", ns)?;
                let mode = str_of(w, "mode")?;
                let token = match w.get("token").and_then(Value::as_str) {
                    Some(t) => Some(*self.tokens.get(t).ok_or_else(|| anyhow!("no saved token {t:?}"))?),
                    None => None,
                };
                let hit = unmatched.iter().position(|l| {
                    l.namespace == namespace
                        && l.key == key
                        && l.mode.as_str() == mode
                        && token.is_none_or(|t| t == l.fencing_token)
                });
                match hit {
                    Some(i) => {
                        unmatched.remove(i);
                    }
                    None => {
                        bail!("locks: no {key}:{mode}{} in {got:?}", token.map(|t| format!("#{t}")).unwrap_or_default())
                    }
                }
            }
            if !unmatched.is_empty() {
                bail!("locks: unexpected {:?} in {got:?}", unmatched.iter().map(|l| show(l)).collect::<Vec<_>>());
            }
        }
        if let Some(w) = checks.get("waiting") {
            match (w, &s.waiting) {
                (Value::Null, None) => {}
                (Value::Null, Some(p)) => bail!("expected no pending wait, got {}:{} at {}", p.key, p.mode, p.position),
                (_, None) => bail!("expected a pending wait, got none"),
                (w, Some(p)) => {
                    eq("waiting.namespace", p.namespace.clone(), field(w, "namespace", "${ns}", ns)?)?;
                    eq("waiting.key", p.key.clone(), field(w, "key", "", ns)?)?;
                    if let Some(mode) = w.get("mode").and_then(Value::as_str) {
                        eq("waiting.mode", p.mode.as_str(), mode)?;
                    }
                    if let Some(pos) = w.get("position").and_then(Value::as_u64) {
                        eq("waiting.position", u64::from(p.position), pos)?;
                    }
                }
            }
        }
        Ok(())
    }
}

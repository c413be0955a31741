//! A billing ledger that enforces fencing tokens.
//!
//! Workers holding the `billing-jobs/monthly-billing-job` lock post charges with the lock's
//! fencing token. The ledger remembers, per resource, the highest token it accepted and
//! rejects (409, not applied) any write carrying a lower one: a worker that was paused
//! until its lease expired cannot charge anyone after another worker took over.
//!
//! Accepted charges (and rejected attempts, for the record) are appended to JSON-lines
//! files and fsynced before the answer, and replayed at start: a restart loses nothing.
//!
//! HTTP API:
//! - `POST /charges` `{resource, customer, amount_cents, cycle, fencing_token}` → 201 with
//!   the recorded charge, 409 `{error, last_token}` for a stale token, 400 for bad input.
//! - `GET /charges?cycle=C` → `{"charges": [...]}` (every cycle without `cycle`).
//! - `GET /check` → per-cycle totals, double charges (a customer charged more than once in
//!   a cycle) and rejected writes; `"ok": true` when there is no double charge.
//! - `GET /health` → `ok`.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A charge as a worker posts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The locked resource the writer holds, e.g. `billing-jobs/monthly-billing-job`.
    pub resource: String,
    pub customer: String,
    pub amount_cents: u64,
    /// The billing cycle, e.g. `2026-11`.
    pub cycle: String,
    /// The fencing token of the writer's lock on `resource`.
    pub fencing_token: u64,
}

/// A charge the ledger accepted (or a write it rejected).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Order of acceptance (1, 2, ...), separately for charges and rejections.
    pub seq: u64,
    #[serde(flatten)]
    pub charge: ChargeRequest,
    /// Wall clock at the ledger, milliseconds since the epoch.
    pub at_ms: u64,
}

/// Why a charge was not recorded.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The token is lower than the last one accepted for the resource.
    StaleToken { last_token: u64 },
    /// The fields are unusable.
    Invalid(String),
}

struct Inner {
    charges: Vec<Record>,
    rejected: Vec<Record>,
    last_token: HashMap<String, u64>,
    charges_file: File,
    rejected_file: File,
}

/// The ledger: in memory, backed by `charges.jsonl` and `rejected.jsonl` in its directory.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<Mutex<Inner>>,
    dir: PathBuf,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Reads a JSON-lines file. A torn last line (a crash mid-write, never acknowledged) is cut
/// off, so the next append starts on a line of its own.
fn load(path: &Path) -> anyhow::Result<Vec<Record>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        eprintln!("ledger: dropping a torn last line of {}", path.display());
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(whole as u64)?;
        f.sync_all()?;
    }
    let file = &bytes[..whole];
    let mut out = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(r) => out.push(r),
            Err(e) => eprintln!("ledger: skipping unreadable line in {}: {e}", path.display()),
        }
    }
    Ok(out)
}

fn append(file: &mut File, record: &Record) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(record).expect("a record serializes");
    line.push(b'\n');
    file.write_all(&line)?;
    file.sync_data()
}

impl Ledger {
    /// Opens (or creates) the ledger in `dir`, replaying what is there.
    pub fn open(dir: impl Into<PathBuf>) -> anyhow::Result<Ledger> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        let charges = load(&dir.join("charges.jsonl"))?;
        let rejected = load(&dir.join("rejected.jsonl"))?;
        let mut last_token = HashMap::new();
        for r in &charges {
            let t = last_token.entry(r.charge.resource.clone()).or_insert(0);
            *t = (*t).max(r.charge.fencing_token);
        }
        let open = |name: &str| OpenOptions::new().create(true).append(true).open(dir.join(name));
        let inner = Inner {
            charges,
            rejected,
            last_token,
            charges_file: open("charges.jsonl")?,
            rejected_file: open("rejected.jsonl")?,
        };
        Ok(Ledger { inner: Arc::new(Mutex::new(inner)), dir })
    }

    /// The directory the ledger keeps its files in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records a charge unless its token is stale; durable (fsynced) before it returns Ok.
    pub fn charge(&self, c: ChargeRequest) -> Result<Record, Rejection> {
        if c.resource.is_empty() || c.customer.is_empty() || c.cycle.is_empty() {
            return Err(Rejection::Invalid("resource, customer and cycle must not be empty".into()));
        }
        let mut inner = self.inner.lock().unwrap();
        let last = inner.last_token.get(&c.resource).copied().unwrap_or(0);
        if c.fencing_token < last {
            let record = Record { seq: inner.rejected.len() as u64 + 1, charge: c, at_ms: now_ms() };
            if let Err(e) = append(&mut inner.rejected_file, &record) {
                eprintln!("ledger: cannot record a rejected write: {e}");
            }
            inner.rejected.push(record);
            return Err(Rejection::StaleToken { last_token: last });
        }
        let record = Record { seq: inner.charges.len() as u64 + 1, charge: c, at_ms: now_ms() };
        append(&mut inner.charges_file, &record).map_err(|e| Rejection::Invalid(format!("cannot persist: {e}")))?;
        inner.last_token.insert(record.charge.resource.clone(), record.charge.fencing_token);
        inner.charges.push(record.clone());
        Ok(record)
    }

    /// Accepted charges, of one cycle or all.
    pub fn charges(&self, cycle: Option<&str>) -> Vec<Record> {
        let inner = self.inner.lock().unwrap();
        inner.charges.iter().filter(|r| cycle.is_none_or(|c| r.charge.cycle == c)).cloned().collect()
    }

    /// The summary: totals per cycle, double charges, rejected writes.
    pub fn check(&self) -> Value {
        let inner = self.inner.lock().unwrap();
        let mut per: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        let mut cycles: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for r in &inner.charges {
            *per.entry((&r.charge.cycle, &r.charge.customer)).or_default() += 1;
            let c = cycles.entry(&r.charge.cycle).or_default();
            c.0 += 1;
            c.1 += r.charge.amount_cents;
        }
        let doubles: Vec<Value> = per
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|((cycle, customer), n)| json!({"cycle": cycle, "customer": customer, "charges": n}))
            .collect();
        let cycles: serde_json::Map<String, Value> = cycles
            .into_iter()
            .map(|(cycle, (n, total))| (cycle.to_string(), json!({"charges": n, "total_cents": total})))
            .collect();
        json!({
            "ok": doubles.is_empty(),
            "charges": inner.charges.len(),
            "cycles": cycles,
            "double_charges": doubles,
            "rejected_writes": inner.rejected.len(),
            "rejected": inner.rejected,
            "last_tokens": inner.last_token,
        })
    }
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn post_charge(State(ledger): State<Ledger>, body: Bytes) -> Response {
    let request: ChargeRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return json_response(StatusCode::BAD_REQUEST, json!({"error": format!("bad charge: {e}")})),
    };
    let who = format!("{}/{} token {}", request.cycle, request.customer, request.fencing_token);
    match tokio::task::spawn_blocking(move || ledger.charge(request)).await.expect("charge task") {
        Ok(record) => {
            println!("ledger: accepted charge #{} {who}", record.seq);
            json_response(StatusCode::CREATED, serde_json::to_value(record).unwrap())
        }
        Err(Rejection::StaleToken { last_token }) => {
            println!("ledger: REJECTED {who}: stale fencing token (last accepted {last_token})");
            json_response(
                StatusCode::CONFLICT,
                json!({"error": "stale fencing token: a newer lock holder has written", "last_token": last_token}),
            )
        }
        Err(Rejection::Invalid(m)) => json_response(StatusCode::BAD_REQUEST, json!({"error": m})),
    }
}

/// The value of `name` in a query string (no percent-decoding beyond `+`; cycles are plain).
fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v.replace('+', " "))
}

async fn get_charges(State(ledger): State<Ledger>, RawQuery(query): RawQuery) -> Response {
    let cycle = query_param(query.as_deref(), "cycle");
    json_response(StatusCode::OK, json!({"charges": ledger.charges(cycle.as_deref())}))
}

async fn get_check(State(ledger): State<Ledger>) -> Response {
    json_response(StatusCode::OK, ledger.check())
}

/// The HTTP routes over a ledger.
pub fn router(ledger: Ledger) -> Router {
    Router::new()
        .route("/charges", post(post_charge).get(get_charges))
        .route("/check", get(get_check))
        .route("/health", get(|| async { "ok" }))
        .with_state(ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(customer: &str, cycle: &str, token: u64) -> ChargeRequest {
        ChargeRequest {
            resource: "billing-jobs/monthly-billing-job".into(),
            customer: customer.into(),
            amount_cents: 1500,
            cycle: cycle.into(),
            fencing_token: token,
        }
    }

    #[test]
    fn a_lower_token_is_rejected_and_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        ledger.charge(charge("acme", "2026-11", 5)).unwrap();
        ledger.charge(charge("globex", "2026-11", 5)).unwrap(); // same holder, same token
        ledger.charge(charge("initech", "2026-11", 9)).unwrap(); // a newer holder
        assert_eq!(ledger.charge(charge("umbrella", "2026-11", 5)), Err(Rejection::StaleToken { last_token: 9 }));
        assert_eq!(ledger.charges(Some("2026-11")).len(), 3);
        assert_eq!(ledger.charges(Some("2026-12")).len(), 0);
        // Another resource has its own token order.
        let mut other = charge("acme", "x", 1);
        other.resource = "other/lock".into();
        ledger.charge(other).unwrap();
        let check = ledger.check();
        assert_eq!(check["ok"], true);
        assert_eq!(check["rejected_writes"], 1);
        assert_eq!(check["cycles"]["2026-11"]["charges"], 3);
        assert_eq!(check["cycles"]["2026-11"]["total_cents"], 4500);
        assert!(matches!(ledger.charge(charge("", "c", 10)), Err(Rejection::Invalid(_))));
    }

    #[test]
    fn double_charges_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        ledger.charge(charge("acme", "2026-11", 1)).unwrap();
        ledger.charge(charge("acme", "2026-11", 2)).unwrap();
        ledger.charge(charge("acme", "2026-12", 3)).unwrap();
        let check = ledger.check();
        assert_eq!(check["ok"], false);
        assert_eq!(check["double_charges"], json!([{"cycle": "2026-11", "customer": "acme", "charges": 2}]));
    }

    #[test]
    fn a_restart_loses_nothing_and_keeps_the_token_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let ledger = Ledger::open(dir.path()).unwrap();
            ledger.charge(charge("acme", "2026-11", 7)).unwrap();
            ledger.charge(charge("globex", "2026-11", 8)).unwrap();
            assert!(ledger.charge(charge("initech", "2026-11", 3)).is_err());
        }
        // A torn last line (crash mid-append) is skipped.
        let mut f = OpenOptions::new().append(true).open(dir.path().join("charges.jsonl")).unwrap();
        f.write_all(b"{\"seq\":3,\"resou").unwrap();
        for _ in 0..2 {
            let ledger = Ledger::open(dir.path()).unwrap();
            ledger.charge(charge("hooli", "2026-10", 8)).unwrap();
        }
        let ledger = Ledger::open(dir.path()).unwrap();
        assert_eq!(ledger.charges(Some("2026-10")).len(), 2, "appends after a torn line survive");
        let all = ledger.charges(None);
        assert_eq!(
            all.iter().map(|r| r.charge.customer.as_str()).collect::<Vec<_>>(),
            vec!["acme", "globex", "hooli", "hooli"]
        );
        assert_eq!(ledger.check()["rejected_writes"], 1);
        assert_eq!(ledger.charge(charge("initech", "2026-11", 7)), Err(Rejection::StaleToken { last_token: 8 }));
        ledger.charge(charge("initech", "2026-11", 8)).unwrap();
    }

    #[test]
    fn query_params() {
        assert_eq!(query_param(Some("cycle=2026-11&x=1"), "cycle").as_deref(), Some("2026-11"));
        assert_eq!(query_param(Some("x=1"), "cycle"), None);
        assert_eq!(query_param(None, "cycle"), None);
    }
}

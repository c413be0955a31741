//! Monthly billing worker (Rust).
//!
//! Takes `billing-jobs/monthly-billing-job` exclusively, asks the ledger which customers of
//! the cycle are already charged, charges the others with the lock's fencing token, and
//! commits. Run as many copies as you like: the lock makes them take turns, the ledger
//! check makes later turns skip a billed cycle, and the fencing token makes the ledger
//! reject a worker that lost its lock without noticing (paused, partitioned).
//!
//! Settings (environment): `CYCLE` (required, e.g. `2026-11`), `LEDGER_URL`
//! (default `http://127.0.0.1:8080`), `DLS_ENDPOINTS` / `CAERUS_API_KEY` (read by the
//! client), `WORKER_NAME`, `LEASE_MS` (default 15000), `LOCK_WAIT_MS` (default 60000),
//! `CHARGE_DELAY_MS` (a pause before each charge, to watch it happen; default 0).
//!
//! Exit codes: 0 billed or already billed; 3 fenced off (the ledger answered 409: another
//! worker took over); 75 the lock was busy for LOCK_WAIT_MS; 1 anything else.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{bail, Context};
use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, TransactionOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMESPACE: &str = "billing-jobs";
const KEY: &str = "monthly-billing-job";
const RESOURCE: &str = "billing-jobs/monthly-billing-job";

/// The subscriptions billed every cycle: customer and monthly price in cents.
const SUBSCRIPTIONS: &[(&str, u64)] =
    &[("acme", 4900), ("globex", 2900), ("initech", 9900), ("umbrella", 1900), ("hooli", 4900), ("stark", 14900)];

const EXIT_FENCED: i32 = 3;
const EXIT_BUSY: i32 = 75;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
}

fn env_ms(name: &str, default: u64) -> anyhow::Result<u64> {
    env_or(name, &default.to_string()).parse().with_context(|| format!("{name} must be a number of milliseconds"))
}

/// A minimal HTTP/1.1 client for the ledger (one request per connection): status and JSON.
async fn http(base: &str, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<(u16, Value)> {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(host).await.with_context(|| format!("ledger at {base}"))?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut raw))
        .await
        .context("ledger timeout")??;
    let (head, body) = raw.split_once("\r\n\r\n").context("malformed HTTP answer")?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).context("no HTTP status")?;
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

async fn run() -> anyhow::Result<i32> {
    let cycle = std::env::var("CYCLE").context("set CYCLE, e.g. CYCLE=2026-11")?;
    let ledger = env_or("LEDGER_URL", "http://127.0.0.1:8080");
    let name = env_or("WORKER_NAME", &format!("rust-{}", std::process::id()));
    let lease_ms = env_ms("LEASE_MS", 15_000)?;
    let wait_ms = env_ms("LOCK_WAIT_MS", 60_000)?;
    let delay = Duration::from_millis(env_ms("CHARGE_DELAY_MS", 0)?);
    let say = |msg: String| println!("[{name}] cycle {cycle}: {msg}");

    let client = DlsClient::connect(ClientConfig::from_env()).await?;
    let tx = client
        .begin_transaction(TransactionOptions::new().with_timeout_ms(lease_ms).with_name(format!("{name} {cycle}")))
        .await?;
    say(format!("waiting for {RESOURCE} (transaction {})", tx.id()));
    let lock = match tx
        .acquire_lock(NAMESPACE, KEY, LockMode::Exclusive, AcquireOptions::new().with_timeout_ms(wait_ms))
        .await
    {
        Ok(lock) => lock,
        Err(Error::LockTimeout { .. }) => {
            say(format!("lock still busy after {wait_ms} ms; giving up"));
            tx.abort().await?;
            return Ok(EXIT_BUSY);
        }
        Err(e) => return Err(e.into()),
    };
    let token = lock.fencing_token;
    say(format!("lock acquired, fencing token {token}"));

    // Which subscriptions of this cycle are already charged (by an earlier holder)?
    let (status, listing) = http(&ledger, "GET", &format!("/charges?cycle={cycle}"), None).await?;
    if status != 200 {
        bail!("ledger answered {status} to the listing: {listing}");
    }
    let charged: HashSet<String> = listing["charges"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["customer"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let todo: Vec<_> = SUBSCRIPTIONS.iter().filter(|(c, _)| !charged.contains(*c)).collect();
    if todo.is_empty() {
        say("already billed; skipping".into());
        tx.commit().await?;
        return Ok(0);
    }
    if !charged.is_empty() {
        say(format!("{} of {} already charged by an earlier holder; resuming", charged.len(), SUBSCRIPTIONS.len()));
    }

    for (customer, amount_cents) in todo {
        tokio::time::sleep(delay).await;
        // No client-side "is my lock still mine?" check before writing: it could pass and
        // the process be paused right after. The ledger's fencing check is what protects.
        let charge = json!({"resource": RESOURCE, "customer": customer, "amount_cents": amount_cents,
                            "cycle": cycle, "fencing_token": token});
        let (status, answer) = http(&ledger, "POST", "/charges", Some(&charge)).await?;
        match status {
            201 => say(format!("charged {customer} {amount_cents} cents (token {token})")),
            409 => {
                say(format!(
                    "ledger REJECTED the charge of {customer} with 409: token {token} is stale (last accepted {}); \
                     another worker took over, stopping",
                    answer["last_token"]
                ));
                tx.abort().await?;
                return Ok(EXIT_FENCED);
            }
            _ => bail!("ledger answered {status} to a charge: {answer}"),
        }
    }
    tx.commit().await?;
    say("billed; committed".into());
    Ok(0)
}

#[tokio::main]
async fn main() {
    let code = match run().await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("billing-worker-rust: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

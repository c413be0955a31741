//! Webhooks: the leader POSTs events of the replicated event log to HTTP endpoints.
//!
//! Each webhook keeps a cursor (the last event its endpoint acknowledged) in the
//! replicated state through `Command::WebhookDelivered`, so a new leader resumes where the
//! old one stopped. Delivery is at least once: the cursor is recorded in batches after the
//! endpoint answered, so a failover can resend the last few events; receivers dedupe by
//! event id. Within one webhook events go out in order, one at a time, and a failing
//! endpoint is retried with backoff until it accepts (it holds up only its own webhook).
//! The format is documented in docs/webhooks.md.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http::Uri;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::task::{JoinHandle, JoinSet};

use crate::api::convert;
use crate::locks::events::CursorExpired;
use crate::locks::{Command, CycleMember, Event, EventDetail, EventKind, Held, LockKey, LockMode, VictimPolicy};
use crate::node::Node;

/// Events read from the table per lock of the state.
const READ_BATCH: usize = 50;
/// The cursor is recorded through raft after this many events ...
const RECORD_EVERY_EVENTS: u64 = 50;
/// ... or this long after the last record, whichever comes first, and when the backlog
/// is drained: few raft writes under load, a short resend window after a failover.
const RECORD_EVERY: Duration = Duration::from_millis(100);
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// One POST, connecting included; a hung endpoint counts as a failure and is retried.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Retry of an unrecorded cursor while no new events arrive.
const RECORD_RETRY: Duration = Duration::from_secs(1);

/// One `[[webhooks]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Identifies the webhook's cursor in the replicated state: renaming one restarts it
    /// from the oldest retained event.
    pub name: String,
    pub url: String,
    pub secret: String,
    /// Only these kinds (empty or absent = all).
    #[serde(default)]
    pub kinds: BTreeSet<EventKind>,
    /// Only events touching a namespace with one of these prefixes (empty or absent = all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(skip)]
    uri: Option<Uri>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhooksFile {
    #[serde(default)]
    webhooks: Vec<Webhook>,
}

impl Webhook {
    /// Whether this webhook wants `e` (same rules as WatchEvents' filters).
    pub fn wants(&self, e: &Event) -> bool {
        e.matches(&self.kinds, &self.namespaces)
    }

    fn validate(&mut self) -> Result<(), String> {
        let valid_name = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(valid_name) {
            return Err(format!("name {:?} must be 1-64 characters of letters, digits, '-', '_' or '.'", self.name));
        }
        let uri: Uri = self.url.parse().map_err(|e| format!("url {:?} is not a URL: {e}", self.url))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(format!("url {:?} must be an http:// or https:// URL with a host", self.url));
        }
        if self.secret.is_empty() {
            return Err("secret is empty; set a random string the receiver also knows (it signs every request)".into());
        }
        self.uri = Some(uri);
        Ok(())
    }
}

/// Reads and validates a webhooks file.
pub fn load(path: &Path) -> anyhow::Result<Vec<Webhook>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read webhooks file {} (--webhooks-file): {e}", path.display()))?;
    parse(&text).map_err(|e| anyhow::anyhow!("webhooks file {}: {e}", path.display()))
}

/// Parses the TOML of a webhooks file; errors name the entry and what to fix.
pub fn parse(text: &str) -> Result<Vec<Webhook>, String> {
    let file: WebhooksFile = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut names = BTreeSet::new();
    let mut hooks = file.webhooks;
    for (i, hook) in hooks.iter_mut().enumerate() {
        hook.validate().map_err(|e| format!("[[webhooks]] entry {} ({:?}): {e}", i + 1, hook.name))?;
        if !names.insert(hook.name.clone()) {
            return Err(format!("two [[webhooks]] entries are named {:?}; names must be unique", hook.name));
        }
    }
    Ok(hooks)
}

// ---- payload ----

/// Modes and policies use the proto's names, so payloads and the gRPC API agree.
fn mode_name(m: LockMode) -> &'static str {
    convert::mode_wire(m).as_str_name()
}

fn policy_name(p: VictimPolicy) -> &'static str {
    convert::policy_wire(p).as_str_name()
}

fn cycle_member(m: &CycleMember) -> Value {
    json!({
        "transaction_id": m.txn,
        "transaction_name": m.name,
        "priority": m.priority,
        "namespace": m.lock.namespace,
        "key": m.lock.key,
        "mode": mode_name(m.mode),
    })
}

fn released_locks(released: &[(LockKey, Held)]) -> Value {
    released
        .iter()
        .map(|(lock, held)| {
            json!({
                "namespace": lock.namespace,
                "key": lock.key,
                "mode": mode_name(held.mode),
                "fencing_token": held.token.0,
            })
        })
        .collect()
}

/// The event's own fields, named like the gRPC Event messages.
fn event_data(detail: &EventDetail) -> Value {
    match detail {
        EventDetail::DeadlockResolved { cycle, victim, policy } => json!({
            "cycle": cycle.iter().map(cycle_member).collect::<Vec<_>>(),
            "victim_transaction_id": victim,
            "policy": policy_name(*policy),
        }),
        EventDetail::TransactionExpired { txn, name, released } => json!({
            "transaction_id": txn,
            "transaction_name": name,
            "released_locks": released_locks(released),
        }),
        EventDetail::TransactionAborted { txn, name, reason, operator, released } => json!({
            "transaction_id": txn,
            "transaction_name": name,
            "reason": reason,
            "operator": operator,
            "released_locks": released_locks(released),
        }),
        EventDetail::LockRevoked { txn, lock, held, cause } => json!({
            "transaction_id": txn,
            "namespace": lock.namespace,
            "key": lock.key,
            "mode": mode_name(held.mode),
            "fencing_token": held.token.0,
            "cause": cause,
        }),
    }
}

/// The JSON body of one delivery. `id` is a string so receivers in languages without
/// 64-bit integers can dedupe on it exactly.
pub fn payload(e: &Event) -> Value {
    json!({
        "id": e.seq.to_string(),
        "sequence": e.seq,
        "type": e.kind().name(),
        "time_ms": e.at_ms,
        "namespaces": e.namespaces(),
        "data": event_data(&e.detail),
    })
}

/// `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`: the timestamp is signed too
/// so a receiver can refuse replays of old requests.
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

// ---- sending ----

/// hyper-util's client with rustls rather than reqwest: hyper and hyper-util are already
/// compiled for tonic, and one POST with a few headers needs none of reqwest's extras.
type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

fn http_client() -> HttpClient {
    let connector =
        hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
    Client::builder(TokioExecutor::new()).build(connector)
}

fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// One attempt to deliver `e`; Ok when the endpoint answered 2xx.
async fn post(client: &HttpClient, hook: &Webhook, e: &Event) -> Result<(), String> {
    let body = serde_json::to_vec(&payload(e)).map_err(|err| format!("cannot encode event {}: {err}", e.seq))?;
    let timestamp = unix_seconds();
    let request = http::Request::post(hook.uri.clone().expect("validated at load"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, concat!("caerus-dls/", env!("CARGO_PKG_VERSION")))
        .header("X-Caerus-Event-Id", e.seq)
        .header("X-Caerus-Timestamp", timestamp)
        .header("X-Caerus-Signature", signature(&hook.secret, timestamp, &body))
        .body(Full::new(Bytes::from(body)))
        .map_err(|err| format!("cannot build the request: {err}"))?;
    match tokio::time::timeout(REQUEST_TIMEOUT, client.request(request)).await {
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
        Ok(Err(err)) => Err(format!("request failed: {err}")),
        Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
        Ok(Ok(resp)) => Err(format!("answered {}", resp.status())),
    }
}

/// Sleep before retry number `attempt` (1-based): doubling from 100 ms to 30 s, with
/// jitter so many nodes' retries against one recovering endpoint spread out.
fn retry_delay(attempt: u32) -> Duration {
    let base = FIRST_RETRY.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(MAX_RETRY);
    rand::thread_rng().gen_range(base / 2..=base)
}

// ---- dispatching ----

/// Delivers webhooks while this node leads.
pub struct Dispatcher {
    task: JoinHandle<()>,
}

impl Dispatcher {
    /// Starts delivery; with no webhooks there is nothing to run.
    pub fn start(node: Arc<Node>, hooks: Vec<Webhook>) -> Option<Dispatcher> {
        if hooks.is_empty() {
            return None;
        }
        let task = tokio::spawn(supervise(node, Arc::new(hooks), http_client()));
        Some(Dispatcher { task })
    }

    /// Stops delivery; an event being sent may be sent again by the next leader.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Runs one courier per webhook during each spell of leadership.
async fn supervise(node: Arc<Node>, hooks: Arc<Vec<Webhook>>, client: HttpClient) {
    let mut leadership = node.leadership();
    loop {
        if leadership.wait_for(|leading| *leading).await.is_err() {
            return;
        }
        tracing::info!(webhooks = hooks.len(), "leader: delivering webhooks");
        let mut couriers = JoinSet::new();
        for i in 0..hooks.len() {
            let courier = Courier::new(node.clone(), hooks.clone(), i, client.clone());
            couriers.spawn(courier.run());
        }
        let gone = leadership.wait_for(|leading| !*leading).await.is_err();
        couriers.shutdown().await;
        if gone {
            return;
        }
        tracing::info!("not leader any more: webhook delivery stopped (the new leader resumes it)");
    }
}

/// Delivers one webhook's events in order.
struct Courier {
    node: Arc<Node>,
    hooks: Arc<Vec<Webhook>>,
    index: usize,
    client: HttpClient,
    /// Last event delivered or skipped.
    done: u64,
    /// Last event recorded through raft, and when.
    recorded: u64,
    recorded_at: Instant,
}

impl Courier {
    fn new(node: Arc<Node>, hooks: Arc<Vec<Webhook>>, index: usize, client: HttpClient) -> Courier {
        Courier { node, hooks, index, client, done: 0, recorded: 0, recorded_at: Instant::now() }
    }

    fn hook(&self) -> &Webhook {
        &self.hooks[self.index]
    }

    async fn run(mut self) {
        self.done = self.resume_point().await;
        self.recorded = self.done;
        tracing::info!(webhook = %self.hook().name, after = self.done, "webhook delivery resumes");
        let mut appended = self.node.events.clone();
        loop {
            // Marked seen before reading, so an append right after the read still wakes us.
            appended.borrow_and_update();
            let batch = {
                let st = self.node.state.read().expect("state lock");
                st.table.events().since(self.done + 1, READ_BATCH)
            };
            match batch {
                Err(CursorExpired { oldest }) => self.fell_behind(oldest),
                Ok(events) if events.is_empty() => {
                    self.record().await;
                    let retry = self.recorded < self.done;
                    tokio::select! {
                        changed = appended.changed() => if changed.is_err() { return },
                        _ = tokio::time::sleep(RECORD_RETRY), if retry => {}
                    }
                }
                Ok(events) => {
                    for e in events {
                        self.handle(&e).await;
                    }
                }
            }
        }
    }

    /// The replicated cursor, read after a linearizable read so it includes everything
    /// the previous leader recorded (an older value would only mean resending).
    async fn resume_point(&self) -> u64 {
        let mut attempt = 0;
        while let Err(e) = self.node.linearizable_read().await {
            attempt += 1;
            tracing::debug!(webhook = %self.hook().name, "cannot confirm leadership yet, retrying: {e}");
            tokio::time::sleep(retry_delay(attempt.min(4))).await;
        }
        self.node.state.read().expect("state lock").table.webhook_cursor(&self.hook().name)
    }

    fn fell_behind(&mut self, oldest: u64) {
        let lost = oldest - 1 - self.done;
        tracing::warn!(
            webhook = %self.hook().name,
            lost,
            resumed_at = oldest,
            "webhook fell behind the retained event log; {lost} events were dropped before delivery"
        );
        self.node.metrics.webhook(&self.hook().name, |s| {
            s.cursor_expired += 1;
            s.lost += lost;
        });
        self.done = oldest - 1;
    }

    async fn handle(&mut self, e: &Event) {
        if self.hook().wants(e) {
            self.deliver(e).await;
            self.node.metrics.webhook(&self.hook().name, |s| s.delivered += 1);
        } else {
            self.node.metrics.webhook(&self.hook().name, |s| s.skipped += 1);
        }
        self.done = e.seq;
        self.node.metrics.webhook(&self.hook().name, |s| s.last_sequence = e.seq);
        let due = self.done - self.recorded >= RECORD_EVERY_EVENTS || self.recorded_at.elapsed() >= RECORD_EVERY;
        if due {
            self.record().await;
        }
    }

    /// Sends `e` until the endpoint accepts it.
    async fn deliver(&mut self, e: &Event) {
        let name = self.hook().name.clone();
        let mut failures = 0;
        while let Err(why) = post(&self.client, self.hook(), e).await {
            failures += 1;
            let delay = retry_delay(failures);
            tracing::warn!(webhook = %name, event = e.seq, failures, "webhook delivery failed ({why}); retrying in {delay:?}");
            self.node.metrics.webhook(&name, |s| s.failed += 1);
            // What was delivered before the stuck event should survive a failover.
            self.record().await;
            tokio::time::sleep(delay).await;
        }
        if failures > 0 {
            tracing::info!(webhook = %name, event = e.seq, failures, "webhook delivered after retries");
        } else {
            tracing::debug!(webhook = %name, event = e.seq, "webhook delivered");
        }
    }

    /// Records progress through raft; a failure is retried with the next record.
    async fn record(&mut self) {
        if self.done <= self.recorded {
            return;
        }
        let cmd = Command::WebhookDelivered { webhook: self.hook().name.clone(), sequence: self.done };
        match self.node.propose(cmd).await {
            Ok(_) => {
                self.recorded = self.done;
                self.recorded_at = Instant::now();
            }
            Err(e) => tracing::warn!(webhook = %self.hook().name, "webhook cursor not recorded, will retry: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::FencingToken;

    fn held(token: u64) -> Held {
        Held { mode: LockMode::Exclusive, token: FencingToken(token), since_ms: 5 }
    }

    fn event(seq: u64, detail: EventDetail) -> Event {
        Event { seq, at_ms: 1_700_000_000_123, detail }
    }

    fn hook(extra: &str) -> Webhook {
        let text = format!("[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:9/hook\"\nsecret = \"s\"\n{extra}");
        parse(&text).unwrap().remove(0)
    }

    fn revoked(ns: &str) -> Event {
        event(
            3,
            EventDetail::LockRevoked {
                txn: 7,
                lock: LockKey::new(ns, "k"),
                held: held(42),
                cause: "lease expired".into(),
            },
        )
    }

    #[test]
    fn a_valid_file_parses_with_optional_filters() {
        let hooks = parse(
            r#"
            [[webhooks]]
            name = "ops"
            url = "https://hooks.example.com/dls"
            secret = "s3cret"
            kinds = ["deadlock_resolved", "lock_revoked"]
            namespaces = ["billing-"]

            [[webhooks]]
            name = "audit"
            url = "http://127.0.0.1:8080/"
            secret = "x"
            "#,
        )
        .unwrap();
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].kinds, BTreeSet::from([EventKind::DeadlockResolved, EventKind::LockRevoked]));
        assert!(hooks[1].kinds.is_empty() && hooks[1].namespaces.is_empty());
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn mistakes_in_the_file_are_named() {
        let entry = |name: &str, url: &str, secret: &str| {
            format!("[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret = \"{secret}\"\n")
        };
        let err = |text: String| parse(&text).unwrap_err();
        assert!(err(entry("a", "http://h/", "") + "").contains("secret is empty"));
        assert!(err(entry("a", "ftp://h/", "s")).contains("must be an http:// or https:// URL"));
        assert!(err(entry("a", "not a url", "s")).contains("is not a URL"));
        assert!(err(entry("", "http://h/", "s")).contains("name \"\" must be"));
        assert!(err(entry("a b", "http://h/", "s")).contains("must be 1-64 characters"));
        assert!(err(entry("a", "http://h/", "s") + &entry("a", "http://g/", "t"))
            .contains("named \"a\"; names must be unique"));
        assert!(err(entry("a", "http://h/", "s") + "kinds = [\"lock_stolen\"]").contains("lock_stolen"));
        assert!(err(entry("a", "http://h/", "s") + "kind = [\"lock_revoked\"]").contains("unknown field `kind`"));
    }

    #[test]
    fn filters_match_kinds_and_namespace_prefixes() {
        assert!(hook("").wants(&revoked("billing-eu")));
        assert!(hook("kinds = [\"lock_revoked\"]").wants(&revoked("x")));
        assert!(!hook("kinds = [\"deadlock_resolved\"]").wants(&revoked("x")));
        assert!(hook("namespaces = [\"reports\", \"billing-\"]").wants(&revoked("billing-eu")));
        assert!(!hook("namespaces = [\"billing-\"]").wants(&revoked("reports")));
    }

    #[test]
    fn payloads_carry_the_event_fields_in_snake_case() {
        let member = |txn, key: &str| CycleMember {
            txn,
            name: format!("t{txn}"),
            priority: 1,
            lock: LockKey::new("ns", key),
            mode: LockMode::SharedRead,
        };
        let deadlock = event(
            9,
            EventDetail::DeadlockResolved {
                cycle: vec![member(1, "k2"), member(2, "k1")],
                victim: 2,
                policy: VictimPolicy::Youngest,
            },
        );
        assert_eq!(
            payload(&deadlock),
            json!({
                "id": "9", "sequence": 9, "type": "deadlock_resolved", "time_ms": 1_700_000_000_123u64,
                "namespaces": ["ns"],
                "data": {
                    "cycle": [
                        {"transaction_id": 1, "transaction_name": "t1", "priority": 1, "namespace": "ns", "key": "k2", "mode": "SHARED_READ"},
                        {"transaction_id": 2, "transaction_name": "t2", "priority": 1, "namespace": "ns", "key": "k1", "mode": "SHARED_READ"},
                    ],
                    "victim_transaction_id": 2,
                    "policy": "YOUNGEST",
                },
            })
        );
        let aborted = event(
            4,
            EventDetail::TransactionAborted {
                txn: 7,
                name: "job".into(),
                reason: "stuck".into(),
                operator: "alice".into(),
                released: vec![(LockKey::new("b", "k"), held(42))],
            },
        );
        let p = payload(&aborted);
        assert_eq!(p["type"], "transaction_aborted");
        assert_eq!(
            p["data"],
            json!({"transaction_id": 7, "transaction_name": "job", "reason": "stuck", "operator": "alice",
                   "released_locks": [{"namespace": "b", "key": "k", "mode": "EXCLUSIVE", "fencing_token": 42}]})
        );
        let p = payload(&revoked("ns"));
        assert_eq!(p["type"], "lock_revoked");
        assert_eq!(p["data"]["fencing_token"], 42);
        assert_eq!(p["data"]["cause"], "lease expired");
        let expired = event(5, EventDetail::TransactionExpired { txn: 8, name: "n".into(), released: vec![] });
        assert_eq!(payload(&expired)["type"], "transaction_expired");
        assert_eq!(payload(&expired)["namespaces"], json!([]));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // Computed independently with Python's hmac module.
        assert_eq!(
            signature("topsecret", 1_700_000_000, br#"{"id":"1"}"#),
            "sha256=5ae2fe9589b5395efc54aa255a5cd86f4f6884285427ae96ebfc427963e60e81"
        );
    }

    /// The receiver-side check from docs/webhooks.md, kept here so the snippet stays right.
    fn doc_verify(secret: &str, timestamp: &str, signature: &str, body: &[u8], now_unix: u64) -> bool {
        let fresh = timestamp.parse::<u64>().is_ok_and(|t| t.abs_diff(now_unix) <= 300);
        let Some(hex_sig) = signature.strip_prefix("sha256=") else { return false };
        let Ok(expected) = hex::decode(hex_sig) else { return false };
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        fresh && mac.verify_slice(&expected).is_ok()
    }

    #[test]
    fn the_documented_receiver_check_accepts_our_signatures_only() {
        let body = serde_json::to_vec(&payload(&revoked("ns"))).unwrap();
        let sig = signature("k", 1_700_000_000, &body);
        assert!(doc_verify("k", "1700000000", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("other", "1700000000", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("k", "1700000001", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("k", "1700000000", &sig, &body, 1_700_001_000));
    }

    #[test]
    fn retries_back_off_from_100ms_to_30s_with_jitter() {
        for _ in 0..20 {
            let first = retry_delay(1);
            assert!(first >= Duration::from_millis(50) && first <= FIRST_RETRY);
            let later = retry_delay(5);
            assert!(later >= Duration::from_millis(800) && later <= Duration::from_millis(1600));
            let capped = retry_delay(40);
            assert!(capped >= MAX_RETRY / 2 && capped <= MAX_RETRY);
        }
    }
}

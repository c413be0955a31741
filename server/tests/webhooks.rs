//! Webhooks from real `dls` nodes to a receiver running inside the test.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::AbortTransactionRequest;
use common::{eventually, http_get, Cluster};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tonic::transport::Channel;

const SECRET: &str = "test-secret-123";

/// One request the receiver got.
#[derive(Clone)]
struct Delivery {
    headers: HeaderMap,
    body: Bytes,
    json: Value,
}

impl Delivery {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).unwrap_or_else(|| panic!("no {name} header")).to_str().unwrap()
    }
}

/// An HTTP endpoint that records every POST; the first `fail_first` get a 503.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Delivery>>>,
    fail_first: Arc<AtomicUsize>,
}

impl Receiver {
    async fn start(fail_first: usize) -> (Receiver, String) {
        let r = Receiver { fail_first: Arc::new(AtomicUsize::new(fail_first)), ..Receiver::default() };
        let app = Router::new().route("/hook", post(receive)).with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, url)
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap().clone()
    }

    fn sequences(&self) -> BTreeSet<u64> {
        self.deliveries().iter().map(|d| d.json["sequence"].as_str().unwrap().parse::<u64>().unwrap()).collect()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if r.fail_first.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let json = serde_json::from_slice(&body).expect("the body is JSON");
    r.got.lock().unwrap().push(Delivery { headers, body, json });
    StatusCode::NO_CONTENT
}

/// Writes a webhooks file with one entry and returns its path.
fn webhooks_file(dir: &tempfile::TempDir, url: &str, filters: &str) -> PathBuf {
    let path = dir.path().join("webhooks.toml");
    let text = format!("[[webhooks]]\nname = \"ops\"\nurl = \"{url}\"\nsecret = \"{SECRET}\"\n{filters}\n");
    std::fs::write(&path, text).unwrap();
    path
}

/// Checks the headers and the signature as a receiver should.
fn verify(d: &Delivery) {
    assert_eq!(d.header("content-type"), "application/json");
    assert_eq!(d.header("x-caerus-event-id"), d.json["sequence"].as_str().unwrap());
    let timestamp = d.header("x-caerus-timestamp");
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(&d.body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(d.header("x-caerus-signature"), expected, "signature does not verify");
}

async fn client(endpoints: Vec<String>) -> DlsClient {
    let cfg = ClientConfig::new(endpoints).without_api_key().with_retry_deadline(Duration::from_secs(20));
    DlsClient::connect(cfg).await.unwrap()
}

fn opts(name: &str) -> TransactionOptions {
    TransactionOptions::default().with_timeout_ms(60_000).with_name(name)
}

fn wait() -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(20_000)
}

#[tokio::test]
async fn a_deadlock_is_reported_by_a_signed_webhook_and_the_survivor_gets_its_lock() {
    let (receiver, url) = Receiver::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let file = webhooks_file(&dir, &url, "kinds = [\"deadlock_resolved\"]\nnamespaces = [\"dl-\"]");
    let cluster = Cluster::start_with(1, &["--webhooks-file", file.to_str().unwrap()]).await;
    let c = client(cluster.endpoints()).await;

    let a = c.begin_transaction(opts("A")).await.unwrap();
    let b = c.begin_transaction(opts("B")).await.unwrap();
    a.acquire_lock("dl-ns", "k1", LockMode::Exclusive, wait()).await.unwrap();
    b.acquire_lock("dl-ns", "k2", LockMode::Exclusive, wait()).await.unwrap();
    let (a_id, b_id) = (a.id(), b.id());
    let a = Arc::new(a);
    let a_waits = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire_lock("dl-ns", "k2", LockMode::Exclusive, wait()).await })
    };
    let http = cluster.http_addr(1);
    eventually(Duration::from_secs(10), "A to queue for k2", || {
        let (_, text) = http_get(&http, "/metrics").ok()?;
        text.lines().any(|l| l == "dls_waiting_requests 1").then_some(())
    })
    .await;

    let err = b.acquire_lock("dl-ns", "k1", LockMode::Exclusive, wait()).await.unwrap_err();
    assert_eq!(err.code(), "DEADLOCK_VICTIM", "{err}");
    let survivor = a_waits.await.unwrap().expect("the survivor gets k2");
    assert!(a.status().await.unwrap().locks.contains(&survivor));

    let d = eventually(Duration::from_secs(20), "the deadlock webhook", || receiver.deliveries().pop()).await;
    verify(&d);
    let j = &d.json;
    assert_eq!(j["kind"], "DEADLOCK_RESOLVED");
    assert_eq!(j["namespaces"], serde_json::json!(["dl-ns"]));
    assert_eq!(j["detail"]["victim_transaction_id"], b_id.to_string());
    assert_eq!(j["detail"]["policy"], "LOWEST_PRIORITY_THEN_YOUNGEST");
    let cycle: BTreeSet<(u64, String, String, String)> = j["detail"]["cycle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |f: &str| m[f].as_str().unwrap().to_string();
            (s("transaction_id").parse().unwrap(), s("transaction_name"), s("key"), s("mode"))
        })
        .collect();
    let expected = BTreeSet::from([
        (a_id, "A".to_string(), "k2".to_string(), "EXCLUSIVE".to_string()),
        (b_id, "B".to_string(), "k1".to_string(), "EXCLUSIVE".to_string()),
    ]);
    assert_eq!(cycle, expected);

    // The victim's revoked lock (event 2) is left out by the kinds filter, yet passed.
    eventually(Duration::from_secs(10), "the webhook to pass event 2", || {
        let (_, text) = http_get(&http, "/metrics").ok()?;
        text.lines().any(|l| l == "dls_webhook_last_sequence{webhook=\"ops\"} 2").then_some(())
    })
    .await;
    let (_, text) = http_get(&http, "/metrics").unwrap();
    assert!(text.lines().any(|l| l == "dls_webhook_skipped_total{webhook=\"ops\"} 1"), "{text}");
    assert_eq!(receiver.deliveries().len(), 1);
    a.commit().await.unwrap();
}

/// Aborts `txn` as an operator on whichever node leads, retrying across a failover (the
/// request id makes a retry return the first answer).
async fn operator_abort(cluster: &Cluster, txn: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
        let channel = Channel::from_shared(format!("http://{}", cluster.addr(leader))).unwrap().connect_lazy();
        let req = AbortTransactionRequest {
            transaction_id: txn,
            reason: "webhook test".into(),
            request_id: format!("abort-{txn}"),
        };
        match AdminServiceClient::new(channel).abort_transaction(req).await {
            Ok(_) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("abort of {txn} not done yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("operator abort of transaction {txn} failed: {e}"),
        }
    }
}

/// A transaction holding one lock, then aborted by an operator: two events
/// (lock_revoked, transaction_aborted).
async fn aborted_holder(cluster: &Cluster, c: &DlsClient, i: u32) {
    let tx = c.begin_transaction(opts(&format!("job-{i}"))).await.unwrap();
    tx.acquire_lock("wh", &format!("k{i}"), LockMode::Exclusive, wait()).await.unwrap();
    operator_abort(cluster, tx.id()).await;
}

#[tokio::test]
async fn delivery_resumes_on_the_new_leader_after_the_leader_is_killed() {
    // The first deliveries fail, so retries are exercised too.
    let (receiver, url) = Receiver::start(2).await;
    let dir = tempfile::tempdir().unwrap();
    let file = webhooks_file(&dir, &url, "");
    let mut cluster = Cluster::start_with(3, &["--webhooks-file", file.to_str().unwrap()]).await;
    let c = client(cluster.endpoints()).await;

    for i in 0..4 {
        aborted_holder(&cluster, &c, i).await;
    }
    eventually(Duration::from_secs(20), "the first deliveries", || (receiver.sequences().len() >= 4).then_some(()))
        .await;
    let old = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.kill(old);
    cluster.wait_for_new_leader(old, Duration::from_secs(20)).await;
    for i in 4..8 {
        aborted_holder(&cluster, &c, i).await;
    }

    let all: BTreeSet<u64> = (1..=16).collect();
    eventually(Duration::from_secs(30), "every event 1..=16 delivered", || {
        all.is_subset(&receiver.sequences()).then_some(())
    })
    .await;
    assert_eq!(receiver.sequences(), all, "only the 16 events were produced");
    let deliveries = receiver.deliveries();
    for d in &deliveries {
        verify(d);
    }
    let kinds: BTreeSet<String> = deliveries.iter().map(|d| d.json["kind"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, BTreeSet::from(["LOCK_REVOKED".to_string(), "TRANSACTION_ABORTED".to_string()]));
}

#[test]
fn a_mistake_in_the_webhooks_file_stops_the_server_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("webhooks.toml");
    std::fs::write(&file, "[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:1/\"\nsecret = \"\"\n").unwrap();
    let ports = common::free_ports(2);
    let out = std::process::Command::new(caerus_testkit::dls_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{}", ports[0])])
        .args(["--http-listen", &format!("127.0.0.1:{}", ports[1])])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--webhooks-file")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("webhooks.toml") && stderr.contains("\"ops\"") && stderr.contains("secret is empty"),
        "{stderr}"
    );
}

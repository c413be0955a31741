//! Per-namespace visibility: lock metrics labelled by namespace, with a label set no client
//! can grow past `--metrics-namespaces` plus "other", counted alike on every node; and the
//! spans of a client's traced lock (W3C `traceparent`) at an OTLP collector the test runs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use caerus_core::{ClientConfig, DlsClient, Error, LockMode};
use caerus_proto::v1 as pb;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_testkit::{
    add_key, eventually, free_port, http_get, opts, patient_client, raw_client, wait, Cluster, PATIENCE,
};
use tonic::transport::Channel;

fn scrape(http_addr: &str) -> String {
    let (status, body) = http_get(http_addr, "/metrics").unwrap();
    assert_eq!(status, 200, "/metrics answered {status}: {body}");
    body
}

/// The value of the sample `series` (name with its labels, as written), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Every value the `namespace` label takes in the `dls_namespace_*` families.
fn namespace_labels(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("dls_namespace_"))
        .filter_map(|l| Some(l.split_once("namespace=\"")?.1.split_once('"')?.0.to_string()))
        .collect()
}

#[tokio::test]
async fn a_key_using_many_namespaces_cannot_grow_the_namespace_labels_past_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let key = add_key(&file, "tenant", &[], false);
    let flags = ["--api-keys-file", file.to_str().unwrap(), "--metrics-namespaces", "3"];
    let cluster = Cluster::start_full(1, &flags, Some(key.clone())).await;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(key)).await.unwrap();
    let namespaces = 40;
    for i in 0..namespaces {
        let tx = client.begin_transaction(opts(10_000)).await.unwrap();
        tx.acquire_lock(&format!("tenant-{i}"), "k", LockMode::Exclusive, wait(2_000)).await.unwrap();
        tx.commit().await.unwrap();
    }
    let text = scrape(&cluster.http_addr(1));
    let labels = namespace_labels(&text);
    assert!(labels.len() <= 4, "more than 3 namespaces plus other: {labels:?}");
    assert!(labels.contains("other"), "{labels:?}");
    // Nothing is lost to the bound: the labelled series and "other" add up to every grant.
    let by_namespace: f64 = labels
        .iter()
        .map(|ns| sample(&text, &format!("dls_namespace_grants_total{{namespace=\"{ns}\"}}")).unwrap())
        .sum();
    assert_eq!(Some(by_namespace), sample(&text, "dls_grants_total"));
    assert!(by_namespace >= namespaces as f64);
}

/// A transaction begun on the wire with a short lease that nobody renews.
async fn abandoned_holder(addr: &str, namespace: &str) {
    let mut c = raw_client(addr).await;
    let begin = pb::BeginTransactionRequest { timeout_ms: 1_000, ..Default::default() };
    let txn = c.begin_transaction(begin).await.unwrap().into_inner().transaction_id;
    let acquire = pb::AcquireLockRequest {
        transaction_id: txn,
        request_id: "abandoned".into(),
        namespace: namespace.into(),
        key: "k".into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 1_000,
        ..Default::default()
    };
    let mut stream = c.acquire_lock(acquire).await.unwrap().into_inner();
    while let Some(m) = stream.message().await.unwrap() {
        if matches!(m.event, Some(pb::acquire_lock_response::Event::Granted(_))) {
            return;
        }
    }
    panic!("the abandoned holder's acquire ended without a grant");
}

#[tokio::test]
async fn waits_holds_revocations_and_deadlocks_are_counted_by_namespace_on_every_node() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let client = patient_client(cluster.endpoints()).await;

    // billing: a wait that ends in a grant, then two releases.
    let first = client.begin_transaction(opts(10_000)).await.unwrap();
    first.acquire_lock("billing", "run", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let second = client.begin_transaction(opts(10_000)).await.unwrap();
    let queued = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire_lock("billing", "run", LockMode::Exclusive, wait(10_000)).await })
    };
    let leader_http = cluster.http_addr(leader);
    eventually(PATIENCE, "the second billing request to queue", || {
        sample(&scrape(&leader_http), "dls_namespace_waits_total{namespace=\"billing\"}").filter(|v| *v >= 1.0)
    })
    .await;
    first.commit().await.unwrap();
    queued.await.unwrap().unwrap();
    second.commit().await.unwrap();

    // reports: a holder whose lease lapses.
    abandoned_holder(&cluster.addr(leader), "reports").await;

    // cycle: two transactions wait for each other; one is aborted as the victim.
    let (a, b) =
        (client.begin_transaction(opts(10_000)).await.unwrap(), client.begin_transaction(opts(10_000)).await.unwrap());
    a.acquire_lock("cycle", "x", LockMode::Exclusive, wait(1_000)).await.unwrap();
    b.acquire_lock("cycle", "y", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let a_waits = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire_lock("cycle", "y", LockMode::Exclusive, wait(10_000)).await })
    };
    eventually(PATIENCE, "a to wait for y", || {
        sample(&scrape(&leader_http), "dls_namespace_waits_total{namespace=\"cycle\"}").filter(|v| *v >= 1.0)
    })
    .await;
    let b_waits = b.acquire_lock("cycle", "x", LockMode::Exclusive, wait(10_000)).await;
    let outcomes = [a_waits.await.unwrap().map(|_| ()), b_waits.map(|_| ())];
    assert_eq!(
        outcomes.iter().filter(|o| matches!(o, Err(Error::DeadlockVictim { .. }))).count(),
        1,
        "one victim: {outcomes:?}"
    );

    let expected = [
        ("dls_namespace_grants_total{namespace=\"billing\"}", 2.0),
        ("dls_namespace_waits_total{namespace=\"billing\"}", 1.0),
        ("dls_namespace_wait_seconds_count{namespace=\"billing\"}", 1.0),
        ("dls_namespace_hold_seconds_count{namespace=\"billing\"}", 2.0),
        ("dls_namespace_revocations_total{namespace=\"reports\",cause=\"expired\"}", 1.0),
        ("dls_namespace_hold_seconds_count{namespace=\"reports\"}", 1.0),
        ("dls_namespace_deadlocks_total{namespace=\"cycle\"}", 1.0),
        ("dls_namespace_revocations_total{namespace=\"cycle\",cause=\"deadlock_victim\"}", 1.0),
        ("dls_namespace_revocations_total{namespace=\"billing\",cause=\"expired\"}", 0.0),
    ];
    for id in cluster.ids() {
        let http = cluster.http_addr(id);
        eventually(PATIENCE, &format!("node {id} to count every namespace's activity"), || {
            let text = scrape(&http);
            expected.iter().all(|(series, want)| sample(&text, series) == Some(*want)).then_some(())
        })
        .await;
    }
}

/// A collector for the test: records the body of every OTLP/HTTP JSON export it gets.
struct Collector {
    addr: String,
    exports: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Collector {
    async fn start() -> Collector {
        let exports = Arc::new(Mutex::new(Vec::new()));
        let seen = exports.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(serde_json::from_slice(&body).expect("the export is JSON"));
                    "{}"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { addr, exports }
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<serde_json::Value> {
        let exports = self.exports.lock().unwrap();
        let mut out = Vec::new();
        for e in exports.iter() {
            for rs in e["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        out
    }

    /// The spans of trace `trace_id`, by name.
    fn trace(&self, trace_id: &str) -> Vec<(String, serde_json::Value)> {
        let spans = self.spans().into_iter().filter(|s| s["traceId"] == trace_id);
        spans.map(|s| (s["name"].as_str().unwrap().to_string(), s)).collect()
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn traced<T>(msg: T, traceparent: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
    req.metadata_mut().insert("tracestate", "vendor=abc".parse().unwrap());
    req
}

fn acquire_of(txn: u64, namespace: &str, request_id: &str, timeout_ms: i64) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: txn,
        request_id: request_id.into(),
        namespace: namespace.into(),
        key: "k".into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms,
        ..Default::default()
    }
}

async fn begin_raw(c: &mut LockServiceClient<Channel>, lease_ms: i64) -> u64 {
    let begin = pb::BeginTransactionRequest { timeout_ms: lease_ms, ..Default::default() };
    c.begin_transaction(begin).await.unwrap().into_inner().transaction_id
}

/// Reads an acquire stream until its grant.
async fn granted(mut stream: tonic::Streaming<pb::AcquireLockResponse>) {
    while let Some(m) = stream.message().await.unwrap() {
        if matches!(m.event, Some(pb::acquire_lock_response::Event::Granted(_))) {
            return;
        }
    }
    panic!("the acquire ended without a grant");
}

#[tokio::test]
async fn a_traced_acquire_through_a_follower_exports_wait_grant_and_release_spans_in_the_clients_trace() {
    let collector = Collector::start().await;
    let endpoint = format!("http://{}", collector.addr);
    let cluster = Cluster::start_with(3, &["--otlp-endpoint", &endpoint]).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    eventually(PATIENCE, "the follower to know the leader", || {
        (cluster.metric(follower, "dls_leader_id") as u64 == leader).then_some(())
    })
    .await;
    let mut on_leader = raw_client(&cluster.addr(leader)).await;
    let mut on_follower = raw_client(&cluster.addr(follower)).await;

    // A holder, then a traced waiter (through the follower) granted when the holder ends.
    let holder = begin_raw(&mut on_leader, 30_000).await;
    granted(on_leader.acquire_lock(acquire_of(holder, "traced", "h", 5_000)).await.unwrap().into_inner()).await;
    let waiter = begin_raw(&mut on_follower, 30_000).await;
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let wait = on_follower.acquire_lock(traced(acquire_of(waiter, "traced", "w", 10_000), &traceparent)).await.unwrap();
    eventually(PATIENCE, "the traced request to queue", || {
        sample(&scrape(&cluster.http_addr(leader)), "dls_namespace_waits_total{namespace=\"traced\"}")
            .filter(|v| *v >= 1.0)
    })
    .await;
    let end = |txn| pb::EndTransactionRequest { transaction_id: txn, commit: true, ..Default::default() };
    on_leader.end_transaction(end(holder)).await.unwrap();
    granted(wait.into_inner()).await;
    let release = pb::ReleaseLockRequest {
        transaction_id: waiter,
        namespace: "traced".into(),
        key: "k".into(),
        ..Default::default()
    };
    on_follower.release_lock(release).await.unwrap();

    // A bad traceparent is ignored: the call works and starts no trace.
    let other = begin_raw(&mut on_leader, 30_000).await;
    let bad = traced(acquire_of(other, "untraced", "b", 1_000), "00-nonsense-01");
    granted(on_leader.acquire_lock(bad).await.unwrap().into_inner()).await;
    on_leader.end_transaction(end(other)).await.unwrap();

    let spans = eventually(PATIENCE, "wait, grant and release spans at the collector", || {
        let spans = collector.trace(TRACE);
        let names: BTreeSet<&str> = spans.iter().map(|(n, _)| n.as_str()).collect();
        names.is_superset(&BTreeSet::from(["dls.lock.wait", "dls.lock.grant", "dls.lock.release"])).then_some(spans)
    })
    .await;
    assert_eq!(spans.len(), 3, "one span each: {spans:?}");
    for (name, s) in &spans {
        assert_eq!(s["parentSpanId"], CLIENT_SPAN, "{name} is a child of the client's span");
        assert_eq!(s["traceState"], "vendor=abc", "{name} keeps the tracestate");
        let attrs = s["attributes"].to_string();
        assert!(attrs.contains("\"traced\"") && attrs.contains(&format!("\"{waiter}\"")), "{name}: {attrs}");
    }
    let wait_span = &spans.iter().find(|(n, _)| n == "dls.lock.wait").unwrap().1;
    assert!(wait_span["attributes"].to_string().contains("\"boolValue\":true"), "queued: {wait_span}");
    let grant_span = &spans.iter().find(|(n, _)| n == "dls.lock.grant").unwrap().1;
    let start = |s: &serde_json::Value, f: &str| s[f].as_str().unwrap().parse::<u128>().unwrap();
    assert!(start(wait_span, "endTimeUnixNano") <= start(grant_span, "startTimeUnixNano") + 1_000_000);
    assert!(collector.spans().iter().all(|s| s["traceId"] == TRACE), "only the valid context made spans");
}

/// `POST path` of `json` on an HTTP port with a `traceparent` header: the status.
fn post_traced(addr: &str, path: &str, json: &str, traceparent: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\ntraceparent: {traceparent}\r\n\
         Content-Length: {}\r\n\r\n{json}",
        json.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn a_lock_traced_over_http_whose_lease_lapses_ends_in_a_revoke_span() {
    let collector = Collector::start().await;
    let endpoint = format!("http://{}", collector.addr);
    let cluster = Cluster::start_with(1, &["--otlp-endpoint", &endpoint]).await;
    let mut c = raw_client(&cluster.addr(1)).await;
    let txn = begin_raw(&mut c, 1_000).await;
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let body = r#"{"namespace": "leased", "key": "k", "mode": "EXCLUSIVE", "timeout_ms": 1000}"#;
    let path = format!("/api/v1/transactions/{txn}/locks");
    assert_eq!(post_traced(&cluster.http_addr(1), &path, body, &traceparent), 200);
    let revoke = eventually(PATIENCE, "the revoke span at the collector", || {
        collector.trace(TRACE).into_iter().find(|(n, _)| n == "dls.lock.revoke").map(|(_, s)| s)
    })
    .await;
    assert_eq!(revoke["status"]["code"], 2, "a revocation is an error: {revoke}");
    assert!(revoke["attributes"].to_string().contains("lease_expired"), "{revoke}");
}

#[tokio::test]
async fn with_the_collector_down_the_node_keeps_serving_and_counts_the_dropped_spans() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let cluster = Cluster::start_with(1, &["--otlp-endpoint", &endpoint]).await;
    let mut c = raw_client(&cluster.addr(1)).await;
    for i in 0..20 {
        let txn = begin_raw(&mut c, 10_000).await;
        let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
        let acquire = traced(acquire_of(txn, "down", &format!("r{i}"), 1_000), &traceparent);
        granted(c.acquire_lock(acquire).await.unwrap().into_inner()).await;
        let end = pb::EndTransactionRequest { transaction_id: txn, commit: true, ..Default::default() };
        c.end_transaction(end).await.unwrap();
    }
    let http = cluster.http_addr(1);
    eventually(PATIENCE, "the spans of 20 locks to be dropped and counted", || {
        let text = scrape(&http);
        let dropped = sample(&text, "dls_trace_spans_dropped_total")?;
        (dropped >= 60.0 && sample(&text, "dls_trace_export_failures_total")? >= 1.0).then_some(())
    })
    .await;
    assert_eq!(sample(&scrape(&http), "dls_trace_spans_exported_total"), Some(0.0));
}

#[tokio::test]
async fn the_core_clients_traceparent_option_puts_the_lock_in_the_callers_trace() {
    let collector = Collector::start().await;
    let endpoint = format!("http://{}", collector.addr);
    let cluster = Cluster::start_with(1, &["--otlp-endpoint", &endpoint]).await;
    let client = patient_client(cluster.endpoints()).await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let traceparent = format!("00-{trace}-b7ad6b7169203331-01");
    let tx = client.begin_transaction(opts(10_000)).await.unwrap();
    let traced = wait(2_000).with_traceparent(traceparent, Some("app=billing".into()));
    tx.acquire_lock("core", "k", LockMode::Exclusive, traced).await.unwrap();
    tx.commit().await.unwrap();
    let spans = eventually(PATIENCE, "the lock's spans in the caller's trace", || {
        let spans = collector.trace(trace);
        (spans.len() >= 3).then_some(spans)
    })
    .await;
    let names: BTreeSet<&str> = spans.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["dls.lock.wait", "dls.lock.grant", "dls.lock.release"]));
    assert!(spans.iter().all(|(_, s)| s["parentSpanId"] == "b7ad6b7169203331" && s["traceState"] == "app=billing"));
}

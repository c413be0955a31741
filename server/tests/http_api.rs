//! The HTTP/JSON API (`/api/v1` on --http-listen) against real dls processes: the same
//! service as gRPC (same validation messages, same auth), waits and queues, SSE events
//! with a deadlock, and a follower's HTTP port serving through the leader.

use crate::common;

use caerus_proto::v1::BeginTransactionRequest;
use common::{add_key, raw_client, Cluster, PATIENCE};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn http() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn send(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> hyper::Response<Incoming> {
    let mut req = hyper::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    if method == "POST" {
        req = req.header("content-type", "application/json");
    }
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or("").to_string()))).unwrap();
    tokio::time::timeout(PATIENCE, http().request(req)).await.expect("HTTP call hung").unwrap()
}

/// One JSON call: status and parsed body.
async fn call(addr: &str, method: &str, path: &str, body: Value, key: Option<&str>) -> (u16, Value) {
    let text = if body.is_null() { String::new() } else { body.to_string() };
    let resp = send(addr, method, path, Some(&text), key).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, v)
}

async fn ok(addr: &str, method: &str, path: &str, body: Value) -> Value {
    let (status, v) = call(addr, method, path, body, None).await;
    assert_eq!(status, 200, "{method} {path}: {v}");
    v
}

async fn begin(addr: &str, name: &str, priority: i32) -> String {
    let v = ok(addr, "POST", "/api/v1/transactions", json!({"timeout_ms": 10_000, "name": name, "priority": priority}))
        .await;
    v["transaction_id"].as_str().expect("ids are strings").to_string()
}

fn acquire_body(key: &str, quick: bool) -> Value {
    json!({"namespace": "ns", "key": key, "mode": "EXCLUSIVE", "timeout_ms": 30_000, "return_when_queued": quick})
}

/// Reads SSE frames until one's JSON matches `pred`; returns it with its `id:`.
async fn next_event(body: &mut Incoming, buf: &mut String, pred: impl Fn(&Value) -> bool) -> (u64, Value) {
    let read = async {
        loop {
            while let Some(i) = buf.find("\n\n") {
                let frame: String = buf.drain(..i + 2).collect();
                let id = frame.lines().find_map(|l| l.strip_prefix("id: ")).map(|s| s.parse().unwrap());
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                if let (Some(id), false) = (id, data.is_empty()) {
                    let v: Value = serde_json::from_str(&data).unwrap();
                    if pred(&v) {
                        return (id, v);
                    }
                }
            }
            let frame = body.frame().await.expect("event stream ended").unwrap();
            if let Ok(data) = frame.into_data() {
                buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("no matching event")
}

#[tokio::test]
async fn transactions_locks_and_queues_over_http() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let a = begin(&h, "alice", 0).await;
    let b = begin(&h, "bob", 0).await;

    let g = ok(&h, "POST", &format!("/api/v1/transactions/{a}/locks"), acquire_body("k", false)).await;
    assert_eq!(g["status"], "granted");
    let first_token: u64 = g["fencing_token"].as_str().unwrap().parse().unwrap();

    let q = ok(&h, "POST", &format!("/api/v1/transactions/{b}/locks"), acquire_body("k", true)).await;
    assert_eq!(q["status"], "queued");
    assert_eq!(q["position"], 1);
    assert_eq!(q["blocking_transaction_ids"], json!([a]));

    let locks = ok(&h, "GET", "/api/v1/locks?namespace_prefix=ns", Value::Null).await;
    let k = &locks["locks"][0];
    assert_eq!((k["namespace"].as_str(), k["key"].as_str()), (Some("ns"), Some("k")));
    assert_eq!(k["holders"][0]["transaction_id"], json!(a));
    assert_eq!(k["holders"][0]["transaction_name"], "alice");
    assert_eq!(k["waiters"][0]["transaction_id"], json!(b));

    // Re-attaching with bob's request id waits for the same queued request: the release
    // of alice's lock ends that wait with a grant and a higher token.
    let rid = q["request_id"].as_str().unwrap().to_string();
    let wait = {
        let (h, b) = (h.clone(), b.clone());
        let mut body = acquire_body("k", false);
        body["request_id"] = json!(rid);
        tokio::spawn(async move { call(&h, "POST", &format!("/api/v1/transactions/{b}/locks"), body, None).await })
    };
    let rel =
        ok(&h, "POST", &format!("/api/v1/transactions/{a}/release"), json!({"namespace": "ns", "key": "k"})).await;
    assert_eq!(rel["released"], true);
    let (status, granted) = wait.await.unwrap();
    assert_eq!(status, 200, "{granted}");
    assert_eq!(granted["status"], "granted");
    assert!(granted["fencing_token"].as_str().unwrap().parse::<u64>().unwrap() > first_token);

    let st = ok(&h, "GET", &format!("/api/v1/transactions/{b}"), Value::Null).await;
    assert_eq!(st["state"], "ACTIVE");
    assert_eq!(st["name"], "bob");
    assert_eq!(st["locks"][0]["key"], "k");
    let hb = ok(&h, "POST", &format!("/api/v1/transactions/{b}/heartbeat"), Value::Null).await;
    assert!(hb["lease_remaining_ms"].as_i64().unwrap() > 0);

    let end = ok(&h, "POST", &format!("/api/v1/transactions/{b}/end"), json!({"commit": true})).await;
    assert_eq!(end, json!({"state": "COMMITTED", "released_locks": 1}));
    let abort = ok(&h, "POST", &format!("/api/v1/transactions/{a}/abort"), json!({"reason": "test"})).await;
    assert_eq!(abort["state"], "ABORTED");
    let (status, v) = call(&h, "POST", &format!("/api/v1/transactions/{a}/heartbeat"), Value::Null, None).await;
    assert_eq!((status, v["error"]["kind"].as_str()), (409, Some("TRANSACTION_LOST")), "{v}");
    // What ended it travels as data, beside the words.
    assert_eq!(v["error"]["detail"]["end_cause"], "OPERATOR_ABORT", "{v}");
    assert_eq!(v["error"]["detail"]["transaction_id"], json!(a), "{v}");
    let st = ok(&h, "GET", &format!("/api/v1/transactions/{a}"), Value::Null).await;
    assert_eq!((&st["state"], &st["end_cause"]), (&json!("ABORTED"), &json!("OPERATOR_ABORT")), "{st}");

    let cl = ok(&h, "GET", "/api/v1/cluster", Value::Null).await;
    assert_eq!(cl["leader_id"], "1");
    assert_eq!(cl["members"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_input_gets_400_with_the_grpc_message() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);

    // The same request over gRPC and over HTTP: same code, same words.
    let mut grpc = raw_client(&cluster.addr(1)).await;
    let status =
        grpc.begin_transaction(BeginTransactionRequest { timeout_ms: 5, ..Default::default() }).await.unwrap_err();
    let (code, v) = call(&h, "POST", "/api/v1/transactions", json!({"timeout_ms": 5}), None).await;
    assert_eq!(code, 400);
    assert_eq!(v["error"]["code"], "INVALID_ARGUMENT");
    assert_eq!(v["error"]["kind"], "INVALID_ARGUMENT");
    assert_eq!(v["error"]["message"], status.message());

    let t = begin(&h, "t", 0).await;
    let cases: Vec<(String, Value, &str)> = vec![
        (
            format!("/api/v1/transactions/{t}/locks"),
            json!({"namespace": "", "key": "k", "mode": "EXCLUSIVE", "timeout_ms": 10}),
            "namespace must not be empty",
        ),
        (
            format!("/api/v1/transactions/{t}/locks"),
            json!({"namespace": "n", "key": "k", "timeout_ms": 10}),
            "mode must be EXCLUSIVE, SHARED_READ or SEMAPHORE",
        ),
        (
            format!("/api/v1/transactions/{t}/locks"),
            json!({"namespace": "n", "key": "k", "mode": "WRITE", "timeout_ms": 10}),
            "mode must be EXCLUSIVE, SHARED_READ or SEMAPHORE",
        ),
        ("/api/v1/transactions/abc/heartbeat".into(), Value::Null, "transaction id in the path"),
        ("/api/v1/transactions/0/heartbeat".into(), Value::Null, "transaction_id"),
        (format!("/api/v1/transactions/{t}/end"), json!({}), "commit must be given"),
        ("/api/v1/transactions".into(), json!({"timeout_ms": 1000, "bogus": 1}), "unknown field"),
    ];
    for (path, body, want) in cases {
        let (code, v) = call(&h, "POST", &path, body.clone(), None).await;
        assert_eq!(code, 400, "{path} {body}: {v}");
        assert_eq!(v["error"]["code"], "INVALID_ARGUMENT", "{path}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(want), "{path}: {v} should say {want:?}");
    }
    let resp = send(&h, "POST", "/api/v1/transactions", Some("{not json"), None).await;
    assert_eq!(resp.status().as_u16(), 400);

    let (code, v) = call(&h, "GET", "/api/v1/transactions/999999", Value::Null, None).await;
    assert_eq!((code, v["error"]["kind"].as_str()), (404, Some("TRANSACTION_NOT_FOUND")), "{v}");
    let (code, v) = call(&h, "GET", "/api/v1/events?kinds=NOPE", Value::Null, None).await;
    assert_eq!(code, 400, "{v}");
}

#[tokio::test]
async fn an_event_cursor_at_the_largest_sequence_is_refused_not_wrapped() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let (code, v) = call(&h, "GET", &format!("/api/v1/events?after={}", u64::MAX), Value::Null, None).await;
    assert_eq!((code, v["error"]["kind"].as_str()), (400, Some("INVALID_ARGUMENT")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("only_new"), "{v}");
    let req = hyper::Request::get(format!("http://{h}/api/v1/events")).header("last-event-id", u64::MAX.to_string());
    let resp = http().request(req.body(Full::new(Bytes::new())).unwrap()).await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    // One below still opens a stream (which waits for events that far ahead).
    let resp = send(&h, "GET", &format!("/api/v1/events?after={}", u64::MAX - 1), None, None).await;
    assert_eq!(resp.status().as_u16(), 200);
}

#[tokio::test]
async fn the_keys_file_applies_to_http_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let worker = add_key(&file, "worker", &[], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
    let h = cluster.http_addr(1);
    let body = json!({"timeout_ms": 5000});

    for key in [None, Some("dls_wrong")] {
        let (code, v) = call(&h, "POST", "/api/v1/transactions", body.clone(), key).await;
        assert_eq!((code, v["error"]["kind"].as_str()), (401, Some("UNAUTHENTICATED")), "{v}");
    }
    let (code, v) = call(&h, "POST", "/api/v1/transactions", body.clone(), Some(&worker)).await;
    assert_eq!(code, 200, "{v}");
    let t = v["transaction_id"].as_str().unwrap();
    // The operator API needs an admin key, as over gRPC.
    let (code, v) = call(&h, "GET", "/api/v1/locks", Value::Null, Some(&worker)).await;
    assert_eq!((code, v["error"]["kind"].as_str()), (403, Some("PERMISSION_DENIED")), "{v}");
    let (code, _) = call(&h, "GET", "/api/v1/locks", Value::Null, Some(&admin)).await;
    assert_eq!(code, 200);
    let (code, _) = call(&h, "POST", &format!("/api/v1/transactions/{t}/abort"), json!({}), Some(&worker)).await;
    assert_eq!(code, 403);
    let resp = send(&h, "GET", "/api/v1/events", None, None).await;
    assert_eq!(resp.status().as_u16(), 401);
    // Operator endpoints and the page stay open: they show no transaction data.
    assert_eq!(send(&h, "GET", "/playground", None, None).await.status().as_u16(), 200);
}

#[tokio::test]
async fn a_deadlock_shows_up_on_the_event_stream() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let resp = send(&h, "GET", "/api/v1/events?kinds=DEADLOCK_RESOLVED", None, None).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut events = resp.into_body();
    let mut buf = String::new();

    let a = begin(&h, "a", 5).await;
    let b = begin(&h, "b", 1).await;
    ok(&h, "POST", &format!("/api/v1/transactions/{a}/locks"), acquire_body("x", false)).await;
    ok(&h, "POST", &format!("/api/v1/transactions/{b}/locks"), acquire_body("y", false)).await;
    let q = ok(&h, "POST", &format!("/api/v1/transactions/{a}/locks"), acquire_body("y", true)).await;
    assert_eq!(q["status"], "queued");
    // b closes the cycle; b has the lower priority and is the victim.
    let (code, v) = call(&h, "POST", &format!("/api/v1/transactions/{b}/locks"), acquire_body("x", false), None).await;
    assert_eq!((code, v["error"]["kind"].as_str()), (409, Some("DEADLOCK_VICTIM")), "{v}");
    assert_eq!(v["error"]["detail"]["end_cause"], "DEADLOCK_VICTIM", "{v}");

    let (seq, e) = next_event(&mut events, &mut buf, |_| true).await;
    // The victim's error carried the same deadlock the event reports.
    assert_eq!(v["error"]["detail"]["deadlock"], e["detail"], "{v}");
    assert_eq!(e["kind"], "DEADLOCK_RESOLVED");
    assert_eq!(e["detail"]["victim_transaction_id"], json!(b));
    let cycle: Vec<&str> =
        e["detail"]["cycle"].as_array().unwrap().iter().map(|m| m["transaction_id"].as_str().unwrap()).collect();
    assert_eq!(cycle.len(), 2);
    assert!(cycle.contains(&a.as_str()) && cycle.contains(&b.as_str()));

    // Resuming from just before that event (as a browser does with Last-Event-ID) gives it again.
    let mut req =
        hyper::Request::get(format!("http://{h}/api/v1/events")).header("last-event-id", (seq - 1).to_string());
    req = req.header("accept", "text/event-stream");
    let resp = http().request(req.body(Full::new(Bytes::new())).unwrap()).await.unwrap();
    let mut again = resp.into_body();
    let (seq2, e2) = next_event(&mut again, &mut String::new(), |_| true).await;
    assert_eq!((seq2, &e2), (seq, &e));
}

#[tokio::test]
async fn a_followers_http_port_serves_through_the_leader() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let h = cluster.http_addr(follower);

    // The follower names the leader once it has heard from it.
    let cl = common::eventually_async(PATIENCE, "the follower to know its leader", || async {
        let cl = ok(&h, "GET", "/api/v1/cluster", Value::Null).await;
        (cl["leader_id"] == json!(leader.to_string())).then_some(cl)
    })
    .await;
    assert_eq!(cl["node_id"], json!(follower.to_string()));
    assert_eq!(cl["members"].as_array().unwrap().len(), 3);

    let t = begin(&h, "via-follower", 0).await;
    let g = ok(&h, "POST", &format!("/api/v1/transactions/{t}/locks"), acquire_body("f", false)).await;
    assert_eq!(g["status"], "granted");
    let locks = ok(&h, "GET", "/api/v1/locks", Value::Null).await;
    assert_eq!(locks["locks"][0]["holders"][0]["transaction_id"], json!(t));

    // An event stream opened on the follower follows the leader's log.
    let mut events = send(&h, "GET", "/api/v1/events?only_new=true", None, None).await.into_body();
    ok(&h, "POST", &format!("/api/v1/transactions/{t}/abort"), json!({"reason": "from a follower"})).await;
    let (_, e) = next_event(&mut events, &mut String::new(), |e| e["kind"] == "TRANSACTION_ABORTED").await;
    assert_eq!(e["detail"]["reason"], "from a follower");

    // The leader dies; the surviving nodes' HTTP ports keep working once a new one leads.
    cluster.kill(leader);
    let new_leader = cluster.wait_for_new_leader(leader, PATIENCE).await;
    for id in (1..=3).filter(|&id| id != leader) {
        let h = cluster.http_addr(id);
        let t = begin(&h, "after-failover", 0).await;
        let st = ok(&h, "GET", &format!("/api/v1/transactions/{t}"), Value::Null).await;
        assert_eq!(st["state"], "ACTIVE");
    }
    let cl = ok(&cluster.http_addr(new_leader), "GET", "/api/v1/cluster", Value::Null).await;
    assert_eq!(cl["leader_id"], json!(new_leader.to_string()));
}

#[tokio::test]
async fn lock_delay_rules_are_set_and_listed_and_a_delayed_key_is_shown() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    assert_eq!(ok(&h, "GET", "/api/v1/lock-delays", Value::Null).await, json!({"rules": []}));
    let set = ok(&h, "POST", "/api/v1/lock-delays", json!({"namespace_prefix": "n", "delay_ms": 60_000})).await;
    assert_eq!(set, json!({"previous_delay_ms": 0}));
    let rules = ok(&h, "GET", "/api/v1/lock-delays", Value::Null).await;
    assert_eq!(rules, json!({"rules": [{"namespace_prefix": "n", "delay_ms": 60_000}]}));

    let t = begin(&h, "revoked", 0).await;
    ok(&h, "POST", &format!("/api/v1/transactions/{t}/locks"), acquire_body("d", false)).await;
    ok(&h, "POST", &format!("/api/v1/transactions/{t}/abort"), json!({"reason": "drill"})).await;
    let locks = ok(&h, "GET", "/api/v1/locks", Value::Null).await;
    let k = &locks["locks"][0];
    assert_eq!((&k["key"], &k["holders"], &k["delay"]["transaction_id"]), (&json!("d"), &json!([]), &json!(t)));
    assert_eq!(k["delay"]["cause"], "OPERATOR_ABORT");
    assert!(k["delay"]["until_ms"].as_i64().unwrap() > 0);

    let (code, e) = call(&h, "POST", "/api/v1/lock-delays", json!({"delay_ms": 600_001}), None).await;
    assert_eq!(code, 400, "{e}");
    assert!(e["error"]["message"].as_str().unwrap_or_default().contains("delay_ms"), "{e}");
    let (code, e) = call(&h, "POST", "/api/v1/lock-delays", json!({"prefix": "n", "delay_ms": 1}), None).await;
    assert_eq!(code, 400, "an unknown field is refused: {e}");
}

#[tokio::test]
async fn a_semaphore_permit_over_http() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let body = json!({"namespace": "ns", "key": "pool", "mode": "SEMAPHORE", "permits": 2, "timeout_ms": 1_000});
    let mut tokens = Vec::new();
    for name in ["p1", "p2"] {
        let t = begin(&h, name, 0).await;
        let g = ok(&h, "POST", &format!("/api/v1/transactions/{t}/locks"), body.clone()).await;
        assert_eq!((&g["status"], &g["mode"]), (&json!("granted"), &json!("SEMAPHORE")), "{g}");
        tokens.push(g["fencing_token"].clone());
    }
    assert_ne!(tokens[0], tokens[1]);
    let locks = ok(&h, "GET", "/api/v1/locks", Value::Null).await;
    assert_eq!((&locks["locks"][0]["permits"], locks["locks"][0]["holders"].as_array().unwrap().len()), (&json!(2), 2));
    let t = begin(&h, "p3", 0).await;
    let x = json!({"namespace": "ns", "key": "pool", "mode": "EXCLUSIVE", "timeout_ms": 1_000});
    let (code, e) = call(&h, "POST", &format!("/api/v1/transactions/{t}/locks"), x, None).await;
    assert_eq!((code, &e["error"]["code"]), (400, &json!("INVALID_ARGUMENT")), "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("semaphore with 2 permits"), "{e}");
}

#[tokio::test]
async fn the_playground_and_openapi_are_served_by_the_binary() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    for (path, ctype) in [
        ("/playground", "text/html"),
        ("/playground/app.js", "text/javascript"),
        ("/playground/style.css", "text/css"),
        ("/openapi.json", "application/json"),
    ] {
        let resp = send(&h, "GET", path, None, None).await;
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with(ctype), "{path}");
    }
    let resp = send(&h, "GET", "/playground", None, None).await;
    let html = String::from_utf8(resp.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"), "the page must not load anything from elsewhere");
}

/// Every call the served OpenAPI document describes reaches a handler: the router's own
/// 404 (no route, empty body) or 405 (no such method) fails it. The other way round, every
/// route being described, is `scripts/openapi-routes.py` in `make lint`.
#[tokio::test]
async fn every_call_in_the_openapi_document_is_routed() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let resp = send(&h, "GET", "/openapi.json", None, None).await;
    let doc: Value = serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let mut calls = 0;
    for (template, item) in doc["paths"].as_object().expect("paths") {
        // An id that names nothing: the handler answers for it (404 with a JSON error, 400).
        let path = template.replace("{id}", "9-404").replace("{name}", "no-such-key");
        for method in ["get", "post", "put", "delete", "patch"].into_iter().filter(|m| item.get(*m).is_some()) {
            let verb = method.to_uppercase();
            let resp = send(&h, &verb, &path, Some("{}"), None).await;
            let status = resp.status().as_u16();
            // The event streams answer with their headers and stay open: the status is enough.
            let body = if status == 200 { Bytes::new() } else { resp.into_body().collect().await.unwrap().to_bytes() };
            assert_ne!(status, 405, "{verb} {template}: the router has no such method on this path");
            assert!(status != 404 || !body.is_empty(), "{verb} {template}: the router has no such path");
            calls += 1;
        }
    }
    assert!(calls >= 20, "the document describes only {calls} calls");
}

#[tokio::test]
async fn a_bounded_transaction_ends_over_http_and_a_bad_bound_is_refused() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let (status, v) =
        call(&h, "POST", "/api/v1/transactions", json!({"timeout_ms": 10_000, "max_duration_ms": 10}), None).await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("max_duration_ms"), "{v}");

    // No heartbeat is needed for the 10 s lease to outlive the 300 ms bound.
    let v = ok(&h, "POST", "/api/v1/transactions", json!({"timeout_ms": 10_000, "max_duration_ms": 300})).await;
    let id = v["transaction_id"].as_str().unwrap().to_string();
    ok(&h, "POST", &format!("/api/v1/transactions/{id}/locks"), acquire_body("bounded", false)).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let ended = loop {
        let s = ok(&h, "GET", &format!("/api/v1/transactions/{id}"), Value::Null).await;
        if s["state"] != "ACTIVE" || tokio::time::Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        (ended["state"].as_str(), ended["end_cause"].as_str()),
        (Some("EXPIRED"), Some("MAX_DURATION_EXCEEDED"))
    );
    assert_eq!(ended["locks"], json!([]));
}

#[tokio::test]
async fn several_locks_downgrade_and_token_checks_over_http() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let a = begin(&h, "multi", 0).await;
    let b = begin(&h, "reader", 0).await;
    let both = json!({"locks": [{"namespace": "ns", "key": "x", "mode": "EXCLUSIVE"}, {"namespace": "ns", "key": "y", "mode": "SHARED_READ"}],
                      "timeout_ms": 5_000});
    let g = ok(&h, "POST", &format!("/api/v1/transactions/{a}/locks/all"), both).await;
    assert_eq!(g["status"], "granted", "{g}");
    let keys: Vec<_> = g["locks"].as_array().unwrap().iter().map(|l| (l["key"].clone(), l["mode"].clone())).collect();
    assert_eq!(keys, vec![(json!("x"), json!("EXCLUSIVE")), (json!("y"), json!("SHARED_READ"))]);
    let x_token = g["locks"][0]["fencing_token"].as_str().unwrap().to_string();

    // b's try of both keys is refused and takes nothing; a queued wait is reported.
    let try_both = json!({"locks": [{"namespace": "ns", "key": "x", "mode": "EXCLUSIVE"}, {"namespace": "ns", "key": "z", "mode": "EXCLUSIVE"}], "timeout_ms": 0});
    let (status, v) = call(&h, "POST", &format!("/api/v1/transactions/{b}/locks/all"), try_both, None).await;
    assert_eq!((status, v["error"]["kind"].as_str()), (504, Some("LOCK_TIMEOUT")), "{v}");
    let (status, v) =
        call(&h, "POST", &format!("/api/v1/transactions/{b}/locks/all"), json!({"locks": []}), None).await;
    assert_eq!(status, 400, "{v}");

    let reader =
        json!({"namespace": "ns", "key": "x", "mode": "SHARED_READ", "timeout_ms": 30_000, "return_when_queued": true});
    let q = ok(&h, "POST", &format!("/api/v1/transactions/{b}/locks"), reader).await;
    assert_eq!(q["status"], "queued");
    let current = ok(
        &h,
        "POST",
        "/api/v1/fencing-tokens/verify",
        json!({"namespace": "ns", "key": "x", "fencing_token": x_token}),
    )
    .await;
    assert_eq!((current["current"].clone(), current["current_tokens"].clone()), (json!(true), json!([x_token])));

    let d =
        ok(&h, "POST", &format!("/api/v1/transactions/{a}/downgrade"), json!({"namespace": "ns", "key": "x"})).await;
    assert_eq!((d["held"].clone(), d["lock"]["mode"].clone()), (json!(true), json!("SHARED_READ")));
    assert_eq!(d["lock"]["fencing_token"], json!(x_token));
    // The queued reader comes in: the key now has two holders.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let check = ok(
            &h,
            "POST",
            "/api/v1/fencing-tokens/verify",
            json!({"namespace": "ns", "key": "x", "fencing_token": 999_999}),
        )
        .await;
        if check["current_tokens"].as_array().unwrap().len() == 2 || tokio::time::Instant::now() > deadline {
            assert_eq!(check["current"], json!(false));
            assert_eq!(check["current_tokens"].as_array().unwrap().len(), 2, "{check}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let none =
        ok(&h, "POST", &format!("/api/v1/transactions/{a}/downgrade"), json!({"namespace": "ns", "key": "nope"})).await;
    assert_eq!((none["held"].clone(), none["lock"].clone()), (json!(false), Value::Null));
    let (status, v) = call(
        &h,
        "POST",
        "/api/v1/fencing-tokens/verify",
        json!({"namespace": "ns", "key": "x", "fencing_token": "-1"}),
        None,
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("fencing_token"), "{v}");
}

/// Reads SSE frames until one's data JSON matches `pred`; returns it with its `id:` text.
async fn next_frame(body: &mut Incoming, buf: &mut String, pred: impl Fn(&Value) -> bool) -> (String, Value) {
    let read = async {
        loop {
            while let Some(i) = buf.find("\n\n") {
                let frame: String = buf.drain(..i + 2).collect();
                let id = frame.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or("").to_string();
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                if !data.is_empty() {
                    let v: Value = serde_json::from_str(&data).unwrap();
                    if pred(&v) {
                        return (id, v);
                    }
                }
            }
            let frame = body.frame().await.expect("stream ended").unwrap();
            if let Ok(data) = frame.into_data() {
                buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("no matching frame")
}

#[tokio::test]
async fn a_key_is_watched_over_server_sent_events() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let (status, v) = call(&h, "GET", "/api/v1/keys/watch?namespace=ns&key=", Value::Null, None).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = call(&h, "GET", "/api/v1/keys/watch?namespace=ns&key=w&color=red", Value::Null, None).await;
    assert_eq!(status, 400, "{v}");

    let resp = send(&h, "GET", "/api/v1/keys/watch?namespace=ns&key=w", None, None).await;
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let mut buf = String::new();
    let (_, first) = next_frame(&mut body, &mut buf, |_| true).await;
    assert_eq!((first["initial"].clone(), first["holders"].clone()), (json!(true), json!([])));

    let a = begin(&h, "watched", 0).await;
    let g = ok(&h, "POST", &format!("/api/v1/transactions/{a}/locks"), acquire_body("w", false)).await;
    let (cursor, granted) = next_frame(&mut body, &mut buf, |v| !v["changes"].as_array().unwrap().is_empty()).await;
    assert_eq!(granted["changes"][0]["kind"], "GRANTED");
    assert_eq!(granted["changes"][0]["holder"]["transaction_name"], "watched");
    assert_eq!(granted["holders"][0]["fencing_token"], g["fencing_token"]);
    assert_eq!(cursor, granted["cursor"].as_str().unwrap(), "the frame id is the resume cursor");

    // Resuming from that cursor after the holder let go reports the release first.
    drop(body);
    ok(&h, "POST", &format!("/api/v1/transactions/{a}/end"), json!({"commit": true})).await;
    let path =
        format!("/api/v1/keys/watch?namespace=ns&key=w&cursor={}", cursor.replace(':', "%3A").replace(',', "%2C"));
    let mut resumed = send(&h, "GET", &path, None, None).await.into_body();
    let mut buf = String::new();
    let (_, first) = next_frame(&mut resumed, &mut buf, |_| true).await;
    assert_eq!(first["changes"][0]["kind"], "RELEASED", "{first}");
    assert_eq!(first["holders"], json!([]));
}

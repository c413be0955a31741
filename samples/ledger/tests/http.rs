//! The ledger over HTTP: fencing (409, not applied), listing, the check, and a restart.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request with `Connection: close`: status and JSON body.
async fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut raw)).await.unwrap().unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::String(body.to_string())))
}

async fn serve(dir: &std::path::Path) -> (String, tokio::task::JoinHandle<()>) {
    let ledger = ledger::Ledger::open(dir).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move { axum::serve(listener, ledger::router(ledger)).await.unwrap() });
    (addr, task)
}

fn charge(customer: &str, token: u64) -> Value {
    json!({"resource": "billing-jobs/monthly-billing-job", "customer": customer, "amount_cents": 2500,
           "cycle": "2026-11", "fencing_token": token})
}

#[tokio::test]
async fn fencing_over_http_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, server) = serve(dir.path()).await;
    let (status, body) = call(&addr, "POST", "/charges", Some(charge("acme", 4))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["seq"], 1);
    assert_eq!(call(&addr, "POST", "/charges", Some(charge("globex", 6))).await.0, 201);
    let (status, body) = call(&addr, "POST", "/charges", Some(charge("initech", 4))).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["last_token"], 6);
    assert_eq!(call(&addr, "POST", "/charges", Some(json!({"customer": 1}))).await.0, 400);

    let (status, body) = call(&addr, "GET", "/charges?cycle=2026-11", None).await;
    assert_eq!(status, 200);
    let customers: Vec<&str> =
        body["charges"].as_array().unwrap().iter().map(|c| c["customer"].as_str().unwrap()).collect();
    assert_eq!(customers, vec!["acme", "globex"]);
    assert_eq!(call(&addr, "GET", "/charges?cycle=2030-01", None).await.1["charges"], json!([]));
    let (_, check) = call(&addr, "GET", "/check", None).await;
    assert_eq!(check["ok"], true);
    assert_eq!(check["rejected_writes"], 1);

    // A restart on the same directory: everything is back, and so is the token order.
    server.abort();
    let (addr, _server) = serve(dir.path()).await;
    let (_, body) = call(&addr, "GET", "/charges", None).await;
    assert_eq!(body["charges"].as_array().unwrap().len(), 2);
    assert_eq!(call(&addr, "POST", "/charges", Some(charge("initech", 5))).await.0, 409);
    assert_eq!(call(&addr, "POST", "/charges", Some(charge("acme", 7))).await.0, 201);
    let (_, check) = call(&addr, "GET", "/check", None).await;
    assert_eq!(check["ok"], false, "acme was charged twice in 2026-11: {check}");
    assert_eq!(check["double_charges"][0]["customer"], "acme");
    assert_eq!(call(&addr, "GET", "/health", None).await.0, 200);
}

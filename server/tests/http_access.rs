//! The HTTP port's browser checks against real dls processes: `/api/v1` POSTs need
//! `Content-Type: application/json`, a foreign `Host` (DNS rebinding) or `Origin` (a page of
//! another site) is refused, CORS is off unless `--http-cors-origin` lists the origin, and
//! the operator endpoints stay plain GETs. Every refusal changes nothing.

use crate::common;

use common::{Cluster, PATIENCE};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Status, headers and JSON body (Null when the body is not JSON) of one call.
struct Answer {
    status: u16,
    headers: hyper::HeaderMap,
    json: Value,
}

async fn call(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut req = hyper::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = tokio::time::timeout(PATIENCE, client.request(req)).await.expect("HTTP call hung").unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Answer { status, headers, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
}

const JSON: (&str, &str) = ("content-type", "application/json");
const BEGIN: &str = r#"{"timeout_ms": 10000}"#;

/// Transactions the server holds (nothing may be begun by a refused call).
async fn active(addr: &str) -> u64 {
    let a = call(addr, "GET", "/api/v1/cluster", &[], "").await;
    a.json["active_transactions"].as_u64().expect("cluster answer")
}

#[track_caller]
fn assert_refused(a: &Answer, status: u16, kind: &str, says: &str) {
    assert_eq!(a.status, status, "{}", a.json);
    assert_eq!(a.json["error"]["kind"], kind, "{}", a.json);
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{message:?} should mention {says:?}");
    assert!(a.headers.get("access-control-allow-origin").is_none(), "no CORS header on a refusal");
}

#[tokio::test]
async fn posts_need_a_json_content_type() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    for ctype in [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data")] {
        let headers: Vec<(&str, &str)> = ctype.map(|c| ("content-type", c)).into_iter().collect();
        let a = call(&h, "POST", "/api/v1/transactions", &headers, BEGIN).await;
        assert_refused(&a, 415, "INVALID_ARGUMENT", "Content-Type: application/json");
        let a = call(&h, "POST", "/api/v1/transactions/1/heartbeat", &headers, "").await;
        assert_eq!(a.status, 415, "{ctype:?}: {}", a.json);
    }
    assert_eq!(active(&h).await, 0, "a refused POST begins nothing");
    let a =
        call(&h, "POST", "/api/v1/transactions", &[("content-type", "Application/JSON; charset=utf-8")], BEGIN).await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(active(&h).await, 1);
}

#[tokio::test]
async fn a_foreign_host_is_refused_on_the_api_but_not_on_the_operator_endpoints() {
    let cluster = Cluster::start_with(1, &["--http-allowed-host", "dls.test"]).await;
    let h = cluster.http_addr(1);
    let port = h.rsplit_once(':').unwrap().1;
    // A DNS-rebinding page reaches the port under its own name.
    let rebound = format!("rebind.example:{port}");
    let a = call(&h, "POST", "/api/v1/transactions", &[JSON, ("host", &rebound)], BEGIN).await;
    assert_refused(&a, 403, "PERMISSION_DENIED", "--http-allowed-host rebind.example");
    let a = call(&h, "GET", "/api/v1/cluster", &[("host", &rebound)], "").await;
    assert_eq!(a.status, 403);
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(call(&h, "GET", path, &[("host", &rebound)], "").await.status, 200, "{path}");
    }
    assert_eq!(active(&h).await, 0);
    // The listen address, loopback names and --http-allowed-host names are this server.
    for host in [h.clone(), format!("localhost:{port}"), format!("dls.test:{port}")] {
        let a = call(&h, "POST", "/api/v1/transactions", &[JSON, ("host", &host)], BEGIN).await;
        assert_eq!(a.status, 200, "{host}: {}", a.json);
    }
}

#[tokio::test]
async fn a_page_of_another_origin_cannot_call_the_api_without_cors_configured() {
    let cluster = Cluster::start(1).await;
    let h = cluster.http_addr(1);
    let evil = ("origin", "http://evil.example");
    // A cross-site form post, and a script's JSON post.
    let form = call(&h, "POST", "/api/v1/transactions", &[evil, ("content-type", "text/plain")], BEGIN).await;
    assert_refused(&form, 403, "PERMISSION_DENIED", "--http-cors-origin http://evil.example");
    let script = call(&h, "POST", "/api/v1/transactions", &[evil, JSON], BEGIN).await;
    assert_refused(&script, 403, "PERMISSION_DENIED", "http://evil.example");
    let events = call(&h, "GET", "/api/v1/events", &[evil], "").await;
    assert_eq!(events.status, 403);
    // A preflight is refused: CORS is off.
    let preflight =
        [evil, ("access-control-request-method", "POST"), ("access-control-request-headers", "content-type")];
    let a = call(&h, "OPTIONS", "/api/v1/transactions", &preflight, "").await;
    assert_refused(&a, 403, "PERMISSION_DENIED", "--http-cors-origin");
    assert_eq!(active(&h).await, 0);
    // The server's own pages (the Playground) are same-origin.
    let own = format!("http://{h}");
    let a = call(&h, "POST", "/api/v1/transactions", &[("origin", own.as_str()), JSON], BEGIN).await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert!(a.headers.get("access-control-allow-origin").is_none(), "no CORS headers for the same origin");
}

#[tokio::test]
async fn listed_cors_origins_get_their_preflight_and_headers_and_no_one_else() {
    let cluster = Cluster::start_with(1, &["--http-cors-origin", "https://ops.example:8443"]).await;
    let h = cluster.http_addr(1);
    let ops = ("origin", "https://ops.example:8443");
    let preflight = |origin| {
        [
            origin,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "authorization,content-type"),
        ]
    };
    let a = call(&h, "OPTIONS", "/api/v1/transactions", &preflight(ops), "").await;
    assert_eq!(a.status, 204);
    assert_eq!(a.headers["access-control-allow-origin"], "https://ops.example:8443");
    assert_eq!(a.headers["access-control-allow-methods"], "GET, POST");
    let allowed = a.headers["access-control-allow-headers"].to_str().unwrap();
    assert!(allowed.contains("authorization") && allowed.contains("content-type"), "{allowed}");
    assert_eq!(a.headers["vary"], "Origin");

    let a = call(&h, "POST", "/api/v1/transactions", &[ops, JSON], BEGIN).await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(a.headers["access-control-allow-origin"], "https://ops.example:8443");
    let a = call(&h, "GET", "/api/v1/cluster", &[ops], "").await;
    assert_eq!(
        (a.status, a.headers["access-control-allow-origin"].to_str().unwrap()),
        (200, "https://ops.example:8443")
    );

    // Another origin, or the same host on another scheme or port, is still refused.
    for other in ["https://ops.example", "http://ops.example:8443", "https://evil.example"] {
        let a = call(&h, "OPTIONS", "/api/v1/transactions", &preflight(("origin", other)), "").await;
        assert_refused(&a, 403, "PERMISSION_DENIED", other);
        let a = call(&h, "POST", "/api/v1/transactions", &[("origin", other), JSON], BEGIN).await;
        assert_refused(&a, 403, "PERMISSION_DENIED", other);
    }
    assert_eq!(active(&h).await, 1);
}

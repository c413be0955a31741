//! Exports finished spans to an OpenTelemetry collector: OTLP over HTTP with the JSON
//! encoding (`POST {endpoint}/v1/traces`).
//!
//! Written by hand rather than with the `opentelemetry-otlp` crates: the node exports three
//! kinds of span with a few attributes, which is a page of `serde_json`; the crates would add
//! an SDK, a second HTTP stack or a tonic of their own, and must match this tree's tonic
//! 0.12 / hyper 1 release by release. The POST reuses hyper-util and rustls, already built.
//!
//! Bounded: spans wait in a queue of `QUEUE` and leave in batches; when the collector is
//! slow or down the queue fills and new spans are dropped and counted (never waited for),
//! and a failed batch is dropped and counted, not retried, so lock calls never wait for
//! the collector and memory stays bounded.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Spans waiting for export; past it new spans are dropped.
pub const QUEUE: usize = 4096;
/// Spans per request at most.
const MAX_BATCH: usize = 512;
/// How long a batch waits for more spans once its first arrived.
const LINGER: Duration = Duration::from_millis(200);
/// One POST, connecting included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// A finished span of this node.
#[derive(Clone, Debug)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: [u8; 8],
    pub tracestate: Option<String>,
    pub name: &'static str,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Attr)>,
    /// Set when the span describes a failure (a wait that ended without a grant, a
    /// revoked lock): the status message.
    pub error: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Attr {
    Str(String),
    Int(u64),
    Bool(bool),
}

/// What the exporter did (shown in `/metrics`).
#[derive(Debug, Default)]
pub struct ExportStats {
    pub exported: AtomicU64,
    pub dropped: AtomicU64,
    pub failed_requests: AtomicU64,
}

/// The queue in front of the export task.
pub struct Exporter {
    queue: mpsc::Sender<Span>,
    pub stats: Arc<ExportStats>,
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

impl Exporter {
    /// Starts the export task POSTing to `traces_uri` (the full `/v1/traces` URL).
    pub fn start(traces_uri: http::Uri, node_id: u64) -> Exporter {
        Exporter::with_queue(traces_uri, node_id, QUEUE)
    }

    fn with_queue(traces_uri: http::Uri, node_id: u64, queue: usize) -> Exporter {
        let (queue, spans) = mpsc::channel(queue);
        let stats = Arc::new(ExportStats::default());
        let connector =
            hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        tokio::spawn(export(spans, client, traces_uri, node_id, stats.clone()));
        Exporter { queue, stats }
    }

    /// An exporter whose spans go to `queue` (for tests that read them).
    #[cfg(test)]
    pub fn to_queue(queue: mpsc::Sender<Span>) -> Exporter {
        Exporter { queue, stats: Arc::default() }
    }

    /// Queues `span`, or drops it when the queue is full.
    pub fn send(&self, span: Span) {
        if self.queue.try_send(span).is_err() {
            self.stats.dropped.fetch_add(1, Relaxed);
        }
    }
}

async fn export(
    mut spans: mpsc::Receiver<Span>,
    client: HttpClient,
    uri: http::Uri,
    node_id: u64,
    stats: Arc<ExportStats>,
) {
    while let Some(first) = spans.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(until, spans.recv()).await {
                Ok(Some(span)) => batch.push(span),
                _ => break,
            }
        }
        let count = batch.len() as u64;
        match post(&client, &uri, encode(&batch, node_id)).await {
            Ok(()) => stats.exported.fetch_add(count, Relaxed),
            Err(why) => {
                tracing::debug!(spans = count, "trace export to {uri} failed: {why}");
                stats.failed_requests.fetch_add(1, Relaxed);
                stats.dropped.fetch_add(count, Relaxed)
            }
        };
    }
}

async fn post(client: &HttpClient, uri: &http::Uri, body: Vec<u8>) -> Result<(), String> {
    let request = http::Request::post(uri.clone())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, concat!("caerus-dls/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("cannot build the request: {e}"))?;
    match tokio::time::timeout(EXPORT_TIMEOUT, client.request(request)).await {
        Err(_) => Err(format!("no answer within {EXPORT_TIMEOUT:?}")),
        Ok(Err(e)) => Err(format!("request failed: {e}")),
        Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
        Ok(Ok(resp)) => Err(format!("answered {}", resp.status())),
    }
}

/// An `ExportTraceServiceRequest` in OTLP's JSON encoding (ids in hex, 64-bit integers as
/// strings).
pub fn encode(spans: &[Span], node_id: u64) -> Vec<u8> {
    let spans: Vec<Value> = spans.iter().map(span_json).collect();
    let body = json!({
        "resourceSpans": [{
            "resource": { "attributes": [
                attr("service.name", &Attr::Str("caerus-dls".into())),
                attr("service.version", &Attr::Str(env!("CARGO_PKG_VERSION").into())),
                attr("service.instance.id", &Attr::Str(format!("node-{node_id}"))),
            ]},
            "scopeSpans": [{ "scope": { "name": "caerus-dls" }, "spans": spans }],
        }]
    });
    serde_json::to_vec(&body).expect("JSON values encode")
}

fn span_json(s: &Span) -> Value {
    let mut v = json!({
        "traceId": hex::encode(s.trace_id),
        "spanId": hex::encode(s.span_id),
        "parentSpanId": hex::encode(s.parent_span_id),
        "name": s.name,
        // SPAN_KIND_INTERNAL: work inside the node on behalf of the client's call.
        "kind": 1,
        "startTimeUnixNano": unix_nanos(s.start).to_string(),
        "endTimeUnixNano": unix_nanos(s.end).to_string(),
        "attributes": s.attributes.iter().map(|(k, a)| attr(k, a)).collect::<Vec<_>>(),
        // STATUS_CODE_OK, or STATUS_CODE_ERROR with its message.
        "status": match &s.error {
            None => json!({ "code": 1 }),
            Some(m) => json!({ "code": 2, "message": m }),
        },
    });
    if let Some(state) = &s.tracestate {
        v["traceState"] = json!(state);
    }
    v
}

fn attr(key: &str, value: &Attr) -> Value {
    let value = match value {
        Attr::Str(s) => json!({ "stringValue": s }),
        Attr::Int(i) => json!({ "intValue": i.to_string() }),
        Attr::Bool(b) => json!({ "boolValue": b }),
    };
    json!({ "key": key, "value": value })
}

fn unix_nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: SystemTime) -> Span {
        Span {
            trace_id: [0xab; 16],
            span_id: [1; 8],
            parent_span_id: [2; 8],
            tracestate: Some("k=v".into()),
            name: "dls.lock.wait",
            start,
            end: start + Duration::from_millis(3),
            attributes: vec![("dls.namespace", Attr::Str("jobs".into())), ("dls.txn", Attr::Int(7))],
            error: Some("timed out".into()),
        }
    }

    #[test]
    fn spans_encode_as_otlp_json_with_hex_ids_and_string_times() {
        let start = UNIX_EPOCH + Duration::from_millis(1_500);
        let v: Value = serde_json::from_slice(&encode(&[span(start)], 2)).unwrap();
        let s = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "ab".repeat(16));
        assert_eq!(s["parentSpanId"], "0202020202020202");
        assert_eq!(s["startTimeUnixNano"], "1500000000");
        assert_eq!(s["endTimeUnixNano"], "1503000000");
        assert_eq!(s["traceState"], "k=v");
        assert_eq!(s["status"]["code"], 2);
        assert_eq!(s["attributes"][1]["value"]["intValue"], "7");
        assert_eq!(v["resourceSpans"][0]["resource"]["attributes"][2]["value"]["stringValue"], "node-2");
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_spans_instead_of_waiting() {
        // Nothing listens on port 9 of loopback: every export fails too.
        let exporter = Exporter::with_queue("http://127.0.0.1:9/v1/traces".parse().unwrap(), 1, 4);
        for _ in 0..50 {
            exporter.send(span(SystemTime::now()));
        }
        assert!(exporter.stats.dropped.load(Relaxed) >= 46, "{:?}", exporter.stats);
        let failed = || exporter.stats.failed_requests.load(Relaxed);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while failed() == 0 && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(failed() >= 1 && exporter.stats.dropped.load(Relaxed) >= 50, "{:?}", exporter.stats);
        assert_eq!(exporter.stats.exported.load(Relaxed), 0);
    }
}

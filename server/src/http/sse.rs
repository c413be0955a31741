//! `GET /api/v1/events`: the replicated event log as Server-Sent Events. Each event is one
//! `id: <sequence>` + `data: <json>` frame, so a browser's EventSource resumes with
//! `Last-Event-ID` by itself (`?after=N` does the same for curl). When the node serving
//! the stream loses leadership, the stream reattaches to the new leader from the next
//! sequence: the log is replicated, so nothing is skipped or repeated.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use caerus_proto::metadata;
use caerus_proto::v1::lock_service_server::LockService;
use caerus_proto::v1::{self as pb};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::gateway::{BoxStream, Caller, Gateway};
use super::json::{self, ApiFailure};
use super::query::query_pairs;

/// A comment line this often keeps proxies and browsers from closing an idle stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn parse_request(headers: &HeaderMap, q: &Option<String>) -> Result<pb::WatchEventsRequest, ApiFailure> {
    let mut req = pb::WatchEventsRequest::default();
    let mut after: Option<u64> = None;
    let num = |name: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| ApiFailure::bad_request(format!("{name} must be an event sequence number, got {v:?}")))
    };
    for (k, v) in query_pairs(q) {
        match k.as_str() {
            "after" => after = Some(num("after", &v)?),
            "only_new" => req.only_new = matches!(v.as_str(), "" | "1" | "true"),
            "namespace_prefix" => req.namespace_prefixes.push(v),
            "kinds" | "kind" => {
                for name in v.split(',').filter(|s| !s.is_empty()) {
                    let kind = pb::EventKind::from_str_name(&name.to_ascii_uppercase())
                        .filter(|k| *k != pb::EventKind::Unspecified)
                        .ok_or_else(|| {
                            ApiFailure::bad_request(format!(
                                "unknown event kind {name:?}; use DEADLOCK_RESOLVED, TRANSACTION_EXPIRED, TRANSACTION_ABORTED or LOCK_REVOKED"
                            ))
                        })?;
                    req.kinds.push(kind as i32);
                }
            }
            other => {
                return Err(ApiFailure::bad_request(format!(
                    "unknown query parameter {other:?}; use after, only_new, kinds, namespace_prefix"
                )))
            }
        }
    }
    // The browser's reconnect header wins: it is where this very stream left off.
    if let Some(v) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        after = Some(num("Last-Event-ID", v.trim())?);
    }
    if let Some(n) = after {
        // No event can follow the largest sequence number; refused rather than wrapped to 0
        // (which would replay the whole log).
        req.from_sequence = n.checked_add(1).ok_or_else(|| {
            ApiFailure::bad_request(format!(
                "after (or Last-Event-ID) must be below {n}: no event can follow it; use only_new=true to follow new events"
            ))
        })?;
        req.only_new = false;
    }
    Ok(req)
}

/// Opens WatchEvents here or on the leader; returns the stream and the sequence it starts at.
async fn open(
    gw: &Gateway,
    req: tonic::Request<pb::WatchEventsRequest>,
) -> Result<(BoxStream<pb::Event>, u64), Status> {
    let r = LockService::watch_events(&gw.lock, req).await?;
    let from = r.metadata().get(metadata::FIRST_SEQUENCE).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    Ok((r.into_inner(), from.unwrap_or(0)))
}

async fn attach(
    gw: &Arc<Gateway>,
    caller: &Caller,
    req: &pb::WatchEventsRequest,
) -> Result<(BoxStream<pb::Event>, u64), Status> {
    gw.call(|| {
        let r = caller.request(req.clone());
        let gw = gw.clone();
        async move { open(&gw, r).await }
    })
    .await
}

/// The event watch as the relay resumes it: from the event after the last one sent.
struct EventRelay {
    gw: Arc<Gateway>,
    caller: Caller,
    req: pb::WatchEventsRequest,
}

impl Resumable for EventRelay {
    type Msg = pb::Event;

    fn frame(&mut self, e: &pb::Event) -> String {
        self.req.from_sequence = e.sequence + 1;
        self.req.only_new = false;
        format!("id: {}\ndata: {}\n\n", e.sequence, json::event(e))
    }

    async fn reattach(&self) -> Result<BoxStream<pb::Event>, Status> {
        attach(&self.gw, &self.caller, &self.req).await.map(|(stream, _)| stream)
    }
}

pub async fn events(
    State(gw): State<Arc<Gateway>>,
    caller: Caller,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Response {
    let mut req = match parse_request(&headers, &q) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    // Attach before answering, so a bad key or prefix is an HTTP error, not a broken stream.
    let (stream, from) = match attach(&gw, &caller, &req).await {
        Ok(s) => s,
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    // Until an event arrives, a reattach starts where this attach did.
    req.from_sequence = from;
    req.only_new = false;
    let greeting = format!(": caerus-dls events from sequence {from}\n\n");
    relay(EventRelay { gw, caller, req }, stream, Some(greeting))
}

/// What [`relay`] needs of a watch: how to write one message as a frame (noting where a
/// reattach resumes), and how to open the watch again after a leader change.
pub(super) trait Resumable: Send + 'static {
    type Msg: Send + 'static;
    fn frame(&mut self, msg: &Self::Msg) -> String;
    fn reattach(&self) -> impl std::future::Future<Output = Result<BoxStream<Self::Msg>, Status>> + Send;
}

/// Streams a watch to the client as Server-Sent Events: `greeting` first, then a frame per
/// message, a keep-alive comment every [`KEEP_ALIVE`], a reattach when leadership moves,
/// and an error frame when the watch cannot go on.
pub(super) fn relay<R: Resumable>(mut watch: R, mut stream: BoxStream<R::Msg>, greeting: Option<String>) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        if let Some(g) = greeting {
            let _ = tx.send(Bytes::from(g)).await;
        }
        let mut keep_alive = tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                _ = keep_alive.tick() => {
                    if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() { return; }
                    continue;
                }
                _ = tx.closed() => return,
            };
            match item {
                Some(Ok(msg)) => {
                    if tx.send(Bytes::from(watch.frame(&msg))).await.is_err() {
                        return;
                    }
                }
                Some(Err(s)) if Gateway::is_leader_change(&s) => {
                    tracing::info!("server-sent events: leadership moved, reattaching");
                    match watch.reattach().await {
                        Ok(s) => stream = s,
                        Err(s) => return send_error(&tx, s).await,
                    }
                }
                Some(Err(s)) => return send_error(&tx, s).await,
                None => return,
            }
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body)
        .into_response()
}

/// Ends a stream with an error frame (`event: dls-error`, the usual error JSON).
async fn send_error(tx: &mpsc::Sender<Bytes>, s: Status) {
    let body = ApiFailure::from(s).body();
    let _ = tx.send(Bytes::from(format!("event: dls-error\ndata: {body}\n\n"))).await;
}

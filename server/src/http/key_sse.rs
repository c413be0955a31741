//! `GET /api/v1/keys/watch?namespace=N&key=K`: who holds one key, as Server-Sent Events.
//! Each update is one `id: <cursor>` + `data: <json>` frame, so a browser's EventSource
//! resumes with `Last-Event-ID` by itself; when the serving node loses leadership the
//! stream reattaches to the new leader with the last cursor, and the next frame reports
//! what changed meanwhile.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use caerus_proto::v1::lock_service_server::LockService;
use caerus_proto::v1::{self as pb};
use tonic::Status;

use super::gateway::{BoxStream, Caller, Gateway};
use super::json::{self, ApiFailure};
use super::query::query_pairs;
use super::sse::{relay, Resumable};

fn parse_request(headers: &HeaderMap, q: &Option<String>) -> Result<pb::WatchKeyRequest, ApiFailure> {
    let mut req = pb::WatchKeyRequest::default();
    for (k, v) in query_pairs(q) {
        match k.as_str() {
            "namespace" => req.namespace = v,
            "key" => req.key = v,
            "cursor" => req.cursor = v,
            other => {
                return Err(ApiFailure::bad_request(format!(
                    "unknown query parameter {other:?}; use namespace, key, cursor"
                )))
            }
        }
    }
    // The browser's reconnect header wins: it is where this very stream left off.
    if let Some(v) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        req.cursor = v.trim().to_string();
    }
    Ok(req)
}

async fn attach(
    gw: &Arc<Gateway>,
    caller: &Caller,
    req: &pb::WatchKeyRequest,
) -> Result<BoxStream<pb::KeyHolders>, Status> {
    gw.call(|| {
        let r = caller.request(req.clone());
        let gw = gw.clone();
        async move { Ok(LockService::watch_key(&gw.lock, r).await?.into_inner()) }
    })
    .await
}

/// The key watch as the relay resumes it: from the holders of the last frame sent.
struct KeyRelay {
    gw: Arc<Gateway>,
    caller: Caller,
    req: pb::WatchKeyRequest,
}

impl Resumable for KeyRelay {
    type Msg = pb::KeyHolders;

    fn frame(&mut self, u: &pb::KeyHolders) -> String {
        self.req.cursor = u.cursor.clone();
        format!("id: {}\ndata: {}\n\n", u.cursor, json::key_update(u))
    }

    async fn reattach(&self) -> Result<BoxStream<pb::KeyHolders>, Status> {
        attach(&self.gw, &self.caller, &self.req).await
    }
}

pub async fn watch_key(
    State(gw): State<Arc<Gateway>>,
    caller: Caller,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Response {
    let req = match parse_request(&headers, &q) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    // Attach before answering, so a bad key or namespace is an HTTP error, not a broken stream.
    let stream = match attach(&gw, &caller, &req).await {
        Ok(s) => s,
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    relay(KeyRelay { gw, caller, req }, stream, None)
}

//! The HTTP/JSON API under `/api/v1`: each handler decodes JSON into the gRPC request and
//! runs it through [`Gateway`] on the same `LockApi`/`AdminApi` code gRPC clients reach.
//! Validation, auth and lock semantics all stay there; this file only translates.
//! docs/http-api.md describes every call; `/openapi.json` is the machine-readable form.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::acquire_locks_response::Event as AcquireAllEvent;
use caerus_proto::v1::admin_service_server::AdminService;
use caerus_proto::v1::lock_service_server::LockService;
use caerus_proto::v1::{self as pb};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::access::{self, Access};
use super::gateway::{BoxStream, Caller, Gateway};
use super::json::{self, ok, ApiFailure};
use super::query::query_pairs;
use super::{key_sse, sse};
use crate::api::auth::KeyRing;

pub fn routes(gw: Arc<Gateway>, access: Arc<Access>) -> Router {
    Router::new()
        .route("/api/v1/transactions", post(begin))
        .route("/api/v1/transactions/:id", get(status))
        .route("/api/v1/transactions/:id/heartbeat", post(heartbeat))
        .route("/api/v1/transactions/:id/locks", post(acquire))
        .route("/api/v1/transactions/:id/locks/all", post(acquire_all))
        .route("/api/v1/transactions/:id/release", post(release))
        .route("/api/v1/transactions/:id/downgrade", post(downgrade))
        .route("/api/v1/fencing-tokens/verify", post(verify_token))
        .route("/api/v1/transactions/:id/end", post(end))
        .route("/api/v1/transactions/:id/abort", post(abort))
        .route("/api/v1/locks", get(list_locks))
        .route("/api/v1/lock-delays", get(lock_delays).post(set_lock_delay))
        .route("/api/v1/api-keys", get(list_api_keys).post(create_api_key))
        .route("/api/v1/api-keys/:name", delete(revoke_api_key))
        .route("/api/v1/api-keys/:name/rotate", post(rotate_api_key))
        .route("/api/v1/cluster", get(cluster))
        .route("/api/v1/events", get(sse::events))
        .route("/api/v1/keys/watch", get(key_sse::watch_key))
        .with_state(gw.clone())
        // The key is checked from the headers before a body is read, as on the gRPC ports.
        .layer(axum::middleware::from_fn_with_state(gw.lock.local.keys.clone(), check_key))
        // Around every route, unknown methods (a preflight's OPTIONS, answered without a key)
        // included.
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
}

/// Refuses a call without a valid API key before its body is read (`api::key_check`).
async fn check_key(State(keys): State<Arc<KeyRing>>, req: axum::extract::Request, next: Next) -> Response {
    match keys.authenticate(&MetadataMap::from_headers(req.headers().clone())) {
        Ok(_) => next.run(req).await,
        Err(refused) => ApiFailure::from(Status::from(refused)).into_response(),
    }
}

/// Runs one unary RPC here or on the leader (see [`Gateway::call`]).
macro_rules! unary {
    ($gw:expr, $caller:expr, $msg:expr, $api:ident, $server:ident, $method:ident) => {{
        let (gw, caller, msg) = (&$gw, &$caller, $msg);
        gw.call(|| {
            let req = caller.request(msg.clone());
            async move { $server::$method(&gw.$api, req).await.map(|r| r.into_inner()) }
        })
        .await
        .map_err(ApiFailure::from)
    }};
}

type HttpResult = Result<Response, ApiFailure>;

/// Decodes a JSON body; an empty body is `{}`.
fn body<T: DeserializeOwned>(raw: &Bytes) -> Result<T, ApiFailure> {
    let text = if raw.iter().all(u8::is_ascii_whitespace) { &b"{}"[..] } else { &raw[..] };
    serde_json::from_slice(text)
        .map_err(|e| ApiFailure::bad_request(format!("request body is not valid JSON for this call: {e}")))
}

fn path_id(raw: &str) -> Result<u64, ApiFailure> {
    raw.parse().map_err(|_| {
        ApiFailure::bad_request(format!("transaction id in the path must be an unsigned 64-bit integer, got {raw:?}"))
    })
}

/// A request id for retry safety: the caller's, or a fresh one so that the gateway's retry
/// after a leader change is answered from the first attempt's record.
fn request_id(given: String) -> String {
    if given.is_empty() {
        uuid::Uuid::new_v4().to_string()
    } else {
        given
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BeginBody {
    #[serde(default)]
    timeout_ms: i64,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    name: String,
    #[serde(default)]
    request_id: String,
    #[serde(default)]
    max_duration_ms: i64,
}

async fn begin(State(gw): State<Arc<Gateway>>, caller: Caller, raw: Bytes) -> HttpResult {
    let b: BeginBody = body(&raw)?;
    let msg = pb::BeginTransactionRequest {
        timeout_ms: b.timeout_ms,
        priority: b.priority,
        name: b.name,
        request_id: request_id(b.request_id),
        max_duration_ms: b.max_duration_ms,
    };
    let r = unary!(gw, caller, msg, lock, LockService, begin_transaction)?;
    Ok(ok(json!({"transaction_id": json::id_str(r.transaction_id), "lease_timeout_ms": r.lease_timeout_ms})))
}

async fn status(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>) -> HttpResult {
    let msg = pb::GetTransactionStatusRequest { transaction_id: path_id(&id)? };
    let r = unary!(gw, caller, msg, lock, LockService, get_transaction_status)?;
    Ok(ok(json::status(&r)))
}

async fn heartbeat(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>) -> HttpResult {
    let msg = pb::HeartbeatRequest { transaction_id: path_id(&id)?, more_transaction_ids: Vec::new() };
    let r = unary!(gw, caller, msg, lock, LockService, heartbeat)?;
    Ok(ok(json!({"lease_remaining_ms": r.lease_remaining_ms})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    timeout_ms: i64,
    #[serde(default)]
    request_id: String,
    /// Answer as soon as the request is queued (or granted) instead of waiting for the
    /// grant; the wait goes on in the server. Call again with the same request_id to wait.
    #[serde(default)]
    return_when_queued: bool,
    /// With mode SEMAPHORE: the semaphore's permit count.
    #[serde(default)]
    permits: u32,
}

async fn acquire(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: AcquireBody = body(&raw)?;
    let request_id = request_id(b.request_id);
    let msg = pb::AcquireLockRequest {
        transaction_id: path_id(&id)?,
        namespace: b.namespace,
        key: b.key,
        mode: json::mode_from_name(b.mode.as_deref())?,
        timeout_ms: b.timeout_ms,
        request_id: request_id.clone(),
        begin: None,
        stay_open: false,
        permits: b.permits,
    };
    let quick = b.return_when_queued;
    // The whole wait is one attempt: if leadership moves mid-wait, the next attempt
    // re-attaches to the same queued request on the new leader (same request_id).
    let answer = gw
        .call(|| {
            let req = caller.request(msg.clone());
            let gw = gw.clone();
            async move { follow_acquire(&gw, req, quick).await }
        })
        .await?;
    let mut answer = answer;
    answer["request_id"] = json!(request_id);
    Ok(ok(answer))
}

async fn follow_acquire(
    gw: &Gateway,
    req: tonic::Request<pb::AcquireLockRequest>,
    return_when_queued: bool,
) -> Result<Value, Status> {
    let stream = LockService::acquire_lock(&gw.lock, req).await?.into_inner();
    first_answer(stream, |item| match item.event {
        Some(AcquireEvent::Granted(g)) => Some(granted_json(&g, "granted")),
        Some(AcquireEvent::Queued(q)) if return_when_queued => Some(queued_json(&q)),
        _ => None,
    })
    .await
}

/// Reads an acquire stream until `answer` finds the reply in a message: the grant, or the
/// first queued message for a caller that asked to return once queued.
async fn first_answer<T>(mut stream: BoxStream<T>, answer: impl Fn(T) -> Option<Value>) -> Result<Value, Status> {
    while let Some(item) = stream.next().await {
        if let Some(reply) = answer(item?) {
            return Ok(reply);
        }
    }
    Err(Status::unavailable("the acquire stream ended without an answer; call again with the same request_id"))
}

/// A granted lock; `status` names the outcome for a single acquire, and is omitted inside lists.
fn granted_json(g: &pb::Granted, status: &str) -> Value {
    let mut v = json!({
        "fencing_token": json::id_str(g.fencing_token),
        "namespace": g.namespace,
        "key": g.key,
        "mode": json::mode_name(g.mode),
    });
    if !status.is_empty() {
        v["status"] = json!(status);
    }
    v
}

fn queued_json(q: &pb::Queued) -> Value {
    json!({
        "status": "queued",
        "position": q.position,
        "blocking_transaction_ids": json::ids(&q.blocking_transaction_ids),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockItem {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireAllBody {
    #[serde(default)]
    locks: Vec<LockItem>,
    #[serde(default)]
    timeout_ms: i64,
    #[serde(default)]
    request_id: String,
    #[serde(default)]
    return_when_queued: bool,
}

/// Several locks at once, all or nothing (`AcquireLocks`).
async fn acquire_all(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: AcquireAllBody = body(&raw)?;
    let request_id = request_id(b.request_id);
    let mut locks = Vec::with_capacity(b.locks.len());
    for l in b.locks {
        locks.push(pb::LockRequest {
            namespace: l.namespace,
            key: l.key,
            mode: json::mode_from_name(l.mode.as_deref())?,
        });
    }
    let msg = pb::AcquireLocksRequest {
        transaction_id: path_id(&id)?,
        locks,
        timeout_ms: b.timeout_ms,
        request_id: request_id.clone(),
        stay_open: false,
    };
    let quick = b.return_when_queued;
    let mut answer = gw
        .call(|| {
            let req = caller.request(msg.clone());
            let gw = gw.clone();
            async move {
                let stream = LockService::acquire_locks(&gw.lock, req).await?.into_inner();
                first_answer(stream, |item| match item.event {
                    Some(AcquireAllEvent::Granted(g)) => Some(json!({
                        "status": "granted",
                        "locks": g.locks.iter().map(|l| granted_json(l, "")).collect::<Vec<_>>(),
                    })),
                    Some(AcquireAllEvent::Queued(q)) if quick => Some(queued_json(&q)),
                    _ => None,
                })
                .await
            }
        })
        .await?;
    answer["request_id"] = json!(request_id);
    Ok(ok(answer))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    request_id: String,
}

async fn release(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: ReleaseBody = body(&raw)?;
    let msg = pb::ReleaseLockRequest {
        transaction_id: path_id(&id)?,
        namespace: b.namespace,
        key: b.key,
        request_id: request_id(b.request_id),
    };
    let r = unary!(gw, caller, msg, lock, LockService, release_lock)?;
    Ok(ok(json!({"released": r.released})))
}

async fn downgrade(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: ReleaseBody = body(&raw)?;
    let msg = pb::DowngradeLockRequest {
        transaction_id: path_id(&id)?,
        namespace: b.namespace,
        key: b.key,
        request_id: request_id(b.request_id),
    };
    let r = unary!(gw, caller, msg, lock, LockService, downgrade_lock)?;
    let lock = r.lock.as_ref().filter(|_| r.held).map(|l| granted_json(l, ""));
    Ok(ok(json!({"held": r.held, "lock": lock})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyBody {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    key: String,
    /// A decimal string (as the API writes tokens) or a JSON number.
    fencing_token: Value,
}

async fn verify_token(State(gw): State<Arc<Gateway>>, caller: Caller, raw: Bytes) -> HttpResult {
    let b: VerifyBody = body(&raw)?;
    let token = match &b.fencing_token {
        Value::String(s) => s.parse::<u64>().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| {
        ApiFailure::bad_request(format!(
            "fencing_token must be an unsigned 64-bit integer (a decimal string or a number), got {}",
            b.fencing_token
        ))
    })?;
    let msg = pb::VerifyFencingTokenRequest { namespace: b.namespace, key: b.key, fencing_token: token };
    let r = unary!(gw, caller, msg, lock, LockService, verify_fencing_token)?;
    Ok(ok(json!({"current": r.current, "current_tokens": json::ids(&r.current_tokens)})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndBody {
    /// Required here (gRPC defaults to false = abort): an empty body must not abort.
    commit: Option<bool>,
    #[serde(default)]
    request_id: String,
}

async fn end(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: EndBody = body(&raw)?;
    let commit = b
        .commit
        .ok_or_else(|| ApiFailure::bad_request("commit must be given: true to commit, false to abort".into()))?;
    let msg = pb::EndTransactionRequest { transaction_id: path_id(&id)?, commit, request_id: request_id(b.request_id) };
    let r = unary!(gw, caller, msg, lock, LockService, end_transaction)?;
    Ok(ok(json!({"state": json::state_name(r.state), "released_locks": r.released_locks})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AbortBody {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    request_id: String,
}

async fn abort(State(gw): State<Arc<Gateway>>, caller: Caller, Path(id): Path<String>, raw: Bytes) -> HttpResult {
    let b: AbortBody = body(&raw)?;
    let msg = pb::AbortTransactionRequest {
        transaction_id: path_id(&id)?,
        reason: b.reason,
        request_id: request_id(b.request_id),
    };
    let r = unary!(gw, caller, msg, admin, AdminService, abort_transaction)?;
    Ok(ok(json!({"state": json::state_name(r.state), "released_locks": r.released_locks})))
}

async fn list_locks(State(gw): State<Arc<Gateway>>, caller: Caller, RawQuery(q): RawQuery) -> HttpResult {
    let mut prefix = String::new();
    for (k, v) in query_pairs(&q) {
        match k.as_str() {
            "namespace_prefix" => prefix = v,
            other => {
                return Err(ApiFailure::bad_request(format!("unknown query parameter {other:?}; use namespace_prefix")))
            }
        }
    }
    let msg = pb::ListLocksRequest { namespace_prefix: prefix };
    let r = unary!(gw, caller, msg, admin, AdminService, list_locks)?;
    Ok(ok(json::locks(&r)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockDelayBody {
    #[serde(default)]
    namespace_prefix: String,
    delay_ms: i64,
}

async fn set_lock_delay(State(gw): State<Arc<Gateway>>, caller: Caller, raw: Bytes) -> HttpResult {
    let b: LockDelayBody = body(&raw)?;
    let msg = pb::SetLockDelayRequest { namespace_prefix: b.namespace_prefix, delay_ms: b.delay_ms };
    let r = unary!(gw, caller, msg, admin, AdminService, set_lock_delay)?;
    Ok(ok(json!({"previous_delay_ms": r.previous_delay_ms})))
}

async fn lock_delays(State(gw): State<Arc<Gateway>>, caller: Caller) -> HttpResult {
    let msg = pb::ListLockDelaysRequest {};
    let r = unary!(gw, caller, msg, admin, AdminService, list_lock_delays)?;
    let rules: Vec<Value> =
        r.rules.iter().map(|r| json!({"namespace_prefix": r.namespace_prefix, "delay_ms": r.delay_ms})).collect();
    Ok(ok(json!({ "rules": rules })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct KeyLimitsBody {
    #[serde(default)]
    max_transactions: u64,
    #[serde(default)]
    max_watches: u64,
    #[serde(default)]
    max_slot_records: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKeyBody {
    name: String,
    #[serde(default)]
    namespace_prefixes: Vec<String>,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    expires_in_ms: i64,
    #[serde(default)]
    request_id: String,
    #[serde(default)]
    limits: Option<KeyLimitsBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RotateKeyBody {
    #[serde(default)]
    grace_ms: i64,
}

async fn create_api_key(State(gw): State<Arc<Gateway>>, caller: Caller, raw: Bytes) -> HttpResult {
    let b: CreateKeyBody = body(&raw)?;
    let l = b.limits.unwrap_or_default();
    let msg = pb::CreateApiKeyRequest {
        name: b.name,
        namespace_prefixes: b.namespace_prefixes,
        admin: b.admin,
        expires_in_ms: b.expires_in_ms,
        request_id: b.request_id,
        limits: Some(pb::ApiKeyLimits {
            max_transactions: l.max_transactions,
            max_watches: l.max_watches,
            max_slot_records: l.max_slot_records,
        }),
    };
    let r = unary!(gw, caller, msg, admin, AdminService, create_api_key)?;
    Ok(ok(json!({"key": r.key, "info": r.info.as_ref().map(json::api_key)})))
}

async fn list_api_keys(State(gw): State<Arc<Gateway>>, caller: Caller) -> HttpResult {
    let r = unary!(gw, caller, pb::ListApiKeysRequest {}, admin, AdminService, list_api_keys)?;
    Ok(ok(json!({"keys": r.keys.iter().map(json::api_key).collect::<Vec<_>>()})))
}

async fn revoke_api_key(State(gw): State<Arc<Gateway>>, caller: Caller, Path(name): Path<String>) -> HttpResult {
    unary!(gw, caller, pb::RevokeApiKeyRequest { name }, admin, AdminService, revoke_api_key)?;
    Ok(ok(json!({})))
}

async fn rotate_api_key(
    State(gw): State<Arc<Gateway>>,
    caller: Caller,
    Path(name): Path<String>,
    raw: Bytes,
) -> HttpResult {
    let b: RotateKeyBody = if raw.is_empty() { RotateKeyBody { grace_ms: 0 } } else { body(&raw)? };
    let msg = pb::RotateApiKeyRequest { name, grace_ms: b.grace_ms };
    let r = unary!(gw, caller, msg, admin, AdminService, rotate_api_key)?;
    Ok(ok(json!({"key": r.key, "info": r.info.as_ref().map(json::api_key)})))
}

/// This node's view of the cluster (members, leader, term): answered here, not forwarded,
/// so the page can show what each node believes.
async fn cluster(State(gw): State<Arc<Gateway>>, caller: Caller) -> Response {
    let req = caller.request(pb::ClusterStatusRequest {});
    match AdminService::cluster_status(&gw.admin, req).await {
        Ok(r) => ok(json::cluster(&r.into_inner())),
        Err(e) => ApiFailure::from(e).into_response(),
    }
}

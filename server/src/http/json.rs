//! JSON shapes of the HTTP API: gRPC messages to JSON and back, and errors.
//!
//! 64-bit ids and fencing tokens are JSON strings (JavaScript numbers lose precision above
//! 2^53); requests accept a string or a number. Enums are their proto names
//! (`"EXCLUSIVE"`, `"ACTIVE"`, `"DEADLOCK_RESOLVED"`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use caerus_proto::metadata;
use caerus_proto::v1::{self as pb, event::Detail};
use serde_json::{json, Value};
use tonic::{Code, Status};

pub fn id_str(n: u64) -> Value {
    Value::String(n.to_string())
}

pub fn ids(v: &[u64]) -> Value {
    v.iter().map(|&n| id_str(n)).collect()
}

pub fn mode_name(raw: i32) -> &'static str {
    pb::LockMode::try_from(raw).map(|m| m.as_str_name()).unwrap_or("LOCK_MODE_UNSPECIFIED")
}

/// A mode name to the wire value; a missing mode stays 0 so the server's own validation
/// answers, with the same message gRPC callers get.
pub fn mode_from_name(name: Option<&str>) -> Result<i32, ApiFailure> {
    match name {
        None | Some("") => Ok(0),
        Some(n) => match pb::LockMode::from_str_name(&n.to_ascii_uppercase()) {
            Some(m) if m != pb::LockMode::Unspecified => Ok(m as i32),
            _ => Err(ApiFailure::bad_request(format!("mode must be EXCLUSIVE, SHARED_READ or SEMAPHORE (got {n:?})"))),
        },
    }
}

pub fn state_name(raw: i32) -> &'static str {
    pb::TransactionState::try_from(raw).map(|s| s.as_str_name()).unwrap_or("TRANSACTION_STATE_UNSPECIFIED")
}

/// An end cause's name without the END_CAUSE_ prefix (`"LEASE_EXPIRED"`), null when unset.
pub fn cause_name(raw: i32) -> Value {
    match pb::EndCause::try_from(raw) {
        Ok(pb::EndCause::Unspecified) | Err(_) => Value::Null,
        Ok(c) => json!(c.as_str_name().trim_start_matches("END_CAUSE_")),
    }
}

pub fn held_lock(l: &pb::HeldLock) -> Value {
    json!({"namespace": l.namespace, "key": l.key, "mode": mode_name(l.mode), "fencing_token": id_str(l.fencing_token)})
}

pub fn status(s: &pb::GetTransactionStatusResponse) -> Value {
    json!({
        "transaction_id": id_str(s.transaction_id),
        "state": state_name(s.state),
        "name": s.name,
        "priority": s.priority,
        "lease_timeout_ms": s.lease_timeout_ms,
        "lease_remaining_ms": s.lease_remaining_ms,
        "locks": s.locks.iter().map(held_lock).collect::<Vec<_>>(),
        "waiting": s.waiting.as_ref().map(|w| json!({
            "namespace": w.namespace, "key": w.key, "mode": mode_name(w.mode),
            "position": w.position, "request_id": w.request_id,
        })),
        "end_reason": s.end_reason,
        "end_cause": cause_name(s.end_cause),
    })
}

pub fn locks(r: &pb::ListLocksResponse) -> Value {
    let keys: Vec<Value> = r
        .locks
        .iter()
        .map(|k| {
            json!({
                "namespace": k.namespace,
                "key": k.key,
                "holders": k.holders.iter().map(|h| json!({
                    "transaction_id": id_str(h.transaction_id),
                    "transaction_name": h.transaction_name,
                    "mode": mode_name(h.mode),
                    "fencing_token": id_str(h.fencing_token),
                    "since_ms": h.since_ms,
                })).collect::<Vec<_>>(),
                "waiters": k.waiters.iter().map(|w| json!({
                    "transaction_id": id_str(w.transaction_id),
                    "transaction_name": w.transaction_name,
                    "mode": mode_name(w.mode),
                    "position": w.position,
                    "blocking_transaction_ids": ids(&w.blocking_transaction_ids),
                    "since_ms": w.since_ms,
                    "upgrade": w.upgrade,
                })).collect::<Vec<_>>(),
                "permits": k.permits,
                "delay": (k.delayed_until_ms > 0).then(|| json!({
                    "until_ms": k.delayed_until_ms,
                    "remaining_ms": k.delay_remaining_ms,
                    "transaction_id": id_str(k.delayed_by_transaction_id),
                    "cause": cause_name(k.delay_cause),
                })),
            })
        })
        .collect();
    let runs: Vec<Value> = r.slot_runs.iter().map(slot_run).collect();
    json!({ "locks": keys, "slot_runs": runs })
}

/// A key's last run claimed per schedule slot (`dls lock --once-per`).
pub fn slot_run(r: &pb::SlotRun) -> Value {
    let state = match pb::SlotRunState::try_from(r.state) {
        Ok(pb::SlotRunState::SlotRunRunning) => "RUNNING",
        Ok(pb::SlotRunState::SlotRunSucceeded) => "SUCCEEDED",
        Ok(pb::SlotRunState::SlotRunFailed) => "FAILED",
        Ok(pb::SlotRunState::SlotRunLost) => "LOST",
        _ => "UNSPECIFIED",
    };
    json!({
        "namespace": r.namespace,
        "key": r.key,
        "period_ms": id_str(r.period_ms),
        "slot": id_str(r.slot),
        "transaction_id": id_str(r.transaction_id),
        "transaction_name": r.transaction_name,
        "api_key": r.api_key,
        "started_at_ms": r.started_at_ms,
        "finished_at_ms": r.finished_at_ms,
        "state": state,
        "exit_code": r.exit_code,
        "reason": r.reason,
        "attempt": r.attempt,
    })
}

pub fn cluster(c: &pb::ClusterStatusResponse) -> Value {
    json!({
        "node_id": id_str(c.node_id),
        "leader_id": id_str(c.leader_id),
        "leader_addr": c.leader_addr,
        "term": id_str(c.term),
        "commit_index": id_str(c.commit_index),
        "applied_index": id_str(c.applied_index),
        "last_log_index": id_str(c.last_log_index),
        "role": c.role,
        "members": c.members.iter().map(|m| json!({
            "node_id": id_str(m.node_id), "addr": m.addr, "voter": m.voter,
            "version": m.version, "feature_level": m.feature_level,
        })).collect::<Vec<_>>(),
        "last_fencing_token": id_str(c.last_fencing_token),
        "active_transactions": c.active_transactions,
        "last_event_sequence": id_str(c.last_event_sequence),
        "version": c.version,
        "feature_level": c.feature_level,
        "feature_level_used": c.feature_level_used,
    })
}

/// A broken deadlock: in DEADLOCK_RESOLVED events and in the victim's error detail.
fn deadlock(d: &pb::DeadlockResolved) -> Value {
    json!({
        "cycle": d.cycle.iter().map(|m| json!({
            "transaction_id": id_str(m.transaction_id),
            "transaction_name": m.transaction_name,
            "priority": m.priority,
            "namespace": m.namespace,
            "key": m.key,
            "mode": mode_name(m.mode),
        })).collect::<Vec<_>>(),
        "victim_transaction_id": id_str(d.victim_transaction_id),
        "policy": pb::VictimPolicy::try_from(d.policy).map(|p| p.as_str_name()).unwrap_or("VICTIM_POLICY_UNSPECIFIED"),
    })
}

/// The one JSON shape of an event, for `/api/v1/events` and webhook payloads alike
/// (documented in docs/http-api.md).
pub fn event(e: &pb::Event) -> Value {
    let kind = pb::EventKind::try_from(e.kind).map(|k| k.as_str_name()).unwrap_or("EVENT_KIND_UNSPECIFIED");
    let detail = match &e.detail {
        Some(Detail::DeadlockResolved(d)) => deadlock(d),
        Some(Detail::TransactionExpired(x)) => json!({
            "transaction_id": id_str(x.transaction_id),
            "transaction_name": x.transaction_name,
            "released_locks": x.released_locks.iter().map(held_lock).collect::<Vec<_>>(),
        }),
        Some(Detail::TransactionAborted(x)) => json!({
            "transaction_id": id_str(x.transaction_id),
            "transaction_name": x.transaction_name,
            "reason": x.reason,
            "operator": x.operator,
            "released_locks": x.released_locks.iter().map(held_lock).collect::<Vec<_>>(),
        }),
        Some(Detail::LockRevoked(x)) => json!({
            "transaction_id": id_str(x.transaction_id),
            "namespace": x.namespace,
            "key": x.key,
            "mode": mode_name(x.mode),
            "fencing_token": id_str(x.fencing_token),
            "cause": x.cause,
            "end_cause": cause_name(x.end_cause),
        }),
        Some(Detail::ApiKeyChanged(x)) => json!({
            "change": pb::ApiKeyChangeKind::try_from(x.change).map_or("UNKNOWN", |c| c.as_str_name()),
            "key_name": x.key_name,
            "by": x.by,
        }),
        None => Value::Null,
    };
    json!({
        "sequence": id_str(e.sequence),
        "time_ms": e.time_ms,
        "kind": kind,
        "namespaces": e.namespaces,
        "detail": detail,
    })
}

/// A cluster API key as listed (never its secret or hash); 0 times as null.
pub fn api_key(k: &pb::ApiKeyInfo) -> Value {
    let time = |ms: i64| if ms > 0 { json!(ms) } else { Value::Null };
    let limit = |n: u64| if n > 0 { json!(n) } else { Value::Null };
    let l = k.limits.unwrap_or_default();
    json!({
        "name": k.name,
        "namespace_prefixes": k.namespace_prefixes,
        "admin": k.admin,
        "expires_at_ms": time(k.expires_at_ms),
        "created_by": k.created_by,
        "created_at_ms": k.created_at_ms,
        "rotated_at_ms": time(k.rotated_at_ms),
        "previous_valid_until_ms": time(k.previous_valid_until_ms),
        "limits": {
            "max_transactions": limit(l.max_transactions),
            "max_watches": limit(l.max_watches),
            "max_slot_records": limit(l.max_slot_records),
        },
    })
}

/// The gRPC code's canonical name, as gRPC clients see it.
pub fn code_name(c: Code) -> &'static str {
    match c {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The HTTP status for a gRPC code: the usual gRPC-to-HTTP table (as grpc-gateway), except
/// FAILED_PRECONDITION is 409 Conflict (the transaction's state forbids the call), and
/// CANCELLED (a withdrawn wait) is 409 too rather than the non-standard 499.
pub fn http_status(c: Code) -> StatusCode {
    match c {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::Aborted | Code::AlreadyExists | Code::FailedPrecondition | Code::Cancelled => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error answer: `{"error": {"code", "kind", "message", "detail"?}}`.
#[derive(Debug)]
pub struct ApiFailure {
    pub code: Code,
    pub kind: String,
    pub message: String,
    /// The server's structured detail (the transaction, what ended it, the deadlock).
    pub detail: Option<pb::ErrorDetail>,
    pub leader_addr: Option<String>,
    /// An overloaded leader's hint: retry the same request after this long.
    pub retry_after_ms: Option<u64>,
}

impl ApiFailure {
    pub fn bad_request(message: String) -> ApiFailure {
        ApiFailure {
            code: Code::InvalidArgument,
            kind: "INVALID_ARGUMENT".into(),
            message,
            detail: None,
            leader_addr: None,
            retry_after_ms: None,
        }
    }

    pub fn body(&self) -> Value {
        let mut e = json!({"code": code_name(self.code), "kind": self.kind, "message": self.message});
        if let Some(addr) = &self.leader_addr {
            e["leader_addr"] = json!(addr);
        }
        if let Some(ms) = self.retry_after_ms {
            e["retry_after_ms"] = json!(ms);
        }
        if let Some(d) = self.detail.as_ref().filter(|d| d.transaction_id != 0) {
            e["detail"] = json!({
                "transaction_id": id_str(d.transaction_id),
                "end_cause": cause_name(d.end_cause),
                "deadlock": d.deadlock.as_ref().map(deadlock),
            });
        }
        json!({ "error": e })
    }
}

impl From<Status> for ApiFailure {
    fn from(s: Status) -> ApiFailure {
        let md = s.metadata();
        let kind = md.get(metadata::ERROR_KIND).and_then(|v| v.to_str().ok()).unwrap_or("ERROR_KIND_UNSPECIFIED");
        let leader_addr = md.get(metadata::LEADER_ADDR).and_then(|v| v.to_str().ok()).map(str::to_string);
        let retry_after_ms =
            md.get(metadata::RETRY_AFTER_MS).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        ApiFailure {
            code: s.code(),
            kind: kind.to_string(),
            message: s.message().to_string(),
            detail: caerus_proto::error_detail(&s),
            leader_addr,
            retry_after_ms,
        }
    }
}

impl ApiFailure {
    /// The error JSON with a status of the HTTP layer's own (415, ...) instead of the code's.
    pub fn into_response_with(self, status: StatusCode) -> Response {
        let mut response =
            (status, [(http::header::CONTENT_TYPE, "application/json")], self.body().to_string()).into_response();
        if let Some(ms) = self.retry_after_ms {
            // Retry-After counts whole seconds; the JSON body has the exact hint.
            response.headers_mut().insert(http::header::RETRY_AFTER, ms.div_ceil(1000).max(1).into());
        }
        response
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        let status = http_status(self.code);
        self.into_response_with(status)
    }
}

pub fn ok(v: Value) -> Response {
    (StatusCode::OK, [(http::header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

fn key_holder(h: &pb::KeyHolder) -> Value {
    json!({
        "transaction_id": id_str(h.transaction_id),
        "transaction_name": h.transaction_name,
        "mode": mode_name(h.mode),
        "fencing_token": id_str(h.fencing_token),
        "since_ms": h.since_ms,
    })
}

/// One update of a key watch (`GET /api/v1/keys/watch`).
pub fn key_update(u: &pb::KeyHolders) -> Value {
    let kind = |raw: i32| match pb::KeyChangeKind::try_from(raw) {
        Ok(k) => json!(k.as_str_name().trim_start_matches("KEY_CHANGE_KIND_")),
        Err(_) => Value::Null,
    };
    json!({
        "holders": u.holders.iter().map(key_holder).collect::<Vec<_>>(),
        "changes": u.changes.iter().map(|c| json!({
            "kind": kind(c.kind),
            "holder": c.holder.as_ref().map(key_holder),
            "end_cause": cause_name(c.end_cause),
        })).collect::<Vec<_>>(),
        "initial": u.initial,
        "cursor": u.cursor,
    })
}

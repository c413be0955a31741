//! The body and signature of a delivery. The JSON names the event's fields like the gRPC
//! Event messages; docs/webhooks.md documents the shape.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::api::convert;
use crate::locks::{CycleMember, Event, EventDetail, Held, LockKey, LockMode, VictimPolicy};

/// Modes and policies use the proto's names, so payloads and the gRPC API agree.
fn mode_name(m: LockMode) -> &'static str {
    convert::mode_wire(m).as_str_name()
}

fn policy_name(p: VictimPolicy) -> &'static str {
    convert::policy_wire(p).as_str_name()
}

fn cycle_member(m: &CycleMember) -> Value {
    json!({
        "transaction_id": m.txn,
        "transaction_name": m.name,
        "priority": m.priority,
        "namespace": m.lock.namespace,
        "key": m.lock.key,
        "mode": mode_name(m.mode),
    })
}

fn released_locks(released: &[(LockKey, Held)]) -> Value {
    released
        .iter()
        .map(|(lock, held)| {
            json!({
                "namespace": lock.namespace,
                "key": lock.key,
                "mode": mode_name(held.mode),
                "fencing_token": held.token.0,
            })
        })
        .collect()
}

/// The event's own fields, named like the gRPC Event messages.
fn event_data(detail: &EventDetail) -> Value {
    match detail {
        EventDetail::DeadlockResolved { cycle, victim, policy } => json!({
            "cycle": cycle.iter().map(cycle_member).collect::<Vec<_>>(),
            "victim_transaction_id": victim,
            "policy": policy_name(*policy),
        }),
        EventDetail::TransactionExpired { txn, name, released } => json!({
            "transaction_id": txn,
            "transaction_name": name,
            "released_locks": released_locks(released),
        }),
        EventDetail::TransactionAborted { txn, name, reason, operator, released } => json!({
            "transaction_id": txn,
            "transaction_name": name,
            "reason": reason,
            "operator": operator,
            "released_locks": released_locks(released),
        }),
        EventDetail::LockRevoked { txn, lock, held, cause } => json!({
            "transaction_id": txn,
            "namespace": lock.namespace,
            "key": lock.key,
            "mode": mode_name(held.mode),
            "fencing_token": held.token.0,
            "cause": cause,
        }),
    }
}

/// The JSON body of one delivery. `id` is a string so receivers in languages without
/// 64-bit integers can dedupe on it exactly.
pub fn payload(e: &Event) -> Value {
    json!({
        "id": e.seq.to_string(),
        "sequence": e.seq,
        "type": e.kind().name(),
        "time_ms": e.at_ms,
        "namespaces": e.namespaces(),
        "data": event_data(&e.detail),
    })
}

/// `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`: the timestamp is signed too
/// so a receiver can refuse replays of old requests.
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::locks::FencingToken;

    pub(crate) fn held(token: u64) -> Held {
        Held { mode: LockMode::Exclusive, token: FencingToken(token), since_ms: 5 }
    }

    pub(crate) fn event(seq: u64, detail: EventDetail) -> Event {
        Event { seq, at_ms: 1_700_000_000_123, detail }
    }

    pub(crate) fn revoked(ns: &str) -> Event {
        event(
            3,
            EventDetail::LockRevoked {
                txn: 7,
                lock: LockKey::new(ns, "k"),
                held: held(42),
                cause: "lease expired".into(),
            },
        )
    }

    #[test]
    fn payloads_carry_the_event_fields_in_snake_case() {
        let member = |txn, key: &str| CycleMember {
            txn,
            name: format!("t{txn}"),
            priority: 1,
            lock: LockKey::new("ns", key),
            mode: LockMode::SharedRead,
        };
        let deadlock = event(
            9,
            EventDetail::DeadlockResolved {
                cycle: vec![member(1, "k2"), member(2, "k1")],
                victim: 2,
                policy: VictimPolicy::Youngest,
            },
        );
        assert_eq!(
            payload(&deadlock),
            json!({
                "id": "9", "sequence": 9, "type": "deadlock_resolved", "time_ms": 1_700_000_000_123u64,
                "namespaces": ["ns"],
                "data": {
                    "cycle": [
                        {"transaction_id": 1, "transaction_name": "t1", "priority": 1, "namespace": "ns", "key": "k2", "mode": "SHARED_READ"},
                        {"transaction_id": 2, "transaction_name": "t2", "priority": 1, "namespace": "ns", "key": "k1", "mode": "SHARED_READ"},
                    ],
                    "victim_transaction_id": 2,
                    "policy": "YOUNGEST",
                },
            })
        );
        let aborted = event(
            4,
            EventDetail::TransactionAborted {
                txn: 7,
                name: "job".into(),
                reason: "stuck".into(),
                operator: "alice".into(),
                released: vec![(LockKey::new("b", "k"), held(42))],
            },
        );
        let p = payload(&aborted);
        assert_eq!(p["type"], "transaction_aborted");
        assert_eq!(
            p["data"],
            json!({"transaction_id": 7, "transaction_name": "job", "reason": "stuck", "operator": "alice",
                   "released_locks": [{"namespace": "b", "key": "k", "mode": "EXCLUSIVE", "fencing_token": 42}]})
        );
        let p = payload(&revoked("ns"));
        assert_eq!(p["type"], "lock_revoked");
        assert_eq!(p["data"]["fencing_token"], 42);
        assert_eq!(p["data"]["cause"], "lease expired");
        let expired = event(5, EventDetail::TransactionExpired { txn: 8, name: "n".into(), released: vec![] });
        assert_eq!(payload(&expired)["type"], "transaction_expired");
        assert_eq!(payload(&expired)["namespaces"], json!([]));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // Computed independently with Python's hmac module.
        assert_eq!(
            signature("topsecret", 1_700_000_000, br#"{"id":"1"}"#),
            "sha256=5ae2fe9589b5395efc54aa255a5cd86f4f6884285427ae96ebfc427963e60e81"
        );
    }

    /// The receiver-side check from docs/webhooks.md, kept here so the snippet stays right.
    fn doc_verify(secret: &str, timestamp: &str, signature: &str, body: &[u8], now_unix: u64) -> bool {
        let fresh = timestamp.parse::<u64>().is_ok_and(|t| t.abs_diff(now_unix) <= 300);
        let Some(hex_sig) = signature.strip_prefix("sha256=") else { return false };
        let Ok(expected) = hex::decode(hex_sig) else { return false };
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        fresh && mac.verify_slice(&expected).is_ok()
    }

    #[test]
    fn the_documented_receiver_check_accepts_our_signatures_only() {
        let body = serde_json::to_vec(&payload(&revoked("ns"))).unwrap();
        let sig = signature("k", 1_700_000_000, &body);
        assert!(doc_verify("k", "1700000000", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("other", "1700000000", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("k", "1700000001", &sig, &body, 1_700_000_100));
        assert!(!doc_verify("k", "1700000000", &sig, &body, 1_700_001_000));
    }
}

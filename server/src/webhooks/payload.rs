//! The body and signature of a delivery. The body is the event in the one JSON shape the
//! HTTP API's `/api/v1/events` also sends (`http::json::event`), so a receiver parses one
//! format; docs/http-api.md and docs/webhooks.md document it.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::api::convert;
use crate::http::json;
use crate::locks::Event;

/// The JSON body of one delivery.
pub fn payload(e: &Event) -> Value {
    json::event(&convert::event(e))
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
    use crate::locks::{CycleMember, EndCause, EventDetail, FencingToken, Held, LockKey, LockMode, VictimPolicy};
    use serde_json::json;

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
                cause: EndCause::LeaseExpired.describe().into(),
            },
        )
    }

    #[test]
    fn payloads_are_the_http_apis_event_json() {
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
                "sequence": "9", "kind": "DEADLOCK_RESOLVED", "time_ms": 1_700_000_000_123u64,
                "namespaces": ["ns"],
                "detail": {
                    "cycle": [
                        {"transaction_id": "1", "transaction_name": "t1", "priority": 1, "namespace": "ns", "key": "k2", "mode": "SHARED_READ"},
                        {"transaction_id": "2", "transaction_name": "t2", "priority": 1, "namespace": "ns", "key": "k1", "mode": "SHARED_READ"},
                    ],
                    "victim_transaction_id": "2",
                    "policy": "YOUNGEST",
                },
            })
        );
        let p = payload(&revoked("ns"));
        assert_eq!(p["kind"], "LOCK_REVOKED");
        assert_eq!(p["detail"]["fencing_token"], "42");
        assert_eq!(p["detail"]["end_cause"], "LEASE_EXPIRED");
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

//! The replicated event log: events as JavaScript objects and the event watch.

use std::sync::Arc;

use caerus_core::{Event, EventDetail, EventStream};
use napi::bindgen_prelude::BigInt;
use napi::Result;
use napi_derive::napi;
use tokio::sync::{watch, Mutex};

use crate::errors::to_js;
use crate::types::JsLock;

/// A member of a deadlock cycle.
#[napi(object)]
pub struct JsCycleMember {
    pub transaction_id: BigInt,
    pub transaction_name: String,
    pub priority: i32,
    pub namespace: String,
    pub key: String,
    pub mode: String,
}

/// One event of the replicated log; fields beyond the first four depend on `kind`.
#[napi(object)]
pub struct JsEvent {
    pub sequence: BigInt,
    pub time_ms: f64,
    pub kind: String,
    pub namespaces: Vec<String>,
    pub transaction_id: Option<BigInt>,
    pub transaction_name: Option<String>,
    pub released_locks: Option<Vec<JsLock>>,
    pub reason: Option<String>,
    pub operator: Option<String>,
    pub cycle: Option<Vec<JsCycleMember>>,
    pub victim_transaction_id: Option<BigInt>,
    pub policy: Option<String>,
    pub namespace: Option<String>,
    pub key: Option<String>,
    pub mode: Option<String>,
    pub fencing_token: Option<BigInt>,
    pub cause: Option<String>,
}

impl From<Event> for JsEvent {
    fn from(e: Event) -> Self {
        let mut out = JsEvent {
            sequence: BigInt::from(e.sequence),
            time_ms: e.time_ms as f64,
            kind: e.kind().as_str().to_string(),
            namespaces: e.namespaces,
            transaction_id: None,
            transaction_name: None,
            released_locks: None,
            reason: None,
            operator: None,
            cycle: None,
            victim_transaction_id: None,
            policy: None,
            namespace: None,
            key: None,
            mode: None,
            fencing_token: None,
            cause: None,
        };
        match e.detail {
            EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
                out.cycle = Some(
                    cycle
                        .into_iter()
                        .map(|m| JsCycleMember {
                            transaction_id: BigInt::from(m.transaction_id),
                            transaction_name: m.transaction_name,
                            priority: m.priority,
                            namespace: m.namespace,
                            key: m.key,
                            mode: m.mode.as_str().to_string(),
                        })
                        .collect(),
                );
                out.victim_transaction_id = Some(BigInt::from(victim_transaction_id));
                out.policy = Some(policy.as_str().to_string());
            }
            EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.transaction_name = Some(transaction_name);
                out.released_locks = Some(released_locks.into_iter().map(JsLock::from).collect());
            }
            EventDetail::TransactionAborted { transaction_id, transaction_name, reason, operator, released_locks } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.transaction_name = Some(transaction_name);
                out.reason = Some(reason);
                out.operator = Some(operator);
                out.released_locks = Some(released_locks.into_iter().map(JsLock::from).collect());
            }
            EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
                out.transaction_id = Some(BigInt::from(transaction_id));
                out.namespace = Some(namespace);
                out.key = Some(key);
                out.mode = Some(mode.as_str().to_string());
                out.fencing_token = Some(BigInt::from(fencing_token));
                out.cause = cause.map(|c| c.as_str().to_string());
            }
            // A kind added to core later: the common fields are still useful.
            _ => {}
        }
        out
    }
}

/// An event watch (`watchEvents` in the JS wrapper turns it into an async iterator).
#[napi]
pub struct NativeEventStream {
    pub(crate) stream: Arc<Mutex<Option<EventStream>>>,
    pub(crate) closed: Arc<watch::Sender<bool>>,
    pub(crate) backlog_end: Option<u64>,
}

/// One item of a core stream for JavaScript: the item, or null once the stream ended. An
/// error rejects once; either end drops the stream, so later calls answer null.
pub(crate) fn stream_item<S, T, J: From<T>>(
    stream: &mut Option<S>,
    next: Option<caerus_core::Result<T>>,
) -> Result<Option<J>> {
    match next {
        Some(Ok(item)) => Ok(Some(item.into())),
        Some(Err(e)) => {
            *stream = None;
            Err(to_js(e))
        }
        None => {
            *stream = None;
            Ok(None)
        }
    }
}

#[napi]
impl NativeEventStream {
    /// The last sequence committed when the watch attached (null if the server did not say).
    #[napi(getter)]
    pub fn backlog_end(&self) -> Option<BigInt> {
        self.backlog_end.map(BigInt::from)
    }

    /// The next event, or null once the stream is closed. Rejects (once) when the
    /// stream ends with an error.
    #[napi]
    pub async fn next(&self) -> Result<Option<JsEvent>> {
        let mut closed = self.closed.subscribe();
        if *closed.borrow() {
            return Ok(None);
        }
        let mut guard = tokio::select! {
            g = self.stream.lock() => g,
            _ = closed.wait_for(|c| *c) => return Ok(None),
        };
        let Some(stream) = guard.as_mut() else { return Ok(None) };
        let next = tokio::select! {
            n = stream.next_event() => n,
            _ = closed.wait_for(|c| *c) => return Ok(None),
        };
        stream_item(&mut *guard, next)
    }

    /// Stops the watch: a pending `next` resolves with null and the server stream is dropped.
    #[napi]
    pub fn close(&self) {
        self.closed.send_replace(true);
        if let Ok(mut guard) = self.stream.try_lock() {
            *guard = None;
        }
    }
}

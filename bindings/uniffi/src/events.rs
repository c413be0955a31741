//! The replicated event log as the foreign side sees it: events, watch filters and the
//! event stream object.

use std::sync::Arc;

use caerus_core as core;
use tokio::sync::{watch, Mutex};

use crate::errors::DlsError;
use crate::runtime::on_runtime;
use crate::types::{CycleMember, Lock, LockMode};

/// Kinds of events in the replicated log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum EventKind {
    DeadlockResolved,
    TransactionExpired,
    TransactionAborted,
    LockRevoked,
    /// A kind this SDK does not know yet.
    Unknown,
}

impl From<core::EventKind> for EventKind {
    fn from(k: core::EventKind) -> Self {
        match k {
            core::EventKind::DeadlockResolved => EventKind::DeadlockResolved,
            core::EventKind::TransactionExpired => EventKind::TransactionExpired,
            core::EventKind::TransactionAborted => EventKind::TransactionAborted,
            core::EventKind::LockRevoked => EventKind::LockRevoked,
            #[allow(unreachable_patterns)]
            _ => EventKind::Unknown,
        }
    }
}

/// What an event is about, by kind.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum EventDetail {
    DeadlockResolved {
        cycle: Vec<CycleMember>,
        victim_transaction_id: u64,
        /// `LOWEST_PRIORITY_THEN_YOUNGEST`, `YOUNGEST` or `OLDEST`.
        policy: String,
    },
    TransactionExpired {
        transaction_id: u64,
        transaction_name: String,
        released_locks: Vec<Lock>,
    },
    TransactionAborted {
        transaction_id: u64,
        transaction_name: String,
        reason: String,
        operator: String,
        released_locks: Vec<Lock>,
    },
    LockRevoked {
        transaction_id: u64,
        namespace: String,
        key: String,
        mode: LockMode,
        fencing_token: u64,
        cause: String,
    },
    /// A kind added to the server after this SDK.
    Unknown,
}

/// One entry of the replicated event log.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Event {
    /// Position in the log: starts at 1, +1 per event.
    pub sequence: u64,
    /// Leader wall clock, ms since the Unix epoch.
    pub time_ms: i64,
    pub kind: EventKind,
    pub namespaces: Vec<String>,
    pub detail: EventDetail,
}

impl From<core::Event> for Event {
    fn from(e: core::Event) -> Self {
        let kind = e.kind().into();
        let detail = match e.detail {
            core::EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
                EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy: policy.as_str().to_string() }
            }
            core::EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
                EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks }
            }
            core::EventDetail::TransactionAborted {
                transaction_id,
                transaction_name,
                reason,
                operator,
                released_locks,
            } => EventDetail::TransactionAborted { transaction_id, transaction_name, reason, operator, released_locks },
            core::EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
                EventDetail::LockRevoked {
                    transaction_id,
                    namespace,
                    key,
                    mode,
                    fencing_token,
                    cause: cause.map(|c| c.as_str().to_string()).unwrap_or_default(),
                }
            }
            _ => EventDetail::Unknown,
        };
        Event { sequence: e.sequence, time_ms: e.time_ms, kind, namespaces: e.namespaces, detail }
    }
}

/// Filters of an event watch.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct WatchOptions {
    /// First sequence wanted (0 = the oldest the server keeps).
    #[uniffi(default = 0)]
    pub from_sequence: u64,
    /// Only events touching a namespace with one of these prefixes (empty = all).
    #[uniffi(default)]
    pub namespace_prefixes: Vec<String>,
    /// Only these kinds (empty = all).
    #[uniffi(default)]
    pub kinds: Vec<EventKind>,
    /// Skip the backlog: only events committed after the watch attaches.
    #[uniffi(default = false)]
    pub only_new: bool,
}

impl From<WatchOptions> for core::WatchOptions {
    fn from(o: WatchOptions) -> Self {
        let mut w = core::WatchOptions::new().with_from_sequence(o.from_sequence).with_only_new(o.only_new);
        for p in o.namespace_prefixes {
            w = w.with_namespace_prefix(p);
        }
        for k in o.kinds {
            let kind = match k {
                EventKind::DeadlockResolved => core::EventKind::DeadlockResolved,
                EventKind::TransactionExpired => core::EventKind::TransactionExpired,
                EventKind::TransactionAborted => core::EventKind::TransactionAborted,
                EventKind::LockRevoked => core::EventKind::LockRevoked,
                EventKind::Unknown => continue,
            };
            w = w.with_kind(kind);
        }
        w
    }
}

/// An event watch: call `next()` until it returns null; `cancel()` stops it.
#[derive(uniffi::Object)]
pub struct EventStream {
    stream: Arc<Mutex<Option<core::EventStream>>>,
    closed: Arc<watch::Sender<bool>>,
    backlog_end: Option<u64>,
}

impl EventStream {
    pub(crate) fn new(stream: core::EventStream) -> Self {
        let backlog_end = stream.backlog_end();
        EventStream {
            stream: Arc::new(Mutex::new(Some(stream))),
            closed: Arc::new(watch::channel(false).0),
            backlog_end,
        }
    }
}

#[uniffi::export]
impl EventStream {
    /// The last sequence committed when the watch attached (null if the server did not say).
    pub fn backlog_end(&self) -> Option<u64> {
        self.backlog_end
    }

    /// The next event, or null once the stream is closed. Throws (once) when the stream
    /// ends with an error, e.g. `CursorExpired`.
    pub async fn next(&self) -> Result<Option<Event>, DlsError> {
        let stream = Arc::clone(&self.stream);
        let mut closed = self.closed.subscribe();
        on_runtime(async move {
            if *closed.borrow() {
                return Ok(None);
            }
            let mut guard = tokio::select! {
                g = stream.lock() => g,
                _ = closed.wait_for(|c| *c) => return Ok(None),
            };
            let Some(s) = guard.as_mut() else { return Ok(None) };
            let next = tokio::select! {
                n = s.next_event() => n,
                _ = closed.wait_for(|c| *c) => return Ok(None),
            };
            match next {
                Some(Ok(event)) => Ok(Some(event.into())),
                Some(Err(e)) => {
                    *guard = None;
                    Err(e.into())
                }
                None => {
                    *guard = None;
                    Ok(None)
                }
            }
        })
        .await
    }

    /// Stops the watch: a pending `next()` returns null and the server stream is dropped.
    pub fn cancel(&self) {
        self.closed.send_replace(true);
        if let Ok(mut guard) = self.stream.try_lock() {
            *guard = None;
        }
    }
}

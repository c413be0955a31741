//! The replicated event log: typed events and a watch stream that survives leader
//! changes.
//!
//! Every event has a gap-free sequence number assigned through raft, so any node that
//! becomes leader numbers them the same way. The stream remembers the last sequence it
//! delivered and, whenever its server stream breaks (leader killed, leadership moved,
//! connection reset), attaches again from the next one: within one [`EventStream`] no
//! event is missed and none is delivered twice.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use caerus_proto::v1 as pb;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::Wire;
use futures::{Stream, StreamExt};
use tonic::transport::Channel;
use tonic::Status;
use tracing::warn;

use crate::client::DlsClient;
use crate::deadlock::{CycleMember, Deadlock};
use crate::error::{Error, Result};
use crate::resume::Resuming;
use crate::router::{Attempts, Router};
use crate::types::{required, EndCause, Lock, LockMode};

/// Kinds of events (declared once, in `caerus-types`). Parsed from the wire or config name
/// in any case, `-` for `_`.
pub use caerus_types::EventKind;

/// Which member of a deadlock cycle the server aborts (declared once, in `caerus-types`).
pub use caerus_types::VictimPolicy;

impl TryFrom<pb::DeadlockResolved> for Deadlock {
    type Error = Error;
    fn try_from(d: pb::DeadlockResolved) -> Result<Self> {
        let member = |m: pb::CycleMember| -> Result<CycleMember> {
            Ok(CycleMember {
                mode: required("lock mode", m.mode)?,
                transaction_id: m.transaction_id,
                transaction_name: m.transaction_name,
                priority: m.priority,
                namespace: m.namespace,
                key: m.key,
            })
        };
        Ok(Deadlock {
            cycle: d.cycle.into_iter().map(member).collect::<Result<_>>()?,
            victim_transaction_id: d.victim_transaction_id,
            policy: required("victim policy", d.policy)?,
        })
    }
}

/// What happened, by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventDetail {
    /// A deadlock was detected and broken by aborting `victim_transaction_id`.
    DeadlockResolved {
        /// The cycle in wait-for order: each member waits for the next, the last for the first.
        cycle: Vec<CycleMember>,
        /// The aborted transaction (a member of the cycle).
        victim_transaction_id: u64,
        /// The policy that chose the victim.
        policy: VictimPolicy,
    },
    /// A transaction's lease lapsed.
    TransactionExpired {
        /// The expired transaction.
        transaction_id: u64,
        /// Its label.
        transaction_name: String,
        /// The locks it held, now released.
        released_locks: Vec<Lock>,
    },
    /// An operator aborted a transaction.
    TransactionAborted {
        /// The aborted transaction.
        transaction_id: u64,
        /// Its label.
        transaction_name: String,
        /// The reason the operator gave.
        reason: String,
        /// Name of the API key that aborted it ("" on a server without keys).
        operator: String,
        /// The locks it held, now released.
        released_locks: Vec<Lock>,
    },
    /// The server took a lock away from its holder.
    LockRevoked {
        /// The former holder.
        transaction_id: u64,
        /// The lock's namespace.
        namespace: String,
        /// The lock's key.
        key: String,
        /// The mode it was held in.
        mode: LockMode,
        /// The token of the revoked grant: storage should now reject it.
        fencing_token: u64,
        /// What ended the holder: [`EndCause::LeaseExpired`], [`EndCause::DeadlockVictim`] or
        /// [`EndCause::OperatorAbort`] (`None` from a server older than this field).
        cause: Option<EndCause>,
    },
    /// A cluster API key was created, revoked, rotated or expired (never a secret or a hash).
    ApiKeyChanged {
        /// What happened.
        change: ApiKeyChange,
        /// The key's name.
        key_name: String,
        /// The admin key that did it ("" for an expiry).
        by: String,
    },
}

/// What happened to a cluster API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiKeyChange {
    /// Created.
    Created,
    /// Revoked: refused everywhere, its streams ended.
    Revoked,
    /// Given a new secret.
    Rotated,
    /// Its expiry passed.
    Expired,
}

impl ApiKeyChange {
    /// The wire name without its prefix: `CREATED`, `REVOKED`, `ROTATED` or `EXPIRED`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKeyChange::Created => "CREATED",
            ApiKeyChange::Revoked => "REVOKED",
            ApiKeyChange::Rotated => "ROTATED",
            ApiKeyChange::Expired => "EXPIRED",
        }
    }

    fn from_wire(raw: i32) -> Option<Self> {
        match pb::ApiKeyChangeKind::try_from(raw).ok()? {
            pb::ApiKeyChangeKind::ApiKeyCreated => Some(ApiKeyChange::Created),
            pb::ApiKeyChangeKind::ApiKeyRevoked => Some(ApiKeyChange::Revoked),
            pb::ApiKeyChangeKind::ApiKeyRotated => Some(ApiKeyChange::Rotated),
            pb::ApiKeyChangeKind::ApiKeyExpired => Some(ApiKeyChange::Expired),
            pb::ApiKeyChangeKind::Unspecified => None,
        }
    }
}

impl EventDetail {
    /// The kind of this detail.
    pub fn kind(&self) -> EventKind {
        match self {
            EventDetail::DeadlockResolved { .. } => EventKind::DeadlockResolved,
            EventDetail::TransactionExpired { .. } => EventKind::TransactionExpired,
            EventDetail::TransactionAborted { .. } => EventKind::TransactionAborted,
            EventDetail::LockRevoked { .. } => EventKind::LockRevoked,
            EventDetail::ApiKeyChanged { .. } => EventKind::ApiKeyChanged,
        }
    }
}

/// One entry of the replicated event log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Position in the log: starts at 1, +1 per event, never reused.
    pub sequence: u64,
    /// The leader's wall clock (ms since the Unix epoch) when the event was proposed.
    pub time_ms: i64,
    /// Namespaces the event touches.
    pub namespaces: Vec<String>,
    /// What happened.
    pub detail: EventDetail,
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.detail.kind()
    }
}

fn locks(list: Vec<pb::HeldLock>) -> Result<Vec<Lock>> {
    list.into_iter().map(Lock::try_from).collect()
}

impl TryFrom<pb::Event> for Event {
    type Error = Error;
    fn try_from(e: pb::Event) -> Result<Self> {
        use pb::event::Detail;
        let detail = match e.detail {
            Some(Detail::DeadlockResolved(d)) => {
                let Deadlock { cycle, victim_transaction_id, policy } = Deadlock::try_from(d)?;
                EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy }
            }
            Some(Detail::TransactionExpired(d)) => EventDetail::TransactionExpired {
                transaction_id: d.transaction_id,
                transaction_name: d.transaction_name,
                released_locks: locks(d.released_locks)?,
            },
            Some(Detail::TransactionAborted(d)) => EventDetail::TransactionAborted {
                transaction_id: d.transaction_id,
                transaction_name: d.transaction_name,
                reason: d.reason,
                operator: d.operator,
                released_locks: locks(d.released_locks)?,
            },
            Some(Detail::LockRevoked(d)) => EventDetail::LockRevoked {
                mode: required("lock mode", d.mode)?,
                transaction_id: d.transaction_id,
                namespace: d.namespace,
                key: d.key,
                fencing_token: d.fencing_token,
                cause: EndCause::from_wire(d.end_cause),
            },
            Some(Detail::ApiKeyChanged(d)) => EventDetail::ApiKeyChanged {
                change: ApiKeyChange::from_wire(d.change).ok_or_else(|| {
                    Error::internal(format!("event {} has a key change this client does not know", e.sequence))
                })?,
                key_name: d.key_name,
                by: d.by,
            },
            None => {
                return Err(Error::internal(format!(
                    "event {} has a kind ({}) this client does not know",
                    e.sequence, e.kind
                )))
            }
        };
        Ok(Event { sequence: e.sequence, time_ms: e.time_ms, namespaces: e.namespaces, detail })
    }
}

/// Options of [`DlsClient::watch_events`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// First sequence number wanted; 0 (the default) = from the oldest retained event.
    pub from_sequence: u64,
    /// Only events touching a namespace starting with one of these (empty = all).
    pub namespace_prefixes: Vec<String>,
    /// Only these kinds (empty = all).
    pub kinds: Vec<EventKind>,
    /// Skip the retained backlog: only events committed after the watch started.
    pub only_new: bool,
}

impl WatchOptions {
    /// Every retained event, then new ones.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts at this sequence number (e.g. the last one seen + 1).
    pub fn with_from_sequence(mut self, sequence: u64) -> Self {
        self.from_sequence = sequence;
        self
    }

    /// Adds a namespace prefix to the filter.
    pub fn with_namespace_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.namespace_prefixes.push(prefix.into());
        self
    }

    /// Adds a kind to the filter.
    pub fn with_kind(mut self, kind: EventKind) -> Self {
        self.kinds.push(kind);
        self
    }

    /// Skips the retained backlog (or not).
    pub fn with_only_new(mut self, only_new: bool) -> Self {
        self.only_new = only_new;
        self
    }
}

/// The state behind an [`EventStream`].
struct Watch {
    router: Arc<Router>,
    opts: WatchOptions,
    /// The last sequence delivered: the resume point, and the guard against repeats.
    last: Option<u64>,
    /// Where the first attach started (the server resolves "oldest" and `only_new` into a
    /// sequence): the resume point until an event arrives.
    start: Option<u64>,
    /// The last event committed when the stream first attached: the end of the backlog.
    backlog_end: Option<u64>,
    stream: Resuming<pb::Event>,
}

/// A sequence number from the stream's response headers.
fn header_sequence(md: &tonic::metadata::MetadataMap, key: &str) -> Option<u64> {
    md.get(key)?.to_str().ok()?.parse().ok()
}

/// The request of the next attach: the caller's options until an event arrived, then the
/// event after the last one delivered.
///
/// Before any event arrived, a re-attach resumes where the first attach started (the
/// server says so in its response headers), so `only_new` misses nothing either.
fn resume_request(opts: &WatchOptions, last: Option<u64>, start: Option<u64>) -> pb::WatchEventsRequest {
    let (from_sequence, only_new) = match (last, start) {
        (Some(last), _) => (last + 1, false),
        (None, Some(start)) => (start, false),
        (None, None) => (opts.from_sequence, opts.only_new),
    };
    pb::WatchEventsRequest {
        from_sequence,
        namespace_prefixes: opts.namespace_prefixes.clone(),
        kinds: opts.kinds.iter().map(|k| k.to_wire()).collect(),
        only_new,
    }
}

/// Opens WatchEvents on `channel`.
fn open(
    router: &Router,
    channel: Channel,
    request: pb::WatchEventsRequest,
) -> impl std::future::Future<Output = std::result::Result<tonic::Response<tonic::Streaming<pb::Event>>, Status>> {
    let request = router.request(request);
    async move { LockServiceClient::new(channel).watch_events(request).await }
}

impl Watch {
    #[cfg(test)]
    fn request(&self) -> pb::WatchEventsRequest {
        resume_request(&self.opts, self.last, self.start)
    }

    /// The first attach, which learns where the watch starts and where the backlog ends.
    async fn attach(&mut self, attempts: &mut Attempts<'_>) -> Result<()> {
        let (router, opts, last, start) = (&self.router, &self.opts, self.last, self.start);
        let md = self.stream.attach(attempts, |ch| open(router, ch, resume_request(opts, last, start))).await?;
        self.start = header_sequence(&md, caerus_proto::metadata::FIRST_SEQUENCE);
        self.backlog_end = header_sequence(&md, caerus_proto::metadata::LAST_SEQUENCE);
        Ok(())
    }

    /// The next wire event, re-attaching after breaks from where the watch stands.
    async fn next_message(&mut self) -> Result<pb::Event> {
        let (router, opts, last, start) = (&self.router, &self.opts, self.last, self.start);
        self.stream.next_message(router, |ch| open(router, ch, resume_request(opts, last, start))).await
    }

    /// The next event for the caller; an error ends the watch.
    async fn next_event(&mut self) -> Result<Event> {
        loop {
            let wire = self.next_message().await?;
            if self.last.is_some_and(|last| wire.sequence <= last) {
                // Already delivered; a server resuming from our cursor never repeats, but
                // delivering twice would break the stream's promise if one ever did.
                continue;
            }
            self.last = Some(wire.sequence);
            match Event::try_from(wire) {
                Ok(event) => return Ok(event),
                // A newer server's event kinds are skipped like filtered-out ones.
                Err(e) => warn!(error = %e, "skipping an event this client cannot read"),
            }
        }
    }
}

/// Events from [`DlsClient::watch_events`], in sequence order.
///
/// A [`futures::Stream`]; without `StreamExt`, use [`EventStream::next_event`]. The
/// stream follows the log until dropped. It ends after yielding an error: the retry budget
/// ran out while re-attaching ([`Error::Unavailable`]), the cursor fell out of the
/// retained log ([`Error::CursorExpired`]), or the server refused the watch.
pub struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<Event>> + Send>>,
    backlog_end: Option<u64>,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    fn new(watch: Watch) -> Self {
        let backlog_end = watch.backlog_end;
        let inner = futures::stream::unfold(Some(watch), |state| async move {
            let mut watch = state?;
            match watch.next_event().await {
                Ok(event) => Some((Ok(event), Some(watch))),
                Err(e) => Some((Err(e), None)),
            }
        });
        EventStream { inner: Box::pin(inner), backlog_end }
    }

    /// The sequence of the last event committed when the stream attached (0 = none yet;
    /// `None` from a server that does not say). Reading up to it replays the backlog.
    pub fn backlog_end(&self) -> Option<u64> {
        self.backlog_end
    }

    /// The next event; `None` once the stream ended (after an error).
    pub async fn next_event(&mut self) -> Option<Result<Event>> {
        self.inner.next().await
    }
}

impl Stream for EventStream {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl DlsClient {
    /// Watches the cluster's event log: deadlocks resolved, expiries, operator aborts and
    /// revoked locks.
    ///
    /// Returns once the stream is attached to the leader, so with
    /// [`WatchOptions::only_new`] every event committed after this returns is delivered.
    /// The stream survives leader changes and broken connections: it re-attaches from the
    /// event after the last one it delivered, so none is missed or repeated. Each
    /// re-attach may retry for the configured `retry_deadline`.
    pub async fn watch_events(&self, opts: WatchOptions) -> Result<EventStream> {
        let router = Arc::clone(self.router());
        let mut watch = Watch {
            router: Arc::clone(&router),
            opts,
            last: None,
            start: None,
            backlog_end: None,
            stream: Resuming::new("WatchEvents"),
        };
        let mut attempts = router.attempts("WatchEvents", router.default_options());
        watch.attach(&mut attempts).await?;
        Ok(EventStream::new(watch))
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;

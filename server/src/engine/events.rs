//! The replicated event log, read from a cursor: by event watchers (filtered by what they
//! asked for and what their principal may see) and by webhooks (every event; each keeps
//! its cursor in the replicated state).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::pin::Pin;

use futures::Stream;
use tokio::sync::watch;

use super::{Engine, EngineError, EngineResult, Principal};
use crate::locks::events::CursorExpired;
use crate::locks::{Command, Event, EventKind};

/// Events read per hold of the state lock.
const EVENT_BATCH: usize = 256;

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStart {
    /// This sequence number, 0 for the oldest retained (a sequence older than that fails
    /// with CursorExpired).
    At(u64),
    /// After the last event so far.
    OnlyNew,
}

/// A watch of the event log: `first` is the sequence it starts at, `last` the last event
/// when it started. The stream ends with NOT_LEADER when this node stops leading (the
/// watcher resumes elsewhere from its cursor); it holds its place under the watch limits
/// until dropped.
pub struct EventWatch {
    pub first: u64,
    pub last: u64,
    pub events: Pin<Box<dyn Stream<Item = EngineResult<Event>> + Send>>,
}

/// Which events a watcher asked for, and who it is (what it may see).
struct EventFilter {
    prefixes: Vec<String>,
    kinds: Vec<EventKind>,
    who: Principal,
}

impl EventFilter {
    /// The event as this watcher gets it (other tenants' parts removed), if it wants it.
    fn pass(&self, e: Event) -> Option<Event> {
        let e = match self.who.redact(&e)? {
            Cow::Borrowed(_) => e,
            Cow::Owned(cut) => cut,
        };
        e.matches(&self.kinds, &self.prefixes).then_some(e)
    }
}

impl Engine {
    /// Watches the event log from `start` (as of everything committed before the call),
    /// then follows new events. Leader only; `remote` is the watcher's connection, counted
    /// against the per-connection watch limit.
    pub async fn watch_events(
        &self,
        who: Principal,
        remote: Option<SocketAddr>,
        start: EventStart,
        kinds: Vec<EventKind>,
        prefixes: Vec<String>,
    ) -> EngineResult<EventWatch> {
        let node = self.node.clone();
        node.require_leader()?;
        // Held by the stream: freed when the stream ends, or the watcher drops it.
        let slot = node.limits().admit_watch(&who, remote)?;
        node.linearizable_read().await?;
        let (first, last) = {
            let st = node.state().read().expect("state lock");
            let log = st.table.events();
            let first = match start {
                EventStart::OnlyNew => log.last_seq() + 1,
                EventStart::At(0) => log.oldest_seq(),
                EventStart::At(n) => n,
            };
            (first, log.last_seq())
        };
        let filter = EventFilter { prefixes, kinds, who };
        let events = async_stream::try_stream! {
            let _slot = slot;
            let mut next = first;
            let mut changes = node.events_appended();
            let mut leadership = node.leadership();
            loop {
                changes.borrow_and_update();
                let batch = {
                    let st = node.state().read().expect("state lock");
                    let log = st.table.events();
                    if next == 0 {
                        next = log.oldest_seq();
                    }
                    log.since(next, EVENT_BATCH)
                };
                // Past the lock: an error here is yielded, and the guard must not be held then.
                let batch = batch.map_err(|e| {
                    EngineError::CursorExpired(format!(
                        "event {next} is no longer retained; the oldest retained event is {} (resume from there, or use only_new)",
                        e.oldest
                    ))
                })?;
                let full = batch.len() == EVENT_BATCH;
                for e in batch {
                    next = e.seq + 1;
                    if let Some(e) = filter.pass(e) {
                        yield e;
                    }
                }
                if full {
                    continue;
                }
                let deposed = tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break } else { false },
                    _ = leadership.wait_for(|leading| !leading) => true,
                };
                if deposed {
                    Err(node.deposed().await)?;
                }
            }
        };
        Ok(EventWatch { first, last, events: Box::pin(events) })
    }

    /// Up to `limit` events from sequence `from` on (0 = the oldest retained).
    pub fn events_since(&self, from: u64, limit: usize) -> Result<Vec<Event>, CursorExpired> {
        self.node.state().read().expect("state lock").table.events().since(from, limit)
    }

    /// Bumped whenever events are appended (or the table is replaced): mark it seen before
    /// reading, so an append right after the read still wakes the reader.
    pub fn events_appended(&self) -> watch::Receiver<u64> {
        self.node.events_appended()
    }

    /// The last event webhook `name` recorded as delivered, read after a linearizable read
    /// so it includes everything a previous leader recorded.
    pub async fn webhook_cursor(&self, name: &str) -> EngineResult<u64> {
        self.node.linearizable_read().await?;
        Ok(self.node.state().read().expect("state lock").table.webhook_cursor(name))
    }

    /// Records through raft that webhook `name` delivered every event up to `sequence`.
    pub async fn webhook_delivered(&self, name: &str, sequence: u64) -> EngineResult<()> {
        self.node.propose(Command::WebhookDelivered { webhook: name.to_string(), sequence }).await.map(|_| ())
    }
}

//! Spans of a traced lock: the client's trace context, given with its acquire, is followed
//! through the applied log: `dls.lock.wait` (the call's arrival to the grant, or to the end
//! of a wait that got nothing), `dls.lock.grant` (the grant to the moment the lock is let
//! go: its length is the hold time) and `dls.lock.release` or `dls.lock.revoke` (how it was
//! let go). All are children of the client's span, in its trace.
//!
//! The node that served the acquire (the leader; a follower forwards the context with the
//! call) registers the context and exports the spans; the other nodes apply the same
//! effects with nothing registered and export nothing. A lock granted under one leader and
//! released under the next has no release span (the next leader never saw the context).
//! What is followed at once is bounded (`MAX_TRACED`, of which one API key may hold
//! `MAX_TRACED_PER_KEY`, so one key's traced locks cannot leave the others untraced); past
//! it new acquires go untraced (the call itself is served as ever).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::otlp::{Attr, ExportStats, Exporter, Span};
use super::trace_context::TraceContext;
use crate::locks::{Effect, EndCause, LockKey, TxnId};

/// Acquires followed at once (registered and not yet bound, plus locks waited for or held).
pub const MAX_TRACED: usize = 10_000;
/// Of those, the acquires of one API key (without keys, the one caller may use them all).
pub const MAX_TRACED_PER_KEY: usize = MAX_TRACED / 4;
/// A registered acquire that no effect claimed in this long (refused before it reached the
/// table, a try-lock that found the key taken) is forgotten.
const UNCLAIMED: Duration = Duration::from_secs(60);

/// An acquire whose context arrived and whose effects have not been seen yet.
struct Registered {
    owner: Arc<str>,
    ctx: TraceContext,
    lock: LockKey,
    at: SystemTime,
    seen: Instant,
}

/// A lock of a transaction being followed.
struct Followed {
    owner: Arc<str>,
    ctx: TraceContext,
    request_id: String,
    phase: Phase,
}

enum Phase {
    /// Queued; the wait span runs from `since` (the call's arrival).
    Waiting { since: SystemTime },
    /// Granted at `since`.
    Held { since: SystemTime },
}

#[derive(Default)]
struct Traced {
    /// By request id, until the acquire's first effect.
    registered: HashMap<String, Registered>,
    followed: BTreeMap<(TxnId, LockKey), Followed>,
    /// Entries of `registered` and `followed` per API key name.
    by_owner: HashMap<Arc<str>, usize>,
}

impl Traced {
    fn len(&self) -> usize {
        self.registered.len() + self.followed.len()
    }

    /// Whether `owner` may have one more acquire followed.
    fn admits(&self, owner: &str) -> bool {
        self.len() < MAX_TRACED
            && (owner.is_empty() || self.by_owner.get(owner).copied().unwrap_or(0) < MAX_TRACED_PER_KEY)
    }

    fn counted(&mut self, owner: &Arc<str>) {
        *self.by_owner.entry(owner.clone()).or_default() += 1;
    }

    fn uncounted(&mut self, owner: &str) {
        if let Some(n) = self.by_owner.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.by_owner.remove(owner);
            }
        }
    }

    fn unregister(&mut self, request_id: &str) -> Option<Registered> {
        let r = self.registered.remove(request_id)?;
        self.uncounted(&r.owner);
        Some(r)
    }

    /// Follows `key` (already counted for its owner), replacing what followed it before.
    fn follow(&mut self, key: (TxnId, LockKey), f: Followed) {
        if let Some(old) = self.followed.insert(key, f) {
            self.uncounted(&old.owner);
        }
    }

    fn unfollow(&mut self, key: &(TxnId, LockKey)) -> Option<Followed> {
        let f = self.followed.remove(key)?;
        self.uncounted(&f.owner);
        Some(f)
    }
}

/// Follows traced acquires and exports their spans.
pub struct Tracer {
    exporter: Exporter,
    traced: Mutex<Traced>,
}

impl Tracer {
    pub fn start(traces_uri: http::Uri, node_id: u64) -> Tracer {
        Tracer::new(Exporter::start(traces_uri, node_id))
    }

    fn new(exporter: Exporter) -> Tracer {
        Tracer { exporter, traced: Mutex::default() }
    }

    pub fn stats(&self) -> &Arc<ExportStats> {
        &self.exporter.stats
    }

    /// Follows the acquire `request_id` of `lock` by API key `owner` ("" without keys) in
    /// the trace of `ctx` (an unsampled context is not followed).
    pub fn register(&self, owner: &str, request_id: &str, lock: &LockKey, ctx: TraceContext) {
        if !ctx.sampled {
            return;
        }
        let mut t = self.traced.lock().expect("tracer lock");
        let now = Instant::now();
        if !t.admits(owner) {
            let stale: Vec<String> = t
                .registered
                .iter()
                .filter(|(_, r)| now.duration_since(r.seen) >= UNCLAIMED)
                .map(|(id, _)| id.clone())
                .collect();
            for id in stale {
                t.unregister(&id);
            }
        }
        // A re-attached acquire (same request id) keeps its first registration.
        if !t.admits(owner) || t.registered.contains_key(request_id) {
            return;
        }
        let owner: Arc<str> = owner.into();
        t.counted(&owner);
        let r = Registered { owner, ctx, lock: lock.clone(), at: SystemTime::now(), seen: now };
        t.registered.insert(request_id.to_string(), r);
    }

    /// Forgets an acquire refused before it reached the log.
    pub fn unregister(&self, request_id: &str) {
        self.traced.lock().expect("tracer lock").unregister(request_id);
    }

    /// Follows the applied effects (on every node; only registered acquires make spans).
    pub fn observe(&self, effects: &[Effect]) {
        let mut t = self.traced.lock().expect("tracer lock");
        if t.registered.is_empty() && t.followed.is_empty() {
            return;
        }
        let now = SystemTime::now();
        for e in effects {
            match e {
                Effect::WaitStarted { txn, request_id, lock, .. } => {
                    if let Some(r) = claim(&mut t, request_id, lock) {
                        let phase = Phase::Waiting { since: r.at };
                        let f = Followed { owner: r.owner, ctx: r.ctx, request_id: request_id.clone(), phase };
                        t.follow((*txn, lock.clone()), f);
                    }
                }
                Effect::Granted { txn, request_id, lock } => {
                    let key = (*txn, lock.clone());
                    // Moved from registered or waiting to held: its owner's count stays.
                    let (owner, ctx, since, queued) = match claim(&mut t, request_id, lock) {
                        Some(r) => (r.owner, r.ctx, r.at, false),
                        None => match t.followed.remove(&key) {
                            Some(Followed { owner, ctx, phase: Phase::Waiting { since }, .. }) => {
                                (owner, ctx, since, true)
                            }
                            // An upgrade of a followed hold: its grant span goes on.
                            Some(held) => {
                                t.followed.insert(key, held);
                                continue;
                            }
                            None => continue,
                        },
                    };
                    let mut attrs = lock_attrs(*txn, lock);
                    attrs.push(("dls.queued", Attr::Bool(queued)));
                    self.exporter.send(span(&ctx, "dls.lock.wait", since, now, attrs, None));
                    let phase = Phase::Held { since: now };
                    t.follow(key, Followed { owner, ctx, request_id: request_id.clone(), phase });
                }
                Effect::WaitEnded { txn, request_id, granted: false } => {
                    let waiting = t
                        .followed
                        .range((*txn, LockKey::new("", ""))..)
                        .take_while(|((x, _), _)| x == txn)
                        .find(|(_, f)| f.request_id == *request_id && matches!(f.phase, Phase::Waiting { .. }))
                        .map(|(k, _)| k.clone());
                    if let Some((lock, Followed { ctx, phase: Phase::Waiting { since }, .. })) =
                        waiting.and_then(|k| t.unfollow(&k).map(|f| (k.1, f)))
                    {
                        let mut attrs = lock_attrs(*txn, &lock);
                        attrs.push(("dls.queued", Attr::Bool(true)));
                        let why = Some("the wait ended without a grant".to_string());
                        self.exporter.send(span(&ctx, "dls.lock.wait", since, now, attrs, why));
                    }
                }
                Effect::Released { txn, lock, ended_by, .. } => {
                    let Some(Followed { ctx, phase: Phase::Held { since }, .. }) = t.unfollow(&(*txn, lock.clone()))
                    else {
                        continue;
                    };
                    self.released(&ctx, *txn, lock, since, now, *ended_by);
                }
                Effect::TxnFinished { txn, .. } => {
                    let gone: Vec<_> = t
                        .followed
                        .range((*txn, LockKey::new("", ""))..)
                        .take_while(|((x, _), _)| x == txn)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in gone {
                        t.unfollow(&k);
                    }
                }
                _ => {}
            }
        }
    }

    /// The grant span (grant to let-go) and the release or revoke span ending it.
    fn released(
        &self,
        ctx: &TraceContext,
        txn: TxnId,
        lock: &LockKey,
        since: SystemTime,
        now: SystemTime,
        ended_by: Option<EndCause>,
    ) {
        let revoked = ended_by.filter(|c| c.revokes());
        let how = match ended_by {
            None => "released".to_string(),
            Some(c) => c.as_str().to_ascii_lowercase(),
        };
        let mut attrs = lock_attrs(txn, lock);
        attrs.push(("dls.lock.end", Attr::Str(how.clone())));
        let error = revoked.map(|c| format!("revoked: {}", c.describe()));
        self.exporter.send(span(ctx, "dls.lock.grant", since, now, attrs.clone(), error.clone()));
        let name = if revoked.is_some() { "dls.lock.revoke" } else { "dls.lock.release" };
        self.exporter.send(span(ctx, name, now, now, attrs, error));
    }
}

/// Takes the registration of `request_id` when it is for `lock`.
fn claim(t: &mut Traced, request_id: &str, lock: &LockKey) -> Option<Registered> {
    match t.registered.get(request_id) {
        Some(r) if r.lock == *lock => t.registered.remove(request_id),
        _ => None,
    }
}

fn lock_attrs(txn: TxnId, lock: &LockKey) -> Vec<(&'static str, Attr)> {
    vec![
        ("dls.namespace", Attr::Str(lock.namespace.clone())),
        ("dls.key", Attr::Str(lock.key.clone())),
        ("dls.txn", Attr::Int(txn)),
    ]
}

fn span(
    ctx: &TraceContext,
    name: &'static str,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<(&'static str, Attr)>,
    error: Option<String>,
) -> Span {
    Span {
        trace_id: ctx.trace_id,
        span_id: new_span_id(),
        parent_span_id: ctx.parent_span_id,
        tracestate: ctx.tracestate.clone(),
        name,
        start,
        end: end.max(start),
        attributes,
        error,
    }
}

fn new_span_id() -> [u8; 8] {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    fn ctx(sampled: bool) -> TraceContext {
        TraceContext { trace_id: [7; 16], parent_span_id: [9; 8], sampled, tracestate: None }
    }

    fn names(spans: &mut mpsc::Receiver<Span>) -> Vec<(&'static str, bool)> {
        std::iter::from_fn(|| spans.try_recv().ok()).map(|s| (s.name, s.error.is_some())).collect()
    }

    #[test]
    fn a_wait_that_ends_without_a_grant_and_a_granted_lock_make_their_spans() {
        let (queue, mut spans) = mpsc::channel(64);
        let tracer = Tracer::new(Exporter::to_queue(queue));
        let lock = LockKey::new("jobs", "k");
        tracer.register("", "r1", &lock, ctx(true));
        tracer.observe(&[Effect::WaitStarted { txn: 1, request_id: "r1".into(), wait_ms: 10, lock: lock.clone() }]);
        tracer.observe(&[Effect::WaitEnded { txn: 1, request_id: "r1".into(), granted: false }]);
        assert_eq!(names(&mut spans), [("dls.lock.wait", true)]);

        tracer.register("", "r2", &lock, ctx(true));
        tracer.observe(&[Effect::Granted { txn: 2, request_id: "r2".into(), lock: lock.clone() }]);
        let released = Effect::Released { txn: 2, lock: lock.clone(), held_ms: 5, ended_by: Some(EndCause::Committed) };
        tracer.observe(&[released]);
        assert_eq!(
            names(&mut spans),
            [("dls.lock.wait", false), ("dls.lock.grant", false), ("dls.lock.release", false)]
        );

        // Unsampled contexts, and effects of acquires nobody registered, make nothing.
        tracer.register("", "r3", &lock, ctx(false));
        tracer.observe(&[Effect::Granted { txn: 3, request_id: "r3".into(), lock: lock.clone() }]);
        tracer.observe(&[Effect::Granted { txn: 4, request_id: "r4".into(), lock }]);
        assert!(names(&mut spans).is_empty());
        let t = tracer.traced.lock().unwrap();
        assert!(t.registered.is_empty() && t.followed.is_empty() && t.by_owner.is_empty());
    }

    #[test]
    fn one_key_has_a_share_of_the_followed_acquires_and_gets_it_back_as_they_end() {
        let (queue, _spans) = mpsc::channel(1);
        let tracer = Tracer::new(Exporter::to_queue(queue));
        let lock = |i: usize| LockKey::new("jobs", format!("k{i}"));
        for i in 0..MAX_TRACED_PER_KEY + 10 {
            tracer.register("greedy", &format!("g{i}"), &lock(i), ctx(true));
        }
        tracer.register("other", "o1", &lock(0), ctx(true));
        tracer.register("", "open", &lock(0), ctx(true));
        {
            let t = tracer.traced.lock().unwrap();
            assert_eq!(t.by_owner["greedy"], MAX_TRACED_PER_KEY);
            assert_eq!(t.by_owner["other"], 1);
            assert_eq!(t.registered.len(), MAX_TRACED_PER_KEY + 2);
        }
        // Granted, then released: the key's count goes down again.
        tracer.observe(&[Effect::Granted { txn: 1, request_id: "g0".into(), lock: lock(0) }]);
        assert_eq!(tracer.traced.lock().unwrap().by_owner["greedy"], MAX_TRACED_PER_KEY);
        tracer.observe(&[Effect::Released { txn: 1, lock: lock(0), held_ms: 1, ended_by: None }]);
        tracer.unregister("g1");
        assert_eq!(tracer.traced.lock().unwrap().by_owner["greedy"], MAX_TRACED_PER_KEY - 2);
    }
}

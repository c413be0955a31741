//! Prometheus metrics of a node (rendered by the HTTP port's `/metrics`).
//!
//! Counters follow the applied log on every node, so any node can be scraped; a restart
//! replays the log since the last snapshot, which Prometheus sees as a counter reset plus
//! some re-counted entries (rates stay right). Gauges are read from the node at scrape
//! time. The text format is written by hand: a handful of atomics needs no crate.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod namespaces;

use crate::conn::admit::Refusal;
use crate::conn::{PortGuard, PortStats};
use crate::exposition::{header, metric, render_histogram, Histogram, HistogramCounts};
use crate::limits::Limit;
use crate::locks::{Effect, EndCause, TxnId};
use crate::raft::log_store::FSYNC_BUCKETS;
use namespaces::{Activity, NamespaceCounts};

/// Upper bounds (seconds) of the wait histogram: lock waits range from a few
/// milliseconds (a short critical section) to minutes (a batch job holding a key).
pub const WAIT_BUCKETS: [f64; 14] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0];

/// Waits tracked for the histogram at once. A snapshot install can swallow the end of a
/// wait, so the map must not be allowed to grow without bound; past this, new waits go
/// unmeasured (they are still counted in `dls_waits_total`).
const MAX_TRACKED_WAITS: usize = 100_000;

const END_CAUSES: [EndCause; 6] = [
    EndCause::Committed,
    EndCause::ClientAbort,
    EndCause::LeaseExpired,
    EndCause::DeadlockVictim,
    EndCause::OperatorAbort,
    EndCause::MaxDurationExceeded,
];

fn cause_label(cause: EndCause) -> &'static str {
    match cause {
        EndCause::Committed => "committed",
        EndCause::ClientAbort => "client_abort",
        EndCause::LeaseExpired => "expired",
        EndCause::DeadlockVictim => "deadlock_victim",
        EndCause::OperatorAbort => "operator_abort",
        EndCause::MaxDurationExceeded => "max_duration",
    }
}

fn cause_index(cause: EndCause) -> usize {
    END_CAUSES.iter().position(|c| *c == cause).expect("every cause is listed")
}

/// Per-webhook delivery counters (kept on the node that delivers: the leader).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebhookStats {
    pub delivered: u64,
    pub failed: u64,
    pub skipped: u64,
    pub cursor_expired: u64,
    /// Events lost because the log dropped them before they were delivered.
    pub lost: u64,
    pub last_sequence: u64,
}

/// A labelled metric family: name, help, type and the field of `S` it shows.
type Family<S> = (&'static str, &'static str, &'static str, fn(&S) -> u64);

/// Counters and gauges fed by applied effects and raft metrics.
pub struct Metrics {
    /// Heartbeat calls this node answered, and the leases they renewed (a batched call
    /// renews many): counted where they are served, not from the log.
    pub heartbeat_calls: AtomicU64,
    pub heartbeat_renewals: AtomicU64,
    /// Client calls this node forwarded to the leader as a follower, and those whose hop
    /// failed (answered NOT_LEADER instead).
    pub forwarded_calls: AtomicU64,
    pub forward_failures: AtomicU64,
    grants: AtomicU64,
    waits: AtomicU64,
    deadlocks: AtomicU64,
    lock_delays: AtomicU64,
    begun: AtomicU64,
    finished: [AtomicU64; END_CAUSES.len()],
    wait_seconds: Histogram,
    /// When each wait began, and the namespace of its key.
    waiting_since: Mutex<HashMap<(TxnId, String), (Instant, String)>>,
    by_namespace: Mutex<NamespaceCounts>,
    webhooks: Mutex<BTreeMap<String, WebhookStats>>,
    /// The ports' connection counts (`conn`), set once they are open.
    ports: Mutex<Vec<Arc<PortGuard>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(namespaces::DEFAULT_LABELLED)
    }
}

impl Metrics {
    /// Metrics that label up to `labelled_namespaces` namespaces (`--metrics-namespaces`).
    pub fn new(labelled_namespaces: usize) -> Self {
        Metrics {
            heartbeat_calls: 0.into(),
            heartbeat_renewals: 0.into(),
            forwarded_calls: 0.into(),
            forward_failures: 0.into(),
            grants: 0.into(),
            waits: 0.into(),
            deadlocks: 0.into(),
            lock_delays: 0.into(),
            begun: 0.into(),
            finished: Default::default(),
            wait_seconds: Histogram::new(&WAIT_BUCKETS),
            waiting_since: Mutex::default(),
            by_namespace: Mutex::new(NamespaceCounts::new(labelled_namespaces)),
            webhooks: Mutex::default(),
            ports: Mutex::default(),
        }
    }
}

/// Values read from the node when `/metrics` is scraped (`Engine::gauges`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    pub active_transactions: u64,
    pub held_locks: u64,
    pub waiting_requests: u64,
    pub last_fencing_token: u64,
    pub last_event_sequence: u64,
    pub raft_term: u64,
    pub is_leader: bool,
    /// Serving as the leader: elected, and caught up with what earlier terms committed.
    pub serving: bool,
    /// 0 when no leader is known.
    pub leader_id: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    /// Voters in the membership this node knows (0: none, an empty or lost log).
    pub voters: u64,
    /// Raft log entries up to this index were lost to disk damage and are being fetched
    /// again from the leader (protocol-aware recovery).
    pub owed_index: Option<u64>,
    /// Counters of this node's raft log writes since it started.
    pub log_append_flushes: u64,
    pub log_entries_appended: u64,
    pub log_flush_micros: u64,
    /// How long each of those flushes took.
    pub log_flush_seconds: HistogramCounts,
    /// Commands this node proposed, and the raft entries they became (group commit).
    pub proposed_commands: u64,
    pub proposed_entries: u64,
    /// Client proposals waiting for a write, and those shed because the queue was full.
    pub queued_proposals: u64,
    pub shed_proposals: u64,
    /// Acquires that would queue, parked to ride with the next write.
    pub parked_proposals: u64,
    /// Client calls this node has open on the leader (forwarded).
    pub forwarded_open: u64,
    /// Requests refused by each limit (in `Limit::ALL` order).
    pub refused: [u64; Limit::ALL.len()],
    /// Spans exported to `--otlp-endpoint`, dropped (queue full or export failed), and
    /// failed export requests.
    pub spans_exported: u64,
    pub spans_dropped: u64,
    pub span_export_failures: u64,
}

impl Gauges {
    pub fn apply_lag(&self) -> u64 {
        self.commit_index.saturating_sub(self.applied_index)
    }
}

impl Metrics {
    /// Follows the applied log (called on every node for every applied batch).
    pub fn observe(&self, effects: &[Effect]) {
        let now = Instant::now();
        let mut by_namespace = self.by_namespace.lock().expect("metrics lock");
        for e in effects {
            match e {
                Effect::Granted { lock, .. } => {
                    self.bump(&self.grants);
                    by_namespace.count(&lock.namespace, Activity::Grant, now);
                }
                Effect::TxnBegun { .. } => self.bump(&self.begun),
                Effect::DeadlockResolved { lock } => {
                    self.bump(&self.deadlocks);
                    by_namespace.count(&lock.namespace, Activity::Deadlock, now);
                }
                Effect::LockDelayed { .. } => self.bump(&self.lock_delays),
                Effect::TxnFinished { cause, .. } => self.bump(&self.finished[cause_index(*cause)]),
                Effect::WaitStarted { txn, request_id, lock, .. } => {
                    self.bump(&self.waits);
                    self.wait_started(*txn, request_id, &lock.namespace, now);
                    by_namespace.count(&lock.namespace, Activity::Wait, now);
                }
                Effect::WaitEnded { txn, request_id, granted } => {
                    if let Some((namespace, waited)) = self.wait_ended(*txn, request_id, *granted, now) {
                        by_namespace.count(&namespace, Activity::Waited(waited), now);
                    }
                }
                Effect::Released { lock, held_ms, ended_by, .. } => {
                    let held = Duration::from_millis(*held_ms);
                    by_namespace.count(&lock.namespace, Activity::Released { held, ended_by: *ended_by }, now);
                }
                Effect::TxnChanged { .. }
                | Effect::QueueMoved { .. }
                | Effect::EventsAppended
                | Effect::ApiKeysChanged
                | Effect::DeadlineSet { .. }
                | Effect::KeyChanged { .. } => {}
            }
        }
    }

    fn bump(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    fn wait_started(&self, txn: TxnId, request_id: &str, namespace: &str, now: Instant) {
        let mut waits = self.waiting_since.lock().expect("metrics lock");
        if waits.len() < MAX_TRACKED_WAITS {
            waits.insert((txn, request_id.to_string()), (now, namespace.to_string()));
        }
    }

    /// Ends the timing of a wait; a granted one gives its namespace and how long it took.
    fn wait_ended(&self, txn: TxnId, request_id: &str, granted: bool, now: Instant) -> Option<(String, Duration)> {
        let started = self.waiting_since.lock().expect("metrics lock").remove(&(txn, request_id.to_string()));
        // Only waits that ended in a grant tell how long a lock takes to get.
        let (since, namespace) = started.filter(|_| granted)?;
        let waited = now.saturating_duration_since(since);
        self.wait_seconds.observe(waited);
        Some((namespace, waited))
    }

    /// Shows these ports' connections in `/metrics`.
    pub fn watch_ports(&self, ports: Vec<Arc<PortGuard>>) {
        *self.ports.lock().expect("metrics lock") = ports;
    }

    fn render_ports(&self, out: &mut String) {
        let ports: Vec<(&str, PortStats)> =
            self.ports.lock().expect("metrics lock").iter().map(|p| (p.port, p.stats())).collect();
        let families: [Family<PortStats>; 4] = [
            ("dls_connections_open", "Connections open on a port (handshakes included).", "gauge", |s| s.open),
            ("dls_connections_handshaking", "Connections still in their TLS handshake or opening.", "gauge", |s| {
                s.handshaking
            }),
            ("dls_requests_arriving", "Calls whose request has not all arrived yet.", "gauge", |s| s.pending_requests),
            (
                "dls_accept_errors_total",
                "Failed accepts (out of descriptors, buffers); each backs off.",
                "counter",
                |s| s.accept_errors,
            ),
        ];
        for (name, help, kind, value) in families {
            header(out, name, help, kind);
            for (port, s) in &ports {
                let _ = writeln!(out, "{name}{{port=\"{port}\"}} {}", value(s));
            }
        }
        let name = "dls_connections_refused_total";
        header(
            out,
            name,
            "Connections closed at once or in their handshake, by the bound that refused them.",
            "counter",
        );
        for (port, s) in &ports {
            for why in Refusal::ALL {
                let _ =
                    writeln!(out, "{name}{{port=\"{port}\",reason=\"{}\"}} {}", why.label(), s.refused[why as usize]);
            }
        }
    }

    /// Updates the delivery counters of webhook `name`.
    pub fn webhook(&self, name: &str, update: impl FnOnce(&mut WebhookStats)) {
        let mut hooks = self.webhooks.lock().expect("metrics lock");
        update(hooks.entry(name.to_string()).or_default());
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, g: &Gauges) -> String {
        let mut out = String::with_capacity(4096);
        self.render_counters(&mut out);
        self.wait_seconds.render(
            &mut out,
            "dls_wait_seconds",
            "Time from queueing to the grant, for requests that had to wait (measured on this node).",
        );
        self.by_namespace.lock().expect("metrics lock").render(&mut out);
        render_gauges(&mut out, g);
        self.render_ports(&mut out);
        self.render_webhooks(&mut out, g.last_event_sequence);
        out
    }

    fn render_counters(&self, out: &mut String) {
        let counters: [(&str, &str, &AtomicU64); 9] = [
            ("dls_heartbeat_calls_total", "Heartbeat calls answered by this node.", &self.heartbeat_calls),
            ("dls_heartbeat_renewals_total", "Leases renewed by those calls.", &self.heartbeat_renewals),
            ("dls_forwarded_calls_total", "Client calls this follower forwarded to the leader.", &self.forwarded_calls),
            (
                "dls_forward_failures_total",
                "Forwarded calls whose hop to the leader failed (answered NOT_LEADER).",
                &self.forward_failures,
            ),
            ("dls_grants_total", "Locks granted (each with a new fencing token).", &self.grants),
            ("dls_waits_total", "Lock requests that had to queue.", &self.waits),
            ("dls_deadlocks_total", "Deadlocks detected and broken by aborting a victim.", &self.deadlocks),
            (
                "dls_lock_delays_total",
                "Keys put under a lock-delay because their holder was revoked (see SetLockDelay).",
                &self.lock_delays,
            ),
            ("dls_transactions_begun_total", "Transactions begun.", &self.begun),
        ];
        for (name, help, value) in counters {
            metric(out, name, help, "counter", value.load(Relaxed));
        }
        let expired = self.finished[cause_index(EndCause::LeaseExpired)].load(Relaxed);
        metric(out, "dls_expiries_total", "Transactions whose lease lapsed.", "counter", expired);
        let name = "dls_transactions_finished_total";
        header(out, name, "Transactions finished, by cause.", "counter");
        for cause in END_CAUSES {
            let v = self.finished[cause_index(cause)].load(Relaxed);
            let _ = writeln!(out, "{name}{{cause=\"{}\"}} {v}", cause_label(cause));
        }
    }

    fn render_webhooks(&self, out: &mut String, last_event_sequence: u64) {
        let hooks = self.webhooks.lock().expect("metrics lock").clone();
        let families: [Family<WebhookStats>; 6] = [
            ("dls_webhook_deliveries_total", "Events a webhook endpoint acknowledged.", "counter", |s| s.delivered),
            ("dls_webhook_failures_total", "Failed delivery attempts (each is retried).", "counter", |s| s.failed),
            ("dls_webhook_skipped_total", "Events the webhook's filter left out.", "counter", |s| s.skipped),
            (
                "dls_webhook_cursor_expired_total",
                "Times a webhook fell behind the retained event log.",
                "counter",
                |s| s.cursor_expired,
            ),
            (
                "dls_webhook_lost_events_total",
                "Events dropped from the log before the webhook got them.",
                "counter",
                |s| s.lost,
            ),
            (
                "dls_webhook_last_sequence",
                "Last event sequence a webhook delivered or skipped (on the delivering node).",
                "gauge",
                |s| s.last_sequence,
            ),
        ];
        for (name, help, kind, get) in families {
            header(out, name, help, kind);
            for (hook, stats) in &hooks {
                let _ = writeln!(out, "{name}{{webhook=\"{}\"}} {}", escape_label(hook), get(stats));
            }
        }
        let name = "dls_webhook_backlog";
        header(
            out,
            name,
            "Events logged after the last one a webhook delivered or skipped (meaningful on the delivering node, the leader).",
            "gauge",
        );
        for (hook, stats) in &hooks {
            let backlog = last_event_sequence.saturating_sub(stats.last_sequence);
            let _ = writeln!(out, "{name}{{webhook=\"{}\"}} {backlog}", escape_label(hook));
        }
    }
}

fn render_gauges(out: &mut String, g: &Gauges) {
    let gauges: [(&str, &str, u64); 11] = [
        ("dls_active_transactions", "Active transactions.", g.active_transactions),
        ("dls_held_locks", "Locks held (one per holder).", g.held_locks),
        ("dls_waiting_requests", "Lock requests waiting in a queue.", g.waiting_requests),
        ("dls_last_fencing_token", "Last fencing token issued.", g.last_fencing_token),
        ("dls_last_event_sequence", "Sequence number of the last event.", g.last_event_sequence),
        ("dls_raft_term", "This node's raft term.", g.raft_term),
        ("dls_is_leader", "1 when this node is the raft leader.", u64::from(g.is_leader)),
        ("dls_leader_id", "The leader this node knows of (0 = none).", g.leader_id),
        ("dls_commit_index", "Highest log index known committed.", g.commit_index),
        ("dls_applied_index", "Highest log index applied to the lock table.", g.applied_index),
        ("dls_apply_lag", "Committed entries not yet applied here.", g.apply_lag()),
    ];
    for (name, help, value) in gauges {
        metric(out, name, help, "gauge", value);
    }
    // Entries per flush = appended / flushes: how well proposals share an fsync.
    metric(
        out,
        "dls_raft_log_flushes_total",
        "Flushes (fsyncs) of appended raft entries.",
        "counter",
        g.log_append_flushes,
    );
    metric(
        out,
        "dls_raft_log_entries_total",
        "Raft entries appended to this node's log.",
        "counter",
        g.log_entries_appended,
    );
    metric(
        out,
        "dls_proposed_commands_total",
        "Commands this node proposed (as leader).",
        "counter",
        g.proposed_commands,
    );
    metric(
        out,
        "dls_proposed_entries_total",
        "Raft entries those commands were batched into.",
        "counter",
        g.proposed_entries,
    );
    header(out, "dls_raft_log_flush_seconds_total", "Time spent flushing appended entries.", "counter");
    let _ = writeln!(out, "dls_raft_log_flush_seconds_total {}", g.log_flush_micros as f64 / 1e6);
    render_histogram(
        out,
        "dls_raft_log_fsync_seconds",
        "Duration of each fsync (fdatasync round) of appended raft entries; every write waits for one.",
        &FSYNC_BUCKETS,
        &g.log_flush_seconds,
    );
    metric(out, "dls_queued_proposals", "Client proposals waiting for a raft write.", "gauge", g.queued_proposals);
    metric(
        out,
        "dls_forwarded_calls_open",
        "Client calls this follower has open on the leader (--max-forwarded-calls).",
        "gauge",
        g.forwarded_open,
    );
    metric(
        out,
        "dls_shed_proposals_total",
        "Client proposals shed with UNAVAILABLE because the queue was full (--max-queued-proposals).",
        "counter",
        g.shed_proposals,
    );
    metric(
        out,
        "dls_parked_proposals_total",
        "Acquires that would queue, written with the next entry instead of one of their own (up to 2 ms later).",
        "counter",
        g.parked_proposals,
    );
    let spans: [(&str, &str, u64); 3] = [
        ("dls_trace_spans_exported_total", "Spans the --otlp-endpoint collector accepted.", g.spans_exported),
        (
            "dls_trace_spans_dropped_total",
            "Spans dropped: the export queue was full (collector slow or down) or their request failed.",
            g.spans_dropped,
        ),
        ("dls_trace_export_failures_total", "Span export requests that failed.", g.span_export_failures),
    ];
    for (name, help, value) in spans {
        metric(out, name, help, "counter", value);
    }
    let name = "dls_refused_total";
    header(
        out,
        name,
        "Requests refused with RESOURCE_EXHAUSTED, by the limit (its flag) that refused them.",
        "counter",
    );
    for (limit, v) in Limit::ALL.iter().zip(g.refused) {
        let _ = writeln!(out, "{name}{{limit=\"{}\"}} {v}", limit.flag());
    }
}

/// Label values may hold any text; the format needs `\`, `"` and newlines escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> Option<String> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_string))
    }

    #[test]
    fn effects_move_the_counters_and_a_granted_wait_is_timed() {
        let m = Metrics::default();
        let rid = "r1".to_string();
        m.observe(&[
            Effect::TxnBegun { txn: 1, lease_ms: 1000 },
            Effect::Granted { txn: 1, request_id: rid.clone(), lock: key("a") },
            Effect::WaitStarted { txn: 2, request_id: rid.clone(), wait_ms: 100, lock: key("a") },
            Effect::WaitStarted { txn: 3, request_id: rid.clone(), wait_ms: 100, lock: key("b") },
        ]);
        m.observe(&[
            Effect::DeadlockResolved { lock: key("b") },
            Effect::WaitEnded { txn: 3, request_id: rid.clone(), granted: false },
            Effect::TxnFinished { txn: 3, cause: EndCause::DeadlockVictim },
            Effect::TxnFinished { txn: 4, cause: EndCause::LeaseExpired },
            Effect::Granted { txn: 2, request_id: rid.clone(), lock: key("a") },
            Effect::WaitEnded { txn: 2, request_id: rid, granted: true },
        ]);
        let text = m.render(&Gauges::default());
        assert_eq!(value(&text, "dls_grants_total").as_deref(), Some("2"));
        assert_eq!(value(&text, "dls_waits_total").as_deref(), Some("2"));
        assert_eq!(value(&text, "dls_deadlocks_total").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_expiries_total").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_transactions_begun_total").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_transactions_finished_total{cause=\"deadlock_victim\"}").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_transactions_finished_total{cause=\"committed\"}").as_deref(), Some("0"));
        // Only the granted wait is timed; the victim's wait is not.
        assert_eq!(value(&text, "dls_wait_seconds_count").as_deref(), Some("1"));
        assert!(m.waiting_since.lock().unwrap().is_empty());
        assert_eq!(value(&text, "dls_namespace_grants_total{namespace=\"jobs-a\"}").as_deref(), Some("2"));
        assert_eq!(value(&text, "dls_namespace_waits_total{namespace=\"jobs-b\"}").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_namespace_deadlocks_total{namespace=\"jobs-b\"}").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_namespace_wait_seconds_count{namespace=\"jobs-a\"}").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_namespace_wait_seconds_count{namespace=\"jobs-b\"}").as_deref(), Some("0"));
    }

    fn key(ns: &str) -> crate::locks::LockKey {
        crate::locks::LockKey::new(format!("jobs-{ns}"), "k")
    }

    #[test]
    fn gauges_and_webhook_series_render_with_help_type_and_escaped_labels() {
        let m = Metrics::default();
        m.webhook("ops \"eu\"", |s| {
            s.delivered += 2;
            s.last_sequence = 7;
        });
        let g = Gauges {
            commit_index: 10,
            applied_index: 7,
            is_leader: true,
            leader_id: 2,
            last_event_sequence: 12,
            ..Gauges::default()
        };
        let text = m.render(&g);
        assert_eq!(value(&text, "dls_apply_lag").as_deref(), Some("3"));
        assert_eq!(value(&text, "dls_is_leader").as_deref(), Some("1"));
        assert_eq!(value(&text, "dls_leader_id").as_deref(), Some("2"));
        assert_eq!(value(&text, "dls_webhook_deliveries_total{webhook=\"ops \\\"eu\\\"\"}").as_deref(), Some("2"));
        assert_eq!(value(&text, "dls_webhook_last_sequence{webhook=\"ops \\\"eu\\\"\"}").as_deref(), Some("7"));
        assert_eq!(value(&text, "dls_webhook_backlog{webhook=\"ops \\\"eu\\\"\"}").as_deref(), Some("5"));
        assert_eq!(value(&text, "dls_raft_log_fsync_seconds_count").as_deref(), Some("0"));
        // Every sample belongs to a family announced by HELP and TYPE just before it.
        let mut family = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap().to_string();
            } else if !line.starts_with('#') {
                assert!(line.starts_with(&family), "{line:?} outside its family {family:?}");
            }
        }
    }
}

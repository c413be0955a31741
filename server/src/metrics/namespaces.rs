//! Lock metrics by namespace, with a bounded set of label values.
//!
//! Namespaces are chosen by clients, so a label per namespace would let any key grow the
//! node's series (and Prometheus' memory) without bound. Only `capacity`
//! (`--metrics-namespaces`) namespaces get a label of their own: the first ones seen with
//! activity (a wait, grant, release, revocation or deadlock). Everything else is counted
//! under `namespace="other"` (a namespace literally named `other` too, so the catch-all
//! never shares its label). A labelled namespace idle for `RECLAIM_IDLE` gives its label
//! to the next new namespace, so a burst of namespaces that then go quiet cannot hold the
//! labels for good; its series then disappear, and come back from zero if it gets a label
//! again (Prometheus reads that as a counter reset).
//!
//! Counted from the applied log, like the cluster-wide counters: every node counts the
//! same events. Which namespaces hold labels depends on the order a node saw them since it
//! started, so two nodes restarted at different times may label different namespaces.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::exposition::{header, histogram_samples, HistogramCounts};
use crate::locks::EndCause;

/// Default of `--metrics-namespaces`.
pub const DEFAULT_LABELLED: usize = 10;

/// The label value of every namespace without a label of its own.
pub const OTHER: &str = "other";

/// How long a labelled namespace must be idle before a new one may take its label.
pub const RECLAIM_IDLE: Duration = Duration::from_secs(3600);

/// Upper bounds (seconds) of the hold histogram: from a short critical section to a
/// batch job holding its key for an hour.
pub const HOLD_BUCKETS: [f64; 12] = [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0];

/// The causes under which the server takes locks away, with their label.
const REVOKING: [(EndCause, &str); 4] = [
    (EndCause::LeaseExpired, "expired"),
    (EndCause::OperatorAbort, "operator_abort"),
    (EndCause::DeadlockVictim, "deadlock_victim"),
    (EndCause::MaxDurationExceeded, "max_duration"),
];

/// What happened in a namespace (one applied effect).
#[derive(Clone, Copy, Debug)]
pub enum Activity {
    Wait,
    /// A wait that ended in a grant, after this long (on this node's clock).
    Waited(Duration),
    Grant,
    /// A holder let go after this long (by the log's clock); revoked when `cause` revokes.
    Released {
        held: Duration,
        ended_by: Option<EndCause>,
    },
    Deadlock,
}

#[derive(Clone, Debug)]
struct Counts {
    waits: u64,
    grants: u64,
    deadlocks: u64,
    revoked: [u64; REVOKING.len()],
    wait_seconds: HistogramCounts,
    hold_seconds: HistogramCounts,
}

impl Counts {
    fn new() -> Self {
        Counts {
            waits: 0,
            grants: 0,
            deadlocks: 0,
            revoked: [0; REVOKING.len()],
            wait_seconds: HistogramCounts::zero(&super::WAIT_BUCKETS),
            hold_seconds: HistogramCounts::zero(&HOLD_BUCKETS),
        }
    }

    fn count(&mut self, what: Activity) {
        match what {
            Activity::Wait => self.waits += 1,
            Activity::Waited(d) => self.wait_seconds.observe(&super::WAIT_BUCKETS, d),
            Activity::Grant => self.grants += 1,
            Activity::Deadlock => self.deadlocks += 1,
            Activity::Released { held, ended_by } => {
                self.hold_seconds.observe(&HOLD_BUCKETS, held);
                if let Some(i) = ended_by.and_then(|c| REVOKING.iter().position(|(r, _)| *r == c)) {
                    self.revoked[i] += 1;
                }
            }
        }
    }
}

/// A counter family: name, help and the count it shows.
type CounterFamily = (&'static str, &'static str, fn(&Counts) -> u64);
/// A histogram family: name, help, bucket bounds and the counts it shows.
type HistogramFamily = (&'static str, &'static str, &'static [f64], fn(&Counts) -> &HistogramCounts);

struct Labelled {
    namespace: String,
    counts: Counts,
    last_active: Instant,
}

/// The per-namespace counters of a node.
pub struct NamespaceCounts {
    capacity: usize,
    labelled: Vec<Labelled>,
    /// Namespace -> its index in `labelled`.
    index: HashMap<String, usize>,
    other: Counts,
}

impl NamespaceCounts {
    pub fn new(capacity: usize) -> Self {
        NamespaceCounts { capacity, labelled: Vec::new(), index: HashMap::new(), other: Counts::new() }
    }

    /// Counts `what` in `namespace`, `now` being this node's clock.
    pub fn count(&mut self, namespace: &str, what: Activity, now: Instant) {
        match self.label_of(namespace, now) {
            Some(i) => {
                let l = &mut self.labelled[i];
                l.last_active = now;
                l.counts.count(what);
            }
            None => self.other.count(what),
        }
    }

    /// The label slot of `namespace`, giving it one if one is free or idle.
    fn label_of(&mut self, namespace: &str, now: Instant) -> Option<usize> {
        if let Some(&i) = self.index.get(namespace) {
            return Some(i);
        }
        if namespace == OTHER || self.capacity == 0 {
            return None;
        }
        let fresh = Labelled { namespace: namespace.to_string(), counts: Counts::new(), last_active: now };
        if self.labelled.len() < self.capacity {
            self.labelled.push(fresh);
            self.index.insert(namespace.to_string(), self.labelled.len() - 1);
            return Some(self.labelled.len() - 1);
        }
        let (i, idlest) = self.labelled.iter().enumerate().min_by_key(|(_, l)| l.last_active)?;
        if now.saturating_duration_since(idlest.last_active) < RECLAIM_IDLE {
            return None;
        }
        let old = std::mem::replace(&mut self.labelled[i], fresh);
        self.index.remove(&old.namespace);
        self.index.insert(namespace.to_string(), i);
        Some(i)
    }

    /// The label values in use (the labelled namespaces, then `other`).
    #[cfg(test)]
    pub fn labels(&self) -> Vec<&str> {
        self.labelled.iter().map(|l| l.namespace.as_str()).chain([OTHER]).collect()
    }

    pub fn render(&self, out: &mut String) {
        let mut series: Vec<(String, &Counts)> =
            self.labelled.iter().map(|l| (super::escape_label(&l.namespace), &l.counts)).collect();
        series.sort_by(|a, b| a.0.cmp(&b.0));
        series.push((OTHER.to_string(), &self.other));
        let counters: [CounterFamily; 3] = [
            ("dls_namespace_waits_total", "Lock requests that had to queue, by namespace.", |c| c.waits),
            ("dls_namespace_grants_total", "Locks granted, by namespace.", |c| c.grants),
            (
                "dls_namespace_deadlocks_total",
                "Deadlocks broken, by the namespace of the key the victim waited for.",
                |c| c.deadlocks,
            ),
        ];
        for (name, help, get) in counters {
            header(out, name, help, "counter");
            for (ns, c) in &series {
                let _ = writeln!(out, "{name}{{namespace=\"{ns}\"}} {}", get(c));
            }
        }
        let name = "dls_namespace_revocations_total";
        header(out, name, "Locks the server took away, by namespace and cause.", "counter");
        for (ns, c) in &series {
            for (i, (_, cause)) in REVOKING.iter().enumerate() {
                let _ = writeln!(out, "{name}{{namespace=\"{ns}\",cause=\"{cause}\"}} {}", c.revoked[i]);
            }
        }
        let histograms: [HistogramFamily; 2] = [
            (
                "dls_namespace_wait_seconds",
                "Time from queueing to the grant, by namespace (measured on this node).",
                &super::WAIT_BUCKETS,
                |c| &c.wait_seconds,
            ),
            (
                "dls_namespace_hold_seconds",
                "How long locks were held before their release or revocation, by namespace (the leader's clock, from the log).",
                &HOLD_BUCKETS,
                |c| &c.hold_seconds,
            ),
        ];
        for (name, help, bounds, get) in histograms {
            header(out, name, help, "histogram");
            for (ns, c) in &series {
                histogram_samples(out, name, &format!("namespace=\"{ns}\","), bounds, get(c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_capacity_namespaces_count_as_other_until_a_label_has_been_idle_long_enough() {
        let mut c = NamespaceCounts::new(2);
        let t0 = Instant::now();
        c.count("a", Activity::Grant, t0);
        c.count("b", Activity::Grant, t0 + Duration::from_secs(10));
        c.count("c", Activity::Grant, t0 + Duration::from_secs(20));
        c.count(OTHER, Activity::Grant, t0 + Duration::from_secs(20));
        assert_eq!(c.labels(), ["a", "b", OTHER]);
        assert_eq!(c.other.grants, 2);
        // "a" idle for the reclaim window: the next new namespace takes its label, from zero.
        c.count("d", Activity::Wait, t0 + RECLAIM_IDLE + Duration::from_secs(1));
        assert_eq!(c.labels(), ["d", "b", OTHER]);
        assert_eq!(c.labelled[0].counts.grants, 0);
        assert_eq!(c.labelled[0].counts.waits, 1);
        // "a" comes back with both labels busy: other.
        c.count("a", Activity::Grant, t0 + RECLAIM_IDLE + Duration::from_secs(2));
        assert_eq!(c.other.grants, 3);
        assert_eq!(NamespaceCounts::new(0).label_of("x", t0), None);
    }

    #[test]
    fn revocations_are_counted_by_cause_and_every_release_is_timed() {
        let mut c = NamespaceCounts::new(4);
        let now = Instant::now();
        let held = Duration::from_millis(300);
        c.count("jobs", Activity::Released { held, ended_by: None }, now);
        c.count("jobs", Activity::Released { held, ended_by: Some(EndCause::Committed) }, now);
        c.count("jobs", Activity::Released { held, ended_by: Some(EndCause::LeaseExpired) }, now);
        c.count("jobs", Activity::Released { held, ended_by: Some(EndCause::DeadlockVictim) }, now);
        let mut out = String::new();
        c.render(&mut out);
        assert!(out.contains("dls_namespace_revocations_total{namespace=\"jobs\",cause=\"expired\"} 1\n"), "{out}");
        assert!(out.contains("dls_namespace_revocations_total{namespace=\"jobs\",cause=\"deadlock_victim\"} 1\n"));
        assert!(out.contains("dls_namespace_revocations_total{namespace=\"jobs\",cause=\"operator_abort\"} 0\n"));
        assert!(out.contains("dls_namespace_hold_seconds_bucket{namespace=\"jobs\",le=\"0.5\"} 4\n"), "{out}");
        assert!(out.contains("dls_namespace_hold_seconds_count{namespace=\"jobs\"} 4\n"), "{out}");
        assert!(out.contains("dls_namespace_grants_total{namespace=\"other\"} 0\n"));
    }
}

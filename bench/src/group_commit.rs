//! Group commit on the DLS leader over the measured window, read from every node's
//! `/metrics` before and after (`--metrics`): how many client writes (commands) and raft
//! entries shared each fsync of the leader's log, and which node led (so its CPU per
//! write can be reported).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::scrape;

/// Counters of one node at one moment; None where the node did not answer.
pub type Sample = Vec<Option<HashMap<String, f64>>>;

pub async fn sample(addrs: &[String]) -> Sample {
    let mut out = Vec::with_capacity(addrs.len());
    for a in addrs {
        out.push(scrape::metrics(a).await.ok());
    }
    out
}

/// What the leader did between two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Client writes the leader proposed.
    pub commands: f64,
    /// Raft entries they were batched into.
    pub entries: f64,
    /// fsyncs of the leader's log.
    pub flushes: f64,
    /// Raft entries the leader applied (its `dls_applied_index` moved by this much).
    pub applied: f64,
    /// Position of the leader in the `--metrics` list.
    pub node: usize,
}

impl Window {
    /// The node that proposed the most in the window is the leader (a leader change
    /// mid-run splits the figure; the larger part is reported).
    pub fn of_leader(before: &Sample, after: &Sample) -> Option<Window> {
        let delta = |b: &HashMap<String, f64>, a: &HashMap<String, f64>, k: &str| {
            a.get(k).copied().unwrap_or(0.0) - b.get(k).copied().unwrap_or(0.0)
        };
        before
            .iter()
            .zip(after)
            .enumerate()
            .filter_map(|(node, (b, a))| {
                let (b, a) = (b.as_ref()?, a.as_ref()?);
                Some(Window {
                    commands: delta(b, a, "dls_proposed_commands_total"),
                    entries: delta(b, a, "dls_proposed_entries_total"),
                    flushes: delta(b, a, "dls_raft_log_flushes_total"),
                    applied: delta(b, a, "dls_applied_index"),
                    node,
                })
            })
            .filter(|w| w.commands > 0.0 && w.flushes > 0.0)
            .max_by(|x, y| x.commands.total_cmp(&y.commands))
    }

    pub fn commands_per_fsync(self) -> f64 {
        self.commands / self.flushes
    }

    pub fn entries_per_fsync(self) -> f64 {
        self.entries / self.flushes
    }

    pub fn to_json(self) -> Value {
        let round = |x: f64| (x * 100.0).round() / 100.0;
        json!({
            "commands": self.commands,
            "entries": self.entries,
            "fsyncs": self.flushes,
            "commands_per_fsync": round(self.commands_per_fsync()),
            "entries_per_fsync": round(self.entries_per_fsync()),
            "applied_entries": self.applied,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(commands: f64, entries: f64, flushes: f64) -> Option<HashMap<String, f64>> {
        Some(HashMap::from([
            ("dls_proposed_commands_total".to_string(), commands),
            ("dls_proposed_entries_total".to_string(), entries),
            ("dls_raft_log_flushes_total".to_string(), flushes),
            ("dls_applied_index".to_string(), entries),
        ]))
    }

    #[test]
    fn the_node_that_proposed_most_is_the_leader_and_a_silent_node_is_skipped() {
        let before = vec![node(0.0, 0.0, 10.0), node(100.0, 10.0, 20.0), None];
        let after = vec![node(0.0, 0.0, 60.0), node(1700.0, 110.0, 120.0), node(5.0, 5.0, 5.0)];
        let w = Window::of_leader(&before, &after).unwrap();
        assert_eq!(w, Window { commands: 1600.0, entries: 100.0, flushes: 100.0, applied: 100.0, node: 1 });
        assert_eq!(w.to_json()["commands_per_fsync"], 16.0);
        assert_eq!(w.to_json()["entries_per_fsync"], 1.0);
    }

    #[test]
    fn no_writes_in_the_window_gives_no_figure() {
        let s = vec![node(5.0, 1.0, 1.0)];
        assert_eq!(Window::of_leader(&s, &s), None);
    }
}

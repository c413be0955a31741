//! Prometheus metrics of a node (rendered by the HTTP port's `/metrics`).

use crate::locks::Effect;

/// Counters and gauges fed by applied effects and raft metrics.
#[derive(Default)]
pub struct Metrics {}

impl Metrics {
    /// Follows the applied log (called on every node for every applied batch).
    pub fn observe(&self, _effects: &[Effect]) {}
}

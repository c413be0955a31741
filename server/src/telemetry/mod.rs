//! What a node tells operators beyond its own counters: the flags of per-namespace
//! metrics and of trace export.

use clap::Args;

use crate::metrics::namespaces::DEFAULT_LABELLED;

#[derive(Args, Debug, Clone)]
pub struct TelemetryArgs {
    /// Namespaces that get a label of their own in the per-namespace metrics
    /// (`dls_namespace_*`): the first ones seen, a label idle for an hour going to the next
    /// new namespace; all others are counted as namespace="other". Bounds the series a
    /// client can make /metrics hold, whatever namespaces it uses.
    #[arg(long, env = "DLS_METRICS_NAMESPACES", default_value_t = DEFAULT_LABELLED)]
    pub metrics_namespaces: usize,
}

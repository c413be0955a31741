//! Where a node listens: the client port (gRPC), the peer port (raft, forwarded calls) and
//! the HTTP port (metrics, JSON API), as resolved from the flags (`config`) and judged for
//! exposure (`security`).

use std::net::SocketAddr;

/// Where this node listens.
#[derive(Clone, Copy, Debug)]
pub struct Listeners {
    pub client: SocketAddr,
    /// None for a single node without --peers: it has nobody to talk raft with.
    pub peer: Option<SocketAddr>,
    pub http: SocketAddr,
}

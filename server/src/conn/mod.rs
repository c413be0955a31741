//! What anyone who can reach a port can make a node hold before proving who it is, and the
//! bounds on it. Every port (client, peer, HTTP) is reachable by a hostile client without a
//! key, so before a single request is read:
//!
//! - connections are counted per port and per source address (an IPv6 /64 counts as one
//!   address: one host gets that many for free), from `accept` until they close; past
//!   either bound a new connection is closed at once ([`admit`]);
//! - each connection must send its first byte within `--first-byte-timeout-ms`, and finish
//!   its TLS handshake and its protocol's opening (the HTTP/2 preface, or an HTTP/1 request
//!   line) within `--handshake-timeout-ms`; handshakes in progress are bounded per port and
//!   per source address (more wait their turn), so idle sockets cannot take the places real
//!   clients need ([`accept`]);
//! - a call whose handler has waited a while for the rest of its request counts against its
//!   port and source address until it comes, and the request must arrive within
//!   `--request-timeout-ms` ([`deadline`]): headers without a body cannot pile up;
//! - `accept` errors (out of descriptors, buffers) back off and retry: a listener only ends
//!   when the node is asked to stop ([`accept`]);
//! - the open-file limit is raised to its hard maximum at start, and the connection bounds
//!   are clipped so that all ports together leave a reserve for the log, snapshots and the
//!   node's own connections ([`fd_limit`]).
//!
//! What a connection may hold once open (streams per connection, header bytes, the time a
//! request may take to arrive, HTTP/1 header and keep-alive timeouts) is set on the
//! servers themselves in `serve` and `http`, from the same [`ConnectionArgs`].

pub mod accept;
pub mod admit;
pub mod deadline;
pub mod fd_limit;
pub mod stream;

use std::time::Duration;

use clap::Args;

pub use self::accept::{incoming, incoming_until};
pub use self::admit::{PortGuard, PortStats};
pub use self::deadline::RequestDeadline;
pub use self::stream::Conn;

/// `dls serve` flags of the connection bounds (each also an environment variable).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ConnectionArgs {
    /// Connections open at once on each port (client, peer, HTTP); past it a new connection
    /// is closed at once. Clipped at start so that the three ports together stay within the
    /// open-file limit with a reserve for the node's own files.
    #[arg(long, env = "DLS_MAX_CONNECTIONS", default_value_t = 4_096, value_parser = at_least_one())]
    pub max_connections: u64,
    /// Connections open at once on each port from one source address (IPv6: one /64).
    #[arg(long, env = "DLS_MAX_CONNECTIONS_PER_IP", default_value_t = 256, value_parser = at_least_one())]
    pub max_connections_per_ip: u64,
    /// Connections from one source address (IPv6: one /64) in their handshake (TLS and the
    /// protocol's opening) at once on each port; more wait their turn, within
    /// --handshake-timeout-ms.
    #[arg(long, env = "DLS_MAX_HANDSHAKES_PER_IP", default_value_t = 16, value_parser = at_least_one())]
    pub max_handshakes_per_ip: u64,
    /// Time a new connection has to send its first byte.
    #[arg(long, env = "DLS_FIRST_BYTE_TIMEOUT_MS", default_value_t = 3_000, value_parser = at_least_one())]
    pub first_byte_timeout_ms: u64,
    /// Time a new connection has to finish its TLS handshake and open its protocol (the
    /// HTTP/2 preface on the gRPC ports, the first request line on the HTTP port).
    #[arg(long, env = "DLS_HANDSHAKE_TIMEOUT_MS", default_value_t = 5_000, value_parser = at_least_one())]
    pub handshake_timeout_ms: u64,
    /// Concurrent HTTP/2 streams (calls) per connection on the client and peer ports; a
    /// client past it waits for a stream to end. The Rust core and every SDK keep at most 64
    /// long-lived streams (waits, watches) on a connection and open another past that, so
    /// at least 100.
    #[arg(long, env = "DLS_MAX_STREAMS_PER_CONNECTION", default_value_t = 200, value_parser = at_least_100())]
    pub max_streams_per_connection: u32,
    /// Calls on the client and HTTP ports from one source address (IPv6: one /64) whose
    /// handler has waited over a second for the rest of their request; past it another such
    /// call is refused (RESOURCE_EXHAUSTED). Each holds ~6 KiB until its request arrives or
    /// --request-timeout-ms passes.
    #[arg(long, env = "DLS_MAX_PENDING_REQUESTS_PER_IP", default_value_t = 256, value_parser = at_least_one())]
    pub max_pending_requests_per_ip: u64,
    /// Time a client call on the client and HTTP ports has to send its whole request (a
    /// waiting lock's stream, once asked for, is not cut by it).
    #[arg(long, env = "DLS_REQUEST_TIMEOUT_MS", default_value_t = 30_000, value_parser = at_least_one())]
    pub request_timeout_ms: u64,
    /// Time an HTTP/1 client of the HTTP port has to send a request's headers, counted from
    /// the connection's start or the end of its previous answer (so it is also the idle
    /// keep-alive timeout).
    #[arg(long, env = "DLS_HTTP_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = at_least_one())]
    pub http_header_timeout_ms: u64,
}

fn at_least_one() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

fn at_least_100() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(100..)
}

impl Default for ConnectionArgs {
    fn default() -> Self {
        ConnectionArgs {
            max_connections: 4_096,
            max_connections_per_ip: 256,
            max_handshakes_per_ip: 16,
            first_byte_timeout_ms: 3_000,
            handshake_timeout_ms: 5_000,
            max_streams_per_connection: 200,
            max_pending_requests_per_ip: 256,
            request_timeout_ms: 30_000,
            http_header_timeout_ms: 10_000,
        }
    }
}

/// The largest HTTP/2 header block a client may send: real requests carry a few hundred
/// bytes (an API key, a deadline, a user agent); h2's default would let one stream hold 16 MiB.
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;
/// The HTTP/2 flow-control windows the server grants: they bound the request bytes one
/// connection (and one of its streams) can make the node buffer before a handler reads
/// them. Requests are under 1 KiB; hyper's default is 1 MiB per stream and per connection.
pub const STREAM_WINDOW_BYTES: u32 = 64 * 1024;
pub const CONNECTION_WINDOW_BYTES: u32 = 256 * 1024;
/// The server pings an HTTP/2 connection this often and closes it when the answer does not
/// come within [`PING_TIMEOUT`]: a vanished peer frees its connection in seconds.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);

impl ConnectionArgs {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn http_header_timeout(&self) -> Duration {
        Duration::from_millis(self.http_header_timeout_ms)
    }
}

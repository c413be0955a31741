//! The open-file limit and the connection bounds it allows. Every connection is a file
//! descriptor; a node out of descriptors cannot open a log segment, a snapshot or a
//! connection to its peers. So the soft limit is raised to the hard one at start, and the
//! ports' connection bounds are clipped to what the limit leaves after a reserve.

use std::time::Duration;

#[cfg(unix)]
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use super::admit::PortBounds;
use super::ConnectionArgs;

/// Descriptors kept for the node's own use beyond those open at start: new log segments,
/// snapshot files, connections to peers and webhook endpoints, the odd `/proc` read.
const RESERVE: u64 = 128;
/// How the descriptors left for clients are shared between the ports when they must be
/// clipped: the client port half, the HTTP and peer ports a quarter each.
const SHARES: [(&str, u64); 3] = [("client", 2), ("http", 1), ("peer", 1)];

/// Raises the soft open-file limit to the hard one; returns the limit now in force (None:
/// unlimited).
#[cfg(unix)]
pub fn raise() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("cannot raise the open-file limit from {:?} to {:?}: {e}", limit.current, limit.maximum);
        }
    }
    getrlimit(Resource::Nofile).current
}

/// Descriptors this process has open now.
#[cfg(unix)]
pub fn open_now() -> u64 {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0)
}

/// Windows has no open-file limit to raise (handles are bounded by memory, about 16
/// million per process): no limit, so the connection bounds are the flags.
#[cfg(windows)]
pub fn raise() -> Option<u64> {
    None
}

/// Not counted on Windows (nothing to fit under a limit, see `raise`).
#[cfg(windows)]
pub fn open_now() -> u64 {
    0
}

/// Each port's bounds: the flags, with the connection bounds clipped so that the three
/// ports together fit in `limit` minus what is open and the reserve. Returns the bounds by
/// port name and a warning when they were clipped.
pub fn bounds(
    args: &ConnectionArgs,
    limit: Option<u64>,
    open: u64,
) -> (Vec<(&'static str, PortBounds)>, Option<String>) {
    let budget = limit.map(|l| l.saturating_sub(open + RESERVE));
    let total_shares: u64 = SHARES.iter().map(|(_, s)| s).sum();
    let mut clipped = Vec::new();
    let ports = SHARES
        .iter()
        .map(|&(port, share)| {
            let mut max = args.max_connections;
            if let Some(budget) = budget {
                let fits = (budget * share / total_shares).max(1);
                if fits < max {
                    clipped.push(format!("{port} {fits}"));
                    max = fits;
                }
            }
            let bounds = PortBounds {
                max_connections: max,
                max_connections_per_ip: args.max_connections_per_ip.min(max),
                // Handshakes are short; a quarter of the port keeps most places for
                // connections that finished theirs.
                max_handshakes: (max / 4).max(1),
                max_handshakes_per_ip: args.max_handshakes_per_ip,
                // A request's body follows its headers at once from any real client: these
                // are only the calls someone started and never finished.
                max_pending_requests: max.saturating_mul(4),
                max_pending_requests_per_ip: args.max_pending_requests_per_ip,
                first_byte_timeout: Duration::from_millis(args.first_byte_timeout_ms),
                handshake_timeout: Duration::from_millis(args.handshake_timeout_ms),
            };
            (port, bounds)
        })
        .collect();
    let warning = (!clipped.is_empty()).then(|| {
        format!(
            "the open-file limit ({}) leaves room for fewer connections than --max-connections {}: \
             at most {} per port (raise the hard limit, e.g. LimitNOFILE= in the systemd unit)",
            limit.unwrap_or(0),
            args.max_connections,
            clipped.join(", ")
        )
    });
    (ports, warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of<'a>(ports: &'a [(&str, PortBounds)], name: &str) -> &'a PortBounds {
        &ports.iter().find(|(p, _)| *p == name).unwrap().1
    }

    #[test]
    fn a_generous_limit_keeps_the_flags() {
        let args = ConnectionArgs::default();
        let (ports, warning) = bounds(&args, Some(1 << 20), 50);
        assert!(warning.is_none());
        for (_, b) in &ports {
            assert_eq!(b.max_connections, args.max_connections);
            assert_eq!(b.max_connections_per_ip, args.max_connections_per_ip);
        }
        assert!(bounds(&args, None, 50).1.is_none(), "no limit, nothing to clip");
    }

    #[test]
    fn a_low_limit_clips_every_port_and_keeps_the_reserve() {
        let args = ConnectionArgs::default();
        let (ports, warning) = bounds(&args, Some(300), 40);
        let total: u64 = ports.iter().map(|(_, b)| b.max_connections).sum();
        assert!(total <= 300 - 40 - RESERVE, "{total}");
        assert_eq!(of(&ports, "client").max_connections, 66);
        assert_eq!(of(&ports, "http").max_connections, 33);
        assert!(of(&ports, "client").max_connections_per_ip <= 66);
        assert!(warning.unwrap().contains("client 66"));
        let (tiny, _) = bounds(&args, Some(10), 40);
        assert!(tiny.iter().all(|(_, b)| b.max_connections == 1), "never zero");
    }
}

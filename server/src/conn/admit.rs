//! The connections, handshakes and half-arrived requests one port holds, per port and per
//! source address, and the decision to take one more. A place is held by a [`Slot`] and given
//! back when it is dropped, so no path (a failed handshake, a panicking task, a closed
//! connection, a cancelled call) can leak it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bounds of one port, as resolved at start (see `fd_limit` for the clipping).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortBounds {
    pub max_connections: u64,
    pub max_connections_per_ip: u64,
    pub max_handshakes: u64,
    pub max_handshakes_per_ip: u64,
    /// Requests whose body has not all arrived yet.
    pub max_pending_requests: u64,
    pub max_pending_requests_per_ip: u64,
    pub first_byte_timeout: Duration,
    pub handshake_timeout: Duration,
}

/// Why a new connection was closed at once (a label of `dls_connections_refused_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `--max-connections` on this port.
    PortFull,
    /// `--max-connections-per-ip` on this port.
    AddressFull,
    /// Requests still arriving on this port (4 × `--max-connections`).
    PendingFull,
    /// `--max-pending-requests-per-ip`.
    AddressPendingFull,
    /// No first byte within `--first-byte-timeout-ms`, or no finished handshake within
    /// `--handshake-timeout-ms` (a wait for a handshake place included).
    HandshakeTimeout,
    /// The handshake failed (bad TLS, not the protocol this port speaks).
    HandshakeFailed,
}

impl Refusal {
    pub const ALL: [Refusal; 6] = [
        Refusal::PortFull,
        Refusal::AddressFull,
        Refusal::PendingFull,
        Refusal::AddressPendingFull,
        Refusal::HandshakeTimeout,
        Refusal::HandshakeFailed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::PortFull => "max_connections",
            Refusal::AddressFull => "max_connections_per_ip",
            Refusal::PendingFull => "max_pending_requests",
            Refusal::AddressPendingFull => "max_pending_requests_per_ip",
            Refusal::HandshakeTimeout => "handshake_timeout",
            Refusal::HandshakeFailed => "handshake_failed",
        }
    }
}

/// The unit source addresses are counted in: one IPv4 address, or one IPv6 /64 (what one
/// host or customer is normally given; counting single IPv6 addresses would give a host
/// 2^64 shares). An IPv4 address mapped into IPv6 counts as the IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(_) => Source(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Source(IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
                }
            },
        }
    }
}

/// What a [`Slot`] holds a place of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Connection,
    Handshake,
    Request,
}

/// Which bound a place was not found under.
enum Full {
    Port,
    Source,
}

impl Full {
    fn pick(self, port: Refusal, source: Refusal) -> Refusal {
        match self {
            Full::Port => port,
            Full::Source => source,
        }
    }
}

/// One kind's places taken, in all and per source address.
#[derive(Default)]
struct Taken {
    total: u64,
    by_source: HashMap<Source, u64>,
}

impl Taken {
    fn of(&self, source: Source) -> u64 {
        self.by_source.get(&source).copied().unwrap_or(0)
    }

    fn take(&mut self, source: Source) {
        self.total += 1;
        *self.by_source.entry(source).or_default() += 1;
    }

    /// Gives one back; sources at zero are removed, so the map holds only what is open.
    fn give_back(&mut self, source: Source) {
        self.total -= 1;
        if let Some(n) = self.by_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.by_source.remove(&source);
            }
        }
    }
}

#[derive(Default)]
struct Counts {
    connections: Taken,
    handshakes: Taken,
    requests: Taken,
}

impl Counts {
    fn of(&mut self, kind: Kind) -> &mut Taken {
        match kind {
            Kind::Connection => &mut self.connections,
            Kind::Handshake => &mut self.handshakes,
            Kind::Request => &mut self.requests,
        }
    }
}

/// One port's counts against its bounds.
pub struct PortGuard {
    /// "client", "peer" or "http" (the metrics' label).
    pub port: &'static str,
    pub bounds: PortBounds,
    counts: Mutex<Counts>,
    /// Told whenever a handshake place is given back, for those waiting for one.
    handshake_freed: tokio::sync::Notify,
    refused: [AtomicU64; Refusal::ALL.len()],
    accept_errors: AtomicU64,
}

/// What `/metrics` shows of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub open: u64,
    pub handshaking: u64,
    pub pending_requests: u64,
    pub refused: [u64; Refusal::ALL.len()],
    pub accept_errors: u64,
}

impl PortGuard {
    pub fn new(port: &'static str, bounds: PortBounds) -> Arc<PortGuard> {
        Arc::new(PortGuard {
            port,
            bounds,
            counts: Mutex::default(),
            handshake_freed: tokio::sync::Notify::new(),
            refused: Default::default(),
            accept_errors: AtomicU64::new(0),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().expect("port counts lock")
    }

    /// A place for a new connection from `ip`, held until the slot is dropped.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        let b = &self.bounds;
        self.take(Kind::Connection, Source::of(ip), b.max_connections, b.max_connections_per_ip)
            .map_err(|full| self.refuse(full.pick(Refusal::PortFull, Refusal::AddressFull)))
    }

    /// A handshake place for the connection that holds `connection`, once one is free
    /// (`--max-handshakes-per-ip`, a quarter of `--max-connections` per port): a burst of
    /// connections from one address (a client opening its pool, processes behind one NAT)
    /// takes its turns instead of being refused. The caller bounds the wait with the
    /// handshake deadline; every waiter holds a connection place meanwhile.
    pub async fn handshake_turn(self: &Arc<Self>, connection: &Slot) -> Slot {
        let b = &self.bounds;
        loop {
            let freed = self.handshake_freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a place given back in between is not missed.
            freed.as_mut().enable();
            if let Ok(slot) = self.take(Kind::Handshake, connection.source, b.max_handshakes, b.max_handshakes_per_ip) {
                return slot;
            }
            freed.await;
        }
    }

    /// A place for a request from `ip` whose handler waits for the rest of it.
    pub fn begin_request(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        let b = &self.bounds;
        self.take(Kind::Request, Source::of(ip), b.max_pending_requests, b.max_pending_requests_per_ip)
            .map_err(|full| self.refuse(full.pick(Refusal::PendingFull, Refusal::AddressPendingFull)))
    }

    fn take(self: &Arc<Self>, kind: Kind, source: Source, max: u64, max_per_source: u64) -> Result<Slot, Full> {
        let mut counts = self.counts();
        let taken = counts.of(kind);
        if taken.total >= max {
            return Err(Full::Port);
        }
        if taken.of(source) >= max_per_source {
            return Err(Full::Source);
        }
        taken.take(source);
        Ok(Slot { port: self.clone(), source, kind })
    }

    pub fn refuse(&self, why: Refusal) -> Refusal {
        self.refused[why as usize].fetch_add(1, Relaxed);
        why
    }

    pub fn accept_failed(&self) {
        self.accept_errors.fetch_add(1, Relaxed);
    }

    pub fn stats(&self) -> PortStats {
        let c = self.counts();
        PortStats {
            open: c.connections.total,
            handshaking: c.handshakes.total,
            pending_requests: c.requests.total,
            refused: std::array::from_fn(|i| self.refused[i].load(Relaxed)),
            accept_errors: self.accept_errors.load(Relaxed),
        }
    }
}

/// A place on a port: a connection's, a handshake's or a request's.
pub struct Slot {
    port: Arc<PortGuard>,
    source: Source,
    kind: Kind,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.port.counts().of(self.kind).give_back(self.source);
        if self.kind == Kind::Handshake {
            self.port.handshake_freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(max: u64, per_ip: u64, handshakes: u64, handshakes_per_ip: u64) -> Arc<PortGuard> {
        PortGuard::new(
            "client",
            PortBounds {
                max_connections: max,
                max_connections_per_ip: per_ip,
                max_handshakes: handshakes,
                max_handshakes_per_ip: handshakes_per_ip,
                max_pending_requests: 4,
                max_pending_requests_per_ip: 2,
                first_byte_timeout: Duration::from_secs(1),
                handshake_timeout: Duration::from_secs(1),
            },
        )
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_address_gets_its_share_and_the_port_its_total() {
        let g = guard(3, 2, 10, 10);
        let a1 = g.admit(ip("10.0.0.1")).unwrap();
        let _a2 = g.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(g.admit(ip("10.0.0.1")).err(), Some(Refusal::AddressFull));
        let _b = g.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(g.admit(ip("10.0.0.3")).err(), Some(Refusal::PortFull));
        drop(a1);
        assert!(g.admit(ip("10.0.0.3")).is_ok(), "a closed connection gives its place back");
        let s = g.stats();
        assert_eq!(s.refused[Refusal::AddressFull as usize], 1);
        assert_eq!(s.refused[Refusal::PortFull as usize], 1);
    }

    #[test]
    fn an_ipv6_slash_64_is_one_address_and_mapped_ipv4_is_ipv4() {
        let g = guard(100, 2, 10, 10);
        let _a = g.admit(ip("2001:db8:1:2::1")).unwrap();
        let _b = g.admit(ip("2001:db8:1:2:ffff::9")).unwrap();
        assert_eq!(g.admit(ip("2001:db8:1:2::abcd")).err(), Some(Refusal::AddressFull));
        assert!(g.admit(ip("2001:db8:1:3::1")).is_ok(), "another /64 is another address");
        let _c = g.admit(ip("10.1.1.1")).unwrap();
        let _d = g.admit(ip("::ffff:10.1.1.1")).unwrap();
        assert_eq!(g.admit(ip("10.1.1.1")).err(), Some(Refusal::AddressFull));
    }

    #[tokio::test]
    async fn handshakes_are_bounded_per_address_and_a_connection_waits_its_turn() {
        use futures::FutureExt;
        let g = guard(100, 100, 3, 2);
        let conns: Vec<_> = (0..4).map(|i| g.admit(ip(&format!("10.0.0.{}", i / 2 + 1))).unwrap()).collect();
        let h0 = g.handshake_turn(&conns[0]).await;
        let _h1 = g.handshake_turn(&conns[1]).await;
        let extra = g.admit(ip("10.0.0.1")).unwrap();
        assert!(g.handshake_turn(&extra).now_or_never().is_none(), "the address has its two: it waits");
        let _h2 = g.handshake_turn(&conns[2]).await;
        let mut waiting = Box::pin(g.handshake_turn(&conns[3]));
        assert!(waiting.as_mut().now_or_never().is_none(), "the port has its three: it waits");
        drop(h0);
        let _h3 = waiting.await;
        assert_eq!(g.stats().handshaking, 3);
        assert_eq!(g.stats().refused, [0; Refusal::ALL.len()], "waiting for a turn is no refusal");
    }

    #[test]
    fn requests_still_arriving_are_bounded_per_address() {
        let g = guard(100, 100, 10, 10);
        let a = g.begin_request(ip("10.0.0.1")).unwrap();
        let _b = g.begin_request(ip("10.0.0.1")).unwrap();
        assert_eq!(g.begin_request(ip("10.0.0.1")).err(), Some(Refusal::AddressPendingFull));
        let _c = g.begin_request(ip("10.0.0.2")).unwrap();
        drop(a);
        let _d = g.begin_request(ip("10.0.0.3")).unwrap();
        let _e = g.begin_request(ip("10.0.0.4")).unwrap();
        assert_eq!(g.begin_request(ip("10.0.0.5")).err(), Some(Refusal::PendingFull));
        assert_eq!(g.stats().pending_requests, 4);
    }
}

//! The accept loop of every port: it takes a connection only when the port and its source
//! address have room, runs the handshake off the loop under its deadlines, and hands the
//! servers finished connections. It never ends on an error, only when its reader is gone
//! (the server stopped) or the node stops, so no failure of `accept` can quietly stop a node.
//! A stopping node closes its listener at once ([`incoming_until`]): a client that reconnects
//! after the GOAWAY is refused and tries another node, instead of waiting on a connection
//! the kernel took and nobody will serve.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::admit::{PortGuard, Refusal};
use super::stream::Conn;
use crate::tls::Protocol;

/// Pause after an `accept` that failed for want of resources (descriptors, buffers, memory):
/// the pending connection stays in the kernel's queue until a connection closes; retrying
/// at once would only spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning per port this often about refused connections or failing accepts.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a port turns an admitted TCP connection into what its server reads: as it is, or
/// through a TLS handshake.
pub trait Upgrade<IO>: Fn(TcpStream) -> Self::Fut + Send + Sync + 'static {
    type Fut: Future<Output = io::Result<IO>> + Send + 'static;
}

impl<IO, F, Fut> Upgrade<IO> for F
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<IO>> + Send + 'static,
{
    type Fut = Fut;
}

/// The connections of `listener` that were admitted and finished their handshake, each
/// holding its place on `guard` until the server drops it.
pub fn incoming<IO, U>(
    listener: TcpListener,
    guard: Arc<PortGuard>,
    protocol: Protocol,
    upgrade: U,
) -> impl Stream<Item = io::Result<Conn<IO>>>
where
    IO: AsyncRead + Unpin + Send + 'static,
    U: Upgrade<IO>,
{
    incoming_until(listener, guard, protocol, upgrade, std::future::pending())
}

/// [`incoming`] until `closing` resolves: then the listener is closed (new connections are
/// refused by the kernel) and connections still in their handshake are dropped.
pub fn incoming_until<IO, U>(
    listener: TcpListener,
    guard: Arc<PortGuard>,
    protocol: Protocol,
    upgrade: U,
    closing: impl Future<Output = ()> + Send + 'static,
) -> impl Stream<Item = io::Result<Conn<IO>>>
where
    IO: AsyncRead + Unpin + Send + 'static,
    U: Upgrade<IO>,
{
    let (tx, rx) = mpsc::channel(64);
    let upgrade = Arc::new(upgrade);
    let (closed_tx, closed) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let warn = Warnings::default();
        tokio::pin!(closing);
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(c) => c,
                    Err(e) if aborted_by_peer(&e) => continue,
                    Err(e) => {
                        guard.accept_failed();
                        warn.every(|| tracing::warn!(
                            port = guard.port,
                            "accepting a connection failed: {e}; retrying in {ACCEPT_BACKOFF:?} (is the open-file \
                             limit too low for --max-connections?)"
                        ));
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
                () = &mut closing => {
                    closed_tx.send_replace(true);
                    return;
                }
            };
            let slot = match guard.admit(peer.ip()) {
                Ok(slot) => slot,
                Err(why) => {
                    warn.every(|| refused(&guard, peer, why));
                    continue;
                }
            };
            // Nagle off: with it, a response's last HTTP/2 frame waits for the client's
            // delayed ACK (~40 ms per call).
            let _ = tcp.set_nodelay(true);
            let (guard, upgrade, tx, closed) = (guard.clone(), upgrade.clone(), tx.clone(), closed.clone());
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + guard.bounds.handshake_timeout;
                let shaken = match tokio::time::timeout_at(deadline, guard.handshake_turn(&slot)).await {
                    Ok(turn) => handshake(tcp, &guard, protocol, &*upgrade, deadline).await.map(|done| (done, turn)),
                    Err(_) => Err(Refusal::HandshakeTimeout),
                };
                match shaken {
                    // A server that stopped accepting would never serve it.
                    Ok(_) if *closed.borrow() => {}
                    Ok(((io, opening), _turn)) => {
                        let _ = tx.send(Ok(Conn::new(io, peer, opening, slot))).await;
                    }
                    Err(why) => {
                        guard.refuse(why);
                        tracing::debug!(port = guard.port, %peer, "connection closed in its handshake: {}", why.label());
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The first byte within the first-byte timeout; the TLS handshake (if any) and the
/// protocol's opening by `deadline` (the handshake timeout counted from the accept).
/// Returns the stream and the opening bytes it read.
async fn handshake<IO, U>(
    tcp: TcpStream,
    guard: &PortGuard,
    protocol: Protocol,
    upgrade: &U,
    deadline: tokio::time::Instant,
) -> Result<(IO, Vec<u8>), Refusal>
where
    IO: AsyncRead + Unpin,
    U: Upgrade<IO>,
{
    let mut first = [0u8; 1];
    let first_byte_by = deadline.min(tokio::time::Instant::now() + guard.bounds.first_byte_timeout);
    match tokio::time::timeout_at(first_byte_by, tcp.peek(&mut first)).await {
        Ok(Ok(1..)) => {}
        Ok(_) => return Err(Refusal::HandshakeFailed),
        Err(_) => return Err(Refusal::HandshakeTimeout),
    }
    let opened = async {
        let mut io = upgrade(tcp).await.map_err(|_| Refusal::HandshakeFailed)?;
        let opening = read_opening(&mut io, protocol).await?;
        Ok((io, opening))
    };
    tokio::time::timeout_at(deadline, opened).await.unwrap_or(Err(Refusal::HandshakeTimeout))
}

/// The gRPC ports speak HTTP/2 with prior knowledge: the whole preface, or the connection
/// is not for this port. The HTTP port: the first bytes of a request.
async fn read_opening<IO: AsyncRead + Unpin>(io: &mut IO, protocol: Protocol) -> Result<Vec<u8>, Refusal> {
    match protocol {
        Protocol::Grpc => {
            let mut preface = vec![0u8; H2_PREFACE.len()];
            io.read_exact(&mut preface).await.map_err(|_| Refusal::HandshakeFailed)?;
            if preface != H2_PREFACE {
                return Err(Refusal::HandshakeFailed);
            }
            Ok(preface)
        }
        Protocol::Http1 => {
            let mut start = vec![0u8; 1024];
            let n = io.read(&mut start).await.map_err(|_| Refusal::HandshakeFailed)?;
            if n == 0 {
                return Err(Refusal::HandshakeFailed);
            }
            start.truncate(n);
            Ok(start)
        }
    }
}

/// Errors of one pending connection (it was reset before we took it): nothing to wait for.
fn aborted_by_peer(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted)
}

fn refused(guard: &PortGuard, peer: SocketAddr, why: Refusal) {
    let b = &guard.bounds;
    let bound = match why {
        Refusal::PortFull => format!("--max-connections ({} on this port)", b.max_connections),
        Refusal::AddressFull => format!("--max-connections-per-ip {}", b.max_connections_per_ip),
        Refusal::HandshakeTimeout | Refusal::HandshakeFailed | Refusal::PendingFull | Refusal::AddressPendingFull => {
            return
        }
    };
    tracing::warn!(port = guard.port, %peer, "refusing new connections: {bound} reached (more may follow unlogged for a while)");
}

/// Logs at most once per [`WARN_EVERY`]: a flood must not turn into a flood of log lines.
#[derive(Default)]
struct Warnings(Mutex<Option<Instant>>);

impl Warnings {
    fn every(&self, log: impl FnOnce()) {
        let mut last = self.0.lock().expect("warnings lock");
        if last.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            log();
        }
    }
}

//! An accepted connection as the servers see it: the (TLS) stream, the opening bytes the
//! handshake already read (handed out again first), and the connection's place on its port,
//! given back when the server drops the connection.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use super::admit::Slot;

pub struct Conn<IO> {
    io: IO,
    /// The client's address, as `accept` gave it.
    peer: SocketAddr,
    /// Bytes read during the handshake that the server has not seen yet.
    opening: Vec<u8>,
    read: usize,
    _slot: Slot,
}

impl<IO> Conn<IO> {
    pub fn new(io: IO, peer: SocketAddr, opening: Vec<u8>, slot: Slot) -> Conn<IO> {
        Conn { io, peer, opening, read: 0, _slot: slot }
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Conn<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read < this.opening.len() {
            let rest = &this.opening[this.read..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.read += n;
            if this.read == this.opening.len() {
                this.opening = Vec::new();
                this.read = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Conn<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// The servers see the connection's own information (remote address, TLS peer
/// certificates), exactly as without the wrapper.
impl<IO: Connected> Connected for Conn<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

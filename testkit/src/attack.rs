//! An attacker's tools, for the attack tests and `make soak`: TCP connections from a chosen
//! loopback address (so an attacker and a real client can be told apart by address, as on
//! a network), connections left half-open, HTTP/2 frames written by hand (to break the rules
//! a real client library keeps), an HTTP/2 call whose request body never comes, and a
//! process's resident memory and descriptors.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// An attacker's source addresses: loopback, but not the 127.0.0.1 real clients use.
pub fn attacker_ip(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, 2 + n])
}

/// A TCP connection to `to` from `from`, or an error after 2 s (a node that stopped
/// accepting leaves connections waiting in its full queue).
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    tokio::time::timeout(Duration::from_secs(2), socket.connect(to))
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("connect to {to}"))))
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("a socket address")
}

/// The node's resident memory, in MiB.
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the node's /proc status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status");
    kib / 1024.0
}

/// File descriptors the process has open.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const FRAME_HEADERS: u8 = 0x1;
pub const FRAME_RST_STREAM: u8 = 0x3;
pub const FRAME_SETTINGS: u8 = 0x4;
pub const FRAME_GOAWAY: u8 = 0x7;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The client preface and an empty SETTINGS frame.
pub fn client_preface() -> Vec<u8> {
    let mut out = H2_PREFACE.to_vec();
    out.extend(frame(FRAME_SETTINGS, 0, 0, &[]));
    out
}

/// HPACK: a literal field without indexing; `index` names a static-table name, else the
/// name is written out. Values here are short (one-byte lengths, no Huffman).
fn literal(block: &mut Vec<u8>, index: Option<u8>, name: &str, value: &str) {
    match index {
        Some(i) => block.push(i),
        None => {
            block.push(0);
            block.push(name.len() as u8);
            block.extend_from_slice(name.as_bytes());
        }
    }
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}

/// A gRPC call's HEADERS frame that opens stream `stream` and sends no body after it
/// (END_HEADERS without END_STREAM).
pub fn open_call(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http (static table 3 and 6)
    literal(&mut block, Some(0x04), ":path", path);
    literal(&mut block, Some(0x01), ":authority", "dls");
    literal(&mut block, None, "content-type", "application/grpc");
    literal(&mut block, None, "te", "trailers");
    frame(FRAME_HEADERS, 0x4, stream, &block)
}

/// Counts of the frame types a server sent, read until the connection ends.
#[derive(Debug, Default)]
pub struct Seen {
    pub headers: u64,
    pub resets: u64,
    pub goaways: u64,
    pub bytes: u64,
}

/// Reads frames until EOF or an error, counting them.
pub async fn read_frames(r: tokio::net::tcp::OwnedReadHalf) -> Seen {
    let (tx, _) = tokio::sync::watch::channel(0);
    count_frames(r, tx).await
}

/// [`read_frames`], telling `headers` each HEADERS frame's count as it comes.
async fn count_frames(mut r: tokio::net::tcp::OwnedReadHalf, headers: tokio::sync::watch::Sender<u64>) -> Seen {
    let mut seen = Seen::default();
    let mut head = [0u8; 9];
    loop {
        if r.read_exact(&mut head).await.is_err() {
            return seen;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if r.read_exact(&mut payload).await.is_err() {
            return seen;
        }
        seen.bytes += 9 + len as u64;
        match head[3] {
            FRAME_HEADERS => {
                seen.headers += 1;
                headers.send_replace(seen.headers);
            }
            FRAME_RST_STREAM => seen.resets += 1,
            FRAME_GOAWAY => seen.goaways += 1,
            _ => {}
        }
    }
}

/// Writes all of `bytes`, or stops at the first error (the server closed the connection).
pub async fn write_until_closed(w: &mut tokio::net::tcp::OwnedWriteHalf, bytes: &[u8]) -> bool {
    w.write_all(bytes).await.is_ok()
}

/// Opens `per_address` connections from each of `addresses` attacker addresses to `to`,
/// each sending `opening` and then nothing; returns the sockets (held open by the caller).
pub async fn half_open(to: &str, addresses: u8, per_address: usize, opening: &[u8]) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for a in 0..addresses {
        for _ in 0..per_address {
            if let Ok(mut s) = connect_from(attacker_ip(a), addr(to)).await {
                let _ = s.write_all(opening).await;
                held.push(s);
            }
        }
    }
    held
}

/// One connection that opens `streams` gRPC calls to `path` without ever sending a body,
/// ignoring the server's stream bound; returns what the server sent back until it closed
/// the connection (or `within` passed).
pub async fn body_less_streams(to: &str, from: IpAddr, path: &str, streams: u32, within: Duration) -> Seen {
    let Ok(tcp) = connect_from(from, addr(to)).await else { return Seen::default() };
    let (r, mut w) = tcp.into_split();
    let reader = tokio::spawn(read_frames(r));
    if write_until_closed(&mut w, &client_preface()).await {
        for batch in 0..streams.div_ceil(100) {
            let frames: Vec<u8> = (0..100u32).flat_map(|i| open_call(2 * (batch * 100 + i) + 1, path)).collect();
            if !write_until_closed(&mut w, &frames).await {
                break;
            }
        }
    }
    match tokio::time::timeout(within, reader).await {
        Ok(Ok(seen)) => seen,
        _ => Seen::default(),
    }
}

/// A connection with calls open on it that never send a body, kept open while this lives.
pub struct HeldCalls {
    _writer: tokio::net::tcp::OwnedWriteHalf,
    /// HEADERS frames the server has sent back so far: each is one call answered.
    pub answered: tokio::sync::watch::Receiver<u64>,
}

/// Opens `streams` calls to `path` on one connection from `from`, none with a body.
pub async fn hold_calls(to: &str, from: IpAddr, path: &str, streams: u32) -> std::io::Result<HeldCalls> {
    let (r, mut w) = connect_from(from, addr(to)).await?.into_split();
    let (tx, answered) = tokio::sync::watch::channel(0);
    tokio::spawn(count_frames(r, tx));
    let mut bytes = client_preface();
    bytes.extend((0..streams).flat_map(|i| open_call(2 * i + 1, path)));
    w.write_all(&bytes).await?;
    Ok(HeldCalls { _writer: w, answered })
}

/// The response head to a gRPC call to `path` on `addr` (HTTP/2, with the `authorization`
/// header when `key` is given) whose request body never comes; None if none came within
/// `within`. Keeps the body's sender alive, so the call stays open.
pub async fn call_without_body(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    within: Duration,
) -> Option<http::response::Parts> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), hyper_util::rt::TokioIo::new(tcp))
            .await
            .expect("an HTTP/2 handshake");
    tokio::spawn(conn);
    let (_keep, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut req = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let answer = tokio::time::timeout(within, send.send_request(req.body(body).unwrap())).await;
    answer.ok().map(|r| r.expect("a response").into_parts().0)
}

/// The `grpc-status` of a trailers-only answer.
pub fn grpc_status(head: &http::response::Parts) -> Option<i32> {
    head.headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

pub fn grpc_message(head: &http::response::Parts) -> String {
    head.headers.get("grpc-message").and_then(|v| v.to_str().ok()).map(percent_decode).unwrap_or_default()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

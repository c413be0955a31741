//! Whether a node that dropped a plain-text gRPC connection is an HTTP/1 server. A DLS node's
//! HTTP port (Playground, /metrics) speaks HTTP/1 only and closes a connection that opens
//! with the HTTP/2 preface without a word, which the client would otherwise report as a
//! broken pipe with a TLS hint, after retrying until its deadline.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The status code `uri` (`http://HOST:PORT`) answers a plain HTTP/1.1 request with, if it
/// answers one within `within`; `None` for anything else (a TLS port, a dead node).
pub(crate) async fn http1_status(uri: &str, within: Duration) -> Option<u16> {
    let authority = uri.strip_prefix("http://")?;
    let probe = async {
        let mut stream = TcpStream::connect(authority).await.ok()?;
        let request = format!("HEAD / HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 16];
        let mut read = 0;
        while read < head.len() {
            match stream.read(&mut head[read..]).await.ok()? {
                0 => break,
                n => read += n,
            }
        }
        status_code(&head[..read])
    };
    tokio::time::timeout(within, probe).await.ok().flatten()
}

/// The code of an HTTP/1 status line (`HTTP/1.1 404 Not Found`).
fn status_code(head: &[u8]) -> Option<u16> {
    let rest = head.strip_prefix(b"HTTP/1.")?;
    let code = std::str::from_utf8(rest.get(2..5)?).ok()?;
    code.parse().ok().filter(|c| (100..600).contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_code_of_an_http1_status_line_only() {
        assert_eq!(status_code(b"HTTP/1.1 404 Not Fou"), Some(404));
        assert_eq!(status_code(b"HTTP/1.0 200 OK\r\n"), Some(200));
        assert_eq!(status_code(b"HTTP/1.1 40"), None);
        assert_eq!(status_code(b"\x15\x03\x03\x00\x02\x02\x46"), None);
        assert_eq!(status_code(b""), None);
    }
}

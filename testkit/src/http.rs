//! Plain HTTP/1.0 calls to a node's operator port: status and body, nothing hidden.

use std::io::{Read, Write};
use std::time::Duration;

/// A GET (the server closes the connection after answering): status and body.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_call(addr, &format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"))
}

/// A POST of a JSON body, with an optional bearer key: status and body.
pub fn http_post(addr: &str, path: &str, json: &str, key: Option<&str>) -> std::io::Result<(u16, String)> {
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{json}",
        json.len()
    );
    http_call(addr, &request)
}

fn http_call(addr: &str, request: &str) -> std::io::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request.as_bytes())?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_string()))
}

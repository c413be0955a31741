//! A node's Prometheus text from its HTTP port, over a plain HTTP/1.0 GET (the bench has
//! no HTTP client dependency). Shared by dls-bench and dls-state.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GET `path` from `addr` (host:port): status and body.
pub async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        anyhow::Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(5), fetch).await.context("HTTP timeout")??;
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).context("bad HTTP answer")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// The gauges and counters without labels that `addr` serves on /metrics.
pub async fn metrics(addr: &str) -> anyhow::Result<HashMap<String, f64>> {
    let (status, body) = http_get(addr, "/metrics").await?;
    if status != 200 {
        bail!("/metrics of {addr} answered {status}");
    }
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

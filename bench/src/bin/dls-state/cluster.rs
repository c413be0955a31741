//! The measured cluster: three `dls` nodes from the test kit with the server's default raft
//! timers (what the figures are about), read through each node's HTTP port.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use caerus_bench::scrape;
use caerus_testkit::{Cluster, Proxies, Spec};

/// Starts three nodes under `dir` with `extra` flags and waits until every node is ready.
pub async fn start(bin: &Path, dir: &Path, extra: &[String]) -> anyhow::Result<Cluster> {
    start_with(bin, dir, extra, Proxies::None).await
}

/// [`start`] with `proxies` between the nodes' membership addresses and their ports.
pub async fn start_with(bin: &Path, dir: &Path, extra: &[String], proxies: Proxies) -> anyhow::Result<Cluster> {
    let spec = Spec {
        nodes: 3,
        extra: extra.to_vec(),
        bin: Some(bin.to_path_buf()),
        dir: Some(dir.to_path_buf()),
        fast_elections: false,
        proxies,
        ..Spec::default()
    };
    let mut c = Cluster::new(spec)?;
    c.start_all()?;
    wait_ready(&c, Duration::from_secs(60)).await?;
    Ok(c)
}

/// Waits until every running node answers /readyz with 200.
pub async fn wait_ready(c: &Cluster, limit: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + limit;
    for id in c.ids() {
        while !ready(c, id).await {
            if Instant::now() > until {
                bail!("node {id} not ready after {limit:?}; see {}", c.node(id).log.display());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Whether node `id` answers /readyz with 200.
pub async fn ready(c: &Cluster, id: u64) -> bool {
    matches!(scrape::http_get(&c.http_addr(id), "/readyz").await, Ok((200, _)))
}

/// Node `id`'s Prometheus gauges and counters without labels.
pub async fn metrics(c: &Cluster, id: u64) -> anyhow::Result<HashMap<String, f64>> {
    scrape::metrics(&c.http_addr(id)).await.with_context(|| format!("node {id}"))
}

/// The node that says (in its metrics) it leads.
pub async fn leader(c: &Cluster) -> anyhow::Result<u64> {
    for _ in 0..250 {
        for id in c.ids() {
            if let Ok(m) = metrics(c, id).await {
                if m.get("dls_is_leader") == Some(&1.0) {
                    return Ok(id);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("no node says it leads")
}

/// The last line of node `id`'s current process's log containing `needle`, if any.
pub fn last_line_with(c: &Cluster, id: u64, needle: &str) -> Option<String> {
    c.log_since_start(id).lines().rev().find(|l| l.contains(needle)).map(str::to_string)
}

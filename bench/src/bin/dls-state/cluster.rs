//! A three-node `dls` cluster on 127.0.0.1 with free ports, owned by this process: started,
//! SIGKILLed and restarted node by node, read through each node's HTTP port. Every child
//! is killed when the cluster is dropped (only the processes started here).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::scrape;

/// One node: its addresses, data directory and current process.
pub struct Node {
    pub id: u32,
    pub grpc: u16,
    pub http: u16,
    data_dir: PathBuf,
    child: Option<Child>,
    /// Log of the current process (each restart writes a new file).
    pub log: PathBuf,
    incarnation: u32,
}

/// The cluster and how to (re)start its nodes.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    peers: String,
    extra: Vec<String>,
    pub nodes: Vec<Node>,
}

fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    // Hold every listener until all are chosen so the ports differ.
    let listeners = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<Result<Vec<_>, _>>()?;
    Ok(listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<Result<_, _>>()?)
}

impl Cluster {
    /// Starts three nodes under `dir` with `extra` flags and waits until every node is ready.
    pub async fn start(bin: &Path, dir: &Path, extra: &[String]) -> anyhow::Result<Cluster> {
        std::fs::create_dir_all(dir)?;
        let ports = free_ports(9)?;
        let peers =
            (0..3).map(|i| format!("{}=127.0.0.1:{}/{}", i + 1, ports[i], ports[6 + i])).collect::<Vec<_>>().join(",");
        let nodes = (0..3)
            .map(|i| Node {
                id: i as u32 + 1,
                grpc: ports[i],
                http: ports[3 + i],
                data_dir: dir.join(format!("dls-{}", i + 1)),
                child: None,
                log: PathBuf::new(),
                incarnation: 0,
            })
            .collect();
        let mut c = Cluster { bin: bin.to_path_buf(), dir: dir.to_path_buf(), peers, extra: extra.to_vec(), nodes };
        for i in 0..3 {
            c.spawn(i)?;
        }
        c.wait_ready(Duration::from_secs(60)).await?;
        Ok(c)
    }

    /// Client endpoints of every node.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.grpc)).collect()
    }

    /// Starts node `i` (a new process, a new log file). Returns when the process is spawned.
    pub fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let n = &mut self.nodes[i];
        n.incarnation += 1;
        n.log = self.dir.join(format!("dls-{}.{}.log", n.id, n.incarnation));
        let log = File::create(&n.log)?;
        let child = Command::new(&self.bin)
            .arg("serve")
            .args(["--node-id", &n.id.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", n.grpc)])
            .args(["--http-listen", &format!("127.0.0.1:{}", n.http)])
            .arg("--data-dir")
            .arg(&n.data_dir)
            .args(["--peers", &self.peers, "--log", "info"])
            // Peers authenticate each other; on loopback a cluster secret is enough.
            .env("DLS_CLUSTER_SECRET", "bench-state-cluster-secret")
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        n.child = Some(child);
        Ok(())
    }

    /// SIGKILLs node `i` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Process id of node `i`.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].child.as_ref().map(Child::id)
    }

    /// Waits until every running node answers /readyz with 200.
    pub async fn wait_ready(&self, limit: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + limit;
        for i in 0..self.nodes.len() {
            while !self.ready(i).await {
                if Instant::now() > until {
                    bail!("node {} not ready after {limit:?}; see {}", self.nodes[i].id, self.nodes[i].log.display());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// Whether node `i` answers /readyz with 200.
    pub async fn ready(&self, i: usize) -> bool {
        matches!(scrape::http_get(&self.http_addr(i), "/readyz").await, Ok((200, _)))
    }

    /// Node `i`'s Prometheus gauges and counters without labels.
    pub async fn metrics(&self, i: usize) -> anyhow::Result<HashMap<String, f64>> {
        scrape::metrics(&self.http_addr(i)).await.with_context(|| format!("node {}", self.nodes[i].id))
    }

    fn http_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].http)
    }

    /// Index of the node that says it leads.
    pub async fn leader(&self) -> anyhow::Result<usize> {
        for _ in 0..250 {
            for i in 0..self.nodes.len() {
                if let Ok(m) = self.metrics(i).await {
                    if m.get("dls_is_leader") == Some(&1.0) {
                        return Ok(i);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        bail!("no node says it leads")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// The last line of `log` containing `needle`, if any.
pub fn last_line_with(log: &Path, needle: &str) -> Option<String> {
    std::fs::read_to_string(log).ok()?.lines().rev().find(|l| l.contains(needle)).map(str::to_string)
}

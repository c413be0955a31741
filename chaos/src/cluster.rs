//! The cluster under test: real `dls` processes, each behind a TCP proxy on its client
//! port and one on its peer port (see [`crate::proxy`]), started, killed, paused and
//! restarted by the harness.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caerus_core::DlsClient;
use tokio::sync::watch;

use crate::disk::Tmpfs;
use crate::proxy::{self, Links};

pub struct Node {
    pub id: u64,
    pub addr: SocketAddr,
    pub peer_addr: SocketAddr,
    pub http: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    pub child: Option<Child>,
    pub paused: bool,
    /// libfaketime's offset file for this node (when the cluster runs under faketime).
    pub clock_file: PathBuf,
    /// Seconds this node's faked clocks are off in total (negative: behind).
    pub clock_offset_s: i64,
    /// Under faketime, only CLOCK_REALTIME is faked on this node (even ids): its wall clock
    /// jumps backwards. Odd ids have every clock faked, CLOCK_MONOTONIC included, and only
    /// jump forwards (a monotonic clock never goes back).
    pub wall_only: bool,
    /// The proxies in front of its client and peer ports: its addresses in the membership.
    pub member_addr: String,
    pub member_peer_addr: String,
    /// Start it with --join: it was wiped and re-added to the running cluster, so it must
    /// never bootstrap one of its own.
    pub join: bool,
}

pub struct Cluster {
    pub dls: PathBuf,
    pub nodes: Vec<Node>,
    pub peers: String,
    /// The proxy in front of each node's client port (the membership's client addresses).
    pub proxies: Vec<String>,
    /// Every node is started with it: peers authenticate each other.
    pub secret: String,
    pub links: Arc<Links>,
    _stop_proxies: watch::Sender<bool>,
    /// The libfaketime preload library, when nodes run under it (clock-jump).
    pub faketime: Option<PathBuf>,
    /// Each node's data directory as a small tmpfs, in node order (disk-full), or none.
    /// Declared last: unmounted after the nodes are stopped.
    pub disks: Vec<Tmpfs>,
}

pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback")).collect();
    held.iter().map(|l| l.local_addr().expect("addr").port()).collect()
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

impl Cluster {
    pub async fn start(
        dls: PathBuf,
        n: usize,
        dir: &std::path::Path,
        faketime: Option<PathBuf>,
        tmpfs_size: Option<&str>,
    ) -> anyhow::Result<Cluster> {
        let ports = free_ports(5 * n);
        let links = Links::new();
        let (stop_tx, stop) = watch::channel(false);
        let mut nodes = Vec::new();
        let mut peers = Vec::new();
        let mut proxies = Vec::new();
        // The harness's own clients may reach a proxy by a leader redirect: known, never cut.
        links.set_pid(std::process::id(), proxy::HARNESS);
        for (i, p) in ports.chunks(5).enumerate() {
            let id = i as u64 + 1;
            let addr: SocketAddr = format!("127.0.0.1:{}", p[0]).parse()?;
            let peer_addr: SocketAddr = format!("127.0.0.1:{}", p[3]).parse()?;
            // One proxy in front of each port: raft traffic and client traffic both pass
            // the link rules.
            let proxy_addr = format!("127.0.0.1:{}", p[1]);
            let peer_proxy = format!("127.0.0.1:{}", p[4]);
            for (listen, target) in [(&proxy_addr, addr), (&peer_proxy, peer_addr)] {
                let listener = tokio::net::TcpListener::bind(listen).await?;
                tokio::spawn(proxy::run(listener, target, id, links.clone(), stop.clone()));
            }
            peers.push(format!("{id}={proxy_addr}/{peer_proxy}"));
            proxies.push(proxy_addr.clone());
            nodes.push(Node {
                id,
                addr,
                peer_addr,
                http: format!("127.0.0.1:{}", p[2]),
                data_dir: dir.join(format!("node-{id}")),
                log: dir.join(format!("node-{id}.log")),
                child: None,
                paused: false,
                clock_file: dir.join(format!("node-{id}.faketime")),
                clock_offset_s: 0,
                wall_only: id.is_multiple_of(2),
                member_addr: proxy_addr.clone(),
                member_peer_addr: peer_proxy.clone(),
                join: false,
            });
        }
        let secret = format!("chaos-{:032x}", rand::random::<u128>());
        let peers = peers.join(",");
        // Mounted before any node starts, so every byte a node writes is on its own small disk.
        let mut disks = Vec::new();
        if let Some(size) = tmpfs_size {
            for node in &nodes {
                disks.push(Tmpfs::mount(&node.data_dir, size).map_err(anyhow::Error::msg)?);
            }
        }
        let mut c = Cluster { dls, nodes, peers, proxies, secret, links, _stop_proxies: stop_tx, faketime, disks };
        for id in 1..=n as u64 {
            c.spawn(id)?;
        }
        Ok(c)
    }

    pub fn node(&mut self, id: u64) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).expect("node id")
    }

    pub fn spawn(&mut self, id: u64) -> anyhow::Result<()> {
        let dls = self.dls.clone();
        let peers = self.peers.clone();
        let secret = self.secret.clone();
        let links = self.links.clone();
        let faketime = self.faketime.clone();
        let n = self.node(id);
        if let Some(c) = n.child.as_mut() {
            // Still running; one that exited (a refusal) is started again.
            match c.try_wait() {
                Ok(Some(status)) => {
                    // Its last words say why (a refusal, a storage error, a crash).
                    let log = std::fs::read_to_string(&n.log).unwrap_or_default();
                    let last: Vec<&str> = log.lines().rev().take(2).collect();
                    println!("node {id} had exited ({status}); starting it again. Its log ended: {last:?}");
                }
                _ => return Ok(()),
            }
            n.child = None;
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&n.log)?;
        let mut cmd = Command::new(&dls);
        if let Some(lib) = faketime {
            // Relative offset, re-read at most once a second: writing another one jumps the
            // node's faked clocks while it runs.
            std::fs::write(&n.clock_file, format!("{:+}s\n", n.clock_offset_s))?;
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", &n.clock_file)
                .env("FAKETIME_CACHE_DURATION", "1");
            if n.wall_only {
                cmd.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            }
        }
        let child = cmd
            .arg("serve")
            .args(["--node-id", &id.to_string(), "--listen", &n.addr.to_string(), "--peers", &peers])
            .args(["--peer-listen", &n.peer_addr.to_string()])
            .env("DLS_CLUSTER_SECRET", &secret)
            .args(n.join.then_some("--join"))
            .arg("--data-dir")
            .arg(&n.data_dir)
            .args(["--heartbeat-ms", "50", "--election-timeout-ms", "300", "--http-listen", &n.http])
            .env("DLS_LOG", "info")
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", dls.display()))?;
        links.set_pid(child.id(), id);
        n.child = Some(child);
        n.paused = false;
        Ok(())
    }

    pub fn kill(&mut self, id: u64) {
        let n = self.node(id);
        if let Some(mut c) = n.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        n.paused = false;
    }

    pub fn pause(&mut self, id: u64, on: bool) {
        let n = self.node(id);
        if let Some(c) = &n.child {
            signal(c.id(), if on { "STOP" } else { "CONT" });
            n.paused = on;
        }
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes.iter().filter(|n| n.child.is_some() && !n.paused).map(|n| n.id).collect()
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.to_string()).collect()
    }

    /// The proxies' addresses: a client configured with these passes every proxy, so the
    /// harness can cut it off.
    pub fn proxy_endpoints(&self) -> Vec<String> {
        self.proxies.clone()
    }

    /// The leader as seen by the running nodes: the highest term's leader.
    pub async fn leader(&self, admin: &DlsClient) -> Option<u64> {
        let mut best: Option<(u64, u64)> = None;
        for n in self.nodes.iter().filter(|n| n.child.is_some() && !n.paused) {
            let st =
                tokio::time::timeout(Duration::from_millis(800), admin.cluster_status_of(&n.addr.to_string())).await;
            if let Ok(Ok(s)) = st {
                if let Some(l) = s.leader_id {
                    if best.is_none_or(|(t, _)| s.term > t) {
                        best = Some((s.term, l));
                    }
                }
            }
        }
        best.map(|(_, l)| l)
    }

    pub async fn wait_for_leader(&self, admin: &DlsClient, within: Duration) -> Option<u64> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(l) = self.leader(admin).await {
                if self.running().contains(&l) {
                    return Some(l);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    pub fn shutdown(&mut self) {
        for id in self.ids() {
            self.pause(id, false);
            self.kill(id);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

//! A TCP proxy in front of every node. All raft traffic goes through it: each node's
//! `--peers` entry for node N is N's proxy port, while N itself listens elsewhere.
//!
//! The cluster's membership holds one address per node, so the proxy in front of node N
//! learns which node dialled it from the connecting socket: it finds the socket's inode in
//! `/proc/net/tcp` and the process holding it among the node processes (Linux only).
//! Connections from anything else (the harness's clients following a leader redirect)
//! pass untouched.
//!
//! Rules are per directed link (dialler → target): blocked (existing connections are
//! closed, new ones are dropped) and an added delay per forwarded chunk.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The link rules shared by every proxy of a cluster.
#[derive(Default)]
pub struct Links {
    state: Mutex<LinkState>,
    /// Bumped on every rule change, so live connections re-check their link.
    epoch: Mutex<Option<watch::Sender<u64>>>,
    /// Node process id → node id.
    pids: Mutex<HashMap<u32, u64>>,
    /// Time from accept to forwarding, per node connection (µs).
    setups: Mutex<Vec<u64>>,
    /// Connections whose dialler was not found (passed as a non-node).
    unknown: std::sync::atomic::AtomicU64,
}

#[derive(Default, Clone)]
struct LinkState {
    blocked: HashSet<(u64, u64)>,
    delay: Duration,
}

impl Links {
    /// No rules: everything flows.
    pub fn new() -> Arc<Links> {
        let (tx, _) = watch::channel(0);
        Arc::new(Links { epoch: Mutex::new(Some(tx)), ..Default::default() })
    }

    fn bump(&self) {
        if let Some(tx) = self.epoch.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            tx.send_modify(|e| *e += 1);
        }
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.epoch.lock().unwrap_or_else(|e| e.into_inner()).as_ref().expect("epoch").subscribe()
    }

    /// Records which node a process is (call after every (re)start).
    pub fn set_pid(&self, pid: u32, node: u64) {
        let mut p = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|_, n| *n != node);
        p.insert(pid, node);
    }

    /// Blocks traffic that `from` sends on connections it dials to `to`.
    pub fn block(&self, from: u64, to: u64) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).blocked.insert((from, to));
        self.bump();
    }

    /// Blocks both directions between every node of `a` and every node of `b`.
    pub fn partition(&self, a: &[u64], b: &[u64]) {
        {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for &x in a {
                for &y in b {
                    s.blocked.insert((x, y));
                    s.blocked.insert((y, x));
                }
            }
        }
        self.bump();
    }

    /// Adds `delay` to every chunk forwarded between nodes.
    pub fn set_delay(&self, delay: Duration) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).delay = delay;
        self.bump();
    }

    /// Removes every rule.
    pub fn heal(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = LinkState::default();
        self.bump();
    }

    /// Whether `from` → `to` is blocked now.
    pub fn is_blocked(&self, from: u64, to: u64) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).blocked.contains(&(from, to))
    }

    fn delay(&self) -> Duration {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).delay
    }

    fn node_of_pid(&self, pid: u32) -> Option<u64> {
        self.pids.lock().unwrap_or_else(|e| e.into_inner()).get(&pid).copied()
    }

    /// Whether any rule (a blocked link into `to`, a delay) may apply to a connection to
    /// `to`: then its dialler must be known before anything is forwarded.
    fn rules_concern(&self, to: u64) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        !s.delay.is_zero() || s.blocked.iter().any(|&(_, t)| t == to)
    }

    /// Records a connection's dialler (None: no node) and its accept-to-forwarding time.
    fn identified(&self, from: Option<u64>, setup_us: u64) {
        match from {
            Some(_) => self.setups.lock().unwrap_or_else(|e| e.into_inner()).push(setup_us),
            None => {
                self.unknown.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Node connections accepted so far: time from accept to forwarding (µs) of each.
    pub fn setup_times(&self) -> Vec<u64> {
        self.setups.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Connections accepted whose dialler was no node process.
    pub fn unknown_diallers(&self) -> u64 {
        self.unknown.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn pids(&self) -> Vec<u32> {
        self.pids.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
    }
}

/// The inode of the local TCP socket `local_port` → `remote_port` in a `/proc/net/tcp`
/// text.
pub fn socket_inode(proc_net_tcp: &str, local_port: u16, remote_port: u16) -> Option<u64> {
    for line in proc_net_tcp.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let port = |s: &str| s.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
        if port(f[1]) == Some(local_port) && port(f[2]) == Some(remote_port) {
            return f[9].parse().ok();
        }
    }
    None
}

/// Which node process holds the socket that dialled `proxy_port` from `peer`.
fn dialler(links: &Links, peer: SocketAddr, proxy_port: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = socket_inode(&text, peer.port(), proxy_port)?;
    let want = format!("socket:[{inode}]");
    for pid in links.pids() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for e in dir.flatten() {
            if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                return links.node_of_pid(pid);
            }
        }
    }
    None
}

/// Listens on `listener` and forwards to `target` (node `target_id`) under `links`' rules,
/// until `stop` turns true.
pub async fn run(
    listener: TcpListener,
    target: SocketAddr,
    target_id: u64,
    links: Arc<Links>,
    mut stop: watch::Receiver<bool>,
) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let Ok((inbound, peer)) = accepted else { continue };
        let links = links.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let accepted = std::time::Instant::now();
            // The /proc scan is blocking file I/O: keep it off the async workers, or with many
            // new connections at once (after a restart) every proxied link stalls together.
            // Raft opens a fresh connection for every round of votes (and every leadership
            // check of a read), and the vote must get through within the election timeout:
            // dial the target meanwhile, and while no rule concerns this node, forward at
            // once and learn the dialler on the way.
            let scan = links.clone();
            let ident = tokio::task::spawn_blocking(move || dialler(&scan, peer, port));
            let outbound = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target));
            let (from, ident, outbound) = if links.rules_concern(target_id) {
                let (from, outbound) = tokio::join!(ident, outbound);
                let from = from.ok().flatten();
                if from.is_some_and(|f| links.is_blocked(f, target_id)) {
                    return; // dropped
                }
                (Some(from), None, outbound)
            } else {
                (None, Some(ident), outbound.await)
            };
            let Ok(Ok(outbound)) = outbound else { return };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let setup_us = accepted.elapsed().as_micros() as u64;
            if let Some(from) = from {
                links.identified(from, setup_us);
            }
            forward(inbound, outbound, from.flatten(), ident, setup_us, target_id, links, stop).await;
        });
    }
}

/// Forwards both ways under the rules of the link `from` → `to`. `from` is the dialling
/// node (None: not a node, or not known yet while `ident` runs).
#[allow(clippy::too_many_arguments)]
async fn forward(
    inbound: TcpStream,
    outbound: TcpStream,
    mut from: Option<u64>,
    mut ident: Option<tokio::task::JoinHandle<Option<u64>>>,
    setup_us: u64,
    to: u64,
    links: Arc<Links>,
    mut stop: watch::Receiver<bool>,
) {
    let (mut ir, mut iw) = inbound.into_split();
    let (mut or, mut ow) = outbound.into_split();
    let mut epoch = links.subscribe();
    let mut a = [0u8; 16 * 1024];
    let mut b = [0u8; 16 * 1024];
    loop {
        let node_link = from.is_some();
        tokio::select! {
            r = async { ident.as_mut().expect("guarded").await }, if ident.is_some() => {
                ident = None;
                from = r.ok().flatten();
                links.identified(from, setup_us);
                if from.is_some_and(|f| links.is_blocked(f, to)) {
                    return;
                }
            }
            n = ir.read(&mut a) => {
                let Ok(n) = n else { return };
                if n == 0 { return; }
                if node_link { let d = links.delay(); if !d.is_zero() { tokio::time::sleep(d).await; } }
                if ow.write_all(&a[..n]).await.is_err() { return; }
            }
            n = or.read(&mut b) => {
                let Ok(n) = n else { return };
                if n == 0 { return; }
                if node_link { let d = links.delay(); if !d.is_zero() { tokio::time::sleep(d).await; } }
                if iw.write_all(&b[..n]).await.is_err() { return; }
            }
            _ = epoch.changed() => {
                if let Some(f) = from {
                    if links.is_blocked(f, to) { return; }
                }
            }
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_inode_of_a_socket() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n\
           1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n";
        assert_eq!(socket_inode(text, 0xC350, 0x1F90), Some(222));
        assert_eq!(socket_inode(text, 0x1F90, 0), Some(111));
        assert_eq!(socket_inode(text, 1, 2), None);
    }

    #[test]
    fn rules_are_per_directed_link() {
        let l = Links::new();
        l.block(1, 2);
        assert!(l.is_blocked(1, 2));
        assert!(!l.is_blocked(2, 1));
        l.partition(&[3], &[1, 2]);
        assert!(l.is_blocked(3, 1) && l.is_blocked(2, 3));
        l.heal();
        assert!(!l.is_blocked(1, 2));
    }

    #[tokio::test]
    async fn forwards_bytes_from_unknown_diallers() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = proxy.local_addr().unwrap();
        let (stop_tx, stop) = watch::channel(false);
        let links = Links::new();
        links.block(1, 9); // a node link; this test's socket is no node
        tokio::spawn(run(proxy, echo_addr, 9, links, stop));
        let mut c = TcpStream::connect(proxy_addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        stop_tx.send(true).unwrap();
    }

    /// An echo server behind a proxy for node 9, with this test process registered as node 1.
    async fn echo_behind_proxy(links: Arc<Links>) -> (SocketAddr, watch::Sender<bool>) {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = proxy.local_addr().unwrap();
        let (stop_tx, stop) = watch::channel(false);
        links.set_pid(std::process::id(), 1);
        tokio::spawn(run(proxy, echo_addr, 9, links, stop));
        (proxy_addr, stop_tx)
    }

    async fn echoes(c: &mut TcpStream) -> bool {
        if c.write_all(b"ping").await.is_err() {
            return false;
        }
        let mut buf = [0u8; 4];
        matches!(tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut buf)).await, Ok(Ok(_)))
            && &buf == b"ping"
    }

    #[tokio::test]
    async fn a_node_link_is_identified_and_cut_when_blocked() {
        let links = Links::new();
        let (addr, _stop) = echo_behind_proxy(links.clone()).await;
        // No rules: forwarded at once, the dialler learnt on the way.
        let mut c = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut c).await);
        for _ in 0..100 {
            if !links.setup_times().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(links.setup_times().len(), 1, "identified as node 1");
        // Blocking 1 → 9 closes the live connection and drops new ones.
        links.block(1, 9);
        assert!(!echoes(&mut c).await);
        let mut d = TcpStream::connect(addr).await.unwrap();
        assert!(!echoes(&mut d).await);
        // Healed, node 1 gets through again.
        links.heal();
        let mut e = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut e).await);
    }
}

//! A TCP proxy in front of each port of every node (client and peer). All raft traffic
//! goes through them: each node's `--peers` entry for node N names N's two proxy ports,
//! while N itself listens elsewhere.
//!
//! The proxy in front of node N learns which node dialled it from the connecting socket: it finds the socket's inode in
//! `/proc/net/tcp` and the process holding it among the registered processes (Linux
//! only): the node processes, client subprocesses the harness routes through the proxies
//! (ids from [`CLIENT_BASE`]) and the harness itself ([`HARNESS`]: its in-process clients
//! following a leader redirect). Rules are per directed link (dialler → target): blocked
//! and an added delay per forwarded chunk (node links only). A blocked link is closed
//! (existing connections are closed, new ones dropped: the dialler learns at once) or, with
//! [`Links::set_silent`], silent (connections are held open and nothing passes either way,
//! as when a firewall drops packets: the dialler learns only from its own timeouts; once
//! the link heals, what was held is delivered).
//!
//! A connection whose dialler cannot be found among them is *unidentified*: it is
//! counted, and it fails closed — while any link into its target is blocked it is
//! dropped (or closed, if it was already forwarded), so it can never carry traffic past a
//! partition.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Dialler ids from here on are client subprocesses, not nodes.
pub const CLIENT_BASE: u64 = 1000;
/// The dialler id of the harness process itself (its in-process clients).
pub const HARNESS: u64 = u64::MAX;

/// Whether a dialler id is a node (raft traffic: delays apply to it).
pub fn is_node(id: u64) -> bool {
    id < CLIENT_BASE
}

/// The link rules shared by every proxy of a cluster.
#[derive(Default)]
pub struct Links {
    state: Mutex<LinkState>,
    /// Blocked links hold their connections silent instead of closing them.
    silent: std::sync::atomic::AtomicBool,
    /// Bumped on every rule change, so live connections re-check their link.
    epoch: Mutex<Option<watch::Sender<u64>>>,
    /// Node process id → node id.
    pids: Mutex<HashMap<u32, u64>>,
    /// Time from accept to forwarding, per node connection (µs).
    setups: Mutex<Vec<u64>>,
    /// Connections from registered clients and from the harness.
    clients: std::sync::atomic::AtomicU64,
    /// Connections whose dialler was not found among the registered processes.
    unknown: std::sync::atomic::AtomicU64,
    /// Of those, connections whose dialling socket was gone from `/proc/net/tcp` by the
    /// time of the scan (closed at once: nothing to attribute).
    unknown_gone: std::sync::atomic::AtomicU64,
    /// Unidentified connections dropped or closed because a link into their target was
    /// blocked.
    unknown_cut: std::sync::atomic::AtomicU64,
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

    /// Records which node (or client, from [`CLIENT_BASE`], or [`HARNESS`]) a process is
    /// (call after every (re)start).
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

    /// Forgets a process (a client subprocess that ended).
    pub fn forget_pid(&self, pid: u32) {
        self.pids.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
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

    /// How blocked links behave from now on: silent (held open, nothing passes, as when
    /// packets are dropped) or, by default, closed (connections closed, new ones dropped).
    pub fn set_silent(&self, silent: bool) {
        self.silent.store(silent, std::sync::atomic::Ordering::Relaxed);
        self.bump();
    }

    fn silent(&self) -> bool {
        self.silent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits while the link `from` → `to` is cut and silent; whether it may carry traffic
    /// now (false: the link is cut and closed, or the proxy stops).
    async fn until_passable(&self, from: Option<u64>, to: u64, stop: &mut watch::Receiver<bool>) -> bool {
        let mut epoch = self.subscribe();
        if !self.cut(from, to) {
            return true;
        }
        loop {
            if !self.silent() {
                return false;
            }
            tokio::select! {
                _ = epoch.changed() => {}
                _ = stop.changed() => return false,
            }
            if !self.blocks(from, to) {
                return true;
            }
        }
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

    /// Whether any link into `to` is blocked: an unidentified dialler might be on it.
    fn any_blocked_into(&self, to: u64) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).blocked.iter().any(|&(_, t)| t == to)
    }

    /// Whether a connection from `from` (None: unidentified) to `to` must not carry
    /// traffic now. Unidentified connections fail closed.
    fn cut(&self, from: Option<u64>, to: u64) -> bool {
        let cut = self.blocks(from, to);
        if cut && from.is_none() {
            self.unknown_cut.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        cut
    }

    /// [`Links::cut`] without counting.
    fn blocks(&self, from: Option<u64>, to: u64) -> bool {
        match from {
            Some(f) => self.is_blocked(f, to),
            None => self.any_blocked_into(to),
        }
    }

    /// Records a forwarded (or rule-dropped) connection's dialler and its accept-to-forwarding
    /// time; returns the dialler (None: unidentified).
    fn identified(&self, scan: Scan, setup_us: u64, peer: SocketAddr, to: u64) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        match scan {
            Ok(f) if is_node(f) => self.setups.lock().unwrap_or_else(|e| e.into_inner()).push(setup_us),
            Ok(_) => {
                self.clients.fetch_add(1, Relaxed);
            }
            Err(gone) => {
                self.unknown.fetch_add(1, Relaxed);
                if gone {
                    self.unknown_gone.fetch_add(1, Relaxed);
                } else {
                    // Worth a look: a live socket no registered process holds.
                    println!("proxy: unidentified live connection from {peer} to node {to}");
                }
            }
        }
        scan.ok()
    }

    /// Node connections accepted so far: time from accept to forwarding (µs) of each.
    pub fn setup_times(&self) -> Vec<u64> {
        self.setups.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Connections from registered client processes and the harness.
    pub fn client_connections(&self) -> u64 {
        self.clients.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Connections accepted whose dialler was not found among the registered processes.
    pub fn unknown_diallers(&self) -> u64 {
        self.unknown.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Unidentified connections whose dialling socket had already closed when scanned.
    pub fn unknown_gone(&self) -> u64 {
        self.unknown_gone.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Unidentified connections dropped or closed because a link into their target was
    /// blocked.
    pub fn unknown_cut(&self) -> u64 {
        self.unknown_cut.load(std::sync::atomic::Ordering::Relaxed)
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

/// Which registered process holds the socket that dialled `proxy_port` from `peer`. A
/// socket can be missing from a scan that races its owner's bookkeeping, so a miss is
/// retried a few times before the dialler counts as unidentified.
fn dialler(links: &Links, peer: SocketAddr, proxy_port: u16) -> Scan {
    let mut last = Err(false);
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        last = dialler_once(links, peer, proxy_port);
        if last.is_ok() {
            break;
        }
    }
    last
}

/// A dialler scan's answer: the dialler's id, or Err(true) when the dialling socket had
/// closed, Err(false) when no registered process holds it.
type Scan = Result<u64, bool>;

/// Err(true): the dialling socket is not in `/proc/net/tcp`, or no process owns it any
/// more (inode 0: closed); Err(false): no registered process holds it.
fn dialler_once(links: &Links, peer: SocketAddr, proxy_port: u16) -> Scan {
    let text = std::fs::read_to_string("/proc/net/tcp").map_err(|_| false)?;
    let inode = socket_inode(&text, peer.port(), proxy_port).filter(|&i| i != 0).ok_or(true)?;
    let want = format!("socket:[{inode}]");
    for pid in links.pids() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for e in dir.flatten() {
            if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                return links.node_of_pid(pid).ok_or(false);
            }
        }
    }
    Err(false)
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
        let mut stop = stop.clone();
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
                let scan = from.unwrap_or(Err(false));
                let from = scan.ok();
                if links.cut(from, target_id) {
                    if from.is_none_or(|f| !is_node(f)) {
                        links.identified(scan, 0, peer, target_id);
                    }
                    // Dropped, or held silent until the link heals.
                    if !links.until_passable(from, target_id, &mut stop).await {
                        return;
                    }
                }
                (Some(scan), None, outbound)
            } else {
                (None, Some(ident), outbound.await)
            };
            let Ok(Ok(outbound)) = outbound else { return };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let setup_us = accepted.elapsed().as_micros() as u64;
            let from = from.and_then(|scan| links.identified(scan, setup_us, peer, target_id));
            forward(inbound, outbound, from, ident, peer, setup_us, target_id, links, stop).await;
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
    mut ident: Option<tokio::task::JoinHandle<Scan>>,
    peer: SocketAddr,
    setup_us: u64,
    to: u64,
    links: Arc<Links>,
    mut stop: watch::Receiver<bool>,
) {
    let (mut ir, mut iw) = inbound.into_split();
    let (mut or, mut ow) = outbound.into_split();
    let mut epoch = links.subscribe();
    // Whether the dialler scan has answered (`from` None after it: unidentified).
    let mut identified = ident.is_none();
    let mut a = [0u8; 16 * 1024];
    let mut b = [0u8; 16 * 1024];
    loop {
        let node_link = from.is_some_and(is_node);
        tokio::select! {
            r = async { ident.as_mut().expect("guarded").await }, if ident.is_some() => {
                ident = None;
                from = links.identified(r.unwrap_or(Err(false)), setup_us, peer, to);
                identified = true;
                if !links.until_passable(from, to, &mut stop).await {
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
                // Until the scan answers the dialler may be anyone: a new block applies to
                // it once known. Identified as no registered process: fail closed.
                if identified && !links.until_passable(from, to, &mut stop).await { return; }
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
    async fn unidentified_diallers_pass_only_while_no_link_into_the_target_is_blocked() {
        let links = Links::new();
        let (addr, _stop) = echo_behind_proxy(links.clone()).await;
        // This test process is registered as node 1 by the helper: forget it, so its
        // connections are unidentified.
        links.forget_pid(std::process::id());
        let mut c = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut c).await, "no rules: forwarded");
        for _ in 0..100 {
            if links.unknown_diallers() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(links.unknown_diallers(), 1, "counted as unidentified");
        // A block of some other link into the target: the unidentified connection might be
        // that link, so the live one is closed and new ones are dropped.
        links.block(2, 9);
        assert!(!echoes(&mut c).await, "live unidentified connection closed");
        let mut d = TcpStream::connect(addr).await.unwrap();
        assert!(!echoes(&mut d).await, "new unidentified connection dropped");
        assert!(links.unknown_cut() >= 2);
        links.heal();
        let mut e = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut e).await, "healed: forwarded again");
    }

    #[tokio::test]
    async fn a_client_cut_from_the_cluster_is_dropped_and_others_pass() {
        let links = Links::new();
        let (addr, _stop) = echo_behind_proxy(links.clone()).await;
        links.set_pid(std::process::id(), CLIENT_BASE + 3);
        let mut c = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut c).await);
        for _ in 0..100 {
            if links.client_connections() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(links.client_connections(), 1, "identified as client 3");
        links.block(CLIENT_BASE + 3, 9);
        assert!(!echoes(&mut c).await, "the client's live connection is closed");
        let mut d = TcpStream::connect(addr).await.unwrap();
        assert!(!echoes(&mut d).await, "and new ones are dropped");
        // Another registered client is untouched by that rule.
        links.set_pid(std::process::id(), CLIENT_BASE + 4);
        let mut e = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut e).await);
        assert_eq!(links.unknown_diallers(), 0);
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

    /// A connection through the proxy that echoes, once the proxy has learnt its dialler.
    async fn identified_connection(addr: SocketAddr, links: &Links) -> TcpStream {
        let mut c = TcpStream::connect(addr).await.unwrap();
        assert!(echoes(&mut c).await);
        for _ in 0..100 {
            if !links.setup_times().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(links.setup_times().len(), 1, "identified as node 1");
        c
    }

    #[tokio::test]
    async fn a_node_link_is_identified_and_cut_when_blocked() {
        let links = Links::new();
        let (addr, _stop) = echo_behind_proxy(links.clone()).await;
        // No rules: forwarded at once, the dialler learnt on the way.
        let mut c = identified_connection(addr, &links).await;
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

    #[tokio::test]
    async fn a_silent_cut_holds_connections_open_with_nothing_passing_until_it_heals() {
        let links = Links::new();
        let (addr, _stop) = echo_behind_proxy(links.clone()).await;
        let mut c = identified_connection(addr, &links).await;
        links.set_silent(true);
        links.block(1, 9);
        // Neither closed nor answered, on the live connection and on a new one.
        let mut d = TcpStream::connect(addr).await.unwrap();
        for s in [&mut c, &mut d] {
            s.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            let read = tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut buf)).await;
            assert!(read.is_err(), "nothing passes a silent cut: {read:?}");
        }
        // Healed: what was held is delivered.
        links.heal();
        for s in [&mut c, &mut d] {
            let mut buf = [0u8; 4];
            tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await.unwrap().unwrap();
            assert_eq!(&buf, b"ping");
        }
    }
}

//! A cluster of real `dls` processes on 127.0.0.1: ports chosen at run time, one data
//! directory and one log per node, started, killed, paused, wiped and restarted node by
//! node. Every process it started is SIGKILLed when the cluster is dropped (and only those).

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tonic::transport::ClientTlsConfig;

use crate::cli::dls_bin;
use crate::disk::{self, Tmpfs};
use crate::ports::free_ports;
use crate::probe;
use crate::proxy::{self, Links};

/// Whether something stands between a node's membership addresses and the ports it
/// listens on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Proxies {
    /// Each node listens at the addresses the membership names.
    #[default]
    None,
    /// Each node's client port listens on [`Node::listen`]; the caller serves
    /// [`Node::addr`] itself (its own proxy), so every way a client reaches a node, leader
    /// redirects included, passes it.
    CallerClient,
    /// A [`proxy`] of the kit stands at both membership addresses of every node, under the
    /// cluster's [`Links`]: raft and client traffic both pass the link rules.
    Kit,
}

impl Proxies {
    /// Client, peer and HTTP port, and the ports the node listens on behind proxies.
    fn ports_per_node(self) -> usize {
        match self {
            Proxies::None => 3,
            Proxies::CallerClient => 4,
            Proxies::Kit => 5,
        }
    }
}

/// How to start a cluster beyond the defaults.
#[derive(Clone)]
pub struct Spec {
    pub nodes: usize,
    /// Extra `dls serve` flags; `{id}` in a flag is replaced by the node's id.
    pub extra: Vec<String>,
    /// Any valid key, when the cluster requires keys (for the leader probe).
    pub probe_key: Option<String>,
    /// When the client port runs TLS: how the leader probe connects.
    pub probe_tls: Option<ClientTlsConfig>,
    /// Start the nodes without DLS_CLUSTER_SECRET (the caller gives peer credentials).
    pub no_secret: bool,
    /// The `dls` binary; default: [`dls_bin`].
    pub bin: Option<PathBuf>,
    /// Where the nodes' data and logs go (kept afterwards); default: a temporary directory
    /// removed with the cluster.
    pub dir: Option<PathBuf>,
    /// Raft heartbeats every 50 ms and elections after 300 ms, so a failover takes a
    /// fraction of a second; false keeps the server's defaults (what benchmarks measure).
    pub fast_elections: bool,
    pub proxies: Proxies,
    /// Each node's data directory on its own tmpfs of this size (mount(8) syntax, needs
    /// root), mounted before any node starts, so it can be filled up.
    pub tmpfs: Option<String>,
    /// Start every node under this open-file limit, soft and hard (`prlimit`).
    pub nofile: Option<u64>,
    /// Let each node bind port 0 where no peer needs the address in advance and learn the
    /// port from its `--ports-file`: a single node's client and HTTP port, every node's HTTP
    /// port (the client and peer ports of several nodes are in `--peers`, fixed before any
    /// starts, so they are still picked). A node's later starts reuse what it bound first.
    /// Without proxies only.
    pub bound_ports: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            nodes: 1,
            extra: Vec::new(),
            probe_key: None,
            probe_tls: None,
            no_secret: false,
            bin: None,
            dir: None,
            fast_elections: true,
            proxies: Proxies::None,
            tmpfs: None,
            nofile: None,
            bound_ports: false,
        }
    }
}

pub struct Node {
    pub id: u64,
    /// The client address in the membership (what clients and `--peers` name).
    pub addr: String,
    /// The peer address in the membership (raft transport only).
    pub peer_addr: String,
    /// Where the process listens for clients: `addr` unless a proxy stands in between.
    pub listen: String,
    /// Where the process listens for peers: `peer_addr` unless a proxy stands in between.
    pub peer_listen: String,
    /// The operator HTTP port (--http-listen).
    pub http_addr: String,
    pub data_dir: PathBuf,
    /// Every start of the node appends to it.
    pub log: PathBuf,
    /// Start it with --join (a node added to a running cluster, never bootstrapping its own).
    pub join: bool,
    /// Environment of its next starts (e.g. a preloaded libfaketime).
    pub env: Vec<(String, OsString)>,
    /// Where it writes the addresses it bound (`--ports-file`), when it binds port 0.
    ports_file: Option<PathBuf>,
    child: Option<Child>,
    paused: bool,
    /// Length of the log when the current process started.
    log_start: u64,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    /// The cluster secret every node is started with (DLS_CLUSTER_SECRET); empty: none.
    pub secret: String,
    bin: PathBuf,
    peers: String,
    extra: Vec<String>,
    fast_elections: bool,
    nofile: Option<u64>,
    probe_key: Option<String>,
    probe_tls: Option<ClientTlsConfig>,
    links: Option<Arc<Links>>,
    _stop_proxies: Option<watch::Sender<bool>>,
    /// Each node's tmpfs, in node order; unmounted after the nodes are stopped (Drop).
    disks: Vec<Tmpfs>,
    dir: PathBuf,
    _own_dir: Option<tempfile::TempDir>,
}

impl Node {
    fn new(id: u64, dir: &Path, ports: &[u16], proxies: Proxies) -> Node {
        let at = |p: u16| format!("127.0.0.1:{p}");
        let (addr, peer_addr, http_addr) = (at(ports[0]), at(ports[1]), at(ports[2]));
        let (listen, peer_listen) = match proxies {
            Proxies::None => (addr.clone(), peer_addr.clone()),
            Proxies::CallerClient => (at(ports[3]), peer_addr.clone()),
            Proxies::Kit => (at(ports[3]), at(ports[4])),
        };
        Node {
            id,
            addr,
            peer_addr,
            listen,
            peer_listen,
            http_addr,
            data_dir: dir.join(format!("node-{id}")),
            log: dir.join(format!("node-{id}.log")),
            join: false,
            env: Vec::new(),
            ports_file: None,
            child: None,
            paused: false,
            log_start: 0,
        }
    }
}

impl Cluster {
    /// Starts `n` nodes (1 = a single-node cluster without --peers) and waits for a leader.
    pub async fn start(n: usize) -> Cluster {
        Self::start_with(n, &[]).await
    }

    pub async fn start_with(n: usize, extra: &[&str]) -> Cluster {
        Self::start_full(n, extra, None).await
    }

    /// Starts nodes that require API keys; `probe_key` is any valid key.
    pub async fn start_full(n: usize, extra: &[&str], probe_key: Option<String>) -> Cluster {
        let extra = extra.iter().map(|s| s.to_string()).collect();
        Self::start_spec(Spec { nodes: n, extra, probe_key, ..Spec::default() }).await
    }

    pub async fn start_spec(spec: Spec) -> Cluster {
        let c = Self::spawn_spec(spec);
        c.wait_for_leader(Duration::from_secs(20)).await;
        // A majority suffices to elect, and a follower knows the leader only once it has
        // heard from it; a test may turn to the slowest node at once.
        c.wait_serving(Duration::from_secs(20)).await;
        c.wait_all_serve(Duration::from_secs(20)).await;
        c
    }

    /// Waits until every running node serves calls: the leader, and followers that know it.
    pub async fn wait_all_serve(&self, within: Duration) {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            while !probe::serves(&n.addr, self.probe_key.as_deref(), self.probe_tls.as_ref()).await {
                if Instant::now() > deadline {
                    self.dump_logs();
                    panic!("node {} does not serve (knows no leader) within {within:?}", n.id);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Waits until every running node accepts connections on its client port.
    pub async fn wait_serving(&self, within: Duration) {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            while tokio::net::TcpStream::connect(&n.listen).await.is_err() {
                if Instant::now() > deadline {
                    self.dump_logs();
                    panic!("node {} does not accept connections on {} within {within:?}", n.id, n.listen);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Starts the processes without waiting for a leader (for tests of a refused start).
    pub fn spawn_spec(spec: Spec) -> Cluster {
        let mut c = Self::new(spec).expect("lay out the cluster");
        c.start_all().expect("start dls");
        c
    }

    /// Lays the cluster out (ports, directories, tmpfs mounts, the kit's proxies) without
    /// starting a node. The kit's proxies need a tokio runtime.
    pub fn new(spec: Spec) -> io::Result<Cluster> {
        let (dir, own_dir) = match &spec.dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let bound = spec.bound_ports && spec.proxies == Proxies::None;
        let per_node = spec.proxies.ports_per_node();
        // A port is free when picked and bound a moment later (`ports`): the kit's own
        // proxies bind theirs here, and lay the cluster out again on ports taken meanwhile.
        let mut attempts = 0;
        let (nodes, links, stop) = loop {
            let ports = if bound && spec.nodes == 1 { vec![0; per_node] } else { free_ports(per_node * spec.nodes) };
            let mut nodes: Vec<Node> = (1..=spec.nodes as u64)
                .zip(ports.chunks(per_node))
                .map(|(id, p)| Node::new(id, &dir, p, spec.proxies))
                .collect();
            if bound {
                for n in &mut nodes {
                    n.http_addr = "127.0.0.1:0".into();
                    n.ports_file = Some(dir.join(format!("node-{}.ports.json", n.id)));
                }
            }
            if spec.proxies != Proxies::Kit {
                break (nodes, None, None);
            }
            match start_proxies(&nodes) {
                Ok((links, stop)) => break (nodes, Some(links), Some(stop)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts < 5 => attempts += 1,
                Err(e) => return Err(e),
            }
        };
        let peers = nodes.iter().map(|n| format!("{}={}/{}", n.id, n.addr, n.peer_addr)).collect::<Vec<_>>().join(",");
        let secret =
            if spec.no_secret { String::new() } else { format!("test-secret-{:032x}", rand::random::<u128>()) };
        let mut disks = Vec::new();
        if let Some(size) = &spec.tmpfs {
            for node in &nodes {
                disks.push(Tmpfs::mount(&node.data_dir, size).map_err(io::Error::other)?);
            }
        }
        Ok(Cluster {
            nodes,
            secret,
            bin: spec.bin.unwrap_or_else(dls_bin),
            peers,
            extra: spec.extra,
            fast_elections: spec.fast_elections,
            nofile: spec.nofile,
            probe_key: spec.probe_key,
            probe_tls: spec.probe_tls,
            links,
            _stop_proxies: stop,
            disks,
            dir,
            _own_dir: own_dir,
        })
    }

    /// The binary of every later start (an upgrade in place: stop a node, start it again).
    pub fn set_bin(&mut self, bin: PathBuf) {
        self.bin = bin;
    }

    /// Starts every node that does not run.
    pub fn start_all(&mut self) -> io::Result<()> {
        for id in self.ids() {
            self.start_node(id)?;
        }
        Ok(())
    }

    /// The directory of the nodes' data and logs; it lives as long as the cluster (a place
    /// for certificates and key files too).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn node(&self, id: u64) -> &Node {
        self.nodes.iter().find(|n| n.id == id).expect("node id")
    }

    pub fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).expect("node id")
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Nodes whose process runs and is not paused.
    pub fn running(&self) -> Vec<u64> {
        self.nodes.iter().filter(|n| n.child.is_some() && !n.paused).map(|n| n.id).collect()
    }

    /// The client addresses in the membership.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    /// Where the nodes listen for clients: past any proxy.
    pub fn listen_endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.listen.clone()).collect()
    }

    pub fn addr(&self, id: u64) -> String {
        self.node(id).addr.clone()
    }

    pub fn http_addr(&self, id: u64) -> String {
        self.node(id).http_addr.clone()
    }

    /// Node `id`'s unlabelled `/metrics` value named `name` (or a labelled one, given as
    /// `name{label="value"}`). Panics if the node does not answer or lacks it.
    pub fn metric(&self, id: u64, name: &str) -> f64 {
        let (status, text) = crate::http::http_get(&self.http_addr(id), "/metrics")
            .unwrap_or_else(|e| panic!("node {id}'s /metrics: {e}"));
        assert_eq!(status, 200, "node {id}'s /metrics answered {status}");
        metric_value(&text, name).unwrap_or_else(|| panic!("no {name} in node {id}'s /metrics"))
    }

    /// Node `id`'s `/metrics` value named `name`, or None while the node does not answer
    /// (starting, or down): for polls.
    pub fn metric_now(&self, id: u64, name: &str) -> Option<f64> {
        match crate::http::http_get(&self.http_addr(id), "/metrics") {
            Ok((200, text)) => metric_value(&text, name),
            _ => None,
        }
    }

    /// Waits until node `id` has applied every entry node `from` had committed when called:
    /// what a test means by "the follower caught up".
    pub async fn wait_caught_up(&self, id: u64, from: u64, within: Duration) {
        let target = self.metric(from, "dls_commit_index");
        let what = format!("node {id} to apply up to index {target} (node {from}'s commit index)");
        crate::poll::eventually(within, &what, || (self.metric_now(id, "dls_applied_index")? >= target).then_some(()))
            .await
    }

    /// Process id of node `id`, while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.node(id).child.as_ref().map(Child::id)
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.node(id).child.is_some()
    }

    /// The link rules of the kit's proxies ([`Proxies::Kit`]).
    pub fn links(&self) -> &Arc<Links> {
        self.links.as_ref().expect("the cluster runs behind the kit's proxies")
    }

    /// Node `id`'s tmpfs, when the data directories are on tmpfs.
    pub fn disk(&self, id: u64) -> Option<&Tmpfs> {
        self.disks.get(self.nodes.iter().position(|n| n.id == id)?)
    }

    /// Starts node `id` unless it runs. One that exited by itself is reaped and started
    /// again: its exit status is returned.
    pub fn start_node(&mut self, id: u64) -> io::Result<Option<ExitStatus>> {
        let single = self.nodes.len() == 1;
        let extra: Vec<String> = self.extra.iter().map(|a| a.replace("{id}", &id.to_string())).collect();
        let (bin, peers, secret, fast, nofile) =
            (self.bin.clone(), self.peers.clone(), self.secret.clone(), self.fast_elections, self.nofile);
        let links = self.links.clone();
        let n = self.node_mut(id);
        let mut exited = None;
        if let Some(child) = n.child.as_mut() {
            match child.try_wait()? {
                Some(status) => exited = Some(status),
                None => return Ok(None),
            }
            n.child = None;
        }
        let log = OpenOptions::new().create(true).append(true).open(&n.log)?;
        n.log_start = log.metadata()?.len();
        // prlimit sets the limit and execs the node: the pid is the node's.
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        cmd.arg("serve").args(["--node-id", &id.to_string()]).arg("--data-dir").arg(&n.data_dir);
        if fast {
            cmd.args(["--heartbeat-ms", "50", "--election-timeout-ms", "300"]);
        }
        cmd.args(["--http-listen", &n.http_addr]);
        if single {
            cmd.args(["--listen", &n.listen]);
        } else {
            cmd.args(["--peers", &peers]);
            if n.listen != n.addr || n.peer_listen != n.peer_addr {
                cmd.args(["--listen", &n.listen, "--peer-listen", &n.peer_listen]);
            }
        }
        if n.join {
            cmd.arg("--join");
        }
        if let Some(file) = &n.ports_file {
            // A file left by an earlier start would be read as this start's.
            match std::fs::remove_file(file) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            cmd.arg("--ports-file").arg(file);
        }
        if !secret.is_empty() {
            cmd.env("DLS_CLUSTER_SECRET", &secret);
        }
        cmd.args(&extra)
            .envs(n.env.iter().map(|(k, v)| (k, v)))
            .env("DLS_LOG", "info")
            .stdin(Stdio::null())
            // tracing writes to stdout, errors before logging starts go to stderr.
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = cmd.spawn().map_err(|e| io::Error::new(e.kind(), format!("start {}: {e}", bin.display())))?;
        if let Some(links) = links {
            links.set_pid(child.id(), id);
        }
        n.child = Some(child);
        n.paused = false;
        if n.ports_file.is_some() {
            self.learn_bound_ports(id)?;
        }
        Ok(exited)
    }

    /// Waits for node `id`'s `--ports-file` and keeps the addresses in it as the node's, for
    /// its clients and its later starts. An error when the process exits first (a port
    /// taken, a bad flag), with the end of its log.
    fn learn_bound_ports(&mut self, id: u64) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let n = self.node_mut(id);
        let file = n.ports_file.clone().expect("a ports file");
        let text = loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                break text;
            }
            let child = n.child.as_mut().expect("just started");
            let failed = match child.try_wait()? {
                Some(status) => Some(format!("exited ({status}) before binding its ports")),
                None if Instant::now() > deadline => Some("wrote no --ports-file within 30 s".to_string()),
                None => None,
            };
            if let Some(why) = failed {
                let log = std::fs::read_to_string(&n.log).unwrap_or_default();
                let tail = log.get(n.log_start as usize..).unwrap_or_default();
                return Err(io::Error::other(format!("node {id} {why}:\n{tail}")));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let bound: serde_json::Value = serde_json::from_str(&text).map_err(io::Error::other)?;
        let addr = |port: &str| {
            bound[port].as_str().map(str::to_string).ok_or_else(|| io::Error::other(format!("no {port} in {text}")))
        };
        n.http_addr = addr("http")?;
        if n.listen.ends_with(":0") {
            n.listen = addr("client")?;
            n.addr = n.listen.clone();
        }
        Ok(())
    }

    fn start_or_panic(&mut self, id: u64) {
        if let Err(e) = self.start_node(id) {
            panic!("node {id}: {e}");
        }
    }

    /// SIGKILL: no shutdown, no flush beyond what was acknowledged.
    pub fn kill(&mut self, id: u64) {
        let n = self.node_mut(id);
        if let Some(mut c) = n.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        n.paused = false;
    }

    /// SIGKILLs every node (a paused one too).
    pub fn kill_all(&mut self) {
        for id in self.ids() {
            self.kill(id);
        }
    }

    pub fn restart(&mut self, id: u64) {
        self.kill(id);
        self.start_or_panic(id);
    }

    /// SIGTERM, then waits up to `within` for the node to exit. Returns its exit status, or
    /// None if it is still running (then it is SIGKILLed, so a test fails without leaving it
    /// behind).
    pub async fn terminate(&mut self, id: u64, within: Duration) -> Option<ExitStatus> {
        let mut child = self.node_mut(id).child.take()?;
        assert!(signal_pid(child.id(), "TERM"), "kill -TERM {} failed", child.id());
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// Sends a signal to a running node (kill(1): the workspace forbids `unsafe`).
    pub fn signal(&self, id: u64, sig: &str) {
        let pid = self.pid(id).expect("running node");
        assert!(signal_pid(pid, sig), "kill -{sig} {pid} failed");
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing, as a long GC pause would.
    pub fn pause(&mut self, id: u64) {
        if let Some(pid) = self.pid(id) {
            signal_pid(pid, "STOP");
            self.node_mut(id).paused = true;
        }
    }

    /// SIGCONT after [`Cluster::pause`]; nothing for a node that is not paused.
    pub fn resume(&mut self, id: u64) {
        if !self.node(id).paused {
            return;
        }
        if let Some(pid) = self.pid(id) {
            signal_pid(pid, "CONT");
            self.node_mut(id).paused = false;
        }
    }

    /// SIGKILLs node `id` and deletes its data (a wiped or replaced disk). A tmpfs mount
    /// point stays, emptied.
    pub fn wipe(&mut self, id: u64) -> io::Result<()> {
        self.kill(id);
        let dir = self.node(id).data_dir.clone();
        if self.disk(id).is_some() {
            disk::clear_dir(&dir)
        } else {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        }
    }

    /// SIGKILLs node `id` and deletes its whole data directory.
    pub fn kill_and_wipe_data_dir(&mut self, id: u64) {
        self.wipe(id).expect("wipe the data directory");
    }

    /// Starts node `id` again with the flags it had (after a wipe: the same flags, empty data).
    pub fn start_again(&mut self, id: u64) {
        assert!(!self.is_running(id), "node {id} is running");
        self.start_or_panic(id);
    }

    /// Starts node `id` with an empty data directory and --join (after `dls members add`, or
    /// before it: it waits to be replicated to).
    pub fn start_joining(&mut self, id: u64) {
        self.kill_and_wipe_data_dir(id);
        self.node_mut(id).join = true;
        self.start_or_panic(id);
    }

    /// A new node `id` on fresh ports, started with --join; --peers of every later start
    /// lists it too. Returns its `HOST:PORT/PEER_PORT` for `members add`.
    pub fn spawn_joining_node(&mut self, id: u64) -> String {
        assert!(self.nodes.iter().all(|n| n.id != id), "node {id} exists");
        let mut node = Node::new(id, &self.dir, &free_ports(3), Proxies::None);
        node.join = true;
        let spec = format!("{}/{}", node.addr, node.peer_addr);
        self.peers.push_str(&format!(",{id}={spec}"));
        self.nodes.push(node);
        self.start_or_panic(id);
        spec
    }

    /// Node `id`'s exit status if its process was started and has exited since.
    pub fn exited(&mut self, id: u64) -> Option<ExitStatus> {
        self.node_mut(id).child.as_mut()?.try_wait().unwrap()
    }

    /// Whether node `id`'s process was started and has exited since.
    pub fn has_exited(&mut self, id: u64) -> bool {
        self.exited(id).is_some()
    }

    /// Waits up to `within` for node `id`'s process to exit by itself and returns its exit
    /// status; None if it still runs (it is left running).
    pub async fn wait_exit(&mut self, id: u64, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let node = self.node_mut(id);
            if let Some(status) = node.child.as_mut()?.try_wait().unwrap() {
                node.child = None;
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Waits until node `id`'s process has exited and returns its exit status.
    pub async fn wait_for_exit(&mut self, id: u64, within: Duration) -> ExitStatus {
        assert!(self.is_running(id), "node {id} is not running");
        match self.wait_exit(id, within).await {
            Some(status) => status,
            None => panic!("node {id} still runs after {within:?}"),
        }
    }

    /// The id of a node that serves as leader, polling until one answers (panics after
    /// `within`, with the nodes' logs).
    pub async fn wait_for_leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            for n in self.nodes.iter().filter(|n| n.child.is_some()) {
                if probe::is_leader(&n.addr, self.probe_key.as_deref(), self.probe_tls.as_ref()).await {
                    return n.id;
                }
            }
            if Instant::now() > deadline {
                self.dump_logs();
                panic!("no leader elected within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A node that serves as leader right now, if one answers (one round of asking).
    pub async fn leader_now(&self) -> Option<u64> {
        for n in self.nodes.iter().filter(|n| n.child.is_some() && !n.paused) {
            if probe::is_leader(&n.addr, self.probe_key.as_deref(), self.probe_tls.as_ref()).await {
                return Some(n.id);
            }
        }
        None
    }

    /// Waits for a leader other than `old`.
    pub async fn wait_for_new_leader(&self, old: u64, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let l = self.wait_for_leader(within).await;
            if l != old {
                return l;
            }
            assert!(Instant::now() < deadline, "leadership did not move from node {old}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Everything node `id` logged, over all its starts.
    pub fn log_of(&self, id: u64) -> String {
        std::fs::read_to_string(&self.node(id).log).unwrap_or_default()
    }

    /// What node `id`'s current (or last) process logged.
    pub fn log_since_start(&self, id: u64) -> String {
        let whole = self.log_of(id);
        whole.get(self.node(id).log_start as usize..).unwrap_or_default().to_string()
    }

    pub fn dump_logs(&self) {
        for n in &self.nodes {
            let text = self.log_of(n.id);
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("---- node {} log (last lines) ----", n.id);
            for l in tail.into_iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        self.kill_all();
    }
}

/// kill(1) of `pid` with `sig` (the workspace forbids `unsafe`); whether it was delivered.
pub fn signal_pid(pid: u32, sig: &str) -> bool {
    Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().is_ok_and(|s| s.success())
}

/// A proxy of the kit in front of each node's client and peer port, under one set of rules.
fn start_proxies(nodes: &[Node]) -> io::Result<(Arc<Links>, watch::Sender<bool>)> {
    let links = Links::new();
    let (stop_tx, stop) = watch::channel(false);
    // The harness's own clients may reach a proxy by a leader redirect: known, never cut.
    links.set_pid(std::process::id(), proxy::HARNESS);
    for n in nodes {
        for (at, target) in [(&n.addr, &n.listen), (&n.peer_addr, &n.peer_listen)] {
            let listener =
                std::net::TcpListener::bind(at).map_err(|e| io::Error::new(e.kind(), format!("{at}: {e}")))?;
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let target = target.parse().map_err(io::Error::other)?;
            tokio::spawn(proxy::run(listener, target, n.id, links.clone(), stop.clone()));
        }
    }
    Ok((links, stop_tx))
}

/// The value of `name` (unlabelled, or given with its labels) in a `/metrics` text.
fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

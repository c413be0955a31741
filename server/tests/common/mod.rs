//! Test harness: real `dls` processes on 127.0.0.1 ports chosen at run time, each with its
//! own temporary data directory and its own HTTP port (metrics, health). Nothing is mocked.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use caerus_core::{
    AcquireOptions, DlsClient, Error, Lock, LockMode, Transaction, TransactionOptions, TransactionState,
};
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::HeartbeatRequest;
use tonic::transport::Channel;

pub struct NodeProc {
    pub id: u64,
    /// The client port.
    pub addr: String,
    /// The peer port (raft transport only).
    pub peer_addr: String,
    /// The operator HTTP port (--http-listen).
    pub http_addr: String,
    pub data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Started with --join (a node added to a running cluster).
    pub join: bool,
}

pub struct Cluster {
    pub nodes: Vec<NodeProc>,
    peers: String,
    /// Extra `dls serve` flags; `{id}` in a flag is replaced by the node's id.
    extra: Vec<String>,
    /// API key for the leader probe when the cluster requires keys.
    probe_key: Option<String>,
    /// TLS of the leader probe when the client port runs TLS.
    probe_tls: Option<tonic::transport::ClientTlsConfig>,
    /// The cluster secret every node is started with (DLS_CLUSTER_SECRET).
    pub secret: String,
    _dir: tempfile::TempDir,
}

/// How to start a cluster beyond the defaults.
#[derive(Clone, Default)]
pub struct Spec {
    pub nodes: usize,
    /// Extra `dls serve` flags; `{id}` in a flag is replaced by the node's id.
    pub extra: Vec<String>,
    /// Any valid key, when the cluster requires keys.
    pub probe_key: Option<String>,
    /// When the client port runs TLS: how the harness's own probe connects.
    pub probe_tls: Option<tonic::transport::ClientTlsConfig>,
    /// Start the nodes without DLS_CLUSTER_SECRET (the test gives peer credentials itself).
    pub no_secret: bool,
}

/// Transaction options with a lease of `lease_ms`.
pub fn opts(lease_ms: u64) -> TransactionOptions {
    TransactionOptions::default().with_timeout_ms(lease_ms)
}

/// Acquire options that wait up to `ms`.
pub fn wait(ms: u64) -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(ms)
}

/// A port that was free a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `n` distinct ports that were free a moment ago (held together, so none repeats).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

impl Cluster {
    /// Starts `n` nodes (1 = a single-node cluster without --peers).
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
        c
    }

    /// Starts the processes without waiting for a leader (for tests of a refused start).
    pub fn spawn_spec(spec: Spec) -> Cluster {
        let n = spec.nodes;
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(3 * n);
        let nodes: Vec<NodeProc> = (1..=n as u64)
            .zip(ports.chunks(3))
            .map(|(id, p)| NodeProc {
                id,
                addr: format!("127.0.0.1:{}", p[0]),
                peer_addr: format!("127.0.0.1:{}", p[1]),
                http_addr: format!("127.0.0.1:{}", p[2]),
                data_dir: dir.path().join(format!("node-{id}")),
                log: dir.path().join(format!("node-{id}.log")),
                child: None,
                join: false,
            })
            .collect();
        let peers = nodes.iter().map(|n| format!("{}={}/{}", n.id, n.addr, n.peer_addr)).collect::<Vec<_>>().join(",");
        let secret =
            if spec.no_secret { String::new() } else { format!("test-secret-{}", uuid::Uuid::new_v4().simple()) };
        let mut c = Cluster {
            nodes,
            peers,
            extra: spec.extra,
            probe_key: spec.probe_key,
            probe_tls: spec.probe_tls,
            secret,
            _dir: dir,
        };
        for id in 1..=n as u64 {
            c.spawn(id);
        }
        c
    }

    /// A directory that lives as long as the cluster (for certificates and key files).
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    fn node(&mut self, id: u64) -> &mut NodeProc {
        self.nodes.iter_mut().find(|n| n.id == id).expect("node id")
    }

    fn spawn(&mut self, id: u64) {
        let single = self.nodes.len() == 1;
        let peers = self.peers.clone();
        let extra: Vec<String> = self.extra.iter().map(|a| a.replace("{id}", &id.to_string())).collect();
        let secret = self.secret.clone();
        let n = self.node(id);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&n.log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dls"));
        cmd.arg("serve")
            .arg("--node-id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(&n.data_dir)
            .args(["--heartbeat-ms", "50", "--election-timeout-ms", "300"])
            .arg("--http-listen")
            .arg(&n.http_addr)
            .args(&extra)
            .env("DLS_LOG", "info")
            // tracing writes to stdout, errors before logging starts go to stderr.
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if single {
            cmd.arg("--listen").arg(&n.addr);
        } else {
            cmd.arg("--peers").arg(&peers);
        }
        if !secret.is_empty() {
            cmd.env("DLS_CLUSTER_SECRET", &secret);
        }
        if n.join {
            cmd.arg("--join");
        }
        n.child = Some(cmd.spawn().expect("start dls"));
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    pub fn addr(&self, id: u64) -> String {
        self.nodes.iter().find(|n| n.id == id).unwrap().addr.clone()
    }

    /// Process id of node `id`, while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.nodes.iter().find(|n| n.id == id)?.child.as_ref().map(Child::id)
    }

    pub fn http_addr(&self, id: u64) -> String {
        self.nodes.iter().find(|n| n.id == id).unwrap().http_addr.clone()
    }

    /// SIGKILL: no shutdown, no flush beyond what was acknowledged.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut c) = self.node(id).child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGTERM (kill(1): the workspace forbids `unsafe`), then waits up to `within` for the
    /// node to exit. Returns its exit status, or None if it is still running (then it is
    /// SIGKILLed, so the test fails without leaving it behind).
    pub async fn terminate(&mut self, id: u64, within: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.node(id).child.take()?;
        let sent = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().expect("run kill(1)");
        assert!(sent.success(), "kill -TERM {} failed", child.id());
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

    pub fn restart(&mut self, id: u64) {
        self.kill(id);
        self.spawn(id);
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.nodes.iter().find(|n| n.id == id).unwrap().child.is_some()
    }

    /// The id of the node that serves as leader, polling until one answers.
    pub async fn wait_for_leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            for n in self.nodes.iter().filter(|n| n.child.is_some()) {
                if is_leader(&n.addr, self.probe_key.as_deref(), self.probe_tls.as_ref()).await {
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

    pub fn dump_logs(&self) {
        for n in &self.nodes {
            let text = std::fs::read_to_string(&n.log).unwrap_or_default();
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
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

pub async fn raw_client(addr: &str) -> LockServiceClient<Channel> {
    let ch = Channel::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
    LockServiceClient::new(ch)
}

/// A raw client of a TLS client port.
pub fn raw_tls_client(addr: &str, tls: &tonic::transport::ClientTlsConfig) -> LockServiceClient<Channel> {
    let ch = Channel::from_shared(format!("https://{addr}")).unwrap().tls_config(tls.clone()).unwrap().connect_lazy();
    LockServiceClient::new(ch)
}

/// A leader answers a heartbeat for an unknown transaction with NOT_FOUND; candidates
/// answer UNAVAILABLE, and followers relay the leader's answer marked `x-dls-forwarded-to`.
async fn is_leader(addr: &str, key: Option<&str>, tls: Option<&tonic::transport::ClientTlsConfig>) -> bool {
    let mut c = match tls {
        Some(tls) => raw_tls_client(addr, tls),
        None => raw_client(addr).await,
    };
    let mut req = tonic::Request::new(HeartbeatRequest { transaction_id: u64::MAX, ..Default::default() });
    if let Some(k) = key {
        req.metadata_mut().insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    req.set_timeout(Duration::from_millis(500));
    matches!(c.heartbeat(req).await, Err(s) if s.code() == tonic::Code::NotFound && !s.metadata().contains_key("x-dls-forwarded-to"))
}

/// A plain HTTP/1.0 GET (the server closes the connection after answering): status and body.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_call(addr, &format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"))
}

/// A plain HTTP/1.0 POST of a JSON body, with an optional bearer key: status and body.
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

/// Polls `check` every 50 ms until it returns Some, or fails after `within` saying `what`.
pub async fn eventually<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Takes `ns/key` exclusively; the lock must be free.
pub async fn take(tx: &Transaction, key: &str) -> Lock {
    tx.acquire_lock("ns", key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(1_000)).await.unwrap()
}

/// Starts an exclusive acquire of `ns/key` in the background and returns once the server
/// has queued it (so it is an edge of the wait-for graph).
pub async fn queued(tx: &Transaction, key: &'static str) -> tokio::task::JoinHandle<Result<Lock, Error>> {
    let (seen, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let tx = tx.clone();
    let wait = tokio::spawn(async move {
        let opts = AcquireOptions::default().with_timeout_ms(60_000);
        tx.acquire_lock_with_progress("ns", key, LockMode::Exclusive, opts, move |_| {
            let _ = seen.send(());
        })
        .await
    });
    match tokio::time::timeout(PATIENCE, queued.recv()).await {
        Ok(Some(())) => wait,
        Ok(None) => panic!("the acquire of ns/{key} ended without queueing: {:?}", wait.await.unwrap()),
        Err(_) => panic!("the acquire of ns/{key} was not queued within {PATIENCE:?}"),
    }
}

/// After a restart: `holder` is still active and holds exactly `held`, another transaction
/// cannot take `ns/kept`, and the next grant's token is above `held`'s (the counter
/// survived). Commits both.
pub async fn assert_kept_across_restart(c: &DlsClient, holder: &Transaction, held: &Lock) {
    let st = holder.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert_eq!(st.locks, vec![held.clone()]);
    let other = c.begin_transaction(opts(10_000)).await.unwrap();
    let err = other.acquire_lock("ns", "kept", LockMode::Exclusive, wait(200)).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "the lock must still be held: {err:?}");
    let next = other.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(next.fencing_token > held.fencing_token, "the counter must survive the restart");
    holder.commit().await.unwrap();
    other.commit().await.unwrap();
}

/// Runs `dls` with these arguments and returns its stdout; panics with its stderr on failure.
pub fn dls(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dls")).args(args).output().expect("run dls");
    assert!(out.status.success(), "dls {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A cluster CA, certificates for nodes 1..=n (hosts 127.0.0.1 and localhost) and a client
/// certificate `client-app`, made by `dls certs` in `dir`.
pub fn make_certs(dir: &std::path::Path, nodes: u64) {
    let d = dir.to_str().unwrap();
    dls(&["certs", "init", "--dir", d]);
    for id in 1..=nodes {
        dls(&["certs", "node", &id.to_string(), "--host", "127.0.0.1", "--host", "localhost", "--dir", d]);
    }
    dls(&["certs", "client", "app", "--dir", d]);
}

/// Client TLS trusting `dir/ca.pem`, presenting `dir/<identity>.pem` when given.
pub fn client_tls(dir: &std::path::Path, identity: Option<&str>) -> tonic::transport::ClientTlsConfig {
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(read("ca.pem")));
    match identity {
        Some(id) => tls
            .identity(tonic::transport::Identity::from_pem(read(&format!("{id}.pem")), read(&format!("{id}-key.pem")))),
        None => tls,
    }
}

/// The flags of a cluster whose client and HTTP ports run TLS with the node certificates
/// in `dir` (`{id}` is the node), and whose peers use mutual TLS.
pub fn tls_flags(dir: &std::path::Path) -> Vec<String> {
    let d = dir.display();
    [
        format!("--tls-cert={d}/node-{{id}}.pem"),
        format!("--tls-key={d}/node-{{id}}-key.pem"),
        format!("--peer-tls-cert={d}/node-{{id}}.pem"),
        format!("--peer-tls-key={d}/node-{{id}}-key.pem"),
        format!("--peer-tls-ca={d}/ca.pem"),
    ]
    .into()
}

/// Sends a signal to a node (kill(1): the workspace forbids `unsafe`).
pub fn signal(cluster: &Cluster, id: u64, sig: &str) {
    let pid = cluster.nodes.iter().find(|n| n.id == id).and_then(|n| n.child.as_ref()).expect("running node").id();
    let ok = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap().success();
    assert!(ok, "kill -{sig} {pid} failed");
}

/// Everything node `id` logged so far.
pub fn log_of(cluster: &Cluster, id: u64) -> String {
    let n = cluster.nodes.iter().find(|n| n.id == id).unwrap();
    std::fs::read_to_string(&n.log).unwrap_or_default()
}

/// `dls keys add`: appends a key to `file` (limited to `namespaces` when not empty) and
/// returns the key.
pub fn add_key(file: &std::path::Path, name: &str, namespaces: &[&str], admin: bool) -> String {
    let mut args = vec!["keys", "add", "--file", file.to_str().unwrap(), "--name", name];
    if admin {
        args.push("--admin");
    }
    for ns in namespaces {
        args.extend(["--namespace", ns]);
    }
    dls(&args).trim().to_string()
}

impl Cluster {
    /// Waits up to `within` for node `id`'s process to exit by itself and returns its exit
    /// status; None if it still runs (it is left running).
    pub async fn wait_exit(&mut self, id: u64, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let node = self.node(id);
            let status = node.child.as_mut()?.try_wait().unwrap();
            if let Some(status) = status {
                node.child = None;
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

// ---- membership and bootstrap ----

impl Cluster {
    /// SIGKILLs node `id` and deletes its whole data directory (a wiped or replaced disk).
    pub fn kill_and_wipe_data_dir(&mut self, id: u64) {
        self.kill(id);
        let dir = self.node(id).data_dir.clone();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Starts node `id` again with the flags it had (after a wipe: the same flags, empty data).
    pub fn start_again(&mut self, id: u64) {
        assert!(!self.is_running(id), "node {id} is running");
        self.spawn(id);
    }

    /// Starts node `id` with an empty data directory and --join (after `dls members add`, or
    /// before it: it waits to be replicated to).
    pub fn start_joining(&mut self, id: u64) {
        self.kill(id);
        let n = self.node(id);
        let _ = std::fs::remove_dir_all(&n.data_dir);
        n.join = true;
        self.spawn(id);
    }

    /// A new node `id` on fresh ports, started with --join; --peers of every later start
    /// lists it too. Returns its `HOST:PORT/PEER_PORT` for `members add`.
    pub fn spawn_joining_node(&mut self, id: u64) -> String {
        assert!(self.nodes.iter().all(|n| n.id != id), "node {id} exists");
        let p = free_ports(3);
        let base = self.nodes[0].data_dir.parent().unwrap().to_path_buf();
        let node = NodeProc {
            id,
            addr: format!("127.0.0.1:{}", p[0]),
            peer_addr: format!("127.0.0.1:{}", p[1]),
            http_addr: format!("127.0.0.1:{}", p[2]),
            data_dir: base.join(format!("node-{id}")),
            log: base.join(format!("node-{id}.log")),
            child: None,
            join: true,
        };
        let spec = format!("{}/{}", node.addr, node.peer_addr);
        self.peers.push_str(&format!(",{id}={spec}"));
        self.nodes.push(node);
        self.spawn(id);
        spec
    }

    /// Whether node `id`'s process was started and has exited since.
    pub fn has_exited(&mut self, id: u64) -> bool {
        self.node(id).child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some())
    }

    /// Waits until node `id`'s process has exited and returns its exit status.
    pub async fn wait_for_exit(&mut self, id: u64, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            let child = self.node(id).child.as_mut().expect("running node");
            if let Some(status) = child.try_wait().unwrap() {
                self.node(id).child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "node {id} still runs after {within:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One grant a workload client saw, and whether its transaction committed.
#[derive(Clone, Debug)]
pub struct GrantRecord {
    pub key: String,
    pub token: u64,
    pub txn: u64,
    pub granted_at: Instant,
    /// When the commit was sent; None if the transaction did not commit (lost, or the
    /// answer did not come).
    pub released_at: Option<Instant>,
}

/// Several clients taking the same few keys exclusively, over and over, recording every
/// grant; errors during elections and membership changes are expected and skipped.
pub struct ContendedWorkload {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    history: std::sync::Arc<std::sync::Mutex<Vec<GrantRecord>>>,
}

impl ContendedWorkload {
    pub fn start(client: &DlsClient, workers: usize, keys: &[&str]) -> ContendedWorkload {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let history = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let tasks = (0..workers)
            .map(|w| {
                let (client, stopped, history, keys) = (client.clone(), stopped.clone(), history.clone(), keys.clone());
                tokio::spawn(async move {
                    let mut round = w;
                    while !*stopped.borrow() {
                        round += 1;
                        let key = &keys[round % keys.len()];
                        let Ok(tx) = client.begin_transaction(opts(3_000)).await else { continue };
                        match tx.acquire_lock("contended", key, LockMode::Exclusive, wait(2_000)).await {
                            Ok(lock) => {
                                let granted_at = Instant::now();
                                tokio::time::sleep(Duration::from_millis(3)).await;
                                let sent = Instant::now();
                                let committed = tx.commit().await.is_ok();
                                history.lock().unwrap().push(GrantRecord {
                                    key: key.clone(),
                                    token: lock.fencing_token,
                                    txn: tx.id(),
                                    granted_at,
                                    released_at: committed.then_some(sent),
                                });
                            }
                            Err(_) => {
                                let _ = tx.abort().await;
                            }
                        }
                    }
                })
            })
            .collect();
        ContendedWorkload { stop, tasks, history }
    }

    /// Grants recorded so far.
    pub fn grants(&self) -> usize {
        self.history.lock().unwrap().len()
    }

    /// Stops the clients and returns every grant they saw.
    pub async fn stop(self) -> Vec<GrantRecord> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.await.unwrap();
        }
        std::sync::Arc::try_unwrap(self.history).unwrap().into_inner().unwrap()
    }

    /// Stops the workload and checks its history: mutual exclusion, rising tokens, every
    /// acknowledged grant still known to `client`'s cluster. Returns the grants.
    pub async fn stop_and_check(self, client: &DlsClient) -> Vec<GrantRecord> {
        let history = self.stop().await;
        assert_no_two_holders_and_rising_tokens(&history);
        assert_acknowledged_grants_kept(client, &history).await;
        history
    }
}

/// Mutual exclusion and fencing over a workload's history: per key, tokens strictly rise in
/// the order the grants arrived, and no grant arrived while a committed holder of the same
/// key still held it (between its grant and its commit).
pub fn assert_no_two_holders_and_rising_tokens(history: &[GrantRecord]) {
    let mut by_key: std::collections::BTreeMap<&str, Vec<&GrantRecord>> = Default::default();
    for g in history {
        by_key.entry(&g.key).or_default().push(g);
    }
    for (key, mut grants) in by_key {
        grants.sort_by_key(|g| g.granted_at);
        for pair in grants.windows(2) {
            assert!(pair[1].token > pair[0].token, "{key}: token {} after {}", pair[1].token, pair[0].token);
            if let Some(released) = pair[0].released_at {
                assert!(
                    pair[1].granted_at >= released,
                    "{key}: txn {} was granted (token {}) while txn {} still held it (token {})",
                    pair[1].txn,
                    pair[1].token,
                    pair[0].txn,
                    pair[0].token
                );
            }
        }
    }
}

/// Every acknowledged grant survived: each committed transaction is still known as
/// COMMITTED, and the cluster's token counter is at least the highest token handed out.
pub async fn assert_acknowledged_grants_kept(client: &DlsClient, history: &[GrantRecord]) {
    for g in history.iter().filter(|g| g.released_at.is_some()) {
        let st = client.transaction_status(g.txn).await.unwrap();
        assert_eq!(st.state, TransactionState::Committed, "txn {} (token {})", g.txn, g.token);
    }
    let highest = history.iter().map(|g| g.token).max().unwrap_or(0);
    let status = client.cluster_status().await.unwrap();
    assert!(status.last_fencing_token >= highest, "token counter {} < {highest}", status.last_fencing_token);
}

/// A client of the whole cluster without an API key, patient through elections.
pub async fn patient_client(endpoints: Vec<String>) -> DlsClient {
    let config = caerus_core::ClientConfig::new(endpoints).without_api_key().with_retry_deadline(PATIENCE);
    DlsClient::connect(config).await.unwrap()
}

/// A grant on a fresh key arrives (the cluster serves).
pub async fn assert_next_grant(client: &DlsClient) {
    let tx = client.begin_transaction(opts(5_000)).await.unwrap();
    let key = format!("next-{}", uuid::Uuid::new_v4().simple());
    tx.acquire_lock("ns", &key, LockMode::Exclusive, wait(10_000)).await.unwrap();
    tx.commit().await.unwrap();
}

/// Polls the async `check` every 50 ms until it returns Some, or fails after `within`
/// saying `what`.
pub async fn eventually_async<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Grants `n` locks `ns/<prefix><i>`, one transaction each (committed), checking that every
/// token is above the one before and above `above`; returns the highest.
pub async fn grant_many(c: &DlsClient, prefix: &str, n: usize, above: u64) -> u64 {
    let mut last = above;
    for i in 0..n {
        let t = c.begin_transaction(opts(10_000)).await.unwrap();
        let l = t.acquire_lock("ns", &format!("{prefix}{i}"), LockMode::Exclusive, wait(2000)).await.unwrap();
        assert!(l.fencing_token > last, "token {} after {last}", l.fencing_token);
        last = l.fencing_token;
        t.commit().await.unwrap();
    }
    last
}

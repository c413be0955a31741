//! Secure by default: a port reachable beyond loopback needs API keys and TLS (or peers
//! need mutual TLS) unless `--insecure` says so, and peers always need credentials.
//! SIGHUP reloads the API keys file and the certificates without a restart.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, Error};
use caerus_proto::v1::HeartbeatRequest;
use common::{opts, Cluster, Spec, PATIENCE};
use tonic::Code;

/// Starts `dls serve` with `args` in a fresh data dir and returns (exit status or None if it
/// still runs after `within`, everything it printed). A server still running is stopped.
fn serve(args: &[&str], env: &[(&str, &str)], within: Duration) -> (Option<std::process::ExitStatus>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(caerus_testkit::dls_bin())
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .envs(env.iter().copied())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if Instant::now() > deadline || text.contains("dls serving") {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(&log).unwrap())
}

fn addr() -> String {
    format!("127.0.0.1:{}", common::free_port())
}

#[test]
fn an_exposed_client_or_http_port_without_keys_and_tls_refuses_to_start_unless_insecure() {
    let everywhere = format!("0.0.0.0:{}", common::free_port());
    let (status, out) = serve(&["--listen", &everywhere, "--http-listen", &addr()], &[], PATIENCE);
    assert!(status.is_some_and(|s| !s.success()), "started on 0.0.0.0 without keys or TLS:\n{out}");
    for hint in ["--api-keys-file", "--tls-cert", "--insecure", "client port"] {
        assert!(out.contains(hint), "the refusal must mention {hint}:\n{out}");
    }

    let http_everywhere = format!("0.0.0.0:{}", common::free_port());
    let (status, out) = serve(&["--listen", &addr(), "--http-listen", &http_everywhere], &[], PATIENCE);
    assert!(status.is_some_and(|s| !s.success()) && out.contains("HTTP port"), "{out}");

    let everywhere = format!("0.0.0.0:{}", common::free_port());
    let (status, out) = serve(&["--listen", &everywhere, "--http-listen", &addr(), "--insecure"], &[], PATIENCE);
    assert!(status.is_none(), "--insecure must start:\n{out}");
    assert!(out.contains("INSECURE") && out.contains("dls serving"), "with a loud warning:\n{out}");

    // Loopback stays as simple as `make run`.
    let (status, out) = serve(&["--listen", &addr(), "--http-listen", &addr()], &[], PATIENCE);
    assert!(status.is_none() && !out.contains("INSECURE"), "{out}");
}

#[test]
fn peers_always_need_credentials_and_beyond_loopback_mutual_tls() {
    let (client, peer) = (common::free_port(), common::free_port());
    let peers = format!("1=127.0.0.1:{client}/{peer},2=127.0.0.1:{}/{}", common::free_port(), common::free_port());
    let base = ["--node-id", "1", "--peers", &peers, "--http-listen", &addr()];

    let (status, out) = serve(&base, &[], PATIENCE);
    assert!(status.is_some_and(|s| !s.success()), "started peers without credentials:\n{out}");
    assert!(out.contains("--peer-tls-cert") && out.contains("--cluster-secret-file"), "{out}");
    // Even --insecure does not open the raft transport to anyone.
    let insecure: Vec<&str> = base.iter().copied().chain(["--insecure"]).collect();
    let (status, _) = serve(&insecure, &[], PATIENCE);
    assert!(status.is_some_and(|s| !s.success()));

    let (status, out) = serve(&base, &[("DLS_CLUSTER_SECRET", "short")], PATIENCE);
    assert!(status.is_some_and(|s| !s.success()) && out.contains("at least 16"), "{out}");

    // A secret travels in clear: on a non-loopback peer port it needs --insecure.
    let exposed = format!("0.0.0.0:{}", common::free_port());
    let wide: Vec<&str> = base.iter().copied().chain(["--peer-listen", &exposed]).collect();
    let secret = [("DLS_CLUSTER_SECRET", "a-long-enough-cluster-secret")];
    let (status, out) = serve(&wide, &secret, PATIENCE);
    assert!(status.is_some_and(|s| !s.success()) && out.contains("peer port"), "{out}");
}

fn add_key(file: &Path, name: &str) -> String {
    common::add_key(file, name, &[], false)
}

async fn begin_with(cluster: &Cluster, key: &str) -> Result<(), Error> {
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(key)).await?;
    client.begin_transaction(opts(5_000)).await?.commit().await
}

#[tokio::test]
async fn sighup_reloads_the_keys_file_and_keeps_the_old_keys_when_the_new_file_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let old = add_key(&file, "old");
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(old.clone())).await;
    begin_with(&cluster, &old).await.unwrap();

    // Rotate: a new file with only a new key, then SIGHUP.
    let next = dir.path().join("next.toml");
    let new = add_key(&next, "new");
    std::fs::rename(&next, &file).unwrap();
    cluster.signal(1, "HUP");
    common::eventually(PATIENCE, "the reload", || cluster.log_of(1).contains("API keys reloaded").then_some(())).await;
    let err = begin_with(&cluster, &old).await.unwrap_err();
    assert!(matches!(err, Error::Unauthenticated { .. }), "a revoked key must be refused: {err:?}");
    begin_with(&cluster, &new).await.unwrap();

    // A broken file is reported and changes nothing.
    std::fs::write(&file, "[[keys]]\nname = \"x\"\nsha256 = \"not hex\"\n").unwrap();
    cluster.signal(1, "HUP");
    common::eventually(PATIENCE, "the failed reload to be logged", || {
        cluster.log_of(1).contains("API keys not reloaded").then_some(())
    })
    .await;
    begin_with(&cluster, &new).await.unwrap();
}

/// Whether a fresh TLS connection trusting `ca_dir`'s CA reaches node 1's client port: the
/// server itself answers (NOT_FOUND from a leader, NOT_LEADER from a follower, both with
/// an `x-dls-error` kind), rather than the handshake failing.
async fn connects(cluster: &Cluster, ca_dir: &Path) -> bool {
    let mut c = common::raw_tls_client(&cluster.addr(1), &common::client_tls(ca_dir, None));
    let mut req = tonic::Request::new(HeartbeatRequest { transaction_id: u64::MAX, ..Default::default() });
    req.set_timeout(Duration::from_secs(5));
    matches!(c.heartbeat(req).await, Err(s) if s.code() == Code::NotFound || s.metadata().get("x-dls-error").is_some())
}

#[tokio::test]
async fn sighup_reloads_certificates_and_peers_keep_talking() {
    let first = tempfile::tempdir().unwrap();
    common::make_certs(first.path(), 3);
    // The client ports read their certificates from files of their own, replaced in place;
    // the peer ports use the first CA's node certificates throughout.
    let live = tempfile::tempdir().unwrap();
    for id in 1..=3 {
        for (from, to) in [("node-{id}.pem", "port-{id}.pem"), ("node-{id}-key.pem", "port-{id}-key.pem")] {
            let (from, to) = (from.replace("{id}", &id.to_string()), to.replace("{id}", &id.to_string()));
            std::fs::copy(first.path().join(from), live.path().join(to)).unwrap();
        }
    }
    let (l, f) = (live.path().display(), first.path().display());
    let extra = vec![
        format!("--tls-cert={l}/port-{{id}}.pem"),
        format!("--tls-key={l}/port-{{id}}-key.pem"),
        format!("--peer-tls-cert={f}/node-{{id}}.pem"),
        format!("--peer-tls-key={f}/node-{{id}}-key.pem"),
        format!("--peer-tls-ca={f}/ca.pem"),
    ];
    let probe = common::client_tls(first.path(), None);
    let spec = Spec { nodes: 3, extra, probe_tls: Some(probe), no_secret: true, ..Spec::default() };
    let cluster = Cluster::start_spec(spec).await;
    assert!(connects(&cluster, first.path()).await);

    // Node 1's client port gets a certificate of another CA.
    let second = tempfile::tempdir().unwrap();
    common::make_certs(second.path(), 1);
    std::fs::copy(second.path().join("node-1.pem"), live.path().join("port-1.pem")).unwrap();
    std::fs::copy(second.path().join("node-1-key.pem"), live.path().join("port-1-key.pem")).unwrap();
    for id in 1..=3 {
        cluster.signal(id, "HUP");
    }
    common::eventually(PATIENCE, "every node to reload its certificates", || {
        (1..=3).all(|id| cluster.log_of(id).contains("client port TLS reloaded")).then_some(())
    })
    .await;
    assert!(connects(&cluster, second.path()).await, "new connections get the new certificate");
    assert!(!connects(&cluster, first.path()).await, "the old CA no longer verifies node 1");

    // The peers reconnected with their reloaded certificates and still replicate: a client
    // trusting both CAs takes a lock through any node.
    let bundle = live.path().join("both-cas.pem");
    let cas = [first.path(), second.path()].map(|d| std::fs::read_to_string(d.join("ca.pem")).unwrap()).concat();
    std::fs::write(&bundle, cas).unwrap();
    let config = ClientConfig::new(cluster.endpoints()).without_api_key().with_ca_file(&bundle);
    let client = DlsClient::connect(config).await.unwrap();
    let tx = client.begin_transaction(opts(5_000)).await.unwrap();
    tx.acquire_lock("ns", "after-reload", caerus_core::LockMode::Exclusive, common::wait(5_000)).await.unwrap();
    tx.commit().await.unwrap();
}

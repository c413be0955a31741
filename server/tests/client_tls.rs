//! TLS for clients, through `caerus_core::DlsClient` against real TLS nodes whose
//! certificates `dls certs` makes at test time: https with the cluster CA works, plain
//! text and a foreign CA do not, client certificates when the node requires them, the
//! `DLS_CA_FILE` environment route, the HTTP port over https, and leader redirects that
//! stay on https.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Error, LockMode, CA_FILE_ENV, CLIENT_CERT_FILE_ENV, CLIENT_KEY_FILE_ENV};
use common::{opts, wait, Cluster, Spec, PATIENCE};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client of `endpoints` with exactly these TLS files, whatever the environment says.
fn config(endpoints: Vec<String>, ca: Option<PathBuf>, cert: Option<(PathBuf, PathBuf)>) -> ClientConfig {
    ClientConfig { ca_file: ca, client_cert: cert, ..ClientConfig::new(endpoints).without_api_key() }
        .with_retry_deadline(Duration::from_secs(3))
        .with_request_timeout(Duration::from_secs(2))
}

fn identity(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    Some((dir.join(format!("{name}.pem")), dir.join(format!("{name}-key.pem"))))
}

/// Begins a transaction, takes a lock, commits; returns the fencing token.
async fn take_a_lock(config: ClientConfig) -> Result<u64, Error> {
    let client = DlsClient::connect(config).await?;
    let tx = client.begin_transaction(opts(5_000)).await?;
    let lock = tx.acquire_lock("tls", "k", LockMode::Exclusive, wait(2_000)).await?;
    tx.commit().await?;
    Ok(lock.fencing_token)
}

/// A single TLS node; `client_ca` makes it require client certificates.
async fn tls_node(certs: &Path, client_ca: bool) -> Cluster {
    let d = certs.display();
    let mut extra = vec![format!("--tls-cert={d}/node-1.pem"), format!("--tls-key={d}/node-1-key.pem")];
    if client_ca {
        extra.push(format!("--tls-client-ca={d}/ca.pem"));
    }
    let probe = common::client_tls(certs, client_ca.then_some("client-app"));
    Cluster::start_spec(Spec { nodes: 1, extra, probe_tls: Some(probe), ..Spec::default() }).await
}

/// GET `path` on a TLS HTTP port with rustls: the status code, or the handshake/IO error.
async fn https_get(addr: &str, path: &str, ca: &Path, cert: Option<(PathBuf, PathBuf)>) -> std::io::Result<u16> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cert {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect(),
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let host = ServerName::try_from(addr.rsplit_once(':').unwrap().0.to_string()).unwrap();
    let mut tls = connector.connect(host, tcp).await?;
    tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    tls.read_to_end(&mut raw).await?;
    let head = String::from_utf8_lossy(&raw);
    Ok(head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0))
}

#[tokio::test]
async fn https_with_the_cluster_ca_works_and_plain_text_or_another_ca_does_not() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 1);
    let other = tempfile::tempdir().unwrap();
    common::make_certs(other.path(), 1);
    let cluster = tls_node(certs.path(), false).await;
    let addr = cluster.addr(1);
    let ca = certs.path().join("ca.pem");

    let first = take_a_lock(config(vec![format!("https://{addr}")], Some(ca.clone()), None)).await.unwrap();
    // A bare host:port means https once a CA file is given.
    let second = take_a_lock(config(vec![addr.clone()], Some(ca.clone()), None)).await.unwrap();
    assert!(second > first);

    // Plain text to the TLS port: nothing is served.
    let err = take_a_lock(config(vec![format!("http://{addr}")], None, None)).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("use https://HOST:PORT"), "{err}");

    // A CA that did not sign the node's certificate: refused, and the error says why.
    let err = take_a_lock(config(vec![addr.clone()], Some(other.path().join("ca.pem")), None)).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("invalid peer certificate"), "the transport's words: {text}");
    assert!(text.contains("not signed by a CA this client trusts") && text.contains("DLS_CA_FILE"), "{text}");

    // https without a CA file checks against the public web roots, which do not know ours.
    let err = take_a_lock(config(vec![format!("https://{addr}")], None, None)).await.unwrap_err();
    assert!(err.to_string().contains("invalid peer certificate: UnknownIssuer"), "{err}");

    // A CA file that is not there is a configuration error naming the file, before any call.
    let missing = certs.path().join("no-such-ca.pem");
    let err = DlsClient::connect(config(vec![addr.clone()], Some(missing), None)).await.unwrap_err();
    assert!(matches!(err, Error::Config { .. }) && err.to_string().contains("no-such-ca.pem"), "{err:?}");

    // The HTTP port serves TLS with the same certificate.
    let http = cluster.http_addr(1);
    assert_eq!(https_get(&http, "/healthz", &ca, None).await.unwrap(), 200);
    assert!(https_get(&http, "/healthz", &other.path().join("ca.pem"), None).await.is_err(), "a foreign CA");
    let plain = common::http_get(&http, "/healthz");
    assert!(!matches!(plain, Ok((200, _))), "plain HTTP on the TLS port: {plain:?}");
}

#[tokio::test]
async fn with_tls_client_ca_a_client_certificate_of_that_ca_is_required() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 1);
    let other = tempfile::tempdir().unwrap();
    common::make_certs(other.path(), 1);
    let cluster = tls_node(certs.path(), true).await;
    let addr = cluster.addr(1);
    let ca = || Some(certs.path().join("ca.pem"));

    take_a_lock(config(vec![addr.clone()], ca(), identity(certs.path(), "client-app"))).await.unwrap();
    let err = take_a_lock(config(vec![addr.clone()], ca(), None)).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "no client certificate: {err:?}");
    assert!(err.to_string().contains("DLS_CLIENT_CERT_FILE"), "the error says what to give: {err}");
    let err = take_a_lock(config(vec![addr.clone()], ca(), identity(other.path(), "client-app"))).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "a client certificate of another CA: {err:?}");
    assert!(err.to_string().contains("signed by that CA"), "{err}");

    // The HTTP port asks for the certificate too.
    let http = cluster.http_addr(1);
    let ca_file = certs.path().join("ca.pem");
    assert_eq!(https_get(&http, "/healthz", &ca_file, identity(certs.path(), "client-app")).await.unwrap(), 200);
    assert!(https_get(&http, "/healthz", &ca_file, None).await.is_err(), "no client certificate on the HTTP port");
}

/// `ClientConfig::new` reads `DLS_CA_FILE` and friends. They are set for a child process
/// of this test binary: set here, they would reach every test running beside this one.
#[tokio::test]
async fn tls_files_from_the_environment() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 1);
    let cluster = tls_node(certs.path(), true).await;
    let child = "client_tls::a_lock_with_tls_files_from_the_environment";
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([child, "--exact", "--ignored", "--nocapture"])
        .env(ENDPOINT_FOR_CHILD, cluster.addr(1))
        .env(CA_FILE_ENV, certs.path().join("ca.pem"))
        .env(CLIENT_CERT_FILE_ENV, certs.path().join("client-app.pem"))
        .env(CLIENT_KEY_FILE_ENV, certs.path().join("client-app-key.pem"))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("1 passed"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
}

/// Where `tls_files_from_the_environment` tells its child process to take a lock.
const ENDPOINT_FOR_CHILD: &str = "DLS_TEST_TLS_ENDPOINT";

#[tokio::test]
#[ignore = "the child process of tls_files_from_the_environment, which sets the variables"]
async fn a_lock_with_tls_files_from_the_environment() {
    let endpoint = std::env::var(ENDPOINT_FOR_CHILD).expect("run by tls_files_from_the_environment");
    let from_env = ClientConfig::new([endpoint]).without_api_key();
    let ca = std::env::var_os(CA_FILE_ENV).map(PathBuf::from);
    assert!(ca.is_some() && from_env.ca_file == ca, "{:?}", from_env.ca_file);
    take_a_lock(from_env.with_retry_deadline(Duration::from_secs(3))).await.unwrap();
}

#[tokio::test]
async fn a_client_given_only_a_follower_is_redirected_to_the_leader_over_https() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 3);
    let probe = common::client_tls(certs.path(), None);
    let spec = Spec {
        nodes: 3,
        extra: common::tls_flags(certs.path()),
        probe_tls: Some(probe),
        no_secret: true,
        ..Spec::default()
    };
    let cluster = Cluster::start_spec(spec).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = (1..=3).find(|&n| n != leader).unwrap();
    let client = DlsClient::connect(
        config(vec![cluster.addr(follower)], Some(certs.path().join("ca.pem")), None)
            .with_retry_deadline(Duration::from_secs(15)),
    )
    .await
    .unwrap();
    let tx = client.begin_transaction(opts(5_000)).await.unwrap();
    tx.acquire_lock("tls", "k", LockMode::Exclusive, wait(2_000)).await.unwrap();
    tx.commit().await.unwrap();
    // The follower relayed the leader's answer naming it with a bare host:port; the client
    // went there over https (plain text would not have been served) and now asks it first.
    let status = client.cluster_status().await.unwrap();
    assert_eq!(status.node_id, leader, "the client learned the leader");
}

/// Runs the built `dls` with `args` and exactly the TLS environment given (none of this
/// process's, which another test here changes): exit code, stdout, stderr.
fn cli(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(caerus_testkit::dls_bin());
    cmd.args(args).env("DLS_LOG", "warn");
    for name in ["DLS_ENDPOINTS", "CAERUS_API_KEY", CA_FILE_ENV, CLIENT_CERT_FILE_ENV, CLIENT_KEY_FILE_ENV] {
        cmd.env_remove(name);
    }
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd.output().expect("run dls");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[tokio::test]
async fn the_dls_cli_takes_cacert_cert_and_key() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 1);
    let cluster = tls_node(certs.path(), true).await;
    let file = |name: &str| certs.path().join(name);
    let (ca, cert, key) = (file("ca.pem"), file("client-app.pem"), file("client-app-key.pem"));
    let client =
        DlsClient::connect(config(vec![cluster.addr(1)], Some(ca.clone()), identity(certs.path(), "client-app")))
            .await
            .unwrap();
    let tx = client.begin_transaction(opts(30_000)).await.unwrap();
    tx.acquire_lock("tls-cli", "held", LockMode::Exclusive, wait(2_000)).await.unwrap();

    let endpoints = ["--endpoints", &cluster.addr(1), "--timeout", "2"];
    let flags = ["--cacert", ca.to_str().unwrap(), "--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()];
    let (code, out, err) = cli(&[&["status"][..], &endpoints, &flags].concat(), &[]);
    assert_eq!(code, 0, "dls status with --cacert/--cert/--key: {err}");
    assert!(out.contains("Leader") && out.contains("1 of 1 nodes answered"), "{out}");
    let (code, out, err) = cli(&[&["locks"][..], &endpoints, &flags].concat(), &[]);
    assert_eq!(code, 0, "dls locks: {err}");
    assert!(out.contains("tls-cli") && out.contains("held"), "{out}");

    // The same through the environment.
    let env =
        [(CA_FILE_ENV, ca.as_path()), (CLIENT_CERT_FILE_ENV, cert.as_path()), (CLIENT_KEY_FILE_ENV, key.as_path())];
    let (code, out, err) = cli(&[&["locks"][..], &endpoints].concat(), &env);
    assert_eq!(code, 0, "dls locks with DLS_CA_FILE etc.: {err}");
    assert!(out.contains("held"), "{out}");

    // Without them: refused, and told which flags to give.
    let (code, _, err) = cli(&[&["status"][..], &endpoints].concat(), &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--cacert"), "{err}");
    let (code, _, err) = cli(&[&["locks"][..], &endpoints, &flags[..2]].concat(), &[]);
    assert_eq!(code, 1, "no client certificate: {err}");
    assert!(err.contains("client certificates") && err.contains("--cert"), "{err}");
    // A certificate without its key is a usage error.
    let (code, _, err) = cli(&[&["locks"][..], &endpoints, &flags[..4]].concat(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key"), "{err}");
    tx.commit().await.unwrap();
}

//! The `dls` binary and its operator commands: certificates, API keys.

use std::path::{Path, PathBuf};
use std::process::Command;

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// The `dls` binary: `DLS_BIN_UNDER_TEST` when set (to run a suite against another build,
/// e.g. an older release), else the one cargo built next to the running test
/// (`target/<profile>/dls`; test executables live in `target/<profile>/deps/`), else `DLS_BIN`.
pub fn dls_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("DLS_BIN_UNDER_TEST") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the running executable");
    let mut dir = exe.parent().expect("its directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("the profile directory");
    }
    let built = dir.join("dls");
    if built.is_file() {
        return built;
    }
    match std::env::var_os("DLS_BIN") {
        Some(bin) => bin.into(),
        None => panic!("no dls binary at {} (build it, or set DLS_BIN)", built.display()),
    }
}

/// Runs `dls` with these arguments and returns its stdout; panics with its stderr on failure.
pub fn dls(args: &[&str]) -> String {
    let out = Command::new(dls_bin()).args(args).output().expect("run dls");
    assert!(out.status.success(), "dls {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A cluster CA, certificates for nodes 1..=n (hosts 127.0.0.1 and localhost) and a client
/// certificate `client-app`, made by `dls certs` in `dir`.
pub fn make_certs(dir: &Path, nodes: u64) {
    let d = dir.to_str().unwrap();
    dls(&["certs", "init", "--dir", d]);
    for id in 1..=nodes {
        dls(&["certs", "node", &id.to_string(), "--host", "127.0.0.1", "--host", "localhost", "--dir", d]);
    }
    dls(&["certs", "client", "app", "--dir", d]);
}

/// Client TLS trusting `dir/ca.pem`, presenting `dir/<identity>.pem` when given.
pub fn client_tls(dir: &Path, identity: Option<&str>) -> ClientTlsConfig {
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("ca.pem")));
    match identity {
        Some(id) => tls.identity(Identity::from_pem(read(&format!("{id}.pem")), read(&format!("{id}-key.pem")))),
        None => tls,
    }
}

/// The flags of a cluster whose client and HTTP ports run TLS with the node certificates
/// in `dir` (`{id}` is the node), and whose peers use mutual TLS.
pub fn tls_flags(dir: &Path) -> Vec<String> {
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

/// `dls keys add`: appends a key to `file` (limited to `namespaces` when not empty) and
/// returns the key.
pub fn add_key(file: &Path, name: &str, namespaces: &[&str], admin: bool) -> String {
    let mut args = vec!["keys", "add", "--file", file.to_str().unwrap(), "--name", name];
    if admin {
        args.push("--admin");
    }
    for ns in namespaces {
        args.extend(["--namespace", ns]);
    }
    dls(&args).trim().to_string()
}

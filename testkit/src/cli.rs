//! The `dls` binary and its operator commands: certificates, API keys.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// The `dls` binary: `DLS_BIN_UNDER_TEST` when set (to run a suite against another build,
/// e.g. an older release), else the one cargo builds next to the running test
/// (`target/<profile>/dls`; test executables live in `target/<profile>/deps/`), else `DLS_BIN`.
///
/// `dls` is the caerus-cli crate's binary, and `cargo test -p caerus-server` builds only
/// caerus-server's targets, so a test run by cargo first builds `dls` itself (see
/// [`build_dls`]): it never runs a stale or missing one.
pub fn dls_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("DLS_BIN_UNDER_TEST") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the running executable");
    let mut dir = exe.parent().expect("its directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("the profile directory");
        if let Some(cargo) = std::env::var_os("CARGO") {
            static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
            if let Err(e) = BUILT.get_or_init(|| build_dls(&cargo, dir)) {
                panic!("{e}");
            }
        }
    }
    let built = dir.join("dls");
    if built.is_file() {
        return built;
    }
    match std::env::var_os("DLS_BIN") {
        Some(bin) => bin.into(),
        None => panic!("no dls binary at {} (cargo build -p caerus-cli --bin dls, or set DLS_BIN)", built.display()),
    }
}

/// Builds `dls` into `profile_dir` (`<target dir>/<profile>`) with the cargo running the test,
/// once per test process: a no-op when it is current (under a second), else the small
/// caerus-cli crate and a link, as the test's own build left every library it needs built.
///
/// Why here rather than moving the integration tests into caerus-cli (where cargo builds the
/// binary first, `CARGO_BIN_EXE_dls`): that crate's build.rs stamps the commit, so every
/// commit would recompile and relink the 12k-line test binary too; measured (issue 42) that
/// was the cost the split removes. Cargo holds its build-directory lock only while it builds,
/// not while the tests run, so this nested build does not wait on the `cargo test` that
/// started it; it waits only for another concurrent build, as any cargo does.
fn build_dls(cargo: &std::ffi::OsStr, profile_dir: &Path) -> Result<(), String> {
    let profile = match profile_dir.file_name().and_then(|p| p.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => return Err(format!("no profile in {}", profile_dir.display())),
    };
    let target_dir = profile_dir.parent().ok_or_else(|| format!("no target dir above {}", profile_dir.display()))?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace above testkit/");
    let out = Command::new(cargo)
        .current_dir(workspace)
        .args(["build", "--quiet", "-p", "caerus-cli", "--bin", "dls", "--profile", profile, "--target-dir"])
        .arg(target_dir)
        .output()
        .map_err(|e| format!("cannot run {} to build dls: {e}", cargo.to_string_lossy()))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "building dls for the tests failed (cargo build -p caerus-cli --bin dls --profile {profile}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )),
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

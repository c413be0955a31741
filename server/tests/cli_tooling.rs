//! What operators get around the server: `--version` with the commit, shell completions,
//! the man page, JSON logs of a real `dls serve`, and the config file's place between the
//! environment and the defaults (`--print-config`), and `dls health` (the container image's
//! HEALTHCHECK).

use crate::common;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, TransactionOptions};
use common::{client_tls, dls, dls_bin, eventually, free_ports, make_certs, tls_flags, Cluster, Spec};

const SUBCOMMANDS: [&str; 8] = ["serve", "lock", "locks", "status", "members", "snapshot", "completions", "man"];

fn has(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status().unwrap().success()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let version = dls(&["--version"]);
    let commit = version
        .trim()
        .strip_prefix(&format!("dls {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version: {version:?}"));
    let in_git = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if in_git {
        assert!(commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit()), "not a commit hash: {commit:?}");
    } else {
        assert_eq!(commit, "unknown");
    }
}

#[test]
fn completions_know_every_command_and_bash_parses_them() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let script = dls(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "the {shell} completion does not mention {sub}");
        }
        assert!(script.contains("print-config"), "the {shell} completion lacks serve's flags");
        let path = dir.path().join(format!("dls.{shell}"));
        std::fs::write(&path, &script).unwrap();
        if has(shell) {
            run(Command::new(shell).arg("-n").arg(&path));
        } else {
            assert_ne!(shell, "bash", "bash is needed to check the bash completion");
        }
    }
    // Sourced, it registers a completion function for `dls`.
    let registered = run(Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p dls", dir.path().join("dls.bash").display())));
    assert!(String::from_utf8_lossy(&registered.stdout).contains("dls"));
}

/// `groff -k -ww -z` parses the page (UTF-8 through preconv, as man-db reads it) with every
/// warning on, and prints nothing when it is clean.
fn assert_valid_roff(page: &Path) {
    if has("groff") {
        let out = run(Command::new("groff").args(["-k", "-man", "-ww", "-z"]).arg(page));
        assert!(out.stderr.is_empty(), "groff warns on {}: {}", page.display(), String::from_utf8_lossy(&out.stderr));
    } else {
        let text = std::fs::read_to_string(page).unwrap();
        assert!(
            text.starts_with(".ie \\n(.g .ds Aq") || text.contains("\n.TH "),
            "no roff header in {}",
            page.display()
        );
    }
}

#[test]
fn the_man_pages_are_valid_roff_and_cover_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("stdout.1");
    std::fs::write(&page, dls(&["man"])).unwrap();
    assert_valid_roff(&page);
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains(".TH dls 1") && text.contains("dls\\-serve"), "{text}");

    let out = dir.path().join("man1");
    dls(&["man", "--dir", out.to_str().unwrap()]);
    for sub in SUBCOMMANDS {
        let page = out.join(format!("dls-{sub}.1"));
        assert!(page.is_file(), "no {}", page.display());
        assert_valid_roff(&page);
    }
    let serve = std::fs::read_to_string(out.join("dls-serve.1")).unwrap();
    assert!(serve.contains("\\-\\-config") && serve.contains("\\-\\-peers"), "dls-serve.1 lacks serve's flags");
    if has("man") {
        let rendered = run(Command::new("man").arg("-l").arg(out.join("dls-serve.1")).env("MANPAGER", "cat"));
        assert!(String::from_utf8_lossy(&rendered.stdout).contains("print-config"));
    }
}

#[test]
fn json_logs_are_one_object_per_line_with_level_and_message() {
    let data = tempfile::tempdir().unwrap();
    let ports = free_ports(2);
    let mut child = Command::new(dls_bin())
        .args(["serve", "--log-format", "json", "--data-dir"])
        .arg(data.path())
        .args(["--listen", &format!("127.0.0.1:{}", ports[0]), "--http-listen", &format!("127.0.0.1:{}", ports[1])])
        .env_remove("DLS_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let started = Instant::now();
    let mut seen = Vec::new();
    let serving = loop {
        assert!(started.elapsed() < Duration::from_secs(30), "no 'dls serving' line in {seen:#?}");
        let line = lines.next().expect("dls ended its log early").unwrap();
        let entry: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert!(entry["level"].is_string() && entry["message"].is_string(), "no level or message: {line}");
        assert!(entry["timestamp"].is_string(), "no timestamp: {line}");
        if entry["message"].as_str().unwrap().starts_with("dls serving") {
            break entry;
        }
        seen.push(line);
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["node"], 1, "the event's fields sit beside the message: {serving}");
    assert_eq!(serving["client"], format!("127.0.0.1:{}", ports[0]));
}

#[test]
fn the_environment_overrides_the_config_file_and_a_flag_overrides_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dls.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:1111\"\nhttp-listen = \"127.0.0.1:2222\"\nsnapshot-every = 500\n")
        .unwrap();
    let out = run(Command::new(dls_bin())
        .args(["serve", "--print-config", "--listen", "127.0.0.1:3333"])
        .env("DLS_CONFIG", &file)
        .env("DLS_HTTP_LISTEN", "127.0.0.1:4444")
        .env("DLS_LISTEN", "127.0.0.1:5555")
        .env("DLS_CLUSTER_SECRET", "a-secret-of-twenty-chars"));
    let shown = String::from_utf8(out.stdout).unwrap();
    for line in [
        "listen = \"127.0.0.1:3333\"  # flag",
        "http-listen = \"127.0.0.1:4444\"  # env DLS_HTTP_LISTEN",
        "snapshot-every = 500  # config file",
        "heartbeat-ms = 50  # default",
        "# cluster-secret = (secret, redacted)  # env DLS_CLUSTER_SECRET",
        "# Resolved: client port 127.0.0.1:3333, peer port none (single node), HTTP port 127.0.0.1:4444.",
    ] {
        assert!(shown.lines().any(|l| l == line), "missing {line:?} in:\n{shown}");
    }
    assert!(!shown.contains("a-secret-of-twenty-chars"));

    // A bad key stops `serve` before it opens anything, naming the key.
    std::fs::write(&file, "snapshot_every = 500\n").unwrap();
    let out = Command::new(dls_bin()).args(["serve"]).env("DLS_CONFIG", &file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"snapshot_every\"") && err.contains("snapshot-every"), "{err}");
}

/// `dls health` with this environment: exit code, stdout, stderr.
fn health(env: &[(&str, &OsStr)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(dls_bin());
    cmd.arg("health").env_remove("DLS_CONFIG").env_remove("DLS_HTTP_LISTEN").env_remove("DLS_TLS_CERT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run dls health");
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

#[tokio::test]
async fn health_finds_the_node_from_the_config_it_runs_with_and_says_ready_or_why_not() {
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path(), 1);
    let spec = Spec {
        extra: tls_flags(certs.path()),
        probe_tls: Some(client_tls(certs.path(), None)),
        no_secret: true,
        ..Spec::default()
    };
    let mut cluster = Cluster::start_spec(spec).await;
    // The image's situation: the file says every interface and a certificate (so the port
    // speaks https, whose certificate does not name 127.0.0.1 here: hosts are not checked).
    let port = cluster.http_addr(1).rsplit(':').next().unwrap().to_string();
    let file = certs.path().join("dls.toml");
    let (cert, key) = (certs.path().join("node-1.pem"), certs.path().join("node-1-key.pem"));
    std::fs::write(&file, format!("http-listen = \"0.0.0.0:{port}\"\ntls-cert = {cert:?}\ntls-key = {key:?}\n"))
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/readyz");
    let ready = eventually(Duration::from_secs(10), "dls health says ready", || {
        let (code, out, _) = health(&[("DLS_CONFIG", file.as_os_str())]);
        (code == Some(0)).then_some(out)
    })
    .await;
    assert_eq!(ready.trim(), format!("{url}: 200 OK ready"));

    cluster.kill(1);
    let (code, _, err) = health(&[("DLS_CONFIG", file.as_os_str())]);
    assert_eq!(code, Some(1), "a stopped node is unhealthy: {err}");
    assert!(err.contains(&url) && err.contains("Connection refused"), "the cause is told: {err}");
}

#[tokio::test]
async fn health_is_unhealthy_with_the_reason_while_a_node_waits_for_its_cluster() {
    // One node of three started: it cannot bootstrap, so /readyz answers 503 with why.
    let mut cluster = Cluster::new(Spec { nodes: 3, ..Spec::default() }).unwrap();
    cluster.start_node(1).unwrap();
    let http = cluster.http_addr(1);
    let why = eventually(Duration::from_secs(10), "dls health answers 503", || {
        let (code, _, err) = health(&[("DLS_HTTP_LISTEN", http.as_ref())]);
        (code == Some(1) && err.contains("503")).then_some(err)
    })
    .await;
    assert!(why.contains(&format!("http://{http}/readyz: 503 Service Unavailable not ready: ")), "{why}");
}

/// The HTTP port is the one users meet first (Playground, /metrics); given as an endpoint,
/// it answers the gRPC call with a plain 404. The CLI and the core say which port to use
/// rather than "gRPC status Unimplemented: grpc-status header missing".
#[tokio::test]
async fn a_client_aimed_at_the_http_port_is_told_to_use_the_grpc_port() {
    let cluster = Cluster::start(1).await;
    let http = cluster.http_addr(1);
    // The HTTP port speaks HTTP/1 only and drops the HTTP/2 preface; the client asks it in
    // HTTP/1 and gets the redirect of `/` to the Playground.
    let expected = format!("http://{http} answered plain HTTP (status 307), not gRPC: it looks like the HTTP port");

    let out = Command::new(dls_bin())
        .args(["lock", "--wait-timeout", "1s", "jobs", "nightly", "--", "true"])
        .env_remove("CAERUS_API_KEY")
        .env("DLS_ENDPOINTS", &http)
        .env("DLS_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a configuration error (usage): {stderr}");
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(stderr.contains("the gRPC port (default 7070, `--listen`)"), "{stderr}");
    assert!(!stderr.contains("grpc-status header missing"), "{stderr}");

    let config = ClientConfig::new(vec![http.clone()]).with_retry_deadline(Duration::from_secs(5)).without_api_key();
    let err = match DlsClient::connect(config).await {
        Ok(client) => match client.begin_transaction(TransactionOptions::default()).await {
            Ok(_) => panic!("a transaction begun on the HTTP port"),
            Err(e) => e,
        },
        Err(e) => e,
    };
    assert!(matches!(err, caerus_core::Error::Config { .. }), "{err:?}");
    assert!(err.message().starts_with(&expected), "{err}");
}

/// `make install PREFIX=DIR` puts a working `dls` in DIR/bin. INSTALL_BIN hands it the
/// binary this test runs against, so the check costs a copy, not a release build.
#[test]
fn make_install_puts_a_working_dls_under_the_prefix() {
    if !has("make") {
        eprintln!("skipped: no make on PATH");
        return;
    }
    let prefix = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = run(Command::new("make")
        .current_dir(root)
        .arg("install")
        .arg(format!("PREFIX={}", prefix.path().display()))
        .arg(format!("INSTALL_BIN={}", dls_bin().display())));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("cargo build"), "make install built instead of installing INSTALL_BIN: {said}");
    let installed = prefix.path().join("bin/dls");
    let version = run(Command::new(&installed).arg("--version"));
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.starts_with(&format!("dls {} (commit ", env!("CARGO_PKG_VERSION"))), "{version}");
    assert!(said.contains(&format!("installed {}: dls ", installed.display())), "{said}");
}

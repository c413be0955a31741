//! What operators get around the server: `--version` with the commit, shell completions,
//! the man page, JSON logs of a real `dls serve`, and the config file's place between the
//! environment and the defaults (`--print-config`).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{dls, dls_bin, free_ports};

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

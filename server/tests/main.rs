//! The server's integration tests: real `dls` processes (one node and three) started by the
//! test kit, a module per area. One binary, so a change links once instead of once per
//! file (TiKV keeps its integration tests the same way). `autotests = false` in
//! Cargo.toml: a new file here must be listed below, which `every_test_file_is_a_module`
//! checks.

mod common;

mod attacks;
mod auth;
mod backup;
mod bad_input;
mod bootstrap;
mod bounded;
mod cli_tooling;
mod client_tls;
mod cluster;
mod deadlock;
mod disk_faults;
mod downgrade;
mod forwarding;
mod http_access;
mod http_api;
mod limits;
mod lock_command;
mod lock_delay;
mod lost_stream;
mod membership;
mod metrics;
mod multi_key;
mod one_shot;
mod operator;
mod overload;
mod peer_security;
mod recovery;
mod secure_defaults;
mod semaphore;
mod single_node;
mod snapshot_files;
mod storage_suite;
mod tenancy;
mod try_lock;
mod verify_token;
mod watch_key;
mod webhooks;

/// A test file not listed above would never be compiled (cargo no longer finds test files
/// on its own), so its tests would silently not run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let listed = include_str!("main.rs");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let is_module = path.extension().is_some_and(|e| e == "rs") || path.join("mod.rs").exists();
        if is_module && name != "main" {
            assert!(listed.contains(&format!("\nmod {name};")), "tests/{name} is not a module of tests/main.rs");
        }
    }
}

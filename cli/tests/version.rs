//! The binary this crate builds. Having an integration test also makes a workspace
//! `cargo test` build `dls` (cargo builds a package's binaries for its integration tests)
//! before any suite starts, so the server's suite finds it current (see testkit's `dls_bin`).

use std::process::Command;

#[test]
fn dls_version_names_the_crate_version_and_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_dls")).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = concat!("dls ", env!("CARGO_PKG_VERSION"), " (commit ");
    assert!(text.starts_with(expected) && text.trim_end().ends_with(')'), "{text}");
}

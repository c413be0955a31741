//! Stamps the git commit into `dls --version` (DLS_GIT_COMMIT). Outside a git checkout
//! (a source tarball, a Docker build context without .git) the commit is "unknown"
//! unless the builder passes DLS_GIT_COMMIT in the environment.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=DLS_GIT_COMMIT");
    let commit = std::env::var("DLS_GIT_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
        // A rebuild is due when HEAD moves: HEAD itself (a checkout) and the branch it
        // names (a commit). In a worktree HEAD lives in the worktree's git dir and the
        // branch in the common one.
        let git_dir = PathBuf::from(git(&["rev-parse", "--git-dir"])?);
        let common = git(&["rev-parse", "--git-common-dir"]).map_or_else(|| git_dir.clone(), PathBuf::from);
        let head = git_dir.join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        if let Some(reference) =
            std::fs::read_to_string(&head).ok().and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
        {
            rerun_if_exists(&common.join(reference));
            rerun_if_exists(&common.join("packed-refs"));
        }
        Some(commit)
    });
    println!("cargo:rustc-env=DLS_GIT_COMMIT={}", commit.unwrap_or_else(|| "unknown".to_string()));
}

fn rerun_if_exists(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

//! A short `perf record -g` of one process: self time grouped by where it is spent (kernel,
//! libc, each Rust crate) and the top symbols, when `perf` is installed and allowed;
//! otherwise nothing (the measurement does not depend on it). Grouping by crate because
//! release builds have no frame pointers, so Rust call chains are unreliable.

use std::path::Path;

use tokio::process::Command;

use crate::pool::progress;

/// Samples `pid` for `secs` into `out` and returns the top lines of `perf report`.
pub async fn record(pid: u32, secs: f64, out: &Path) -> Option<String> {
    progress("perf", format!("perf record -g -p {pid} for {secs:.0}s"));
    let rec = Command::new("perf")
        .args(["record", "-F", "1999", "-g", "-p", &pid.to_string(), "-o"])
        .arg(out)
        .args(["--", "sleep", &format!("{secs}")])
        .output()
        .await;
    match rec {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            progress("perf", format!("perf record failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
            return None;
        }
        Err(e) => {
            progress("perf", format!("no perf ({e}); skipping the profile"));
            return None;
        }
    }
    let rep = Command::new("perf")
        .args(["report", "--stdio", "--no-children", "-g", "none", "--sort", "dso,sym", "-i"])
        .arg(out)
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&rep.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
    let mut groups: Vec<(String, f64)> = Vec::new();
    for l in &lines {
        if let Some((pct, group)) = group_of(l) {
            match groups.iter_mut().find(|g| g.0 == group) {
                Some(g) => g.1 += pct,
                None => groups.push((group, pct)),
            }
        }
    }
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut out = String::from("self time by crate / library:\n");
    for (g, p) in groups.iter().take(12) {
        out += &format!("  {p:6.2}%  {g}\n");
    }
    out += "top symbols:\n";
    for l in lines.iter().take(15) {
        out += &l.chars().take(140).collect::<String>();
        out += "\n";
    }
    Some(out.trim_end().to_string())
}

/// `(percent, group)` of one `perf report --sort dso,sym` line: the kernel, a shared
/// library, or the crate of a Rust symbol in the `dls` binary.
fn group_of(line: &str) -> Option<(f64, String)> {
    let mut it = line.split_whitespace();
    let pct: f64 = it.next()?.trim_end_matches('%').parse().ok()?;
    let dso = it.next()?;
    let kind = it.next()?;
    let sym: String = it.collect::<Vec<_>>().join(" ");
    let group = if kind == "[k]" {
        "kernel".to_string()
    } else if dso != "dls" {
        dso.to_string()
    } else {
        sym.trim_start_matches(['<', '&']).split("::").next().unwrap_or("?").to_string()
    };
    Some((pct, group))
}

//! `--report FILE`: the comparison table from JSON result lines.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

const TARGETS: [&str; 3] = ["dls", "redis", "etcd"];
const WORKLOADS: [&str; 5] = ["uncontended", "contended", "shared", "deadlock", "heartbeat"];

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn cell(r: &Value) -> String {
    let flag = {
        let (v, e) = (f(r, "violations"), f(r, "errors"));
        match (v > 0.0, e > 0.0) {
            (true, _) => format!(" **{v} VIOLATIONS**"),
            (false, true) => format!(" ({e} err)"),
            _ => String::new(),
        }
    };
    if r["workload"] == "heartbeat" {
        let cpu = r.get("leader_cpu_pct").and_then(Value::as_f64).map(|c| format!(", cpu {c:.0}%")).unwrap_or_default();
        format!("alive {}/{}{cpu}{flag}", f(r, "alive"), f(r, "clients"))
    } else {
        let dl = if r["workload"] == "deadlock" { format!(", {} dl", f(r, "deadlocks")) } else { String::new() };
        format!("{:.0}/s · {:.1}/{:.1} ms{dl}{flag}", f(r, "throughput"), f(r, "p50_ms"), f(r, "p99_ms"))
    }
}

/// A markdown table: one row per (workload, clients), a column per target, and the
/// DLS/etcd and DLS/Redis throughput ratios.
pub fn table(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // Later lines win: a rerun replaces an earlier result.
    let mut rows: BTreeMap<(usize, u64), BTreeMap<String, Value>> = BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("bad result line: {line}"))?;
        let w = v["workload"].as_str().unwrap_or("");
        let wi = WORKLOADS.iter().position(|x| *x == w).unwrap_or(WORKLOADS.len());
        let clients = v["clients"].as_u64().unwrap_or(0);
        let t = v["target"].as_str().unwrap_or("?").to_string();
        rows.entry((wi, clients)).or_default().insert(t, v);
    }
    let present: Vec<&str> = TARGETS.iter().copied().filter(|t| rows.values().any(|r| r.contains_key(*t))).collect();
    let mut out = String::from("| workload | clients |");
    for t in &present {
        out += &format!(" {t}: cycles/s · p50/p99 |");
    }
    out += " DLS/etcd | DLS/Redis |\n|---|---:|";
    for _ in &present {
        out += "---|";
    }
    out += "---:|---:|\n";
    for ((wi, clients), by_target) in &rows {
        let w = WORKLOADS.get(*wi).copied().unwrap_or("?");
        out += &format!("| {w} | {clients} |");
        for t in &present {
            out += &format!(" {} |", by_target.get(*t).map(cell).unwrap_or_else(|| "–".into()));
        }
        let ratio = |other: &str| -> String {
            match (by_target.get("dls"), by_target.get(other)) {
                (Some(d), Some(o)) if w != "heartbeat" && f(o, "throughput") > 0.0 => {
                    format!("{:.2}×", f(d, "throughput") / f(o, "throughput"))
                }
                _ => "–".into(),
            }
        };
        out += &format!(" {} | {} |\n", ratio("etcd"), ratio("redis"));
    }
    out += &group_commit_table(&rows);
    Ok(out)
}

/// The DLS leader's group commit per run, where the run had `--metrics`.
fn group_commit_table(rows: &BTreeMap<(usize, u64), BTreeMap<String, Value>>) -> String {
    let mut out = String::new();
    for ((wi, clients), by_target) in rows {
        let Some(g) = by_target.get("dls").map(|d| &d["group_commit"]).filter(|g| g.is_object()) else { continue };
        if out.is_empty() {
            out += "\nGroup commit on the DLS leader over each measured window (from its /metrics): client \
                    writes and raft entries per fsync of its log.\n\n\
                    | workload | clients | writes per fsync | raft entries per fsync | fsyncs |\n|---|---:|---:|---:|---:|\n";
        }
        let w = WORKLOADS.get(*wi).copied().unwrap_or("?");
        out += &format!(
            "| {w} | {clients} | {:.1} | {:.2} | {:.0} |\n",
            f(g, "commands_per_fsync"),
            f(g, "entries_per_fsync"),
            f(g, "fsyncs")
        );
    }
    out
}

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

/// Result rows of one language: (workload index, clients) → target → result.
type Rows = BTreeMap<(usize, u64), BTreeMap<String, Value>>;

/// Languages in the order their tables print; a result without `language` is the Rust harness.
const LANGUAGES: [&str; 3] = ["rust", "python", "node"];

/// Markdown tables: the Rust harness's (one row per (workload, clients), a column per
/// target, the DLS/etcd and DLS/Redis throughput ratios), then one per SDK language
/// (bench/sdk drivers) with the client library of each column and the p50 ratio as well.
pub fn table(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // Later lines win: a rerun replaces an earlier result.
    let mut by_lang: BTreeMap<String, Rows> = BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("bad result line: {line}"))?;
        let w = v["workload"].as_str().unwrap_or("");
        let wi = WORKLOADS.iter().position(|x| *x == w).unwrap_or(WORKLOADS.len());
        let clients = v["clients"].as_u64().unwrap_or(0);
        let t = v["target"].as_str().unwrap_or("?").to_string();
        let lang = v["language"].as_str().unwrap_or("rust").to_string();
        by_lang.entry(lang).or_default().entry((wi, clients)).or_default().insert(t, v);
    }
    let mut langs: Vec<&String> = by_lang.keys().collect();
    langs.sort_by_key(|l| LANGUAGES.iter().position(|x| x == l).unwrap_or(LANGUAGES.len()));
    let mut out = String::new();
    for lang in langs {
        let rows = &by_lang[lang];
        if lang == "rust" {
            out += &lang_table(rows, false);
            out += &group_commit_table(rows);
            out += &host_cpu_table(rows);
        } else {
            out += &format!("\n{} SDK drivers (bench/sdk): {}\n\n", title(lang), drivers(rows));
            out += &lang_table(rows, true);
        }
    }
    Ok(out)
}

fn title(lang: &str) -> String {
    let mut c = lang.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// "dls: caerus.sync, etcd: python-etcd3, …; 32 forked process(es), one client each".
fn drivers(rows: &Rows) -> String {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut concurrency = "";
    for r in rows.values().flat_map(BTreeMap::values) {
        if let (Some(t), Some(d)) = (r["target"].as_str(), r["driver"].as_str()) {
            seen.insert(t, d);
        }
        if let Some(c) = r["concurrency"].as_str() {
            concurrency = c;
        }
    }
    let list: Vec<String> = TARGETS.iter().filter_map(|t| seen.get(t).map(|d| format!("{t} through {d}"))).collect();
    let how = concurrency.split_once(' ').map(|(_, rest)| rest).unwrap_or(concurrency);
    format!("{}; clients are {how}.", list.join(", "))
}

fn lang_table(rows: &Rows, p50_ratio: bool) -> String {
    let present: Vec<&str> = TARGETS.iter().copied().filter(|t| rows.values().any(|r| r.contains_key(*t))).collect();
    let mut out = String::from("| workload | clients |");
    for t in &present {
        out += &format!(" {t}: cycles/s · p50/p99 |");
    }
    out += " DLS/etcd | DLS/Redis |";
    if p50_ratio {
        out += " p50 DLS/etcd |";
    }
    out += "\n|---|---:|";
    for _ in &present {
        out += "---|";
    }
    out += "---:|---:|";
    if p50_ratio {
        out += "---:|";
    }
    out += "\n";
    for ((wi, clients), by_target) in rows {
        let w = WORKLOADS.get(*wi).copied().unwrap_or("?");
        out += &format!("| {w} | {clients} |");
        for t in &present {
            out += &format!(" {} |", by_target.get(*t).map(cell).unwrap_or_else(|| "–".into()));
        }
        let ratio = |other: &str, key: &str| -> String {
            match (by_target.get("dls"), by_target.get(other)) {
                (Some(d), Some(o)) if w != "heartbeat" && f(o, key) > 0.0 => format!("{:.2}×", f(d, key) / f(o, key)),
                _ => "–".into(),
            }
        };
        out += &format!(" {} | {} |", ratio("etcd", "throughput"), ratio("redis", "throughput"));
        if p50_ratio {
            out += &format!(" {} |", ratio("etcd", "p50_ms"));
        }
        out += "\n";
    }
    out
}

/// The DLS leader's group commit and CPU per run, where the run had `--metrics` (and
/// `--pids` for the CPU columns).
fn group_commit_table(rows: &Rows) -> String {
    let mut out = String::new();
    for ((wi, clients), by_target) in rows {
        let Some((dls, g)) = by_target.get("dls").map(|d| (d, &d["group_commit"])).filter(|(_, g)| g.is_object())
        else {
            continue;
        };
        if out.is_empty() {
            out += "\nGroup commit on the DLS leader over each measured window (from its /metrics): client \
                    writes and raft entries per fsync of its log; the leader's CPU (from /proc) per client \
                    write and in all. CPU figures depend on the host's speed at the hour of the run: \
                    compare them within one run.\n\n\
                    | workload | clients | writes per fsync | raft entries per fsync | fsyncs | leader CPU per write | leader CPU |\n\
                    |---|---:|---:|---:|---:|---:|---:|\n";
        }
        let w = WORKLOADS.get(*wi).copied().unwrap_or("?");
        let per_write = dls["leader_cpu_us_per_write"].as_f64().map_or("–".into(), |us| format!("{us:.1} µs"));
        let busy = dls["leader_cpu_pct"].as_f64().map_or("–".into(), |pct| format!("{pct:.0} %"));
        out += &format!(
            "| {w} | {clients} | {:.1} | {:.2} | {:.0} | {per_write} | {busy} |\n",
            f(g, "commands_per_fsync"),
            f(g, "entries_per_fsync"),
            f(g, "fsyncs")
        );
    }
    out
}

/// The whole host's busy CPU per lock cycle, each target beside the others (servers,
/// clients, kernel: all of it), where the runs measured their host. On a host the runs
/// saturate, this is what decides the throughput ratios; it also says how much smaller a
/// machine DLS needs for the same cycles.
fn host_cpu_table(rows: &Rows) -> String {
    let per_cycle = |r: &Value| r["host_cpu"]["us_per_cycle"].as_f64();
    let mut out = String::new();
    for ((wi, clients), by_target) in rows {
        if !by_target.values().any(|r| per_cycle(r).is_some()) {
            continue;
        }
        if out.is_empty() {
            out += "\nThe whole host's busy CPU per lock cycle in each run (from /proc/stat: servers, clients \
                    and kernel together), its ratio to DLS's, and the most of the host's CPU time its \
                    hypervisor took in the row's runs (stolen).\n\n\
                    | workload | clients | dls | redis | etcd | etcd/DLS | stolen |\n\
                    |---|---:|---:|---:|---:|---:|---:|\n";
        }
        let w = WORKLOADS.get(*wi).copied().unwrap_or("?");
        out += &format!("| {w} | {clients} |");
        for t in TARGETS {
            let us = by_target.get(t).and_then(per_cycle);
            out += &us.map_or(" – |".into(), |us| format!(" {us:.0} µs |"));
        }
        let ratio = match (by_target.get("dls").and_then(per_cycle), by_target.get("etcd").and_then(per_cycle)) {
            (Some(d), Some(e)) if d > 0.0 => format!("{:.2}×", e / d),
            _ => "–".into(),
        };
        let stolen = by_target.values().filter_map(|r| r["host_cpu"]["steal_pct"].as_f64()).reduce(f64::max);
        out += &format!(" {ratio} | {} |\n", stolen.map_or("–".into(), |s| format!("{s:.0} %")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report of `lines` (JSON result lines), through a file as `--report` reads it.
    fn report_of(name: &str, lines: &[impl AsRef<str>]) -> String {
        let file = std::env::temp_dir().join(format!("dls-bench-report-{name}-{}.jsonl", std::process::id()));
        std::fs::write(&file, lines.iter().map(AsRef::as_ref).collect::<Vec<&str>>().join("\n")).unwrap();
        let md = table(&file);
        std::fs::remove_file(&file).unwrap();
        md.unwrap()
    }

    #[test]
    fn sdk_results_get_a_table_per_language_with_ratios() {
        let lines = [
            r#"{"target":"dls","workload":"uncontended","clients":64,"throughput":5000,"p50_ms":10,"p99_ms":20}"#,
            r#"{"target":"etcd","workload":"uncontended","clients":64,"throughput":1000,"p50_ms":50,"p99_ms":90}"#,
            r#"{"target":"dls","workload":"uncontended","clients":1,"throughput":400,"p50_ms":2,"p99_ms":3,"language":"python","driver":"caerus.sync","concurrency":"1 forked process(es), one client each"}"#,
            r#"{"target":"etcd","workload":"uncontended","clients":1,"throughput":100,"p50_ms":8,"p99_ms":9,"language":"python","driver":"python-etcd3"}"#,
            r#"{"target":"redis","workload":"contended","clients":32,"throughput":900,"p50_ms":1,"p99_ms":4,"language":"node","driver":"ioredis"}"#,
        ];
        let md = report_of("sdk", &lines);
        // The Rust rows keep their table, unchanged in shape (no p50 ratio column).
        let rust = md.split("\nPython").next().unwrap();
        assert!(
            rust.contains("| uncontended | 64 | 5000/s · 10.0/20.0 ms | 1000/s · 50.0/90.0 ms | 5.00× | – |"),
            "{md}"
        );
        assert!(!rust.contains("p50 DLS/etcd"), "{md}");
        // Python rows do not replace the Rust ones, and get throughput and p50 ratios.
        assert!(
            md.contains("Python SDK drivers (bench/sdk): dls through caerus.sync, etcd through python-etcd3;"),
            "{md}"
        );
        assert!(
            md.contains("| uncontended | 1 | 400/s · 2.0/3.0 ms | 100/s · 8.0/9.0 ms | 4.00× | – | 0.25× |"),
            "{md}"
        );
        let node = md.split("Node SDK drivers").nth(1).expect("a Node table");
        assert!(node.contains("| contended | 32 | 900/s · 1.0/4.0 ms | – | – | – |"), "{md}");
    }

    #[test]
    fn the_host_cpu_table_compares_each_targets_cpu_per_cycle_where_measured() {
        let host = |us: f64, steal: f64| format!(r#""host_cpu":{{"us_per_cycle":{us},"steal_pct":{steal}}}"#);
        let lines = [
            format!(
                r#"{{"target":"dls","workload":"uncontended","clients":64,"throughput":6587,{}}}"#,
                host(270.5, 0.0)
            ),
            format!(
                r#"{{"target":"etcd","workload":"uncontended","clients":64,"throughput":1102,{}}}"#,
                host(1734.9, 2.6)
            ),
            format!(
                r#"{{"target":"redis","workload":"uncontended","clients":64,"throughput":30000,{}}}"#,
                host(60.0, 0.4)
            ),
            // A DLS row without an etcd run, and a row from a dls-bench without host figures.
            format!(r#"{{"target":"dls","workload":"contended","clients":64,"throughput":1570,{}}}"#, host(895.1, 0.1)),
            r#"{"target":"dls","workload":"shared","clients":64,"throughput":7784}"#.to_string(),
        ];
        let md = report_of("host", &lines);
        let host_table = md.split("The whole host's busy CPU per lock cycle").nth(1).expect("a host CPU table");
        assert!(host_table.contains("| uncontended | 64 | 270 µs | 60 µs | 1735 µs | 6.41× | 3 % |"), "{md}");
        assert!(host_table.contains("| contended | 64 | 895 µs | – | – | – | 0 % |"), "{md}");
        assert!(!host_table.contains("| shared |"), "{md}");
    }

    #[test]
    fn the_group_commit_table_carries_the_leaders_cpu_per_write_where_measured() {
        let gc = r#"{"commands_per_fsync":19.2,"entries_per_fsync":1.1,"fsyncs":4546}"#;
        let lines = [
            format!(
                r#"{{"target":"dls","workload":"uncontended","clients":64,"throughput":8715,"p50_ms":7,"p99_ms":10,"group_commit":{gc},"leader_cpu_us_per_write":37.24,"leader_cpu_pct":65.0}}"#
            ),
            // Without --pids: the group commit is known, the CPU is not.
            format!(
                r#"{{"target":"dls","workload":"contended","clients":64,"throughput":1570,"p50_ms":40,"p99_ms":66,"group_commit":{gc},"leader_cpu_us_per_write":null,"leader_cpu_pct":null}}"#
            ),
            // Without --metrics: no row at all.
            r#"{"target":"dls","workload":"shared","clients":64,"throughput":7784,"p50_ms":7,"p99_ms":19,"group_commit":null,"leader_cpu_us_per_write":30.0,"leader_cpu_pct":50.0}"#.to_string(),
        ];
        let md = report_of("gc", &lines);
        let gc_table = md.split("Group commit on the DLS leader").nth(1).expect("a group-commit table");
        assert!(gc_table.contains("| uncontended | 64 | 19.2 | 1.10 | 4546 | 37.2 µs | 65 % |"), "{md}");
        assert!(gc_table.contains("| contended | 64 | 19.2 | 1.10 | 4546 | – | – |"), "{md}");
        assert!(!gc_table.contains("| shared |"), "{md}");
    }
}

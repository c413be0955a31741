//! The end of a run: the checkers' verdict over the recorded history, and the figures
//! (faults, operations, unavailability, stalled clients' keys, proxy counters).

use std::collections::HashMap;
use std::path::Path;

use caerus_testkit::proxy::{Links, CLIENT_BASE};

use crate::checker::{self, Violation};
use crate::history::{History, Op, OpKind, Outcome};
use crate::linearizable;
use crate::register::FencedRegister;
use crate::stats::summary_ms;

/// Grants the linearizability search may try per key before calling the key inconclusive.
pub const LIN_BUDGET: u64 = 200_000;

/// What the verdict and the figures need to know of the run.
pub struct Run {
    pub seed: u64,
    pub nodes: usize,
    pub lease_ms: u64,
}

/// A client whose lease must run out: the time from its stop (or cut) to the next grant of
/// its key to anyone else.
pub struct Stall {
    pub kind: &'static str,
    pub key: String,
    pub txn: u64,
    pub stopped_us: u64,
    /// The harness's own request for the key after the stop, when it made one: its grant
    /// (clients queued ahead of it may be granted earlier, while the stalled one is in line
    /// behind them; the probe's grant is when the stalled client stopped blocking).
    pub probe_granted_us: Option<u64>,
}

/// What the faults saw, besides the history.
pub struct Figures {
    /// Faults injected, by label.
    pub faults: HashMap<&'static str, u64>,
    pub leader_kills_us: Vec<u64>,
    pub stalls: Vec<Stall>,
    /// Broken promises the faults found themselves.
    pub extra_violations: Vec<Violation>,
    /// Next history process id for the harness's own clients and subprocesses.
    next_process: u64,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            faults: HashMap::new(),
            leader_kills_us: vec![],
            stalls: vec![],
            extra_violations: vec![],
            next_process: CLIENT_BASE,
        }
    }
}

impl Figures {
    /// A history process id of its own for one of the harness's clients or subprocesses.
    pub fn process(&mut self) -> u64 {
        self.next_process += 1;
        self.next_process - 1
    }
}

/// Time from each leader kill to the next acknowledged grant, in microseconds.
fn unavailability(history: &[Op], kills: &[u64]) -> Vec<u64> {
    let mut grants: Vec<u64> = history
        .iter()
        .filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Ok && o.process < CLIENT_BASE)
        .map(|o| o.complete_us)
        .collect();
    grants.sort_unstable();
    kills.iter().filter_map(|&k| grants.iter().find(|&&g| g > k).map(|g| g - k)).collect()
}

pub fn lin_summary(lin: &linearizable::Report) -> String {
    format!(
        "linearizability per key (reader-writer lock, rising tokens): {} keys checked, {} linearizable, {} not, {} inconclusive{} ({} ops, {} search steps, budget {LIN_BUDGET}/key)",
        lin.keys,
        lin.linearizable,
        lin.violations.len(),
        lin.inconclusive.len(),
        if lin.inconclusive.is_empty() { String::new() } else { format!(" {:?}", lin.inconclusive) },
        lin.ops,
        lin.steps,
    )
}

/// Judges the recorded history (every checker, the faults' own findings, how soon a
/// stalled client's key was granted to someone else), writes it to `path` and prints the
/// figures. Returns the violations.
pub fn judge(
    run: &Run,
    history: &History,
    register: &FencedRegister,
    mut figs: Figures,
    links: &Links,
    path: &Path,
) -> anyhow::Result<Vec<Violation>> {
    let ops = history.snapshot();
    let mut violations = checker::check_all(&ops, &register.tokens());
    let lin = linearizable::check(&ops, LIN_BUDGET);
    violations.extend(lin.violations.iter().cloned());
    violations.append(&mut figs.extra_violations);
    // A stopped (or cut-off) client's stop to the next grant of its key to anyone else.
    let mut expiry_to_grant: Vec<(&'static str, Vec<u64>)> = Vec::new();
    for s in &figs.stalls {
        let expiry = s.stopped_us;
        let next = ops
            .iter()
            .filter(|o| {
                o.kind == OpKind::Acquire
                    && o.outcome == Outcome::Ok
                    && o.key == s.key
                    && o.complete_us > s.stopped_us
                    && o.txn != s.txn
            })
            .map(|o| o.complete_us)
            .min();
        if let Some(g) = s.probe_granted_us.or(next) {
            match expiry_to_grant.iter_mut().find(|(k, _)| *k == s.kind) {
                Some((_, v)) => v.push(g.saturating_sub(expiry)),
                None => expiry_to_grant.push((s.kind, vec![g.saturating_sub(expiry)])),
            }
            if g > expiry + run.lease_ms * 1000 + 10_000_000 {
                violations.push(Violation {
                    checker: "terminal",
                    message: format!(
                        "key {}: {} (txn {}): next granted {} ms after",
                        s.key,
                        s.kind,
                        s.txn,
                        (g - expiry) / 1000
                    ),
                });
            }
        }
    }
    std::fs::write(path, history.to_jsonl())?;
    let count = |k: OpKind, o: Outcome| ops.iter().filter(|x| x.kind == k && x.outcome == o).count();
    println!("==== figures (seed {}, {} nodes) ====", run.seed, run.nodes);
    let mut fl: Vec<_> = figs.faults.iter().collect();
    fl.sort();
    println!(
        "faults injected: {} ({})",
        figs.faults.values().sum::<u64>(),
        fl.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    );
    println!(
        "operations: {} (txns begun {}, grants {}, acquire failed/unknown {}/{}, commits ok/failed/unknown {}/{}/{}, writes accepted/rejected {}/{}, reads {})",
        ops.len(),
        count(OpKind::Begin, Outcome::Ok),
        count(OpKind::Acquire, Outcome::Ok),
        count(OpKind::Acquire, Outcome::Fail),
        count(OpKind::Acquire, Outcome::Unknown),
        count(OpKind::Commit, Outcome::Ok),
        count(OpKind::Commit, Outcome::Fail),
        count(OpKind::Commit, Outcome::Unknown),
        count(OpKind::Write, Outcome::Ok),
        count(OpKind::Write, Outcome::Fail),
        count(OpKind::Read, Outcome::Ok),
    );
    println!(
        "unavailability after a leader kill (to the next grant): {}",
        summary_ms(&unavailability(&ops, &figs.leader_kills_us))
    );
    expiry_to_grant.sort_by_key(|(k, _)| *k);
    for (kind, v) in &expiry_to_grant {
        println!(
            "{kind} to the next grant of its key (lease {} ms, heartbeat every third): {}",
            run.lease_ms,
            summary_ms(v)
        );
    }
    println!("{}", lin_summary(&lin));
    println!(
        "proxy: node connections accepted {}, accept to forwarding {}; client connections {}; unidentified {} (closed before the scan {}, cut while a link into their node was blocked {})",
        links.setup_times().len(),
        summary_ms(&links.setup_times()),
        links.client_connections(),
        links.unknown_diallers(),
        links.unknown_gone(),
        links.unknown_cut()
    );
    println!("history: {}", path.display());
    println!("violations: {}", violations.len());
    for v in violations.iter().take(50) {
        println!("  {v}");
    }
    Ok(violations)
}

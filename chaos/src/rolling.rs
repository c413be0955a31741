//! A rolling restart under load: each node in turn gets SIGTERM and is started again on the
//! same data directory — with the same binary (a restart for a kernel patch) or another one
//! (an upgrade in place) — while clients contend for a few keys and the history is
//! recorded. Reported: the longest pause between grants around each stop, the client calls
//! whose outcome the client could not learn, and the history checkers' verdict.
//!
//! `dls-chaos rolling --dls NEW [--from OLD]` runs it; [`Rolling`] is the same as a library,
//! for scenarios that do more between the steps (use a feature once every node is new, stop
//! half-way for a mixed cluster).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use caerus_core::DlsClient;
use caerus_testkit::{http_get, Cluster, Proxies, Spec};
use clap::Parser;
use tokio::task::JoinHandle;

use crate::checker::Violation;
use crate::history::{History, OpKind, Outcome};
use crate::register::FencedRegister;
use crate::report::{self, Figures};
use crate::run::still_held_after;
use crate::workload::{client_config, worker, Ctx};

/// How long a stopping node may take to exit before the harness calls it hung.
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// How long a restarted node may take to report ready (`/readyz` 200).
const READY_LIMIT: Duration = Duration::from_secs(60);
/// The window around a stop that counts as "around" it, before the SIGTERM.
const BEFORE_STOP: Duration = Duration::from_millis(500);

#[derive(Parser, Debug, Clone)]
#[command(
    name = "dls-chaos rolling",
    about = "Rolling restart (or upgrade) of a real cluster under a contending workload: the longest pause between grants around each stop, failed client calls, and the history checkers' verdict"
)]
pub struct RollingArgs {
    /// The binary every node runs after its restart.
    #[arg(long, env = "DLS_BIN")]
    pub dls: PathBuf,
    /// The binary the nodes run before their restart (default: --dls): an upgrade from it.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// Cluster size.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Concurrent clients (one transaction at a time each); client i lists node i first
    /// (see --pinned).
    #[arg(long, default_value_t = 6)]
    pub clients: usize,
    /// Keys they contend for.
    #[arg(long, default_value_t = 2)]
    pub keys: usize,
    /// Transaction lease of the clients, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub lease_ms: u64,
    /// Seconds of load before the first stop and after each restarted node is ready.
    #[arg(long, default_value_t = 3)]
    pub settle: u64,
    /// How many times every node is restarted.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// The test kit's short raft timers (50 ms heartbeat, 300 ms election timeout) instead
    /// of the server's defaults, which are what users run.
    #[arg(long)]
    pub fast_elections: bool,
    /// Give each client only one node's address (client i: node i), as clients that reach
    /// the cluster through a node-local address do; by default each lists every node,
    /// client i's first.
    #[arg(long)]
    pub pinned: bool,
    /// Seeds the clients' choices.
    #[arg(long, env = "SEED")]
    pub seed: Option<u64>,
    /// Extra `dls serve` arguments for every node (repeat the flag; `{id}` is the node id).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
}

/// One node's stop and start.
#[derive(Debug, Clone)]
pub struct Stop {
    pub node: u64,
    pub was_leader: bool,
    /// History times (µs since the run began) of the SIGTERM and of the restarted node's
    /// first ready answer.
    pub term_us: u64,
    pub ready_us: u64,
    /// SIGTERM to exit.
    pub stopping: Duration,
    /// Exit status, None if it had to be killed.
    pub exit: Option<ExitStatus>,
    /// Start to ready.
    pub starting: Duration,
    /// The longest time without a grant (to any client, of any key) around this stop; set
    /// by [`Rolling::finish`].
    pub pause: Duration,
}

/// What a whole run found.
#[derive(Debug)]
pub struct Report {
    pub stops: Vec<Stop>,
    /// The longest pause between grants in the first settle period, before any stop: what
    /// the workload itself leaves between grants.
    pub baseline_pause: Duration,
    pub grants: usize,
    /// Calls whose outcome the client could not learn (transport trouble past its retries).
    pub unknown_calls: usize,
    /// Acquires that timed out waiting (the workload waits 1.5 s at most).
    pub lock_timeouts: usize,
    pub violations: Vec<Violation>,
    /// Nodes that exited non-zero, were killed at the stop limit, or exited on their own.
    pub node_failures: Vec<String>,
}

impl Report {
    pub fn longest_pause(&self) -> Duration {
        self.stops.iter().map(|s| s.pause).max().unwrap_or_default()
    }

    pub fn print(&self) {
        println!("==== rolling restart ====");
        println!("baseline: longest pause between grants before any stop {} ms", self.baseline_pause.as_millis());
        for s in &self.stops {
            println!(
                "node {} ({}): longest pause between grants around its stop {} ms; SIGTERM to exit {} ms ({}), start to ready {} ms",
                s.node,
                if s.was_leader { "leader" } else { "follower" },
                s.pause.as_millis(),
                s.stopping.as_millis(),
                s.exit.map_or_else(|| "killed at the limit".to_string(), |e| e.to_string()),
                s.starting.as_millis(),
            );
        }
        println!(
            "grants {}, calls with an unknown outcome {}, acquires timed out {}",
            self.grants, self.unknown_calls, self.lock_timeouts
        );
        println!("longest pause around a stop: {} ms", self.longest_pause().as_millis());
        for f in &self.node_failures {
            println!("node failure: {f}");
        }
        println!("violations: {}", self.violations.len());
        for v in self.violations.iter().take(50) {
            println!("  {v}");
        }
    }

    /// No violation, no node failure.
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.node_failures.is_empty()
    }
}

/// A cluster under load whose nodes are replaced one at a time.
pub struct Rolling {
    pub cluster: Cluster,
    /// A client of every node, for the scenario's own calls.
    pub admin: DlsClient,
    args: RollingArgs,
    seed: u64,
    ctx: Arc<Ctx>,
    workers: Vec<JoinHandle<()>>,
    stops: Vec<Stop>,
    node_failures: Vec<String>,
    dir: tempfile::TempDir,
}

impl Rolling {
    /// Starts the nodes with `--from` (or `--dls`), waits for a leader, starts the clients
    /// and lets them work for the settle period.
    pub async fn start(args: RollingArgs) -> anyhow::Result<Rolling> {
        if args.nodes < 3 {
            bail!("--nodes must be at least 3: a rolling restart keeps a majority up");
        }
        let seed = args.seed.unwrap_or_else(|| rand::random::<u64>() % 1_000_000);
        let dir = tempfile::Builder::new().prefix("dls-rolling-").tempdir()?;
        let first = args.from.clone().unwrap_or_else(|| args.dls.clone());
        println!(
            "dls-chaos rolling: seed {seed}, {} nodes from {} to {}, {} clients{}, {} keys, run dir {}",
            args.nodes,
            first.display(),
            args.dls.display(),
            args.clients,
            if args.pinned { " (each given one node)" } else { "" },
            args.keys,
            dir.path().display()
        );
        let spec = Spec {
            nodes: args.nodes,
            bin: Some(first),
            dir: Some(dir.path().to_path_buf()),
            proxies: Proxies::Kit,
            fast_elections: args.fast_elections,
            extra: args.serve_args.clone(),
            ..Spec::default()
        };
        let mut cluster = Cluster::new(spec)?;
        cluster.start_all()?;
        let admin = DlsClient::connect(client_config(cluster.listen_endpoints())).await?;
        let history = Arc::new(History::new());
        let Some(leader) = cluster.wait_for_leader_by_term(&admin, Duration::from_secs(60)).await else {
            bail!("no leader within 60 s; logs in {}", dir.keep().display());
        };
        history.log(format!("cluster up, leader node {leader}"));
        let ctx = Arc::new(Ctx {
            history,
            register: Arc::new(FencedRegister::new()),
            stop: Arc::new(AtomicBool::new(false)),
            keys: args.keys.max(1),
            lease_ms: args.lease_ms,
        });
        let mut workers = Vec::new();
        let endpoints = cluster.listen_endpoints();
        for p in 0..args.clients {
            // Each client starts from another node, as clients behind different load
            // balancer entries or with differently ordered endpoint lists would.
            let mut mine = endpoints.clone();
            mine.rotate_left(p % endpoints.len());
            if args.pinned {
                mine.truncate(1);
            }
            let client = DlsClient::connect(client_config(mine)).await?;
            let p = p as u64;
            workers.push(tokio::spawn(worker(p, client, ctx.clone(), seed.wrapping_mul(1000).wrapping_add(p))));
        }
        tokio::time::sleep(Duration::from_secs(args.settle)).await;
        Ok(Rolling { cluster, admin, args, seed, ctx, workers, stops: Vec::new(), node_failures: Vec::new(), dir })
    }

    pub fn history(&self) -> &History {
        &self.ctx.history
    }

    /// The node that leads now, by the highest term the running nodes report.
    pub async fn leader(&self) -> Option<u64> {
        self.cluster.leader_by_term(&self.admin).await
    }

    /// Stops node `id` with SIGTERM, starts `bin` on its data directory, waits until it
    /// reports ready, then lets the clients work for the settle period.
    pub async fn replace(&mut self, id: u64, bin: &Path) -> anyhow::Result<()> {
        let was_leader = self.leader().await == Some(id);
        let h = self.ctx.history.clone();
        h.log(format!("SIGTERM node {id} ({})", if was_leader { "leader" } else { "follower" }));
        let term_us = h.now_us();
        let t = Instant::now();
        let exit = self.cluster.terminate(id, STOP_LIMIT).await;
        let stopping = t.elapsed();
        match exit {
            Some(s) if s.success() => {}
            Some(s) => self.node_failures.push(format!("node {id} exited {s} on SIGTERM")),
            None => self.node_failures.push(format!("node {id} did not exit within {STOP_LIMIT:?} of SIGTERM")),
        }
        self.cluster.set_bin(bin.to_path_buf());
        let t = Instant::now();
        self.cluster.start_node(id)?;
        let http = self.cluster.http_addr(id);
        let deadline = Instant::now() + READY_LIMIT;
        loop {
            if let Ok((200, _)) = http_get(&http, "/readyz") {
                break;
            }
            if self.cluster.has_exited(id) {
                bail!("node {id} exited after its restart with {}: {}", bin.display(), last_lines(&self.cluster, id));
            }
            if Instant::now() > deadline {
                bail!("node {id} not ready within {READY_LIMIT:?} of its restart: {}", last_lines(&self.cluster, id));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let starting = t.elapsed();
        let ready_us = h.now_us();
        h.log(format!("node {id} ready again ({})", bin.display()));
        self.stops.push(Stop {
            node: id,
            was_leader,
            term_us,
            ready_us,
            stopping,
            exit,
            starting,
            pause: Duration::ZERO,
        });
        tokio::time::sleep(Duration::from_secs(self.args.settle)).await;
        self.check_running()
    }

    /// Replaces every node with `bin`, the followers first and the leader last, as an
    /// operator would (one election instead of one per follower that became leader).
    pub async fn replace_all(&mut self, bin: &Path) -> anyhow::Result<()> {
        let mut order = self.cluster.ids();
        if let Some(l) = self.leader().await {
            order.retain(|&id| id != l);
            order.push(l);
        }
        for id in order {
            self.replace(id, bin).await?;
        }
        Ok(())
    }

    /// Nodes that were not asked to stop must still run.
    fn check_running(&mut self) -> anyhow::Result<()> {
        for id in self.cluster.ids() {
            if self.cluster.has_exited(id) {
                let why = format!("node {id} exited on its own: {}", last_lines(&self.cluster, id));
                self.node_failures.push(why.clone());
                bail!(why);
            }
        }
        Ok(())
    }

    /// Stops the clients, checks no lock stays held, judges the history and measures the
    /// pauses. Keeps the run directory when something failed.
    pub async fn finish(mut self) -> anyhow::Result<Report> {
        let h = self.ctx.history.clone();
        h.log("stopping clients");
        self.ctx.stop.store(true, Ordering::Relaxed);
        let mut figs = Figures::default();
        for w in self.workers.drain(..) {
            if tokio::time::timeout(Duration::from_secs(60), w).await.is_err() {
                figs.extra_violations
                    .push(Violation { checker: "terminal", message: "a client did not finish within 60 s".into() });
            }
        }
        let bound = Duration::from_millis(self.args.lease_ms) + Duration::from_secs(10);
        let held = still_held_after(&self.admin, bound).await;
        if !held.is_empty() {
            figs.extra_violations.push(Violation {
                checker: "terminal",
                message: format!("{} ms after every client ended, still held: {held}", bound.as_millis()),
            });
        }
        let path = self.dir.path().join("history.jsonl");
        let run = report::Run { seed: self.seed, nodes: self.args.nodes, lease_ms: self.args.lease_ms };
        let violations = report::judge(&run, &h, &self.ctx.register, figs, self.cluster.links(), &path)?;
        let ops = h.snapshot();
        let mut grants: Vec<u64> = ops
            .iter()
            .filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Ok)
            .map(|o| o.complete_us)
            .collect();
        grants.sort_unstable();
        let settle_us = self.args.settle * 1_000_000;
        let first_stop = self.stops.first().map_or(u64::MAX, |s| s.term_us);
        let baseline_pause = longest_gap(&grants, first_stop.saturating_sub(settle_us), first_stop);
        // Around a stop: from just before its SIGTERM to just before the next one (or the
        // end of the settle period after the last), so no pause counts for two stops.
        let before = BEFORE_STOP.as_micros() as u64;
        let ends: Vec<u64> = self
            .stops
            .iter()
            .skip(1)
            .map(|next| next.term_us.saturating_sub(before))
            .chain(self.stops.last().map(|s| s.ready_us + settle_us))
            .collect();
        for (s, end) in self.stops.iter_mut().zip(ends) {
            s.pause = longest_gap(&grants, s.term_us.saturating_sub(before), end);
        }
        let report = Report {
            stops: self.stops.clone(),
            baseline_pause,
            grants: grants.len(),
            unknown_calls: ops.iter().filter(|o| o.outcome == Outcome::Unknown).count(),
            lock_timeouts: ops
                .iter()
                .filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Fail && o.error == "LOCK_TIMEOUT")
                .count(),
            violations,
            node_failures: self.node_failures.clone(),
        };
        self.cluster.kill_all();
        if !report.ok() {
            println!("node logs kept in {}", self.dir.keep().display());
        }
        Ok(report)
    }
}

/// The longest time without a grant that overlaps [from, to] (µs): between two
/// consecutive grants, or from `from` to the first grant after it when none came before.
fn longest_gap(grants: &[u64], from: u64, to: u64) -> Duration {
    let mut longest = 0;
    let mut prev = grants.iter().copied().filter(|&g| g <= from).max().unwrap_or(from);
    for &g in grants.iter().filter(|&&g| g > from) {
        longest = longest.max(g - prev);
        prev = g;
        if g >= to {
            break;
        }
    }
    if prev < to {
        // No grant since `prev` up to the end of the window.
        longest = longest.max(to - prev);
    }
    Duration::from_micros(longest)
}

fn last_lines(c: &Cluster, id: u64) -> String {
    let log = c.log_since_start(id);
    let lines: Vec<&str> = log.lines().rev().take(3).collect();
    format!("{:?}", lines.into_iter().rev().collect::<Vec<_>>())
}

/// `dls-chaos rolling`: every node restarted `--rounds` times; fails on any violation or
/// node failure.
pub async fn run(args: RollingArgs) -> anyhow::Result<bool> {
    let rounds = args.rounds.max(1);
    let bin = args.dls.clone();
    let mut r = Rolling::start(args).await.context("start the cluster")?;
    for _ in 0..rounds {
        r.replace_all(&bin).await?;
    }
    let report = r.finish().await?;
    report.print();
    Ok(report.ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_overlapping_the_window() {
        let g = [100, 200, 900, 1000, 1100];
        // 200 → 900 overlaps [250, 950].
        assert_eq!(longest_gap(&g, 250, 950), Duration::from_micros(700));
        // Nothing after 1100 up to 2000.
        assert_eq!(longest_gap(&g, 1050, 2000), Duration::from_micros(900));
        // No grant at all.
        assert_eq!(longest_gap(&[], 0, 500), Duration::from_micros(500));
        // Steady grants.
        assert_eq!(longest_gap(&g, 950, 1100), Duration::from_micros(100));
    }
}

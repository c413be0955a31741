//! Failover as clients see it, on a 3-node cluster with the server's default raft timers.
//!
//! - `failover`: the leader is SIGKILLed a few times while clients take and commit a lock
//!   in a loop (one-shot acquire, then commit), each on a key of its own: one client per
//!   node that is given only that node (clients spread over the cluster, as behind a load
//!   balancer: the survivors' clients are served by forwarding) and one given every node.
//!   Measured: from the kill to the first grant any client sees, to the next grant of the
//!   client given every node, and to the moment every client of a surviving node has been
//!   served again; and apart from them the kill to a new leader serving (its /metrics says
//!   it leads). The killed node is restarted between rounds.
//! - `isolate`: the kit's proxies stand in front of every node; a client given every node
//!   holds a lock in a transaction with a 2 s lease, and the leader is cut off from the
//!   other nodes and from the client for a few leases, its links closed (the others learn
//!   at once) or silent (as when packets are dropped: they learn only from timeouts).
//!   Counted: rounds in which the client kept its transaction (no lost signal, and the new
//!   leader reports it active).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions, TransactionState};
use caerus_testkit::proxy::HARNESS;
use caerus_testkit::{Cluster, Proxies};

use crate::cluster;
use crate::pool::{pct, progress, NAMESPACE};
use crate::{Opts, Report};

/// See the comment where it is used.
const IN_FLIGHT_ANSWER: Duration = Duration::from_millis(100);
/// The lease of the isolate step's transaction (the figure).
const ISOLATE_LEASE: Duration = Duration::from_secs(2);
/// How long the isolate step keeps the old leader cut off: several leases after a new
/// leader serves, so a client that cannot renew would have lost its transaction.
const ISOLATE_HOLD: Duration = Duration::from_secs(6);

/// One client in a loop of one-shot acquire + commit, and what it saw.
struct Looper {
    name: String,
    /// The node it is given alone; `None`: given every node.
    pinned: Option<u64>,
    grants: Arc<Mutex<Vec<Instant>>>,
    errors: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Looper {
    async fn start(
        name: String,
        key: String,
        pinned: Option<u64>,
        endpoints: Vec<String>,
        stop: Arc<AtomicBool>,
    ) -> Looper {
        let grants: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let client = DlsClient::connect(ClientConfig::new(endpoints)).await.expect("lazy connect");
        let task = {
            let (grants, errors) = (grants.clone(), errors.clone());
            tokio::spawn(async move {
                while !stop.load(Relaxed) {
                    let begin = TransactionOptions::default().with_timeout_ms(2_000);
                    let wait = AcquireOptions::default().with_timeout_ms(10_000);
                    match client.begin_with_lock(begin, NAMESPACE, &key, LockMode::Exclusive, wait).await {
                        Ok((tx, _)) => {
                            grants.lock().unwrap().push(Instant::now());
                            if let Err(e) = tx.commit().await {
                                errors.lock().unwrap().push(format!("commit: {e}"));
                            }
                        }
                        Err(e) => {
                            errors.lock().unwrap().push(format!("acquire: {e}"));
                            tokio::time::sleep(Duration::from_millis(10)).await
                        }
                    }
                }
            })
        };
        Looper { name, pinned, grants, errors, task }
    }

    /// Its first grant after `at`.
    fn grant_after(&self, at: Instant) -> Option<Instant> {
        self.grants.lock().unwrap().iter().copied().find(|t| *t > at)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// p50, max and every value of `v`.
fn row(v: &[f64]) -> (f64, f64, String) {
    let all = v.iter().map(|g| format!("{g:.0}")).collect::<Vec<_>>().join(", ");
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    (pct(&sorted, 0.5), pct(&sorted, 1.0), all)
}

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("failover");
    let mut cluster = cluster::start(&opts.dls_bin, &dir, &[]).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let key = |name: &str| if opts.fo_one_key { "failover".to_string() } else { format!("failover-{name}") };
    let mut loopers = vec![Looper::start("all".into(), key("all"), None, cluster.endpoints(), stop.clone()).await];
    for id in cluster.ids() {
        let name = format!("node-{id}");
        loopers.push(Looper::start(name.clone(), key(&name), Some(id), vec![cluster.addr(id)], stop.clone()).await);
    }
    let (mut first, mut all_client, mut every, mut elections) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=opts.fo_rounds {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let leader = cluster::leader(&cluster).await?;
        let killed_at = Instant::now();
        cluster.kill(leader);
        let elected = loop {
            if let Ok(id) = cluster::leader(&cluster).await {
                if id != leader {
                    break ms(killed_at.elapsed());
                }
            }
            if killed_at.elapsed() > Duration::from_secs(30) {
                anyhow::bail!("round {round}: no new leader within 30 s of killing node {leader}")
            }
        };
        // A grant seen within the first 100 ms was answered by the old leader just before it
        // died (its response was in flight): no new leader can be elected that soon
        // (election timeout >= 300 ms), so it is not the next grant.
        let after = killed_at + IN_FLIGHT_ANSWER;
        let survivors: Vec<&Looper> = loopers.iter().filter(|l| l.pinned != Some(leader)).collect();
        let served = loop {
            let grants: Option<Vec<Instant>> = survivors.iter().map(|l| l.grant_after(after)).collect();
            if let Some(g) = grants {
                break g;
            }
            if killed_at.elapsed() > Duration::from_secs(30) {
                let waiting: Vec<&str> =
                    survivors.iter().filter(|l| l.grant_after(after).is_none()).map(|l| l.name.as_str()).collect();
                anyhow::bail!("round {round}: clients {waiting:?} got no grant within 30 s of killing node {leader}")
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let span = |t: &Instant| ms(t.duration_since(killed_at));
        let spans: Vec<f64> = served.iter().map(span).collect();
        let any = spans.iter().copied().fold(f64::INFINITY, f64::min);
        let slowest = spans.iter().copied().fold(0.0, f64::max);
        let of_all = span(&loopers[0].grant_after(after).expect("served"));
        for l in &loopers {
            let told = std::mem::take(&mut *l.errors.lock().unwrap());
            if let (Some(e), false) = (told.first(), l.pinned == Some(leader)) {
                progress(
                    "failover",
                    format!("round {round}: client {} saw {} error(s), the first: {e}", l.name, told.len()),
                );
            }
        }
        progress(
            "failover",
            format!(
                "round {round}: leader node {leader} killed; new leader after {elected:.0} ms; first grant after \
                 {any:.0} ms, the all-endpoints client's after {of_all:.0} ms, every surviving client's after {slowest:.0} ms"
            ),
        );
        first.push(any);
        all_client.push(of_all);
        every.push(slowest);
        elections.push(elected);
        cluster.start_node(leader)?;
        cluster::wait_ready(&cluster, Duration::from_secs(60)).await?;
    }
    stop.store(true, Relaxed);
    for l in loopers {
        let _ = tokio::time::timeout(Duration::from_secs(15), l.task).await;
    }
    report.h3("Failover: leader SIGKILL → next grant");
    report.line(format!(
        "{} rounds; clients in a loop of one-shot acquire + commit, {}: one per node given only that node, one \
         given every node; server defaults (raft heartbeat 50 ms, election timeout 150–300 ms); the killed node \
         restarts between rounds.\n",
        first.len(),
        if opts.fo_one_key {
            "all on one key (a transaction of the killed node's own client, which reaches no other node, then \
             holds or queues for it until its lease runs out)"
        } else {
            "each on its own key"
        }
    ));
    report.line("| figure | p50 | max | every round |");
    report.line("|---|---|---|---|");
    let (p50, max, all) = row(&first);
    report.line(format!("| kill → next grant, any client (ms) | {p50:.0} | **{max:.0}** (target ≤ 2000) | {all} |"));
    let (p50, max, all) = row(&all_client);
    report.line(format!("| kill → next grant, client given every node (ms) | {p50:.0} | {max:.0} | {all} |"));
    let (p50, max, all) = row(&every);
    report.line(format!("| kill → every surviving node's client served (ms) | {p50:.0} | {max:.0} | {all} |"));
    let (p50, max, all) = row(&elections);
    report.line(format!("| kill → new leader serving (ms) | {p50:.0} | {max:.0} | {all} |"));
    report.line("");
    Ok(())
}

/// The node other than `old` that says it leads, once one does.
async fn new_leader(c: &Cluster, old: u64, within: Duration) -> anyhow::Result<u64> {
    let until = Instant::now() + within;
    loop {
        for id in c.ids().into_iter().filter(|id| *id != old) {
            if let Ok(m) = cluster::metrics(c, id).await {
                if m.get("dls_is_leader") == Some(&1.0) {
                    return Ok(id);
                }
            }
        }
        if Instant::now() > until {
            anyhow::bail!("no node but {old} leads within {within:?} of cutting it off")
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the isolate rounds of one kind of cut saw.
#[derive(Default)]
struct Isolated {
    kept: usize,
    elections: Vec<f64>,
    lost: Vec<String>,
}

pub async fn run_isolate(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("isolate");
    let cluster = cluster::start_with(&opts.dls_bin, &dir, &[], Proxies::Kit).await?;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints())).await?;
    let rounds = opts.iso_rounds.max(1);
    let mut kinds = Vec::new();
    for silent in [false, true] {
        cluster.links().set_silent(silent);
        kinds.push((silent, isolate_rounds(&cluster, &client, rounds, silent).await?));
    }
    report.h3("Failover: leader cut off → a client of the majority keeps its transaction");
    report.line(format!(
        "{rounds} rounds per kind of cut; the kit's proxies in front of every node; a client given every node holds \
         a lock in a transaction with a {} ms lease; the leader is cut off from the other nodes and from the client \
         for {} ms; server defaults. Closed: its connections are closed and new ones dropped (the others learn at \
         once). Silent: its connections are held open with nothing passing, as when a firewall or a network \
         namespace drops packets (the others learn only from their timeouts).\n",
        ISOLATE_LEASE.as_millis(),
        ISOLATE_HOLD.as_millis()
    ));
    report.line("| cut | transaction kept | cut → new leader serving (ms): p50, max (every round) |");
    report.line("|---|---|---|");
    for (silent, seen) in &kinds {
        let (p50, max, all) = row(&seen.elections);
        report.line(format!(
            "| {} | **{} of {rounds}** (target {rounds} of {rounds}) | {p50:.0}, {max:.0} ({all}) |",
            if *silent { "silent" } else { "closed" },
            seen.kept
        ));
    }
    report.line("");
    for (_, seen) in &kinds {
        for l in &seen.lost {
            report.line(format!("- {l}"));
        }
    }
    report.line("");
    Ok(())
}

async fn isolate_rounds(
    cluster: &Cluster,
    client: &DlsClient,
    rounds: usize,
    silent: bool,
) -> anyhow::Result<Isolated> {
    let links = cluster.links().clone();
    let cut = if silent { "silent" } else { "closed" };
    let mut seen = Isolated::default();
    for round in 1..=rounds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let leader = cluster::leader(cluster).await?;
        let lease_ms = ISOLATE_LEASE.as_millis() as u64;
        let tx = client.begin_transaction(TransactionOptions::default().with_timeout_ms(lease_ms)).await?;
        let key = format!("isolate-{cut}-{round}");
        tx.acquire_lock(NAMESPACE, &key, LockMode::Exclusive, AcquireOptions::default()).await?;
        // Anywhere in the heartbeat cycle.
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % lease_ms)).await;
        let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
        let cut_at = Instant::now();
        links.partition(&[leader], &others);
        links.block(HARNESS, leader);
        let elected = new_leader(cluster, leader, Duration::from_secs(30)).await?;
        let elected_ms = ms(cut_at.elapsed());
        tokio::time::sleep(ISOLATE_HOLD.saturating_sub(cut_at.elapsed())).await;
        let status = client.transaction_status(tx.id()).await;
        let kept = tx.lost_reason().is_none() && matches!(&status, Ok(s) if s.state == TransactionState::Active);
        if kept {
            seen.kept += 1;
        } else {
            seen.lost.push(format!(
                "{cut} round {round}: {}; status on the new leader: {}",
                tx.lost_reason().map_or("no lost signal".to_string(), |r| format!("lost: {}", r.message)),
                status.map_or_else(|e| e.to_string(), |s| format!("{:?}", s.state)),
            ));
        }
        progress(
            "isolate",
            format!(
                "{cut} round {round}: leader node {leader} cut off; node {elected} leads after {elected_ms:.0} ms; \
                 transaction {}",
                if kept { "kept" } else { "LOST" }
            ),
        );
        seen.elections.push(elected_ms);
        links.heal();
        if tx.lost_reason().is_none() {
            tx.commit().await?;
        }
        cluster::wait_ready(cluster, Duration::from_secs(60)).await?;
    }
    Ok(seen)
}

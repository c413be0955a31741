//! Failover: one client takes and commits a lock in a loop (one-shot acquire, then
//! commit) on a 3-node cluster with the server's default raft timers; the leader is
//! SIGKILLed a few times. Measured: from the kill to the next grant any client sees
//! (election, the new leader catching up, the client finding it), and apart from it the
//! kill to a new leader serving (its /metrics says it leads). The killed node is
//! restarted between rounds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};

use crate::cluster;
use crate::pool::{pct, progress, NAMESPACE};
use crate::{Opts, Report};

/// See the comment where it is used.
const IN_FLIGHT_ANSWER: Duration = Duration::from_millis(100);

pub async fn run(opts: &Opts, report: &mut Report) -> anyhow::Result<()> {
    let dir = opts.dir().join("failover");
    let mut cluster = cluster::start(&opts.dls_bin, &dir, &[]).await?;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints())).await?;
    let grants: Arc<Mutex<Vec<Instant>>> = Arc::default();
    // What the client was told while no grant came: printed with each round.
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looper = {
        let (grants, errors, stop) = (grants.clone(), errors.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let begin = TransactionOptions::default().with_timeout_ms(2_000);
                let wait = AcquireOptions::default().with_timeout_ms(10_000);
                match client.begin_with_lock(begin, NAMESPACE, "failover", LockMode::Exclusive, wait).await {
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
    let mut gaps = Vec::new();
    let mut elections = Vec::new();
    for round in 1..=opts.fo_rounds {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let leader = cluster::leader(&cluster).await?;
        let killed_at = Instant::now();
        cluster.kill(leader);
        let elected = loop {
            if let Ok(id) = cluster::leader(&cluster).await {
                if id != leader {
                    break killed_at.elapsed().as_secs_f64() * 1000.0;
                }
            }
            if killed_at.elapsed() > Duration::from_secs(30) {
                anyhow::bail!("round {round}: no new leader within 30 s of killing node {}", leader)
            }
        };
        let next = loop {
            // A grant seen within the first 100 ms was answered by the old leader just before
            // it died (its response was in flight): no new leader can be elected that soon
            // (election timeout >= 300 ms), so it is not the next grant.
            if let Some(t) = grants.lock().unwrap().iter().find(|t| **t > killed_at + IN_FLIGHT_ANSWER) {
                break Some(*t);
            }
            if killed_at.elapsed() > Duration::from_secs(30) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let Some(next) = next else {
            anyhow::bail!("round {round}: no grant within 30 s of killing the leader (node {})", leader)
        };
        let gap = next.duration_since(killed_at).as_secs_f64() * 1000.0;
        let told = std::mem::take(&mut *errors.lock().unwrap());
        if let Some(first) = told.first() {
            progress("failover", format!("round {round}: the client saw {} error(s), the first: {first}", told.len()));
        }
        progress(
            "failover",
            format!(
                "round {round}: leader node {} killed, new leader after {elected:.0} ms, next grant after {gap:.0} ms",
                leader
            ),
        );
        gaps.push(gap);
        elections.push(elected);
        cluster.start_node(leader)?;
        cluster::wait_ready(&cluster, Duration::from_secs(60)).await?;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(15), looper).await;
    report.h3("Failover: leader SIGKILL → next grant");
    report.line(format!(
        "{} rounds; one client in a loop of one-shot acquire + commit on one key; server defaults \
         (raft heartbeat 50 ms, election timeout 150–300 ms); the killed node restarts between rounds.\n",
        gaps.len()
    ));
    report.line("| figure | p50 | max | every round |");
    report.line("|---|---|---|---|");
    let row = |v: &[f64]| {
        let all = v.iter().map(|g| format!("{g:.0}")).collect::<Vec<_>>().join(", ");
        let mut sorted = v.to_vec();
        sorted.sort_by(f64::total_cmp);
        (pct(&sorted, 0.5), pct(&sorted, 1.0), all)
    };
    let (p50, max, all) = row(&gaps);
    report.line(format!("| kill → next grant (ms) | {p50:.0} | **{max:.0}** (target < 2000) | {all} |"));
    let (p50, max, all) = row(&elections);
    report.line(format!("| kill → new leader serving (ms) | {p50:.0} | {max:.0} | {all} |"));
    report.line("");
    Ok(())
}

//! The upgrade from an earlier release (issue 40 item 2), on the rolling-restart harness:
//! three nodes of `--from` (v0.1.0) under a contending load with the history checkers;
//! the leader and one follower are replaced with `--dls`, and in that mixed state a
//! schedule-slot claim (feature level 2) must be refused FAILED_PRECONDITION naming the
//! old node while the old node keeps applying the log; then the last node is replaced, the
//! cluster's level must rise to 2 and the claim must work. Reported: the rolling-restart
//! figures (pauses between grants around each stop, violations, node failures) and what
//! the mixed and the upgraded cluster answered.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use caerus_core::{DlsClient, LockMode, TransactionOptions};

use crate::rolling::{Rolling, RollingArgs};
use crate::workload::client_config;

/// How long the leader may take to notice every member and raise the level.
const LEVEL_LIMIT: Duration = Duration::from_secs(30);
/// How long the old node may take to apply what the leader had committed.
const APPLY_LIMIT: Duration = Duration::from_secs(15);
/// Restarts of an old node that leads (same binary), so that a new node leads the mixed
/// cluster: only a new leader has the gate to show.
const MAX_REELECTIONS: usize = 5;

/// `dls-chaos upgrade --from OLD --dls NEW`: fails on a violation, a node failure, or an
/// answer of the mixed or upgraded cluster other than the expected one.
pub async fn run(args: RollingArgs) -> anyhow::Result<bool> {
    let Some(old) = args.from.clone() else { bail!("--from OLD_DLS is required: the release upgraded from") };
    let new = args.dls.clone();
    let mut r = Rolling::start(args).await.context("start the cluster of the old release")?;
    let mut findings = Vec::new();

    // The leader first, then one follower: one old follower stays.
    let leader = r.leader().await.context("no leader")?;
    r.replace(leader, &new).await?;
    let follower = r.cluster.ids().into_iter().find(|&id| id != leader).expect("three nodes");
    r.replace(follower, &new).await?;
    let old_node = r.cluster.ids().into_iter().find(|&id| id != leader && id != follower).expect("three nodes");
    for _ in 0..MAX_REELECTIONS {
        if r.leader().await != Some(old_node) {
            break;
        }
        println!("node {old_node} (old) leads: restarting it so that a new node leads");
        r.replace(old_node, &old).await?;
    }

    // The mixed state: refused, naming the old node; the old node still applies.
    let client = DlsClient::connect(client_config(r.cluster.listen_endpoints())).await?;
    match claim(&client, "upgrade-mixed").await {
        Ok(run) => findings.push(format!("mixed cluster: the slot claim was accepted (run {run}), not refused")),
        Err(e) => {
            let msg = e.message().to_string();
            println!("mixed cluster: claim refused {}: {msg}", e.code());
            if e.code() != "MEMBERSHIP_REFUSED" || !msg.contains(&format!("node {old_node} runs")) {
                findings.push(format!("mixed cluster: the refusal does not name node {old_node}: {e}"));
            }
        }
    }
    match old_node_follows(&r, &client, old_node).await {
        Ok(applied) => println!("mixed cluster: old node {old_node} applied up to {applied}, following the leader"),
        Err(e) => findings.push(format!("mixed cluster: {e:#}")),
    }

    r.replace(old_node, &new).await?;
    match level_raised(&client).await {
        Ok(t) => println!(
            "upgraded cluster: feature level 2 ({} ms after the settle period that follows the last restart)",
            t.as_millis()
        ),
        Err(e) => findings.push(format!("upgraded cluster: {e:#}")),
    }
    match claim(&client, "upgrade-done").await {
        Ok(true) => println!("upgraded cluster: the slot claim ran"),
        Ok(false) => findings.push("upgraded cluster: the first claim of a slot was told not to run".into()),
        Err(e) => findings.push(format!("upgraded cluster: the slot claim failed: {e}")),
    }

    let report = r.finish().await?;
    report.print();
    println!("==== upgrade ====");
    for f in &findings {
        println!("finding: {f}");
    }
    println!("upgrade findings: {}", findings.len());
    Ok(report.ok() && findings.is_empty())
}

/// Claims a schedule slot under an EXCLUSIVE lock: whether to run.
async fn claim(client: &DlsClient, key: &str) -> Result<bool, caerus_core::Error> {
    let tx = client.begin_transaction(TransactionOptions::default()).await?;
    let claimed = async {
        tx.acquire_lock("upgrade", key, LockMode::Exclusive, Default::default()).await?;
        tx.claim_slot("upgrade", key, Duration::from_secs(3600), false).await.map(|c| c.run)
    }
    .await;
    let _ = tx.commit().await;
    claimed
}

/// Waits until the old node applied what the leader had committed when asked.
async fn old_node_follows(r: &Rolling, client: &DlsClient, old: u64) -> anyhow::Result<u64> {
    let committed = client.cluster_status().await?.commit_index;
    let addr = r.cluster.node(old).listen.clone();
    let deadline = Instant::now() + APPLY_LIMIT;
    loop {
        let applied = client.cluster_status_of(&addr).await.map(|s| s.applied_index).unwrap_or(0);
        if applied >= committed {
            return Ok(applied);
        }
        if Instant::now() > deadline {
            bail!("old node {old} applied only up to {applied} of {committed} within {APPLY_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the leader reports feature level 2.
async fn level_raised(client: &DlsClient) -> anyhow::Result<Duration> {
    let t = Instant::now();
    loop {
        if let Ok(s) = client.cluster_status().await {
            if s.is_leader() && s.feature_level == Some(2) {
                return Ok(t.elapsed());
            }
        }
        if t.elapsed() > LEVEL_LIMIT {
            bail!("the cluster's feature level did not reach 2 within {LEVEL_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

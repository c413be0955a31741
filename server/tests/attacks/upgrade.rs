//! Upgrades in place (issue 40 item 1): every node tells its peers its version and feature
//! level; a command of a level some member does not read is refused FAILED_PRECONDITION
//! naming that node, and allowed once the cluster's level (decided through raft) is raised;
//! a rolling downgrade lowers the level while nothing of the higher level was used; a node
//! started on a data directory written at a level it does not read refuses with the
//! reason. `--feature-level 1` on this build plays the older release (v0.1.0 itself is
//! exercised by `make test-upgrade`). Before the handshake, a cluster with a node that
//! could not read a schedule-slot entry accepted one.

use std::time::Duration;

use caerus_core::{ClientConfig, ClusterStatus, DlsClient, Error, LockMode, TransactionOptions};
use caerus_testkit::{eventually, eventually_async, http_get, Cluster, Spec, PATIENCE};

/// Starts three nodes, those in `old` with `--feature-level 1` (as an environment
/// variable: it is the node's own, not every node's).
async fn cluster_with_old(old: &[u64]) -> (Cluster, DlsClient) {
    // Snapshots early, so they carry the level too.
    let extra = vec!["--snapshot-every".to_string(), "10".to_string()];
    let mut cluster = Cluster::new(Spec { nodes: 3, extra, ..Spec::default() }).unwrap();
    for id in old {
        set_level(&mut cluster, *id, Some(1));
    }
    cluster.start_all().unwrap();
    cluster.wait_for_leader(PATIENCE).await;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    (cluster, client)
}

fn set_level(cluster: &mut Cluster, id: u64, level: Option<u32>) {
    let env = &mut cluster.node_mut(id).env;
    env.retain(|(k, _)| k != "DLS_FEATURE_LEVEL");
    if let Some(level) = level {
        env.push(("DLS_FEATURE_LEVEL".into(), level.to_string().into()));
    }
}

/// Stops node `id` and starts it again at `level` (None: this build's own).
async fn restart_at(cluster: &mut Cluster, id: u64, level: Option<u32>) {
    cluster.terminate(id, PATIENCE).await.expect("node stopped");
    set_level(cluster, id, level);
    cluster.start_again(id);
}

/// The leader's status (asking every node: any may lead) once `check` holds for it.
async fn status_when(
    cluster: &Cluster,
    client: &DlsClient,
    what: &str,
    check: impl Fn(&ClusterStatus) -> bool,
) -> ClusterStatus {
    eventually_async(PATIENCE, what, || async {
        for addr in cluster.endpoints() {
            if let Ok(s) = client.cluster_status_of(&addr).await {
                if s.is_leader() && check(&s) {
                    return Some(s);
                }
            }
        }
        None
    })
    .await
}

fn level_of(s: &ClusterStatus, id: u64) -> Option<u32> {
    s.members.iter().find(|m| m.node_id == id).and_then(|m| m.feature_level)
}

/// Claims a schedule slot (a level-2 command) under an EXCLUSIVE lock.
async fn claim(client: &DlsClient, key: &str) -> Result<bool, Error> {
    let tx = client.begin_transaction(TransactionOptions::default()).await.unwrap();
    tx.acquire_lock("jobs", key, LockMode::Exclusive, Default::default()).await.unwrap();
    let claimed = tx.claim_slot("jobs", key, Duration::from_secs(60), false).await.map(|c| c.run);
    tx.commit().await.unwrap();
    claimed
}

fn assert_refused_naming(err: Error, node: u64) {
    assert_eq!(err.code(), "MEMBERSHIP_REFUSED", "{err}");
    let msg = err.message().to_string();
    assert!(msg.contains("needs cluster feature level 2"), "{msg}");
    assert!(msg.contains(&format!("node {node} runs")) && msg.contains("(level 1)"), "{msg}");
    assert!(msg.contains("Upgrade those nodes first"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feature_waits_for_every_member_and_then_the_data_directory_keeps_old_nodes_out() {
    let (mut cluster, client) = cluster_with_old(&[3]).await;
    let s = status_when(&cluster, &client, "every member reported its level", |s| level_of(s, 3) == Some(1)).await;
    assert_eq!(s.feature_level, Some(1));
    assert!(s.members.iter().all(|m| m.version.as_deref().is_some_and(|v| v.starts_with("0."))), "{s:?}");

    let refused = claim(&client, "nightly").await.expect_err("node 3 reads level 1");
    assert_refused_naming(refused, 3);
    let text = caerus_testkit::dls(&["status", "--endpoints", &cluster.endpoints().join(",")]);
    assert!(text.contains("VERSION") && text.contains("feature level: 1 (highest used 1; members read"), "{text}");
    assert!(text.contains("3=1"), "{text}");
    // The HTTP port shows the same (GET /api/v1/cluster, the node's own view).
    let (code, body) = http_get(&cluster.http_addr(3), "/api/v1/cluster").unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"feature_level\":1") && body.contains("\"feature_level_used\":1"), "{body}");

    restart_at(&mut cluster, 3, None).await;
    let s = status_when(&cluster, &client, "the level raised to 2", |s| s.feature_level == Some(2)).await;
    assert_eq!(level_of(&s, 3), Some(2));
    assert!(claim(&client, "nightly").await.unwrap(), "the slot runs once the level is 2");
    let s = status_when(&cluster, &client, "a level-2 entry applied", |s| s.feature_level_used == Some(2)).await;
    assert_eq!(s.feature_level, Some(2));

    // Entries of level 2 are in node 3's log now: a level-1 node could not read them.
    restart_at(&mut cluster, 3, Some(1)).await;
    let status = cluster.wait_for_exit(3, PATIENCE).await;
    assert!(!status.success());
    let log = cluster.log_since_start(3);
    assert!(log.contains("feature level 2") && log.contains("reads at most level 1"), "{log}");
    assert!(log.contains("without --feature-level 1"), "{log}");
    // And the level stays: the entries are in every log.
    restart_at_running(&mut cluster, 3).await;
    let s = status_when(&cluster, &client, "a leader after node 3's return", |_| true).await;
    assert_eq!((s.feature_level, s.feature_level_used), (Some(2), Some(2)));
}

/// Starts node `id` again at this build's level (after it refused to start).
async fn restart_at_running(cluster: &mut Cluster, id: u64) {
    set_level(cluster, id, None);
    cluster.start_again(id);
    cluster.wait_serving(PATIENCE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_downgrade_lowers_the_level_while_nothing_of_it_was_used() {
    let (mut cluster, client) = cluster_with_old(&[]).await;
    status_when(&cluster, &client, "the level raised to 2", |s| s.feature_level == Some(2)).await;
    // A snapshot of node 2 taken at level 2 (nothing of it used) must not keep it out.
    for _ in 0..10 {
        client.begin_transaction(TransactionOptions::default()).await.unwrap().commit().await.unwrap();
    }
    let snapshots = cluster.node(2).data_dir.join("snapshots");
    eventually(PATIENCE, "a snapshot on node 2", || {
        let files = std::fs::read_dir(&snapshots).ok()?;
        files.flatten().any(|f| f.path().extension().is_some_and(|e| e == "snap")).then_some(())
    })
    .await;

    restart_at(&mut cluster, 2, Some(1)).await;
    let s = status_when(&cluster, &client, "the level lowered to 1", |s| s.feature_level == Some(1)).await;
    assert_eq!((level_of(&s, 2), s.feature_level_used), (Some(1), Some(1)));
    assert_refused_naming(claim(&client, "hourly").await.expect_err("node 2 reads level 1"), 2);
}

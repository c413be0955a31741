//! Snapshots as files (`<data_dir>/snapshots/<id>.snap`) on real `dls` processes: restore
//! after a SIGKILL, a stray `.tmp` from a crash, and a follower brought back by
//! InstallSnapshot.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, LockMode, TransactionState};
use common::{eventually, opts, wait, Cluster, PATIENCE};

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(
        ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(Duration::from_secs(20)),
    )
    .await
    .unwrap()
}

fn snapshot_dir(cluster: &Cluster, id: u64) -> PathBuf {
    cluster.nodes.iter().find(|n| n.id == id).unwrap().data_dir.join("snapshots")
}

/// Files in the snapshot directory ending in `.ext`.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == ext)).collect()
}

/// The node's log file. The harness writes it next to the data directory as
/// `node-<id>.log` and appends to it across restarts.
fn log_text(cluster: &Cluster, id: u64) -> String {
    let node = cluster.nodes.iter().find(|n| n.id == id).unwrap();
    std::fs::read_to_string(node.data_dir.with_file_name(format!("node-{id}.log"))).unwrap_or_default()
}

/// Grants `n` locks, one transaction each, and returns the last fencing token.
async fn grant_many(c: &DlsClient, prefix: &str, n: usize) -> u64 {
    let mut last = 0;
    for i in 0..n {
        let t = c.begin_transaction(opts(10_000)).await.unwrap();
        let l = t.acquire_lock("ns", &format!("{prefix}{i}"), LockMode::Exclusive, wait(1000)).await.unwrap();
        assert!(l.fencing_token > last);
        last = l.fencing_token;
        t.commit().await.unwrap();
    }
    last
}

/// Waits until node `id` has exactly one snapshot file and returns it.
async fn one_snapshot_file(cluster: &Cluster, id: u64) -> PathBuf {
    let dir = snapshot_dir(cluster, id);
    eventually(PATIENCE, "one snapshot file", || match files_with(&dir, "snap").as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_restarted_node_restores_locks_and_the_token_counter_from_its_snapshot_file() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "20"]).await;
    let c = client(&cluster).await;
    let holder = c.begin_transaction(opts(10_000)).await.unwrap();
    let last = grant_many(&c, "k", 30).await;
    let held = holder.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(held.fencing_token > last);
    // Cross one more snapshot after `kept` was granted, so the file (not only the log) has it.
    let before = one_snapshot_file(&cluster, 1).await;
    grant_many(&c, "more", 15).await;
    // A newer file with a header and a body (read in the same look: a later build may
    // replace it at any moment).
    eventually(PATIENCE, "a newer, complete snapshot file", || {
        let files = files_with(&snapshot_dir(&cluster, 1), "snap");
        let newer = (files.len() == 1 && files[0] != before).then(|| files[0].clone())?;
        std::fs::metadata(&newer).ok().filter(|m| m.len() > 8).map(|_| ())
    })
    .await;
    // A build may still be under way for the last entries; its .tmp must not stay.
    eventually(PATIENCE, "no .tmp left after the builds", || {
        files_with(&snapshot_dir(&cluster, 1), "tmp").is_empty().then_some(())
    })
    .await;

    cluster.restart(1); // SIGKILL, then start again on the same data directory
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    assert_eq!(log_text(&cluster, 1).matches("restored lock table from snapshot").count(), 1);

    common::assert_kept_across_restart(&c, &holder, &held).await;
}

#[tokio::test]
async fn a_stray_tmp_file_from_a_crash_is_removed_at_start() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "20"]).await;
    let c = client(&cluster).await;
    let holder = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();
    grant_many(&c, "k", 30).await;
    let snap = one_snapshot_file(&cluster, 1).await;

    // A crash in the middle of writing a snapshot leaves a partial .tmp file beside the
    // last complete one.
    cluster.kill(1);
    let dir = snapshot_dir(&cluster, 1);
    let partial = std::fs::read(&snap).unwrap();
    std::fs::write(dir.join("12345-0.tmp"), &partial[..partial.len() / 2]).unwrap();
    std::fs::write(dir.join("garbage.tmp"), b"not a snapshot").unwrap();
    cluster.restart(1);
    cluster.wait_for_leader(Duration::from_secs(20)).await;

    assert!(files_with(&dir, "tmp").is_empty(), "start-up removes .tmp files");
    let st = holder.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert_eq!(st.locks, vec![held]);
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    t.acquire_lock("ns", "after", LockMode::Exclusive, wait(1000)).await.unwrap();
    t.commit().await.unwrap();
    holder.commit().await.unwrap();
}

#[tokio::test]
async fn a_follower_behind_the_purged_log_catches_up_through_install_snapshot() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "20"]).await;
    let c = client(&cluster).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let follower = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();

    cluster.kill(follower);
    let keeper = c.begin_transaction(opts(10_000)).await.unwrap();
    let kept = keeper.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();
    // Enough entries for several snapshots, so the leader purges what the follower lacks.
    let last = grant_many(&c, "k", 60).await;

    cluster.restart(follower);
    eventually(PATIENCE, "the follower to install the leader's snapshot", || {
        log_text(&cluster, follower).contains("installed snapshot from leader").then_some(())
    })
    .await;
    // The received .tmp was renamed into place: one complete snapshot file remains. The
    // follower may be writing its own next snapshot meanwhile (every 20 entries here), so a
    // .tmp may appear briefly and a newer .snap may replace the installed one; none stays.
    eventually(PATIENCE, "one complete snapshot file and no .tmp on the follower", || {
        let dir = snapshot_dir(&cluster, follower);
        match (files_with(&dir, "snap").as_slice(), files_with(&dir, "tmp").is_empty()) {
            ([one], true) => std::fs::metadata(one).ok().filter(|m| m.len() > 8).map(|_| ()),
            _ => None,
        }
    })
    .await;

    // The leader dies once the follower applied all it had: the cluster now relies on the
    // follower's installed copy.
    cluster.wait_caught_up(follower, leader, PATIENCE).await;
    cluster.kill(leader);
    cluster.wait_for_new_leader(leader, Duration::from_secs(20)).await;
    let st = keeper.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active, "{st:?}");
    assert_eq!(st.locks, vec![kept.clone()]);
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "after", LockMode::Exclusive, wait(5_000)).await.unwrap();
    assert!(next.fencing_token > last, "tokens continue past the installed snapshot");
    t.commit().await.unwrap();
    keeper.commit().await.unwrap();
}

/// The "snapshot built" lines of a node's log: (last index, file size).
fn snapshots_built(log: &str) -> Vec<(u64, u64)> {
    log.lines()
        .filter(|l| l.contains("snapshot built"))
        .map(|l| {
            let index = l.split("index: ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
            let bytes = l.split("bytes=").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().parse().unwrap();
            (index, bytes)
        })
        .collect()
}

#[tokio::test]
async fn a_large_table_is_written_again_less_often_than_every_so_many_entries() {
    // Every 10 entries while a snapshot is under 10 KiB; a larger one is due only after
    // one entry per KiB of it (raft::snapshot_schedule).
    let cluster = Cluster::start_with(1, &["--snapshot-every", "10"]).await;
    let c = client(&cluster).await;
    grant_many(&c, "k", 300).await; // 300 finished transactions: tens of KiB of table

    let built = snapshots_built(&log_text(&cluster, 1));
    assert!(built.len() >= 5, "snapshots were built: {built:?}");
    for pair in built.windows(2) {
        let ((from, bytes), (to, _)) = (pair[0], pair[1]);
        let due = 10u64.max(bytes / 1024);
        assert!(to - from >= due, "a snapshot at {to}, {} entries after one of {bytes} bytes at {from}", to - from);
    }
    let stretched = built.windows(2).filter(|p| p[1].0 - p[0].0 >= 20).count();
    assert!(stretched >= 3, "the larger snapshots came further apart: {built:?}");
    assert!(built.last().unwrap().1 > 20 * 1024, "the table grew past 20 KiB: {built:?}");
}

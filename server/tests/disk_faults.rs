//! Disk faults on real `dls` processes whose data directories sit on small tmpfs mounts
//! (docs/storage.md, "Disk faults"): a node that cannot write its data directory stops
//! (exits non-zero with a clear line) so that another leads; nothing it acknowledged is
//! lost; a follower whose disk filled up catches up once space is freed and it is started
//! again. Needs root (mount); skipped with a message otherwise.

use crate::common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Lock, LockMode, Transaction, TransactionState};
use caerus_testkit::disk::Tmpfs;
use common::{eventually, grant_many, opts, wait, Cluster, PATIENCE};

/// Copies `from` into `to` recursively, leaving all-zero blocks as holes (log segments
/// are preallocated sparse files; a tmpfs would otherwise hold their zeros).
fn copy_sparse(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_sparse(&entry.path(), &target);
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        let out = std::fs::File::create(&target).unwrap();
        for (i, block) in bytes.chunks(4096).enumerate() {
            if block.iter().any(|&b| b != 0) {
                out.write_all_at(block, (i * 4096) as u64).unwrap();
            }
        }
        out.set_len(bytes.len() as u64).unwrap();
    }
}

/// Moves every node's data directory onto a tmpfs of its own, one node at a time (the
/// other two keep a majority), and returns the mounts.
async fn onto_tmpfs(cluster: &mut Cluster, size: &str) -> Option<Vec<Tmpfs>> {
    let mut mounts = Vec::new();
    for id in 1..=cluster.nodes.len() as u64 {
        cluster.kill(id);
        let dir = cluster.nodes.iter().find(|n| n.id == id).unwrap().data_dir.clone();
        let saved = dir.with_extension("disk");
        std::fs::rename(&dir, &saved).unwrap();
        match Tmpfs::mount(&dir, size) {
            Ok(m) => mounts.push(m),
            Err(why) => {
                eprintln!("SKIPPED: {why}");
                return None;
            }
        }
        copy_sparse(&saved, &dir);
        std::fs::remove_dir_all(&saved).unwrap();
        cluster.restart(id);
        cluster.wait_for_leader(PATIENCE).await;
    }
    Some(mounts)
}

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(
        ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(Duration::from_secs(20)),
    )
    .await
    .unwrap()
}

/// A lock held across the fault, to check that it is kept.
async fn hold(c: &DlsClient) -> (Transaction, Lock) {
    let holder = c.begin_transaction(opts(60_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();
    (holder, held)
}

async fn assert_kept(holder: &Transaction, held: &Lock) {
    let st = holder.status().await.unwrap();
    assert_eq!(st.state, TransactionState::Active);
    assert_eq!(st.locks, vec![held.clone()]);
}

fn applied_index(cluster: &Cluster, id: u64) -> Option<u64> {
    let (_, body) = common::http_get(&cluster.http_addr(id), "/metrics").ok()?;
    let line = body.lines().find(|l| l.starts_with("dls_applied_index "))?;
    line.split_whitespace().nth(1)?.parse::<f64>().ok().map(|v| v as u64)
}

#[tokio::test]
async fn a_leader_whose_disk_fills_stops_and_another_leads_keeping_every_grant() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "20"]).await;
    let Some(mounts) = onto_tmpfs(&mut cluster, "24m").await else { return };
    let c = client(&cluster).await;
    let (holder, held) = hold(&c).await;
    let before = grant_many(&c, "a", 10, held.fencing_token).await;

    let leader = cluster.wait_for_leader(PATIENCE).await;
    mounts[leader as usize - 1].fill().unwrap();
    // Grants go on (through the failover) with tokens still rising.
    let after = grant_many(&c, "b", 40, before).await;
    assert!(after > before);

    let status = cluster.wait_exit(leader, PATIENCE).await.expect("the leader with a full disk must stop");
    assert!(!status.success(), "{status}");
    let log = cluster.log_of(leader);
    assert!(log.contains("raft stopped on this node"), "{log}");
    assert!(log.contains("No space left on device"), "{log}");
    assert_ne!(cluster.wait_for_leader(PATIENCE).await, leader);
    assert_kept(&holder, &held).await;
    holder.commit().await.unwrap();
}

#[tokio::test]
async fn a_follower_whose_disk_fills_falls_behind_and_catches_up_once_space_is_freed() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "20"]).await;
    let Some(mounts) = onto_tmpfs(&mut cluster, "24m").await else { return };
    let c = client(&cluster).await;
    let (holder, held) = hold(&c).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();

    let filler = mounts[follower as usize - 1].fill().unwrap();
    let last = grant_many(&c, "a", 40, held.fencing_token).await;
    let status = cluster.wait_exit(follower, PATIENCE).await.expect("the follower with a full disk must stop");
    assert!(!status.success(), "{status}");
    assert!(cluster.log_of(follower).contains("raft stopped on this node"));

    // Space freed; the operator (or a supervisor) starts it again.
    std::fs::remove_file(filler).unwrap();
    cluster.restart(follower);
    grant_many(&c, "b", 5, last).await;
    let target = applied_index(&cluster, leader).expect("the leader's applied index");
    eventually(PATIENCE, "the follower to apply what the leader applied", || {
        applied_index(&cluster, follower).filter(|i| *i >= target)
    })
    .await;
    assert_kept(&holder, &held).await;
    holder.commit().await.unwrap();
}

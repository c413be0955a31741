//! Backups on real `dls` processes (docs/storage.md, "Backups"): `dls snapshot save` from a
//! live cluster, `dls snapshot restore` into the data directories of a new one, which then
//! serves the saved locks and hands out fencing tokens above every token the old cluster
//! ever handed out, also those granted after the backup.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, LockMode};
use common::{grant_many, opts, wait, Cluster, PATIENCE};

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(
        ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(Duration::from_secs(20)),
    )
    .await
    .unwrap()
}

fn dls(args: &[&str]) -> Output {
    Command::new(caerus_testkit::dls_bin()).args(args).output().expect("run dls")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `dls snapshot restore` into node `id`'s data directory of `cluster` (stopped, emptied),
/// with the flags the harness serves it with.
fn restore_into(cluster: &Cluster, id: u64, file: &Path, extra: &[&str]) -> Output {
    let node = cluster.nodes.iter().find(|n| n.id == id).unwrap();
    let mut args = vec!["snapshot", "restore", file.to_str().unwrap(), "--node-id"];
    let id_text = id.to_string();
    args.push(&id_text);
    let data_dir = node.data_dir.to_str().unwrap();
    args.extend(["--data-dir", data_dir]);
    let peers: String =
        cluster.nodes.iter().map(|n| format!("{}={}/{}", n.id, n.addr, n.peer_addr)).collect::<Vec<_>>().join(",");
    if cluster.nodes.len() == 1 {
        args.extend(["--listen", &node.addr]);
    } else {
        args.extend(["--peers", &peers]);
    }
    args.extend(extra);
    dls(&args)
}

#[tokio::test]
async fn a_saved_snapshot_restores_into_a_new_cluster_whose_tokens_rise_above_the_old_ones() {
    let old = Cluster::start(3).await;
    let c = client(&old).await;
    grant_many(&c, "k", 20, 0).await;
    let holder = c.begin_transaction(opts(60_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "kept", LockMode::Exclusive, wait(1000)).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.snap");
    let endpoints = old.endpoints().join(",");
    let out = dls(&["snapshot", "save", file.to_str().unwrap(), "--endpoints", &endpoints]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("last fencing token {}", held.fencing_token)), "{}", text(&out));
    assert!(!dir.path().join("backup.part").exists());
    // Saving over an existing file is refused.
    assert!(!dls(&["snapshot", "save", file.to_str().unwrap(), "--endpoints", &endpoints]).status.success());

    // The old cluster goes on granting after the backup.
    let after_backup = grant_many(&c, "later", 10, 0).await;
    assert!(after_backup > held.fencing_token);

    // A new cluster of three, every node seeded from the file.
    let mut new = Cluster::spawn_spec(common::Spec { nodes: 3, ..Default::default() });
    for id in 1..=3 {
        new.kill_and_wipe_data_dir(id);
    }
    // A token floor below the backup's last token is refused, and writes nothing.
    let out = restore_into(&new, 1, &file, &["--token-floor", "3"]);
    assert!(!out.status.success() && text(&out).contains("--token-floor 3 is below"), "{}", text(&out));
    assert!(!new.nodes[0].data_dir.join("raft-meta").exists());
    for id in 1..=3 {
        let out = restore_into(&new, id, &file, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("fencing tokens continue above"), "{}", text(&out));
    }
    // A data directory that holds something is refused.
    let out = restore_into(&new, 1, &file, &[]);
    assert!(!out.status.success() && text(&out).contains("is not empty"), "{}", text(&out));
    for id in 1..=3 {
        new.start_again(id);
    }
    new.wait_for_leader(PATIENCE).await;

    let c2 = client(&new).await;
    let locks = c2.list_locks("ns").await.unwrap();
    let kept = locks.iter().find(|k| k.key == "kept").expect("the lock held in the backup");
    assert_eq!(kept.holders[0].fencing_token, held.fencing_token);
    let t = c2.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(
        next.fencing_token > after_backup,
        "token {} not above the old cluster's {after_backup}",
        next.fencing_token
    );
    t.commit().await.unwrap();
    holder.commit().await.unwrap();
}

#[tokio::test]
async fn a_damaged_backup_is_refused_and_restores_nothing() {
    let old = Cluster::start(1).await;
    let c = client(&old).await;
    grant_many(&c, "k", 5, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.snap");
    let out = dls(&["snapshot", "save", file.to_str().unwrap(), "--endpoints", &old.endpoints()[0]]);
    assert!(out.status.success(), "{}", text(&out));
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len - 1).unwrap();

    let target = dir.path().join("new-node");
    let out = dls(&[
        "snapshot",
        "restore",
        file.to_str().unwrap(),
        "--data-dir",
        target.to_str().unwrap(),
        "--listen",
        "127.0.0.1:1",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing was restored"), "{}", text(&out));
    assert!(!target.exists());
}

#[tokio::test]
async fn a_backup_needs_an_admin_key_without_namespace_limits() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = common::add_key(&keys, "admin", &[], true);
    let limited = common::add_key(&keys, "billing-admin", &["billing-"], true);
    let user = common::add_key(&keys, "app", &[], false);
    let cluster = Cluster::start_full(1, &["--api-keys-file", keys.to_str().unwrap()], Some(admin.clone())).await;
    let endpoint = cluster.endpoints()[0].clone();
    let save = |name: &str, key: &str| {
        let file = dir.path().join(name);
        let out = dls(&["snapshot", "save", file.to_str().unwrap(), "--endpoints", &endpoint, "--api-key", key]);
        (out, file)
    };

    let (out, file) = save("user.snap", &user);
    assert!(!out.status.success() && !file.exists(), "{}", text(&out));
    assert!(text(&out).contains("admin"), "a key without --admin is refused: {}", text(&out));
    let (out, file) = save("limited.snap", &limited);
    assert!(!out.status.success() && !file.exists(), "{}", text(&out));
    assert!(text(&out).contains("limited to namespace prefixes"), "{}", text(&out));
    assert!(!dir.path().join("limited.part").exists(), "no partial file is left");
    let (out, file) = save("admin.snap", &admin);
    assert!(out.status.success() && file.exists(), "{}", text(&out));
}

/// A backup asked of a follower is relayed to the leader (the stream of chunks included),
/// so an operator can point `dls snapshot save` at any node.
#[tokio::test]
async fn a_backup_through_a_follower_is_taken_on_the_leader() {
    let cluster = Cluster::start(3).await;
    let c = client(&cluster).await;
    let last = grant_many(&c, "f", 5, 0).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.nodes.iter().find(|n| n.id != leader).unwrap().addr.clone();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.snap");
    let out = dls(&["snapshot", "save", file.to_str().unwrap(), "--endpoints", &follower]);
    assert!(out.status.success(), "{}", text(&out));

    // The relayed backup was checked whole by the CLI and holds every grant before it.
    assert!(
        text(&out).contains(&format!("last fencing token {last}")),
        "the backup's last token is {last}: {}",
        text(&out)
    );
}

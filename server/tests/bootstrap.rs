//! Cluster identity and safe bootstrap against real processes: a node whose data directory
//! was wiped never re-bootstraps the running cluster; it refuses, and is back only once
//! re-added through `dls members`.

use crate::common;

use common::{eventually, Cluster, ContendedWorkload, PATIENCE};

/// A follower whose data directory is wiped and that is restarted with the same flags
/// refuses to start (its vote and log are gone) while the cluster keeps granting safely;
/// re-added with `dls members remove`, `dls members add` and `--join`, it serves again and
/// its vote counts.
#[tokio::test]
async fn a_wiped_follower_restarted_with_the_same_flags_refuses_until_it_is_re_added() {
    let mut cluster = Cluster::start(3).await;
    let client = common::patient_client(cluster.endpoints()).await;
    let load = ContendedWorkload::start(&client, 4, &["a", "b"]);
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let wiped = (1..=3).find(|&n| n != leader).unwrap();

    cluster.kill_and_wipe_data_dir(wiped);
    let earlier = cluster.log_of(wiped).len();
    cluster.start_again(wiped);
    let status = cluster.wait_for_exit(wiped, PATIENCE).await;
    assert!(!status.success(), "a wiped voter must not start");
    let log = cluster.log_of(wiped)[earlier..].to_string();
    assert!(log.contains("its log and its vote were lost"), "{log}");
    assert!(log.contains(&format!("dls members remove {wiped}")), "{log}");
    assert!(!log.contains("initialized a new cluster"), "it must not bootstrap again");

    // The other two keep granting meanwhile.
    let before = load.grants();
    common::eventually(PATIENCE, "grants to continue without the wiped node", || {
        (load.grants() > before + 5).then_some(())
    })
    .await;

    // Re-add it the way the refusal says.
    let endpoints = cluster.endpoints().join(",");
    let spec = {
        let n = cluster.nodes.iter().find(|n| n.id == wiped).unwrap();
        format!("{}/{}", n.addr, n.peer_addr)
    };
    common::dls(&["members", "remove", &wiped.to_string(), "--endpoints", &endpoints]);
    cluster.start_joining(wiped);
    let added = common::dls(&["members", "add", &wiped.to_string(), &spec, "--endpoints", &endpoints]);
    assert!(added.contains("voter"), "{added}");
    let members = client.list_members().await.unwrap();
    assert!(members.members.iter().any(|m| m.node_id == wiped && m.voter), "{members:?}");

    // Its vote counts: with the other follower down, the leader needs it.
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let other = (1..=3).find(|&n| n != leader && n != wiped).unwrap();
    cluster.kill(other);
    common::assert_next_grant(&client).await;

    let history = load.stop_and_check(&client).await;
    assert!(history.len() > 10, "the workload made progress: {} grants", history.len());
}

/// A data directory that kept cluster-id.toml but lost its raft log refuses at once.
#[tokio::test]
async fn a_data_dir_with_an_identity_but_no_log_refuses_to_start() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let victim = (1..=3).find(|&n| n != leader).unwrap();
    cluster.kill(victim);
    let dir = cluster.nodes.iter().find(|n| n.id == victim).unwrap().data_dir.clone();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "cluster-id.toml" {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
    cluster.start_again(victim);
    assert!(!cluster.wait_for_exit(victim, PATIENCE).await.success());
    let log = cluster.log_of(victim);
    assert!(log.contains("its cluster-id.toml says it belonged to cluster"), "{log}");
    assert!(log.contains("--join"), "{log}");
}

/// Nodes started with --join never bootstrap a cluster of their own: with no member of a
/// running cluster to ask they say they wait, and no leader appears. Two of three listed
/// nodes reaching each other without --join would initialize a cluster after
/// MAJORITY_AFTER, so this fails if --join is ignored.
#[tokio::test]
async fn a_joining_node_with_nobody_to_ask_waits_and_never_bootstraps() {
    let mut cluster = Cluster::spawn_spec(common::Spec { nodes: 3, ..Default::default() });
    cluster.kill(3);
    cluster.start_joining(1);
    cluster.start_joining(2);
    let waiting = "not taking part in raft yet: no member of the cluster in --peers answered yet";
    for id in [1, 2] {
        let what = format!("joining node {id} to report that it waits (or to bootstrap)");
        let log = eventually(PATIENCE, &what, || {
            assert!(!cluster.has_exited(id), "{}", cluster.log_of(id));
            let log = cluster.log_since_start(id);
            (log.contains(waiting) || log.contains("initialized a new cluster")).then_some(log)
        })
        .await;
        assert!(!log.contains("initialized a new cluster"), "{log}");
    }
    assert_eq!(cluster.leader_now().await, None, "no leader among nodes that only wait to join");
}

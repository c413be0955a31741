//! Online membership changes against real processes, under a contending workload: grow
//! 3 -> 5 and shrink back, replace a dead node, remove the leader. Throughout, no two
//! holders of a key at once, tokens strictly rising per key, every acknowledged grant kept.

use crate::common;

use std::time::{Duration, Instant};

use caerus_core::{AddMemberOptions, ClientConfig, DlsClient};
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::{AddMemberRequest, RemoveMemberRequest};
use common::{Cluster, ContendedWorkload, PATIENCE};

async fn add(client: &DlsClient, id: u64, spec: &str) {
    let (addr, peer) = spec.split_once('/').unwrap();
    client.add_member(id, addr, peer, AddMemberOptions::default()).await.unwrap();
}

fn voters(m: &caerus_core::Membership) -> Vec<u64> {
    m.members.iter().filter(|m| m.voter).map(|m| m.node_id).collect()
}

#[tokio::test]
async fn grow_from_three_to_five_and_shrink_back_under_a_contending_workload() {
    let mut cluster = Cluster::start(3).await;
    let client = common::patient_client(cluster.endpoints()).await;
    let load = ContendedWorkload::start(&client, 4, &["a", "b"]);

    for id in [4, 5] {
        let spec = cluster.spawn_joining_node(id);
        add(&client, id, &spec).await;
    }
    let m = client.list_members().await.unwrap();
    assert_eq!(voters(&m), vec![1, 2, 3, 4, 5]);
    assert!(!m.changing);
    // The new voters hold the log: the leader's view of their progress is up to date.
    assert!(m.members.iter().all(|x| x.matched_index > 0), "{m:?}");
    // With two of the original three down, the cluster of five still has a quorum.
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let down: Vec<u64> = [1, 2, 3].into_iter().filter(|&n| n != leader).collect();
    for &n in &down {
        cluster.kill(n);
    }
    common::assert_next_grant(&client).await;
    for &n in &down {
        cluster.start_again(n);
    }

    for id in [4, 5] {
        client.remove_member(id).await.unwrap();
        cluster.kill(id);
    }
    assert_eq!(voters(&client.list_members().await.unwrap()), vec![1, 2, 3]);
    common::assert_next_grant(&client).await;

    let history = load.stop_and_check(&client).await;
    assert!(history.len() > 10, "the workload made progress: {} grants", history.len());
}

#[tokio::test]
async fn a_dead_node_is_replaced_by_a_fresh_one_that_catches_up_and_votes() {
    let mut cluster = Cluster::start(3).await;
    let client = common::patient_client(cluster.endpoints()).await;
    let load = ContendedWorkload::start(&client, 4, &["a", "b"]);
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let dead = (1..=3).find(|&n| n != leader).unwrap();
    cluster.kill(dead);

    client.remove_member(dead).await.unwrap();
    let spec = cluster.spawn_joining_node(4);
    add(&client, 4, &spec).await;
    let m = client.list_members().await.unwrap();
    let mut expected: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|&n| n != dead).collect();
    expected.sort();
    assert_eq!(voters(&m), expected);

    // Node 4's vote counts: with the remaining original follower down, the leader needs it.
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let other = expected.iter().copied().find(|&n| n != leader && n != 4).unwrap();
    cluster.kill(other);
    common::assert_next_grant(&client).await;
    cluster.start_again(other);

    let history = load.stop_and_check(&client).await;
    assert!(history.len() > 10, "the workload made progress: {} grants", history.len());
}

#[tokio::test]
async fn removing_the_leader_steps_it_down_and_the_others_elect_a_new_one() {
    let mut cluster = Cluster::start(3).await;
    let client = common::patient_client(cluster.endpoints()).await;
    let load = ContendedWorkload::start(&client, 4, &["a", "b"]);
    let leader = cluster.wait_for_leader(PATIENCE).await;

    let removed_at = Instant::now();
    let after = client.remove_member(leader).await.unwrap();
    assert!(after.iter().all(|m| m.node_id != leader), "{after:?}");
    let rest: Vec<String> = cluster.nodes.iter().filter(|n| n.id != leader).map(|n| n.addr.clone()).collect();
    let rest_client = common::patient_client(rest).await;
    common::assert_next_grant(&rest_client).await;
    eprintln!("next grant {:?} after the leader's removal was requested", removed_at.elapsed());
    let new_leader = cluster.wait_for_new_leader(leader, PATIENCE).await;
    assert_ne!(new_leader, leader);
    cluster.kill(leader);

    load.stop_and_check(&rest_client).await;
}

#[tokio::test]
async fn membership_changes_refuse_bad_input_and_keys_without_the_right() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = common::add_key(&keys, "ops", &[], true);
    let limited = common::add_key(&keys, "billing-ops", &["billing-"], true);
    let app = common::add_key(&keys, "app", &[], false);
    let keys_flag = format!("--api-keys-file={}", keys.display());
    let cluster = Cluster::start_full(3, &[&keys_flag], Some(admin.clone())).await;
    let with_key = |key: &str| {
        let key = key.to_string();
        let endpoints = cluster.endpoints();
        async move { DlsClient::connect(ClientConfig::new(endpoints).with_api_key(key)).await.unwrap() }
    };
    let ops = with_key(&admin).await;
    let code = |r: Result<Vec<caerus_core::MemberInfo>, caerus_core::Error>| r.unwrap_err().code();

    assert_eq!(with_key(&limited).await.list_members().await.unwrap_err().code(), "PERMISSION_DENIED");
    assert_eq!(with_key(&app).await.remove_member(2).await.unwrap_err().code(), "PERMISSION_DENIED");
    let quick = AddMemberOptions { stay_learner: false, catch_up_timeout: Some(Duration::from_millis(500)) };
    assert_eq!(code(ops.add_member(0, "127.0.0.1:1", "127.0.0.1:2", quick.clone()).await), "INVALID_ARGUMENT");
    assert_eq!(code(ops.add_member(9, "nohost", "127.0.0.1:2", quick.clone()).await), "INVALID_ARGUMENT");
    let existing = cluster.nodes[1].addr.clone();
    assert_eq!(code(ops.add_member(2, &existing, "127.0.0.1:2", quick.clone()).await), "MEMBERSHIP_REFUSED");
    assert_eq!(code(ops.remove_member(9).await), "MEMBERSHIP_REFUSED");
    assert_eq!(code(ops.promote_member(9, None).await), "MEMBERSHIP_REFUSED");
    // A node that is never started stays a learner and the answer says how to go on.
    let err = ops.add_member(9, "127.0.0.1:1", "127.0.0.1:2", quick).await.unwrap_err();
    assert_eq!(err.code(), "MEMBERSHIP_REFUSED");
    assert!(err.message().contains("dls members promote 9"), "{err}");
    let m = ops.list_members().await.unwrap();
    assert!(m.members.iter().any(|x| x.node_id == 9 && !x.voter), "{m:?}");
    ops.remove_member(9).await.unwrap();
    assert_eq!(voters(&ops.list_members().await.unwrap()), vec![1, 2, 3]);

    // A follower relays a change to the leader like any write (api::forward): the leader's
    // own answer comes back, marked with who served it.
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.nodes.iter().find(|n| n.id != leader).unwrap();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", follower.addr)).unwrap().connect_lazy();
    let mut raw = AdminServiceClient::new(channel);
    let status = common::eventually_async(PATIENCE, "the follower to relay", || {
        let mut raw = raw.clone();
        let mut req = tonic::Request::new(RemoveMemberRequest { node_id: 9 });
        req.metadata_mut().insert("authorization", format!("Bearer {admin}").parse().unwrap());
        async move { raw.remove_member(req).await.err().filter(|s| s.metadata().contains_key("x-dls-forwarded-to")) }
    })
    .await;
    assert_eq!(status.metadata().get("x-dls-error").unwrap(), "MEMBERSHIP_REFUSED");
    assert_eq!(status.metadata().get("x-dls-forwarded-to").unwrap(), leader.to_string().as_str());
    let mut req = tonic::Request::new(AddMemberRequest::default());
    req.metadata_mut().insert("authorization", format!("Bearer {limited}").parse().unwrap());
    assert_eq!(raw.add_member(req).await.unwrap_err().code(), tonic::Code::PermissionDenied);
}

#[tokio::test]
async fn the_last_voter_cannot_be_removed_and_the_cli_lists_members() {
    let cluster = Cluster::start(1).await;
    let client = common::patient_client(cluster.endpoints()).await;
    let err = client.remove_member(1).await.unwrap_err();
    assert_eq!(err.code(), "MEMBERSHIP_REFUSED");
    assert!(err.message().contains("last voter"), "{err}");
    let out = common::dls(&["members", "list", "--endpoints", &cluster.addr(1)]);
    assert!(out.contains("NODE") && out.contains("voter") && out.contains("leader: node 1"), "{out}");
    let bad = std::process::Command::new(caerus_testkit::dls_bin())
        .args(["members", "add", "4", "127.0.0.1:7070", "--endpoints", &cluster.addr(1)])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("PEER_PORT"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// openraft changes membership in two steps driven by the caller. A client that gives up
/// between them (here: its attempt times out while the new configuration cannot commit)
/// must not leave the cluster in the joint configuration: the change finishes on its own
/// once the voters it needs are back.
#[tokio::test]
async fn a_change_whose_caller_gives_up_still_finishes_when_the_voters_return() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let (stopped, removed) = {
        let f: Vec<u64> = (1..=3).filter(|&n| n != leader).collect();
        (f[0], f[1])
    };
    // The new voters would be {leader, stopped}: nothing commits while `stopped` is paused.
    cluster.signal(stopped, "STOP");
    // Aimed at the leader: with a 1 s budget, a first attempt at the paused node would
    // spend it all (no new attempt starts after the retry deadline) and the change would
    // never be asked for.
    let impatient = DlsClient::connect(
        ClientConfig::new([cluster.addr(leader)])
            .with_request_timeout(Duration::from_millis(300))
            .with_retry_deadline(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let gave_up = impatient.remove_member(removed).await;
    assert!(gave_up.is_err(), "the change cannot commit while node {stopped} is paused: {gave_up:?}");
    cluster.signal(stopped, "CONT");

    let client = common::patient_client(cluster.endpoints()).await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let m = client.list_members().await.unwrap();
        if !m.changing
            && voters(&m) == {
                let mut v = vec![leader, stopped];
                v.sort();
                v
            }
        {
            break;
        }
        assert!(Instant::now() < deadline, "the change did not finish after its caller gave up: {m:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::assert_next_grant(&client).await;
}

//! Graceful stops and leadership hand-off (`server/src/handoff.rs`, `server/src/serve.rs`):
//! a leader that gets SIGTERM hands leadership to a caught-up voter before it exits, `dls
//! members transfer-leader` does the same on demand and refuses what cannot lead, and a
//! stopping node sends the clients waiting on it to the leader at once.

use std::time::Duration;

use caerus_core::{AddMemberOptions, ClientConfig, DlsClient};
use caerus_proto::v1 as pb;
use caerus_proto::v1::acquire_lock_response::Event;
use tonic::Code;

use super::calls::exclusive;
use super::common::{
    add_key, assert_next_grant, dls, eventually, eventually_async, opts, patient_client, raw_client, take, Cluster,
    ContendedWorkload, Spec, PATIENCE,
};

/// Node `id`'s own view: the node it takes for the leader and its role.
async fn view(client: &DlsClient, cluster: &Cluster, id: u64) -> Option<(Option<u64>, String)> {
    let s = client.cluster_status_of(&cluster.addr(id)).await.ok()?;
    Some((s.leader_id, s.role))
}

/// The node that serves as leader, once it is one of `among`.
async fn leader_among(client: &DlsClient, cluster: &Cluster, among: &[u64]) -> u64 {
    eventually_async(PATIENCE, "one of the nodes to lead", || async {
        for &id in among {
            if let Some((Some(leader), role)) = view(client, cluster, id).await {
                if leader == id && role == "Leader" {
                    return Some(id);
                }
            }
        }
        None
    })
    .await
}

#[tokio::test]
async fn sigterm_on_the_leader_hands_leadership_over_before_it_exits() {
    let mut cluster = Cluster::start(3).await;
    let client = patient_client(cluster.endpoints()).await;
    let old = cluster.wait_for_leader(PATIENCE).await;
    let load = ContendedWorkload::start(&client, 4, &["a", "b"]);
    eventually_async(PATIENCE, "the workload to be granted", || async { (load.grants() > 5).then_some(()) }).await;

    let status = cluster.terminate(old, PATIENCE).await.expect("the leader exits on SIGTERM");
    assert!(status.success(), "node {old} exited with {status}");
    // The very first look after the exit already finds a successor that leads and knows it:
    // it was elected while the old leader still ran. Without a hand-off the others go on
    // naming the dead leader until their election timeout passes, then elect one.
    let others: Vec<u64> = cluster.ids().into_iter().filter(|&id| id != old).collect();
    let mut leading = Vec::new();
    for &id in &others {
        if let Some((Some(leader), role)) = view(&client, &cluster, id).await {
            if leader == id && role == "Leader" {
                leading.push(id);
            }
        }
    }
    assert_eq!(leading.len(), 1, "right after node {old} exited, exactly one other node leads: {leading:?}");
    let new = leading[0];
    assert!(cluster.log_of(new).contains("asked to take leadership over"), "node {new} was asked to take over");

    // The clients keep being granted, with mutual exclusion and rising tokens throughout.
    let before = load.grants();
    eventually_async(PATIENCE, "grants after the stop", || async { (load.grants() > before + 5).then_some(()) }).await;
    assert_next_grant(&client).await;
    let history = load.stop_and_check(&client).await;
    assert!(history.len() > 10, "{} grants", history.len());
}

#[tokio::test]
async fn transfer_leader_moves_leadership_to_the_named_voter_or_the_most_caught_up_one() {
    let cluster = Cluster::start(3).await;
    let client = patient_client(cluster.endpoints()).await;
    let old = cluster.wait_for_leader(PATIENCE).await;
    let target = cluster.ids().into_iter().find(|&id| id != old).unwrap();
    let endpoints = cluster.endpoints().join(",");

    // The operator's command, sent to any node (a follower relays it).
    let out = dls(&["members", "transfer-leader", &target.to_string(), "--endpoints", &endpoints]);
    assert!(out.contains(&format!("node {target} at {} leads now", cluster.addr(target))), "{out}");
    assert_eq!(leader_among(&client, &cluster, &cluster.ids()).await, target);
    assert_next_grant(&client).await;

    // Asking for the leader itself changes nothing; without a node, another voter takes over.
    assert_eq!(client.transfer_leader(Some(target)).await.unwrap().node_id, target);
    let moved = client.transfer_leader(None).await.unwrap();
    assert_ne!(moved.node_id, target);
    assert_eq!(leader_among(&client, &cluster, &cluster.ids()).await, moved.node_id);
    assert_next_grant(&client).await;
}

#[tokio::test]
async fn transfer_leader_refuses_a_learner_a_stranger_and_a_namespace_limited_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = add_key(&keys, "ops", &[], true);
    let limited = add_key(&keys, "team-ops", &["team-"], true);
    let spec = Spec {
        nodes: 3,
        extra: vec!["--api-keys-file".into(), keys.to_str().unwrap().into()],
        probe_key: Some(admin.clone()),
        ..Spec::default()
    };
    let cluster = Cluster::start_spec(spec).await;
    let with_key = |key: &str| {
        let config = ClientConfig::new(cluster.endpoints()).with_api_key(key.to_string()).with_retry_deadline(PATIENCE);
        async move { DlsClient::connect(config).await.unwrap() }
    };
    let ops = with_key(&admin).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;

    let err = with_key(&limited).await.transfer_leader(None).await.unwrap_err();
    assert_eq!(err.code(), "PERMISSION_DENIED", "{err}");
    let err = ops.transfer_leader(Some(9)).await.unwrap_err();
    assert_eq!(err.code(), "MEMBERSHIP_REFUSED", "{err}");
    assert!(err.message().contains("node 9 is not a member"), "{err}");
    // A learner that never caught up (it was never started) cannot lead.
    let quick = AddMemberOptions { stay_learner: true, catch_up_timeout: Some(Duration::from_millis(200)) };
    let _ = ops.add_member(9, "127.0.0.1:1", "127.0.0.1:2", quick).await;
    eventually_async(PATIENCE, "node 9 to be a learner", || async {
        let m = ops.list_members().await.ok()?;
        m.members.iter().any(|x| x.node_id == 9 && !x.voter).then_some(())
    })
    .await;
    let err = ops.transfer_leader(Some(9)).await.unwrap_err();
    assert_eq!(err.code(), "MEMBERSHIP_REFUSED", "{err}");
    assert!(err.message().contains("node 9 is a learner"), "{err}");
    // Nothing moved: the same leader serves.
    assert_eq!(cluster.wait_for_leader(PATIENCE).await, leader);
    let tx = ops.begin_transaction(opts(5_000)).await.unwrap();
    take(&tx, "after-refusals").await;
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_wait_on_a_stopping_follower_is_sent_to_the_leader_and_re_attaches_with_its_request_id() {
    // Slow elections: the leader named must be the one the test knows, and a loaded test
    // host must not make the nodes elect another meanwhile.
    let spec = Spec {
        nodes: 3,
        fast_elections: false,
        extra: ["--heartbeat-ms", "100", "--election-timeout-ms", "1000"].map(String::from).into(),
        ..Spec::default()
    };
    let mut cluster = Cluster::start_spec(spec).await;
    let client = patient_client(cluster.endpoints()).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let follower = cluster.ids().into_iter().find(|&id| id != leader).unwrap();
    // Someone holds the key, so the wait stays open.
    let holder = client.begin_transaction(opts(30_000)).await.unwrap();
    take(&holder, "k").await;

    // A client attached to the follower only: its wait is relayed to the leader.
    let mut on_follower = raw_client(&cluster.addr(follower)).await;
    let begin = pb::BeginTransactionRequest { timeout_ms: 30_000, ..Default::default() };
    let txn = on_follower.begin_transaction(begin).await.unwrap().into_inner().transaction_id;
    let wait = pb::AcquireLockRequest { request_id: "wait-1".into(), ..exclusive(txn, "k") };
    let mut stream = on_follower.acquire_lock(wait.clone()).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(first.event, Some(Event::Queued(_))), "{first:?}");

    // The follower is stopped: the stream ends at once with NOT_LEADER naming the leader
    // (not cut when the node goes), and the node exits cleanly. It can name only a leader
    // it knows: right after the election it may not have heard of it yet.
    eventually(PATIENCE, "the follower to know the leader", || {
        (cluster.metric_now(follower, "dls_leader_id")? == leader as f64).then_some(())
    })
    .await;
    cluster.signal(follower, "TERM");
    let ended = stream.message().await.expect_err("the stream ends with a status");
    assert_eq!(ended.code(), Code::Unavailable, "{ended:?}");
    assert_eq!(ended.metadata().get("x-dls-error").unwrap(), "NOT_LEADER", "{ended:?}");
    let Some(named) = ended.metadata().get("x-dls-leader-addr") else {
        cluster.dump_logs();
        panic!("no leader named: {ended:?}");
    };
    let named = named.to_str().unwrap();
    assert_eq!(named, cluster.addr(leader));
    let status = cluster.wait_for_exit(follower, PATIENCE).await;
    assert!(status.success(), "node {follower} exited with {status}");

    // Re-attached there with the same request id, it is the same wait: granted once the
    // holder commits.
    let mut on_leader = raw_client(named).await;
    let mut stream = on_leader.acquire_lock(wait).await.unwrap().into_inner();
    let again = stream.message().await.unwrap().unwrap();
    assert!(matches!(again.event, Some(Event::Queued(_))), "{again:?}");
    holder.commit().await.unwrap();
    let granted = tokio::time::timeout(PATIENCE, async {
        loop {
            let update = stream.message().await.unwrap().expect("the stream goes on until the grant");
            if matches!(update.event, Some(Event::Granted(_))) {
                return update;
            }
        }
    })
    .await
    .expect("the re-attached wait is granted");
    assert!(matches!(granted.event, Some(Event::Granted(_))), "{granted:?}");
}

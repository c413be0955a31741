//! The raft transport is a trust boundary: forged raft messages, written here byte by byte
//! as an attacker would (bincode of openraft's types is easy to forge), are refused on every
//! port a node opens, before they reach openraft; the cluster keeps its term and goes on
//! granting locks. Nodes of another cluster and client certificates are refused too.

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, LockMode};
use caerus_proto::raft::raft_service_client::RaftServiceClient;
use caerus_proto::raft::RaftPayload;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::ClusterStatusRequest;
use common::{eventually_async, opts, wait, Cluster, Spec, PATIENCE};
use tonic::transport::{Channel, ClientTlsConfig};
use tonic::{Code, Request};

/// A VoteRequest for term 2^64-1 from a node 99 that does not exist, as bincode lays it
/// out: vote = (term u64, node_id u64, committed bool), last_log_id = None.
fn forged_vote() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u64::MAX.to_le_bytes());
    b.extend(99u64.to_le_bytes());
    b.push(0);
    b.push(0);
    b
}

/// An empty AppendEntries from a "leader" of term 2^64-1: vote (committed), no
/// prev_log_id, no entries, no leader_commit. Accepted, it makes a node persist the term
/// and follow a leader that does not exist.
fn forged_append() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(u64::MAX.to_le_bytes());
    b.extend(99u64.to_le_bytes());
    b.push(1);
    b.push(0);
    b.extend(0u64.to_le_bytes());
    b.push(0);
    b
}

fn channel(addr: &str, tls: Option<&ClientTlsConfig>) -> Channel {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}")).unwrap().timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls.clone()).unwrap();
    }
    endpoint.connect_lazy()
}

/// Sends the forged Vote and AppendEntries with the given metadata; returns both answers.
async fn forge(
    addr: &str,
    tls: Option<&ClientTlsConfig>,
    metadata: &[(&'static str, String)],
) -> Vec<Result<RaftPayload, tonic::Status>> {
    let mut client = RaftServiceClient::new(channel(addr, tls));
    let request = |data: Vec<u8>| {
        let mut r = Request::new(RaftPayload { data, is_error: false, seq: 0 });
        for (k, v) in metadata {
            r.metadata_mut().insert(*k, v.parse().unwrap());
        }
        r
    };
    vec![
        client.vote(request(forged_vote())).await.map(|r| r.into_inner()),
        client.append_entries(request(forged_append())).await.map(|r| r.into_inner()),
    ]
}

async fn term_of(addr: &str, tls: Option<&ClientTlsConfig>) -> u64 {
    let mut admin = AdminServiceClient::new(channel(addr, tls));
    admin.cluster_status(ClusterStatusRequest::default()).await.unwrap().into_inner().term
}

fn cluster_id(cluster: &Cluster, id: u64) -> String {
    let n = cluster.nodes.iter().find(|n| n.id == id).unwrap();
    let text = std::fs::read_to_string(n.data_dir.join("cluster-id.toml")).unwrap();
    let line = text.lines().find(|l| l.starts_with("cluster_id")).expect("cluster_id in cluster-id.toml");
    line.split('"').nth(1).unwrap().to_string()
}

fn assert_refused(answers: &[Result<RaftPayload, tonic::Status>], code: Code, what: &str) {
    for a in answers {
        match a {
            Err(s) => assert_eq!(s.code(), code, "{what}: {s:?}"),
            Ok(p) => panic!("{what}: a forged raft message was answered: {p:?}"),
        }
    }
}

#[tokio::test]
async fn forged_raft_messages_are_refused_on_every_port_and_the_cluster_goes_on() {
    let cluster = Cluster::start(3).await;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let before = client
        .with_transaction(opts(5_000), |tx| async move {
            tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(2_000)).await
        })
        .await
        .unwrap();
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let term = term_of(&cluster.addr(leader), None).await;
    let id = cluster_id(&cluster, 1);
    for n in 2..=3 {
        assert_eq!(cluster_id(&cluster, n), id, "every node derives the same cluster id");
    }

    for n in &cluster.nodes {
        // The client port does not serve the raft transport at all.
        assert_refused(&forge(&n.addr, None, &[]).await, Code::Unimplemented, "client port");
        // The peer port: no credentials, a wrong secret, the right secret for another cluster.
        assert_refused(&forge(&n.peer_addr, None, &[]).await, Code::Unauthenticated, "peer port, no secret");
        let guess = [("x-dls-peer-secret", "guessed-secret-1234".to_string()), ("x-dls-cluster-id", id.clone())];
        assert_refused(&forge(&n.peer_addr, None, &guess).await, Code::Unauthenticated, "peer port, wrong secret");
        // Every call names a member as the node it comes from; only the cluster id is off here.
        let member = ("x-dls-from-node", leader.to_string());
        let foreign = [
            ("x-dls-peer-secret", cluster.secret.clone()),
            ("x-dls-cluster-id", "another".to_string()),
            member.clone(),
        ];
        assert_refused(&forge(&n.peer_addr, None, &foreign).await, Code::PermissionDenied, "peer port, other cluster");
        // Every credential right, but meant for another node (an address two --peers
        // entries share): refused, so no node answers for a peer.
        let elsewhere = [
            ("x-dls-peer-secret", cluster.secret.clone()),
            ("x-dls-cluster-id", id.clone()),
            ("x-dls-to-node", (n.id % 3 + 1).to_string()),
            member,
        ];
        assert_refused(
            &forge(&n.peer_addr, None, &elsewhere).await,
            Code::PermissionDenied,
            "peer port, another node's",
        );
        // The HTTP port speaks HTTP/1.1 JSON only: a gRPC call does not get through.
        for answer in forge(&n.http_addr, None, &[]).await {
            assert!(answer.is_err(), "HTTP port answered a raft call: {answer:?}");
        }
    }

    // Nothing reached raft: same term everywhere, and locks are still granted, with higher tokens.
    for n in &cluster.nodes {
        assert_eq!(term_of(&n.addr, None).await, term, "node {} term moved", n.id);
    }
    let after = client
        .with_transaction(opts(5_000), |tx| async move {
            tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(2_000)).await
        })
        .await
        .unwrap();
    assert!(after.fencing_token > before.fencing_token);
    assert!(cluster.log_of(1).contains("peer call refused"), "refusals are logged");

    // Control: the very same bytes, with this cluster's credentials, are taken by raft (the
    // follower adopts the forged term). Only the gate stood between them and the cluster.
    let follower = (1..=3).find(|&n| n != leader).unwrap();
    let creds = [
        ("x-dls-peer-secret", cluster.secret.clone()),
        ("x-dls-cluster-id", id),
        ("x-dls-to-node", follower.to_string()),
        ("x-dls-from-node", leader.to_string()),
    ];
    let node = cluster.nodes.iter().find(|n| n.id == follower).unwrap();
    let answers = forge(&node.peer_addr, None, &creds[..]).await;
    assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|p| !p.is_error)), "{answers:?}");
    // The term a node reports follows raft's published metrics, a moment after the answer.
    let addr = node.addr.clone();
    eventually_async(PATIENCE, "the authenticated forgery to take effect", || {
        let addr = addr.clone();
        async move { (term_of(&addr, None).await == u64::MAX).then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn with_mutual_tls_peers_need_a_node_certificate_of_the_cluster_ca() {
    let certs = tempfile::tempdir().unwrap();
    common::make_certs(certs.path(), 3);
    let other = tempfile::tempdir().unwrap();
    common::make_certs(other.path(), 1);
    let probe = common::client_tls(certs.path(), None);
    let spec = Spec {
        nodes: 3,
        extra: common::tls_flags(certs.path()),
        probe_tls: Some(probe.clone()),
        no_secret: true,
        ..Spec::default()
    };
    let cluster = Cluster::start_spec(spec).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let term = term_of(&cluster.addr(leader), Some(&probe)).await;
    let id = cluster_id(&cluster, 1);
    let creds = [("x-dls-cluster-id", id)];

    for n in &cluster.nodes {
        // No client certificate: the TLS handshake itself fails.
        for answer in forge(&n.peer_addr, Some(&probe), &creds).await {
            assert!(answer.is_err(), "node {}: answered without a client certificate", n.id);
        }
        // A node certificate of another CA: refused by the handshake too.
        for answer in forge(&n.peer_addr, Some(&common::client_tls(other.path(), Some("node-1"))), &creds).await {
            assert!(answer.is_err(), "node {}: answered a certificate of another CA", n.id);
        }
        // A client certificate of the cluster's own CA opens the client port, never the peer port.
        let app = common::client_tls(certs.path(), Some("client-app"));
        assert_refused(&forge(&n.peer_addr, Some(&app), &creds).await, Code::Unauthenticated, "client certificate");
        // Plain text on a TLS port goes nowhere.
        for answer in forge(&n.peer_addr, None, &creds).await {
            assert!(answer.is_err(), "node {}: answered plain text on the peer port", n.id);
        }
    }
    for n in &cluster.nodes {
        assert_eq!(term_of(&n.addr, Some(&probe)).await, term, "node {} term moved", n.id);
    }
}

#[tokio::test]
async fn a_node_with_another_cluster_id_is_refused_by_its_peers() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let outsider = (1..=3).find(|&n| n != leader).unwrap();
    cluster.kill(outsider);
    let node = cluster.nodes.iter().find(|n| n.id == outsider).unwrap();
    let file = node.data_dir.join("cluster-id.toml");
    let text =
        std::fs::read_to_string(&file).unwrap().replace(&cluster_id(&cluster, outsider), "0000another0cluster0000");
    std::fs::write(&file, text).unwrap();
    cluster.restart(outsider);

    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let tx = client.begin_transaction(opts(5_000)).await.unwrap();
    tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(2_000)).await.unwrap();
    tx.commit().await.unwrap();
    common::eventually(PATIENCE, "the other nodes to refuse the outsider's calls", || {
        let theirs = (1..=3).filter(|&n| n != outsider).any(|n| cluster.log_of(n).contains("another0cluster"));
        theirs.then_some(())
    })
    .await;
    // The outsider never receives the new entries: the leader's calls are refused by it too.
    let ours = cluster.log_of(outsider);
    assert!(ours.contains("peer call refused"), "the outsider refuses the cluster's calls too");
}

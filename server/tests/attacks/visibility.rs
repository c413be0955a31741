//! Per-namespace visibility: lock metrics labelled by namespace, with a label set no client
//! can grow past `--metrics-namespaces` plus "other", counted alike on every node.

use std::collections::BTreeSet;

use caerus_core::{ClientConfig, DlsClient, Error, LockMode};
use caerus_proto::v1 as pb;
use caerus_testkit::{add_key, eventually, http_get, opts, patient_client, raw_client, wait, Cluster, PATIENCE};

fn scrape(http_addr: &str) -> String {
    let (status, body) = http_get(http_addr, "/metrics").unwrap();
    assert_eq!(status, 200, "/metrics answered {status}: {body}");
    body
}

/// The value of the sample `series` (name with its labels, as written), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Every value the `namespace` label takes in the `dls_namespace_*` families.
fn namespace_labels(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("dls_namespace_"))
        .filter_map(|l| Some(l.split_once("namespace=\"")?.1.split_once('"')?.0.to_string()))
        .collect()
}

#[tokio::test]
async fn a_key_using_many_namespaces_cannot_grow_the_namespace_labels_past_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let key = add_key(&file, "tenant", &[], false);
    let flags = ["--api-keys-file", file.to_str().unwrap(), "--metrics-namespaces", "3"];
    let cluster = Cluster::start_full(1, &flags, Some(key.clone())).await;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(key)).await.unwrap();
    let namespaces = 40;
    for i in 0..namespaces {
        let tx = client.begin_transaction(opts(10_000)).await.unwrap();
        tx.acquire_lock(&format!("tenant-{i}"), "k", LockMode::Exclusive, wait(2_000)).await.unwrap();
        tx.commit().await.unwrap();
    }
    let text = scrape(&cluster.http_addr(1));
    let labels = namespace_labels(&text);
    assert!(labels.len() <= 4, "more than 3 namespaces plus other: {labels:?}");
    assert!(labels.contains("other"), "{labels:?}");
    // Nothing is lost to the bound: the labelled series and "other" add up to every grant.
    let by_namespace: f64 = labels
        .iter()
        .map(|ns| sample(&text, &format!("dls_namespace_grants_total{{namespace=\"{ns}\"}}")).unwrap())
        .sum();
    assert_eq!(Some(by_namespace), sample(&text, "dls_grants_total"));
    assert!(by_namespace >= namespaces as f64);
}

/// A transaction begun on the wire with a short lease that nobody renews.
async fn abandoned_holder(addr: &str, namespace: &str) {
    let mut c = raw_client(addr).await;
    let begin = pb::BeginTransactionRequest { timeout_ms: 1_000, ..Default::default() };
    let txn = c.begin_transaction(begin).await.unwrap().into_inner().transaction_id;
    let acquire = pb::AcquireLockRequest {
        transaction_id: txn,
        request_id: "abandoned".into(),
        namespace: namespace.into(),
        key: "k".into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 1_000,
        ..Default::default()
    };
    let mut stream = c.acquire_lock(acquire).await.unwrap().into_inner();
    while let Some(m) = stream.message().await.unwrap() {
        if matches!(m.event, Some(pb::acquire_lock_response::Event::Granted(_))) {
            return;
        }
    }
    panic!("the abandoned holder's acquire ended without a grant");
}

#[tokio::test]
async fn waits_holds_revocations_and_deadlocks_are_counted_by_namespace_on_every_node() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let client = patient_client(cluster.endpoints()).await;

    // billing: a wait that ends in a grant, then two releases.
    let first = client.begin_transaction(opts(10_000)).await.unwrap();
    first.acquire_lock("billing", "run", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let second = client.begin_transaction(opts(10_000)).await.unwrap();
    let queued = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire_lock("billing", "run", LockMode::Exclusive, wait(10_000)).await })
    };
    let leader_http = cluster.http_addr(leader);
    eventually(PATIENCE, "the second billing request to queue", || {
        sample(&scrape(&leader_http), "dls_namespace_waits_total{namespace=\"billing\"}").filter(|v| *v >= 1.0)
    })
    .await;
    first.commit().await.unwrap();
    queued.await.unwrap().unwrap();
    second.commit().await.unwrap();

    // reports: a holder whose lease lapses.
    abandoned_holder(&cluster.addr(leader), "reports").await;

    // cycle: two transactions wait for each other; one is aborted as the victim.
    let (a, b) =
        (client.begin_transaction(opts(10_000)).await.unwrap(), client.begin_transaction(opts(10_000)).await.unwrap());
    a.acquire_lock("cycle", "x", LockMode::Exclusive, wait(1_000)).await.unwrap();
    b.acquire_lock("cycle", "y", LockMode::Exclusive, wait(1_000)).await.unwrap();
    let a_waits = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire_lock("cycle", "y", LockMode::Exclusive, wait(10_000)).await })
    };
    eventually(PATIENCE, "a to wait for y", || {
        sample(&scrape(&leader_http), "dls_namespace_waits_total{namespace=\"cycle\"}").filter(|v| *v >= 1.0)
    })
    .await;
    let b_waits = b.acquire_lock("cycle", "x", LockMode::Exclusive, wait(10_000)).await;
    let outcomes = [a_waits.await.unwrap().map(|_| ()), b_waits.map(|_| ())];
    assert_eq!(
        outcomes.iter().filter(|o| matches!(o, Err(Error::DeadlockVictim { .. }))).count(),
        1,
        "one victim: {outcomes:?}"
    );

    let expected = [
        ("dls_namespace_grants_total{namespace=\"billing\"}", 2.0),
        ("dls_namespace_waits_total{namespace=\"billing\"}", 1.0),
        ("dls_namespace_wait_seconds_count{namespace=\"billing\"}", 1.0),
        ("dls_namespace_hold_seconds_count{namespace=\"billing\"}", 2.0),
        ("dls_namespace_revocations_total{namespace=\"reports\",cause=\"expired\"}", 1.0),
        ("dls_namespace_hold_seconds_count{namespace=\"reports\"}", 1.0),
        ("dls_namespace_deadlocks_total{namespace=\"cycle\"}", 1.0),
        ("dls_namespace_revocations_total{namespace=\"cycle\",cause=\"deadlock_victim\"}", 1.0),
        ("dls_namespace_revocations_total{namespace=\"billing\",cause=\"expired\"}", 0.0),
    ];
    for id in cluster.ids() {
        let http = cluster.http_addr(id);
        eventually(PATIENCE, &format!("node {id} to count every namespace's activity"), || {
            let text = scrape(&http);
            expected.iter().all(|(series, want)| sample(&text, series) == Some(*want)).then_some(())
        })
        .await;
    }
}

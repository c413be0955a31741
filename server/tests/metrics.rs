//! The operator HTTP port of real `dls` nodes: /metrics, /healthz, /readyz.

use crate::common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};
use common::{eventually, free_port, http_get, Cluster};

const NAMES: [&str; 20] = [
    "dls_grants_total",
    "dls_waits_total",
    "dls_deadlocks_total",
    "dls_expiries_total",
    "dls_transactions_begun_total",
    "dls_transactions_finished_total",
    "dls_wait_seconds",
    "dls_active_transactions",
    "dls_held_locks",
    "dls_waiting_requests",
    "dls_last_fencing_token",
    "dls_last_event_sequence",
    "dls_raft_term",
    "dls_is_leader",
    "dls_leader_id",
    "dls_commit_index",
    "dls_applied_index",
    "dls_apply_lag",
    "dls_raft_log_fsync_seconds",
    "dls_webhook_backlog",
];

async fn client(endpoints: Vec<String>) -> DlsClient {
    DlsClient::connect(ClientConfig::new(endpoints).without_api_key()).await.unwrap()
}

fn scrape(http_addr: &str) -> String {
    let (status, body) = http_get(http_addr, "/metrics").unwrap();
    assert_eq!(status, 200, "/metrics answered {status}: {body}");
    body
}

/// The value of an unlabelled sample (or of `name{labels}` given in full).
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}")) as u64
}

#[tokio::test]
async fn metrics_are_exposed_and_move_with_grants_and_waits() {
    let cluster = Cluster::start(1).await;
    let http = cluster.http_addr(1);
    assert_eq!(http_get(&http, "/healthz").unwrap().0, 200);
    eventually(Duration::from_secs(10), "/readyz to answer 200", || {
        (http_get(&http, "/readyz").ok()?.0 == 200).then_some(())
    })
    .await;

    let before = scrape(&http);
    for name in NAMES {
        assert!(before.contains(&format!("# TYPE {name} ")), "{name} missing from /metrics:\n{before}");
    }
    assert_eq!(sample(&before, "dls_is_leader"), 1);
    assert_eq!(sample(&before, "dls_leader_id"), 1);

    // One grant at once, then a wait that ends in a grant.
    let c = client(cluster.endpoints()).await;
    let opts = || TransactionOptions::default().with_timeout_ms(10_000);
    let wait = AcquireOptions::default().with_timeout_ms(10_000);
    let holder = c.begin_transaction(opts()).await.unwrap();
    let first = holder.acquire_lock("metrics", "k", LockMode::Exclusive, wait.clone()).await.unwrap();
    let waiter = c.begin_transaction(opts()).await.unwrap();
    let queued = tokio::spawn(async move {
        let lock = waiter.acquire_lock("metrics", "k", LockMode::Exclusive, wait).await.unwrap();
        (waiter, lock)
    });
    eventually(Duration::from_secs(10), "the second request to queue", || {
        (sample(&scrape(&http), "dls_waiting_requests") == 1).then_some(())
    })
    .await;
    holder.commit().await.unwrap();
    let (waiter, second) = queued.await.unwrap();
    assert!(second.fencing_token > first.fencing_token);

    let after = scrape(&http);
    assert!(sample(&after, "dls_grants_total") >= sample(&before, "dls_grants_total") + 2);
    assert_eq!(sample(&after, "dls_last_fencing_token"), second.fencing_token);
    assert!(sample(&after, "dls_last_fencing_token") > sample(&before, "dls_last_fencing_token"));
    assert!(sample(&after, "dls_waits_total") >= 1);
    assert!(sample(&after, "dls_wait_seconds_count") >= 1);
    assert_eq!(sample(&after, "dls_transactions_finished_total{cause=\"committed\"}"), 1);
    assert_eq!(sample(&after, "dls_active_transactions"), 1);
    assert_eq!(sample(&after, "dls_held_locks"), 1);
    assert!(sample(&after, "dls_applied_index") > sample(&before, "dls_applied_index"));
    waiter.commit().await.unwrap();
}

#[tokio::test]
async fn every_node_of_a_cluster_is_ready_and_agrees_on_one_leader() {
    let cluster = Cluster::start(3).await;
    // Right after an election an old leader may still be stepping down: wait for one
    // consistent view rather than asserting on the first scrape.
    let (leader, leaders) = eventually(Duration::from_secs(10), "every node ready, agreeing on one leader", || {
        let mut leader_ids = BTreeSet::new();
        let mut leaders = Vec::new();
        for n in &cluster.nodes {
            if http_get(&n.http_addr, "/readyz").ok()?.0 != 200 {
                return None;
            }
            let text = scrape(&n.http_addr);
            leader_ids.insert(sample(&text, "dls_leader_id"));
            if sample(&text, "dls_is_leader") == 1 {
                leaders.push(n.id);
            }
        }
        (leader_ids.len() == 1).then(|| (leader_ids.pop_first().unwrap(), leaders))
    })
    .await;
    assert_eq!(leaders, vec![leader], "only the agreed leader says it leads");
}

#[tokio::test]
async fn a_node_waiting_to_be_added_is_not_ready_for_want_of_a_membership() {
    let mut cluster = Cluster::start(3).await;
    cluster.spawn_joining_node(4);
    let http = cluster.http_addr(4);
    let (status, body) =
        eventually(Duration::from_secs(10), "node 4's /readyz", || http_get(&http, "/readyz").ok()).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("no cluster membership"), "{body}");
}

#[test]
fn a_busy_http_port_stops_the_server_with_an_error_naming_the_flag() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = busy.local_addr().unwrap().to_string();
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(caerus_testkit::dls_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port()), "--http-listen", &http])
        .arg("--data-dir")
        .arg(data.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--http-listen") && stderr.contains(&http), "unhelpful error: {stderr}");
}

//! The operator side against real `dls` processes: the `dls locks | txn | events | status`
//! commands (the built binary), admin key enforcement, and an event stream that follows
//! the log across a SIGKILL of the leader.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use caerus_core::{
    ClientConfig, DlsClient, Error, Event, EventDetail, EventKind, LostKind, Transaction, TransactionOptions,
    TransactionState, WatchOptions,
};
use common::{queued, take, Cluster, PATIENCE};

async fn client_with(cluster: &Cluster, key: Option<&str>) -> DlsClient {
    let config = ClientConfig::new(cluster.endpoints()).with_retry_deadline(PATIENCE);
    let config = match key {
        Some(k) => config.with_api_key(k),
        None => config.without_api_key(),
    };
    DlsClient::connect(config).await.unwrap()
}

async fn client(cluster: &Cluster) -> DlsClient {
    client_with(cluster, None).await
}

async fn begin(client: &DlsClient, name: &str) -> Transaction {
    client.begin_transaction(TransactionOptions::default().with_timeout_ms(10_000).with_name(name)).await.unwrap()
}

/// What a `dls` run printed and how it ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs the built `dls` with `args`, the API key (if any) in `CAERUS_API_KEY`, and
/// nothing else from this process's environment that could point it elsewhere.
async fn dls(args: &[&str], key: Option<&str>) -> Run {
    let mut cmd = tokio::process::Command::new(caerus_testkit::dls_bin());
    cmd.args(args).env_remove("CAERUS_API_KEY").env_remove("DLS_ENDPOINTS").env("DLS_LOG", "warn").kill_on_drop(true);
    if let Some(k) = key {
        cmd.env("CAERUS_API_KEY", k);
    }
    let out = tokio::time::timeout(PATIENCE * 2, cmd.output()).await.expect("dls finished in time").expect("dls ran");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn endpoints(cluster: &Cluster) -> String {
    cluster.endpoints().join(",")
}

/// `dls keys add`: the new key, printed once on stdout.
async fn add_key(file: &Path, name: &str, admin: bool) -> String {
    let file = file.to_str().unwrap();
    let mut args = vec!["keys", "add", "--file", file, "--name", name];
    if admin {
        args.push("--admin");
    }
    let run = dls(&args, None).await;
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout.trim().to_string()
}

#[tokio::test]
async fn locks_shows_holders_and_waiters_with_their_blockers() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let holder = begin(&c, "holder-a").await;
    let waiter = begin(&c, "waiter-b").await;
    let lock = take(&holder, "k").await;
    let waiting = queued(&waiter, "k").await;

    let run = dls(&["locks", "--endpoints", &endpoints(&cluster)], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("ns/k  (1 holder, 1 waiter)"), "{run:?}");
    let rows: Vec<Vec<&str>> = run.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    let holder_row = rows.iter().find(|r| r.first() == Some(&holder.id().to_string().as_str())).expect("holder row");
    assert_eq!(holder_row[1..4], ["holder-a", "EXCLUSIVE", &lock.fencing_token.to_string()], "{run:?}");
    // POS TXN NAME MODE UPGRADE BLOCKED-BY WAITING-FOR
    let waiter_row = rows.iter().find(|r| r.get(1) == Some(&waiter.id().to_string().as_str())).expect("waiter row");
    assert_eq!(
        waiter_row[..6],
        ["1", &waiter.id().to_string(), "waiter-b", "EXCLUSIVE", "no", &holder.id().to_string()]
    );

    let run = dls(&["locks", "--namespace", "n", "--json", "--endpoints", &endpoints(&cluster)], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let k = &json["locks"][0];
    assert_eq!(k["holders"][0]["transaction_id"], holder.id());
    assert_eq!(k["holders"][0]["fencing_token"], lock.fencing_token);
    assert_eq!(k["waiters"][0]["blocking_transaction_ids"], serde_json::json!([holder.id()]));
    let run = dls(&["locks", "--namespace", "other-", "--endpoints", &endpoints(&cluster)], None).await;
    assert!(run.stdout.contains("no lock is held, waited for or delayed"), "{run:?}");

    // The typed API sees the same.
    let locks = c.list_locks("ns").await.unwrap();
    assert_eq!(locks[0].waiters[0].blocking_transaction_ids, vec![holder.id()]);
    holder.commit().await.unwrap();
    tokio::time::timeout(PATIENCE, waiting).await.unwrap().unwrap().unwrap();
    waiter.commit().await.unwrap();
}

#[tokio::test]
async fn lock_delay_sets_and_lists_rules_and_locks_shows_a_delayed_key() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let ep = endpoints(&cluster);
    let run = dls(&["lock-delay", "list", "--endpoints", &ep], None).await;
    assert!(run.code == 0 && run.stdout.contains("no lock-delay rule"), "{run:?}");
    let run = dls(&["lock-delay", "set", "ns", "2m", "--endpoints", &ep], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("lock-delay for namespaces \"ns\"*: 2m00s (was none)"), "{run:?}");
    let run = dls(&["lock-delay", "list", "--json", "--endpoints", &ep], None).await;
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["rules"][0], serde_json::json!({"namespace_prefix": "ns", "delay_ms": 120_000}), "{run:?}");

    let holder = begin(&c, "revoked").await;
    take(&holder, "k").await;
    c.abort_transaction(holder.id(), "drill").await.unwrap();
    let run = dls(&["locks", "--endpoints", &ep], None).await;
    assert!(run.stdout.contains("ns/k  (0 holders, 0 waiters)"), "{run:?}");
    assert!(run.stdout.contains(&format!("holder {} aborted by operator", holder.id())), "{run:?}");
    let run = dls(&["locks", "--json", "--endpoints", &ep], None).await;
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["locks"][0]["delay"]["cause"], "OPERATOR_ABORT", "{run:?}");

    let run = dls(&["lock-delay", "set", "ns", "11m", "--endpoints", &ep], None).await;
    assert!(run.code != 0 && run.stderr.contains("delay_ms"), "{run:?}");
    let run = dls(&["lock-delay", "set", "ns", "0", "--endpoints", &ep], None).await;
    assert!(run.code == 0 && run.stdout.contains("none (was 2m00s)"), "{run:?}");
}

#[tokio::test]
async fn txn_abort_ends_a_client_transaction_and_the_event_is_logged() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let holder = begin(&c, "stuck-worker").await;
    let waiter = begin(&c, "next-worker").await;
    let first = take(&holder, "k").await;
    let waiting = queued(&waiter, "k").await;
    let ep = endpoints(&cluster);

    let run = dls(&["txn", "show", &holder.id().to_string(), "--endpoints", &ep], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("state:       ACTIVE"), "{run:?}");
    assert!(run.stdout.contains(&format!("ns/k EXCLUSIVE token {}", first.fencing_token)), "{run:?}");

    let id = holder.id().to_string();
    let run = dls(&["txn", "abort", &id, "--reason", "stuck since the deploy", "--endpoints", &ep], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&format!("transaction {id} is ABORTED; 1 lock released")), "{run:?}");

    let lost = tokio::time::timeout(PATIENCE, holder.lost()).await.expect("the holder hears of the abort");
    assert_eq!(lost.kind, LostKind::Aborted, "{lost}");
    let next = tokio::time::timeout(PATIENCE, waiting).await.unwrap().unwrap().expect("the waiter gets the lock");
    assert!(next.fencing_token > first.fencing_token);

    let run = dls(&["txn", "show", &id, "--json", "--endpoints", &ep], None).await;
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["state"], "ABORTED");
    assert!(json["end_reason"].as_str().unwrap().contains("stuck since the deploy"), "{run:?}");

    // Aborting again is a failure that says why.
    let run = dls(&["txn", "abort", &id, "--endpoints", &ep], None).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("already ended"), "{run:?}");

    let run = dls(&["events", "--endpoints", &ep], None).await;
    assert_eq!(run.code, 0, "{run:?}");
    let line = run.stdout.lines().find(|l| l.contains("transaction_aborted")).expect("an abort event");
    assert!(line.contains(&format!("txn={id} name=stuck-worker")), "{line}");
    assert!(line.contains("reason=\"stuck since the deploy\""), "{line}");
    assert!(line.starts_with('#'), "{line}");
    assert!(run.stdout.contains(&format!("lock_revoked txn={id} lock=ns/k")), "{run:?}");

    let run = dls(&["events", "--kind", "transaction_aborted", "--json", "--endpoints", &ep], None).await;
    let events: Vec<serde_json::Value> = run.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 1, "{run:?}");
    assert_eq!(events[0]["detail"]["transaction_id"], holder.id());
    waiter.commit().await.unwrap();
}

#[tokio::test]
async fn operator_commands_need_an_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = add_key(&keys, "ops", true).await;
    let app = add_key(&keys, "app", false).await;
    let keys_arg = keys.to_str().unwrap();
    let cluster = Cluster::start_full(1, &["--api-keys-file", keys_arg], Some(admin.clone())).await;
    let ep = endpoints(&cluster);

    for args in [vec!["locks"], vec!["status"], vec!["txn", "abort", "1"]] {
        let mut args = args.clone();
        args.extend(["--endpoints", &ep]);
        let run = dls(&args, Some(&app)).await;
        assert_ne!(run.code, 0, "{args:?}: {run:?}");
        assert!(run.stderr.contains("admin key"), "{args:?}: {run:?}");
        assert!(run.stderr.contains("dls keys add"), "{args:?}: {run:?}");
    }
    let run = dls(&["locks", "--endpoints", &ep], None).await;
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("not authenticated"), "{run:?}");

    let run = dls(&["locks", "--endpoints", &ep], Some(&admin)).await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = dls(&["status", "--endpoints", &ep, "--api-key", &admin], None).await;
    assert_eq!(run.code, 0, "{run:?}");

    // The typed API: the app key is refused, the admin key may abort the app's transaction.
    let app_client = client_with(&cluster, Some(&app)).await;
    assert!(matches!(app_client.list_locks("").await, Err(Error::PermissionDenied { .. })));
    let tx = begin(&app_client, "app-work").await;
    let admin_client = client_with(&cluster, Some(&admin)).await;
    assert_eq!(admin_client.abort_transaction(tx.id(), "maintenance").await.unwrap(), TransactionState::Aborted);
    assert_eq!(tokio::time::timeout(PATIENCE, tx.lost()).await.unwrap().kind, LostKind::Aborted);
}

/// Runs `dls status` until every node answers with the same single leader.
async fn settled_status(cluster: &Cluster) -> Run {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let run = dls(&["status", "--endpoints", &endpoints(cluster)], None).await;
        let leaders = run.stdout.lines().filter(|l| l.split_whitespace().nth(2) == Some("Leader")).count();
        if run.code == 0 && leaders == 1 && run.stdout.contains("3 of 3 nodes answered") {
            return run;
        }
        assert!(Instant::now() < deadline, "the cluster did not settle: {run:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn status_shows_one_leader_three_members_and_unreachable_nodes() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let run = settled_status(&cluster).await;
    let members: Vec<String> = cluster.nodes.iter().map(|n| format!("{}={}", n.id, n.addr)).collect();
    let summary = run.stdout.lines().find(|l| l.starts_with("leader: ")).expect("summary line");
    assert!(summary.starts_with(&format!("leader: node {leader} ({})", cluster.addr(leader))), "{run:?}");
    assert!(summary.contains(&format!("members: {}", members.join(", "))), "{run:?}");

    // Given one address, the other members are found and asked too.
    let run = dls(&["status", "--json", "--endpoints", &cluster.addr(leader)], None).await;
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), 3, "{run:?}");
    assert_eq!(json["members"].as_array().unwrap().len(), 3, "{run:?}");

    let follower = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    cluster.kill(follower);
    let run = dls(&["status", "--endpoints", &endpoints(&cluster)], None).await;
    assert_eq!(run.code, 0, "a node answered: {run:?}");
    let down = run.stdout.lines().find(|l| l.contains(&cluster.addr(follower))).expect("row of the killed node");
    assert!(down.contains("unreachable"), "{run:?}");
    assert!(run.stdout.contains("2 of 3 nodes answered"), "{run:?}");

    for n in cluster.nodes.iter().map(|n| n.id).collect::<Vec<_>>() {
        cluster.kill(n);
    }
    let run = dls(&["status", "--timeout", "2", "--endpoints", &endpoints(&cluster)], None).await;
    assert_eq!(run.code, 1, "no node answered: {run:?}");
    assert!(run.stderr.starts_with("dls: "), "{run:?}");
}

/// Begins a transaction holding one lock and aborts it as an operator: two events
/// (transaction_aborted, lock_revoked). Returns the transaction id.
async fn aborted_holder(c: &DlsClient, key: &str) -> u64 {
    let tx = begin(c, "doomed").await;
    take(&tx, key).await;
    let outcome = c.abort_transaction_outcome(tx.id(), "test").await.unwrap();
    assert_eq!(outcome.released_locks, 1);
    tx.id()
}

/// Records an event of the failover test (only operator aborts happen there).
fn receive(sequences: &mut Vec<u64>, aborts_seen: &mut Vec<u64>, event: Event) {
    assert!(matches!(event.kind(), EventKind::TransactionAborted | EventKind::LockRevoked), "{event:?}");
    sequences.push(event.sequence);
    if let EventDetail::TransactionAborted { transaction_id, .. } = event.detail {
        aborts_seen.push(transaction_id);
    }
}

#[tokio::test]
async fn an_event_stream_survives_a_leader_kill_without_gaps_or_repeats() {
    let mut cluster = Cluster::start(3).await;
    let c = client(&cluster).await;
    let mut events = c.watch_events(WatchOptions::default()).await.unwrap();
    let mut aborted = Vec::new();
    for i in 0..3 {
        aborted.push(aborted_holder(&c, &format!("before-{i}")).await);
    }

    let mut sequences = Vec::new();
    let mut aborts_seen = Vec::new();
    while aborts_seen.len() < 3 || sequences.len() < 6 {
        let event = tokio::time::timeout(PATIENCE, events.next_event()).await.unwrap().unwrap().unwrap();
        receive(&mut sequences, &mut aborts_seen, event);
    }

    let old = cluster.wait_for_leader(PATIENCE).await;
    cluster.kill(old);
    cluster.wait_for_new_leader(old, PATIENCE).await;
    for i in 0..3 {
        aborted.push(aborted_holder(&c, &format!("after-{i}")).await);
    }

    while aborts_seen.len() < 6 || sequences.len() < 12 {
        let event = tokio::time::timeout(PATIENCE, events.next_event())
            .await
            .expect("the stream resumes on the new leader")
            .expect("the stream goes on")
            .expect("no stream error");
        receive(&mut sequences, &mut aborts_seen, event);
    }
    assert_eq!(aborts_seen, aborted, "every abort, in order");
    let expected: Vec<u64> = (sequences[0]..sequences[0] + 12).collect();
    assert_eq!(sequences, expected, "consecutive: no gap, no repeat");
    assert_eq!(sequences[0], 1, "a fresh cluster's log starts at 1");
}

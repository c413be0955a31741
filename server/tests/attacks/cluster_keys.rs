//! API keys kept by the cluster, on real three-node clusters: a key created through one node
//! is accepted by every node once applied; a revoked, expired or rotated-away secret is
//! refused by every node and its open streams end (a follower's forwarded stream too); a
//! prefix-limited admin manages only keys inside its prefixes; the number of keys is bounded
//! per cluster and per admin key; the keys survive a restart of every node from snapshots;
//! a key both in a node's keys file and in the cluster stops that node at start, naming it;
//! every change is an event.

use std::time::Duration;

use caerus_core::{ApiKeyLimits, ClientConfig, DlsClient, Error, NewApiKey};
use caerus_proto::v1::event::Detail;
use caerus_proto::v1::{self as pb, lock_service_client::LockServiceClient};
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

use super::calls::{exclusive, keyed};
use crate::common::{add_key, eventually_async, raw_client, Cluster, Spec, PATIENCE};

/// A three-node cluster whose nodes each read their own copy of one keys file
/// (`keys-{id}.toml`, so one node's file can be changed alone) holding `admin` (unlimited)
/// and `billing-admin` (an admin limited to `billing-`).
struct Keyed {
    cluster: Cluster,
    admin: String,
    billing_admin: String,
    dir: tempfile::TempDir,
}

impl Keyed {
    async fn start(extra: &[&str]) -> Keyed {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.toml");
        let admin = add_key(&file, "admin", &[], true);
        let billing_admin = add_key(&file, "billing-admin", &["billing-"], true);
        for id in 1..=3 {
            std::fs::copy(&file, dir.path().join(format!("keys-{id}.toml"))).unwrap();
        }
        let mut flags = vec![format!("--api-keys-file={}/keys-{{id}}.toml", dir.path().display())];
        flags.extend(extra.iter().map(|s| s.to_string()));
        let spec = Spec { nodes: 3, extra: flags, probe_key: Some(admin.clone()), ..Spec::default() };
        let cluster = Cluster::start_spec(spec).await;
        Keyed { cluster, admin, billing_admin, dir }
    }

    /// A client of every node (or of `only` node) with `key`.
    async fn client(&self, key: &str, only: Option<u64>) -> DlsClient {
        let endpoints = match only {
            Some(id) => vec![self.cluster.addr(id)],
            None => self.cluster.endpoints(),
        };
        DlsClient::connect(ClientConfig::new(endpoints).with_api_key(key)).await.unwrap()
    }

    async fn create(&self, by: &str, name: &str, key: NewApiKey) -> Result<String, Error> {
        Ok(self.client(by, None).await.create_api_key(name, key).await?.secret)
    }
}

/// How node `addr` answers a call made with `key`: Ok if it took the key (whatever the
/// call's own answer), the UNAUTHENTICATED status if it did not.
async fn accepted(addr: &str, key: &str) -> Result<(), Status> {
    let mut c = raw_client(addr).await;
    let req = pb::GetTransactionStatusRequest { transaction_id: u64::MAX };
    match c.get_transaction_status(keyed(req, key)).await {
        Err(s) if s.code() == Code::Unauthenticated => Err(s),
        _ => Ok(()),
    }
}

/// Waits until every node takes `key` (`true`) or refuses it (`false`).
async fn on_every_node(cluster: &Cluster, key: &str, taken: bool, what: &str) {
    for id in cluster.ids() {
        let addr = cluster.addr(id);
        eventually_async(PATIENCE, &format!("node {id}: {what}"), || async {
            (accepted(&addr, key).await.is_ok() == taken).then_some(())
        })
        .await;
    }
}

/// Reads a stream until it ends with an error status.
async fn end_of<T>(mut stream: Streaming<T>, what: &str) -> Status {
    let ended = async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("{what}: the stream ended without an error"),
                Err(status) => return status,
            }
        }
    };
    tokio::time::timeout(PATIENCE, ended).await.unwrap_or_else(|_| panic!("{what}: the stream did not end"))
}

/// The key events an admin's event watch on `addr` has, as (change, key, by), until `n`.
async fn key_events(addr: &str, admin: &str, n: usize) -> Vec<(pb::ApiKeyChangeKind, String, String)> {
    let mut c = raw_client(addr).await;
    let req = pb::WatchEventsRequest { kinds: vec![pb::EventKind::ApiKeyChanged as i32], ..Default::default() };
    let mut stream = c.watch_events(keyed(req, admin)).await.unwrap().into_inner();
    let mut seen = Vec::new();
    while seen.len() < n {
        let e = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .unwrap_or_else(|_| panic!("only these key events: {seen:?}"))
            .unwrap()
            .unwrap();
        let Some(Detail::ApiKeyChanged(k)) = e.detail else { panic!("not a key event: {e:?}") };
        seen.push((k.change(), k.key_name, k.by));
    }
    seen
}

fn follower_of(cluster: &Cluster, leader: u64) -> u64 {
    cluster.ids().into_iter().find(|&id| id != leader).unwrap()
}

#[tokio::test]
async fn a_cluster_key_works_on_every_node_and_its_revocation_ends_it_everywhere() {
    let k = Keyed::start(&[]).await;
    let leader = k.cluster.wait_for_leader(PATIENCE).await;
    let follower = follower_of(&k.cluster, leader);
    // Created through a follower (forwarded to the leader, which makes the secret).
    let admin = k.client(&k.admin, Some(follower)).await;
    let created = admin.create_api_key("worker", NewApiKey::default()).await.unwrap();
    let worker = created.secret;
    assert!(worker.starts_with("dls_") && created.info.name == "worker" && created.info.created_by == "admin");
    on_every_node(&k.cluster, &worker, true, "the new key is taken").await;

    // Used for real through the follower: a transaction and a lock.
    let mut c: LockServiceClient<Channel> = raw_client(&k.cluster.addr(follower)).await;
    let begin = pb::BeginTransactionRequest { timeout_ms: 30_000, ..Default::default() };
    let txn = c.begin_transaction(keyed(begin, &worker)).await.unwrap().into_inner().transaction_id;
    let mut grant = c.acquire_lock(keyed(exclusive(txn, "k"), &worker)).await.unwrap().into_inner();
    assert!(grant.message().await.unwrap().is_some());
    // An open event watch on the follower (forwarded to the leader).
    let req = pb::WatchEventsRequest { only_new: true, ..Default::default() };
    let watch = c.watch_events(keyed(req, &worker)).await.unwrap().into_inner();

    // Listed without a secret or hash (the listing has no field for them).
    let listed = admin.list_api_keys().await.unwrap();
    assert_eq!(listed.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec!["worker"]);

    admin.revoke_api_key("worker").await.unwrap();
    let ended = end_of(watch, "the revoked key's watch on a follower").await;
    assert_eq!(ended.code(), Code::Unauthenticated, "{ended:?}");
    on_every_node(&k.cluster, &worker, false, "the revoked key is refused").await;
    let again = admin.revoke_api_key("worker").await.unwrap_err();
    assert!(again.message().contains("no API key named \"worker\""), "{again:?}");

    let events = key_events(&k.cluster.addr(follower), &k.admin, 2).await;
    use pb::ApiKeyChangeKind::{ApiKeyCreated, ApiKeyRevoked};
    assert_eq!(
        events,
        vec![(ApiKeyCreated, "worker".into(), "admin".into()), (ApiKeyRevoked, "worker".into(), "admin".into())]
    );
}

#[tokio::test]
async fn rotation_keeps_the_old_secret_for_its_grace_only_and_keys_expire_by_the_cluster_clock() {
    let k = Keyed::start(&[]).await;
    let admin = k.client(&k.admin, None).await;
    let old = admin.create_api_key("rolling", NewApiKey::default()).await.unwrap().secret;
    on_every_node(&k.cluster, &old, true, "the key is taken").await;

    let rotated = admin.rotate_api_key("rolling", Duration::from_secs(3)).await.unwrap();
    assert!(rotated.info.previous_valid_until_ms.is_some());
    on_every_node(&k.cluster, &rotated.secret, true, "the new secret is taken").await;
    assert!(accepted(&k.cluster.addr(1), &old).await.is_ok(), "the old secret works during the grace");
    on_every_node(&k.cluster, &old, false, "the old secret is refused once its grace ended").await;
    on_every_node(&k.cluster, &rotated.secret, true, "the new secret still works").await;

    // Without a grace the old secret stops with the rotation.
    let newest = admin.rotate_api_key("rolling", Duration::ZERO).await.unwrap().secret;
    on_every_node(&k.cluster, &rotated.secret, false, "the replaced secret is refused").await;
    on_every_node(&k.cluster, &newest, true, "the newest secret is taken").await;

    let short = NewApiKey { expires_in: Some(Duration::from_secs(2)), ..NewApiKey::default() };
    let temp = admin.create_api_key("temp", short).await.unwrap();
    assert!(temp.info.expires_at_ms.is_some());
    on_every_node(&k.cluster, &temp.secret, false, "the expired key is refused").await;
    let events = key_events(&k.cluster.addr(1), &k.admin, 5).await;
    let last = events.last().unwrap();
    assert_eq!((last.0, last.1.as_str(), last.2.as_str()), (pb::ApiKeyChangeKind::ApiKeyExpired, "temp", ""));
    assert!(admin.list_api_keys().await.unwrap().iter().all(|k| k.name != "temp"));
}

#[tokio::test]
async fn a_prefix_limited_admin_manages_only_keys_inside_its_prefixes_and_the_number_of_keys_is_bounded() {
    let k = Keyed::start(&["--max-api-keys=4", "--max-api-keys-per-admin-key=2"]).await;
    let limited = |ns: &[&str], admin: bool| NewApiKey {
        namespace_prefixes: ns.iter().map(|s| s.to_string()).collect(),
        admin,
        ..NewApiKey::default()
    };
    let denied = |r: Result<String, Error>| match r {
        Err(e @ Error::PermissionDenied { .. }) => e.message().to_string(),
        other => panic!("not refused: {other:?}"),
    };
    let by = &k.billing_admin;
    let m = denied(k.create(by, "everything", limited(&[], false)).await);
    assert!(m.contains("billing-admin") && m.contains("billing-"), "{m}");
    denied(k.create(by, "reports", limited(&["reports-"], false)).await);
    denied(k.create(by, "wider", limited(&["billing"], false)).await);
    denied(k.create(by, "admin-all", limited(&[], true)).await);
    let overrides = NewApiKey {
        limits: ApiKeyLimits { max_transactions: Some(1), ..Default::default() },
        ..limited(&["billing-x"], false)
    };
    denied(k.create(by, "raised", overrides).await);
    let team = k.create(by, "billing-team-admin", limited(&["billing-a", "billing-b"], true)).await.unwrap();
    on_every_node(&k.cluster, &team, true, "the limited admin's key is taken").await;

    k.create(&k.admin, "reports", limited(&["reports-"], false)).await.unwrap();
    let limited_admin = k.client(by, None).await;
    let err = limited_admin.revoke_api_key("reports").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    let listed: Vec<String> = limited_admin.list_api_keys().await.unwrap().into_iter().map(|k| k.name).collect();
    assert_eq!(listed, vec!["billing-team-admin"]);

    // The admin's share: 2 of the cluster's 4.
    k.create(by, "billing-c", limited(&["billing-c"], false)).await.unwrap();
    let full = k.create(by, "billing-d", limited(&["billing-d"], false)).await.unwrap_err();
    assert!(matches!(full, Error::ResourceExhausted { .. }), "{full:?}");
    assert!(full.message().contains("--max-api-keys-per-admin-key 2"), "{full:?}");
    // The cluster's bound.
    k.create(&k.admin, "fourth", NewApiKey::default()).await.unwrap();
    let full = k.create(&k.admin, "fifth", NewApiKey::default()).await.unwrap_err();
    assert!(full.message().contains("--max-api-keys 4"), "{full:?}");
    // A name the keys file has.
    let taken = k.create(&k.admin, "admin", NewApiKey::default()).await;
    assert!(taken.is_err_and(|e| e.message().contains("keys file has a key named \"admin\"")));
}

#[tokio::test]
async fn cluster_keys_survive_a_restart_of_every_node_and_a_key_also_in_a_file_stops_that_node() {
    let mut k = Keyed::start(&["--snapshot-every=10"]).await;
    let admin = k.client(&k.admin, None).await;
    let worker = admin.create_api_key("worker", NewApiKey::default()).await.unwrap().secret;
    // Enough entries after the key for every node to snapshot it.
    for i in 0..12 {
        admin.create_api_key(&format!("filler-{i}"), NewApiKey::default()).await.unwrap();
    }
    on_every_node(&k.cluster, &worker, true, "the key is taken").await;
    drop(admin);

    k.cluster.kill_all();
    for id in k.cluster.ids() {
        k.cluster.start_node(id).unwrap();
    }
    k.cluster.wait_for_leader(Duration::from_secs(20)).await;
    on_every_node(&k.cluster, &worker, true, "the key is taken after the restart").await;
    for id in k.cluster.ids() {
        let log = k.cluster.log_since_start(id);
        assert!(log.contains("restored lock table from snapshot"), "node {id} restarted without a snapshot:\n{log}");
    }

    // Node 3's own keys file gets a key of the cluster's name: node 3 refuses to start.
    k.cluster.kill(3);
    add_key(&k.dir.path().join("keys-3.toml"), "worker", &[], false);
    k.cluster.start_node(3).unwrap();
    let refused = eventually_async(PATIENCE, "node 3 refuses to start", || async {
        let log = k.cluster.log_since_start(3);
        log.contains("both in").then_some(log)
    })
    .await;
    assert!(refused.contains("[\"worker\"]"), "{refused}");
    let pid = k.cluster.pid(3).unwrap();
    eventually_async(PATIENCE, "node 3 exits", || async {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (state.is_empty() || state.contains(") Z")).then_some(())
    })
    .await;
}

/// An HTTP/1.0 call to the operator port with a bearer key: status and body.
fn http(addr: &str, method: &str, path: &str, body: &str, key: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
    (head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), body.to_string())
}

fn secret_of(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json).unwrap()["key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_cli_and_the_http_port_manage_cluster_keys_and_the_event_stream_shows_each_change() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let k = Keyed::start(&[]).await;
    let http_addr = k.cluster.http_addr(2);
    // The SSE event stream of a node, from the oldest retained event.
    let mut sse = tokio::net::TcpStream::connect(&http_addr).await.unwrap();
    let open = format!(
        "GET /api/v1/events?kinds=API_KEY_CHANGED HTTP/1.1\r\nHost: {http_addr}\r\nAuthorization: Bearer {}\r\n\r\n",
        k.admin
    );
    sse.write_all(open.as_bytes()).await.unwrap();

    let endpoints = k.cluster.endpoints().join(",");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--endpoints", &endpoints, "--api-key", &k.admin]);
        crate::common::dls(&all)
    };
    let ci = cli(&["keys", "create", "ci", "--namespace", "ci-", "--expires", "1d", "--max-txns", "5"]);
    let ci = ci.trim().to_string();
    on_every_node(&k.cluster, &ci, true, "the key made with the CLI is taken").await;
    let listed = cli(&["keys", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(listed.trim()).unwrap();
    let key = &v["keys"][0];
    assert_eq!((key["name"].as_str(), key["limits"]["max_transactions"].as_u64()), (Some("ci"), Some(5)), "{v}");
    assert!(key["expires_at_ms"].as_i64().is_some() && !listed.contains(&ci[4..]), "{listed}");

    let (status, body) =
        http(&http_addr, "POST", "/api/v1/api-keys", r#"{"name":"web","namespace_prefixes":["web-"]}"#, &k.admin);
    assert_eq!(status, 200, "{body}");
    let web = secret_of(&body);
    on_every_node(&k.cluster, &web, true, "the key made over HTTP is taken").await;
    let (status, body) = http(&http_addr, "POST", "/api/v1/api-keys", r#"{"name":"web"}"#, &k.admin);
    assert!(status == 409 && body.contains("API_KEY_EXISTS"), "{status} {body}");
    let (status, body) = http(&http_addr, "POST", "/api/v1/api-keys/web/rotate", r#"{"grace_ms":0}"#, &k.admin);
    assert_eq!(status, 200, "{body}");
    on_every_node(&k.cluster, &secret_of(&body), true, "the rotated secret is taken").await;
    on_every_node(&k.cluster, &web, false, "the secret rotated away is refused").await;
    let (status, body) = http(&http_addr, "GET", "/api/v1/api-keys", "", &k.admin);
    assert!(status == 200 && body.contains("\"web\"") && body.contains("\"ci\""), "{status} {body}");
    assert_eq!(http(&http_addr, "DELETE", "/api/v1/api-keys/web", "", &k.admin).0, 200);
    let (status, body) = http(&http_addr, "DELETE", "/api/v1/api-keys/web", "", &k.admin);
    assert!(status == 404 && body.contains("API_KEY_NOT_FOUND"), "{status} {body}");
    cli(&["keys", "revoke", "ci"]);
    on_every_node(&k.cluster, &ci, false, "the key revoked with the CLI is refused").await;

    let read = async {
        let (mut seen, mut buf) = (String::new(), [0u8; 4096]);
        while seen.matches("API_KEY_REVOKED").count() < 2 {
            let n = sse.read(&mut buf).await.unwrap();
            assert!(n > 0, "the SSE stream closed: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        seen
    };
    let seen = tokio::time::timeout(PATIENCE, read).await.expect("both revocations on the SSE stream");
    for change in
        ["API_KEY_CREATED", "API_KEY_ROTATED", "\"key_name\":\"web\"", "\"key_name\":\"ci\"", "\"by\":\"admin\""]
    {
        assert!(seen.contains(change), "no {change} in {seen}");
    }
}

//! Tenancy on every path, against a real server with API keys: a key limited to namespace
//! prefixes sees and affects only its namespaces, on every LockService and AdminService RPC
//! and every `/api/v1` route (events included); other keys' transactions are
//! PERMISSION_DENIED for non-admins; an admin key limited to prefixes acts only on
//! transactions inside them.

use crate::common;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, Transaction, TransactionOptions};
use caerus_proto::v1 as pb;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use common::{add_key, Cluster, PATIENCE};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::{Code, Status};

/// A server with four keys and three live transactions:
/// `billing` (limited to `billing-`) holds billing-jobs/monthly in `tb`; `reports` (limited
/// to `reports-`) holds reports-daily/x in `tr`; the unlimited admin holds billing-jobs/shared
/// and reports-daily/y in `tu` (a transaction straddling both tenants). `billing_admin` is an
/// admin key limited to `billing-`.
struct Tenants {
    cluster: Cluster,
    billing: String,
    reports: String,
    billing_admin: String,
    admin: String,
    tb: Transaction,
    tr: Transaction,
    tu: Transaction,
    _clients: Vec<DlsClient>,
    _dir: tempfile::TempDir,
}

async fn client(cluster: &Cluster, key: &str) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(key)).await.unwrap()
}

fn wait() -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(5_000)
}

impl Tenants {
    async fn start() -> Tenants {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.toml");
        let billing = add_key(&file, "billing", &["billing-"], false);
        let reports = add_key(&file, "reports", &["reports-"], false);
        let billing_admin = add_key(&file, "billing-admin", &["billing-"], true);
        let admin = add_key(&file, "admin", &[], true);
        let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
        let (b, r, a) =
            (client(&cluster, &billing).await, client(&cluster, &reports).await, client(&cluster, &admin).await);
        let opts = TransactionOptions::default().with_timeout_ms(30_000);
        let tb = b.begin_transaction(opts.clone().with_name("tb")).await.unwrap();
        tb.acquire_lock("billing-jobs", "monthly", LockMode::Exclusive, wait()).await.unwrap();
        let tr = r.begin_transaction(opts.clone().with_name("tr")).await.unwrap();
        tr.acquire_lock("reports-daily", "x", LockMode::Exclusive, wait()).await.unwrap();
        let tu = a.begin_transaction(opts.with_name("tu")).await.unwrap();
        tu.acquire_lock("billing-jobs", "shared", LockMode::Exclusive, wait()).await.unwrap();
        tu.acquire_lock("reports-daily", "y", LockMode::Exclusive, wait()).await.unwrap();
        Tenants { cluster, billing, reports, billing_admin, admin, tb, tr, tu, _clients: vec![b, r, a], _dir: dir }
    }

    fn grpc(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.cluster.addr(1))).unwrap().connect_lazy()
    }

    fn lock(&self) -> LockServiceClient<Channel> {
        LockServiceClient::new(self.grpc())
    }

    fn admin_api(&self) -> AdminServiceClient<Channel> {
        AdminServiceClient::new(self.grpc())
    }
}

fn with_key<T>(msg: T, key: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    req
}

#[track_caller]
fn assert_denied<T: std::fmt::Debug>(r: Result<T, Status>, what: &str) {
    match r {
        Err(s) => assert_eq!(s.code(), Code::PermissionDenied, "{what}: {s:?}"),
        Ok(v) => panic!("{what} must be PERMISSION_DENIED, got {v:?}"),
    }
}

/// AcquireLock's first answer, whether the refusal comes with the call or on the stream.
async fn acquire(c: &mut LockServiceClient<Channel>, key: &str, msg: pb::AcquireLockRequest) -> Result<(), Status> {
    let mut stream = c.acquire_lock(with_key(msg, key)).await?.into_inner();
    stream.message().await.map(|_| ())
}

fn acquire_msg(txn: u64, namespace: &str) -> pb::AcquireLockRequest {
    pb::AcquireLockRequest {
        transaction_id: txn,
        namespace: namespace.into(),
        key: "k".into(),
        mode: pb::LockMode::Exclusive as i32,
        timeout_ms: 200,
        ..Default::default()
    }
}

#[tokio::test]
async fn lock_service_rpcs_keep_each_key_to_its_namespaces_and_transactions() {
    let t = Tenants::start().await;
    let mut c = t.lock();
    let (tb, tr, tu) = (t.tb.id(), t.tr.id(), t.tu.id());

    // BeginTransaction: any key may begin; the transaction is its own.
    let begin = pb::BeginTransactionRequest { timeout_ms: 10_000, ..Default::default() };
    let own = c.begin_transaction(with_key(begin, &t.billing)).await.unwrap().into_inner().transaction_id;

    // AcquireLock: only the key's namespaces, only in transactions it may use.
    assert_denied(acquire(&mut c, &t.billing, acquire_msg(own, "reports-daily")).await, "acquire outside the prefixes");
    assert_denied(acquire(&mut c, &t.billing, acquire_msg(tr, "billing-jobs")).await, "acquire in another key's txn");
    assert_denied(acquire(&mut c, &t.billing_admin, acquire_msg(tu, "billing-jobs")).await, "acquire in a txn outside");
    let one_shot = pb::AcquireLockRequest {
        transaction_id: 0,
        begin: Some(pb::BeginTransactionRequest { timeout_ms: 10_000, ..Default::default() }),
        ..acquire_msg(0, "reports-daily")
    };
    assert_denied(acquire(&mut c, &t.billing, one_shot).await, "one-shot acquire outside the prefixes");
    acquire(&mut c, &t.billing, acquire_msg(own, "billing-mine")).await.unwrap();

    // ReleaseLock: the same rules.
    let release = |txn, namespace: &str, key: &str| pb::ReleaseLockRequest {
        transaction_id: txn,
        namespace: namespace.into(),
        key: key.into(),
        request_id: String::new(),
    };
    assert_denied(
        c.release_lock(with_key(release(tb, "billing-jobs", "monthly"), &t.reports)).await,
        "release in another key's txn",
    );
    assert_denied(c.release_lock(with_key(release(tr, "reports-daily", "x"), &t.billing)).await, "release outside");
    assert_denied(
        c.release_lock(with_key(release(tu, "billing-jobs", "shared"), &t.billing_admin)).await,
        "release in a txn outside the admin's prefixes",
    );

    // GetTransactionStatus: own, or an admin's inside its prefixes.
    let status = |txn| pb::GetTransactionStatusRequest { transaction_id: txn };
    assert_denied(c.get_transaction_status(with_key(status(tb), &t.reports)).await, "status of another key's txn");
    assert_denied(c.get_transaction_status(with_key(status(tu), &t.billing_admin)).await, "status of a txn outside");
    assert_denied(c.get_transaction_status(with_key(status(tr), &t.billing_admin)).await, "status of a txn outside");
    let seen = c.get_transaction_status(with_key(status(tb), &t.billing_admin)).await.unwrap().into_inner();
    assert_eq!(seen.locks.len(), 1);
    let all = c.get_transaction_status(with_key(status(tu), &t.admin)).await.unwrap().into_inner();
    assert_eq!(all.locks.len(), 2);

    // Heartbeat: the same, one transaction or a batch.
    let beat = |txn, more: Vec<u64>| pb::HeartbeatRequest { transaction_id: txn, more_transaction_ids: more };
    assert_denied(c.heartbeat(with_key(beat(tb, vec![]), &t.reports)).await, "heartbeat of another key's txn");
    assert_denied(c.heartbeat(with_key(beat(tu, vec![]), &t.billing_admin)).await, "heartbeat of a txn outside");
    let batch = c.heartbeat(with_key(beat(0, vec![tb, tr]), &t.billing)).await.unwrap().into_inner();
    assert_eq!(batch.results[0].error_kind, "");
    assert_eq!(batch.results[1].error_kind, "PERMISSION_DENIED", "{:?}", batch.results[1]);

    // EndTransaction: the same.
    let end = |txn| pb::EndTransactionRequest { transaction_id: txn, commit: false, request_id: String::new() };
    assert_denied(c.end_transaction(with_key(end(tb), &t.reports)).await, "end of another key's txn");
    assert_denied(c.end_transaction(with_key(end(tu), &t.billing_admin)).await, "end of a txn outside");

    // Nothing changed: every transaction still holds what it held.
    for (txn, locks) in [(tb, 1), (tr, 1), (tu, 2)] {
        let s = c.get_transaction_status(with_key(status(txn), &t.admin)).await.unwrap().into_inner();
        assert_eq!((s.state, s.locks.len()), (pb::TransactionState::Active as i32, locks), "txn {txn}");
    }
}

#[tokio::test]
async fn admin_service_rpcs_list_count_and_abort_only_inside_the_admin_keys_prefixes() {
    let t = Tenants::start().await;
    let mut a = t.admin_api();
    let (tb, tr, tu) = (t.tb.id(), t.tr.id(), t.tu.id());

    // ListLocks: admins only; a limited admin sees only its namespaces.
    let list = || pb::ListLocksRequest { namespace_prefix: String::new() };
    assert_denied(a.list_locks(with_key(list(), &t.billing)).await, "list by a non-admin key");
    let namespaces = |r: pb::ListLocksResponse| {
        r.locks.into_iter().map(|k| format!("{}/{}", k.namespace, k.key)).collect::<Vec<_>>()
    };
    let limited = namespaces(a.list_locks(with_key(list(), &t.billing_admin)).await.unwrap().into_inner());
    assert_eq!(limited, vec!["billing-jobs/monthly", "billing-jobs/shared"]);
    let all = namespaces(a.list_locks(with_key(list(), &t.admin)).await.unwrap().into_inner());
    assert_eq!(all.len(), 4, "{all:?}");
    let asked = pb::ListLocksRequest { namespace_prefix: "reports-".into() };
    assert!(a.list_locks(with_key(asked, &t.billing_admin)).await.unwrap().into_inner().locks.is_empty());

    // ClusterStatus: a limited admin counts only the transactions it may act on.
    assert_denied(a.cluster_status(with_key(pb::ClusterStatusRequest {}, &t.billing)).await, "status by a non-admin");
    let count = |r: pb::ClusterStatusResponse| r.active_transactions;
    assert_eq!(
        count(a.cluster_status(with_key(pb::ClusterStatusRequest {}, &t.billing_admin)).await.unwrap().into_inner()),
        1
    );
    assert_eq!(count(a.cluster_status(with_key(pb::ClusterStatusRequest {}, &t.admin)).await.unwrap().into_inner()), 3);

    // AbortTransaction: only inside the prefixes; a retry of a done abort answers as the first.
    let abort = |txn, request_id: &str| pb::AbortTransactionRequest {
        transaction_id: txn,
        reason: "tenancy test".into(),
        request_id: request_id.into(),
    };
    assert_denied(a.abort_transaction(with_key(abort(tb, ""), &t.billing)).await, "abort by a non-admin key");
    assert_denied(
        a.abort_transaction(with_key(abort(tr, ""), &t.billing_admin)).await,
        "abort of another tenant's txn",
    );
    assert_denied(a.abort_transaction(with_key(abort(tu, ""), &t.billing_admin)).await, "abort of a straddling txn");
    for _ in 0..2 {
        let done = a.abort_transaction(with_key(abort(tb, "abort-tb"), &t.billing_admin)).await.unwrap().into_inner();
        assert_eq!((done.state, done.released_locks), (pb::TransactionState::Aborted as i32, 1));
    }
    let err = t.tr.status().await.map(|s| s.state);
    assert!(matches!(err, Ok(caerus_core::TransactionState::Active)), "{err:?}");
    assert_eq!(t.tu.status().await.unwrap().locks.len(), 2, "the straddling transaction kept its locks");
}

/// Starts an acquire in the background and returns once it is queued.
async fn queue(
    tx: &Transaction,
    namespace: &'static str,
    key: &'static str,
) -> tokio::task::JoinHandle<Result<(), Error>> {
    let (seen, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let tx = tx.clone();
    let handle = tokio::spawn(async move {
        let opts = AcquireOptions::default().with_timeout_ms(30_000);
        tx.acquire_lock_with_progress(namespace, key, LockMode::Exclusive, opts, move |_| {
            let _ = seen.send(());
        })
        .await
        .map(|_| ())
    });
    tokio::time::timeout(PATIENCE, queued.recv()).await.expect("queued in time").expect("queued, not ended");
    handle
}

/// Produces, in order: a deadlock whose cycle spans both tenants (billing's and reports'
/// transactions plus two unlimited ones; reports' is the victim), an operator abort of the
/// straddling `tu`, then aborts of `tb` and `tr` (the last events each tenant can see).
/// Returns the victim's id.
async fn cross_tenant_events(t: &Tenants) -> u64 {
    let (b, r, a) = (
        client(&t.cluster, &t.billing).await,
        client(&t.cluster, &t.reports).await,
        client(&t.cluster, &t.admin).await,
    );
    let opts = |p| TransactionOptions::default().with_timeout_ms(30_000).with_priority(p);
    let tb2 = b.begin_transaction(opts(0)).await.unwrap();
    let u1 = a.begin_transaction(opts(0)).await.unwrap();
    let tr2 = r.begin_transaction(opts(-1)).await.unwrap();
    let u2 = a.begin_transaction(opts(0)).await.unwrap();
    tb2.acquire_lock("billing-dl", "b", LockMode::Exclusive, wait()).await.unwrap();
    u1.acquire_lock("billing-dl", "u1", LockMode::Exclusive, wait()).await.unwrap();
    tr2.acquire_lock("reports-dl", "r", LockMode::Exclusive, wait()).await.unwrap();
    u2.acquire_lock("reports-dl", "u2", LockMode::Exclusive, wait()).await.unwrap();
    // tb2 -> u1 -> tr2 -> u2 -> tb2; tr2 (lowest priority) closes the cycle and is the victim.
    let _w1 = queue(&tb2, "billing-dl", "u1").await;
    let _w2 = queue(&u1, "reports-dl", "r").await;
    let _w3 = queue(&u2, "billing-dl", "b").await;
    let err = tr2.acquire_lock("reports-dl", "u2", LockMode::Exclusive, wait()).await.unwrap_err();
    assert!(matches!(err, Error::DeadlockVictim { .. }), "{err:?}");
    for txn in [t.tu.id(), t.tb.id(), t.tr.id()] {
        a.abort_transaction(txn, "tenancy test").await.unwrap();
    }
    tr2.id()
}

/// Every namespace an event shows, in its summary and in its detail.
fn shown_namespaces(e: &pb::Event) -> Vec<String> {
    use pb::event::Detail;
    let mut ns = e.namespaces.clone();
    match &e.detail {
        Some(Detail::DeadlockResolved(d)) => ns.extend(d.cycle.iter().map(|m| m.namespace.clone())),
        Some(Detail::TransactionExpired(x)) => ns.extend(x.released_locks.iter().map(|l| l.namespace.clone())),
        Some(Detail::TransactionAborted(x)) => ns.extend(x.released_locks.iter().map(|l| l.namespace.clone())),
        Some(Detail::LockRevoked(x)) => ns.push(x.namespace.clone()),
        Some(Detail::ApiKeyChanged(_)) | None => {}
    }
    ns
}

/// Reads `key`'s event stream from the start until the abort of `last`.
async fn events_until_abort_of(t: &Tenants, key: &str, last: u64) -> Vec<pb::Event> {
    let mut c = t.lock();
    let mut stream = c.watch_events(with_key(pb::WatchEventsRequest::default(), key)).await.unwrap().into_inner();
    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout(PATIENCE, stream.message()).await.expect("event in time").unwrap().unwrap();
        let done = matches!(&e.detail, Some(pb::event::Detail::TransactionAborted(a)) if a.transaction_id == last);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

fn deadlock(events: &[pb::Event]) -> &pb::DeadlockResolved {
    events
        .iter()
        .find_map(|e| match &e.detail {
            Some(pb::event::Detail::DeadlockResolved(d)) => Some(d),
            _ => None,
        })
        .expect("the deadlock reached this key")
}

#[tokio::test]
async fn watch_events_cuts_every_event_to_the_keys_namespaces() {
    let t = Tenants::start().await;
    let victim = cross_tenant_events(&t).await;
    let (tb, tr, tu) = (t.tb.id(), t.tr.id(), t.tu.id());

    let billing = events_until_abort_of(&t, &t.billing, tb).await;
    for e in &billing {
        assert!(shown_namespaces(e).iter().all(|ns| ns.starts_with("billing-")), "billing saw {e:?}");
    }
    let d = deadlock(&billing);
    assert_eq!(d.cycle.len(), 2, "only the members waiting in billing- namespaces: {d:?}");
    assert_eq!(d.victim_transaction_id, 0, "the victim's part belonged to reports");
    let straddling = billing
        .iter()
        .find_map(|e| match &e.detail {
            Some(pb::event::Detail::TransactionAborted(a)) if a.transaction_id == tu => Some(a),
            _ => None,
        })
        .expect("the abort of tu, which released a billing lock");
    assert_eq!(straddling.released_locks.len(), 1);
    assert_eq!(straddling.released_locks[0].key, "shared");

    let reports = events_until_abort_of(&t, &t.reports, tr).await;
    for e in &reports {
        assert!(shown_namespaces(e).iter().all(|ns| ns.starts_with("reports-")), "reports saw {e:?}");
    }
    let d = deadlock(&reports);
    assert_eq!((d.cycle.len(), d.victim_transaction_id), (2, victim), "{d:?}");
    assert!(!reports
        .iter()
        .any(|e| matches!(&e.detail, Some(pb::event::Detail::TransactionAborted(a)) if a.transaction_id == tb)));

    let admin = events_until_abort_of(&t, &t.admin, tr).await;
    assert_eq!(deadlock(&admin).cycle.len(), 4);
}

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// One JSON call over the HTTP API: status and parsed body.
async fn http(t: &Tenants, method: &str, path: &str, body: Value, key: &str) -> (u16, Value) {
    let client: Http = Client::builder(TokioExecutor::new()).build_http();
    let text = if body.is_null() { String::new() } else { body.to_string() };
    let req = hyper::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", t.cluster.http_addr(1)))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(text)))
        .unwrap();
    let resp = tokio::time::timeout(PATIENCE, client.request(req)).await.expect("HTTP call hung").unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Reads the SSE stream of `key` until the event `stop` matches; returns the events' JSON.
async fn sse_until(t: &Tenants, key: &str, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
    let client: Http = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::get(format!("http://{}/api/v1/events", t.cluster.http_addr(1)))
        .header("authorization", format!("Bearer {key}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let (mut buf, mut seen) = (String::new(), Vec::new());
    let read = async {
        loop {
            while let Some(i) = buf.find("\n\n") {
                let frame: String = buf.drain(..i + 2).collect();
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                if !data.is_empty() {
                    let v: Value = serde_json::from_str(&data).unwrap();
                    let done = stop(&v);
                    seen.push(v);
                    if done {
                        return;
                    }
                }
            }
            let frame = body.frame().await.expect("event stream ended").unwrap();
            if let Ok(data) = frame.into_data() {
                buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("the last event in time");
    seen
}

#[tokio::test]
async fn every_http_route_applies_the_same_rules() {
    let t = Tenants::start().await;
    let (tb, tr, tu) = (t.tb.id().to_string(), t.tr.id().to_string(), t.tu.id().to_string());
    let (billing, reports, badmin) = (t.billing.as_str(), t.reports.as_str(), t.billing_admin.as_str());
    let lock = |ns: &str| json!({"namespace": ns, "key": "k", "mode": "EXCLUSIVE", "timeout_ms": 200});
    let release = |ns: &str, key: &str| json!({"namespace": ns, "key": key});

    let (code, v) = http(&t, "POST", "/api/v1/transactions", json!({"timeout_ms": 10_000}), billing).await;
    assert_eq!(code, 200, "POST /api/v1/transactions: {v}");
    let own = v["transaction_id"].as_str().unwrap().to_string();

    let refused: Vec<(&str, String, Value, &str, &str)> = vec![
        ("GET", format!("/api/v1/transactions/{tb}"), Value::Null, reports, "status of another key's txn"),
        (
            "GET",
            format!("/api/v1/transactions/{tu}"),
            Value::Null,
            badmin,
            "status of a txn outside the admin's prefixes",
        ),
        (
            "POST",
            format!("/api/v1/transactions/{tb}/heartbeat"),
            Value::Null,
            reports,
            "heartbeat of another key's txn",
        ),
        ("POST", format!("/api/v1/transactions/{tu}/heartbeat"), Value::Null, badmin, "heartbeat of a txn outside"),
        (
            "POST",
            format!("/api/v1/transactions/{own}/locks"),
            lock("reports-daily"),
            billing,
            "acquire outside the prefixes",
        ),
        (
            "POST",
            format!("/api/v1/transactions/{tr}/locks"),
            lock("billing-jobs"),
            billing,
            "acquire in another key's txn",
        ),
        (
            "POST",
            format!("/api/v1/transactions/{tb}/release"),
            release("billing-jobs", "monthly"),
            reports,
            "release in another key's txn",
        ),
        (
            "POST",
            format!("/api/v1/transactions/{tr}/release"),
            release("reports-daily", "x"),
            billing,
            "release outside",
        ),
        (
            "POST",
            format!("/api/v1/transactions/{tb}/end"),
            json!({"commit": false}),
            reports,
            "end of another key's txn",
        ),
        ("POST", format!("/api/v1/transactions/{tu}/end"), json!({"commit": false}), badmin, "end of a txn outside"),
        ("POST", format!("/api/v1/transactions/{tb}/abort"), json!({}), billing, "abort by a non-admin key"),
        ("POST", format!("/api/v1/transactions/{tr}/abort"), json!({}), badmin, "abort of another tenant's txn"),
        ("POST", format!("/api/v1/transactions/{tu}/abort"), json!({}), badmin, "abort of a straddling txn"),
        ("GET", "/api/v1/locks".into(), Value::Null, billing, "list by a non-admin key"),
        ("GET", "/api/v1/cluster".into(), Value::Null, billing, "cluster by a non-admin key"),
    ];
    for (method, path, body, key, what) in refused {
        let (code, v) = http(&t, method, &path, body, key).await;
        assert_eq!(
            (code, v["error"]["kind"].as_str()),
            (403, Some("PERMISSION_DENIED")),
            "{what}: {method} {path}: {v}"
        );
    }

    let (code, v) = http(&t, "GET", &format!("/api/v1/transactions/{tb}"), Value::Null, badmin).await;
    assert_eq!((code, v["locks"].as_array().map(Vec::len)), (200, Some(1)), "{v}");
    let (code, v) = http(&t, "GET", "/api/v1/locks", Value::Null, badmin).await;
    assert_eq!(code, 200, "{v}");
    let listed: Vec<&str> = v["locks"].as_array().unwrap().iter().map(|k| k["namespace"].as_str().unwrap()).collect();
    assert_eq!(listed, vec!["billing-jobs", "billing-jobs"]);
    let (code, v) = http(&t, "GET", "/api/v1/cluster", Value::Null, badmin).await;
    assert_eq!((code, v["active_transactions"].as_u64()), (200, Some(1)), "{v}");

    // Events: the straddling transaction's abort reaches billing with only its billing part.
    let (code, v) = http(&t, "POST", &format!("/api/v1/transactions/{tu}/abort"), json!({}), &t.admin).await;
    assert_eq!(code, 200, "{v}");
    let (code, v) = http(&t, "POST", &format!("/api/v1/transactions/{tb}/abort"), json!({}), badmin).await;
    assert_eq!(code, 200, "{v}");
    let events = sse_until(&t, billing, |e| {
        e["kind"] == "TRANSACTION_ABORTED" && e["detail"]["transaction_id"] == json!(tb.clone())
    })
    .await;
    for e in &events {
        let ns = e["namespaces"].as_array().unwrap();
        assert!(ns.iter().all(|n| n.as_str().unwrap().starts_with("billing-")), "billing saw {e}");
    }
    let straddling = events
        .iter()
        .find(|e| e["detail"]["transaction_id"] == json!(tu.clone()) && e["kind"] == "TRANSACTION_ABORTED");
    let released =
        straddling.expect("tu's abort reached billing")["detail"]["released_locks"].as_array().unwrap().clone();
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["key"], "shared");
}

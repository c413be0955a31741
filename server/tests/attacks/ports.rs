//! What a client without a key can do to a node's ports: connections that never finish,
//! descriptors run out, streams without bodies, idle sockets in front of TLS. The node must
//! keep serving real clients, never exit, and hold bounded memory (`server/src/conn`).

use std::time::Duration;

use super::common::attack::{self as raw, addr, attacker_ip, connect_from, half_open};
use super::common::{
    assert_next_grant, eventually, eventually_async, http_get, make_certs, patient_client, Cluster, Spec, PATIENCE,
};
use tokio::io::AsyncWriteExt;

const LOCK_PATH: &str = "/caerus.dls.v1.LockService/AcquireLock";

fn metric(cluster: &Cluster, name: &str) -> f64 {
    cluster.metric(1, name)
}

#[tokio::test]
async fn half_open_connections_under_a_low_open_file_limit_never_stop_the_node() {
    // 400 descriptors: the node clips its ports to what fits (about 110 client, 55 HTTP
    // connections) and each attacker address gets 16.
    let spec = Spec {
        nofile: Some(400),
        extra: ["--max-connections-per-ip", "16", "--first-byte-timeout-ms", "1000", "--handshake-timeout-ms", "2000"]
            .map(String::from)
            .into(),
        ..Spec::default()
    };
    let mut cluster = Cluster::start_spec(spec).await;
    let (client_port, http_port) = (cluster.addr(1), cluster.http_addr(1));
    // Half an HTTP/2 preface and half an HTTP/1 request line, from three addresses: more
    // connections than the node has descriptors.
    let mut held = half_open(&client_port, 3, 200, b"PRI * HTTP/2.0\r\n").await;
    held.extend(half_open(&http_port, 3, 200, b"GET /metrics HTTP/1.1\r\nHost:").await);
    assert!(held.len() >= 1_000, "the attacker holds {} sockets", held.len());

    // A real client, from its own address, is served meanwhile, and the node has not exited.
    let client = patient_client(vec![client_port.clone()]).await;
    assert_next_grant(&client).await;
    let (status, _) = http_get(&http_port, "/healthz").unwrap();
    assert_eq!(status, 200);
    assert!(!cluster.has_exited(1), "the node exited under the flood");
    let refused = metric(&cluster, "dls_connections_refused_total{port=\"client\",reason=\"max_connections_per_ip\"}");
    assert!(refused > 0.0, "connections past an address's share were refused");

    // The half-open connections the node took are closed at their handshake deadline,
    // while the attacker still holds its end.
    eventually(PATIENCE, "the half-open connections to be closed by the node", || {
        (metric(&cluster, "dls_connections_open{port=\"client\"}") <= 1.0).then_some(())
    })
    .await;
    assert!(metric(&cluster, "dls_connections_refused_total{port=\"client\",reason=\"handshake_timeout\"}") > 0.0);
    drop(held);
    assert_next_grant(&client).await;
    assert!(!cluster.has_exited(1));
}

#[tokio::test]
async fn running_out_of_descriptors_backs_off_and_the_node_serves_again() {
    let mut cluster = Cluster::start(1).await;
    let pid = cluster.pid(1).unwrap();
    let client_port = cluster.addr(1);
    // The open-file limit lowered under the running node, below what its bounds assume:
    // accept itself fails (EMFILE), as when something else used the descriptors up.
    let limit = raw::open_fds(pid) + 20;
    let lowered = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={limit}:{limit}")])
        .status()
        .expect("run prlimit");
    assert!(lowered.success());
    let held = half_open(&client_port, 4, 15, b"PRI * HTTP/2.0\r\n").await;
    eventually(PATIENCE, "the node to run out of descriptors", || (raw::open_fds(pid) >= limit).then_some(())).await;
    // The node keeps trying to accept (and backing off) for a while, and stays up.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        assert!(!cluster.has_exited(1), "the node exited when accept failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(held);
    let client = patient_client(vec![client_port]).await;
    assert_next_grant(&client).await;
    assert!(metric(&cluster, "dls_accept_errors_total{port=\"client\"}") > 0.0, "accept failed and was retried");
    assert!(!cluster.has_exited(1));
}

#[tokio::test]
async fn a_connection_of_body_less_streams_cannot_grow_memory_without_bound() {
    // A server without keys, the worst case: every stream passes authentication.
    let cluster = Cluster::start(1).await;
    let pid = cluster.pid(1).unwrap();
    let before = raw::rss_mib(pid);
    // 100,000 calls opened, none with a body, without waiting for the server's settings:
    // the server refuses streams past its bound and closes a connection that keeps going.
    let seen = raw::body_less_streams(&cluster.addr(1), attacker_ip(0), LOCK_PATH, 100_000, PATIENCE).await;
    let grown = raw::rss_mib(pid) - before;
    eprintln!("the node answered {seen:?}; RSS {before:.1} MiB, grew {grown:.1} MiB");
    assert!(seen.resets > 0 || seen.goaways > 0, "streams past the bound are refused: {seen:?}");
    assert!(grown < 64.0, "the node's memory grew {grown:.1} MiB for one attacker's connection");
    let client = patient_client(vec![cluster.addr(1)]).await;
    assert_next_grant(&client).await;
}

#[tokio::test]
async fn calls_that_never_send_their_request_are_bounded_per_address() {
    // A server without keys (every call passes authentication) and a small share: 100 calls
    // from one address may wait for their request, over any number of connections.
    let cluster = Cluster::start_with(1, &["--max-pending-requests-per-ip", "100"]).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(raw::hold_calls(&cluster.addr(1), attacker_ip(0), LOCK_PATH, 50).await.unwrap());
    }
    // 150 calls, 100 may wait: the other 50 are answered at once (RESOURCE_EXHAUSTED).
    eventually(PATIENCE, "the calls past the share to be answered", || {
        let answered: u64 = held.iter().map(|h| *h.answered.borrow()).sum();
        (answered >= 50).then_some(())
    })
    .await;
    let refused =
        metric(&cluster, "dls_connections_refused_total{port=\"client\",reason=\"max_pending_requests_per_ip\"}");
    assert_eq!(refused, 50.0);
    assert_eq!(metric(&cluster, "dls_requests_arriving{port=\"client\"}"), 100.0);
    // Another address is not held back by this one's share.
    let client = patient_client(vec![cluster.addr(1)]).await;
    assert_next_grant(&client).await;
}

#[tokio::test]
async fn a_call_without_a_key_is_refused_before_its_body_arrives() {
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("keys.toml");
    let key = super::common::add_key(&file, "app", &[], false);
    let spec =
        Spec { extra: vec![format!("--api-keys-file={}", file.display())], probe_key: Some(key), ..Spec::default() };
    let cluster = Cluster::start_spec(spec).await;
    let head = raw::call_without_body(addr(&cluster.addr(1)), LOCK_PATH, None, Duration::from_secs(10))
        .await
        .expect("an answer while the body is still to come");
    assert_eq!(raw::grpc_status(&head), Some(tonic::Code::Unauthenticated as i32), "{head:?}");
    let head = raw::call_without_body(addr(&cluster.addr(1)), LOCK_PATH, Some("dls_wrong"), Duration::from_secs(10))
        .await
        .expect("an answer while the body is still to come");
    assert_eq!(raw::grpc_status(&head), Some(tonic::Code::Unauthenticated as i32), "{head:?}");

    // The HTTP API too: a POST that announces a body and sends none is answered 401 at once.
    let http = cluster.http_addr(1);
    let mut post = connect_from(attacker_ip(0), addr(&http)).await.unwrap();
    let head = format!(
        "POST /api/v1/transactions HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    post.write_all(head.as_bytes()).await.unwrap();
    let mut answer = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), tokio::io::AsyncReadExt::read(&mut post, &mut answer))
        .await
        .expect("an answer while the body is still to come")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
}

#[tokio::test]
async fn a_call_whose_body_never_arrives_is_answered_at_the_request_timeout() {
    let cluster = Cluster::start_with(1, &["--request-timeout-ms", "1000"]).await;
    let head = raw::call_without_body(addr(&cluster.addr(1)), LOCK_PATH, None, PATIENCE)
        .await
        .expect("an answer once the request timeout passed");
    assert_eq!(raw::grpc_status(&head), Some(tonic::Code::DeadlineExceeded as i32), "{head:?}");
    let message = raw::grpc_message(&head);
    assert!(message.contains("--request-timeout-ms 1000"), "{message:?}");
}

#[tokio::test]
async fn an_http_client_that_never_finishes_its_headers_is_cut_at_the_header_timeout() {
    let cluster = Cluster::start_with(1, &["--http-header-timeout-ms", "1000"]).await;
    let mut slow = connect_from(attacker_ip(0), addr(&cluster.http_addr(1))).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut buf = [0u8; 256];
    let end = tokio::time::timeout(PATIENCE, tokio::io::AsyncReadExt::read(&mut slow, &mut buf))
        .await
        .expect("the node to close the connection");
    // hyper answers 408 or just closes: either way the connection ends.
    match end {
        Ok(0) | Err(_) => {}
        Ok(n) => assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"), "{:?}", &buf[..n]),
    }
}

#[tokio::test]
async fn idle_connections_cannot_keep_real_tls_clients_from_their_handshake() {
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path(), 1);
    let d = certs.path().display();
    let spec = Spec {
        extra: vec![format!("--tls-cert={d}/node-1.pem"), format!("--tls-key={d}/node-1-key.pem")],
        probe_tls: Some(super::common::client_tls(certs.path(), None)),
        ..Spec::default()
    };
    let cluster = Cluster::start_spec(spec).await;
    // 300 sockets from four addresses that never say a word, more than the handshake places
    // a port had (256), opened anew every half second and each held for 5 s.
    let (rounds_tx, mut rounds) = tokio::sync::watch::channel(0u32);
    let to = cluster.addr(1);
    let flood = tokio::spawn(async move {
        let mut batches = std::collections::VecDeque::new();
        for round in 1.. {
            batches.push_back(half_open(&to, 4, 75, b"").await);
            if batches.len() > 10 {
                batches.pop_front();
            }
            let _ = rounds_tx.send(round);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    rounds.wait_for(|r| *r >= 2).await.unwrap();
    // Real clients handshake meanwhile, each within a short deadline.
    for _ in 0..9 {
        let config = caerus_core::ClientConfig::new(vec![format!("https://{}", cluster.addr(1))])
            .without_api_key()
            .with_ca_file(certs.path().join("ca.pem"))
            .with_retry_deadline(Duration::from_secs(3))
            .with_request_timeout(Duration::from_secs(2));
        eventually_async(Duration::from_secs(3), "a real TLS client to be served", || {
            let config = config.clone();
            async move {
                let client = caerus_core::DlsClient::connect(config).await.ok()?;
                let tx = client.begin_transaction(super::common::opts(5_000)).await.ok()?;
                tx.commit().await.ok()
            }
        })
        .await;
    }
    flood.abort();
}

#[tokio::test]
async fn a_client_with_more_waits_than_a_connection_carries_keeps_its_leases() {
    // The smallest bound, so 150 waits exceed it: the client must spread its waits over more
    // connections instead of queueing them (and its heartbeats) behind the bound.
    let cluster = Cluster::start_with(1, &["--max-streams-per-connection", "100"]).await;
    let client = patient_client(vec![cluster.addr(1)]).await;
    let holder = client.begin_transaction(super::common::opts(5_000)).await.unwrap();
    super::common::take(&holder, "hot").await;
    let mut waits = Vec::new();
    for _ in 0..150 {
        let tx = client.begin_transaction(super::common::opts(3_000)).await.unwrap();
        let wait = tokio::spawn({
            let tx = tx.clone();
            async move { tx.acquire_lock("ns", "hot", caerus_core::LockMode::Exclusive, super::common::wait(60_000)).await }
        });
        waits.push((tx, wait));
    }
    eventually_async(PATIENCE, "all 150 waits queued on the server", || async {
        let locks = client.list_locks("ns").await.ok()?;
        (locks.iter().find(|k| k.key == "hot")?.waiters.len() == 150).then_some(())
    })
    .await;
    // Longer than the waiters' 3 s lease: only heartbeats that get through keep them.
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        for (tx, _) in &waits {
            let s = tx.status().await.unwrap();
            assert_eq!(s.state, caerus_core::TransactionState::Active, "a waiting transaction lost its lease");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    holder.commit().await.unwrap();
    let (tx, first) = waits.remove(0);
    first.await.unwrap().unwrap();
    tx.commit().await.unwrap();
}

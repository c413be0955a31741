//! Tests of the event types and of the watch stream's resume logic, the latter against a
//! scripted server.

use super::*;

fn held(ns: &str, key: &str, token: u64) -> pb::HeldLock {
    pb::HeldLock { namespace: ns.into(), key: key.into(), mode: pb::LockMode::Exclusive as i32, fencing_token: token }
}

#[test]
fn kinds_parse_and_print() {
    for k in EventKind::ALL {
        assert_eq!(k.as_str().parse::<EventKind>().unwrap(), k);
        assert_eq!(k.as_str().to_ascii_lowercase().replace('_', "-").parse::<EventKind>().unwrap(), k);
        assert_eq!(pb::EventKind::try_from(caerus_proto::Wire::to_wire(k)).unwrap().as_str_name(), k.as_str());
    }
    let err = Error::from("deadlocks".parse::<EventKind>().unwrap_err());
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert!(err.message().contains("deadlock_resolved"), "{err}");
}

#[test]
fn wire_events_become_typed_events() {
    let deadlock = pb::Event {
        sequence: 12,
        time_ms: 1_700_000_000_000,
        kind: pb::EventKind::DeadlockResolved as i32,
        namespaces: vec!["ns".into()],
        detail: Some(pb::event::Detail::DeadlockResolved(pb::DeadlockResolved {
            cycle: vec![pb::CycleMember {
                transaction_id: 7,
                transaction_name: "a".into(),
                priority: 1,
                namespace: "ns".into(),
                key: "k1".into(),
                mode: pb::LockMode::SharedRead as i32,
            }],
            victim_transaction_id: 7,
            policy: pb::VictimPolicy::Oldest as i32,
        })),
    };
    let e = Event::try_from(deadlock).unwrap();
    assert_eq!((e.sequence, e.time_ms, e.kind()), (12, 1_700_000_000_000, EventKind::DeadlockResolved));
    let EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } = e.detail else { unreachable!() };
    assert_eq!((victim_transaction_id, policy), (7, VictimPolicy::Oldest));
    assert_eq!(cycle[0].mode, LockMode::SharedRead);
    assert_eq!(cycle[0].key, "k1");

    let aborted = pb::Event {
        sequence: 13,
        time_ms: 1,
        kind: pb::EventKind::TransactionAborted as i32,
        namespaces: vec!["ns".into()],
        detail: Some(pb::event::Detail::TransactionAborted(pb::TransactionAborted {
            transaction_id: 9,
            transaction_name: "w".into(),
            reason: "stuck".into(),
            operator: "ops".into(),
            released_locks: vec![held("ns", "k", 4)],
        })),
    };
    let e = Event::try_from(aborted).unwrap();
    assert_eq!(
        e.detail,
        EventDetail::TransactionAborted {
            transaction_id: 9,
            transaction_name: "w".into(),
            reason: "stuck".into(),
            operator: "ops".into(),
            released_locks: vec![Lock {
                namespace: "ns".into(),
                key: "k".into(),
                mode: LockMode::Exclusive,
                fencing_token: 4
            }],
        }
    );

    let unknown = pb::Event { sequence: 14, time_ms: 1, kind: 99, namespaces: vec![], detail: None };
    assert!(Event::try_from(unknown).is_err());
}

fn watch(opts: WatchOptions) -> Watch {
    let config = crate::ClientConfig::new(["a:1"]).without_api_key();
    Watch {
        router: Arc::new(Router::new(&config).unwrap()),
        opts,
        last: None,
        start: None,
        backlog_end: None,
        stream: crate::resume::Resuming::new("WatchEvents"),
    }
}

#[tokio::test]
async fn resume_requests_start_after_the_last_delivered_event() {
    let opts = WatchOptions::new()
        .with_from_sequence(5)
        .with_namespace_prefix("billing-")
        .with_kind(EventKind::DeadlockResolved)
        .with_only_new(true);
    let mut w = watch(opts);
    let first = w.request();
    assert_eq!((first.from_sequence, first.only_new), (5, true));
    // After an attach told where it started, a re-attach before any event resumes there.
    w.start = Some(30);
    let early = w.request();
    assert_eq!((early.from_sequence, early.only_new), (30, false));
    assert_eq!(first.namespace_prefixes, vec!["billing-"]);
    assert_eq!(first.kinds, vec![pb::EventKind::DeadlockResolved as i32]);
    w.last = Some(41);
    let resume = w.request();
    assert_eq!((resume.from_sequence, resume.only_new), (42, false));
    assert_eq!(resume.namespace_prefixes, first.namespace_prefixes);
    assert_eq!(resume.kinds, first.kinds);
}

/// Nothing listens: the first attach retries until the budget and names the node.
#[tokio::test]
async fn watch_gives_up_with_unavailable_when_no_node_answers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = crate::ClientConfig::new([addr.to_string()])
        .without_api_key()
        .with_connect_timeout(std::time::Duration::from_millis(100))
        .with_request_timeout(std::time::Duration::from_millis(100))
        .with_retry_deadline(std::time::Duration::from_millis(300));
    let client = DlsClient::connect(config).await.unwrap();
    let err = client.watch_events(WatchOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "UNAVAILABLE", "{err}");
    assert!(err.message().contains(&addr.to_string()), "{err}");
}

/// A LockService whose WatchEvents answers from a script, one entry per call, and records
/// every request. Other RPCs are not used by these tests.
struct Scripted {
    script: std::sync::Mutex<std::collections::VecDeque<WatchAnswer>>,
    requests: Arc<std::sync::Mutex<Vec<pb::WatchEventsRequest>>>,
}

/// How one WatchEvents call is answered.
enum WatchAnswer {
    /// Refused before any event.
    Refuse(Status),
    /// These events, then the stream ends with this status.
    Stream(Vec<u64>, Status),
}

fn event(sequence: u64) -> pb::Event {
    pb::Event {
        sequence,
        time_ms: 1,
        kind: pb::EventKind::LockRevoked as i32,
        namespaces: vec!["ns".into()],
        detail: Some(pb::event::Detail::LockRevoked(pb::LockRevoked {
            transaction_id: sequence,
            namespace: "ns".into(),
            key: "k".into(),
            mode: pb::LockMode::Exclusive as i32,
            fencing_token: sequence,
            cause: "lease expired".into(),
            end_cause: pb::EndCause::LeaseExpired as i32,
        })),
    }
}

fn with_kind(mut status: Status, kind: &'static str) -> Status {
    let value = tonic::metadata::MetadataValue::from_static(kind);
    status.metadata_mut().insert(caerus_proto::metadata::ERROR_KIND, value);
    status
}

type Reply<T> = std::result::Result<tonic::Response<T>, Status>;
type BoxStream<T> = Pin<Box<dyn Stream<Item = std::result::Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl pb::lock_service_server::LockService for Scripted {
    async fn begin_transaction(
        &self,
        _: tonic::Request<pb::BeginTransactionRequest>,
    ) -> Reply<pb::BeginTransactionResponse> {
        Err(Status::unimplemented("scripted"))
    }
    type AcquireLockStream = BoxStream<pb::AcquireLockResponse>;
    async fn acquire_lock(&self, _: tonic::Request<pb::AcquireLockRequest>) -> Reply<Self::AcquireLockStream> {
        Err(Status::unimplemented("scripted"))
    }
    async fn verify_fencing_token(
        &self,
        _: tonic::Request<pb::VerifyFencingTokenRequest>,
    ) -> Reply<pb::VerifyFencingTokenResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn downgrade_lock(&self, _: tonic::Request<pb::DowngradeLockRequest>) -> Reply<pb::DowngradeLockResponse> {
        Err(Status::unimplemented("scripted"))
    }
    type WatchKeyStream = BoxStream<pb::KeyHolders>;
    async fn watch_key(&self, _: tonic::Request<pb::WatchKeyRequest>) -> Reply<Self::WatchKeyStream> {
        Err(Status::unimplemented("scripted"))
    }
    type AcquireLocksStream = BoxStream<pb::AcquireLocksResponse>;
    async fn acquire_locks(&self, _: tonic::Request<pb::AcquireLocksRequest>) -> Reply<Self::AcquireLocksStream> {
        Err(Status::unimplemented("scripted"))
    }
    async fn release_lock(&self, _: tonic::Request<pb::ReleaseLockRequest>) -> Reply<pb::ReleaseLockResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn cancel_wait(&self, _: tonic::Request<pb::CancelWaitRequest>) -> Reply<pb::CancelWaitResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn claim_slot(&self, _: tonic::Request<pb::ClaimSlotRequest>) -> Reply<pb::ClaimSlotResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn finish_slot(&self, _: tonic::Request<pb::FinishSlotRequest>) -> Reply<pb::FinishSlotResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn get_transaction_status(
        &self,
        _: tonic::Request<pb::GetTransactionStatusRequest>,
    ) -> Reply<pb::GetTransactionStatusResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn heartbeat(&self, _: tonic::Request<pb::HeartbeatRequest>) -> Reply<pb::HeartbeatResponse> {
        Err(Status::unimplemented("scripted"))
    }
    async fn end_transaction(&self, _: tonic::Request<pb::EndTransactionRequest>) -> Reply<pb::EndTransactionResponse> {
        Err(Status::unimplemented("scripted"))
    }
    type WatchEventsStream = BoxStream<pb::Event>;
    async fn watch_events(&self, request: tonic::Request<pb::WatchEventsRequest>) -> Reply<Self::WatchEventsStream> {
        self.requests.lock().unwrap().push(request.into_inner());
        let answer = self.script.lock().unwrap().pop_front().expect("a scripted answer");
        match answer {
            WatchAnswer::Refuse(status) => Err(status),
            WatchAnswer::Stream(sequences, end) => {
                let items = sequences.into_iter().map(|s| Ok(event(s))).chain(std::iter::once(Err(end)));
                Ok(tonic::Response::new(Box::pin(futures::stream::iter(items.collect::<Vec<_>>()))))
            }
        }
    }
}

/// Serves `script` on a local port; returns the address and the recorded requests.
async fn scripted_server(script: Vec<WatchAnswer>) -> (String, Arc<std::sync::Mutex<Vec<pb::WatchEventsRequest>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let service = Scripted { script: std::sync::Mutex::new(script.into()), requests: Arc::clone(&requests) };
    let incoming = futures::stream::unfold(listener, |l| async move { Some((l.accept().await.map(|(s, _)| s), l)) });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::lock_service_server::LockServiceServer::new(service))
            .serve_with_incoming(incoming),
    );
    (addr, requests)
}

/// A break, an election and a repeated event: the caller sees each sequence once, in order,
/// and every re-attach asks for the event after the last one delivered. An expired cursor
/// ends the stream with a typed error.
#[tokio::test]
async fn the_stream_resumes_after_the_last_event_and_ends_on_an_expired_cursor() {
    let script = vec![
        WatchAnswer::Stream(vec![1, 2], Status::unavailable("leader went away")),
        WatchAnswer::Refuse(with_kind(Status::unavailable("no leader yet"), "NOT_LEADER")),
        WatchAnswer::Stream(
            vec![3, 3, 4],
            with_kind(Status::out_of_range("event 5 is no longer retained"), "CURSOR_EXPIRED"),
        ),
    ];
    let (addr, requests) = scripted_server(script).await;

    let config = crate::ClientConfig::new([addr.clone()])
        .without_api_key()
        .with_request_timeout(std::time::Duration::from_secs(2))
        .with_retry_deadline(std::time::Duration::from_secs(5));
    let client = DlsClient::connect(config).await.unwrap();
    let opts = WatchOptions::new().with_only_new(true).with_kind(EventKind::LockRevoked).with_namespace_prefix("ns");
    let mut stream = client.watch_events(opts).await.unwrap();
    let mut seen = Vec::new();
    let end = loop {
        match stream.next_event().await.expect("an item before the end") {
            Ok(e) => seen.push(e.sequence),
            Err(e) => break e,
        }
    };
    assert_eq!(seen, vec![1, 2, 3, 4]);
    assert_eq!(end.code(), "CURSOR_EXPIRED", "{end}");
    assert!(end.message().contains("no longer retained"), "{end}");
    assert!(stream.next_event().await.is_none(), "an error ends the stream");

    let requests = requests.lock().unwrap().clone();
    let cursors: Vec<(u64, bool)> = requests.iter().map(|r| (r.from_sequence, r.only_new)).collect();
    assert_eq!(cursors, vec![(0, true), (3, false), (3, false)]);
    for r in &requests {
        assert_eq!(r.kinds, vec![pb::EventKind::LockRevoked as i32]);
        assert_eq!(r.namespace_prefixes, vec!["ns"]);
    }
}

/// A server answer about the request itself (here: a bad filter) ends the watch at once.
#[tokio::test]
async fn a_refused_watch_fails_without_retrying() {
    let refusal = with_kind(Status::invalid_argument("namespace_prefixes: empty"), "INVALID_ARGUMENT");
    let (addr, requests) = scripted_server(vec![WatchAnswer::Refuse(refusal)]).await;
    let client = DlsClient::connect(crate::ClientConfig::new([addr]).without_api_key()).await.unwrap();
    let err = client.watch_events(WatchOptions::new().with_namespace_prefix("")).await.unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert_eq!(requests.lock().unwrap().len(), 1);
}

//! Load test: one API key drives a 3-node cluster at ten times the rate it sustains, with
//! no backoff, for 30 s, while another key keeps a few transactions alive with heartbeats.
//! The overload must be answered with statuses (RESOURCE_EXHAUSTED, or UNAVAILABLE with a
//! retry hint), not with client timeouts; the other key's leases must all survive; and
//! the leader's memory must stay bounded. Prints the figures.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, LockMode, TransactionState};
use caerus_proto::v1::acquire_lock_response::Event as AcquireEvent;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::{AcquireLockRequest, BeginTransactionRequest, EndTransactionRequest};
use common::{add_key, opts, wait, Cluster};
use tokio::sync::Semaphore;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const FLOOD: Duration = Duration::from_secs(30);
/// The baseline that measures what the cluster sustains: closed loops, nothing left behind.
const BASELINE: Duration = Duration::from_secs(2);
const BASELINE_LOOPS: u64 = 32;
/// The flood starts cycles at this many times the sustained rate whatever the answers (an
/// open loop: no backoff, no waiting for earlier cycles), over this many connections: enough
/// that the cycles in flight stay under a node's streams per connection (200 by default),
/// so calls wait on the server, not in the client's queue for a stream.
const OVERLOAD: f64 = 10.0;
const CONNECTIONS: usize = 64;
/// Cycles in flight on the client at most; past it the generator, not the server, would be
/// the bottleneck, and the test says so instead of pretending the rate was offered.
const MAX_IN_FLIGHT: usize = 8_192;
/// The rate the flood must really have offered (cycles started, not skipped at the cap), as a
/// multiple of the sustained rate. Under CI contention a few ticks can find the client cap
/// full (0.7% once); the test is about overload, which 8x still is.
const MIN_OFFERED: f64 = 8.0;
/// The flooding key's active transactions (begins in flight count too) and the leader's
/// proposal queue: small enough that both engage within the flood.
const MAX_TXNS: u64 = 500;
const MAX_QUEUED: u64 = 64;
/// The proposals the leader writes at once (`raft/proposer.rs`: two batches of 512).
const LEADER_IN_FLIGHT: u64 = 2 * 512;
/// A call not answered in this long counts as a client timeout (the core client's default
/// per-attempt timeout).
const CALL_DEADLINE: Duration = Duration::from_secs(5);
/// Client timeouts tolerated: what the leader may hold for the flooding key at one moment.
/// A call the leader admitted can still outlive its deadline when the host stalls (a slow
/// `fdatasync`, the hypervisor or the scheduler pausing the nodes): in one CI run 1,146
/// calls timed out while the leader's AppendEntries to both followers kept timing out. The
/// limits bound what one such stall can catch: the proposals in flight, the queue (new work
/// up to --max-queued-proposals, releases up to twice that) and one lock wait per
/// transaction the key may hold. (A leader without the limits is caught by the other
/// checks: measured once, it never refused, offered only 5x as its answers slowed, timed
/// out 299 calls and grew by 80 MiB.)
const MAX_CLIENT_TIMEOUTS: u64 = LEADER_IN_FLIGHT + 2 * MAX_QUEUED + MAX_TXNS;
const STEADY_TXNS: usize = 4;
/// A third of the core client's default lease: heartbeats (every 1.7 s) starved for a few
/// seconds would lose it.
const STEADY_LEASE_MS: u64 = 5_000;
/// Leader memory may grow by at most this much over the flood. The state the flood can make
/// it hold is bounded by the limits: 500 idle transactions, 64 queued and 1,024 in-flight
/// proposals, the waiters of 256 keys (all under 2 MiB); the rest is the buffers of the
/// calls open at once (up to a few thousand, some KiB each) and the allocator's slack.
/// Measured: 5-13 MiB. Without the limits the flood's leaked transactions (one in four
/// cycles, ~1 KiB each) would grow it without end.
const MAX_RSS_GROWTH_MIB: f64 = 40.0;

#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    ok: AtomicU64,
    exhausted: AtomicU64,
    shed: AtomicU64,
    unavailable: AtomicU64,
    lock_timeouts: AtomicU64,
    client_timeouts: AtomicU64,
    other: AtomicU64,
}

impl Tally {
    fn count(&self, s: &Status) {
        let kind = s.metadata().get("x-dls-error").and_then(|v| v.to_str().ok()).unwrap_or("");
        let counter = match (s.code(), kind) {
            (Code::ResourceExhausted, "RESOURCE_EXHAUSTED") => &self.exhausted,
            (Code::Unavailable, _) if s.metadata().get("x-dls-retry-after-ms").is_some() => &self.shed,
            (Code::Unavailable, _) => &self.unavailable,
            (Code::DeadlineExceeded, "LOCK_TIMEOUT") => &self.lock_timeouts,
            // The client transport enforcing the call's own deadline.
            (Code::Cancelled, "") if s.message() == "Timeout expired" => &self.client_timeouts,
            _ => {
                eprintln!("unexpected answer: {s:?}");
                &self.other
            }
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Runs one call with the client deadline and counts how it ended.
    async fn call<T>(&self, f: impl std::future::Future<Output = Result<T, Status>>) -> Option<T> {
        self.calls.fetch_add(1, Relaxed);
        match tokio::time::timeout(CALL_DEADLINE, f).await {
            Ok(Ok(v)) => {
                self.ok.fetch_add(1, Relaxed);
                Some(v)
            }
            Ok(Err(s)) => {
                self.count(&s);
                None
            }
            Err(_) => {
                self.client_timeouts.fetch_add(1, Relaxed);
                None
            }
        }
    }
}

fn keyed<T>(msg: T, key: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    r.set_timeout(CALL_DEADLINE);
    r
}

/// Acquires to the end: the grant, or the status the wait ended with.
async fn acquire(c: &mut LockServiceClient<Channel>, r: Request<AcquireLockRequest>) -> Result<u64, Status> {
    let mut stream = c.acquire_lock(r).await?.into_inner();
    while let Some(m) = stream.message().await? {
        if let Some(AcquireEvent::Granted(g)) = m.event {
            return Ok(g.fencing_token);
        }
    }
    Err(Status::internal("the stream ended without a grant"))
}

/// One cycle: begin a one-hour transaction, take a lock, commit; a `leak`ed transaction is
/// left behind instead, as the client of the original report did. True if all of it was
/// accepted.
async fn cycle(mut c: LockServiceClient<Channel>, key: &str, id: u64, leak: bool, tally: &Tally) -> bool {
    let begin = BeginTransactionRequest {
        timeout_ms: 3_600_000,
        priority: 0,
        name: "flood".into(),
        request_id: format!("f{id}"),
        ..Default::default()
    };
    let Some(r) = tally.call(c.begin_transaction(keyed(begin, key))).await else { return false };
    let txn = r.into_inner().transaction_id;
    if leak {
        return true;
    }
    let a = AcquireLockRequest {
        transaction_id: txn,
        namespace: "flood".into(),
        key: format!("k{}", id % 256),
        mode: caerus_proto::v1::LockMode::Exclusive as i32,
        timeout_ms: 1_000,
        request_id: format!("a{id}"),
        begin: None,
        stay_open: false,
        permits: 0,
    };
    let acquired = tally.call(acquire(&mut c, keyed(a, key))).await.is_some();
    let end = EndTransactionRequest { transaction_id: txn, commit: true, request_id: format!("e{id}") };
    tally.call(c.end_transaction(keyed(end, key))).await.is_some() && acquired
}

/// The other key: a few transactions kept alive by the core client's heartbeats, on a
/// thread and runtime of their own that keep the normal CPU priority.
struct Steady {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Steady {
    /// Begins the transactions; returns once they hold their locks, with the thread's id.
    fn start(endpoints: Vec<String>, key: String) -> (Steady, std::ffi::OsString) {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let tid = std::fs::read_link("/proc/thread-self").unwrap().file_name().unwrap().to_owned();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let config = ClientConfig::new(endpoints).without_api_key().with_api_key(&key);
                let client = DlsClient::connect(config).await.unwrap();
                let mut healthy = Vec::new();
                for i in 0..STEADY_TXNS {
                    let tx = client.begin_transaction(opts(STEADY_LEASE_MS)).await.unwrap();
                    tx.acquire_lock("steady", &format!("k{i}"), LockMode::Exclusive, wait(1_000)).await.unwrap();
                    healthy.push(tx);
                }
                ready_tx.send(tid).unwrap();
                // Polled, so the runtime's one thread keeps running the heartbeats meanwhile.
                while stopped.try_recv().is_err() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                for tx in &healthy {
                    assert!(!tx.is_lost(), "transaction {} of the other key was lost: {:?}", tx.id(), tx.lost_reason());
                    let st = tx.status().await.unwrap();
                    assert_eq!(st.state, TransactionState::Active, "transaction {}", tx.id());
                    assert_eq!(st.locks.len(), 1);
                }
                for tx in healthy {
                    tx.commit().await.unwrap();
                }
            });
        });
        let tid = ready.recv().expect("the steady client failed to start");
        (Steady { stop, thread }, tid)
    }

    /// Checks every transaction is still active with its lock, then commits them.
    fn finish(self) {
        self.stop.send(()).unwrap();
        if let Err(panic) = self.thread.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// Renices every thread of this process but `keep` (threads started later inherit it).
fn lowest_cpu_priority(keep: &std::ffi::OsStr) {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let tid = task.unwrap().file_name();
        if tid == keep {
            continue;
        }

        let ok = std::process::Command::new("renice")
            .args(["-n", "19", "-p"])
            .arg(&tid)
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "renice of thread {tid:?} failed");
    }
}

/// Seconds this process's threads have spent runnable but waiting for a CPU.
fn runqueue_wait() -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            ns += s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a 30 s timing-sensitive load test: `make stress` runs it (release build); CI does not"]
async fn a_flood_from_one_key_is_refused_with_statuses_and_spares_the_other_keys_leases() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let add = |name: &str, admin| add_key(&file, name, &[], admin);
    let (flooder, steady_key, admin) = (add("flood", false), add("steady", false), add("admin", true));
    let (max_txns, max_queued) = (MAX_TXNS.to_string(), MAX_QUEUED.to_string());
    let flags = [
        "--api-keys-file",
        file.to_str().unwrap(),
        "--max-txns-per-api-key",
        &max_txns,
        "--max-queued-proposals",
        &max_queued,
    ];
    let cluster = Cluster::start_full(3, &flags, Some(admin)).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let pid = cluster.pid(leader).unwrap();

    let (steady, steady_tid) = Steady::start(cluster.endpoints(), steady_key);
    // The flood would come from other machines; on this shared one its generator must not
    // take the CPU the nodes and the other key's client need.
    lowest_cpu_priority(&steady_tid);

    let leader_addr = cluster.addr(leader);
    let channels: Vec<Channel> = (0..CONNECTIONS)
        .map(|_| Channel::from_shared(format!("http://{leader_addr}")).unwrap().connect_lazy())
        .collect();
    let channel = |i: u64| LockServiceClient::new(channels[i as usize % CONNECTIONS].clone());

    // What the cluster sustains: closed loops of whole cycles, nothing left behind.
    let baseline = Arc::new(Tally::default());
    let until = Instant::now() + BASELINE;
    let loops: Vec<_> = (0..BASELINE_LOOPS)
        .map(|l| {
            let (c, key, tally) = (channel(l), flooder.clone(), baseline.clone());
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut n = 0;
                while Instant::now() < until {
                    n += 1;
                    done += u64::from(cycle(c.clone(), &key, 1_000_000_000 * (l + 1) + n, false, &tally).await);
                }
                done
            })
        })
        .collect();
    let mut sustained = 0;
    for l in loops {
        sustained += l.await.unwrap();
    }
    let sustained = sustained as f64 / BASELINE.as_secs_f64();
    assert!(sustained > 0.0, "the baseline completed no cycle");
    let rss_before = rss_mib(pid);

    // The flood: cycles started at OVERLOAD x the sustained rate, in 10 ms ticks.
    let tally = Arc::new(Tally::default());
    let (started, completed, skipped) = (AtomicU64::new(0), Arc::new(AtomicU64::new(0)), AtomicU64::new(0));
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let per_tick = OVERLOAD * sustained / 100.0;
    let t0 = Instant::now();
    let until = t0 + FLOOD;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let (mut due, mut n, mut rss_peak, mut next_rss) = (0.0, 0u64, rss_before, t0);
    let waited_before = runqueue_wait();
    let (mut ticks, mut max_lag) = (0u32, Duration::ZERO);
    while Instant::now() < until {
        let at = tick.tick().await;
        max_lag = max_lag.max(Instant::now().saturating_duration_since(at.into_std()));
        ticks += 1;
        due += per_tick;
        while due >= 1.0 {
            due -= 1.0;
            n += 1;
            let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                skipped.fetch_add(1, Relaxed);
                continue;
            };
            let (c, key, tally, completed) = (channel(n), flooder.clone(), tally.clone(), completed.clone());
            started.fetch_add(1, Relaxed);
            tokio::spawn(async move {
                if cycle(c, &key, n, n % 4 == 0, &tally).await {
                    completed.fetch_add(1, Relaxed);
                }
                drop(permit);
            });
        }
        if Instant::now() >= next_rss {
            rss_peak = rss_peak.max(rss_mib(pid));
            next_rss += Duration::from_millis(500);
        }
    }
    // Every call ends by the client deadline at the latest.
    let _all = in_flight.acquire_many(MAX_IN_FLIGHT as u32).await.unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let waited = runqueue_wait() - waited_before;
    // Tells a starved generator (timeouts it caused itself) from a stalled server.
    println!("generator: {ticks} ticks of 10 ms, latest {max_lag:?} late; its threads waited {waited:.1} s for a CPU");
    let rss_after = rss_mib(pid);
    let rss_peak = rss_peak.max(rss_after);

    let get = |c: &AtomicU64| c.load(Relaxed);
    let t = &*tally;
    let offered = get(&started) as f64 / FLOOD.as_secs_f64();
    println!(
        "sustained {sustained:.0} cycles/s (begin, acquire, commit; {BASELINE_LOOPS} loops for {BASELINE:?}); \
         flood from one key for {secs:.1} s: offered {offered:.0} cycles/s ({:.1}x) in {} calls, accepted {:.0} \
         cycles/s ({} calls answered OK); refused: RESOURCE_EXHAUSTED {}, UNAVAILABLE with retry hint {}, \
         UNAVAILABLE other {}, LOCK_TIMEOUT {}, other {}; client timeouts {}; cycles not started (client at \
         {MAX_IN_FLIGHT} in flight) {}; leader RSS {rss_before:.1} MiB before, {rss_peak:.1} MiB peak, \
         {rss_after:.1} MiB after",
        offered / sustained,
        get(&t.calls),
        get(&completed) as f64 / secs,
        get(&t.ok),
        get(&t.exhausted),
        get(&t.shed),
        get(&t.unavailable),
        get(&t.lock_timeouts),
        get(&t.other),
        get(&t.client_timeouts),
        get(&skipped),
    );

    // The other key's transactions all kept their leases and their locks.
    steady.finish();
    // The overload was offered, and answered by both kinds of refusal, not left to time out.
    assert!(
        offered >= MIN_OFFERED * sustained,
        "the client offered only {:.1}x the sustained rate (at least {MIN_OFFERED}x needed)",
        offered / sustained
    );
    assert!(get(&t.exhausted) > 0, "the flooding key never reached --max-txns-per-api-key");
    assert!(get(&t.shed) > 0, "the proposal queue never shed");
    assert_eq!(get(&t.other), 0, "unexpected answers (printed above)");
    let timeouts = get(&t.client_timeouts);
    assert!(
        timeouts <= MAX_CLIENT_TIMEOUTS,
        "{timeouts} calls timed out: more than the leader's limits let it hold at once ({MAX_CLIENT_TIMEOUTS})"
    );
    assert!(
        rss_peak - rss_before <= MAX_RSS_GROWTH_MIB,
        "leader RSS grew from {rss_before:.1} to {rss_peak:.1} MiB (bound {MAX_RSS_GROWTH_MIB} MiB)"
    );
}

//! The systems under test, behind one small trait so every workload runs unchanged on each.
//!
//! A [`Target`] opens [`Session`]s (one per benchmark client). A session runs lock
//! "transactions": a holder identity with a lease kept alive in the background, that takes
//! locks and then releases all of them at once.
//!
//! | target | begin                    | acquire                        | commit                         |
//! |--------|--------------------------|--------------------------------|--------------------------------|
//! | dls    | `BeginTransaction`       | `AcquireLock` (queued, FIFO)   | `Commit`                       |
//! | redis  | (random owner value)     | `SET k v NX PX ttl`, retried   | compare-and-delete Lua script  |
//! | etcd   | `LeaseGrant`             | v3lock `Lock` with the lease   | `LeaseRevoke` (drops its keys) |

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions, TransactionState};
use rand::Rng;

/// Namespace of every DLS lock the benchmark takes.
pub const NAMESPACE: &str = "bench";

/// Lock mode asked for. Redis and etcd have no shared locks: they take `Shared` as exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One holder at a time.
    Exclusive,
    /// Any number of readers, no writer.
    Shared,
}

/// A failed operation, classified by kind for the report.
#[derive(Debug, Clone)]
pub struct OpError {
    /// Stable SCREAMING_SNAKE kind (`LOCK_TIMEOUT`, `DEADLOCK_VICTIM`, `UNAVAILABLE`, ...).
    pub kind: &'static str,
    /// Details.
    pub message: String,
}

impl OpError {
    /// An error of this kind.
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        OpError { kind, message: message.into() }
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Result of one target operation.
pub type OpResult<T> = Result<T, OpError>;

/// A lock service to benchmark.
pub trait Target: Send + Sync + 'static {
    /// One client's connection.
    type Session: Session;
    /// Opens a session (one per benchmark client).
    fn connect(&self) -> impl Future<Output = OpResult<Self::Session>> + Send;
}

/// One benchmark client's connection.
pub trait Session: Send + 'static {
    /// A lock holder with a lease.
    type Txn: Send + 'static;
    /// Starts a holder whose lease (`lease` long) is renewed in the background.
    fn begin(&mut self, lease: Duration) -> impl Future<Output = OpResult<Self::Txn>> + Send;
    /// Takes `key`, waiting up to `wait`. Returns the grant's fencing token when the system
    /// hands one out.
    fn acquire(
        &mut self,
        txn: &mut Self::Txn,
        key: &str,
        mode: Mode,
        wait: Duration,
    ) -> impl Future<Output = OpResult<Option<u64>>> + Send;
    /// Releases every lock of `txn` and ends it.
    fn commit(&mut self, txn: Self::Txn) -> impl Future<Output = OpResult<()>> + Send;
    /// Ends `txn` after a failure, releasing what it holds; errors are ignored.
    fn abort(&mut self, txn: Self::Txn) -> impl Future<Output = ()> + Send;
    /// Whether the lease of `txn` is still alive on the server.
    fn alive(&mut self, txn: &mut Self::Txn) -> impl Future<Output = bool> + Send;
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

// ---------------------------------------------------------------------------------------
// Caerus DLS
// ---------------------------------------------------------------------------------------

/// Caerus DLS through `caerus-core`.
pub struct Dls {
    endpoints: Vec<String>,
}

impl Dls {
    /// A target on these `host:port` endpoints (any node; the client finds the leader).
    pub fn new(endpoints: Vec<String>) -> Self {
        Dls { endpoints }
    }
}

fn dls_err(e: caerus_core::Error) -> OpError {
    OpError::new(e.code(), e.message().to_string())
}

/// A `DlsClient` per benchmark client.
pub struct DlsSession {
    client: DlsClient,
}

impl Target for Dls {
    type Session = DlsSession;
    async fn connect(&self) -> OpResult<DlsSession> {
        let client = DlsClient::connect(ClientConfig::new(self.endpoints.clone())).await.map_err(dls_err)?;
        Ok(DlsSession { client })
    }
}

/// A DLS transaction in the benchmark. `begin` sends nothing: the first acquire starts
/// the transaction in the same call (the one-shot AcquireLock, as an application using
/// `DlsClient::begin_with_lock` does), so a cycle is two round trips, not three.
pub enum DlsTxn {
    NotStarted { lease: Duration },
    Started(caerus_core::Transaction),
}

fn dls_mode(mode: Mode) -> LockMode {
    match mode {
        Mode::Exclusive => LockMode::Exclusive,
        Mode::Shared => LockMode::SharedRead,
    }
}

impl Session for DlsSession {
    type Txn = DlsTxn;

    async fn begin(&mut self, lease: Duration) -> OpResult<Self::Txn> {
        Ok(DlsTxn::NotStarted { lease })
    }

    async fn acquire(&mut self, txn: &mut Self::Txn, key: &str, mode: Mode, wait: Duration) -> OpResult<Option<u64>> {
        let opts = AcquireOptions::default().with_timeout_ms(ms(wait));
        let lock = match txn {
            DlsTxn::Started(tx) => tx.acquire_lock(NAMESPACE, key, dls_mode(mode), opts).await.map_err(dls_err)?,
            DlsTxn::NotStarted { lease } => {
                let begin = TransactionOptions::default().with_timeout_ms(ms(*lease));
                let (tx, lock) =
                    self.client.begin_with_lock(begin, NAMESPACE, key, dls_mode(mode), opts).await.map_err(dls_err)?;
                *txn = DlsTxn::Started(tx);
                lock
            }
        };
        Ok(Some(lock.fencing_token))
    }

    async fn commit(&mut self, txn: Self::Txn) -> OpResult<()> {
        match txn {
            DlsTxn::Started(tx) => tx.commit().await.map_err(dls_err),
            DlsTxn::NotStarted { .. } => Ok(()),
        }
    }

    async fn abort(&mut self, txn: Self::Txn) {
        if let DlsTxn::Started(tx) = txn {
            let _ = tx.abort().await;
        }
    }

    async fn alive(&mut self, txn: &mut Self::Txn) -> bool {
        match txn {
            DlsTxn::Started(tx) => {
                !tx.is_lost() && matches!(tx.status().await, Ok(s) if s.state == TransactionState::Active)
            }
            DlsTxn::NotStarted { .. } => false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------------------

/// Deletes KEYS[1] only if it still holds our value ARGV[1].
const RELEASE_LUA: &str =
    r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end"#;
/// Extends KEYS[1] to ARGV[2] ms only if it still holds our value ARGV[1].
const EXTEND_LUA: &str =
    r#"if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end"#;

/// Redis single-instance locks: `SET key owner NX PX ttl`, retried with a short random
/// backoff while taken; released with a compare-and-delete script; extended by a
/// compare-and-pexpire script every third of the TTL.
pub struct Redis {
    client: redis::Client,
}

impl Redis {
    /// A target on `host:port`.
    pub fn new(endpoint: &str) -> OpResult<Self> {
        let url = if endpoint.starts_with("redis://") { endpoint.to_string() } else { format!("redis://{endpoint}/") };
        let client = redis::Client::open(url).map_err(redis_err)?;
        Ok(Redis { client })
    }
}

fn redis_err(e: redis::RedisError) -> OpError {
    let kind = if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        "UNAVAILABLE"
    } else {
        "REDIS_ERROR"
    };
    OpError::new(kind, e.to_string())
}

/// One multiplexed connection per benchmark client.
pub struct RedisSession {
    conn: redis::aio::MultiplexedConnection,
    release: redis::Script,
}

/// A Redis lock holder: a random owner value and the keys it holds.
pub struct RedisTxn {
    owner: String,
    ttl: Duration,
    held: Arc<Mutex<Vec<String>>>,
    lost: Arc<AtomicBool>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Target for Redis {
    type Session = RedisSession;
    async fn connect(&self) -> OpResult<RedisSession> {
        let conn = self.client.get_multiplexed_async_connection().await.map_err(redis_err)?;
        Ok(RedisSession { conn, release: redis::Script::new(RELEASE_LUA) })
    }
}

impl Session for RedisSession {
    type Txn = RedisTxn;

    async fn begin(&mut self, lease: Duration) -> OpResult<RedisTxn> {
        let owner = format!("{:032x}", rand::thread_rng().gen::<u128>());
        let held: Arc<Mutex<Vec<String>>> = Arc::default();
        let lost = Arc::new(AtomicBool::new(false));
        // The keeper sleeps first: a short cycle commits before it ever sends anything.
        let keeper = {
            let (mut conn, owner, held, lost) = (self.conn.clone(), owner.clone(), held.clone(), lost.clone());
            tokio::spawn(async move {
                let extend = redis::Script::new(EXTEND_LUA);
                loop {
                    tokio::time::sleep(lease / 3).await;
                    let keys = held.lock().unwrap().clone();
                    for key in keys {
                        let r: Result<i64, _> =
                            extend.key(&key).arg(&owner).arg(ms(lease)).invoke_async(&mut conn).await;
                        if !matches!(r, Ok(1)) {
                            lost.store(true, Ordering::SeqCst);
                        }
                    }
                }
            })
        };
        Ok(RedisTxn { owner, ttl: lease, held, lost, keeper })
    }

    async fn acquire(&mut self, txn: &mut RedisTxn, key: &str, _mode: Mode, wait: Duration) -> OpResult<Option<u64>> {
        let deadline = Instant::now() + wait;
        loop {
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&txn.owner)
                .arg("NX")
                .arg("PX")
                .arg(ms(txn.ttl))
                .query_async(&mut self.conn)
                .await
                .map_err(redis_err)?;
            if set.is_some() {
                txn.held.lock().unwrap().push(key.to_string());
                return Ok(None);
            }
            if Instant::now() >= deadline {
                return Err(OpError::new("LOCK_TIMEOUT", format!("{key} still taken after {wait:?}")));
            }
            let backoff = Duration::from_micros(rand::thread_rng().gen_range(1_000..5_000));
            tokio::time::sleep(backoff).await;
        }
    }

    async fn commit(&mut self, txn: RedisTxn) -> OpResult<()> {
        txn.keeper.abort();
        let keys = std::mem::take(&mut *txn.held.lock().unwrap());
        let mut result = Ok(());
        for key in keys {
            let deleted: i64 =
                self.release.key(&key).arg(&txn.owner).invoke_async(&mut self.conn).await.map_err(redis_err)?;
            if deleted != 1 {
                result = Err(OpError::new("LEASE_LOST", format!("{key} was no longer ours at release")));
            }
        }
        result
    }

    async fn abort(&mut self, txn: RedisTxn) {
        let _ = self.commit(txn).await;
    }

    async fn alive(&mut self, txn: &mut RedisTxn) -> bool {
        if txn.lost.load(Ordering::SeqCst) {
            return false;
        }
        let keys = txn.held.lock().unwrap().clone();
        for key in keys {
            let v: Result<Option<String>, _> = redis::cmd("GET").arg(&key).query_async(&mut self.conn).await;
            if !matches!(v, Ok(Some(ref o)) if *o == txn.owner) {
                return false;
            }
        }
        true
    }
}

// ---------------------------------------------------------------------------------------
// etcd
// ---------------------------------------------------------------------------------------

#[cfg(feature = "etcd")]
pub use etcd::Etcd;

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;
    use etcd_client::{Client, LockOptions};

    /// etcd v3: a lease per transaction, the v3lock `Lock` RPC attached to it, and
    /// `LeaseRevoke` to release every lock at once. The grant's header revision is the
    /// fencing token (it orders holders of one lock name).
    pub struct Etcd {
        endpoints: Vec<String>,
    }

    impl Etcd {
        /// A target on these `host:port` client endpoints.
        pub fn new(endpoints: Vec<String>) -> Self {
            Etcd { endpoints }
        }
    }

    fn etcd_err(e: etcd_client::Error) -> OpError {
        let kind = match &e {
            etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => "UNAVAILABLE",
            etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::Unavailable => "UNAVAILABLE",
            _ => "ETCD_ERROR",
        };
        OpError::new(kind, e.to_string())
    }

    /// One etcd client per benchmark client.
    pub struct EtcdSession {
        client: Client,
    }

    /// An etcd lease and its keep-alive task.
    pub struct EtcdTxn {
        lease: i64,
        lost: Arc<AtomicBool>,
        keeper: tokio::task::JoinHandle<()>,
    }

    impl Target for Etcd {
        type Session = EtcdSession;
        async fn connect(&self) -> OpResult<EtcdSession> {
            let client = Client::connect(&self.endpoints, None).await.map_err(etcd_err)?;
            Ok(EtcdSession { client })
        }
    }

    impl Session for EtcdSession {
        type Txn = EtcdTxn;

        async fn begin(&mut self, lease: Duration) -> OpResult<EtcdTxn> {
            let ttl = i64::try_from(lease.as_secs()).unwrap_or(i64::MAX).max(1);
            let id = self.client.lease_grant(ttl, None).await.map_err(etcd_err)?.id();
            let lost = Arc::new(AtomicBool::new(false));
            // Sleeps first: a short cycle revokes the lease before any keep-alive stream opens.
            let keeper = {
                let (mut client, lost) = (self.client.clone(), lost.clone());
                let period = Duration::from_secs(ttl as u64) / 3;
                tokio::spawn(async move {
                    tokio::time::sleep(period).await;
                    let Ok((mut keeper, mut stream)) = client.lease_keep_alive(id).await else {
                        lost.store(true, Ordering::SeqCst);
                        return;
                    };
                    loop {
                        let ok = keeper.keep_alive().await.is_ok()
                            && matches!(stream.message().await, Ok(Some(r)) if r.ttl() > 0);
                        if !ok {
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        tokio::time::sleep(period).await;
                    }
                })
            };
            Ok(EtcdTxn { lease: id, lost, keeper })
        }

        async fn acquire(
            &mut self,
            txn: &mut EtcdTxn,
            key: &str,
            _mode: Mode,
            wait: Duration,
        ) -> OpResult<Option<u64>> {
            let opts = LockOptions::new().with_lease(txn.lease);
            match tokio::time::timeout(wait, self.client.lock(key, Some(opts))).await {
                Err(_) => Err(OpError::new("LOCK_TIMEOUT", format!("{key} still taken after {wait:?}"))),
                Ok(Err(e)) => Err(etcd_err(e)),
                Ok(Ok(resp)) => Ok(resp.header().map(|h| h.revision() as u64)),
            }
        }

        async fn commit(&mut self, txn: EtcdTxn) -> OpResult<()> {
            txn.keeper.abort();
            self.client.lease_revoke(txn.lease).await.map_err(etcd_err)?;
            if txn.lost.load(Ordering::SeqCst) {
                return Err(OpError::new("LEASE_LOST", "the lease lapsed before release"));
            }
            Ok(())
        }

        async fn abort(&mut self, txn: EtcdTxn) {
            txn.keeper.abort();
            let _ = self.client.lease_revoke(txn.lease).await;
        }

        async fn alive(&mut self, txn: &mut EtcdTxn) -> bool {
            !txn.lost.load(Ordering::SeqCst)
                && matches!(self.client.lease_time_to_live(txn.lease, None).await, Ok(r) if r.ttl() > 0)
        }
    }
}

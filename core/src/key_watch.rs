//! Who holds one key, followed as it changes ([`DlsClient::watch_key`]), and leader
//! election on top of it ([`Election`]).
//!
//! The server streams the key's holders and what changed since its previous message; the
//! watch keeps the last cursor and, when its stream breaks (leader change, reset
//! connection), re-attaches with it, so the first message after a break reports what
//! changed meanwhile (merged) and nothing is missed.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use caerus_proto::v1 as pb;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::Wire;
use futures::{Stream, StreamExt};
use tonic::transport::Channel;
use tonic::Status;

use crate::client::DlsClient;
use crate::error::{Error, Result};
use crate::resume::Resuming;
use crate::router::{Attempts, Router};
use crate::types::{required, AcquireOptions, EndCause, Lock, LockMode, TransactionOptions};
use crate::Transaction;

/// How a key's holders changed: the shared type, declared once in `caerus-types`.
pub use caerus_types::KeyChangeKind;

/// A transaction holding a watched key.
#[cfg_attr(feature = "pyo3", pyo3::pyclass(frozen, get_all, module = "caerus"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHolder {
    /// The holding transaction.
    pub transaction_id: u64,
    /// Its label: in an `Election`, the candidate's name.
    pub transaction_name: String,
    /// The mode held.
    pub mode: LockMode,
    /// The grant's fencing token.
    pub fencing_token: u64,
    /// When it was granted (leader clock, ms since the Unix epoch).
    pub since_ms: i64,
}

/// One change of a key's holders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyChange {
    /// What happened.
    pub kind: KeyChangeKind,
    /// To whom (for a departure: the holder as it was).
    pub holder: KeyHolder,
    /// Why the holder's transaction ended (Expired, Revoked).
    pub end_cause: Option<EndCause>,
}

/// The holders of a watched key, and what changed since the previous update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyUpdate {
    /// Everyone holding the key now (empty: free), oldest grant first.
    pub holders: Vec<KeyHolder>,
    /// Empty in the first update of a watch.
    pub changes: Vec<KeyChange>,
    /// True for the first update: the state the watch starts from.
    pub initial: bool,
}

fn holder(h: pb::KeyHolder) -> Result<KeyHolder> {
    Ok(KeyHolder {
        transaction_id: h.transaction_id,
        transaction_name: h.transaction_name,
        mode: required("lock mode", h.mode)?,
        fencing_token: h.fencing_token,
        since_ms: h.since_ms,
    })
}

fn update(m: pb::KeyHolders) -> Result<KeyUpdate> {
    let kind = |raw: i32| {
        KeyChangeKind::from_wire(raw)
            .ok_or_else(|| Error::internal(format!("server sent an unknown key change kind {raw}")))
    };
    let changes = m
        .changes
        .into_iter()
        .map(|c| {
            let h = c.holder.ok_or_else(|| Error::internal("server sent a key change without its holder"))?;
            Ok(KeyChange { kind: kind(c.kind)?, holder: holder(h)?, end_cause: EndCause::from_wire(c.end_cause) })
        })
        .collect::<Result<_>>()?;
    Ok(KeyUpdate { holders: m.holders.into_iter().map(holder).collect::<Result<_>>()?, changes, initial: m.initial })
}

/// The state behind a [`KeyWatch`].
struct Watch {
    router: Arc<Router>,
    namespace: String,
    key: String,
    /// The last cursor received: where a re-attach resumes.
    cursor: String,
    /// Whether an update was delivered (after that, a re-attach's first message is a change).
    delivered: bool,
    stream: Resuming<pb::KeyHolders>,
}

/// The request of an attach: from the last cursor received (none at first).
fn request(namespace: &str, key: &str, cursor: &str) -> pb::WatchKeyRequest {
    pb::WatchKeyRequest { namespace: namespace.to_string(), key: key.to_string(), cursor: cursor.to_string() }
}

/// Opens WatchKey on `channel`.
fn open(
    router: &Router,
    channel: Channel,
    request: pb::WatchKeyRequest,
) -> impl std::future::Future<Output = std::result::Result<tonic::Response<tonic::Streaming<pb::KeyHolders>>, Status>> {
    let request = router.request(request);
    async move { LockServiceClient::new(channel).watch_key(request).await }
}

impl Watch {
    async fn attach(&mut self, attempts: &mut Attempts<'_>) -> Result<()> {
        let (router, namespace, key, cursor) = (&self.router, &self.namespace, &self.key, &self.cursor);
        self.stream.attach(attempts, |ch| open(router, ch, request(namespace, key, cursor))).await.map(|_| ())
    }

    async fn next_update(&mut self) -> Result<KeyUpdate> {
        loop {
            let (router, namespace, key, cursor) = (&self.router, &self.namespace, &self.key, &self.cursor);
            let m = self.stream.next_message(router, |ch| open(router, ch, request(namespace, key, cursor))).await?;
            self.cursor = m.cursor.clone();
            let mut u = update(m)?;
            if self.delivered {
                // The first message after a re-attach: a change (or nothing) since the cursor.
                if u.changes.is_empty() {
                    continue;
                }
                u.initial = false;
            }
            self.delivered = true;
            return Ok(u);
        }
    }
}

/// Updates from [`DlsClient::watch_key`]: the first is the key's holders when the watch
/// attached, then one per change. A [`futures::Stream`]; it follows the key until dropped
/// and ends after yielding an error (the retry budget ran out re-attaching, or the server
/// refused the watch).
pub struct KeyWatch {
    inner: Pin<Box<dyn Stream<Item = Result<KeyUpdate>> + Send>>,
}

impl fmt::Debug for KeyWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyWatch").finish_non_exhaustive()
    }
}

impl KeyWatch {
    /// The next update; `None` once the watch ended (after an error).
    pub async fn next_update(&mut self) -> Option<Result<KeyUpdate>> {
        self.inner.next().await
    }
}

impl Stream for KeyWatch {
    type Item = Result<KeyUpdate>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl DlsClient {
    /// Follows who holds `namespace`/`key`: the holders now, then every change (granted,
    /// released, expired, revoked, downgraded). Needs no transaction; the API key must be
    /// allowed the namespace. Returns once attached; survives leader changes.
    pub async fn watch_key(&self, namespace: &str, key: &str) -> Result<KeyWatch> {
        let router = Arc::clone(self.router());
        let mut watch = Watch {
            router: Arc::clone(&router),
            namespace: namespace.to_string(),
            key: key.to_string(),
            cursor: String::new(),
            delivered: false,
            stream: Resuming::new("WatchKey"),
        };
        let mut attempts = router.attempts("WatchKey", router.default_options());
        watch.attach(&mut attempts).await?;
        let inner = futures::stream::unfold(Some(watch), |state| async move {
            let mut watch = state?;
            match watch.next_update().await {
                Ok(u) => Some((Ok(u), Some(watch))),
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(KeyWatch { inner: Box::pin(inner) })
    }
}

/// Leader election over one key, as etcd's `concurrency.Election` and Curator's
/// `LeaderLatch`: candidates queue for the key's EXCLUSIVE lock (fairly, in arrival
/// order); the holder leads, with the lock's fencing token as its term. A leader that
/// crashes or stalls loses the lease and the next candidate takes over.
#[derive(Clone, Debug)]
pub struct Election {
    client: DlsClient,
    namespace: String,
    key: String,
}

/// Held while this candidate leads. Watch [`Leadership::lost`] (the lease lapsed or an
/// operator aborted it) and stop acting as leader when it fires; [`Leadership::resign`]
/// steps down.
#[derive(Debug)]
pub struct Leadership {
    tx: Transaction,
    lock: Lock,
}

impl Leadership {
    /// The fencing token of this leadership: higher than every earlier leader's. Hand it
    /// to what the leader writes to.
    pub fn term(&self) -> u64 {
        self.lock.fencing_token
    }

    /// Resolves when leadership is lost (never, if this leader resigns).
    pub async fn lost(&self) -> crate::LostReason {
        self.tx.lost().await
    }

    /// Steps down: the next candidate in line takes over.
    pub async fn resign(self) -> Result<()> {
        self.tx.commit().await
    }
}

impl Election {
    /// An election over `namespace`/`key`.
    pub fn new(client: &DlsClient, namespace: impl Into<String>, key: impl Into<String>) -> Self {
        Election { client: client.clone(), namespace: namespace.into(), key: key.into() }
    }

    /// Waits until `candidate` leads (candidates are served in arrival order). `lease_ms`
    /// is how long a silent leader keeps leading before the next one takes over.
    pub async fn campaign(&self, candidate: &str, lease_ms: u64) -> Result<Leadership> {
        let opts = TransactionOptions::default().with_name(candidate).with_timeout_ms(lease_ms);
        let tx = self.client.begin_transaction(opts).await?;
        // The longest single wait the server takes; waiting again keeps the place lost
        // only for a moment, and only if the hour passed with someone else leading.
        let wait = AcquireOptions::default().with_timeout_ms(3_600_000);
        loop {
            match tx.acquire_lock(&self.namespace, &self.key, LockMode::Exclusive, wait.clone()).await {
                Ok(lock) => return Ok(Leadership { tx, lock }),
                Err(Error::LockTimeout { .. }) => continue,
                Err(e) => {
                    let _ = tx.abort().await;
                    return Err(e);
                }
            }
        }
    }

    /// The current leader, if any.
    pub async fn leader(&self) -> Result<Option<KeyHolder>> {
        let mut watch = self.client.watch_key(&self.namespace, &self.key).await?;
        match watch.next_update().await {
            Some(Ok(u)) => Ok(u.holders.into_iter().next()),
            Some(Err(e)) => Err(e),
            None => Err(Error::internal("key watch ended before its first update")),
        }
    }

    /// The leader now, then each time it changes (`None`: nobody leads).
    pub async fn observe(&self) -> Result<impl Stream<Item = Result<Option<KeyHolder>>> + Send> {
        let watch = self.client.watch_key(&self.namespace, &self.key).await?;
        let mut last: Option<Option<u64>> = None;
        Ok(watch.filter_map(move |u| {
            let out = match u {
                Err(e) => Some(Err(e)),
                Ok(u) => {
                    let leader = u.holders.into_iter().next();
                    let term = leader.as_ref().map(|l| l.fencing_token);
                    (last != Some(term)).then(|| {
                        last = Some(term);
                        Ok(leader)
                    })
                }
            };
            futures::future::ready(out)
        }))
    }
}

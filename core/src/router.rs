//! Leader discovery and retries: the one place that decides where a call goes and whether
//! a failed attempt is tried again.
//!
//! Only the raft leader serves calls. A follower relays a call to the leader it knows and
//! names it (`x-dls-leader-addr`) in the answer, so the next calls go to the leader
//! directly, unless the leader gave this client no answer lately (a cut route: then the
//! follower stays the way in). A follower that cannot reach a leader answers UNAVAILABLE
//! with the leader's address; during an election nobody can answer. Retrying is safe
//! because every mutating request carries a request id chosen once by the caller, so the
//! server returns the first attempt's outcome instead of doing the work twice.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use caerus_proto::metadata;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::metadata::{Ascii, MetadataMap, MetadataValue};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Response, Status};
use tracing::debug;

use crate::config::{normalize_endpoint, ClientConfig};
use crate::error::{error_kind, leader_addr, not_grpc, plain_http_status, retry_after, Error, Result};
use crate::http_probe::http1_status;
use crate::lanes::{Lanes, StreamPlace};
use crate::tls_hint::tls_hint;

/// A fresh request id. A retried call carries the same one, so the server applies it once.
///
/// Every id comes from the kernel (one `getrandom` call), never from a generator kept in
/// the process: the server takes two begins with one id for one transaction, and a
/// user-space generator copied by a `fork` or a VM snapshot would hand two processes the
/// same ids, and so the same lock. uuid's `fast-rng` (rand's `ThreadRng`, not reseeded
/// on fork) was measured and dropped for this (docs/bench.md, sixth round).
pub(crate) fn new_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// First retry delay after a transient failure.
pub(crate) const BACKOFF_START: Duration = Duration::from_millis(50);
/// Longest delay between two attempts. Short, because the common reason to retry is an
/// election (about half a second with the server's defaults), and a client should find
/// the new leader soon after it is elected, not a whole long backoff later; jitter keeps
/// many clients from retrying in step.
pub(crate) const BACKOFF_CAP: Duration = Duration::from_millis(200);

/// How long a node that gave no answer at all is not taken for the leader on a relayed
/// answer's word. Long, because finding out again costs a whole attempt timeout when
/// packets are dropped; a route that healed meanwhile costs only the relaying follower's
/// extra hop until then.
pub(crate) const UNREACHABLE_MEMORY: Duration = Duration::from_secs(60);

/// Bound of the HTTP/1 question put to a plain-text port that dropped the gRPC connection:
/// a local HTTP server answers in milliseconds, and a port that does not answer is not one.
const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What to do after an attempt failed with a status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The node named the leader: go there at once.
    Redirect(String),
    /// No answer about the request itself (no leader, transport trouble): back off and
    /// try another node.
    Retry,
    /// The leader is overloaded and shed the request untouched: try it again on the same
    /// node, no sooner than the server's hint.
    RetryAfter(Duration),
    /// The server decided the request: the status is the outcome.
    Final,
}

/// Sorts a failed attempt's status into redirect, retry or final answer.
pub(crate) fn classify(status: &Status) -> Verdict {
    let hinted = || match (leader_addr(status), retry_after(status)) {
        (Some(addr), _) => Verdict::Redirect(addr.to_string()),
        (None, Some(after)) => Verdict::RetryAfter(after),
        (None, None) => Verdict::Retry,
    };
    match error_kind(status) {
        Some(kind) if kind.eq_ignore_ascii_case("NOT_LEADER") || kind.eq_ignore_ascii_case("UNAVAILABLE") => hinted(),
        // Any other kind is the server's answer to this very request; repeating it would
        // only get the same answer (or, worse, hide it).
        Some(_) => Verdict::Final,
        None => match status.code() {
            Code::Unavailable => hinted(),
            // Without a kind these are not lock semantics but a lost or cut-off attempt:
            // attempt timeouts, resets, proxies.
            Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => Verdict::Retry,
            // A status built by the client's own transport from an I/O or HTTP/2 error (it
            // has a source; statuses received from a server do not) says nothing about the
            // request's fate, whatever code it was mapped to.
            _ if std::error::Error::source(status).is_some() => Verdict::Retry,
            _ => Verdict::Final,
        },
    }
}

/// Delay before retry number `attempt` (0-based): exponential from 50 ms, capped at `cap`,
/// with jitter in the upper half so that clients retrying together spread out.
pub(crate) fn backoff(attempt: u32, cap: Duration) -> Duration {
    let cap = cap.max(Duration::from_millis(1));
    let ceiling = BACKOFF_START.saturating_mul(1u32 << attempt.min(16)).min(cap);
    let floor = ceiling / 2;
    let jitter_ms = rand::thread_rng().gen_range(0..=(ceiling - floor).as_millis() as u64);
    floor + Duration::from_millis(jitter_ms)
}

/// `now + budget`, saturating instead of panicking on absurd budgets (configured durations
/// are not bounded above).
pub(crate) fn deadline_after(budget: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(budget).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Which nodes may answer a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Only the raft leader serves it: try the known leader, follow redirects, and take
    /// the node that answered for the leader.
    Leader,
    /// Every node serves it (e.g. ClusterStatus): try the known leader, else the seeds in
    /// turn. A follower's answer says nothing about who leads, so nothing is learned.
    AnyNode,
    /// Exactly this node (a normalized URI), never another; nothing is learned either.
    Node(String),
}

/// Time budget of one routed call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallOptions {
    /// No new attempt starts after this instant.
    pub deadline: Instant,
    /// Bound of a single attempt (also sent to the server as the gRPC timeout of unary calls).
    pub attempt_timeout: Duration,
    /// Longest delay between attempts.
    pub max_backoff: Duration,
    /// How far past the deadline an attempt already under way may run: a call the server
    /// answers only after a wait of its own (a member catching up) gets that long, while a
    /// cluster that does not answer at all is given up at the deadline.
    pub overrun: Duration,
}

/// A successful answer and when the attempt that produced it was sent.
pub(crate) struct Routed<T> {
    pub value: T,
    pub sent_at: Instant,
}

/// Connections to the cluster and knowledge of its leader, shared by all handles.
pub(crate) struct Router {
    seeds: Vec<String>,
    /// Set when this client speaks TLS: bare addresses (seeds, leader redirects) are https.
    tls: Option<ClientTlsConfig>,
    /// Whether this client presents a certificate (for the hint of a refused connection).
    client_cert: bool,
    channels: Mutex<HashMap<String, Channel>>,
    /// Further connections for long-lived streams, past what a node's shared one carries.
    lanes: Lanes,
    leader: Mutex<Option<String>>,
    /// Nodes whose last attempt got no answer at all (refused, reset, timed out), and when.
    /// A follower that relays the leader's answers names the leader; while the leader is in
    /// here the client keeps going through the follower instead of back into a cut route.
    unreachable: Mutex<HashMap<String, Instant>>,
    /// How long a node that gave no answer stays in `unreachable` ([`UNREACHABLE_MEMORY`];
    /// shorter in unit tests, which run on the real clock).
    unreachable_memory: Duration,
    /// Bumped whenever a node is found silent: streams open on it move elsewhere
    /// ([`Router::silent_since`]).
    silenced: watch::Sender<u64>,
    next_seed: AtomicUsize,
    auth: Option<MetadataValue<Ascii>>,
    connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) retry_deadline: Duration,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("endpoints", &self.seeds)
            .field("leader", &*lock(&self.leader))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded maps stay consistent even if a holder panicked: every write is a
    // single insert or assignment.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Router {
    /// Builds lazy channels to every endpoint; nothing is dialed until the first call, so
    /// this succeeds while the cluster is down or electing. Needs a tokio runtime.
    pub(crate) fn new(config: &ClientConfig) -> Result<Self> {
        let seeds = config.validate()?;
        let auth = match &config.api_key {
            Some(key) => Some(
                MetadataValue::try_from(format!("Bearer {key}")).map_err(|e| Error::config(format!("api_key: {e}")))?,
            ),
            None => None,
        };
        let tls = config.default_tls().then(|| config.tls()).transpose()?;
        let router = Router {
            tls,
            client_cert: config.client_cert.is_some(),
            seeds,
            channels: Mutex::new(HashMap::new()),
            lanes: Lanes::default(),
            leader: Mutex::new(None),
            unreachable: Mutex::new(HashMap::new()),
            unreachable_memory: UNREACHABLE_MEMORY,
            silenced: watch::channel(0).0,
            next_seed: AtomicUsize::new(0),
            auth,
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            retry_deadline: config.retry_deadline,
        };
        for uri in &router.seeds {
            router.channel(uri)?;
        }
        Ok(router)
    }

    pub(crate) fn endpoints(&self) -> &[String] {
        &self.seeds
    }

    /// A node address (a seed, a leader redirect) as a URI, with TLS when this client uses it.
    pub(crate) fn normalize(&self, endpoint: &str) -> Result<String> {
        normalize_endpoint(endpoint, self.tls.is_some())
    }

    /// How long a call that waits up to `wait` on the server (an acquire) keeps trying while
    /// the cluster gives it no answer: the retry budget, and no longer than the wait itself,
    /// since a lock not had within the wait is the caller's failure either way; but at least
    /// a connect timeout, so that a short wait still gets a first connection made. A call
    /// that does not wait (`wait` zero: a try-lock) needs an answer, and has the retry budget.
    pub(crate) fn silence_budget(&self, wait: Duration) -> Duration {
        match wait.is_zero() {
            true => self.retry_deadline,
            false => self.retry_deadline.min(wait.max(self.connect_timeout)),
        }
    }

    /// The budget of an ordinary call: `retry_deadline` in total, `request_timeout` per attempt.
    pub(crate) fn default_options(&self) -> CallOptions {
        CallOptions {
            deadline: deadline_after(self.retry_deadline),
            attempt_timeout: self.request_timeout,
            max_backoff: BACKOFF_CAP,
            overrun: Duration::ZERO,
        }
    }

    fn channel(&self, uri: &str) -> Result<Channel> {
        let mut channels = lock(&self.channels);
        if let Some(ch) = channels.get(uri) {
            return Ok(ch.clone());
        }
        let ch = self.dial(uri)?;
        channels.insert(uri.to_string(), ch.clone());
        Ok(ch)
    }

    /// A new connection to `uri` (made lazily, on its first call).
    fn dial(&self, uri: &str) -> Result<Channel> {
        let mut endpoint = Endpoint::from_shared(uri.to_string())
            .map_err(|e| Error::config(format!("endpoint {uri}: {e}")))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            // An acquire stream may wait for minutes; pings notice a vanished leader in
            // seconds so the wait can be re-attached elsewhere instead of hanging.
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5))
            .user_agent(concat!("caerus-core/", env!("CARGO_PKG_VERSION")))
            .map_err(|e| Error::config(format!("user agent: {e}")))?;
        if uri.starts_with("https://") {
            let tls = self.tls.clone().unwrap_or_else(|| ClientTlsConfig::new().with_webpki_roots());
            endpoint = endpoint.tls_config(tls).map_err(|e| Error::config(format!("TLS for {uri}: {e}")))?;
        }
        Ok(endpoint.connect_lazy())
    }

    /// The node to try next: the known leader, else the seed endpoints in turn, passing
    /// over those that gave no answer lately while another may: a node that stopped
    /// answering (paused, cut off) costs a whole attempt timeout each time it is tried.
    fn pick(&self) -> String {
        if let Some(leader) = lock(&self.leader).clone() {
            return leader;
        }
        let next = || self.seeds[self.next_seed.fetch_add(1, Ordering::Relaxed) % self.seeds.len()].clone();
        for _ in 0..self.seeds.len() {
            let seed = next();
            if !self.recently_unreachable(&seed) {
                return seed;
            }
        }
        // None answered lately: in turn anyway.
        next()
    }

    /// Records a node that just served a call (only the leader serves calls).
    pub(crate) fn confirm_leader(&self, uri: &str) {
        let mut leader = lock(&self.leader);
        if leader.as_deref() != Some(uri) {
            debug!(leader = uri, "leader found");
            *leader = Some(uri.to_string());
        }
    }

    /// Notes that `uri` gave no answer at all to a call.
    fn mark_silent(&self, uri: &str) {
        lock(&self.unreachable).insert(uri.to_string(), Instant::now());
        self.silenced.send_modify(|n| *n += 1);
    }

    /// Resolves once `uri` gives no answer to some call after `since`. A stream open on it
    /// then gets nothing, not even a reset, from a paused or cut-off node until the
    /// connection's keepalive gives up (10–15 s): the stream is given up at once instead and
    /// re-attached elsewhere (same request id), so a wait granted by the new leader is heard.
    pub(crate) async fn silent_since(&self, uri: &str, since: Instant) {
        let mut silenced = self.silenced.subscribe();
        while lock(&self.unreachable).get(uri).is_none_or(|at| *at < since) {
            if silenced.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Whether `uri` failed to answer at all within the last [`UNREACHABLE_MEMORY`].
    fn recently_unreachable(&self, uri: &str) -> bool {
        lock(&self.unreachable).get(uri).is_some_and(|at| at.elapsed() < self.unreachable_memory)
    }

    fn forget_leader(&self, uri: &str) {
        let mut leader = lock(&self.leader);
        if leader.as_deref() == Some(uri) {
            *leader = None;
        }
    }

    /// Wraps a message into a request carrying the API key.
    pub(crate) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(auth) = &self.auth {
            request.metadata_mut().insert(metadata::AUTHORIZATION, auth.clone());
        }
        request
    }

    /// The retry state of one logical call to the leader.
    pub(crate) fn attempts(&self, op: &'static str, options: CallOptions) -> Attempts<'_> {
        self.attempts_via(op, Route::Leader, options)
    }

    /// The retry state of one logical call sent along `route`.
    pub(crate) fn attempts_via(&self, op: &'static str, route: Route, options: CallOptions) -> Attempts<'_> {
        Attempts {
            router: self,
            op,
            route,
            options,
            started: Instant::now(),
            retries: 0,
            last_delay: None,
            redirects_in_row: 0,
            current: None,
            tried: Vec::new(),
            last_error: None,
        }
    }

    /// Runs a unary `LockService` call on the leader, with redirects and retries.
    /// `message` is re-sent unchanged on every attempt, so a request id inside it is
    /// reused as the contract requires.
    pub(crate) async fn unary<Req, Resp, F, Fut>(
        &self,
        op: &'static str,
        message: Req,
        options: CallOptions,
        call: F,
    ) -> Result<Routed<Resp>>
    where
        Req: Clone,
        F: FnMut(LockServiceClient<Channel>, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.routed(op, Route::Leader, message, options, LockServiceClient::new, call).await
    }

    /// Runs a unary `AdminService` call along `route`, with the same retries.
    pub(crate) async fn admin_unary<Req, Resp, F, Fut>(
        &self,
        op: &'static str,
        route: Route,
        message: Req,
        options: CallOptions,
        call: F,
    ) -> Result<Routed<Resp>>
    where
        Req: Clone,
        F: FnMut(AdminServiceClient<Channel>, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        self.routed(op, route, message, options, AdminServiceClient::new, call).await
    }

    /// The one retry loop of unary calls, for any service client built by `connect`.
    async fn routed<C, Req, Resp, F, Fut>(
        &self,
        op: &'static str,
        route: Route,
        message: Req,
        options: CallOptions,
        connect: fn(Channel) -> C,
        mut call: F,
    ) -> Result<Routed<Resp>>
    where
        Req: Clone,
        F: FnMut(C, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        let mut attempts = self.attempts_via(op, route, options);
        loop {
            let (uri, channel) = attempts.next()?;
            let timeout = attempts.attempt_timeout();
            let mut request = self.request(message.clone());
            request.set_timeout(timeout);
            let sent_at = Instant::now();
            // The channel also enforces the gRPC timeout, but not while it is still
            // connecting; this bound holds in every case. Another call that finds the node
            // silent meanwhile ends this attempt too: it would only wait out its timeout.
            let outcome = tokio::select! {
                outcome = tokio::time::timeout(timeout, call(connect(channel), request)) => match outcome {
                    Ok(outcome) => outcome,
                    Err(_) => Err(attempt_timed_out(&uri, timeout)),
                },
                () = self.silent_since(&uri, sent_at) => Err(went_silent(&uri)),
            };
            match outcome {
                Ok(response) => {
                    attempts.succeeded(&uri, response.metadata());
                    return Ok(Routed { value: response.into_inner(), sent_at });
                }
                Err(status) => attempts.failed(status).await?,
            }
        }
    }
}

/// Code, message and the transport's error chain ("tcp connect error" alone does not say
/// whether the port was closed or the host unreachable).
fn describe(status: &Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        let part = err.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = err.source();
    }
    text
}

pub(crate) fn attempt_timed_out(uri: &str, timeout: Duration) -> Status {
    Status::deadline_exceeded(format!("no answer from {uri} within {} ms", timeout.as_millis()))
}

/// An attempt or a stream given up because another call found its node silent
/// ([`Router::silent_since`]).
pub(crate) fn went_silent(uri: &str) -> Status {
    Status::unavailable(format!("{uri} stopped answering (another call to it got no answer); trying elsewhere"))
}

/// The retry state of one logical call (possibly many attempts).
pub(crate) struct Attempts<'a> {
    router: &'a Router,
    op: &'static str,
    route: Route,
    options: CallOptions,
    started: Instant,
    retries: u32,
    /// The wait before the latest retry (none: every retry so far went out at once).
    last_delay: Option<Duration>,
    redirects_in_row: u32,
    current: Option<String>,
    tried: Vec<String>,
    last_error: Option<String>,
}

impl Attempts<'_> {
    /// The node and channel for the next attempt, or `Unavailable` once the deadline passed.
    pub(crate) fn next(&mut self) -> Result<(String, Channel)> {
        if Instant::now() >= self.options.deadline && self.current.is_some() {
            return Err(self.give_up());
        }
        let uri = match &self.route {
            Route::Node(uri) => uri.clone(),
            Route::Leader | Route::AnyNode => self.router.pick(),
        };
        let channel = self.router.channel(&uri)?;
        if !self.tried.contains(&uri) {
            self.tried.push(uri.clone());
        }
        self.current = Some(uri.clone());
        Ok((uri, channel))
    }

    /// [`Attempts::next`] for a stream that may stay open for long: a connection to the
    /// node with room for it (`lanes`), and the place it holds there until dropped.
    pub(crate) fn next_stream(&mut self) -> Result<(String, Channel, StreamPlace)> {
        let (uri, shared) = self.next()?;
        let (channel, place) = self.router.lanes.place(&uri, shared, || self.router.dial(&uri))?;
        Ok((uri, channel, place))
    }

    /// `uri` answered the call (`answer`: the response's metadata). For leader-only calls
    /// that node is where the next calls go, unless it relayed the answer from the leader
    /// (a follower forwards calls, naming the leader in `x-dls-leader-addr`): then the
    /// next calls go to the leader directly, unless it gave this client no answer lately
    /// (a route to it is cut) and the relaying node is the way to it.
    pub(crate) fn succeeded(&self, uri: &str, answer: &MetadataMap) {
        lock(&self.router.unreachable).remove(uri);
        if self.route != Route::Leader {
            return;
        }
        let relayed_from = answer
            .get(metadata::LEADER_ADDR)
            .and_then(|v| v.to_str().ok())
            .and_then(|addr| self.router.normalize(addr).ok())
            .filter(|leader| leader != uri && !self.router.recently_unreachable(leader));
        self.router.confirm_leader(relayed_from.as_deref().unwrap_or(uri));
    }

    /// No new attempt starts after this instant.
    pub(crate) fn deadline(&self) -> Instant {
        self.options.deadline
    }

    /// Moves the deadline: a call whose budget depends on what it heard (an acquire that was
    /// answered may wait out its queue; one that hears nothing may not) sets it as it goes.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.options.deadline = deadline;
    }

    /// Bound of the current attempt: the per-attempt timeout, but not past the deadline.
    pub(crate) fn attempt_timeout(&self) -> Duration {
        let left = (self.options.deadline + self.options.overrun).saturating_duration_since(Instant::now());
        self.options.attempt_timeout.min(left).max(Duration::from_millis(1))
    }

    /// The call made progress (e.g. a stream delivered a message): later failures start
    /// backing off from the beginning again.
    pub(crate) fn progressed(&mut self) {
        self.retries = 0;
        self.redirects_in_row = 0;
    }

    /// Takes over a stream that an earlier call opened on `uri` and that just broke: the
    /// break is then accounted to that node, as if this call had opened the stream.
    pub(crate) fn adopt(&mut self, uri: &str) {
        if !self.tried.iter().any(|t| t == uri) {
            self.tried.push(uri.to_string());
        }
        self.current = Some(uri.to_string());
    }

    /// Handles a failed attempt: `Ok(())` once it is time to try again, `Err` with the
    /// final error when the status is the server's answer or the deadline is spent.
    pub(crate) async fn failed(&mut self, status: Status) -> Result<()> {
        let current = self.current.clone().unwrap_or_default();
        if let Some(http_status) = plain_http_status(&status) {
            // A proxy's 502/503/429 (mapped to UNAVAILABLE) may pass; any other plain HTTP
            // answer comes from a peer that is not a DLS gRPC port and will answer the same:
            // a wrong endpoint is told at once, not hidden behind retries on other nodes.
            if status.code() != Code::Unavailable {
                return Err(not_grpc(&current, http_status));
            }
        }
        let verdict = match classify(&status) {
            // Only leader-only calls are redirected; anywhere else a hint is just a node
            // that could not answer.
            Verdict::Redirect(_) if self.route != Route::Leader => Verdict::Retry,
            verdict => verdict,
        };
        match verdict {
            Verdict::Final => Err(Error::from(status)),
            Verdict::Redirect(addr) => {
                let target = match self.router.normalize(&addr) {
                    Ok(uri) => uri,
                    Err(e) => {
                        self.last_error = Some(format!("{current} named an unusable leader address {addr:?}: {e}"));
                        self.router.forget_leader(&current);
                        return self.back_off().await;
                    }
                };
                self.last_error = Some(format!("{current} is not the leader (leader: {addr}): {}", status.message()));
                if target != current && self.router.recently_unreachable(&target) {
                    // The node named gave this client no answer lately (it stopped, or the
                    // route to it is cut, and the answering node does not know yet): going
                    // there would cost another attempt timeout. Ask around again instead.
                    debug!(op = self.op, from = %current, leader = %target, "not following a redirect to a silent node");
                    self.router.forget_leader(&current);
                    return self.back_off().await;
                }
                debug!(op = self.op, from = %current, leader = %target, "redirected to leader");
                let pointed_at_itself = target == current;
                *lock(&self.router.leader) = Some(target);
                self.redirects_in_row += 1;
                // Follow a fresh hint at once; a node naming itself, or nodes bouncing the
                // call around (stale views mid-election), get the normal backoff instead.
                if pointed_at_itself || self.redirects_in_row > 2 {
                    self.back_off().await
                } else if Instant::now() >= self.options.deadline {
                    Err(self.give_up())
                } else {
                    Ok(())
                }
            }
            Verdict::Retry => {
                self.redirects_in_row = 0;
                if error_kind(&status).is_none() {
                    // No answer from the node itself (every server answer names its kind).
                    self.router.mark_silent(&current);
                }
                // An attempt that ran out of the call's budget (the deadline cut it short)
                // says nothing about the node: the error before it (a refused handshake, a
                // closed port) is the one worth reporting.
                let spent = status.code() == Code::DeadlineExceeded && Instant::now() >= self.options.deadline;
                if !(spent && self.last_error.is_some()) {
                    let mut error = format!("{current}: {}", describe(&status));
                    if let Some(hint) = tls_hint(&current, &error, self.router.client_cert) {
                        // A plain-text port that drops the HTTP/2 preface may be a TLS port or
                        // an HTTP/1 server (the node's HTTP port): ask it in HTTP/1.
                        let within = self.attempt_timeout().min(HTTP_PROBE_TIMEOUT);
                        if let Some(code) = http1_status(&current, within).await {
                            return Err(not_grpc(&current, code));
                        }
                        error = format!("{error} ({hint})");
                    }
                    self.last_error = Some(error);
                }
                // Whoever we took for the leader did not serve the call; ask around again.
                self.router.forget_leader(&current);
                self.back_off().await
            }
            Verdict::RetryAfter(hint) => {
                // The node is the leader and will serve the call once its queue drains:
                // stay with it, and come back no sooner than it asked (later if retries
                // pile up, with jitter so shed clients do not return in step).
                self.redirects_in_row = 0;
                self.last_error = Some(format!("{current}: {}", describe(&status)));
                let jitter = Duration::from_millis(rand::thread_rng().gen_range(0..=hint.as_millis() as u64 / 4));
                self.sleep(backoff(self.retries, self.options.max_backoff).max(hint + jitter)).await
            }
        }
    }

    async fn back_off(&mut self) -> Result<()> {
        self.sleep(backoff(self.retries, self.options.max_backoff)).await
    }

    /// Waits `delay` before the next attempt, unless that would pass the deadline.
    async fn sleep(&mut self, delay: Duration) -> Result<()> {
        self.retries = self.retries.saturating_add(1);
        self.last_delay = Some(delay);
        let now = Instant::now();
        if now + delay >= self.options.deadline {
            return Err(self.give_up());
        }
        debug!(
            op = self.op,
            retry = self.retries,
            delay_ms = delay.as_millis() as u64,
            last_error = self.last_error.as_deref().unwrap_or(""),
            "retrying"
        );
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// The `Unavailable` error naming what was tried.
    pub(crate) fn give_up(&self) -> Error {
        let tried = if self.tried.is_empty() { self.router.endpoints().join(", ") } else { self.tried.join(", ") };
        let from = match self.route {
            Route::Leader => "a leader",
            Route::AnyNode | Route::Node(_) => "any node",
        };
        Error::Unavailable {
            message: format!(
                "{} got no answer from {from} within {} ms (tried {}); last error: {}",
                self.op,
                // Rounded up: the budget was set a moment before `started`.
                self.options.deadline.saturating_duration_since(self.started).as_micros().div_ceil(1000),
                tried,
                self.last_error.as_deref().unwrap_or("none"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn status(code: Code, kind: Option<&str>, leader: Option<&str>) -> Status {
        let mut s = Status::new(code, "m");
        if let Some(k) = kind {
            s.metadata_mut().insert(metadata::ERROR_KIND, MetadataValue::try_from(k).unwrap());
        }
        if let Some(l) = leader {
            s.metadata_mut().insert(metadata::LEADER_ADDR, MetadataValue::try_from(l).unwrap());
        }
        s
    }

    #[test]
    fn redirects() {
        let hint = Some("n2:7070");
        let redirect = Verdict::Redirect("n2:7070".into());
        assert_eq!(classify(&status(Code::Unavailable, Some("NOT_LEADER"), hint)), redirect);
        assert_eq!(classify(&status(Code::Unavailable, None, hint)), redirect);
        assert_eq!(classify(&status(Code::Unavailable, Some("UNAVAILABLE"), hint)), redirect);
    }

    #[test]
    fn retryable_statuses() {
        for s in [
            status(Code::Unavailable, None, None),
            status(Code::Unavailable, Some("NOT_LEADER"), None),
            status(Code::Unavailable, Some("UNAVAILABLE"), None),
            status(Code::DeadlineExceeded, None, None),
            status(Code::Cancelled, None, None),
            status(Code::Unknown, None, None),
            attempt_timed_out("http://n1:1", Duration::from_millis(5)),
        ] {
            assert_eq!(classify(&s), Verdict::Retry, "{s:?}");
        }
    }

    #[test]
    fn an_overloaded_leader_is_retried_after_its_hint() {
        let mut s = status(Code::Unavailable, Some("UNAVAILABLE"), None);
        s.metadata_mut().insert(metadata::RETRY_AFTER_MS, MetadataValue::from(250u64));
        assert_eq!(classify(&s), Verdict::RetryAfter(Duration::from_millis(250)));
        let limit = status(Code::ResourceExhausted, Some("RESOURCE_EXHAUSTED"), None);
        assert_eq!(classify(&limit), Verdict::Final);
    }

    // These tests run on the real clock (tokio's paused clock needs its `test-util` feature,
    // which would give the test build a tokio of its own and rebuild everything above it):
    // waits are checked through the delay the retry chose, and kept short.
    #[tokio::test]
    async fn a_retry_after_hint_keeps_the_leader_and_waits_at_least_the_hint() {
        let config = ClientConfig::new(["a:1", "b:2"]).without_api_key();
        let router = Router::new(&config).unwrap();
        router.confirm_leader("http://b:2");
        let mut attempts = router.attempts("Test", router.default_options());
        let (uri, _) = attempts.next().unwrap();
        assert_eq!(uri, "http://b:2");
        let mut shed = status(Code::Unavailable, Some("UNAVAILABLE"), None);
        shed.metadata_mut().insert(metadata::RETRY_AFTER_MS, MetadataValue::from(300u64));
        let before = Instant::now();
        attempts.failed(shed).await.unwrap();
        let delay = attempts.last_delay.expect("a retry after a hint waits");
        assert!(delay >= Duration::from_millis(300) && delay <= Duration::from_millis(375), "{delay:?}");
        assert!(before.elapsed() >= delay, "waited {:?}, chose {delay:?}", before.elapsed());
        assert_eq!(attempts.next().unwrap().0, "http://b:2", "the leader is kept");
    }

    #[test]
    fn semantic_answers_are_final() {
        for s in [
            status(Code::DeadlineExceeded, Some("LOCK_TIMEOUT"), None),
            status(Code::Cancelled, Some("WAIT_CANCELLED"), None),
            status(Code::Aborted, Some("DEADLOCK_VICTIM"), None),
            status(Code::Aborted, Some("TRANSACTION_LOST"), None),
            status(Code::FailedPrecondition, Some("ALREADY_WAITING"), None),
            status(Code::NotFound, None, None),
            status(Code::InvalidArgument, None, None),
            status(Code::PermissionDenied, None, None),
            status(Code::Unauthenticated, Some("UNAUTHENTICATED"), None),
            status(Code::Internal, None, None),
            // Even with a leader hint, a semantic kind is the answer.
            status(Code::Unavailable, Some("PERMISSION_DENIED"), Some("n2:1")),
        ] {
            assert_eq!(classify(&s), Verdict::Final, "{s:?}");
        }
    }

    /// Stands in for a transport error (hyper/h2) that tonic maps to a status code.
    #[derive(Debug)]
    struct TransportError(Status);

    impl std::fmt::Display for TransportError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("connection reset")
        }
    }

    impl std::error::Error for TransportError {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn local_transport_errors_are_retryable() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "broken pipe");
        let s = Status::from_error(Box::new(io));
        assert_eq!(classify(&s), Verdict::Retry, "{s:?}");
        // e.g. an h2 INTERNAL_ERROR reset: code Internal, but produced locally.
        let s = Status::from_error(Box::new(TransportError(Status::internal("h2 reset"))));
        assert_eq!(s.code(), Code::Internal);
        assert_eq!(classify(&s), Verdict::Retry, "{s:?}");
        // The same code received from a server is its answer.
        assert_eq!(classify(&Status::internal("h2 reset")), Verdict::Final);
    }

    #[test]
    fn backoff_bounds() {
        for _ in 0..200 {
            let d0 = backoff(0, BACKOFF_CAP);
            assert!(d0 >= Duration::from_millis(25) && d0 <= Duration::from_millis(50), "{d0:?}");
            let d2 = backoff(2, BACKOFF_CAP);
            assert!(d2 >= Duration::from_millis(100) && d2 <= Duration::from_millis(200), "{d2:?}");
            for n in [5, 10, 31, 1000] {
                let d = backoff(n, BACKOFF_CAP);
                assert!(d >= BACKOFF_CAP / 2 && d <= BACKOFF_CAP, "{n}: {d:?}");
            }
            let small = backoff(8, Duration::from_millis(80));
            assert!(small >= Duration::from_millis(40) && small <= Duration::from_millis(80));
        }
    }

    #[test]
    fn backoff_grows() {
        // Below the cap each attempt's range starts where the previous one ends, so the
        // largest of many samples never shrinks; from the cap on (attempt 2: 50 ms << 2 is
        // the 200 ms cap), jitter alone varies, so only attempts 0..=2 are compared.
        let ceilings: Vec<u128> =
            (0..3).map(|n| (0..50).map(|_| backoff(n, BACKOFF_CAP).as_millis()).max().unwrap()).collect();
        assert!(ceilings.windows(2).all(|w| w[0] <= w[1]), "{ceilings:?}");
        assert!((3..12).all(|n| backoff(n, BACKOFF_CAP) <= BACKOFF_CAP));
    }

    #[tokio::test]
    async fn routing_prefers_leader_then_round_robin() {
        let config = ClientConfig::new(["a:1", "b:2"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let first = router.pick();
        let second = router.pick();
        assert_ne!(first, second);
        router.confirm_leader("http://c:3");
        assert_eq!(router.pick(), "http://c:3");
        assert_eq!(router.pick(), "http://c:3");
        router.forget_leader("http://c:3");
        assert!(router.seeds.contains(&router.pick()));
    }

    #[tokio::test]
    async fn gives_up_at_the_deadline_naming_endpoints() {
        let config = ClientConfig::new(["a:1"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let options = CallOptions {
            deadline: Instant::now() + Duration::from_millis(300),
            attempt_timeout: Duration::from_millis(100),
            max_backoff: BACKOFF_CAP,
            overrun: Duration::ZERO,
        };
        let mut attempts = router.attempts("Test", options);
        let err = loop {
            attempts.next().unwrap();
            if let Err(e) = attempts.failed(status(Code::Unavailable, None, None)).await {
                break e;
            }
        };
        assert_eq!(err.code(), "UNAVAILABLE");
        assert!(err.message().contains("http://a:1"), "{err}");
        assert!(err.message().contains("Unavailable"), "{err}");
    }

    #[tokio::test]
    async fn an_attempt_cut_short_by_the_deadline_keeps_the_earlier_error() {
        let config = ClientConfig::new(["a:1"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let options = CallOptions {
            deadline: Instant::now() + Duration::from_millis(300),
            attempt_timeout: Duration::from_millis(100),
            max_backoff: BACKOFF_CAP,
            overrun: Duration::ZERO,
        };
        let mut attempts = router.attempts("Test", options);
        attempts.next().unwrap();
        attempts.failed(Status::unavailable("invalid peer certificate: UnknownIssuer")).await.unwrap();
        attempts.next().unwrap();
        tokio::time::sleep_until(options.deadline).await;
        let err = attempts.failed(attempt_timed_out("http://a:1", Duration::from_millis(2))).await.unwrap_err();
        assert!(err.message().contains("UnknownIssuer") && err.message().contains("not signed by a CA"), "{err}");
        assert!(!err.message().contains("within 2 ms"), "{err}");
    }

    #[tokio::test]
    async fn a_plain_http_answer_names_the_endpoint_at_once_unless_a_proxy_is_busy() {
        let config = ClientConfig::new(["a:1"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let plain =
            |code, http| Status::new(code, format!("grpc-status header missing, mapped from HTTP status code {http}"));
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.next().unwrap();
        let err = attempts.failed(plain(Code::Unimplemented, 404)).await.unwrap_err();
        assert_eq!(err.code(), "CONFIG");
        assert!(err.message().starts_with("http://a:1 answered plain HTTP (status 404), not gRPC"), "{err}");
        // A proxy's 503 in front of a node that is restarting: retried like any UNAVAILABLE.
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.next().unwrap();
        attempts.failed(plain(Code::Unavailable, 503)).await.unwrap();
    }

    #[tokio::test]
    async fn a_pinned_call_stays_on_its_node_and_learns_nothing() {
        let config = ClientConfig::new(["a:1"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let mut attempts = router.attempts_via("Test", Route::Node("http://z:9".into()), router.default_options());
        let (uri, _) = attempts.next().unwrap();
        assert_eq!(uri, "http://z:9");
        // A hint is not followed: the caller asked this very node.
        attempts.failed(status(Code::Unavailable, Some("NOT_LEADER"), Some("b:2"))).await.unwrap();
        assert_eq!(attempts.next().unwrap().0, "http://z:9");
        attempts.succeeded("http://z:9", &MetadataMap::new());
        assert_eq!(*lock(&router.leader), None);

        let any = router.attempts_via("Test", Route::AnyNode, router.default_options());
        any.succeeded("http://a:1", &MetadataMap::new());
        assert_eq!(*lock(&router.leader), None, "a follower's answer names no leader");
        router.attempts("Test", router.default_options()).succeeded("http://a:1", &MetadataMap::new());
        assert_eq!(lock(&router.leader).as_deref(), Some("http://a:1"));
    }

    fn relayed_from(leader: &str) -> MetadataMap {
        let mut md = MetadataMap::new();
        md.insert(metadata::LEADER_ADDR, MetadataValue::try_from(leader).unwrap());
        md
    }

    #[tokio::test]
    async fn an_answer_relayed_by_a_follower_sends_the_next_calls_to_the_leader_unless_it_did_not_answer() {
        let config = ClientConfig::new(["a:1", "b:2"]).without_api_key();
        let mut router = Router::new(&config).unwrap();
        router.unreachable_memory = Duration::from_secs(1);
        let mut attempts = router.attempts("Test", router.default_options());
        let (uri, _) = attempts.next().unwrap();
        attempts.succeeded(&uri, &relayed_from("c:3"));
        assert_eq!(router.pick(), "http://c:3", "the leader the follower relayed from");

        // The leader gives no answer (a cut route): back to the seeds, and the relayed
        // answers' word is not taken for it for a while.
        let mut attempts = router.attempts("Test", router.default_options());
        assert_eq!(attempts.next().unwrap().0, "http://c:3");
        attempts.failed(attempt_timed_out("http://c:3", Duration::from_secs(1))).await.unwrap();
        let (uri, _) = attempts.next().unwrap();
        assert_ne!(uri, "http://c:3");
        attempts.succeeded(&uri, &relayed_from("c:3"));
        assert_eq!(router.pick(), uri, "calls keep going through the follower");
        tokio::time::sleep(router.unreachable_memory).await;
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.next().unwrap();
        attempts.succeeded(&uri, &relayed_from("c:3"));
        assert_eq!(router.pick(), "http://c:3", "tried directly again once the memory lapsed");
        // A server's answer (it names its kind) is no sign of a cut route.
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.next().unwrap();
        attempts.failed(status(Code::Unavailable, Some("NOT_LEADER"), None)).await.unwrap();
        assert!(!router.recently_unreachable("http://c:3"));
    }

    #[tokio::test]
    async fn an_adopted_broken_stream_is_accounted_to_its_node() {
        let config = ClientConfig::new(["a:1", "b:2"]).without_api_key();
        let router = Router::new(&config).unwrap();
        router.confirm_leader("http://b:2");
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.adopt("http://b:2");
        attempts.failed(status(Code::Unavailable, None, None)).await.unwrap();
        // The node whose stream broke is no longer taken for the leader.
        assert_eq!(*lock(&router.leader), None);
        assert!(attempts.give_up().message().contains("http://b:2"));
    }

    #[tokio::test]
    async fn a_node_that_gave_no_answer_is_passed_over_while_another_may_answer() {
        let config = ClientConfig::new(["a:1", "b:2", "c:3"]).without_api_key();
        let router = Router::new(&config).unwrap();
        router.confirm_leader("http://a:1");
        // The leader stops answering (paused, cut off): the attempt times out.
        let mut attempts = router.attempts("Test", router.default_options());
        assert_eq!(attempts.next().unwrap().0, "http://a:1");
        attempts.failed(attempt_timed_out("http://a:1", Duration::from_millis(5))).await.unwrap();
        for _ in 0..6 {
            assert_ne!(router.pick(), "http://a:1", "a silent node is not tried while others may answer");
        }
        for uri in ["http://b:2", "http://c:3"] {
            lock(&router.unreachable).insert(uri.into(), Instant::now());
        }
        let picked: std::collections::BTreeSet<String> = (0..3).map(|_| router.pick()).collect();
        assert_eq!(picked.len(), 3, "none answered lately: every node in turn");
    }

    #[tokio::test]
    async fn a_redirect_to_a_node_that_gave_no_answer_is_not_followed() {
        let config = ClientConfig::new(["a:1", "b:2", "c:3"]).without_api_key();
        let router = Router::new(&config).unwrap();
        router.confirm_leader("http://c:3");
        let mut attempts = router.attempts("Test", router.default_options());
        assert_eq!(attempts.next().unwrap().0, "http://c:3");
        attempts.failed(attempt_timed_out("http://c:3", Duration::from_millis(5))).await.unwrap();
        // A follower that has not noticed yet still names the silent node.
        let (uri, _) = attempts.next().unwrap();
        assert_ne!(uri, "http://c:3");
        attempts.failed(status(Code::Unavailable, Some("NOT_LEADER"), Some("c:3"))).await.unwrap();
        assert!(attempts.last_delay.is_some(), "backs off instead");
        assert_ne!(attempts.next().unwrap().0, "http://c:3");
        assert_eq!(*lock(&router.leader), None);
        // A node that answers again is believed again.
        attempts.succeeded("http://c:3", &MetadataMap::new());
        assert_eq!(router.pick(), "http://c:3");
    }

    #[tokio::test]
    async fn a_stream_hears_when_its_node_gives_no_answer_to_a_later_call() {
        let config = ClientConfig::new(["a:1", "b:2"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let before = Instant::now();
        router.mark_silent("http://a:1");
        let opened = Instant::now();
        let silent = |uri: &'static str| {
            let router = &router;
            async move { tokio::time::timeout(Duration::from_millis(50), router.silent_since(uri, opened)).await }
        };
        assert!(silent("http://a:1").await.is_err(), "silent before the stream opened: nothing new");
        let watching = router.silent_since("http://a:1", opened);
        tokio::pin!(watching);
        assert!(tokio::time::timeout(Duration::from_millis(20), &mut watching).await.is_err());
        router.mark_silent("http://b:2");
        assert!(tokio::time::timeout(Duration::from_millis(20), &mut watching).await.is_err(), "another node");
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.adopt("http://a:1");
        attempts.failed(attempt_timed_out("http://a:1", Duration::from_millis(5))).await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), watching).await.expect("the stream's node fell silent");
        assert!(silent("http://a:1").await.is_ok() && before < opened);
    }

    #[tokio::test]
    async fn redirect_is_followed_at_once() {
        let config = ClientConfig::new(["a:1"]).without_api_key();
        let router = Router::new(&config).unwrap();
        let mut attempts = router.attempts("Test", router.default_options());
        attempts.next().unwrap();
        attempts.failed(status(Code::Unavailable, Some("NOT_LEADER"), Some("b:2"))).await.unwrap();
        assert_eq!(attempts.last_delay, None, "no backoff before following the hint");
        let (uri, _) = attempts.next().unwrap();
        assert_eq!(uri, "http://b:2");
        let final_err = attempts.failed(status(Code::Aborted, Some("TRANSACTION_LOST"), None)).await.unwrap_err();
        assert_eq!(final_err.code(), "TRANSACTION_LOST");
    }
}

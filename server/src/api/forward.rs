//! Followers forward clients' calls to the leader (as etcd does), so a client that reaches
//! a majority of the nodes but not the leader (an asymmetric partition, a firewall rule,
//! a broken route) is still served instead of being sent to an address it cannot reach.
//!
//! The rules, and why:
//! - A call on a follower's client port goes on to the leader's **peer port**, over the
//!   authenticated peer channel: mutual TLS or the cluster secret, the credentials raft
//!   uses (`raft::peer_auth`), on connections of their own (`Lane::Forward`), one per
//!   leader. The hop is as well protected as raft itself.
//! - The leader serves it with the very same `LockApi`/`AdminApi` as its client port. The
//!   follower checks only the API key, from the headers, as every node's client port does
//!   before reading a body (`api::key_check`); it passes on the client's `authorization`
//!   and its deadline, and the leader checks the key again with its own keys file (so a
//!   follower with an older file cannot let a revoked key in). Authorization, validation,
//!   the limits and the request-id rules live in one place, the leader's services. A retry with the same request id through another node reaches the same
//!   table and gets the first attempt's outcome. What the client port checks below gRPC
//!   (TLS, a client certificate under `--tls-client-ca`) the follower has checked, with the
//!   flags every node of the cluster is started with.
//! - One hop, so no loops: the peer port's client services never forward. A node that is
//!   no longer the leader answers NOT_LEADER, which reaches the client unchanged.
//! - A follower that knows no leader, or whose hop fails (connection refused, reset, the
//!   leader gone mid-stream), answers NOT_LEADER: the client's own discovery and retries
//!   take over, exactly as without forwarding. The answer names the leader only when this
//!   node knows one other than the leader the hop failed to reach: a client sent back to a
//!   leader that does not answer would only lose time there.
//! - A leader that stops answering does not hold the forwarded calls: once this node no
//!   longer takes it for the leader (raft's verdict, about an election timeout after the
//!   leader went silent), every call and stream forwarded to it ends with NOT_LEADER, naming
//!   the new leader when there is one, so clients move on within an election instead of
//!   waiting out their own deadline on a paused or cut-off node. A call the leader has not
//!   answered is answered NOT_LEADER a little before the client's deadline, so the client
//!   hears from this node, which answers, rather than taking it for silent too.
//! - A forwarded call lives inside the client's call: when the client hangs up, its
//!   future or stream is dropped here, which resets the stream to the leader, which drops
//!   its side (the wait itself stays in the table, as for any broken stream).
//! - Bounded: every forwarded call holds a place of `--max-forwarded-calls` while it is open
//!   (a stream until it ends), so clients cannot make a follower hold unbounded streams;
//!   past it the follower refuses the call itself (RESOURCE_EXHAUSTED). Unary and stream
//!   calls share the bound: a waiting stream and a call in flight cost the follower alike.
//!   Each API key holds at most its share of it (`--max-forwarded-calls-per-api-key`), and
//!   calls with no key or one this node does not know share one small bucket
//!   (`--max-forwarded-calls-unknown-keys`), so no key can refuse another's calls: the
//!   follower finds the key from the call's headers with its own keys ([`caller::tenant`]),
//!   only to count it; the leader still decides.
//! - The HTTP port on a follower goes through the same hop (`http::gateway`): one way to
//!   forward, under the same bounds, with the HTTP client as the client.
//! - Where the leader counts per connection (event watches), it counts the client's
//!   connection: the follower sends it as `x-dls-forwarded-for`, believed only from a
//!   caller that passed the peer gate.
//! - Every relayed answer (a success or the leader's own error status) carries
//!   `x-dls-forwarded-to` with the leader's id, so a caller can tell it from this node's own
//!   answer; a success also carries `x-dls-leader-addr`, so a client that can reach the
//!   leader may go there directly next time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caerus_proto::metadata;
use caerus_proto::v1 as pb;
use caerus_proto::v1::admin_service_client::AdminServiceClient;
use caerus_proto::v1::admin_service_server::AdminService;
use caerus_proto::v1::lock_service_client::LockServiceClient;
use caerus_proto::v1::lock_service_server::LockService;
use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::admin_service::AdminApi;
use super::auth::KeyRing;
use super::caller::{self, FORWARDED_BY, FORWARDED_FOR};
use super::errors::ApiError;
use super::lock_service::LockApi;
use crate::limits::ForwardSlot;
use crate::node::Node;
use crate::raft::network::{Lane, MAX_RAFT_MESSAGE};
use crate::raft::peer_auth::Stamp;
use crate::raft::types::NodeId;
use crate::telemetry::trace_context::{TRACEPARENT, TRACESTATE};

type Upstream = InterceptedService<Channel, Stamp>;
type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// How much sooner than the client's deadline a forwarded call is answered when the leader
/// has not answered it: a tenth of the deadline, at most this. The client then hears
/// NOT_LEADER from a node that answers, instead of timing out on it and taking it for a
/// silent node.
const ANSWER_BEFORE_CLIENT: Duration = Duration::from_millis(200);

/// Decides, per call, whether it is served here or forwarded, and opens the hop.
pub struct Forwarder {
    node: Arc<Node>,
    /// This node's API keys: whose share of the forwarded calls a call takes.
    keys: Arc<KeyRing>,
    /// Turns true when this node is asked to stop: relayed streams end then (see
    /// [`Hop::stream`]).
    stop: watch::Receiver<bool>,
}

impl Forwarder {
    pub fn new(node: Arc<Node>, keys: Arc<KeyRing>, stop: watch::Receiver<bool>) -> Arc<Forwarder> {
        Arc::new(Forwarder { node, keys, stop })
    }

    /// `None`: serve the call here (this node leads, or knows no leader to send it to:
    /// then the local service answers NOT_LEADER as it always did).
    fn hop<T>(&self, method: &'static str, req: &Request<T>) -> Result<Option<Hop>, Status> {
        if *self.node.leadership().borrow() {
            return Ok(None);
        }
        let Some((leader, member)) = self.node.leader_member() else { return Ok(None) };
        if leader == self.node.id() || member.peer_addr.is_empty() {
            // Elected but not serving yet (catching up), or a leader without a peer port.
            return Ok(None);
        }
        let slot = self.node.limits().admit_forward(&caller::tenant(&self.keys, req))?;
        let channel = match self.node.peer_transport().channel(Lane::Forward, leader, &member.peer_addr) {
            Ok(channel) => channel,
            Err(e) => {
                tracing::debug!(leader, method, "cannot forward to the leader: {e}");
                return Ok(None);
            }
        };
        self.node.metrics().forwarded_calls.fetch_add(1, Relaxed);
        tracing::debug!(leader, method, peer = %member.peer_addr, "forwarding a client call to the leader");
        let client_timeout = req.metadata().get("grpc-timeout").and_then(|v| grpc_timeout(v.to_str().ok()?));
        let answer_by = client_timeout.map(|t| Instant::now() + t - (t / 10).min(ANSWER_BEFORE_CLIENT));
        Ok(Some(Hop {
            node: self.node.clone(),
            leader,
            leader_addr: member.addr,
            method,
            upstream: InterceptedService::new(channel, self.node.peer_transport().stamp()),
            answer_by,
            slot,
            stop: self.stop.clone(),
        }))
    }
}

/// One call on its way to the leader, holding its place under `--max-forwarded-calls`.
struct Hop {
    node: Arc<Node>,
    leader: NodeId,
    /// The leader's client address, named in the answer.
    leader_addr: String,
    method: &'static str,
    upstream: Upstream,
    /// When the client must have its answer, a little before its own deadline (none for
    /// calls without one, such as waiting streams).
    answer_by: Option<Instant>,
    slot: ForwardSlot,
    stop: watch::Receiver<bool>,
}

impl Hop {
    fn locks(&self) -> LockServiceClient<Upstream> {
        LockServiceClient::new(self.upstream.clone()).max_decoding_message_size(MAX_RAFT_MESSAGE)
    }

    fn admin(&self) -> AdminServiceClient<Upstream> {
        AdminServiceClient::new(self.upstream.clone()).max_decoding_message_size(MAX_RAFT_MESSAGE)
    }

    /// The request the leader gets: the client's message, credentials, trace context and
    /// deadline (see `answer_by`), the client's address and this node's mark. Nothing else
    /// the client sent is passed on.
    fn outgoing<T>(&self, req: Request<T>) -> Request<T> {
        let client = caller::client_addr(&req);
        let passed_on: Vec<_> = [metadata::AUTHORIZATION, TRACEPARENT, TRACESTATE]
            .into_iter()
            .filter_map(|name| Some((name, req.metadata().get(name)?.clone())))
            .collect();
        let mut out = Request::new(req.into_inner());
        let md = out.metadata_mut();
        for (name, value) in passed_on {
            md.insert(name, value);
        }
        md.insert(FORWARDED_BY, self.node.id().into());
        if let Some(v) = client.and_then(|a| a.to_string().parse().ok()) {
            md.insert(FORWARDED_FOR, v);
        }
        if let Some(by) = self.answer_by {
            out.set_timeout(by.saturating_duration_since(Instant::now()));
        }
        out
    }

    /// The leader's answer as the client gets it. A status the leader's services made (it
    /// names its kind) is the answer; any other failure is the hop's, answered NOT_LEADER.
    fn answer<T>(&self, answer: Result<Response<T>, Status>) -> Result<Response<T>, Status> {
        match answer {
            Ok(mut response) => {
                let md = response.metadata_mut();
                md.insert(metadata::FORWARDED_TO, self.leader.into());
                if let Ok(addr) = self.leader_addr.parse() {
                    md.insert(metadata::LEADER_ADDR, addr);
                }
                Ok(response)
            }
            Err(status) => Err(relayed_error(&self.node, self.leader, self.method, status)),
        }
    }

    /// Runs `call` until this node stops taking the hop's leader for the leader, or until
    /// `answer_by` if the leader has not answered: then the call is dropped (which resets it
    /// on the leader) and answers NOT_LEADER.
    async fn while_leader_answers<R>(&self, call: impl Future<Output = Result<R, Status>>) -> Result<R, Status> {
        let answer_by = async {
            match self.answer_by {
                Some(by) => tokio::time::sleep_until(by.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = call => answer,
            () = self.node.leader_gone(self.leader) => {
                Err(leader_gone(&self.node, self.leader, self.method, self.answer_by).await)
            }
            () = answer_by => {
                let silent = Status::deadline_exceeded("the leader gave no answer before the client's deadline");
                Err(relayed_error(&self.node, self.leader, self.method, silent))
            }
        }
    }

    async fn unary<Resp>(
        self,
        call: impl Future<Output = Result<Response<Resp>, Status>>,
    ) -> Result<Response<Resp>, Status> {
        let answer = self.while_leader_answers(call).await;
        self.answer(answer)
    }

    /// Opens the stream on the leader and relays it; the place is held until the relayed
    /// stream is dropped, which drops the leader's stream too. The stream ends with
    /// NOT_LEADER once this node stops taking the leader for the leader, and when this node
    /// stops: naming the leader, so the client re-attaches there at once (same request id)
    /// instead of holding a stream on a node that is going away.
    async fn stream<Item: Send + 'static>(
        self,
        call: impl Future<Output = Result<Response<Streaming<Item>>, Status>>,
    ) -> Result<Response<BoxStream<Item>>, Status> {
        let answer = self.while_leader_answers(call).await;
        let (md, upstream, extensions) = self.answer(answer)?.into_parts();
        let Hop { node, leader, method, slot, mut stop, .. } = self;
        let relayed = async_stream::stream! {
            let _open = slot;
            let mut upstream = upstream;
            let gone = node.leader_gone(leader);
            tokio::pin!(gone);
            loop {
                tokio::select! {
                    // The stop first: when it comes with the leader seemingly gone (a
                    // stopping node's raft winds down), the client is still told where to go.
                    biased;
                    () = stopping(&mut stop) => {
                        tracing::debug!(leader, method, "this node stops; sending a relayed stream's client to the leader");
                        // The leader as this node knows it, else the node the stream was
                        // relayed to, which answered it until now: a stopping node's raft may
                        // already be winding down and know no leader, and a client told where
                        // to go does not have to ask around (if that node no longer leads, it
                        // names the one that does).
                        let named = node
                            .leader()
                            .filter(|(id, _)| *id != node.id())
                            .or_else(|| node.member_addr(leader).map(|addr| (leader, addr)));
                        yield Err(ApiError::not_leader(named).into());
                        return;
                    }
                    item = upstream.next() => match item {
                        Some(Ok(message)) => yield Ok(message),
                        Some(Err(status)) => {
                            yield Err(relayed_error(&node, leader, method, status));
                            return;
                        }
                        None => return,
                    },
                    () = &mut gone => {
                        yield Err(leader_gone(&node, leader, method, None).await);
                        return;
                    }
                }
            }
        };
        Ok(Response::from_parts(md, Box::pin(relayed) as BoxStream<Item>, extensions))
    }
}

/// Resolves once this node is asked to stop.
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The answer of a call or stream whose leader went silent or was replaced while it was
/// forwarded: NOT_LEADER naming the new leader once it is known (see `Node::next_leader`),
/// waiting for it no later than `answer_by`.
async fn leader_gone(node: &Node, leader: NodeId, method: &str, answer_by: Option<Instant>) -> Status {
    node.metrics().forward_failures.fetch_add(1, Relaxed);
    tracing::debug!(leader, method, "the leader is gone; ending a forwarded call");
    ApiError::not_leader(node.next_leader(leader, answer_by).await).into()
}

/// NOT_LEADER naming the leader as this node knows it now, unless that is still `failed`
/// (the leader a hop could not reach): the client then finds the leader itself.
fn not_leader_but(node: &Node, failed: NodeId) -> Status {
    let leader = node.leader().filter(|(id, _)| *id != failed);
    ApiError::not_leader(leader).into()
}

/// Passes the leader's own answers on (marked as relayed); turns a failure of the hop into
/// NOT_LEADER with the leader as this node knows it now (it may have moved, see
/// [`not_leader_but`]), so the client retries.
fn relayed_error(node: &Node, leader: NodeId, method: &str, mut status: Status) -> Status {
    if status.metadata().contains_key(metadata::ERROR_KIND) {
        status.metadata_mut().insert(metadata::FORWARDED_TO, leader.into());
        return status;
    }
    node.metrics().forward_failures.fetch_add(1, Relaxed);
    if matches!(status.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied) {
        // The leader's peer gate refused this node: a cluster misconfiguration an operator
        // must see, not a client's mistake.
        tracing::warn!(leader, method, "the leader refused a forwarded call at its peer gate: {}", status.message());
    } else {
        tracing::debug!(leader, method, "forwarding to the leader failed: {status}");
    }
    not_leader_but(node, leader)
}

/// Parses a `grpc-timeout` header value: up to 8 digits and a unit (H, M, S, m, u, n).
fn grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The client port's `LockService`: this node's own when it leads, the leader's otherwise.
pub struct ForwardingLocks {
    pub local: Arc<LockApi>,
    pub forwarder: Arc<Forwarder>,
}

/// The client port's `AdminService`: calls that need the leader (listings, aborts,
/// membership changes) are forwarded like lock calls; ClusterStatus is every node's own
/// view and always answered here.
pub struct ForwardingAdmin {
    pub local: Arc<AdminApi>,
    pub forwarder: Arc<Forwarder>,
}

/// Serves `$req` with `$local`'s `$method` here, or relays it to the leader's (`$how`:
/// `unary` or `stream`; `$client`: the hop's client of that service).
macro_rules! route {
    ($self:ident, $req:ident, $trait:ident, $client:ident, $method:ident, $how:ident) => {
        match $self.forwarder.hop(stringify!($method), &$req)? {
            None => $trait::$method(&*$self.local, $req).await,
            Some(hop) => {
                let out = hop.outgoing($req);
                let mut client = hop.$client();
                hop.$how(async move { client.$method(out).await }).await
            }
        }
    };
}

#[tonic::async_trait]
impl LockService for ForwardingLocks {
    async fn begin_transaction(
        &self,
        req: Request<pb::BeginTransactionRequest>,
    ) -> Result<Response<pb::BeginTransactionResponse>, Status> {
        route!(self, req, LockService, locks, begin_transaction, unary)
    }

    type AcquireLockStream = BoxStream<pb::AcquireLockResponse>;

    type AcquireLocksStream = BoxStream<pb::AcquireLocksResponse>;

    async fn verify_fencing_token(
        &self,
        req: Request<pb::VerifyFencingTokenRequest>,
    ) -> Result<Response<pb::VerifyFencingTokenResponse>, Status> {
        route!(self, req, LockService, locks, verify_fencing_token, unary)
    }

    async fn acquire_locks(
        &self,
        req: Request<pb::AcquireLocksRequest>,
    ) -> Result<Response<Self::AcquireLocksStream>, Status> {
        route!(self, req, LockService, locks, acquire_locks, stream)
    }

    async fn acquire_lock(
        &self,
        req: Request<pb::AcquireLockRequest>,
    ) -> Result<Response<Self::AcquireLockStream>, Status> {
        route!(self, req, LockService, locks, acquire_lock, stream)
    }

    async fn release_lock(
        &self,
        req: Request<pb::ReleaseLockRequest>,
    ) -> Result<Response<pb::ReleaseLockResponse>, Status> {
        route!(self, req, LockService, locks, release_lock, unary)
    }

    async fn cancel_wait(
        &self,
        req: Request<pb::CancelWaitRequest>,
    ) -> Result<Response<pb::CancelWaitResponse>, Status> {
        route!(self, req, LockService, locks, cancel_wait, unary)
    }

    async fn claim_slot(&self, req: Request<pb::ClaimSlotRequest>) -> Result<Response<pb::ClaimSlotResponse>, Status> {
        route!(self, req, LockService, locks, claim_slot, unary)
    }

    async fn finish_slot(
        &self,
        req: Request<pb::FinishSlotRequest>,
    ) -> Result<Response<pb::FinishSlotResponse>, Status> {
        route!(self, req, LockService, locks, finish_slot, unary)
    }

    async fn downgrade_lock(
        &self,
        req: Request<pb::DowngradeLockRequest>,
    ) -> Result<Response<pb::DowngradeLockResponse>, Status> {
        route!(self, req, LockService, locks, downgrade_lock, unary)
    }

    async fn get_transaction_status(
        &self,
        req: Request<pb::GetTransactionStatusRequest>,
    ) -> Result<Response<pb::GetTransactionStatusResponse>, Status> {
        route!(self, req, LockService, locks, get_transaction_status, unary)
    }

    async fn heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> Result<Response<pb::HeartbeatResponse>, Status> {
        route!(self, req, LockService, locks, heartbeat, unary)
    }

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, Status> {
        route!(self, req, LockService, locks, end_transaction, unary)
    }

    type WatchEventsStream = BoxStream<pb::Event>;

    async fn watch_events(
        &self,
        req: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        route!(self, req, LockService, locks, watch_events, stream)
    }

    type WatchKeyStream = BoxStream<pb::KeyHolders>;

    async fn watch_key(&self, req: Request<pb::WatchKeyRequest>) -> Result<Response<Self::WatchKeyStream>, Status> {
        route!(self, req, LockService, locks, watch_key, stream)
    }
}

#[tonic::async_trait]
impl AdminService for ForwardingAdmin {
    async fn create_api_key(
        &self,
        req: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        route!(self, req, AdminService, admin, create_api_key, unary)
    }

    async fn list_api_keys(
        &self,
        req: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        route!(self, req, AdminService, admin, list_api_keys, unary)
    }

    async fn revoke_api_key(
        &self,
        req: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        route!(self, req, AdminService, admin, revoke_api_key, unary)
    }

    async fn rotate_api_key(
        &self,
        req: Request<pb::RotateApiKeyRequest>,
    ) -> Result<Response<pb::RotateApiKeyResponse>, Status> {
        route!(self, req, AdminService, admin, rotate_api_key, unary)
    }

    async fn set_lock_delay(
        &self,
        req: Request<pb::SetLockDelayRequest>,
    ) -> Result<Response<pb::SetLockDelayResponse>, Status> {
        route!(self, req, AdminService, admin, set_lock_delay, unary)
    }

    async fn list_lock_delays(
        &self,
        req: Request<pb::ListLockDelaysRequest>,
    ) -> Result<Response<pb::ListLockDelaysResponse>, Status> {
        route!(self, req, AdminService, admin, list_lock_delays, unary)
    }

    async fn list_locks(&self, req: Request<pb::ListLocksRequest>) -> Result<Response<pb::ListLocksResponse>, Status> {
        route!(self, req, AdminService, admin, list_locks, unary)
    }

    async fn abort_transaction(
        &self,
        req: Request<pb::AbortTransactionRequest>,
    ) -> Result<Response<pb::AbortTransactionResponse>, Status> {
        route!(self, req, AdminService, admin, abort_transaction, unary)
    }

    async fn cluster_status(
        &self,
        req: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        AdminService::cluster_status(&*self.local, req).await
    }

    async fn list_members(
        &self,
        req: Request<pb::ListMembersRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, Status> {
        route!(self, req, AdminService, admin, list_members, unary)
    }

    async fn add_member(&self, req: Request<pb::AddMemberRequest>) -> Result<Response<pb::AddMemberResponse>, Status> {
        route!(self, req, AdminService, admin, add_member, unary)
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberResponse>, Status> {
        route!(self, req, AdminService, admin, remove_member, unary)
    }

    async fn promote_member(
        &self,
        req: Request<pb::PromoteMemberRequest>,
    ) -> Result<Response<pb::PromoteMemberResponse>, Status> {
        route!(self, req, AdminService, admin, promote_member, unary)
    }

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        // Not ended when the leader changes, as other calls are: the change is this call's
        // success, and a client told NOT_LEADER would ask the new leader to hand over again.
        match self.forwarder.hop("transfer_leader", &req)? {
            None => AdminService::transfer_leader(&*self.local, req).await,
            Some(hop) => {
                let out = hop.outgoing(req);
                let answer = hop.admin().transfer_leader(out).await;
                hop.answer(answer)
            }
        }
    }

    type SaveSnapshotStream = BoxStream<pb::SaveSnapshotResponse>;

    async fn save_snapshot(
        &self,
        req: Request<pb::SaveSnapshotRequest>,
    ) -> Result<Response<Self::SaveSnapshotStream>, Status> {
        route!(self, req, AdminService, admin, save_snapshot, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        assert_eq!(grpc_timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(grpc_timeout("5n"), Some(Duration::from_nanos(5)));
        for bad in ["", "S", "123456789S", "10x", "-1S", "1.5S"] {
            assert_eq!(grpc_timeout(bad), None, "{bad:?}");
        }
    }
}

//! The raft client side: sends AppendEntries, Vote and InstallSnapshot to peers' peer
//! ports over the internal gRPC `RaftService`, with openraft messages encoded by [`codec`].
//! Every call carries this node's credentials ([`Stamp`]), so they go only where they are
//! safe: with peer TLS configured, the connection is mutual TLS against the cluster CA, to
//! a peer that proves it is the node called (`peer_tls`); with a cluster secret alone, only
//! to loopback addresses (the secret travels in clear), unless `--insecure` says the
//! network is trusted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use caerus_proto::raft::peer_discovery_service_client::PeerDiscoveryServiceClient;
use caerus_proto::raft::raft_service_client::RaftServiceClient;
use caerus_proto::raft::RaftPayload;
use openraft::error::{InstallSnapshotError, NetworkError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use super::append_stream::AppendStream;
use super::durable::Durable;
use super::peer_auth::{DiscoveryRpc, PeerAuth, PeerRpc, Stamp};
use super::peer_tls::{PeerTlsClient, PeerTlsFiles};
use super::quorum_clock::QuorumClock;
use super::types::{codec, LogId, Node, NodeId, RPCError, RaftError, TypeConfig, Vote};
use crate::tls::TlsError;

/// Largest raft message accepted or sent (snapshot chunks are the big ones).
pub const MAX_RAFT_MESSAGE: usize = 64 * 1024 * 1024;

/// Ping interval (and the answer's patience) on connections carrying forwarded client calls.
const FORWARD_KEEPALIVE: Duration = Duration::from_secs(5);

/// How to reach peers: credentials, TLS and the connections made so far. Shared by every
/// raft client of the node, and kept by the node so SIGHUP can reload the certificates.
pub struct PeerTransport {
    auth: Arc<PeerAuth>,
    tls_files: Option<PeerTlsFiles>,
    tls: Mutex<Option<Arc<PeerTlsClient>>>,
    /// `--insecure`: the cluster secret may travel in clear beyond loopback.
    secret_beyond_loopback: bool,
    /// One channel per lane, peer and address.
    channels: Mutex<HashMap<(Lane, NodeId, String), Channel>>,
}

/// What a connection to a peer carries. Clients' forwarded calls get connections of their
/// own, so thousands of waiting lock streams never share HTTP/2 flow control (or a TCP
/// send queue) with the AppendEntries that keep the leader elected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    Raft,
    /// Client calls a follower forwards to the leader (`api::forward`).
    Forward,
}

impl PeerTransport {
    /// `secret_beyond_loopback`: `--insecure` (see [`PeerTransport::may_send_credentials`]).
    pub fn new(
        auth: Arc<PeerAuth>,
        tls_files: Option<PeerTlsFiles>,
        secret_beyond_loopback: bool,
    ) -> Result<Arc<PeerTransport>, TlsError> {
        let tls = tls_files.as_ref().map(PeerTlsClient::load).transpose()?.map(Arc::new);
        Ok(Arc::new(PeerTransport {
            auth,
            tls_files,
            tls: Mutex::new(tls),
            secret_beyond_loopback,
            channels: Mutex::default(),
        }))
    }

    /// Reads the TLS files again; the next calls open new connections with them (calls in
    /// flight finish on the old ones). A failed read keeps the old configuration.
    // On SIGHUP, which Windows lacks.
    #[cfg(unix)]
    pub fn reload_tls(&self) -> Result<(), TlsError> {
        let Some(files) = &self.tls_files else { return Ok(()) };
        let tls = PeerTlsClient::load(files)?;
        *self.tls.lock().expect("peer tls lock") = Some(Arc::new(tls));
        self.channels.lock().expect("channels lock").clear();
        Ok(())
    }

    /// Whether this node's credentials may be sent to a peer at `addr`: always with peer
    /// TLS (the peer proves it is the node called); with a cluster secret alone only to a
    /// loopback address, as the start rules allow a secret-only peer port only there
    /// (`security`), unless `--insecure`. The refusal names the rule and the fix. Checked
    /// before a connection is made, and by `dls members add` before a member is added.
    pub fn may_send_credentials(&self, addr: &str) -> Result<(), String> {
        if self.tls_files.is_some() || self.secret_beyond_loopback || crate::security::is_loopback_host(addr) {
            return Ok(());
        }
        Err(format!(
            "peer address {addr} is not loopback, and this cluster's peers authenticate with the cluster secret alone, \
             which would travel to it in clear: peers on other machines need mutual TLS (--peer-tls-cert, \
             --peer-tls-key, --peer-tls-ca on every node; see `dls certs`), or every node started with --insecure on \
             an isolated network"
        ))
    }

    /// The channel to node `to` at `addr` on `lane`, connected lazily and kept.
    pub fn channel(&self, lane: Lane, to: NodeId, addr: &str) -> Result<Channel, Unreachable> {
        self.may_send_credentials(addr).map_err(|why| Unreachable::new(&std::io::Error::other(why)))?;
        let mut channels = self.channels.lock().expect("channels lock");
        let key = (lane, to, addr.to_string());
        if let Some(c) = channels.get(&key) {
            return Ok(c.clone());
        }
        let tls = self.tls.lock().expect("peer tls lock").clone();
        // With TLS the connector makes the TLS connection itself: the URI stays http.
        let mut endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Unreachable::new(&e))?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true);
        if lane == Lane::Forward {
            // A forwarded lock stream may wait for minutes with nothing on the wire: pings
            // notice a leader that vanished, so the stream ends and its client re-attaches.
            endpoint = endpoint.http2_keep_alive_interval(FORWARD_KEEPALIVE).keep_alive_timeout(FORWARD_KEEPALIVE);
        }
        let channel = match tls {
            Some(tls) => {
                let connector = tls.connector(to).map_err(|e| Unreachable::new(&e))?;
                endpoint.connect_with_connector_lazy(connector)
            }
            None => endpoint.connect_lazy(),
        };
        channels.insert(key, channel.clone());
        Ok(channel)
    }

    /// Stamps outgoing calls with this node's peer credentials (for calls that name no
    /// receiving node).
    pub fn stamp(&self) -> Stamp {
        Stamp::any(self.auth.clone())
    }

    /// A client of node `to`'s discovery call (asked before this node takes part in raft).
    pub fn discovery(&self, to: NodeId, addr: &str) -> Result<DiscoveryRpc, Unreachable> {
        let channel = self.channel(Lane::Raft, to, addr)?;
        Ok(PeerDiscoveryServiceClient::with_interceptor(channel, self.stamp()))
    }

    /// A raft client of node `target` at `addr`; its calls name `target`, which refuses
    /// them if it is another node.
    pub(crate) fn client(&self, target: NodeId, addr: &str) -> Result<PeerRpc, Unreachable> {
        let channel = self.channel(Lane::Raft, target, addr)?;
        Ok(RaftServiceClient::with_interceptor(channel, Stamp::to(self.auth.clone(), target))
            .max_decoding_message_size(MAX_RAFT_MESSAGE)
            .max_encoding_message_size(MAX_RAFT_MESSAGE))
    }
}

/// Creates raft clients for peers. openraft asks for a new client for every election
/// round and read-index check; they all share one HTTP/2 channel per peer address, so an
/// election does not wait for fresh TCP connections.
#[derive(Clone)]
pub struct PeerNetwork {
    transport: Arc<PeerTransport>,
    /// This node's log on disk: no commit index leaves before the entry it names is.
    durable: Arc<Durable>,
    /// Told of every AppendEntries a peer acknowledged.
    clock: Arc<QuorumClock>,
}

impl PeerNetwork {
    pub fn new(transport: Arc<PeerTransport>, durable: Arc<Durable>, clock: Arc<QuorumClock>) -> Self {
        PeerNetwork { transport, durable, clock }
    }
}

pub struct PeerClient {
    target: NodeId,
    client: Result<PeerRpc, Unreachable>,
    durable: Arc<Durable>,
    clock: Arc<QuorumClock>,
    /// The last AppendEntries this client delivered: see [`Delivered::answers`].
    delivered: Option<Delivered>,
    /// AppendEntries travel on this stream once the first one opened it.
    stream: Option<AppendStream>,
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        let client = self.transport.client(target, &node.peer_addr);
        PeerClient {
            target,
            client,
            durable: self.durable.clone(),
            clock: self.clock.clone(),
            delivered: None,
            stream: None,
        }
    }
}

/// An AppendEntries the follower accepted: when it was sent, under which vote, and the
/// last log id the follower holds from it.
#[derive(Debug)]
struct Delivered {
    sent: Instant,
    vote: Vote,
    matched: Option<LogId>,
}

/// How recently a follower must have accepted an AppendEntries for an empty one (a
/// commit-index update or a heartbeat) to be answered without sending it: half the
/// default heartbeat interval, so a follower still hears from the leader at least every
/// heartbeat interval plus this (75 ms with the defaults), far inside its election timeout.
const SKIP_EMPTY_WITHIN: Duration = Duration::from_millis(25);

impl Delivered {
    /// Whether `req` carries nothing the follower needs now, so that it may be answered
    /// as the follower answered this one. openraft 0.9 follows every commit with an
    /// AppendEntries that only tells each follower the new commit index; under load that
    /// doubles the AppendEntries the leader sends, and the next entry waits behind it (one
    /// AppendEntries in flight per follower). A follower needs the commit index only to
    /// apply entries early; the next AppendEntries carries it anyway (with entries, or the
    /// next heartbeat once the leader is idle). So an empty request is skipped when the
    /// follower accepted one recently, under the same leader vote, ending where this one
    /// starts. Nothing the leader decides depends on the skipped answer: the quorum clock
    /// counts only answers that came back, and openraft's read-index checks use clients of
    /// their own, which always send.
    fn answers(&self, req: &AppendEntriesRequest<TypeConfig>, now: Instant) -> bool {
        req.entries.is_empty()
            && self.vote == req.vote
            && self.matched == req.prev_log_id
            && now.saturating_duration_since(self.sent) < SKIP_EMPTY_WITHIN
    }
}

impl PeerClient {
    fn client(&mut self) -> Result<PeerRpc, Unreachable> {
        self.client.clone()
    }

    /// One round trip: encode, send with the RPC's deadline, decode the answer or the
    /// remote raft error.
    async fn call<Req, Resp, E>(&mut self, method: Method, req: &Req, option: RPCOption) -> Result<Resp, RPCError<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let data = codec::encode(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut client = self.client().map_err(RPCError::Unreachable)?;
        let request = RaftPayload { data, is_error: false, seq: 0 };
        let ttl = option.hard_ttl();
        let answer = tokio::time::timeout(ttl, async {
            match method {
                Method::Append => self.append(&mut client, request).await,
                Method::Vote => client.vote(unary(request, ttl)).await.map(tonic::Response::into_inner),
                Method::Snapshot => client.install_snapshot(unary(request, ttl)).await.map(tonic::Response::into_inner),
            }
        })
        .await
        .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded(format!("no answer within {ttl:?}"))));
        let payload = match answer {
            Ok(payload) => payload,
            Err(status) => {
                // The stream's state is unknown now (an answer may still be on its way).
                self.stream = None;
                // Connection-level failures tell openraft to back off instead of retrying hot.
                return Err(if status.code() == tonic::Code::Unavailable {
                    RPCError::Unreachable(Unreachable::new(&status))
                } else {
                    RPCError::Network(NetworkError::new(&status))
                });
            }
        };
        if payload.is_error {
            let err: RaftError<E> =
                codec::decode(&payload.data).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
            return Err(RPCError::RemoteError(RemoteError::new(self.target, err)));
        }
        codec::decode(&payload.data).map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }

    /// One AppendEntries: on this client's stream, opened by the first one.
    async fn append(&mut self, client: &mut PeerRpc, request: RaftPayload) -> Result<RaftPayload, tonic::Status> {
        // A stream whose last round trip never finished (openraft dropped the call, e.g. at
        // its own timeout) may still deliver that answer: it is not used again.
        if self.stream.as_ref().is_some_and(AppendStream::interrupted) {
            self.stream = None;
        }
        if let Some(stream) = &mut self.stream {
            return stream.round_trip(request).await;
        }
        let (stream, answer) = AppendStream::open(client, request).await?;
        self.stream = Some(stream);
        Ok(answer)
    }
}

/// A unary request that tells the peer its deadline.
fn unary(payload: RaftPayload, ttl: Duration) -> tonic::Request<RaftPayload> {
    let mut request = tonic::Request::new(payload);
    request.set_timeout(ttl);
    request
}

#[derive(Clone, Copy)]
enum Method {
    Append,
    Vote,
    Snapshot,
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        req: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError> {
        // Skipped before the wait below: nothing leaves, so nothing has to be on disk first.
        if self.delivered.as_ref().is_some_and(|d| d.answers(&req, Instant::now())) {
            return Ok(AppendEntriesResponse::Success);
        }
        // The leader reports its own appends before they are synced (see `Durable`); a
        // follower must not apply an entry that could still vanish from the leader's disk.
        if let Some(commit) = &req.leader_commit {
            self.durable
                .wait_for(commit.index, option.hard_ttl())
                .await
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        }
        let sent = Instant::now();
        let answer = self.call(Method::Append, &req, option).await;
        self.delivered = None;
        let answer = answer?;
        if !matches!(answer, AppendEntriesResponse::HigherVote(_)) {
            self.clock.acknowledged(self.target, &req.vote, sent);
        }
        if matches!(answer, AppendEntriesResponse::Success) {
            let matched = req.entries.last().map(|e| Some(e.log_id)).unwrap_or(req.prev_log_id);
            self.delivered = Some(Delivered { sent, vote: req.vote, matched });
        }
        Ok(answer)
    }

    async fn install_snapshot(
        &mut self,
        req: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<InstallSnapshotError>> {
        self.call(Method::Snapshot, &req, option).await
    }

    async fn vote(&mut self, req: VoteRequest<NodeId>, option: RPCOption) -> Result<VoteResponse<NodeId>, RPCError> {
        self.call(Method::Vote, &req, option).await
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;
    use crate::raft::types::Entry;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn request(
        vote: Vote,
        prev: Option<LogId>,
        entries: &[LogId],
        commit: Option<LogId>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote,
            prev_log_id: prev,
            entries: entries.iter().map(|&log_id| Entry { log_id, payload: EntryPayload::Blank }).collect(),
            leader_commit: commit,
        }
    }

    #[tokio::test]
    async fn a_cluster_secret_is_sent_only_to_loopback_unless_insecure() {
        let auth = PeerAuth::new(1, "c", Some("0123456789abcdef-secret"), false).unwrap();
        let strict = PeerTransport::new(auth.clone(), None, false).unwrap();
        for local in ["127.0.0.1:7080", "localhost:7080", "[::1]:7080"] {
            assert!(strict.may_send_credentials(local).is_ok(), "{local}");
            assert!(strict.channel(Lane::Raft, 2, local).is_ok(), "{local}");
        }
        for remote in ["10.0.0.2:7080", "node-2.example:7080"] {
            let err = strict.may_send_credentials(remote).unwrap_err();
            assert!(err.contains("in clear") && err.contains("--peer-tls-cert"), "{err}");
            assert!(strict.channel(Lane::Forward, 2, remote).is_err(), "no connection is even made to {remote}");
        }
        let insecure = PeerTransport::new(auth, None, true).unwrap();
        assert!(insecure.may_send_credentials("10.0.0.2:7080").is_ok());
    }

    #[test]
    fn only_an_empty_request_right_after_an_accepted_one_at_the_same_place_is_skipped() {
        let vote = Vote::new_committed(2, 1);
        let t0 = Instant::now();
        let delivered = Delivered { sent: t0, vote, matched: Some(log_id(2, 7)) };
        let soon = t0 + Duration::from_millis(1);
        // The commit-index update that follows the entry the follower just accepted.
        assert!(delivered.answers(&request(vote, Some(log_id(2, 7)), &[], Some(log_id(2, 7))), soon));
        // Entries always go out.
        assert!(!delivered.answers(&request(vote, Some(log_id(2, 7)), &[log_id(2, 8)], None), soon));
        // Another log position, or another leader vote: the follower's answer may differ.
        assert!(!delivered.answers(&request(vote, Some(log_id(2, 6)), &[], None), soon));
        assert!(!delivered.answers(&request(Vote::new_committed(3, 1), Some(log_id(2, 7)), &[], None), soon));
        // Once the follower has not heard from the leader for a while, heartbeats go out.
        let later = t0 + SKIP_EMPTY_WITHIN;
        assert!(!delivered.answers(&request(vote, Some(log_id(2, 7)), &[], Some(log_id(2, 7))), later));
    }
}

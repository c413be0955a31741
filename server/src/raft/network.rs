//! The raft client side: sends AppendEntries, Vote and InstallSnapshot to peers over the
//! internal gRPC `RaftService`, with openraft messages encoded by [`codec`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

use super::append_stream::{AppendStream, Opened};
use super::durable::Durable;
use super::types::{codec, Node, NodeId, RPCError, RaftError, TypeConfig};

/// Largest raft message accepted or sent (snapshot chunks are the big ones).
pub const MAX_RAFT_MESSAGE: usize = 64 * 1024 * 1024;

/// Creates raft clients for peers. openraft asks for a new client for every election
/// round and read-index check; they all share one HTTP/2 channel per peer address, so an
/// election does not wait for fresh TCP connections.
#[derive(Clone)]
pub struct PeerNetwork {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// This node's log on disk: no commit index leaves before the entry it names is.
    durable: Arc<Durable>,
}

impl PeerNetwork {
    pub fn new(durable: Arc<Durable>) -> Self {
        PeerNetwork { channels: Arc::default(), durable }
    }

    fn channel(&self, addr: &str) -> Result<Channel, Unreachable> {
        let mut channels = self.channels.lock().expect("channels lock");
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Unreachable::new(&e))?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .connect_lazy();
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }
}

pub struct PeerClient {
    target: NodeId,
    client: Result<RaftServiceClient<Channel>, Unreachable>,
    durable: Arc<Durable>,
    /// AppendEntries travel on this stream once the first one opened it.
    stream: Option<AppendStream>,
    /// The peer has no streaming call (an older version): unary calls only.
    unary_only: bool,
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        let client = self.channel(&node.addr).map(|ch| {
            RaftServiceClient::new(ch)
                .max_decoding_message_size(MAX_RAFT_MESSAGE)
                .max_encoding_message_size(MAX_RAFT_MESSAGE)
        });
        PeerClient { target, client, durable: self.durable.clone(), stream: None, unary_only: false }
    }
}

impl PeerClient {
    fn client(&mut self) -> Result<RaftServiceClient<Channel>, Unreachable> {
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
        let request = RaftPayload { data, is_error: false };
        let ttl = option.hard_ttl();
        let answer = tokio::time::timeout(ttl, async {
            match method {
                Method::Append => self.append(&mut client, request, ttl).await,
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
    async fn append(
        &mut self,
        client: &mut RaftServiceClient<Channel>,
        request: RaftPayload,
        ttl: Duration,
    ) -> Result<RaftPayload, tonic::Status> {
        if let Some(stream) = &mut self.stream {
            return stream.round_trip(request).await;
        }
        if self.unary_only {
            return client.append_entries(unary(request, ttl)).await.map(tonic::Response::into_inner);
        }
        match AppendStream::open(client, request).await? {
            Opened::Stream(stream, answer) => {
                self.stream = Some(stream);
                Ok(answer)
            }
            Opened::Unsupported(answer) => {
                self.unary_only = true;
                Ok(answer)
            }
        }
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
        // The leader reports its own appends before they are synced (see `Durable`); a
        // follower must not apply an entry that could still vanish from the leader's disk.
        if let Some(commit) = &req.leader_commit {
            self.durable
                .wait_for(commit.index, option.hard_ttl())
                .await
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        }
        self.call(Method::Append, &req, option).await
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

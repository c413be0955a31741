//! Serves raft RPCs from peers. Internal: never expose this service to clients.

use std::pin::Pin;
use std::sync::Arc;

use caerus_proto::raft::raft_service_server::RaftService;
use caerus_proto::raft::{RaftPayload, TakeLeadershipRequest, TakeLeadershipResponse};
use futures::Stream;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use crate::node::Node;
use crate::raft::types::codec;

pub struct RaftApi {
    pub node: Arc<Node>,
    /// Turns true when this node is asked to stop. A leader's AppendEntries stream never
    /// ends on its own, and a graceful shutdown waits for every open stream: it must end
    /// here, or a stopping follower waits for its leader forever.
    pub stop: watch::Receiver<bool>,
}

fn decode<T: DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    decode_payload(&req.into_inner())
}

fn decode_payload<T: DeserializeOwned>(payload: &RaftPayload) -> Result<T, Status> {
    codec::decode(&payload.data).map_err(|e| Status::invalid_argument(format!("bad raft payload: {e}")))
}

/// Encodes raft's answer; a raft error travels as data so the sender can rebuild it.
fn answer<T: Serialize, E: Serialize>(result: Result<T, E>) -> Result<RaftPayload, Status> {
    let (data, is_error) = match result {
        Ok(v) => (codec::encode(&v), false),
        Err(e) => (codec::encode(&e), true),
    };
    let data = data.map_err(|e| Status::internal(format!("cannot encode raft answer: {e}")))?;
    Ok(RaftPayload { data, is_error, seq: 0 })
}

fn encode<T: Serialize, E: Serialize>(result: Result<T, E>) -> Result<Response<RaftPayload>, Status> {
    answer(result).map(Response::new)
}

/// Raft traffic reaches a node only once it has bootstrapped or joined: a node with an
/// empty log that may have lost its vote must not answer a vote request meanwhile.
fn admitted(node: &Node) -> Result<(), Status> {
    if node.admitted() {
        Ok(())
    } else {
        Err(Status::unavailable("this node has an empty log and has not bootstrapped or joined yet (see its log)"))
    }
}

type AnswerStream = Pin<Box<dyn Stream<Item = Result<RaftPayload, Status>> + Send>>;

#[tonic::async_trait]
impl RaftService for RaftApi {
    async fn append_entries(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        admitted(&self.node)?;
        encode(self.node.raft().append_entries(decode(req)?).await)
    }

    type AppendEntriesStreamStream = AnswerStream;

    /// AppendEntries one after another on one stream, answered in order.
    async fn append_entries_stream(
        &self,
        req: Request<Streaming<RaftPayload>>,
    ) -> Result<Response<AnswerStream>, Status> {
        admitted(&self.node)?;
        let node = self.node.clone();
        let mut stop = self.stop.clone();
        let mut requests = req.into_inner();
        let answers = async_stream::try_stream! {
            loop {
                let request = tokio::select! {
                    r = requests.message() => r,
                    _ = stop.wait_for(|s| *s) => Ok(None),
                };
                let Some(request) = request? else { break };
                let mut reply = answer(node.raft().append_entries(decode_payload(&request)?).await)?;
                reply.seq = request.seq;
                yield reply;
            }
        };
        Ok(Response::new(Box::pin(answers)))
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        admitted(&self.node)?;
        if let Some(owed) = self.node.owed() {
            // Its shortened log could help elect a leader without them (see `Node::owed`).
            return Err(Status::unavailable(format!(
                "node {} lost acknowledged raft log entries (up to index {owed}) to disk damage and votes again once \
                 it has fetched them from a leader",
                self.node.id()
            )));
        }
        encode(self.node.raft().vote(decode(req)?).await)
    }

    async fn install_snapshot(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        admitted(&self.node)?;
        encode(self.node.raft().install_snapshot(decode(req)?).await)
    }

    /// The leader hands leadership to this node (see `handoff`). The gate admitted a member;
    /// only the leader this node follows may ask.
    async fn take_leadership(
        &self,
        req: Request<TakeLeadershipRequest>,
    ) -> Result<Response<TakeLeadershipResponse>, Status> {
        admitted(&self.node)?;
        let from = self.node.peer_auth().check_credentials(&req)?;
        let r = req.into_inner();
        crate::handoff::take_over(&self.node, from, r.term, r.last_log_index)
            .await
            .map_err(Status::failed_precondition)?;
        Ok(Response::new(TakeLeadershipResponse {}))
    }
}

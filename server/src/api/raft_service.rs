//! Serves raft RPCs from peers. Internal: never expose this service to clients.

use std::sync::Arc;

use caerus_proto::raft::raft_service_server::RaftService;
use caerus_proto::raft::RaftPayload;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::node::Node;
use crate::raft::types::codec;

pub struct RaftApi {
    pub node: Arc<Node>,
}

fn decode<T: DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    codec::decode(&req.into_inner().data).map_err(|e| Status::invalid_argument(format!("bad raft payload: {e}")))
}

/// Encodes raft's answer; a raft error travels as data so the sender can rebuild it.
fn encode<T: Serialize, E: Serialize>(result: Result<T, E>) -> Result<Response<RaftPayload>, Status> {
    let (data, is_error) = match result {
        Ok(v) => (codec::encode(&v), false),
        Err(e) => (codec::encode(&e), true),
    };
    let data = data.map_err(|e| Status::internal(format!("cannot encode raft answer: {e}")))?;
    Ok(Response::new(RaftPayload { data, is_error }))
}

#[tonic::async_trait]
impl RaftService for RaftApi {
    async fn append_entries(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        encode(self.node.raft.append_entries(decode(req)?).await)
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        encode(self.node.raft.vote(decode(req)?).await)
    }

    async fn install_snapshot(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        encode(self.node.raft.install_snapshot(decode(req)?).await)
    }
}

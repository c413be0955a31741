//! AppendEntries over one long-lived gRPC stream per replication stream.
//!
//! A unary call per AppendEntries costs a new HTTP/2 stream, request and response headers
//! and a server task; the leader sends one per write to every follower, plus one more
//! with the commit index after each commit. openraft sends a follower one AppendEntries
//! at a time, so answers come back in request order on one stream.

use std::sync::Mutex;

use caerus_proto::raft::RaftPayload;
use tokio::sync::mpsc;
use tonic::{Code, Status, Streaming};

use super::network::PeerRpc;

pub struct AppendStream {
    requests: mpsc::Sender<RaftPayload>,
    /// In a mutex only because openraft wants its network clients `Sync` and `Streaming`
    /// is not; reached through `get_mut`, never locked.
    answers: Mutex<Streaming<RaftPayload>>,
}

/// What opening a stream gave.
pub enum Opened {
    /// The stream, with the first request's answer.
    Stream(AppendStream, RaftPayload),
    /// The peer is an older version without the streaming call: use unary calls.
    Unsupported(RaftPayload),
}

impl AppendStream {
    /// Opens a stream carrying `first` (queued before the call, so it leaves with the
    /// stream's headers instead of a round trip later) and waits for its answer.
    pub async fn open(client: &mut PeerRpc, first: RaftPayload) -> Result<Opened, Status> {
        let (requests, rx) = mpsc::channel(1);
        let retry = first.clone();
        requests.send(first).await.map_err(|_| Status::internal("append stream closed before use"))?;
        match client.append_entries_stream(tokio_stream::wrappers::ReceiverStream::new(rx)).await {
            Ok(response) => {
                let mut stream = AppendStream { requests, answers: Mutex::new(response.into_inner()) };
                let answer = stream.next_answer().await?;
                Ok(Opened::Stream(stream, answer))
            }
            Err(status) if status.code() == Code::Unimplemented => {
                Ok(Opened::Unsupported(client.append_entries(retry).await?.into_inner()))
            }
            Err(status) => Err(status),
        }
    }

    /// Sends one request and waits for its answer. After an error (or a caller's timeout)
    /// the stream must be dropped: a late answer would pair with the next request.
    pub async fn round_trip(&mut self, request: RaftPayload) -> Result<RaftPayload, Status> {
        self.requests.send(request).await.map_err(|_| Status::unavailable("append stream closed"))?;
        self.next_answer().await
    }

    async fn next_answer(&mut self) -> Result<RaftPayload, Status> {
        let answers = self.answers.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        answers.message().await?.ok_or_else(|| Status::unavailable("the peer closed the append stream"))
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use caerus_proto::raft::raft_service_client::RaftServiceClient;
    use caerus_proto::raft::raft_service_server::{RaftService, RaftServiceServer};
    use futures::Stream;
    use tokio_stream::wrappers::TcpListenerStream;
    use tonic::{Request, Response};

    use super::*;

    /// Answers each AppendEntries with its payload reversed; `streams: false` plays an
    /// older server without the streaming call.
    struct Reverser {
        streams: bool,
    }

    fn reversed(p: &RaftPayload) -> RaftPayload {
        RaftPayload { data: p.data.iter().rev().copied().collect(), is_error: false }
    }

    type Answers = Pin<Box<dyn Stream<Item = Result<RaftPayload, Status>> + Send>>;

    #[tonic::async_trait]
    impl RaftService for Reverser {
        async fn append_entries(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
            Ok(Response::new(reversed(req.get_ref())))
        }

        type AppendEntriesStreamStream = Answers;

        async fn append_entries_stream(
            &self,
            req: Request<Streaming<RaftPayload>>,
        ) -> Result<Response<Answers>, Status> {
            if !self.streams {
                return Err(Status::unimplemented("older server"));
            }
            let mut requests = req.into_inner();
            let answers = async_stream::try_stream! {
                while let Some(r) = requests.message().await? {
                    // A request saying "bye" ends the stream from the server side.
                    if r.data == b"bye" {
                        break;
                    }
                    yield reversed(&r);
                }
            };
            Ok(Response::new(Box::pin(answers)))
        }

        async fn vote(&self, _: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
            Err(Status::unimplemented("not in this test"))
        }

        async fn install_snapshot(&self, _: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
            Err(Status::unimplemented("not in this test"))
        }
    }

    async fn client_of(streams: bool) -> PeerRpc {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(RaftServiceServer::new(Reverser { streams }))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
        let auth = crate::raft::peer_auth::PeerAuth::new(1, "test", Some("a-test-secret-of-16+"), false).unwrap();
        RaftServiceClient::with_interceptor(channel, crate::raft::peer_auth::Stamp(auth))
    }

    fn payload(s: &str) -> RaftPayload {
        RaftPayload { data: s.as_bytes().to_vec(), is_error: false }
    }

    #[tokio::test]
    async fn answers_come_back_in_order_on_one_stream_until_the_peer_ends_it() {
        let mut client = client_of(true).await;
        let Opened::Stream(mut stream, first) = AppendStream::open(&mut client, payload("abc")).await.unwrap() else {
            panic!("a current peer streams");
        };
        assert_eq!(first.data, b"cba");
        for word in ["hello", "raft", "x"] {
            let answer = stream.round_trip(payload(word)).await.unwrap();
            assert_eq!(answer.data, word.bytes().rev().collect::<Vec<_>>());
        }
        let err = stream.round_trip(payload("bye")).await.unwrap_err();
        assert!(err.message().contains("closed"), "{err}");
    }

    #[tokio::test]
    async fn a_peer_without_the_streaming_call_gets_a_unary_call() {
        let mut client = client_of(false).await;
        match AppendStream::open(&mut client, payload("abc")).await.unwrap() {
            Opened::Unsupported(answer) => assert_eq!(answer.data, b"cba"),
            Opened::Stream(..) => panic!("an older peer cannot stream"),
        }
    }
}

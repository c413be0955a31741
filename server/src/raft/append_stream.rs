//! AppendEntries over one long-lived gRPC stream per replication stream.
//!
//! A unary call per AppendEntries costs a new HTTP/2 stream, request and response headers
//! and a server task; the leader sends one per write to every follower, plus one more
//! with the commit index after each commit. openraft sends a follower one AppendEntries
//! at a time, so answers come back in request order on one stream.

use std::sync::Mutex;

use caerus_proto::raft::RaftPayload;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::peer_auth::PeerRpc;

pub struct AppendStream {
    requests: mpsc::Sender<RaftPayload>,
    /// In a mutex only because openraft wants its network clients `Sync` and `Streaming`
    /// is not; reached through `get_mut`, never locked.
    answers: Mutex<Streaming<RaftPayload>>,
    /// The number of the last request sent; its answer must carry it.
    seq: u64,
    /// A request was sent and its answer not yet read. Still set when a round trip starts,
    /// the previous one was cancelled midway and its answer may still arrive: answers
    /// would pair with the wrong requests, and a success for an older request would be
    /// taken for a newer one (entries counted as replicated that are not).
    in_flight: bool,
}

impl AppendStream {
    /// Opens a stream carrying `first` (queued before the call, so it leaves with the
    /// stream's headers instead of a round trip later) and waits for its answer.
    pub async fn open(client: &mut PeerRpc, first: RaftPayload) -> Result<(AppendStream, RaftPayload), Status> {
        let (requests, rx) = mpsc::channel(1);
        let first = RaftPayload { seq: 1, ..first };
        requests.send(first).await.map_err(|_| Status::internal("append stream closed before use"))?;
        let response = client.append_entries_stream(tokio_stream::wrappers::ReceiverStream::new(rx)).await?;
        let answers = Mutex::new(response.into_inner());
        let mut stream = AppendStream { requests, answers, seq: 1, in_flight: true };
        let answer = stream.next_answer().await?;
        Ok((stream, answer))
    }

    /// Whether a round trip was cancelled midway: then the stream must be dropped.
    pub fn interrupted(&self) -> bool {
        self.in_flight
    }

    /// Sends one request and waits for its answer. After an error (or a caller's timeout)
    /// the stream must be dropped: a late answer would pair with the next request.
    pub async fn round_trip(&mut self, request: RaftPayload) -> Result<RaftPayload, Status> {
        if self.in_flight {
            return Err(Status::internal("append stream interrupted midway; open a new one"));
        }
        self.seq += 1;
        self.in_flight = true;
        let request = RaftPayload { seq: self.seq, ..request };
        self.requests.send(request).await.map_err(|_| Status::unavailable("append stream closed"))?;
        self.next_answer().await
    }

    async fn next_answer(&mut self) -> Result<RaftPayload, Status> {
        let answers = self.answers.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        let answer =
            answers.message().await?.ok_or_else(|| Status::unavailable("the peer closed the append stream"))?;
        if answer.seq != self.seq {
            return Err(Status::internal(format!(
                "append stream answer {} arrived for request {}; dropping the stream",
                answer.seq, self.seq
            )));
        }
        self.in_flight = false;
        Ok(answer)
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

    /// Answers each AppendEntries with its payload reversed.
    struct Reverser;

    fn reversed(p: &RaftPayload) -> RaftPayload {
        RaftPayload { data: p.data.iter().rev().copied().collect(), is_error: false, seq: p.seq }
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
            let mut requests = req.into_inner();
            let answers = async_stream::try_stream! {
                while let Some(r) = requests.message().await? {
                    // A request saying "bye" ends the stream from the server side.
                    if r.data == b"bye" {
                        break;
                    }
                    // "slow" is answered late: long after a caller gave up on it.
                    if r.data == b"slow" {
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                    // "skew" plays a server that answers with the wrong number.
                    if r.data == b"skew" {
                        yield RaftPayload { seq: r.seq + 7, ..reversed(&r) };
                        continue;
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

        async fn take_leadership(
            &self,
            _: Request<caerus_proto::raft::TakeLeadershipRequest>,
        ) -> Result<Response<caerus_proto::raft::TakeLeadershipResponse>, Status> {
            Err(Status::unimplemented("not in this test"))
        }
    }

    async fn client_of() -> PeerRpc {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(RaftServiceServer::new(Reverser))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
        let auth = crate::raft::peer_auth::PeerAuth::new(1, "test", Some("a-test-secret-of-16+"), false).unwrap();
        RaftServiceClient::with_interceptor(channel, crate::raft::peer_auth::Stamp::to(auth, 2))
    }

    fn payload(s: &str) -> RaftPayload {
        RaftPayload { data: s.as_bytes().to_vec(), is_error: false, seq: 0 }
    }

    async fn open(client: &mut PeerRpc) -> AppendStream {
        let (stream, first) = AppendStream::open(client, payload("abc")).await.unwrap();
        assert_eq!(first.data, b"cba");
        stream
    }

    #[tokio::test]
    async fn an_answer_is_never_taken_for_a_later_request() {
        let mut client = client_of().await;
        // A caller that gives up midway (openraft's own timeout drops the call).
        let mut stream = open(&mut client).await;
        let cut = tokio::time::timeout(std::time::Duration::from_millis(20), stream.round_trip(payload("slow"))).await;
        assert!(cut.is_err(), "the slow answer is still on its way");
        assert!(stream.interrupted());
        let err = stream.round_trip(payload("next")).await.unwrap_err();
        assert!(err.message().contains("interrupted"), "{err}");

        // A stale answer that arrives anyway is recognised by its number.
        let mut stream = open(&mut client).await;
        let err = stream.round_trip(payload("skew")).await.unwrap_err();
        assert!(err.message().contains("arrived for request"), "{err}");
    }

    #[tokio::test]
    async fn answers_come_back_in_order_on_one_stream_until_the_peer_ends_it() {
        let mut client = client_of().await;
        let (mut stream, first) = AppendStream::open(&mut client, payload("abc")).await.unwrap();
        assert_eq!(first.data, b"cba");
        for word in ["hello", "raft", "x"] {
            let answer = stream.round_trip(payload(word)).await.unwrap();
            assert_eq!(answer.data, word.bytes().rev().collect::<Vec<_>>());
        }
        let err = stream.round_trip(payload("bye")).await.unwrap_err();
        assert!(err.message().contains("closed"), "{err}");
    }
}

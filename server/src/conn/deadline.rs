//! Requests on their way in. A call's body must be complete within `--request-timeout-ms`
//! of its start, or reading it fails and the call is answered with an error. Once its
//! handler has waited [`ARRIVAL_GRACE`] for body bytes that have not come, the call holds a
//! place of its port and source address (`--max-pending-requests-per-ip`) until they come;
//! past that bound, reading fails at once. So a client that opens calls and never finishes
//! them cannot make the node hold their handlers and buffers (~6 KiB each) beyond those
//! bounds, while a real client's request, whose bytes follow its headers at once (or after
//! a moment on a busy node), never holds one. Only the request's arrival is timed and
//! counted, never the handler: a lock wait, a membership change or a snapshot may take as
//! long as they need.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::admit::{PortGuard, Refusal, Slot};

/// How long a handler may wait for the rest of a request before the call counts as one
/// still arriving. A real client sends its body right after its headers; on a node busy
/// with thousands of calls its handler may still find the bytes not yet read for a while.
pub const ARRIVAL_GRACE: Duration = Duration::from_secs(1);

/// Why a request stopped arriving.
#[derive(Debug, thiserror::Error)]
pub enum ArrivalError {
    /// It was not complete in time.
    #[error("the request did not arrive within --request-timeout-ms {}", .0.as_millis())]
    Timeout(Duration),
    /// Too many requests from its address (or on its port) were waiting for their bytes.
    #[error("{0}")]
    Refused(String),
}

impl From<ArrivalError> for tonic::Status {
    fn from(e: ArrivalError) -> tonic::Status {
        let mut status = match &e {
            // Not CANCELLED: tonic reads a cancelled request body as one that ended.
            ArrivalError::Timeout(_) => tonic::Status::deadline_exceeded(e.to_string()),
            ArrivalError::Refused(_) => tonic::Status::resource_exhausted(e.to_string()),
        };
        if matches!(e, ArrivalError::Refused(_)) {
            status.metadata_mut().insert(
                caerus_proto::metadata::ERROR_KIND,
                tonic::metadata::MetadataValue::from_static("RESOURCE_EXHAUSTED"),
            );
        }
        status
    }
}

impl From<ArrivalError> for axum::Error {
    fn from(e: ArrivalError) -> axum::Error {
        axum::Error::new(e)
    }
}

/// Where a request comes from, for its place among the port's requests waiting for bytes.
#[derive(Clone)]
pub struct Arrival {
    pub guard: Arc<PortGuard>,
    pub peer: SocketAddr,
}

impl Arrival {
    fn wait(&self) -> Result<Slot, ArrivalError> {
        self.guard.begin_request(self.peer.ip()).map_err(|why| {
            let b = &self.guard.bounds;
            ArrivalError::Refused(match why {
                Refusal::AddressPendingFull => format!(
                    "{} calls from {} are waiting for the rest of their request (limit --max-pending-requests-per-ip \
                     {}); send whole requests",
                    b.max_pending_requests_per_ip,
                    self.peer.ip(),
                    b.max_pending_requests_per_ip
                ),
                _ => format!(
                    "{} calls on this port are waiting for the rest of their request (4 x --max-connections); try again",
                    b.max_pending_requests
                ),
            })
        })
    }
}

/// A request body that fails once its deadline passes before its end, and holds a place
/// among the port's requests waiting for bytes while its reader waits for some.
pub struct TimedBody<B> {
    inner: B,
    /// None once the body ended: what the handler does afterwards is not timed.
    deadline: Option<Pin<Box<Sleep>>>,
    limit: Duration,
    arrival: Option<Arrival>,
    /// Set while the reader waits for bytes: when the wait began to count.
    grace: Option<Pin<Box<Sleep>>>,
    waiting: Option<Slot>,
}

impl<B: Body> TimedBody<B> {
    pub fn new(inner: B, limit: Duration, arrival: Option<Arrival>) -> TimedBody<B> {
        let deadline = (!inner.is_end_stream()).then(|| Box::pin(tokio::time::sleep(limit)));
        TimedBody { inner, deadline, limit, arrival, grace: None, waiting: None }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body + Unpin,
    B::Error: From<ArrivalError>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.grace = None;
                this.waiting = None;
                if frame.is_none() || this.inner.is_end_stream() {
                    this.deadline = None;
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                if this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready()) {
                    this.deadline = None;
                    this.waiting = None;
                    return Poll::Ready(Some(Err(ArrivalError::Timeout(this.limit).into())));
                }
                let Some(arrival) = &this.arrival else { return Poll::Pending };
                let grace = this.grace.get_or_insert_with(|| Box::pin(tokio::time::sleep(ARRIVAL_GRACE)));
                if this.waiting.is_none() && grace.as_mut().poll(cx).is_ready() {
                    match arrival.wait() {
                        Ok(slot) => this.waiting = Some(slot),
                        Err(refused) => {
                            this.deadline = None;
                            return Poll::Ready(Some(Err(refused.into())));
                        }
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The tower layer that times and counts every request body of a gRPC server (`None`:
/// neither, for the peer port, whose gate answers strangers before any body is read).
#[derive(Clone)]
pub struct RequestDeadline(pub Option<(Duration, Arc<PortGuard>)>);

impl<S> tower_layer::Layer<S> for RequestDeadline {
    type Service = Deadlined<S>;

    fn layer(&self, inner: S) -> Deadlined<S> {
        Deadlined { inner, bound: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct Deadlined<S> {
    inner: S,
    bound: Option<(Duration, Arc<PortGuard>)>,
}

type GrpcRequest = http::Request<tonic::body::BoxBody>;
type GrpcResponse = http::Response<tonic::body::BoxBody>;

impl<S> tower_service::Service<GrpcRequest> for Deadlined<S>
where
    S: tower_service::Service<GrpcRequest, Response = GrpcResponse>,
{
    type Response = GrpcResponse;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: GrpcRequest) -> S::Future {
        let Some((limit, guard)) = &self.bound else { return self.inner.call(req) };
        let (limit, arrival) = (*limit, grpc_peer(&req).map(|peer| Arrival { guard: guard.clone(), peer }));
        self.inner.call(req.map(|b| tonic::body::boxed(TimedBody::new(b, limit, arrival))))
    }
}

/// The client's address, as the server put it on the request.
fn grpc_peer(req: &GrpcRequest) -> Option<SocketAddr> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let ext = req.extensions();
    ext.get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| ext.get::<TlsConnectInfo<TcpConnectInfo>>().and_then(|i| i.get_ref().remote_addr()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_body_that_stalls_fails_at_its_deadline_and_one_that_ended_is_not_timed() {
        type Frames = tokio::sync::mpsc::Sender<Result<Frame<bytes::Bytes>, tonic::Status>>;
        let body = |tx_rx: (Frames, _)| {
            let (tx, rx) = tx_rx;
            (tx, http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        };
        let limit = Duration::from_millis(200);
        let (tx, stalled) = body(tokio::sync::mpsc::channel(1));
        let mut timed = TimedBody::new(stalled, limit, None);
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"part")))).await.unwrap();
        assert!(timed.frame().await.unwrap().is_ok());
        let err = timed.frame().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::DeadlineExceeded);
        assert!(err.message().contains("--request-timeout-ms 200"), "{err:?}");

        let (tx, whole) = body(tokio::sync::mpsc::channel(1));
        let mut timed = TimedBody::new(whole, limit, None);
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"x")))).await.unwrap();
        drop(tx);
        assert_eq!(timed.frame().await.unwrap().unwrap().into_data().unwrap(), "x");
        assert!(timed.frame().await.is_none());
        assert!(timed.deadline.is_none(), "after its end, nothing is timed");
    }

    #[tokio::test]
    async fn a_reader_waiting_for_bytes_holds_a_place_until_they_come_and_is_refused_past_the_bound() {
        use super::super::admit::PortBounds;
        let guard = PortGuard::new(
            "client",
            PortBounds {
                max_connections: 10,
                max_connections_per_ip: 10,
                max_handshakes: 10,
                max_handshakes_per_ip: 10,
                max_pending_requests: 10,
                max_pending_requests_per_ip: 1,
                first_byte_timeout: Duration::from_secs(1),
                handshake_timeout: Duration::from_secs(1),
            },
        );
        let arrival = Arrival { guard: guard.clone(), peer: "10.0.0.1:5000".parse().unwrap() };
        let channel = || {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<bytes::Bytes>, tonic::Status>>(1);
            (tx, http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        };
        let (tx, first) = channel();
        let mut first = TimedBody::new(first, Duration::from_secs(30), Some(arrival.clone()));
        // Bytes already there: no place taken.
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"x")))).await.unwrap();
        assert!(first.frame().await.unwrap().is_ok());
        assert_eq!(guard.stats().pending_requests, 0);
        // Nothing there: past the grace the waiting reader holds the address's one place.
        assert!(tokio::time::timeout(ARRIVAL_GRACE * 2, first.frame()).await.is_err());
        assert_eq!(guard.stats().pending_requests, 1);
        let (_tx2, second) = channel();
        let mut second = TimedBody::new(second, Duration::from_secs(30), Some(arrival));
        let refused = second.frame().await.unwrap().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("--max-pending-requests-per-ip 1"), "{refused:?}");
        // The bytes come: the place is given back.
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"y")))).await.unwrap();
        assert!(first.frame().await.unwrap().is_ok());
        assert_eq!(guard.stats().pending_requests, 0);
    }
}

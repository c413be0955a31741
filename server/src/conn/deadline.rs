//! Requests on their way in. A call's body must be complete within `--request-timeout-ms`
//! of its start, or reading it fails and the call is answered with an error; until it is
//! complete the call holds a place of its port and source address
//! (`--max-pending-requests-per-ip`), refused at once past it. So a client that opens calls
//! and never finishes them cannot make the node hold their handlers and buffers (~6 KiB
//! each) beyond those bounds. Only the request's arrival is timed and counted, never the
//! handler: a lock wait, a membership change or a snapshot may take as long as they need.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::admit::{PortGuard, Refusal, Slot};

/// A request that was not complete in time.
#[derive(Debug, thiserror::Error)]
#[error("the request did not arrive within --request-timeout-ms {}", .0.as_millis())]
pub struct RequestTimeout(pub Duration);

impl From<RequestTimeout> for tonic::Status {
    fn from(e: RequestTimeout) -> tonic::Status {
        // Not CANCELLED: tonic reads a cancelled request body as one that ended.
        tonic::Status::deadline_exceeded(e.to_string())
    }
}

impl From<RequestTimeout> for axum::Error {
    fn from(e: RequestTimeout) -> axum::Error {
        axum::Error::new(e)
    }
}

/// A request body that fails once its deadline passes before its end, holding its place
/// among the port's requests still arriving until then.
pub struct TimedBody<B> {
    inner: B,
    /// None once the body ended: what the handler does afterwards is not timed.
    deadline: Option<Pin<Box<Sleep>>>,
    limit: Duration,
    arriving: Option<Slot>,
}

impl<B: Body> TimedBody<B> {
    pub fn new(inner: B, limit: Duration, arriving: Option<Slot>) -> TimedBody<B> {
        let deadline = (!inner.is_end_stream()).then(|| Box::pin(tokio::time::sleep(limit)));
        TimedBody { inner, deadline, limit, arriving }
    }

    fn arrived(&mut self) {
        self.deadline = None;
        self.arriving = None;
    }
}

/// Counts a request that is still arriving against `guard` (its port) and its source
/// address; `None` when its body is already complete or the address is unknown.
pub fn arriving<B: Body>(guard: &Arc<PortGuard>, body: &B, peer: Option<SocketAddr>) -> Result<Option<Slot>, String> {
    let Some(peer) = peer.filter(|_| !body.is_end_stream()) else { return Ok(None) };
    guard.begin_request(peer.ip()).map(Some).map_err(|why| {
        let b = &guard.bounds;
        match why {
            Refusal::AddressPendingFull => format!(
                "{} calls from {} have not sent their whole request yet (limit --max-pending-requests-per-ip {}); \
                 finish them first",
                b.max_pending_requests_per_ip,
                peer.ip(),
                b.max_pending_requests_per_ip
            ),
            _ => format!(
                "{} calls on this port have not sent their whole request yet (4 x --max-connections); try again",
                b.max_pending_requests
            ),
        }
    })
}

impl<B> Body for TimedBody<B>
where
    B: Body + Unpin,
    B::Error: From<RequestTimeout>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if frame.is_none() || this.inner.is_end_stream() {
                    this.arrived();
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let expired = this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                this.arrived();
                Poll::Ready(Some(Err(RequestTimeout(this.limit).into())))
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
    type Future = futures::future::Either<S::Future, std::future::Ready<Result<GrpcResponse, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: GrpcRequest) -> Self::Future {
        use futures::future::Either;
        let Some((limit, guard)) = &self.bound else { return Either::Left(self.inner.call(req)) };
        match arriving(guard, req.body(), grpc_peer(&req)) {
            Ok(slot) => {
                let limit = *limit;
                Either::Left(self.inner.call(req.map(|b| tonic::body::boxed(TimedBody::new(b, limit, slot)))))
            }
            Err(message) => {
                let mut refused = tonic::Status::resource_exhausted(message);
                refused.metadata_mut().insert(
                    caerus_proto::metadata::ERROR_KIND,
                    tonic::metadata::MetadataValue::from_static("RESOURCE_EXHAUSTED"),
                );
                Either::Right(std::future::ready(Ok(refused.into_http())))
            }
        }
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
}

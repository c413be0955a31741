//! The time a request has to arrive. A call's body must be complete within
//! `--request-timeout-ms` of its start, or reading it fails and the call is answered with an
//! error: a client that opens calls and never finishes them cannot make the node hold their
//! handlers and buffers. Only the request's arrival is timed, never the handler: a lock
//! wait, a membership change or a snapshot may take as long as they need.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

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

/// A request body that fails once its deadline passes before its end.
pub struct TimedBody<B> {
    inner: B,
    /// None once the body ended: what the handler does afterwards is not timed.
    deadline: Option<Pin<Box<Sleep>>>,
    limit: Duration,
}

impl<B: Body> TimedBody<B> {
    pub fn new(inner: B, limit: Duration) -> TimedBody<B> {
        let deadline = (!inner.is_end_stream()).then(|| Box::pin(tokio::time::sleep(limit)));
        TimedBody { inner, deadline, limit }
    }
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
                    this.deadline = None;
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let expired = this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                this.deadline = None;
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

/// The tower layer that times every request body of a gRPC server (`None`: not timed).
#[derive(Clone, Copy, Debug)]
pub struct RequestDeadline(pub Option<Duration>);

impl<S> tower_layer::Layer<S> for RequestDeadline {
    type Service = Deadlined<S>;

    fn layer(&self, inner: S) -> Deadlined<S> {
        Deadlined { inner, limit: self.0 }
    }
}

#[derive(Clone, Debug)]
pub struct Deadlined<S> {
    inner: S,
    limit: Option<Duration>,
}

impl<S> tower_service::Service<http::Request<tonic::body::BoxBody>> for Deadlined<S>
where
    S: tower_service::Service<http::Request<tonic::body::BoxBody>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::BoxBody>) -> S::Future {
        match self.limit {
            Some(limit) => self.inner.call(req.map(|b| tonic::body::boxed(TimedBody::new(b, limit)))),
            None => self.inner.call(req),
        }
    }
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
        let mut timed = TimedBody::new(stalled, limit);
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"part")))).await.unwrap();
        assert!(timed.frame().await.unwrap().is_ok());
        let err = timed.frame().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::DeadlineExceeded);
        assert!(err.message().contains("--request-timeout-ms 200"), "{err:?}");

        let (tx, whole) = body(tokio::sync::mpsc::channel(1));
        let mut timed = TimedBody::new(whole, limit);
        tx.send(Ok(Frame::data(bytes::Bytes::from_static(b"x")))).await.unwrap();
        drop(tx);
        assert_eq!(timed.frame().await.unwrap().unwrap().into_data().unwrap(), "x");
        assert!(timed.frame().await.is_none());
        assert!(timed.deadline.is_none(), "after its end, nothing is timed");
    }
}

//! A server stream that follows the leader: opened through the router's attempts, and
//! opened again (with the whole retry budget) whenever it breaks — a leader killed,
//! leadership moved, a connection reset. The event watch and the key watch both ride on
//! it; each says how to open its stream from where it stands.

use std::future::Future;

use tonic::transport::Channel;
use tonic::{Response, Status, Streaming};
use tracing::debug;

use crate::error::Result;
use crate::lanes::StreamPlace;
use crate::router::{attempt_timed_out, went_silent, Attempts, Router};

/// The stream now open, the node it comes from and when it was opened.
pub(crate) struct Resuming<M> {
    rpc: &'static str,
    attached: Option<(String, Streaming<M>, tokio::time::Instant, StreamPlace)>,
}

impl<M> Resuming<M> {
    pub(crate) fn new(rpc: &'static str) -> Self {
        Resuming { rpc, attached: None }
    }

    /// Opens the stream on the leader, retrying within `attempts`; `open` makes the call
    /// on a node's channel. Returns the answer's metadata (where a watch starts, say).
    pub(crate) async fn attach<F, Fut>(
        &mut self,
        attempts: &mut Attempts<'_>,
        mut open: F,
    ) -> Result<tonic::metadata::MetadataMap>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Streaming<M>>, Status>>,
    {
        loop {
            let (uri, channel, place) = attempts.next_stream()?;
            let timeout = attempts.attempt_timeout();
            let opened_at = tokio::time::Instant::now();
            // Only opening the stream is bounded: it legitimately lives for hours.
            let status = match tokio::time::timeout(timeout, open(channel)).await {
                Ok(Ok(response)) => {
                    attempts.succeeded(&uri, response.metadata());
                    debug!(node = %uri, rpc = self.rpc, "stream attached");
                    let metadata = response.metadata().clone();
                    self.attached = Some((uri, response.into_inner(), opened_at, place));
                    return Ok(metadata);
                }
                Ok(Err(status)) => status,
                Err(_) => attempt_timed_out(&uri, timeout),
            };
            attempts.failed(status).await?;
        }
    }

    /// The next message, attaching again after a break. Each break gets the router's whole
    /// retry budget, counted from when the break was noticed (a stream that idled for an
    /// hour must not find its budget spent).
    pub(crate) async fn next_message<F, Fut>(&mut self, router: &Router, mut open: F) -> Result<M>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Streaming<M>>, Status>>,
    {
        let mut attempts: Option<Attempts<'_>> = None;
        loop {
            let Some((uri, messages, opened_at, _)) = self.attached.as_mut() else {
                let attempts = attempts.get_or_insert_with(|| router.attempts(self.rpc, router.default_options()));
                self.attach(attempts, &mut open).await?;
                continue;
            };
            let status = tokio::select! {
                message = messages.message() => match message {
                    Ok(Some(message)) => return Ok(message),
                    Ok(None) => Status::unavailable(format!("{} stream from {uri} ended", self.rpc)),
                    Err(status) => status,
                },
                () = router.silent_since(uri, *opened_at) => went_silent(uri),
            };
            let uri = uri.clone();
            self.attached = None;
            debug!(node = %uri, rpc = self.rpc, code = ?status.code(), message = status.message(), "stream broke");
            let attempts = attempts.get_or_insert_with(|| router.attempts(self.rpc, router.default_options()));
            attempts.adopt(&uri);
            attempts.failed(status).await?;
        }
    }
}

//! Connections to one node for the streams that may stay open for minutes (lock waits,
//! watches, lost streams). A node serves a bounded number of concurrent calls per connection
//! (`dls serve --max-streams-per-connection`: 200 by default, at least 100); a client past it would queue
//! its next calls, heartbeats included, behind waits that can last the whole acquire timeout,
//! and lose leases. So each such stream takes a place on a connection with room: the node's
//! first connection (shared with the short calls) up to [`STREAMS_PER_LANE`], then further
//! connections opened as they are needed and closed once their streams are gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use tonic::transport::Channel;

use crate::error::Result;

/// Long-lived streams per connection: well under the server's smallest bound (100), so the
/// short calls sharing the first connection always find room.
pub(crate) const STREAMS_PER_LANE: usize = 64;

struct Lane {
    channel: Channel,
    open: Arc<AtomicUsize>,
}

/// Every node's connections for streams, the first being the node's shared one.
#[derive(Default)]
pub(crate) struct Lanes(Mutex<HashMap<String, Vec<Lane>>>);

/// A stream's place on its connection, given back when the stream is dropped.
#[derive(Debug)]
pub(crate) struct StreamPlace(Arc<AtomicUsize>);

impl Drop for StreamPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl Lanes {
    /// A connection to `uri` with room for one more stream: `shared` (the node's connection
    /// for every call) while it has room, else another one (`open_another` dials it).
    pub(crate) fn place(
        &self,
        uri: &str,
        shared: Channel,
        open_another: impl FnOnce() -> Result<Channel>,
    ) -> Result<(Channel, StreamPlace)> {
        let mut lanes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let lanes = lanes.entry(uri.to_string()).or_insert_with(|| vec![Lane::new(shared)]);
        // Extra connections whose streams all ended are closed (dropping the channel).
        let mut first = true;
        lanes.retain(|l| std::mem::take(&mut first) || l.open.load(SeqCst) > 0);
        if let Some(lane) = lanes.iter().find(|l| l.open.load(SeqCst) < STREAMS_PER_LANE) {
            return Ok(lane.take());
        }
        let lane = Lane::new(open_another()?);
        let taken = lane.take();
        lanes.push(lane);
        Ok(taken)
    }
}

impl Lane {
    fn new(channel: Channel) -> Lane {
        Lane { channel, open: Arc::new(AtomicUsize::new(0)) }
    }

    fn take(&self) -> (Channel, StreamPlace) {
        self.open.fetch_add(1, SeqCst);
        (self.channel.clone(), StreamPlace(self.open.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel() -> Channel {
        tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy()
    }

    #[tokio::test]
    async fn streams_fill_the_shared_connection_then_open_others_and_close_them_when_empty() {
        let lanes = Lanes::default();
        let mut dialed = 0;
        let mut places = Vec::new();
        for _ in 0..STREAMS_PER_LANE {
            places.push(lanes.place("n1", channel(), || panic!("the shared connection has room")).unwrap().1);
        }
        for _ in 0..STREAMS_PER_LANE + 1 {
            let (_, place) = lanes
                .place("n1", channel(), || {
                    dialed += 1;
                    Ok(channel())
                })
                .unwrap();
            places.push(place);
        }
        assert_eq!(dialed, 2, "a second connection, then a third");
        assert_eq!(lanes.0.lock().unwrap()["n1"].len(), 3);
        // Every stream of the extra connections ends, and one of the shared connection's.
        places.truncate(STREAMS_PER_LANE - 1);
        let _again = lanes.place("n1", channel(), || panic!("the shared connection has room again")).unwrap();
        assert_eq!(lanes.0.lock().unwrap()["n1"].len(), 1, "the extra connections are closed once idle");
    }
}

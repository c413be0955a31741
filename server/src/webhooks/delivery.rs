//! Delivery: while this node leads, one courier per webhook reads the event log through
//! the engine, POSTs the events it wants in order, and records its cursor through raft.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand::Rng;
use tokio::task::{JoinHandle, JoinSet};

use super::config::Webhook;
use super::payload::{payload, signature};
use crate::engine::Engine;
use crate::locks::events::CursorExpired;
use crate::locks::Event;

/// Events read from the table per lock of the state.
const READ_BATCH: usize = 50;
/// The cursor is recorded through raft after this many events ...
const RECORD_EVERY_EVENTS: u64 = 50;
/// ... or this long after the last record, whichever comes first, and when the backlog
/// is drained: few raft writes under load, a short resend window after a failover.
const RECORD_EVERY: Duration = Duration::from_millis(100);
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// One POST, connecting included; a hung endpoint counts as a failure and is retried.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Retry of an unrecorded cursor while no new events arrive.
const RECORD_RETRY: Duration = Duration::from_secs(1);

/// hyper-util's client with rustls rather than reqwest: hyper and hyper-util are already
/// compiled for tonic, and one POST with a few headers needs none of reqwest's extras.
type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

fn http_client() -> HttpClient {
    let connector =
        hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
    Client::builder(TokioExecutor::new()).build(connector)
}

fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// One attempt to deliver `e`; Ok when the endpoint answered 2xx.
async fn post(client: &HttpClient, hook: &Webhook, e: &Event) -> Result<(), String> {
    let body = serde_json::to_vec(&payload(e)).map_err(|err| format!("cannot encode event {}: {err}", e.seq))?;
    let timestamp = unix_seconds();
    let request = http::Request::post(hook.uri.clone().expect("validated at load"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, concat!("caerus-dls/", env!("CARGO_PKG_VERSION")))
        .header("X-Caerus-Event-Id", e.seq)
        .header("X-Caerus-Timestamp", timestamp)
        .header("X-Caerus-Signature", signature(&hook.secret, timestamp, &body))
        .body(Full::new(Bytes::from(body)))
        .map_err(|err| format!("cannot build the request: {err}"))?;
    match tokio::time::timeout(REQUEST_TIMEOUT, client.request(request)).await {
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
        Ok(Err(err)) => Err(format!("request failed: {err}")),
        Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
        Ok(Ok(resp)) => Err(format!("answered {}", resp.status())),
    }
}

/// Sleep before retry number `attempt` (1-based): doubling from 100 ms to 30 s, with
/// jitter so many nodes' retries against one recovering endpoint spread out.
fn retry_delay(attempt: u32) -> Duration {
    let base = FIRST_RETRY.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(MAX_RETRY);
    rand::thread_rng().gen_range(base / 2..=base)
}

/// Delivers webhooks while this node leads.
pub struct Dispatcher {
    task: JoinHandle<()>,
}

impl Dispatcher {
    /// Starts delivery; with no webhooks there is nothing to run.
    pub fn start(engine: Arc<Engine>, hooks: Vec<Webhook>) -> Option<Dispatcher> {
        if hooks.is_empty() {
            return None;
        }
        let task = tokio::spawn(supervise(engine, Arc::new(hooks), http_client()));
        Some(Dispatcher { task })
    }

    /// Stops delivery; an event being sent may be sent again by the next leader.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Runs one courier per webhook during each spell of leadership.
async fn supervise(engine: Arc<Engine>, hooks: Arc<Vec<Webhook>>, client: HttpClient) {
    let mut leadership = engine.leadership();
    loop {
        if leadership.wait_for(|leading| *leading).await.is_err() {
            return;
        }
        tracing::info!(webhooks = hooks.len(), "leader: delivering webhooks");
        let mut couriers = JoinSet::new();
        for i in 0..hooks.len() {
            let courier = Courier::new(engine.clone(), hooks.clone(), i, client.clone());
            couriers.spawn(courier.run());
        }
        let gone = leadership.wait_for(|leading| !*leading).await.is_err();
        couriers.shutdown().await;
        if gone {
            return;
        }
        tracing::info!("not leader any more: webhook delivery stopped (the new leader resumes it)");
    }
}

/// Delivers one webhook's events in order.
struct Courier {
    engine: Arc<Engine>,
    hooks: Arc<Vec<Webhook>>,
    index: usize,
    client: HttpClient,
    /// Last event delivered or skipped.
    done: u64,
    /// Last event recorded through raft, and when.
    recorded: u64,
    recorded_at: Instant,
}

impl Courier {
    fn new(engine: Arc<Engine>, hooks: Arc<Vec<Webhook>>, index: usize, client: HttpClient) -> Courier {
        Courier { engine, hooks, index, client, done: 0, recorded: 0, recorded_at: Instant::now() }
    }

    fn hook(&self) -> &Webhook {
        &self.hooks[self.index]
    }

    async fn run(mut self) {
        self.done = self.resume_point().await;
        self.recorded = self.done;
        tracing::info!(webhook = %self.hook().name, after = self.done, "webhook delivery resumes");
        let mut appended = self.engine.events_appended();
        loop {
            // Marked seen before reading, so an append right after the read still wakes us.
            appended.borrow_and_update();
            match self.engine.events_since(self.done + 1, READ_BATCH) {
                Err(CursorExpired { oldest }) => self.fell_behind(oldest),
                Ok(events) if events.is_empty() => {
                    self.record().await;
                    let retry = self.recorded < self.done;
                    tokio::select! {
                        changed = appended.changed() => if changed.is_err() { return },
                        _ = tokio::time::sleep(RECORD_RETRY), if retry => {}
                    }
                }
                Ok(events) => {
                    for e in events {
                        self.handle(&e).await;
                    }
                }
            }
        }
    }

    /// The replicated cursor, including everything the previous leader recorded (an older
    /// value would only mean resending).
    async fn resume_point(&self) -> u64 {
        let mut attempt = 0;
        loop {
            match self.engine.webhook_cursor(&self.hook().name).await {
                Ok(cursor) => return cursor,
                Err(e) => {
                    attempt += 1;
                    tracing::debug!(webhook = %self.hook().name, "cannot confirm leadership yet, retrying: {e}");
                    tokio::time::sleep(retry_delay(attempt.min(4))).await;
                }
            }
        }
    }

    fn fell_behind(&mut self, oldest: u64) {
        let lost = oldest - 1 - self.done;
        tracing::warn!(
            webhook = %self.hook().name,
            lost,
            resumed_at = oldest,
            "webhook fell behind the retained event log; {lost} events were dropped before delivery"
        );
        self.engine.metrics().webhook(&self.hook().name, |s| {
            s.cursor_expired += 1;
            s.lost += lost;
        });
        self.done = oldest - 1;
    }

    async fn handle(&mut self, e: &Event) {
        if self.hook().wants(e) {
            self.deliver(e).await;
            self.engine.metrics().webhook(&self.hook().name, |s| s.delivered += 1);
        } else {
            self.engine.metrics().webhook(&self.hook().name, |s| s.skipped += 1);
        }
        self.done = e.seq;
        self.engine.metrics().webhook(&self.hook().name, |s| s.last_sequence = e.seq);
        let due = self.done - self.recorded >= RECORD_EVERY_EVENTS || self.recorded_at.elapsed() >= RECORD_EVERY;
        if due {
            self.record().await;
        }
    }

    /// Sends `e` until the endpoint accepts it.
    async fn deliver(&mut self, e: &Event) {
        let name = self.hook().name.clone();
        let mut failures = 0;
        while let Err(why) = post(&self.client, self.hook(), e).await {
            failures += 1;
            let delay = retry_delay(failures);
            tracing::warn!(webhook = %name, event = e.seq, failures, "webhook delivery failed ({why}); retrying in {delay:?}");
            self.engine.metrics().webhook(&name, |s| s.failed += 1);
            // What was delivered before the stuck event should survive a failover.
            self.record().await;
            tokio::time::sleep(delay).await;
        }
        if failures > 0 {
            tracing::info!(webhook = %name, event = e.seq, failures, "webhook delivered after retries");
        } else {
            tracing::debug!(webhook = %name, event = e.seq, "webhook delivered");
        }
    }

    /// Records progress through raft; a failure is retried with the next record.
    async fn record(&mut self) {
        if self.done <= self.recorded {
            return;
        }
        match self.engine.webhook_delivered(&self.hook().name, self.done).await {
            Ok(_) => {
                self.recorded = self.done;
                self.recorded_at = Instant::now();
            }
            Err(e) => tracing::warn!(webhook = %self.hook().name, "webhook cursor not recorded, will retry: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_100ms_to_30s_with_jitter() {
        for _ in 0..20 {
            let first = retry_delay(1);
            assert!(first >= Duration::from_millis(50) && first <= FIRST_RETRY);
            let later = retry_delay(5);
            assert!(later >= Duration::from_millis(800) && later <= Duration::from_millis(1600));
            let capped = retry_delay(40);
            assert!(capped >= MAX_RETRY / 2 && capped <= MAX_RETRY);
        }
    }
}

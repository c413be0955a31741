//! Group commit of proposals.
//!
//! openraft 0.9 runs its storage commands after every API message, so each
//! `client_write` became its own log append, its own fsync and its own replication
//! round: under load the leader would do one fsync per lock operation. The proposer
//! queues commands instead and writes whatever
//! piled up while earlier writes were in flight as one `Command::Batch` entry. A lone
//! request still goes out at once; a busy leader shares each fsync and each replication
//! round among many requests. Each command keeps its own outcome; a batch commits or
//! fails as a whole, and every command in it is retry-safe by its request id.
//!
//! The queue of client proposals is bounded: past `max_queued` a new client proposal is
//! shed at once (the caller answers UNAVAILABLE with a retry hint) instead of waiting
//! behind work the cluster cannot commit in time, which would only turn into client
//! timeouts and memory. One API key may fill only its share of it (`max_queued_per_key`):
//! past that its own proposals are shed the same way, so one key's flood cannot shed
//! another key's work. Shed, not refused for good: the queue drains in milliseconds, and a
//! client that comes back after the hint with the same request id is served. The leader's
//! own proposals (expiries, wait cancels, webhook cursors) have their own queue, are never
//! shed and go first into every entry: a flood of someone else's requests must not delay
//! the expiry or the cleanup it triggers.
//!
//! An acquire that will wait in a queue anyway (its key is held) may be *parked*
//! ([`Timing::WithNextWrite`]): it goes into the next entry written for anything else, or
//! after [`PARK_LIMIT`]. On a hot key the last holder's next acquire and the commit that
//! hands the key on are answers to the same apply and reach the leader together; written
//! as two entries, each a replication round (openraft 0.9 sends a follower one
//! AppendEntries at a time), a hand-over took two rounds. Parked, the acquire rides with
//! the commit. Nothing it could be granted is delayed: its key is released only by a
//! write, which takes it along.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::log_clock::LogClock;
use super::types::Raft;
use crate::limits::Tenant;
use crate::locks::{Command, LogCommand, Outcome};

/// Batches written concurrently. Two keep the disk busy while the previous batch travels
/// to the followers, without giving up batching: more in flight means smaller entries and
/// more fsyncs per command, which costs more throughput under load than it saves in
/// latency (the comparison is in docs/bench.md).
const MAX_IN_FLIGHT: usize = 2;
/// Upper bound on commands per entry, to keep entries (and apply pauses) small.
const MAX_BATCH: usize = 512;

/// The longest a parked proposal waits for another write to ride with.
pub const PARK_LIMIT: Duration = Duration::from_millis(2);

/// Shortest and longest retry hint given to shed proposals.
const MIN_RETRY_AFTER: Duration = Duration::from_millis(20);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(2);

/// Who asks, which decides whether the proposal may be shed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The leader's own bookkeeping: never shed, written first.
    Leader,
    /// A client's new work (begin, acquire): shed once `max_queued` proposals wait.
    NewWork,
    /// A client giving something up (release, end, abort): shed only at twice the bound,
    /// so that under a flood of new work clients can still let go of what they hold.
    Release,
}

impl Origin {
    /// Expiries, wait cancels and webhook cursors are only ever proposed by the leader
    /// itself; the API builds every other command from a client's request.
    pub fn of(cmd: &Command) -> Origin {
        match cmd {
            Command::Expire { .. }
            | Command::EndOverdue { .. }
            | Command::EndLockDelay { .. }
            | Command::CancelWait { .. }
            | Command::ExpireApiKeys { .. }
            | Command::WebhookDelivered { .. }
            | Command::SetFeatureLevel { .. } => Origin::Leader,
            // An operator's rule is shed like a release: it must get through a flood too, and
            // so is a run's finish (it ends the run's record).
            Command::Release { .. }
            | Command::FinishSlot { .. }
            | Command::Downgrade { .. }
            | Command::End { .. }
            | Command::Abort { .. }
            | Command::SetLockDelay { .. }
            | Command::CreateApiKey { .. }
            | Command::RevokeApiKey { .. }
            | Command::RotateApiKey { .. } => Origin::Release,
            Command::Begin { .. }
            | Command::Acquire { .. }
            | Command::AcquireAll { .. }
            | Command::AcquirePermit { .. }
            | Command::BeginAcquire { .. }
            | Command::BeginWith { .. }
            | Command::ClaimSlot { .. }
            | Command::Batch(_) => Origin::NewWork,
            Command::Scoped { cmd, .. } => Origin::of(cmd),
        }
    }
}

/// When a proposal goes into an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// In the next entry.
    Now,
    /// Parked: with the next entry written for another proposal, or after [`PARK_LIMIT`].
    /// Only for a client's acquire that the table would queue now.
    WithNextWrite,
}

/// Why a proposal was not committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// This node is not (or no longer) the leader.
    NotLeader,
    /// The queue of client proposals is full; nothing was proposed. Retry after the hint.
    Overloaded { queued: usize, limit: usize, retry_after: Duration },
    /// The API key has its share of the queue waiting already; nothing was proposed. Retry
    /// after the hint.
    OverShare { key: String, queued: usize, share: usize, limit: usize, retry_after: Duration },
    /// Not committed within the deadline; it may still commit later.
    TimedOut(Duration),
    /// Raft refused or failed the write.
    Failed(String),
}

/// Anything the proposer keeps until the command is applied or has failed (a limits
/// admission, so the caller hanging up cannot end it early).
pub type Hold = Box<dyn Send>;

struct Pending {
    cmd: Command,
    reply: oneshot::Sender<Result<Outcome, WriteError>>,
    hold: Option<Hold>,
    /// A client proposal's place in the queue, given back when it goes into an entry.
    place: Option<Place>,
}

/// Client proposals waiting for a write: in all, and by API key.
#[derive(Default)]
struct Waiting {
    total: AtomicUsize,
    by_key: Mutex<HashMap<String, usize>>,
}

impl Waiting {
    fn by_key(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.by_key.lock().expect("queue shares lock")
    }
}

/// One client proposal's place in the queue (and in its key's share); given back on drop.
struct Place {
    waiting: Arc<Waiting>,
    key: Option<String>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.waiting.total.fetch_sub(1, Relaxed);
        if let Some(key) = &self.key {
            let mut by_key = self.waiting.by_key();
            if let Some(n) = by_key.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    by_key.remove(key);
                }
            }
        }
    }
}

/// Counters for `/metrics`: commands per entry = `commands / entries`.
#[derive(Default, Debug)]
pub struct ProposerStats {
    /// Commands proposed by this node.
    pub commands: AtomicU64,
    /// Raft entries they were written as.
    pub entries: AtomicU64,
    /// Client proposals shed because the queue was full.
    pub shed: AtomicU64,
    /// Proposals parked to ride with the next write (see [`Timing`]).
    pub parked: AtomicU64,
    /// Moving average of how long one entry takes to commit, in microseconds: with the
    /// queue length it estimates when a shed client should come back.
    write_micros: AtomicU64,
}

/// The two queues: the leader's own proposals and the clients' (counted, bounded; the
/// clients' parked proposals, on a channel of their own, are counted with them). A client
/// proposal counts until it is taken into an entry.
struct Queues {
    leader: mpsc::UnboundedReceiver<Pending>,
    clients: mpsc::UnboundedReceiver<Pending>,
}

/// A proposal taken into an entry: its place in the queue is given back.
fn taken(mut p: Pending) -> Pending {
    p.place = None;
    p
}

impl Queues {
    /// The next proposal, the leader's first; `None` once the proposer is gone.
    async fn next(&mut self) -> Option<Pending> {
        tokio::select! {
            biased;
            Some(p) = self.leader.recv() => Some(p),
            Some(p) = self.clients.recv() => Some(taken(p)),
            else => None,
        }
    }

    fn try_next(&mut self) -> Option<Pending> {
        if let Ok(p) = self.leader.try_recv() {
            return Some(p);
        }
        self.clients.try_recv().ok().map(taken)
    }
}

/// Hands commands to the batching task.
pub struct Proposer {
    leader: mpsc::UnboundedSender<Pending>,
    clients: mpsc::UnboundedSender<Pending>,
    parked: mpsc::UnboundedSender<Pending>,
    waiting: Arc<Waiting>,
    max_queued: usize,
    /// Of `max_queued`, how many one API key may have waiting.
    max_queued_per_key: usize,
    timeout: Duration,
    pub stats: Arc<ProposerStats>,
}

impl Proposer {
    /// Starts the batching task; it stops when the proposer is dropped. At most
    /// `max_queued` client proposals wait for a write, `max_queued_per_key` of one API key
    /// (see [`Origin`]). Entries are stamped with `clock`'s time.
    pub fn start(
        raft: Raft,
        timeout: Duration,
        max_queued: usize,
        max_queued_per_key: usize,
        clock: Arc<LogClock>,
    ) -> Proposer {
        let (leader, leader_rx) = mpsc::unbounded_channel();
        let (clients, clients_rx) = mpsc::unbounded_channel();
        let (parked, parked_rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ProposerStats::default());
        let queues = Queues { leader: leader_rx, clients: clients_rx };
        tokio::spawn(run(raft, queues, parked_rx, timeout, stats.clone(), clock));
        let waiting = Arc::default();
        Proposer { leader, clients, parked, waiting, max_queued, max_queued_per_key, timeout, stats }
    }

    /// Client proposals waiting for a write now.
    pub fn queued(&self) -> usize {
        self.waiting.total.load(Relaxed)
    }

    /// Takes a place in the client queue for `tenant`, or says when to come back.
    fn enqueue(&self, origin: Origin, tenant: &Tenant) -> Result<Option<Place>, WriteError> {
        // Releases get twice the room: under a flood of new work clients can still let go.
        let (limit, share) = match origin {
            Origin::Leader => return Ok(None),
            Origin::NewWork => (self.max_queued, self.max_queued_per_key),
            Origin::Release => (self.max_queued.saturating_mul(2), self.max_queued_per_key.saturating_mul(2)),
        };
        let shed = |e: WriteError| {
            self.stats.shed.fetch_add(1, Relaxed);
            Err(e)
        };
        // The key's share and the queue are checked and taken under the key's lock, so
        // concurrent callers of one key cannot all pass at its share.
        let mut by_key = match tenant {
            Tenant::Key(_) => Some(self.waiting.by_key()),
            Tenant::Open | Tenant::Unknown => None,
        };
        if let (Some(by_key), Tenant::Key(key)) = (&by_key, tenant) {
            let queued = by_key.get(key).copied().unwrap_or(0);
            if queued >= share {
                let (key, limit, retry_after) = (key.clone(), self.max_queued, self.retry_after(self.queued()));
                return shed(WriteError::OverShare { key, queued, share: self.max_queued_per_key, limit, retry_after });
            }
        }
        // Checked and taken in one step: concurrent callers cannot all pass at the bound.
        if let Err(queued) = self.waiting.total.fetch_update(Relaxed, Relaxed, |q| (q < limit).then_some(q + 1)) {
            let retry_after = self.retry_after(queued);
            return shed(WriteError::Overloaded { queued, limit: self.max_queued, retry_after });
        }
        let key = match (&mut by_key, tenant) {
            (Some(by_key), Tenant::Key(key)) => {
                *by_key.entry(key.clone()).or_default() += 1;
                Some(key.clone())
            }
            _ => None,
        };
        Ok(Some(Place { waiting: self.waiting.clone(), key }))
    }

    /// About when the queue ahead will have drained: entries of up to `MAX_BATCH`
    /// commands, `MAX_IN_FLIGHT` at a time, each taking the recent average write time.
    fn retry_after(&self, queued: usize) -> Duration {
        let per_entry = Duration::from_micros(self.stats.write_micros.load(Relaxed));
        let rounds = (queued / (MAX_BATCH * MAX_IN_FLIGHT)) as u32 + 1;
        per_entry.saturating_mul(rounds).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
    }

    /// Proposes one command of `tenant` and waits for its outcome once applied on this
    /// node; `hold` is dropped only after that (or once the command failed or was shed).
    pub async fn propose(
        &self,
        cmd: Command,
        hold: Option<Hold>,
        timing: Timing,
        tenant: &Tenant,
    ) -> Result<Outcome, WriteError> {
        self.propose_as(Origin::of(&cmd), cmd, hold, timing, tenant).await
    }

    /// [`Proposer::propose`] shed as `origin`: a command the leader proposes on its own (a
    /// wait's cancel) is shed like a client's when a client asks for it.
    pub async fn propose_as(
        &self,
        origin: Origin,
        cmd: Command,
        hold: Option<Hold>,
        timing: Timing,
        tenant: &Tenant,
    ) -> Result<Outcome, WriteError> {
        let (reply, answer) = oneshot::channel();
        let place = self.enqueue(origin, tenant)?;
        let pending = Pending { cmd, reply, hold, place };
        // A proposal that cannot be sent gives its place back as it is dropped.
        let sent = if origin == Origin::Leader {
            self.leader.send(pending)
        } else {
            let queue = match timing {
                Timing::Now => &self.clients,
                Timing::WithNextWrite => {
                    self.stats.parked.fetch_add(1, Relaxed);
                    &self.parked
                }
            };
            queue.send(pending)
        };
        sent.map_err(|_| WriteError::Failed("the node is shutting down".into()))?;
        // The write itself times out too; this also bounds the wait for a free slot.
        match tokio::time::timeout(self.timeout * 2, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(WriteError::Failed("the proposal was dropped".into())),
            Err(_) => Err(WriteError::TimedOut(self.timeout * 2)),
        }
    }
}

async fn run(
    raft: Raft,
    mut queues: Queues,
    mut parked_rx: mpsc::UnboundedReceiver<Pending>,
    timeout: Duration,
    stats: Arc<ProposerStats>,
    clock: Arc<LogClock>,
) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // Parked proposals taken off their channel, with when they arrived.
    let mut parked: VecDeque<(Instant, Pending)> = VecDeque::new();
    loop {
        let due = parked.front().map(|(at, _)| tokio::time::Instant::from_std(*at + PARK_LIMIT));
        // The next proposal to write now; `None` when the oldest parked one is due.
        let first = tokio::select! {
            biased;
            next = queues.next() => match next {
                Some(p) => Some(p),
                None => return,
            },
            p = parked_rx.recv() => {
                let Some(p) = p else { return };
                parked.push_back((Instant::now(), p));
                continue;
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => None,
        };
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        // Everything that arrived while waiting for a slot goes into this entry, the
        // parked proposals right after the one that opened it.
        let mut batch: Vec<Pending> = first.into_iter().collect();
        while let Ok(p) = parked_rx.try_recv() {
            parked.push_back((Instant::now(), p));
        }
        while batch.len() < MAX_BATCH {
            let Some((_, p)) = parked.pop_front() else { break };
            batch.push(taken(p));
        }
        while batch.len() < MAX_BATCH {
            match queues.try_next() {
                Some(p) => batch.push(p),
                None => break,
            }
        }
        stats.commands.fetch_add(batch.len() as u64, Relaxed);
        stats.entries.fetch_add(1, Relaxed);
        let (raft, stats, now_ms) = (raft.clone(), stats.clone(), clock.now_ms());
        tokio::spawn(async move {
            let started = Instant::now();
            write(&raft, batch, timeout, now_ms).await;
            let took = started.elapsed().as_micros() as u64;
            // An average over the last few entries: one slow fsync does not set the hint.
            let _ = stats.write_micros.fetch_update(Relaxed, Relaxed, |avg| Some((avg * 7 + took) / 8));
            drop(slot);
        });
    }
}

/// Writes one entry for the batch, stamped with the log's time `now_ms` (see
/// `log_clock`), and answers every command in it.
async fn write(raft: &Raft, batch: Vec<Pending>, timeout: Duration, now_ms: u64) {
    let (mut cmds, mut replies, mut holds) = (Vec::new(), Vec::new(), Vec::new());
    for p in batch {
        cmds.push(p.cmd);
        replies.push(p.reply);
        holds.push(p.hold);
    }
    let single = cmds.len() == 1;
    let cmd = if single { cmds.pop().expect("one command") } else { Command::Batch(cmds) };
    let entry = LogCommand { now_ms, cmd };
    let result = match tokio::time::timeout(timeout, raft.client_write(entry)).await {
        Err(_) => Err(WriteError::TimedOut(timeout)),
        Ok(Ok(resp)) => Ok(resp.data),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(WriteError::NotLeader),
        Ok(Err(e)) => Err(WriteError::Failed(e.to_string())),
    };
    // Applied (or failed): the table now counts what the commands asked for, so what they
    // held is given back before anyone hears the answer. Afterwards, a caller that read its
    // grant and at once asked again could be counted twice by the limits.
    drop(holds);
    match result {
        Ok(outcome) if single => {
            let _ = replies.into_iter().next().expect("one reply").send(Ok(outcome));
        }
        Ok(Outcome::Batch(outcomes)) if outcomes.len() == replies.len() => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Ok(other) => {
            let e = WriteError::Failed(format!("a batch of {} commands answered {other:?}", replies.len()));
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

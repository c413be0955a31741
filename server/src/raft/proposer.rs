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
//! timeouts and memory. The leader's own proposals (expiries, wait cancels, webhook
//! cursors) have their own queue, are never shed and go first into every entry: a flood
//! of someone else's requests must not delay the expiry or the cleanup it triggers.
//!
//! An acquire that will wait in a queue anyway (its key is held) may be *parked*
//! ([`Timing::WithNextWrite`]): it goes into the next entry written for anything else, or
//! after [`PARK_LIMIT`]. On a hot key the last holder's next acquire and the commit that
//! hands the key on are answers to the same apply and reach the leader together; written
//! as two entries, each a replication round (openraft 0.9 sends a follower one
//! AppendEntries at a time), a hand-over took two rounds. Parked, the acquire rides with
//! the commit. Nothing it could be granted is delayed: its key is released only by a
//! write, which takes it along.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::types::Raft;
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
            | Command::WebhookDelivered { .. } => Origin::Leader,
            // An operator's rule is shed like a release: it must get through a flood too.
            Command::Release { .. }
            | Command::Downgrade { .. }
            | Command::End { .. }
            | Command::Abort { .. }
            | Command::SetLockDelay { .. } => Origin::Release,
            Command::Begin { .. }
            | Command::Acquire { .. }
            | Command::AcquireAll { .. }
            | Command::AcquirePermit { .. }
            | Command::BeginAcquire { .. }
            | Command::BeginWith { .. }
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
/// clients' parked proposals, on a channel of their own, are counted with them).
struct Queues {
    leader: mpsc::UnboundedReceiver<Pending>,
    clients: mpsc::UnboundedReceiver<Pending>,
    /// Client proposals sent but not yet taken into an entry.
    queued: Arc<AtomicUsize>,
}

impl Queues {
    /// The next proposal, the leader's first; `None` once the proposer is gone.
    async fn next(&mut self) -> Option<Pending> {
        tokio::select! {
            biased;
            Some(p) = self.leader.recv() => Some(p),
            Some(p) = self.clients.recv() => {
                self.queued.fetch_sub(1, Relaxed);
                Some(p)
            }
            else => None,
        }
    }

    fn try_next(&mut self) -> Option<Pending> {
        if let Ok(p) = self.leader.try_recv() {
            return Some(p);
        }
        let p = self.clients.try_recv().ok()?;
        self.queued.fetch_sub(1, Relaxed);
        Some(p)
    }
}

/// Hands commands to the batching task.
pub struct Proposer {
    leader: mpsc::UnboundedSender<Pending>,
    clients: mpsc::UnboundedSender<Pending>,
    parked: mpsc::UnboundedSender<Pending>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    timeout: Duration,
    pub stats: Arc<ProposerStats>,
}

impl Proposer {
    /// Starts the batching task; it stops when the proposer is dropped. At most
    /// `max_queued` client proposals wait for a write (see [`Origin`]).
    pub fn start(raft: Raft, timeout: Duration, max_queued: usize) -> Proposer {
        let (leader, leader_rx) = mpsc::unbounded_channel();
        let (clients, clients_rx) = mpsc::unbounded_channel();
        let (parked, parked_rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(ProposerStats::default());
        let queues = Queues { leader: leader_rx, clients: clients_rx, queued: queued.clone() };
        tokio::spawn(run(raft, queues, parked_rx, timeout, stats.clone()));
        Proposer { leader, clients, parked, queued, max_queued, timeout, stats }
    }

    /// Client proposals waiting for a write now.
    pub fn queued(&self) -> usize {
        self.queued.load(Relaxed)
    }

    /// Takes a place in the client queue, or says when to come back.
    fn enqueue(&self, origin: Origin) -> Result<(), WriteError> {
        let limit = match origin {
            Origin::Leader => return Ok(()),
            Origin::NewWork => self.max_queued,
            Origin::Release => self.max_queued.saturating_mul(2),
        };
        // Checked and taken in one step: concurrent callers cannot all pass at the bound.
        match self.queued.fetch_update(Relaxed, Relaxed, |q| (q < limit).then_some(q + 1)) {
            Ok(_) => Ok(()),
            Err(queued) => {
                self.stats.shed.fetch_add(1, Relaxed);
                Err(WriteError::Overloaded { queued, limit: self.max_queued, retry_after: self.retry_after(queued) })
            }
        }
    }

    /// About when the queue ahead will have drained: entries of up to `MAX_BATCH`
    /// commands, `MAX_IN_FLIGHT` at a time, each taking the recent average write time.
    fn retry_after(&self, queued: usize) -> Duration {
        let per_entry = Duration::from_micros(self.stats.write_micros.load(Relaxed));
        let rounds = (queued / (MAX_BATCH * MAX_IN_FLIGHT)) as u32 + 1;
        per_entry.saturating_mul(rounds).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
    }

    /// Proposes one command and waits for its outcome once applied on this node; `hold`
    /// is dropped only after that (or once the command failed or was shed).
    pub async fn propose(&self, cmd: Command, hold: Option<Hold>, timing: Timing) -> Result<Outcome, WriteError> {
        self.propose_as(Origin::of(&cmd), cmd, hold, timing).await
    }

    /// [`Proposer::propose`] shed as `origin`: a command the leader proposes on its own (a
    /// wait's cancel) is shed like a client's when a client asks for it.
    pub async fn propose_as(
        &self,
        origin: Origin,
        cmd: Command,
        hold: Option<Hold>,
        timing: Timing,
    ) -> Result<Outcome, WriteError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending { cmd, reply, hold };
        let sent = if origin == Origin::Leader {
            self.leader.send(pending)
        } else {
            self.enqueue(origin)?;
            let queue = match timing {
                Timing::Now => &self.clients,
                Timing::WithNextWrite => {
                    self.stats.parked.fetch_add(1, Relaxed);
                    &self.parked
                }
            };
            queue.send(pending).inspect_err(|_| {
                self.queued.fetch_sub(1, Relaxed);
            })
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
            queues.queued.fetch_sub(1, Relaxed);
            batch.push(p);
        }
        while batch.len() < MAX_BATCH {
            match queues.try_next() {
                Some(p) => batch.push(p),
                None => break,
            }
        }
        stats.commands.fetch_add(batch.len() as u64, Relaxed);
        stats.entries.fetch_add(1, Relaxed);
        let (raft, stats) = (raft.clone(), stats.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            write(&raft, batch, timeout).await;
            let took = started.elapsed().as_micros() as u64;
            // An average over the last few entries: one slow fsync does not set the hint.
            let _ = stats.write_micros.fetch_update(Relaxed, Relaxed, |avg| Some((avg * 7 + took) / 8));
            drop(slot);
        });
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Writes one entry for the batch and answers every command in it.
async fn write(raft: &Raft, batch: Vec<Pending>, timeout: Duration) {
    let (mut cmds, mut replies, mut holds) = (Vec::new(), Vec::new(), Vec::new());
    for p in batch {
        cmds.push(p.cmd);
        replies.push(p.reply);
        holds.push(p.hold);
    }
    let single = cmds.len() == 1;
    let cmd = if single { cmds.pop().expect("one command") } else { Command::Batch(cmds) };
    let entry = LogCommand { now_ms: now_ms(), cmd };
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

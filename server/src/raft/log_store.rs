//! The raft log (segment files, see [`super::wal`]) and the vote, the commit index and the
//! purge point (`raft-meta`, see [`super::meta`]).
//!
//! An entry counts as durable only after an `fdatasync` that covers it: a crash must not
//! take an acknowledged grant with it. Appends are written at once (readable right away).
//! - On the leader they are reported done right away and a `raft-log-sync` thread syncs
//!   whatever was queued meanwhile with one `fdatasync` (group commit; `LogIoStats`
//!   counts how many), in parallel with replication; [`Durable`] keeps anyone from acting
//!   on an entry before it is on the leader's disk too (see that module for why).
//! - On a follower the append syncs before it returns: the leader sends one
//!   AppendEntries at a time, so there is nothing to group, and the thread hand-offs
//!   would sit on every write's critical path.
//!
//! Each sync round then records how far the log is on disk (the watermark) in `raft-meta`,
//! and only after that does anyone act on the entries it covers. Recovery checks the log
//! against it: bytes before the watermark were acknowledged, so damage there is never
//! trimmed as a torn tail (see `wal.rs`). That costs a second, small `fdatasync` per round:
//! without something written durably after the log's own sync, a damaged last record and a
//! record a crash cut short look the same.
//!
//! The vote and the purge point are written to `raft-meta` before they are reported done;
//! the commit index rides along with the next sync round (it is a hint: raft finds it again).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, OptionalSend, RaftLogReader};

use super::durable::Durable;
use super::meta::{MetaFile, RaftMeta, Watermark};
use super::sled_migration;
use super::store_error::{blocking, chain, StoreError};
use super::types::{codec, Entry, LogId, NodeId, StorageError, TypeConfig, Vote};
use super::wal::{RecordRef, Recovery, Wal};
use crate::exposition::Histogram;
use crate::locks::feature_level::BASE_LEVEL;
use crate::versions::DataLevel;

/// The log's directory inside the data directory.
pub const LOG_DIR: &str = "raft-log";

/// Upper bounds (seconds) of the fsync histogram: from a battery-backed cache (tens of
/// microseconds) to a disk in trouble (seconds, when elections start to fail).
pub const FSYNC_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

/// Counters of the log's disk work, for `/metrics` and the benchmark's entries-per-fsync
/// figure.
#[derive(Debug)]
pub struct LogIoStats {
    /// Sync rounds of appended entries (the log's fdatasync, then the watermark's).
    pub append_flushes: AtomicU64,
    /// Entries appended.
    pub entries_appended: AtomicU64,
    /// Time spent in those rounds, in microseconds.
    pub flush_micros: AtomicU64,
    /// Each round's duration.
    pub flush_seconds: Histogram,
}

impl Default for LogIoStats {
    fn default() -> Self {
        LogIoStats {
            append_flushes: 0.into(),
            entries_appended: 0.into(),
            flush_micros: 0.into(),
            flush_seconds: Histogram::new(&FSYNC_BUCKETS),
        }
    }
}

/// What a node does when recovery finds acknowledged entries damaged or missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDamage {
    /// Refuse to start (a single node: nobody else holds the entries).
    Refuse,
    /// Cut the log there, record what this node owes, and fetch it from a leader before
    /// voting again (protocol-aware recovery; see `node.rs`).
    Fetch,
}

/// Told the outcome of the next sync; `None` when only the [`Durable`] mark waits (the
/// leader's own appends).
type Waiter = Option<Box<dyn FnOnce(Result<(), StoreError>) + Send>>;

/// The files and what the sync rounds share.
struct Disk {
    wal: Mutex<Wal>,
    meta: Mutex<MetaFile>,
    /// The newest commit raft reported; the first sync round that covers it stores it.
    latest_commit: Mutex<Option<LogId>>,
    stats: Arc<LogIoStats>,
    durable: Arc<Durable>,
    /// Held for the whole of a sync round (see [`Disk::sync_now`]).
    round: Mutex<()>,
}

#[derive(Clone)]
pub struct LogStore {
    disk: Arc<Disk>,
    /// Requests to the sync thread; it stops when the last `LogStore` clone is dropped.
    sync: mpsc::Sender<Waiter>,
    /// The commit index raft last reported, for status and metrics.
    committed: Arc<AtomicU64>,
    id: NodeId,
    /// The last vote saved is this node's own committed vote: it is the leader, and every
    /// append is its own.
    leading: Arc<AtomicBool>,
    /// The data directory's feature level: an entry above what this node reads is refused,
    /// a higher one recorded before it is appended (see `versions::data_level`).
    data_level: Option<Arc<DataLevel>>,
}

/// The sync thread is gone (it stops only when the node shuts down or it panicked).
fn sync_stopped() -> StorageError {
    StoreError::SyncStopped.write_logs()
}

impl Disk {
    /// One `fdatasync` round for everything written so far, the watermark recorded, then
    /// the durable mark. Rounds run one at a time (`round`): a follower's append and the
    /// sync thread may both sync, and a round that finds the files already taken by another
    /// still in progress must wait for it, or it would report entries durable that are not
    /// on disk yet.
    ///
    /// After one failed sync every later one fails too (fsyncgate): the kernel may have
    /// dropped the pages it could not write and marked them clean, so a later `fdatasync`
    /// that succeeds says nothing about them.
    fn sync_now(&self) -> Result<(), StoreError> {
        let _round = self.round.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.durable.failed() {
            return Err(StoreError::SyncFailedBefore);
        }
        let job = self.wal.lock().expect("wal lock").sync_job();
        let (epoch, next) = job.covers;
        let result = if job.is_empty() {
            Ok(())
        } else {
            let started = std::time::Instant::now();
            let result = job.run().and_then(|()| self.record(job.watermark()));
            self.stats.append_flushes.fetch_add(1, Ordering::Relaxed);
            let took = started.elapsed();
            self.stats.flush_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            self.stats.flush_seconds.observe(took);
            result
        };
        match &result {
            Ok(()) => {
                // Under the lock, so that a truncation cannot slip in between.
                let mut wal = self.wal.lock().expect("wal lock");
                wal.synced(job.upto);
                if wal.epoch() == epoch {
                    self.durable.advance(next);
                }
            }
            Err(e) => {
                tracing::error!("cannot sync the raft log: {}", chain(e));
                self.durable.fail();
            }
        }
        result
    }

    /// Stores the watermark `w`, and the newest commit index if the log on disk holds it.
    fn record(&self, w: Watermark) -> Result<(), StoreError> {
        let commit = *self.latest_commit.lock().expect("commit lock");
        let mut meta = self.meta.lock().expect("meta lock");
        let mut m = meta.get().clone();
        m.durable = Some(w);
        if let Some(c) = commit.filter(|c| c.index < w.next_index) {
            m.committed = Some(c);
        }
        meta.write(m)
    }

    /// Writes a change of the metadata (a vote to both copies).
    fn change_meta(&self, both: bool, change: impl FnOnce(&mut RaftMeta)) -> Result<(), StoreError> {
        let mut meta = self.meta.lock().expect("meta lock");
        let mut m = meta.get().clone();
        change(&mut m);
        if both {
            meta.write_both(m)
        } else {
            meta.write(m)
        }
    }

    fn meta(&self) -> RaftMeta {
        self.meta.lock().expect("meta lock").get().clone()
    }
}

/// The sync thread: one sync round for everything queued, then every waiter in order,
/// then zeros ahead of the write position.
fn run_sync(disk: Arc<Disk>, rx: mpsc::Receiver<Waiter>) {
    while let Ok(first) = rx.recv() {
        let mut waiters = vec![first];
        waiters.extend(rx.try_iter());
        // Every waiter is told the same failure, cause and all.
        let result = disk.sync_now().map_err(Arc::new);
        for waiter in waiters.into_iter().flatten() {
            waiter(result.clone().map_err(StoreError::Shared));
        }
        let zeroed = disk.wal.lock().expect("wal lock").zero_ahead();
        let synced =
            zeroed.and_then(|f| f.map_or(Ok(()), |(path, f)| f.sync_data().map_err(StoreError::io("sync", &path))));
        if let Err(e) = synced {
            tracing::warn!("cannot preallocate the raft log: {}", chain(&e));
        }
    }
}

impl LogStore {
    /// Opens node `id`'s log in `<data_dir>/raft-log` and its metadata in
    /// `<data_dir>/raft-meta` (a data directory of v0.1.0 is migrated from sled first),
    /// checks them against each other, and records where the log now ends. Acknowledged
    /// entries found damaged or missing refuse the start, or with [`OnDamage::Fetch`] cut
    /// the log there and leave the node owing them (see [`LogStore::owed`]).
    pub fn open(data_dir: &Path, id: NodeId, on_damage: OnDamage) -> Result<Self, StoreError> {
        let log_dir = data_dir.join(LOG_DIR);
        let mut meta = match MetaFile::open(data_dir).map_err(|e| refusal(e, id))? {
            Some(m) => m,
            None => sled_migration::migrate_or_create(data_dir, &log_dir).map_err(|e| refusal(e, id))?,
        };
        sled_migration::set_aside(data_dir)?;
        step_down(&mut meta, id)?;
        let stored = meta.get().clone();
        let mut recovery =
            Recovery { purged: stored.purged.map(|p| p.index), watermark: stored.durable, cut_damage: false };
        let recovered = match Wal::open(&log_dir, &recovery) {
            Ok(r) => r,
            Err(e) if on_damage == OnDamage::Fetch && e.damage().is_some_and(|d| d.cuttable) => {
                // Recorded before anything is cut: a crash from here on still finds the node
                // owing what it acknowledged.
                let acknowledged = stored.durable.and_then(|w| w.next_index.checked_sub(1));
                let owed = stored.owed.max(acknowledged);
                meta.write(RaftMeta { owed, ..stored.clone() })?;
                recovery.cut_damage = true;
                Wal::open(&log_dir, &recovery)?
            }
            Err(e) => return Err(refusal(e, id)),
        };
        let stored = meta.get().clone();
        let wal = recovered.wal;
        let last = match wal.last_index() {
            Some(i) => Some(decode_entry(&wal, i)?.log_id),
            None => None,
        };
        let mut committed = stored.committed;
        check_against_log(&stored, last, recovered.cut.is_some(), &mut committed).map_err(|e| refusal(e, id))?;
        let owed = stored.owed;
        if let Some(cut) = &recovered.cut {
            tracing::warn!(
                owed = ?owed,
                last_index = ?last.map(|l| l.index),
                "{cut}. The raft log was cut there: this node acknowledged entries up to index {} and lost them. It \
                 will not vote or stand for election until it has fetched them again from a leader whose commit \
                 covers them.",
                owed.map_or("-".into(), |o| o.to_string())
            );
        }
        // The log as opened (a fresh segment, everything found synced) is what is on disk now.
        meta.write(RaftMeta { durable: Some(recovered.watermark), committed, ..meta.get().clone() })?;

        let durable = Arc::new(Durable::new(wal.next_index()));
        let disk = Arc::new(Disk {
            wal: Mutex::new(wal),
            meta: Mutex::new(meta),
            latest_commit: Mutex::new(committed),
            stats: Arc::default(),
            durable,
            round: Mutex::new(()),
        });
        let (sync, rx) = mpsc::channel();
        let d = disk.clone();
        std::thread::Builder::new()
            .name("raft-log-sync".into())
            .spawn(move || run_sync(d, rx))
            .map_err(|source| StoreError::Thread { name: "raft-log-sync", source })?;
        let store = LogStore {
            disk,
            sync,
            committed: Arc::new(AtomicU64::new(0)),
            id,
            leading: Arc::default(),
            data_level: None,
        };
        if let Some(vote) = stored.vote {
            store.note_vote(&vote);
        }
        if let Some(purged) = stored.purged {
            let first = store.first_index();
            if store.disk.wal.lock().expect("wal lock").last_index().is_some() && first > purged.index + 1 {
                tracing::warn!(
                    first,
                    purged = purged.index,
                    "the raft log starts after a gap; raft will fetch what it misses from the leader"
                );
            }
        }
        Ok(store)
    }

    /// Checks and records the feature level of every entry appended from now on.
    pub fn with_data_level(mut self, level: Arc<DataLevel>) -> Self {
        self.data_level = Some(level);
        self
    }

    /// The first index the log holds (the next one to come when it is empty).
    pub fn first_index(&self) -> u64 {
        self.disk.wal.lock().expect("wal lock").first_index()
    }

    /// A live view of the commit index.
    pub fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed.clone()
    }

    /// How far the log is on disk (the leader's appends are reported before they are).
    pub fn durable(&self) -> Arc<Durable> {
        self.disk.durable.clone()
    }

    fn note_vote(&self, vote: &Vote) {
        let own = vote.is_committed() && vote.leader_id().voted_for() == Some(self.id);
        self.leading.store(own, Ordering::Relaxed);
    }

    /// Live counters of appends and flushes.
    pub fn io_stats(&self) -> Arc<LogIoStats> {
        self.disk.stats.clone()
    }

    /// The highest index this node acknowledged and lost to damage, while it has not applied
    /// it again (see [`OnDamage::Fetch`]).
    pub fn owed(&self) -> Option<u64> {
        self.disk.meta().owed
    }

    /// The node has applied everything it owed, from a leader: it may vote again.
    pub async fn settle_owed(&self) -> Result<(), StoreError> {
        let disk = self.disk.clone();
        blocking(move || disk.change_meta(false, |m| m.owed = None)).await
    }

    /// Stores the commit index as far as the log on disk holds it (at shutdown).
    pub async fn save_commit_now(&self) -> Result<(), StoreError> {
        let disk = self.disk.clone();
        blocking(move || {
            let _round = disk.round.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match disk.meta().durable {
                Some(w) if !disk.durable.failed() => disk.record(w),
                _ => Ok(()),
            }
        })
        .await
    }

    /// Waits until everything written to the log so far is on disk.
    async fn sync_log(&self) -> Result<(), StorageError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiter: Waiter = Some(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        self.sync.send(waiter).map_err(|_| sync_stopped())?;
        rx.await.map_err(|_| sync_stopped())?.map_err(StoreError::write_logs)
    }

    /// Whether this node has never stored anything raft-related (a pristine node).
    pub fn is_pristine(&self) -> bool {
        let empty = self.disk.wal.lock().expect("wal lock").is_empty();
        let meta = self.disk.meta();
        empty && meta.vote.is_none() && meta.purged.is_none()
    }

    /// Appends `entries` and calls `done` once they count as stored: after a sync that
    /// covers them, or at once on the leader (its sync is tracked by [`Durable`]).
    fn write(
        &self,
        entries: impl IntoIterator<Item = Entry>,
        done: impl FnOnce(Result<(), StoreError>) + Send + 'static,
    ) -> Result<(), StorageError> {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if let Some(data_level) = &self.data_level {
            let level = entries.iter().map(entry_level).max().unwrap_or(BASE_LEVEL);
            data_level.admit(level).map_err(StoreError::write_logs)?;
        }
        let encoded = entries
            .iter()
            .map(|e| {
                let index = e.log_id.index;
                Ok((index, codec::encode(e).map_err(StoreError::codec("encode", format!("raft log entry {index}")))?))
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(StoreError::write_logs)?;
        let wants_zeros = {
            let mut wal = self.disk.wal.lock().expect("wal lock");
            wal.append(&encoded).map_err(StoreError::write_logs)?;
            wal.wants_zeros()
        };
        self.disk.stats.entries_appended.fetch_add(encoded.len() as u64, Ordering::Relaxed);
        if self.leading.load(Ordering::Relaxed) {
            self.sync.send(None).map_err(|_| sync_stopped())?;
            done(Ok(()));
        } else {
            done(self.disk.sync_now());
            if wants_zeros {
                // The sync thread writes them, off this path.
                self.sync.send(None).map_err(|_| sync_stopped())?;
            }
        }
        Ok(())
    }

    fn read_entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let records = self.disk.wal.lock().expect("wal lock").locate(start, end);
        records.iter().map(|r| decode(r).map_err(StoreError::read_logs)).collect()
    }
}

/// A leader restarts as a follower. openraft restores a node whose saved vote is its own
/// committed one as the leader of that term at once, with the log it finds. But a leader
/// reports its appends done before they are on its own disk, so a crash can take entries its
/// followers already hold (a torn tail, trimmed; or a log cut at damage); appending again in
/// the same term would give two different entries one log id, and followers holding the old
/// one would keep it (raft's log matching check passes): their tables would part. Kept as a
/// vote for itself not yet granted, the node votes for no other in that term and leads again
/// only once elected, in a new term.
/// The feature level a node needs to decode `entry`.
fn entry_level(entry: &Entry) -> u32 {
    match &entry.payload {
        EntryPayload::Normal(c) => c.cmd.feature_level(),
        EntryPayload::Blank | EntryPayload::Membership(_) => BASE_LEVEL,
    }
}

fn step_down(meta: &mut MetaFile, id: NodeId) -> Result<(), StoreError> {
    let stored = meta.get().clone();
    match stored.vote {
        Some(v) if v.is_committed() && v.leader_id().voted_for() == Some(id) => {
            let vote = Some(Vote::new(v.leader_id().get_term(), id));
            meta.write_both(RaftMeta { vote, ..stored })
        }
        _ => Ok(()),
    }
}

fn decode_entry(wal: &Wal, index: u64) -> Result<Entry, StoreError> {
    decode(&wal.locate(index, index + 1).pop().ok_or(StoreError::Missing(index))?)
}

fn decode(record: &RecordRef) -> Result<Entry, StoreError> {
    let index = record.index();
    codec::decode(&record.read()?).map_err(StoreError::codec("decode", format!("raft log entry {index}")))
}

/// Refuses metadata that contradicts the log (docs/storage.md, "Raft metadata"): a vote
/// older than the leader of the last entry (the vote was rolled back: it could be cast
/// twice), a commit index past everything the log and the purge point hold. After a cut at
/// damage the commit index is brought down to the log instead: raft learns it again.
fn check_against_log(
    meta: &RaftMeta,
    last: Option<LogId>,
    cut: bool,
    committed: &mut Option<LogId>,
) -> Result<(), StoreError> {
    let refuse = |what: String| Err(StoreError::Untrusted(what));
    let vote_term = meta.vote.map_or(0, |v| v.leader_id().get_term());
    if let Some(last) = last.filter(|l| l.leader_id.term > vote_term) {
        return refuse(format!(
            "the raft metadata holds {}, older than the leader of the last log entry ({last}): the vote was rolled \
             back (a lost write, or an older copy of raft-meta put back) and could be cast twice",
            meta.vote.map_or("no vote".into(), |v| format!("the vote {v}"))
        ));
    }
    let held = [last, meta.purged].into_iter().flatten().max_by_key(|l| l.index);
    if let Some(c) = *committed {
        if held.is_none_or(|h| c.index > h.index) {
            if !cut {
                return refuse(format!(
                    "the raft metadata says entry {} is committed, but the log and the purge point hold entries only \
                     up to {}: committed entries are missing",
                    c.index,
                    held.map_or("none".into(), |h| h.index.to_string())
                ));
            }
            *committed = held.filter(|h| h.index <= c.index);
        }
    }
    Ok(())
}

/// Marks the log of a new data directory purged up to `at`: its history before that lives
/// in a snapshot only (a restore from a backup, see `restore`).
pub fn seed_purged(data_dir: &Path, at: LogId) -> Result<(), StoreError> {
    let durable = Some(Watermark { pos: 0, next_index: at.index + 1 });
    MetaFile::create(data_dir, RaftMeta { purged: Some(at), durable, ..RaftMeta::default() })?;
    Ok(())
}

/// Damage to the log or its metadata becomes a refusal to start that says what the
/// operator can do; other errors pass through.
fn refusal(e: StoreError, id: NodeId) -> StoreError {
    if e.is_untrusted() {
        StoreError::Refused { id, source: Box::new(e) }
    } else {
        e
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        self.read_entries(start, end)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.disk.meta().purged;
        let last_index = self.disk.wal.lock().expect("wal lock").last_index();
        let last = match last_index {
            Some(i) => self.read_entries(i, i + 1)?.pop().map(|e| e.log_id),
            None => None,
        };
        Ok(LogState { last_purged_log_id, last_log_id: last.or(last_purged_log_id) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        // A vote forgotten in a crash, or rolled back by damage to one copy, could let this
        // node vote twice in one term: both copies hold it before it counts.
        let (disk, v) = (self.disk.clone(), *vote);
        blocking(move || disk.change_meta(true, |m| m.vote = Some(v))).await.map_err(StoreError::write_vote)?;
        // openraft runs storage commands one at a time: appends after this carry this vote.
        self.note_vote(vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.disk.meta().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(c) = committed {
            self.committed.fetch_max(c.index, Ordering::Relaxed);
        }
        // Stored by the next sync round, and only once the log on disk holds it: a restart
        // must not find a commit index past the entries it has.
        *self.disk.latest_commit.lock().expect("commit lock") = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.disk.meta().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // openraft 0.9 takes an io::Error here: it wraps the typed error, cause and all.
        self.write(entries, move |r| callback.log_io_completed(r.map_err(io::Error::other)))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        {
            let mut wal = self.disk.wal.lock().expect("wal lock");
            wal.truncate(log_id.index).map_err(StoreError::write_logs)?;
            self.disk.durable.cut(log_id.index);
        }
        self.sync_log().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: entries at or below it are ignored from then on,
        // so a crash half-way through deleting segments leaves a consistent log.
        let disk = self.disk.clone();
        blocking(move || disk.change_meta(false, |m| m.purged = Some(log_id))).await.map_err(StoreError::write_logs)?;
        self.disk.wal.lock().expect("wal lock").purge(log_id.index).map_err(StoreError::write_logs)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(index: u64) -> Entry {
        Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Blank }
    }

    /// Appends `indexes` through `LogStore::write`; answers whether each batch was
    /// already on disk when it was reported stored.
    async fn append(store: &LogStore, indexes: std::ops::Range<u64>) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let durable = store.durable();
        let last = indexes.end - 1;
        store
            .write(indexes.map(entry), move |r| {
                r.unwrap();
                let _ = tx.send(durable.covers(last));
            })
            .unwrap();
        rx.await.unwrap()
    }

    #[tokio::test]
    async fn a_follower_reports_appends_stored_only_once_synced_and_the_leader_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        let durable = store.durable();
        store.save_vote(&Vote::new_committed(1, 2)).await.unwrap();
        for i in 0..20 {
            assert!(append(&store, i * 3..i * 3 + 3).await, "a follower's append must be on disk when acknowledged");
        }
        store.save_vote(&Vote::new(2, 1)).await.unwrap();
        assert!(append(&store, 60..61).await, "a candidate is no leader yet");
        store.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        let mut early = 0;
        for i in 0..200 {
            early += u32::from(!append(&store, 61 + i..62 + i).await);
        }
        // The leader's acknowledgement comes before the sync thread could possibly run
        // (it is called inside `write`), so nearly all 200 arrive early.
        assert!(early > 100, "only {early} of 200 leader appends were acknowledged before their sync");
        durable.wait_for(260, Duration::from_secs(5)).await.unwrap();

        // Stepping down: a new leader cuts the log at 250; the old leader's sync of
        // entries past the cut must not count for the new ones written there.
        store.save_vote(&Vote::new_committed(3, 2)).await.unwrap();
        store.truncate(LogId::new(CommittedLeaderId::new(3, 2), 250)).await.unwrap();
        assert!(durable.covers(249) && !durable.covers(250));
        assert!(append(&store, 250..252).await);
        assert!(!durable.covers(252));
    }

    #[tokio::test]
    async fn the_vote_and_the_commit_index_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        let vote = Vote::new_committed(1, 1);
        store.save_vote(&vote).await.unwrap();
        append(&store, 0..5).await;
        store.durable().wait_for(4, Duration::from_secs(5)).await.unwrap();
        let committed = Some(entry(4).log_id);
        store.save_committed(committed).await.unwrap();
        store.save_commit_now().await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        // Its own committed vote comes back as a vote for itself in that term, not granted:
        // it leads again only once elected (see `step_down`).
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(1, 1)));
        assert_eq!(store.read_committed().await.unwrap(), committed);
        // Another node's vote comes back as it was.
        let other = Vote::new_committed(2, 3);
        store.save_vote(&other).await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        assert_eq!(store.read_vote().await.unwrap(), Some(other));
    }

    /// Metadata that contradicts the log: a vote older than the leader of the last entry
    /// (rolled back), a commit index past the log.
    #[tokio::test]
    async fn metadata_that_contradicts_the_log_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        store.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
        append(&store, 0..5).await;
        store.durable().wait_for(4, Duration::from_secs(5)).await.unwrap();
        drop(store);
        let rewrite = |change: &dyn Fn(&mut RaftMeta)| {
            let mut file = MetaFile::open(dir.path()).unwrap().unwrap();
            let mut m = file.get().clone();
            change(&mut m);
            file.write_both(m).unwrap();
        };
        // The chain, as the operator reads it: the refusal, then what was found.
        let refusal = || chain(&LogStore::open(dir.path(), 1, OnDamage::Refuse).err().expect("refused"));
        rewrite(&|m| m.vote = Some(Vote::new_committed(0, 1)));
        let msg = refusal();
        assert!(msg.contains("the vote was rolled back"), "{msg}");
        rewrite(&|m| m.vote = None);
        assert!(refusal().contains("holds no vote, older than the leader of the last log entry"));
        rewrite(&|m| {
            m.vote = Some(Vote::new_committed(1, 1));
            m.committed = Some(entry(9).log_id);
        });
        let msg = refusal();
        assert!(
            msg.contains("entry 9 is committed, but the log and the purge point hold entries only up to 4"),
            "{msg}"
        );
    }

    #[test]
    fn a_follower_append_waits_for_a_sync_round_already_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        // Play the sync thread: it has taken the files and is in the middle of its fsync
        // when the follower's entry 0 is written; the follower's own round finds nothing
        // left to take.
        let round = store.disk.round.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                store.write([entry(0)], move |r| tx.send(r.is_ok()).unwrap()).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let job = store.disk.wal.lock().unwrap().sync_job();
        assert!(rx.try_recv().is_err(), "acknowledged while another round was still syncing the entry");
        job.run().unwrap();
        drop(round);
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
        writer.join().unwrap();
        assert!(store.durable().covers(0));
    }

    #[tokio::test]
    async fn after_a_failed_sync_no_later_sync_counts() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 1, OnDamage::Refuse).unwrap();
        assert!(append(&store, 0..2).await);
        // As the sync thread does when fdatasync fails.
        store.durable().fail();
        let (tx, rx) = tokio::sync::oneshot::channel();
        store.write([entry(2)], move |r| tx.send(r).unwrap()).unwrap();
        let err = rx.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("an earlier sync of the raft log failed"), "{err}");
        assert!(!store.durable().covers(0));
    }
}

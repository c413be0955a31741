//! The raft log (segment files, see [`super::wal`]) and the vote (sled).
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
//! The vote and the purge point live in sled and are flushed before they are reported
//! done.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};

use super::durable::Durable;
use super::types::{codec, Entry, LogId, NodeId, StorageError, TypeConfig, Vote};
use super::wal::Wal;
use crate::exposition::Histogram;

/// The sled tree of the vote, the commit index and the purge point.
const META_TREE: &str = "raft_meta";
const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// Upper bounds (seconds) of the fsync histogram: from a battery-backed cache (tens of
/// microseconds) to a disk in trouble (seconds, when elections start to fail).
pub const FSYNC_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

/// Counters of the log's disk work, for `/metrics` and the benchmark's entries-per-fsync
/// figure.
#[derive(Debug)]
pub struct LogIoStats {
    /// Syncs (fdatasync rounds) of appended entries.
    pub append_flushes: AtomicU64,
    /// Entries appended.
    pub entries_appended: AtomicU64,
    /// Time spent in those syncs, in microseconds.
    pub flush_micros: AtomicU64,
    /// Each sync's duration.
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

/// Told the outcome of the next sync; `None` when only the [`Durable`] mark waits (the
/// leader's own appends).
type Waiter = Option<Box<dyn FnOnce(io::Result<()>) + Send>>;

#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    wal: Arc<Mutex<Wal>>,
    /// Requests to the sync thread; it stops when the last `LogStore` clone is dropped.
    sync: mpsc::Sender<Waiter>,
    meta: sled::Tree,
    /// The commit index raft last reported, for status and metrics.
    committed: Arc<AtomicU64>,
    stats: Arc<LogIoStats>,
    id: NodeId,
    /// The last vote saved is this node's own committed vote: it is the leader, and every
    /// append is its own.
    leading: Arc<AtomicBool>,
    durable: Arc<Durable>,
    /// Held for the whole of a sync round (see [`sync_now`]).
    round: Arc<Mutex<()>>,
}

fn io_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<NodeId>::write_logs(&e).into()
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<NodeId>::read_logs(&e).into()
}

/// The sync thread is gone (it stops only when the node shuts down or it panicked).
fn sync_stopped() -> StorageError {
    io_err(io::Error::other("the raft log sync thread stopped"))
}

/// One `fdatasync` round for everything written so far, then the durable mark. Rounds
/// run one at a time (`round`): a follower's append and the sync thread may both sync,
/// and a round that finds the files already taken by another still in progress must
/// wait for it, or it would report entries durable that are not on disk yet.
///
/// After one failed sync every later one fails too (fsyncgate): the kernel may have
/// dropped the pages it could not write and marked them clean, so a later `fdatasync`
/// that succeeds says nothing about them.
fn sync_now(round: &Mutex<()>, wal: &Mutex<Wal>, stats: &LogIoStats, durable: &Durable) -> io::Result<()> {
    let _round = round.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if durable.failed() {
        return Err(io::Error::other(
            "an earlier sync of the raft log failed; nothing written since counts as on disk",
        ));
    }
    let job = wal.lock().expect("wal lock").sync_job();
    let (epoch, next) = job.covers;
    let upto = job.upto;
    let result = if job.is_empty() {
        Ok(())
    } else {
        let started = std::time::Instant::now();
        let result = job.run();
        stats.append_flushes.fetch_add(1, Ordering::Relaxed);
        let took = started.elapsed();
        stats.flush_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        stats.flush_seconds.observe(took);
        result
    };
    match &result {
        Ok(()) => {
            // Under the lock, so that a truncation cannot slip in between.
            let mut wal = wal.lock().expect("wal lock");
            wal.synced(upto);
            if wal.epoch() == epoch {
                durable.advance(next);
            }
        }
        Err(e) => {
            tracing::error!("cannot sync the raft log: {e}");
            durable.fail();
        }
    }
    result
}

/// The sync thread: one sync round for everything queued, then every waiter in order,
/// then zeros ahead of the write position.
fn run_sync(
    round: Arc<Mutex<()>>,
    wal: Arc<Mutex<Wal>>,
    rx: mpsc::Receiver<Waiter>,
    stats: Arc<LogIoStats>,
    durable: Arc<Durable>,
) {
    while let Ok(first) = rx.recv() {
        let mut waiters = vec![first];
        waiters.extend(rx.try_iter());
        let result = sync_now(&round, &wal, &stats, &durable);
        for waiter in waiters.into_iter().flatten() {
            waiter(result.as_ref().map(|_| ()).map_err(|e| io::Error::new(e.kind(), e.to_string())));
        }
        let zeroed = wal.lock().expect("wal lock").zero_ahead();
        if let Err(e) = zeroed.and_then(|f| f.map_or(Ok(()), |f| f.sync_data())) {
            tracing::warn!("cannot preallocate the raft log: {e}");
        }
    }
}

impl LogStore {
    /// Opens node `id`'s log in `dir` (segment files) with the vote and purge point in
    /// `db`.
    pub fn open(db: &sled::Db, dir: &Path, id: NodeId) -> anyhow::Result<Self> {
        let meta = db.open_tree(META_TREE)?;
        let purged = match meta.get(LAST_PURGED)? {
            Some(v) => {
                Some(codec::decode::<LogId>(&v).map_err(|e| anyhow::anyhow!("cannot read the purge point: {e}"))?)
            }
            None => None,
        };
        let wal = Wal::open(dir, purged.map(|p| p.index)).map_err(|e| refuse_damaged(e.into(), id))?;
        let durable = Arc::new(Durable::new(wal.next_index()));
        let stats: Arc<LogIoStats> = Arc::default();
        let wal = Arc::new(Mutex::new(wal));
        let (sync, rx) = mpsc::channel();
        let round: Arc<Mutex<()>> = Arc::default();
        let (r, w, s, d) = (round.clone(), wal.clone(), stats.clone(), durable.clone());
        std::thread::Builder::new().name("raft-log-sync".into()).spawn(move || run_sync(r, w, rx, s, d))?;
        let store = LogStore {
            db: db.clone(),
            wal,
            sync,
            meta,
            committed: Arc::new(AtomicU64::new(0)),
            stats,
            id,
            leading: Arc::default(),
            durable,
            round,
        };
        if let Some(vote) = store.get_meta::<Vote>(VOTE)? {
            store.note_vote(&vote);
        }
        if let Some(purged) = purged {
            let wal = store.wal.lock().expect("wal lock");
            if !wal.is_empty() && wal.first_index() > purged.index + 1 {
                tracing::warn!(
                    first = wal.first_index(),
                    purged = purged.index,
                    "the raft log starts after a gap; raft will fetch what it misses from the leader"
                );
            }
        }
        Ok(store)
    }

    /// The first index the log holds (the next one to come when it is empty).
    pub fn first_index(&self) -> u64 {
        self.wal.lock().expect("wal lock").first_index()
    }

    /// A live view of the commit index.
    pub fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed.clone()
    }

    /// How far the log is on disk (the leader's appends are reported before they are).
    pub fn durable(&self) -> Arc<Durable> {
        self.durable.clone()
    }

    fn note_vote(&self, vote: &Vote) {
        let own = vote.is_committed() && vote.leader_id().voted_for() == Some(self.id);
        self.leading.store(own, Ordering::Relaxed);
    }

    /// Live counters of appends and flushes.
    pub fn io_stats(&self) -> Arc<LogIoStats> {
        self.stats.clone()
    }

    fn get_meta<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, StorageError> {
        match self.meta.get(key).map_err(read_err)? {
            None => Ok(None),
            Some(v) => codec::decode(&v).map(Some).map_err(read_err),
        }
    }

    fn put_meta<T: serde::Serialize>(&self, key: &[u8], v: &T) -> Result<(), StorageError> {
        let bytes = codec::encode(v).map_err(io_err)?;
        self.meta.insert(key, bytes).map_err(io_err)?;
        Ok(())
    }

    async fn flush_meta(&self) -> Result<(), StorageError> {
        flush_db(&self.db).await.map_err(io_err)
    }

    /// Waits until everything written to the log so far is on disk.
    async fn sync_log(&self) -> Result<(), StorageError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiter: Waiter = Some(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        self.sync.send(waiter).map_err(|_| sync_stopped())?;
        rx.await.map_err(|_| sync_stopped())?.map_err(io_err)
    }

    /// Whether this node has never stored anything raft-related (a pristine node).
    pub fn is_pristine(&self) -> Result<bool, sled::Error> {
        let empty = self.wal.lock().expect("wal lock").is_empty();
        Ok(empty && self.meta.get(VOTE)?.is_none() && self.meta.get(LAST_PURGED)?.is_none())
    }

    /// Appends `entries` and calls `done` once they count as stored: after a sync that
    /// covers them, or at once on the leader (its sync is tracked by [`Durable`]).
    fn write(
        &self,
        entries: impl IntoIterator<Item = Entry>,
        done: impl FnOnce(io::Result<()>) + Send + 'static,
    ) -> Result<(), StorageError> {
        let encoded = entries
            .into_iter()
            .map(|e| Ok((e.log_id.index, codec::encode(&e).map_err(io_err)?)))
            .collect::<Result<Vec<_>, StorageError>>()?;
        let wants_zeros = {
            let mut wal = self.wal.lock().expect("wal lock");
            wal.append(&encoded).map_err(io_err)?;
            wal.wants_zeros()
        };
        self.stats.entries_appended.fetch_add(encoded.len() as u64, Ordering::Relaxed);
        if self.leading.load(Ordering::Relaxed) {
            self.sync.send(None).map_err(|_| sync_stopped())?;
            done(Ok(()));
        } else {
            done(sync_now(&self.round, &self.wal, &self.stats, &self.durable));
            if wants_zeros {
                // The sync thread writes them, off this path.
                self.sync.send(None).map_err(|_| sync_stopped())?;
            }
        }
        Ok(())
    }

    fn read_entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let records = self.wal.lock().expect("wal lock").locate(start, end);
        records.iter().map(|r| codec::decode::<Entry>(&r.read().map_err(read_err)?).map_err(read_err)).collect()
    }
}

/// Marks the log of a new data directory purged up to `at`: its history before that lives
/// in a snapshot only (a restore from a backup, see `restore`).
pub fn seed_purged(db: &sled::Db, at: LogId) -> anyhow::Result<()> {
    let meta = db.open_tree(META_TREE)?;
    meta.insert(LAST_PURGED, codec::encode(&at)?)?;
    db.flush()?;
    Ok(())
}

/// A log that [`Wal::open`] found damaged becomes a refusal to start that says what the
/// operator can do; other errors pass through.
fn refuse_damaged(e: anyhow::Error, id: NodeId) -> anyhow::Error {
    let damaged = e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::InvalidData);
    if !damaged {
        return e;
    }
    anyhow::anyhow!(
        "{e}. This node's raft log cannot be trusted, so it does not start (serving a shortened log could hand \
         out fencing tokens twice). Restore its data directory from a backup, or re-add it empty: on a running \
         member `dls members remove {id}` and `dls members add {id} HOST:PORT/PEER_PORT`, then start this node \
         with an empty --data-dir and --join; it catches up from the leader. See docs/storage.md."
    )
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
        let last_purged_log_id: Option<LogId> = self.get_meta(LAST_PURGED)?;
        let last_index = self.wal.lock().expect("wal lock").last_index();
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
        self.put_meta(VOTE, vote)?;
        // A vote forgotten in a crash could let this node vote twice in one term.
        self.flush_meta().await?;
        // openraft runs storage commands one at a time: appends after this carry this vote.
        self.note_vote(vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.get_meta(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(c) = committed {
            self.committed.fetch_max(c.index, Ordering::Relaxed);
            // A restart must not find a commit index past the entries it has on disk; the
            // next save covers this one.
            if !self.durable.covers(c.index) {
                return Ok(());
            }
        }
        // Not flushed on purpose: losing it only means re-discovering the commit index.
        self.put_meta(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.get_meta::<Option<LogId>>(COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.write(entries, move |r| callback.log_io_completed(r))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        {
            let mut wal = self.wal.lock().expect("wal lock");
            wal.truncate(log_id.index).map_err(io_err)?;
            self.durable.cut(log_id.index);
        }
        self.sync_log().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: entries at or below it are ignored from then on,
        // so a crash half-way through deleting segments leaves a consistent log.
        self.put_meta(LAST_PURGED, &log_id)?;
        self.flush_meta().await?;
        self.wal.lock().expect("wal lock").purge(log_id.index).map_err(io_err)
    }
}

/// Writes everything sled buffered to disk and fsyncs it, on the blocking pool.
pub async fn flush_db(db: &sled::Db) -> Result<(), sled::Error> {
    let db = db.clone();
    match tokio::task::spawn_blocking(move || db.flush()).await {
        Ok(flushed) => flushed.map(|_| ()),
        Err(e) => Err(sled::Error::Io(std::io::Error::other(format!("flush task failed: {e}")))),
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
        let db = sled::open(dir.path().join("db")).unwrap();
        let mut store = LogStore::open(&db, &dir.path().join("log"), 1).unwrap();
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

    #[test]
    fn a_follower_append_waits_for_a_sync_round_already_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path().join("db")).unwrap();
        let store = LogStore::open(&db, &dir.path().join("log"), 1).unwrap();
        // Play the sync thread: it has taken the files and is in the middle of its fsync
        // when the follower's entry 0 is written; the follower's own round finds nothing
        // left to take.
        let round = store.round.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                store.write([entry(0)], move |r| tx.send(r.is_ok()).unwrap()).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let job = store.wal.lock().unwrap().sync_job();
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
        let db = sled::open(dir.path().join("db")).unwrap();
        let store = LogStore::open(&db, &dir.path().join("log"), 1).unwrap();
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

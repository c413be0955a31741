//! The raft log and vote in sled.
//!
//! sled flushes in the background only every 500 ms, so an entry reported durable
//! before a flush could vanish in a crash and take an acknowledged grant with it. Every
//! append, truncate and vote therefore ends with a flush before it is reported done;
//! openraft hands appends over in batches, so one flush covers many proposals (group
//! commit; `LogIoStats` counts how many).
//!
//! The flush runs on tokio's blocking pool rather than through `sled::Db::flush_async`:
//! sled's own thread pool parks and wakes a thread per call, and under load that
//! context switching cost more CPU than everything else the leader did (profiled).

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};

use super::types::{codec, Entry, LogId, NodeId, StorageError, TypeConfig, Vote};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// Counters of the log's disk work, for `/metrics` and the benchmark's entries-per-fsync
/// figure.
#[derive(Default, Debug)]
pub struct LogIoStats {
    /// Flushes (fsyncs) of appended entries.
    pub append_flushes: AtomicU64,
    /// Entries appended.
    pub entries_appended: AtomicU64,
    /// Time spent in those flushes, in microseconds.
    pub flush_micros: AtomicU64,
}

#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    /// Entries keyed by big-endian index, so sled's order is log order.
    log: sled::Tree,
    meta: sled::Tree,
    /// The commit index raft last reported, for status and metrics.
    committed: Arc<AtomicU64>,
    stats: Arc<LogIoStats>,
}

fn io_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<NodeId>::write_logs(&e).into()
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<NodeId>::read_logs(&e).into()
}

impl LogStore {
    pub fn open(db: &sled::Db) -> Result<Self, sled::Error> {
        Ok(LogStore {
            db: db.clone(),
            log: db.open_tree("raft_log")?,
            meta: db.open_tree("raft_meta")?,
            committed: Arc::new(AtomicU64::new(0)),
            stats: Arc::default(),
        })
    }

    /// A live view of the commit index.
    pub fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed.clone()
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

    async fn flush(&self) -> Result<(), StorageError> {
        flush_db(&self.db).await.map_err(io_err)
    }

    /// Whether this node has never stored anything raft-related (a pristine node).
    pub fn is_pristine(&self) -> Result<bool, sled::Error> {
        Ok(self.log.is_empty() && self.meta.get(VOTE)?.is_none() && self.meta.get(LAST_PURGED)?.is_none())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i + 1,
            Bound::Unbounded => 0,
        };
        let mut out = Vec::new();
        for item in self.log.range(start.to_be_bytes()..) {
            let (k, v) = item.map_err(read_err)?;
            let index = u64::from_be_bytes(k.as_ref().try_into().expect("8-byte log key"));
            if !range.contains(&index) {
                break;
            }
            out.push(codec::decode::<Entry>(&v).map_err(read_err)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id: Option<LogId> = self.get_meta(LAST_PURGED)?;
        let last = match self.log.last().map_err(read_err)? {
            Some((_, v)) => Some(codec::decode::<Entry>(&v).map_err(read_err)?.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState { last_purged_log_id, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.put_meta(VOTE, vote)?;
        // A vote forgotten in a crash could let this node vote twice in one term.
        self.flush().await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.get_meta(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(c) = committed {
            self.committed.fetch_max(c.index, Ordering::Relaxed);
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
        let mut batch = sled::Batch::default();
        let mut count = 0;
        for entry in entries {
            batch.insert(&entry.log_id.index.to_be_bytes(), codec::encode(&entry).map_err(io_err)?);
            count += 1;
        }
        self.log.apply_batch(batch).map_err(io_err)?;
        let started = std::time::Instant::now();
        let flushed = self.flush().await;
        self.stats.append_flushes.fetch_add(1, Ordering::Relaxed);
        self.stats.entries_appended.fetch_add(count, Ordering::Relaxed);
        self.stats.flush_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        callback.log_io_completed(flushed.as_ref().map(|_| ()).map_err(|e| std::io::Error::other(e.to_string())));
        flushed
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for item in self.log.range(log_id.index.to_be_bytes()..) {
            batch.remove(item.map_err(read_err)?.0);
        }
        self.log.apply_batch(batch).map_err(io_err)?;
        self.flush().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: entries at or below it are ignored from then on,
        // so a crash half-way through the deletes leaves a consistent log.
        self.put_meta(LAST_PURGED, &log_id)?;
        self.flush().await?;
        let mut batch = sled::Batch::default();
        for item in self.log.range(..=log_id.index.to_be_bytes()) {
            batch.remove(item.map_err(read_err)?.0);
        }
        self.log.apply_batch(batch).map_err(io_err)?;
        Ok(())
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

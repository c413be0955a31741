//! The raft log and vote in sled.
//!
//! sled flushes in the background only every 500 ms, so an entry reported durable
//! before a flush could vanish in a crash and take an acknowledged grant with it. Every
//! append, truncate and vote therefore ends with `flush_async` before it is reported
//! done; openraft hands appends over in batches, so one flush covers many proposals
//! (group commit).

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

#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    /// Entries keyed by big-endian index, so sled's order is log order.
    log: sled::Tree,
    meta: sled::Tree,
    /// The commit index raft last reported, for status and metrics.
    committed: Arc<AtomicU64>,
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
        })
    }

    /// A live view of the commit index.
    pub fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed.clone()
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
        self.db.flush_async().await.map_err(io_err)?;
        Ok(())
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
        for entry in entries {
            batch.insert(&entry.log_id.index.to_be_bytes(), codec::encode(&entry).map_err(io_err)?);
        }
        self.log.apply_batch(batch).map_err(io_err)?;
        let flushed = self.flush().await;
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

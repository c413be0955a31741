//! Adapter between raft and the lock table: applies committed entries in log order,
//! builds and installs snapshots, and restores the table from the last snapshot at start.
//!
//! The table lives in memory; durability comes from the raft log plus snapshot files
//! (`snapshot_store`). On restart the table is rebuilt from the snapshot, then raft
//! re-applies the committed entries after it, so every grant and the fencing counter come
//! back.

use std::io;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};

use super::durable::Durable;
use super::replicated::{Replicated, SharedState};
use super::snapshot_file::{SnapshotFile, TmpFile};
use super::snapshot_schedule::SnapshotSchedule;
use super::snapshot_store::{freeze, SnapshotStore};
use super::store_error::{self, StoreError};
use super::types::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::locks::{Effect, LockTable, Outcome};
use crate::versions::DataLevel;

/// Receives what the node must act on after entries are applied.
pub trait ApplyObserver: Send + Sync + 'static {
    /// Effects of one applied batch, in order, while the state write lock is still held:
    /// bookkeeping that readers must find in step with the table (lease timers), and the
    /// log's time after it (`LockTable::clock_ms`). Keep it short; every reader waits.
    fn tracked(&self, _effects: &[Effect], _clock_ms: u64) {}
    /// The cluster's API keys changed in this batch; called under the state write lock, so
    /// a key is enforced before any read sees the table that revoked it.
    fn api_keys_changed(&self, _table: &LockTable) {}
    /// Effects of one applied batch, in order, after the lock is released.
    fn applied(&self, effects: Vec<Effect>);
    /// The whole table was replaced (snapshot installed or restored at start); called
    /// under the state write lock.
    fn reset(&self, table: &LockTable);
}

#[derive(Clone)]
pub struct StateMachine {
    state: SharedState,
    snapshots: Arc<SnapshotStore>,
    observer: Arc<dyn ApplyObserver>,
    /// An entry is applied only once it is on this node's disk (see [`Durable`]).
    durable: Arc<Durable>,
    /// When to ask raft for the next snapshot.
    schedule: Arc<SnapshotSchedule>,
    /// The data directory's feature level, raised by a snapshot installed from the leader
    /// (entries raise it in the log store).
    data_level: Option<Arc<DataLevel>>,
}

/// How long applying waits for the local log to reach the disk before it gives up and
/// stops raft on this node.
const DISK_STALL_LIMIT: Duration = Duration::from_secs(30);

fn snap_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<u64>::write_snapshot(None, &e).into()
}

/// Runs snapshot file work on tokio's blocking pool (it reads and writes tens of MB).
async fn blocking<T: Send + 'static, E: std::error::Error + Send + 'static>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, StorageError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done.map_err(snap_err),
        Err(e) => Err(snap_err(StoreError::Task(e))),
    }
}

/// Runs `work` on a thread of its own, which ends with it: the snapshot lowers its
/// thread's priority, which a pooled thread would keep for later work.
async fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, StorageError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("dls-snapshot".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|source| snap_err(StoreError::Thread { name: "dls-snapshot", source }))?;
    match rx.await {
        Ok(done) => done.map_err(snap_err),
        Err(_) => Err(snap_err(std::io::Error::other("the snapshot thread panicked"))),
    }
}

/// Gives the calling thread a lower CPU priority (nice +10, per thread on Linux). A
/// snapshot encodes tens of MB while the node serves: at the same priority, on a small
/// machine where every node snapshots at the same index, the encodings took the CPU from
/// the raft and gRPC threads and the hot key's p99 doubled for a few hundred ms (figures in
/// docs/bench.md). It only yields the CPU to busier threads; on an idle node it runs as fast.
fn lower_priority() {
    if let Err(e) = crate::platform::priority::lower_this_thread() {
        tracing::debug!("cannot lower the snapshot thread's priority: {e}");
    }
}

impl StateMachine {
    /// Opens the state machine, restoring the table from the newest whole snapshot file in
    /// `<data_dir>/snapshots` that reaches `log_first`, the first index the raft log holds.
    /// Snapshots are due every `snapshot_every` entries, less often when large (see
    /// [`SnapshotSchedule`]).
    pub async fn open(
        data_dir: &Path,
        observer: Arc<dyn ApplyObserver>,
        durable: Arc<Durable>,
        log_first: u64,
        snapshot_every: u64,
    ) -> Result<Self, StoreError> {
        let data_dir = data_dir.to_path_buf();
        let (store, restored) = store_error::blocking(move || {
            let store = SnapshotStore::open(&data_dir)?;
            let restored = store.load_current(log_first)?;
            Ok((store, restored))
        })
        .await?;
        let state = match restored {
            Some(state) => {
                tracing::info!(last_applied = ?state.last_applied, "restored lock table from snapshot");
                state
            }
            None => Replicated::default(),
        };
        observer.reset(&state.table);
        Ok(StateMachine {
            state: Arc::new(RwLock::new(state)),
            snapshots: Arc::new(store),
            observer,
            durable,
            schedule: Arc::new(SnapshotSchedule::new(snapshot_every)),
            data_level: None,
        })
    }

    /// Checks and records the feature level of every snapshot installed from now on.
    pub fn with_data_level(mut self, level: Arc<DataLevel>) -> Self {
        self.data_level = Some(level);
        self
    }

    /// When snapshots are due; the node triggers them (openraft's own policy is off).
    pub fn schedule(&self) -> Arc<SnapshotSchedule> {
        self.schedule.clone()
    }

    /// The snapshot files (for backups).
    pub fn snapshot_store(&self) -> Arc<SnapshotStore> {
        self.snapshots.clone()
    }

    pub fn shared(&self) -> SharedState {
        self.state.clone()
    }
}

impl StateMachine {
    /// The `.tmp` file holding a snapshot to install. openraft normally hands back the file
    /// `begin_receiving_snapshot` made; snapshot data from anywhere else (another store's
    /// current snapshot, as openraft's storage suite passes) is copied into a fresh one
    /// first, so install always checks and commits a file of our own.
    async fn received_file(&self, snapshot: SnapshotFile) -> io::Result<TmpFile> {
        if snapshot.is_receiving() {
            return snapshot.finish_receiving().await;
        }
        let store = self.snapshots.clone();
        let mut copy =
            tokio::task::spawn_blocking(move || store.begin_receiving()).await.map_err(io::Error::other)??;
        let mut source = snapshot;
        tokio::io::copy(&mut source, &mut copy).await?;
        copy.finish_receiving().await
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    /// Runs alongside `apply` (openraft spawns it): applies wait only while the state is
    /// copied under the read lock (`lock_held_ms` in the log line), not for its encoding
    /// or the fsyncs.
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (state, store) = (self.state.clone(), self.snapshots.clone());
        let saved = in_background(move || {
            // The copy at normal priority: every apply waits for it.
            let frozen = freeze(&state);
            lower_priority();
            store.write(frozen)
        })
        .await?;
        tracing::info!(
            last_log_id = ?saved.meta.last_log_id,
            lock_held_ms = saved.lock_held.as_millis() as u64,
            total_ms = saved.total.as_millis() as u64,
            bytes = saved.bytes,
            "snapshot built"
        );
        // openraft keeps only the meta of a built snapshot; the open file costs nothing.
        Ok(Snapshot { meta: saved.meta, snapshot: Box::new(SnapshotFile::from_saved(saved.file)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let st = self.state.read().expect("state lock");
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let last_index = entries.last().map(|e| e.log_id.index);
        if let Some(index) = last_index {
            self.durable.wait_for(index, DISK_STALL_LIMIT).await.map_err(|e| StorageIOError::<u64>::write_logs(&e))?;
        }
        let mut outcomes = Vec::new();
        let effects = {
            let mut st = self.state.write().expect("state lock");
            for entry in entries {
                st.last_applied = Some(entry.log_id);
                outcomes.push(match entry.payload {
                    EntryPayload::Blank => Outcome::None,
                    EntryPayload::Normal(cmd) => st.table.apply(&cmd),
                    EntryPayload::Membership(m) => {
                        st.membership = StoredMembership::new(Some(entry.log_id), m);
                        Outcome::None
                    }
                });
            }
            let effects = st.table.take_effects();
            self.observer.tracked(&effects, st.table.clock_ms());
            if effects.contains(&Effect::ApiKeysChanged) {
                self.observer.api_keys_changed(&st.table);
            }
            effects
        };
        if !effects.is_empty() {
            self.observer.applied(effects);
        }
        if let Some(index) = last_index {
            self.schedule.applied(index, self.snapshots.last());
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        let store = self.snapshots.clone();
        Ok(Box::new(blocking(move || store.begin_receiving()).await?))
    }

    /// Checks and decodes the received file, makes it the current snapshot (on disk before
    /// raft moves past it), then swaps the table in.
    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Box<SnapshotFile>) -> Result<(), StorageError> {
        let received = self.received_file(*snapshot).await.map_err(snap_err)?;
        let (store, announced) = (self.snapshots.clone(), meta.clone());
        let new_state = blocking(move || store.install(received, &announced)).await?;
        if let Some(data_level) = self.data_level.clone() {
            // Recorded before the table is used; a level this node does not read stops raft
            // here, as on a node of that release (which would not decode the section).
            // `used`, not the cluster's level: the level itself is read by every release
            // with the handshake, so a rolling downgrade still takes such a snapshot.
            let level = new_state.table.feature_levels().used;
            blocking(move || data_level.admit(level)).await?;
        }
        let old_state = {
            let mut st = self.state.write().expect("state lock");
            let old = std::mem::replace(&mut *st, new_state);
            self.observer.reset(&st.table);
            old
        };
        // Free the replaced table (100,000s of allocations) off the lock and off the async
        // threads.
        blocking(move || {
            drop(old_state);
            Ok::<_, io::Error>(())
        })
        .await?;
        tracing::info!(last_log_id = ?meta.last_log_id, "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let store = self.snapshots.clone();
        let current = blocking(move || store.open_current()).await?;
        Ok(current.map(|(meta, file)| Snapshot { meta, snapshot: Box::new(file) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{Command, LogCommand};

    /// The snapshot's thread runs at a lower priority; the threads that serve do not.
    #[tokio::test]
    async fn only_the_snapshot_thread_runs_at_a_lower_priority() {
        let priority = || rustix::process::getpriority_process(None).unwrap();
        let ours = priority();
        let (before, after) = in_background(move || {
            let before = priority();
            lower_priority();
            Ok((before, priority()))
        })
        .await
        .unwrap();
        assert_eq!(before, ours, "a new thread starts at the process's priority");
        assert_eq!(after, (ours + 10).min(19), "then yields the CPU to the others");
        assert_eq!(priority(), ours, "the serving thread keeps its own");
    }

    struct NoObserver;
    impl ApplyObserver for NoObserver {
        fn applied(&self, _: Vec<Effect>) {}
        fn reset(&self, _: &LockTable) {}
    }

    /// Records, for each batch of effects it tracks, whether the state was write-locked.
    #[derive(Default)]
    struct LockProbe {
        state: std::sync::OnceLock<SharedState>,
        locked: std::sync::Mutex<Vec<bool>>,
    }
    impl ApplyObserver for LockProbe {
        fn tracked(&self, _: &[Effect], _: u64) {
            let locked = self.state.get().is_some_and(|s| s.try_read().is_err());
            self.locked.lock().unwrap().push(locked);
        }
        fn applied(&self, _: Vec<Effect>) {}
        fn reset(&self, _: &LockTable) {}
    }

    #[tokio::test]
    async fn lease_timers_follow_an_apply_before_readers_see_the_new_table() {
        let dir = tempfile::tempdir().unwrap();
        let probe = Arc::new(LockProbe::default());
        let mut sm =
            StateMachine::open(dir.path(), probe.clone(), Arc::new(Durable::new(u64::MAX)), 0, 10_000).await.unwrap();
        probe.state.set(sm.shared()).ok().unwrap();
        let begin =
            Command::Begin { request_id: None, lease_ms: 10_000, priority: 0, name: "t".into(), owner: "o".into() };
        let entry = Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), 1),
            payload: EntryPayload::Normal(LogCommand { now_ms: 1, cmd: begin }),
        };
        sm.apply([entry]).await.unwrap();
        // A heartbeat reads the table and renews the timer under one read lock; if the timers
        // changed after the lock was released, it could renew an ended transaction's lease.
        assert_eq!(*probe.locked.lock().unwrap(), vec![true]);
    }

    fn table_with_one_txn() -> LockTable {
        let mut table = LockTable::new();
        let begin =
            Command::Begin { request_id: None, lease_ms: 10_000, priority: 0, name: "t".into(), owner: "o".into() };
        table.apply(&LogCommand { now_ms: 1, cmd: begin });
        table.take_effects();
        table
    }

    #[tokio::test]
    async fn a_built_snapshot_replaces_the_previous_file_and_is_restored() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = StateMachine::open(dir.path(), Arc::new(NoObserver), Arc::new(Durable::new(u64::MAX)), 0, 10_000)
            .await
            .unwrap();
        let first = sm.build_snapshot().await.unwrap().meta;
        sm.shared().write().unwrap().table = table_with_one_txn();
        let second = sm.build_snapshot().await.unwrap().meta;
        assert_ne!(first.snapshot_id, second.snapshot_id);
        let files: Vec<_> =
            std::fs::read_dir(dir.path().join("snapshots")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "the older snapshot file is deleted: {files:?}");
        assert_eq!(sm.get_current_snapshot().await.unwrap().unwrap().meta, second);

        let restored =
            StateMachine::open(dir.path(), Arc::new(NoObserver), Arc::new(Durable::new(u64::MAX)), 0, 10_000)
                .await
                .unwrap();
        assert_eq!(restored.shared().read().unwrap().table, table_with_one_txn());
    }
}

//! Adapter between raft and the lock table: applies committed entries in log order,
//! builds and installs snapshots, and restores the table from the last snapshot at start.
//!
//! The table lives in memory; durability comes from the raft log plus snapshots stored
//! in sled. On restart the table is rebuilt from the snapshot, then raft re-applies the
//! committed entries after it, so every grant and the fencing counter come back.

use std::io::Cursor;
use std::sync::{Arc, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};

use super::types::{codec, Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::locks::{Effect, LockTable, Outcome};

/// Receives what the node must act on after entries are applied.
pub trait ApplyObserver: Send + Sync + 'static {
    /// Effects of one applied batch, in order.
    fn applied(&self, effects: Vec<Effect>);
    /// The whole table was replaced (snapshot installed or restored at start).
    fn reset(&self, table: &LockTable);
}

/// The replicated state: the lock table plus raft's bookkeeping.
#[derive(Default, Serialize, Deserialize)]
pub struct Replicated {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub table: LockTable,
}

/// Read access for the API layer; writes happen only in `apply`.
pub type SharedState = Arc<RwLock<Replicated>>;

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: Vec<u8>,
}

const CURRENT_SNAPSHOT: &[u8] = b"current";

#[derive(Clone)]
pub struct StateMachine {
    state: SharedState,
    db: sled::Db,
    snapshots: sled::Tree,
    observer: Arc<dyn ApplyObserver>,
}

fn snap_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::<u64>::write_snapshot(None, &e).into()
}

impl StateMachine {
    /// Opens the state machine, restoring the table from the last stored snapshot.
    pub fn open(db: &sled::Db, observer: Arc<dyn ApplyObserver>) -> anyhow::Result<Self> {
        let snapshots = db.open_tree("snapshots")?;
        let mut state = Replicated::default();
        if let Some(bytes) = snapshots.get(CURRENT_SNAPSHOT)? {
            let stored: StoredSnapshot = codec::decode(&bytes)?;
            state = codec::decode(&stored.data)?;
            tracing::info!(last_applied = ?state.last_applied, "restored lock table from snapshot");
        }
        observer.reset(&state.table);
        Ok(StateMachine { state: Arc::new(RwLock::new(state)), db: db.clone(), snapshots, observer })
    }

    pub fn shared(&self) -> SharedState {
        self.state.clone()
    }

    async fn store_snapshot(&self, stored: &StoredSnapshot) -> Result<(), StorageError> {
        self.snapshots.insert(CURRENT_SNAPSHOT, codec::encode(stored).map_err(snap_err)?).map_err(snap_err)?;
        // The log is purged up to a snapshot only after this returns: it must be on disk.
        super::log_store::flush_db(&self.db).await.map_err(snap_err)?;
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (data, meta) = {
            let st = self.state.read().expect("state lock");
            let data = codec::encode(&*st).map_err(snap_err)?;
            let id = match st.last_applied {
                Some(l) => format!("{}-{}-{}", l.leader_id, l.index, data.len()),
                None => format!("empty-{}", data.len()),
            };
            (
                data,
                SnapshotMeta { last_log_id: st.last_applied, last_membership: st.membership.clone(), snapshot_id: id },
            )
        };
        let stored = StoredSnapshot { meta: meta.clone(), data };
        self.store_snapshot(&stored).await?;
        tracing::info!(last_log_id = ?meta.last_log_id, bytes = stored.data.len(), "snapshot built");
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(stored.data)) })
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
            st.table.take_effects()
        };
        if !effects.is_empty() {
            self.observer.applied(effects);
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let new_state: Replicated = codec::decode(&data).map_err(snap_err)?;
        self.store_snapshot(&StoredSnapshot { meta: meta.clone(), data }).await?;
        let mut st = self.state.write().expect("state lock");
        *st = new_state;
        self.observer.reset(&st.table);
        tracing::info!(last_log_id = ?meta.last_log_id, "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let Some(bytes) = self.snapshots.get(CURRENT_SNAPSHOT).map_err(snap_err)? else {
            return Ok(None);
        };
        let stored: StoredSnapshot = codec::decode(&bytes).map_err(snap_err)?;
        Ok(Some(Snapshot { meta: stored.meta, snapshot: Box::new(Cursor::new(stored.data)) }))
    }
}

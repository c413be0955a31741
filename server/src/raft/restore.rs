//! Seeding a data directory from a backup (`dls snapshot restore`), to start a new cluster
//! with the state of an old one.
//!
//! The backup is a snapshot file (`dls snapshot save`, checked whole here). Every node of
//! the new cluster is seeded from the same file with the same member list, so they all
//! start from the same snapshot: it is written as this node's current snapshot at the
//! backup's log index (under term 0, below any term the new cluster elects), with the new
//! member list as its membership, and the raft log is marked purged up to it. The nodes
//! then elect a leader as after a restart, without bootstrapping, and a node added later
//! receives the snapshot from the leader (the log before it does not exist anywhere).
//!
//! Fencing tokens: the old cluster may have granted locks after the backup was taken, with
//! tokens the backup does not know. The new cluster's next token must lie above all of
//! them, so restore raises the token counter to `--token-floor`, or by
//! [`DEFAULT_TOKEN_MARGIN`] when none is given, and says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use openraft::{CommittedLeaderId, Membership};
use sha2::{Digest, Sha256};

use super::identity::{self, Identity, IdentityError};
use super::log_store;
use super::snapshot_store::{read_snapshot, SnapshotStore};
use super::store_error::StoreError;
use super::types::{LogId, Member, NodeId, StoredMembership};

/// How far above the backup's last fencing token the new cluster starts when no
/// `--token-floor` is given: 2^40, more grants than a cluster makes in years, and a
/// jump that u64 tokens can take millions of times.
pub const DEFAULT_TOKEN_MARGIN: u64 = 1 << 40;

/// Why a restore wrote nothing, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The backup does not read back whole.
    #[error("cannot read the backup {}; nothing was restored (is it a `dls snapshot save` file?)", file.display())]
    Backup {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The data directory holds something already.
    #[error(
        "--data-dir {} is not empty: a restore seeds a new node's data directory; give an empty or new one",
        .0.display()
    )]
    NotEmpty(PathBuf),
    /// `--token-floor` would let the new cluster hand out tokens the old one did.
    #[error(
        "--token-floor {floor} is below the backup's last fencing token {backup_token}; give at least the highest \
         token the old cluster handed out"
    )]
    FloorTooLow { floor: u64, backup_token: u64 },
    /// Writing the snapshot or the raft metadata failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the identity failed.
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// What a restore wrote.
#[derive(Debug)]
pub struct Restored {
    /// The backup's log index, now the snapshot's.
    pub index: u64,
    /// The last fencing token the backup knew of.
    pub backup_token: u64,
    /// Every token of the new cluster is above this.
    pub token_floor: u64,
    /// The new cluster's id.
    pub cluster_id: String,
}

/// Seeds `data_dir` (empty or missing) for node `node_id` of a new cluster of `members`
/// from the backup `file`. Nothing is written unless the backup reads back whole and the
/// arguments are sound.
pub fn restore(
    file: &Path,
    data_dir: &Path,
    node_id: NodeId,
    members: &BTreeMap<NodeId, Member>,
    token_floor: Option<u64>,
) -> Result<Restored, RestoreError> {
    let (meta, mut state) =
        read_snapshot(file).map_err(|source| RestoreError::Backup { file: file.to_path_buf(), source })?;
    if std::fs::read_dir(data_dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(RestoreError::NotEmpty(data_dir.to_path_buf()));
    }
    let backup_token = state.table.last_token();
    let floor = match token_floor {
        Some(floor) if floor < backup_token => return Err(RestoreError::FloorTooLow { floor, backup_token }),
        Some(floor) => floor,
        None => backup_token.saturating_add(DEFAULT_TOKEN_MARGIN),
    };
    state.table.raise_token_floor(floor);
    let index = meta.last_log_id.map_or(1, |l| l.index.max(1));
    let at = LogId::new(CommittedLeaderId::new(0, 0), index);
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    state.last_applied = Some(at);
    state.membership = StoredMembership::new(Some(at), Membership::new(vec![voters], members.clone()));

    std::fs::create_dir_all(data_dir).map_err(StoreError::io("create the data directory", data_dir))?;
    SnapshotStore::open(data_dir)?.save(&RwLock::new(state)).map_err(StoreError::Snapshot)?;
    log_store::seed_purged(data_dir, at)?;
    let cluster_id = restored_cluster_id(members, &meta.snapshot_id);
    identity::store(data_dir, &Identity { cluster_id: cluster_id.clone(), node_id })?;
    Ok(Restored { index, backup_token, token_floor: floor, cluster_id })
}

/// The same on every node seeded from one backup with one member list, and unlike the old
/// cluster's id, so the old and the new cluster never take each other's raft traffic.
fn restored_cluster_id(members: &BTreeMap<NodeId, Member>, backup_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"caerus-dls restored cluster v1\n");
    h.update(identity::derive_cluster_id(members).as_bytes());
    h.update(backup_id.as_bytes());
    hex::encode(&h.finalize()[..16])
}

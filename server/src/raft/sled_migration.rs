//! Data directories of v0.1.0 kept the vote, the commit index and the purge point in sled
//! (`raft.sled`). The first start of a later version reads them once into `raft-meta` and
//! renames the sled directory `raft.sled.migrated`, so that a `raft-meta` lost later is
//! never mistaken for a directory still to migrate (reading the old vote again would roll
//! it back). sled keeps no other role: nothing that decides a vote or a commit may live in
//! a store that drops records it cannot read.

use std::path::Path;

use super::meta::{MetaFile, RaftMeta, Watermark};
use super::store_error::StoreError;
use super::types::{codec, LogId, Vote};

const SLED_DIR: &str = "raft.sled";
const MIGRATED: &str = "raft.sled.migrated";
/// v0.1.0's sled tree and keys.
const META_TREE: &str = "raft_meta";
const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

fn invalid(what: String) -> StoreError {
    StoreError::Untrusted(what)
}

/// For a data directory without `raft-meta`: migrates v0.1.0's sled, or creates the file of a
/// new node. Refuses when a raft log (or a migrated sled) shows that the file existed and is
/// lost: the vote went with it.
pub fn migrate_or_create(data_dir: &Path, log_dir: &Path) -> Result<MetaFile, StoreError> {
    let sled_dir = data_dir.join(SLED_DIR);
    if sled_dir.is_dir() {
        let meta = read_sled(&sled_dir)?;
        tracing::info!(
            vote = ?meta.vote,
            committed = ?meta.committed,
            purged = ?meta.purged,
            "migrating the raft metadata of a v0.1.0 data directory from {} to {}",
            sled_dir.display(),
            super::meta::path(data_dir).display()
        );
        let file = MetaFile::create(data_dir, meta)?;
        set_aside(data_dir)?;
        return Ok(file);
    }
    let has_log = std::fs::read_dir(log_dir)
        .map(|entries| entries.flatten().any(|e| e.path().extension().is_some_and(|x| x == "wal")))
        .unwrap_or(false);
    if has_log || data_dir.join(MIGRATED).exists() {
        return Err(invalid(format!(
            "the raft metadata file {} is missing, but {} shows this node ran before: its vote and commit index are \
             lost (it could vote twice in one term)",
            super::meta::path(data_dir).display(),
            if has_log { log_dir.display().to_string() } else { data_dir.join(MIGRATED).display().to_string() }
        )));
    }
    // A new node: nothing on disk yet.
    MetaFile::create(data_dir, RaftMeta { durable: Some(Watermark::default()), ..RaftMeta::default() })
}

/// Renames a sled directory already migrated (a crash may have come between writing
/// `raft-meta` and the rename).
pub fn set_aside(data_dir: &Path) -> Result<(), StoreError> {
    let sled_dir = data_dir.join(SLED_DIR);
    if !sled_dir.is_dir() {
        return Ok(());
    }
    let aside = data_dir.join(MIGRATED);
    if aside.exists() {
        std::fs::remove_dir_all(&aside).map_err(StoreError::io("remove", &aside))?;
    }
    std::fs::rename(&sled_dir, &aside).map_err(StoreError::io("rename", &sled_dir))?;
    crate::platform::file_io::sync_dir(data_dir).map_err(StoreError::io("sync the directory", data_dir))?;
    tracing::info!("{} renamed to {}: raft-meta holds its vote now", sled_dir.display(), aside.display());
    Ok(())
}

fn read_sled(dir: &Path) -> Result<RaftMeta, StoreError> {
    let sled_err = |source: sled::Error| StoreError::Sled { path: dir.to_path_buf(), source };
    let db = sled::Config::new().path(dir).cache_capacity(1 << 20).open().map_err(sled_err)?;
    let tree = db.open_tree(META_TREE).map_err(sled_err)?;
    let get = |key: &[u8]| tree.get(key).map_err(sled_err);
    let decode_err = |what: &str, source: bincode::Error| StoreError::Undecodable {
        what: format!("{} holds a {what} that cannot be read", dir.display()),
        source,
    };
    let vote = get(VOTE)?.map(|v| codec::decode::<Vote>(&v)).transpose().map_err(|e| decode_err("vote", e))?;
    let committed = get(COMMITTED)?
        .map(|v| codec::decode::<Option<LogId>>(&v))
        .transpose()
        .map_err(|e| decode_err("commit index", e))?
        .flatten();
    let purged =
        get(LAST_PURGED)?.map(|v| codec::decode::<LogId>(&v)).transpose().map_err(|e| decode_err("purge point", e))?;
    // No watermark: the first start judges the log by its records' own marks, as v0.1.0 did.
    Ok(RaftMeta { vote, committed, purged, durable: None, owed: None })
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    /// What v0.1.0 wrote (`log_store.rs` at ca59f73): the vote, the commit index and the
    /// purge point under these keys, bincode encoded.
    fn v010_dir(dir: &Path, vote: Vote, committed: LogId, purged: LogId) {
        let db = sled::open(dir.join(SLED_DIR)).unwrap();
        let tree = db.open_tree(META_TREE).unwrap();
        tree.insert(VOTE, codec::encode(&vote).unwrap()).unwrap();
        tree.insert(COMMITTED, codec::encode(&Some(committed)).unwrap()).unwrap();
        tree.insert(LAST_PURGED, codec::encode(&purged).unwrap()).unwrap();
        db.flush().unwrap();
    }

    #[test]
    fn a_v010_directory_is_migrated_once_and_a_lost_file_is_refused_after() {
        let dir = tempfile::tempdir().unwrap();
        let (vote, committed, purged) = (
            Vote::new_committed(4, 2),
            LogId::new(CommittedLeaderId::new(4, 2), 90),
            LogId::new(CommittedLeaderId::new(3, 1), 40),
        );
        v010_dir(dir.path(), vote, committed, purged);
        let log_dir = dir.path().join("raft-log");
        let meta = migrate_or_create(dir.path(), &log_dir).unwrap();
        assert_eq!(
            meta.get(),
            &RaftMeta { vote: Some(vote), committed: Some(committed), purged: Some(purged), durable: None, owed: None }
        );
        drop(meta);
        assert!(!dir.path().join(SLED_DIR).exists() && dir.path().join(MIGRATED).is_dir());
        assert_eq!(MetaFile::open(dir.path()).unwrap().unwrap().get().vote, Some(vote));
        // raft-meta lost afterwards: the old vote is never read again.
        std::fs::remove_file(super::super::meta::path(dir.path())).unwrap();
        let err = migrate_or_create(dir.path(), &log_dir).err().expect("refused");
        assert!(err.is_untrusted(), "{err}");
        assert!(err.to_string().contains("raft-meta is missing"), "{err}");
    }

    #[test]
    fn a_log_without_its_metadata_is_refused_and_a_new_node_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("raft-log");
        let meta = migrate_or_create(dir.path(), &log_dir).unwrap();
        assert_eq!(meta.get().durable, Some(Watermark::default()));
        drop(meta);
        std::fs::remove_file(super::super::meta::path(dir.path())).unwrap();
        std::fs::create_dir_all(&log_dir).unwrap();
        std::fs::write(log_dir.join("0000000000000001-00000000000000000000.wal"), b"x").unwrap();
        let err = migrate_or_create(dir.path(), &log_dir).err().expect("refused");
        assert!(err.to_string().contains("its vote and commit index are lost"), "{err}");
    }
}

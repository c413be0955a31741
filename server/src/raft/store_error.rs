//! Why the raft storage (the log, `raft-meta`, snapshots, the feature level) failed: which
//! file and operation, with the OS or codec error kept as the source, never formatted into
//! a string. Converted to openraft's `StorageError` with its chain (`AnyError` walks
//! `source()`), and printed whole at the top with `{:#}`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::types::{NodeId, StorageError};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operation on a file or directory failed.
    #[error("cannot {op} {}{}", path.display(), offset.map_or(String::new(), |o| format!(" at byte {o}")))]
    Io {
        op: &'static str,
        path: PathBuf,
        offset: Option<u64>,
        #[source]
        source: io::Error,
    },
    /// Bytes of the raft log that were on disk once have changed or are gone.
    #[error(transparent)]
    Damaged(#[from] Damaged),
    /// What is on disk contradicts itself or cannot be read as what it should be (a damaged
    /// `raft-meta`, metadata older than the log, a lost metadata file).
    #[error("{0}")]
    Untrusted(String),
    /// Encoding or decoding an entry, the metadata or a snapshot failed.
    #[error("cannot {op} {what}")]
    Codec {
        op: &'static str,
        what: String,
        #[source]
        source: bincode::Error,
    },
    /// Reading a record of the log failed.
    #[error("cannot read raft log record {index}")]
    ReadRecord {
        index: u64,
        #[source]
        source: io::Error,
    },
    /// Something to write is larger than its place on disk.
    #[error("{what} of {len} bytes does not fit its place on disk ({max} bytes)")]
    TooLarge { what: &'static str, len: usize, max: usize },
    /// Stored bytes that pass their checksum (or have none) do not decode: the data cannot
    /// be trusted.
    #[error("{what}")]
    Undecodable {
        what: String,
        #[source]
        source: bincode::Error,
    },
    /// v0.1.0's sled metadata cannot be read.
    #[error("cannot read {} (v0.1.0's raft metadata)", path.display())]
    Sled {
        path: PathBuf,
        #[source]
        source: sled::Error,
    },
    /// A record read back is not the one written there.
    #[error("raft log record {index} is corrupt")]
    CorruptRecord { index: u64 },
    /// The log does not hold an entry it should.
    #[error("the raft log holds no entry {0}")]
    Missing(u64),
    /// A write to the log failed before: what followed it may be missing, so nothing more
    /// is appended.
    #[error("an earlier write to the raft log failed; this node appends nothing more")]
    WriteFailedBefore,
    /// A sync failed before (fsyncgate): a later sync that succeeds proves nothing.
    #[error("an earlier sync of the raft log failed; nothing written since counts as on disk")]
    SyncFailedBefore,
    /// The sync thread is gone (it stops only when the node shuts down or it panicked).
    #[error("the raft log sync thread stopped")]
    SyncStopped,
    /// A thread of the storage cannot be started.
    #[error("cannot start the {name} thread")]
    Thread {
        name: &'static str,
        #[source]
        source: io::Error,
    },
    /// A snapshot file operation failed (the error names the file and the operation).
    #[error(transparent)]
    Snapshot(io::Error),
    /// A sync round's failure, told to every append it covered.
    #[error(transparent)]
    Shared(Arc<StoreError>),
    /// Work on the blocking pool panicked or was cancelled.
    #[error("storage task failed")]
    Task(#[source] tokio::task::JoinError),
    /// An entry of a feature level this node cannot read.
    #[error("{0}")]
    Level(String),
    /// Damage or contradictions the node cannot start with, and what the operator can do.
    #[error(
        "this node's raft log cannot be trusted, so it does not start (serving a shortened log or a rolled-back \
         vote could hand out fencing tokens twice). Restore its data directory from a backup, or re-add it empty: \
         on a running member `dls members remove {id}` and `dls members add {id} HOST:PORT/PEER_PORT`, then start \
         this node with an empty --data-dir and --join; it catches up from the leader. See docs/storage.md"
    )]
    Refused {
        id: NodeId,
        #[source]
        source: Box<StoreError>,
    },
}

impl StoreError {
    /// A failed operation `op` ("open", "write", …) on `path`.
    pub fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
        move |source| StoreError::Io { op, path: path.to_path_buf(), offset: None, source }
    }

    /// A failed operation `op` at byte `offset` of `path`.
    pub fn io_at<'a>(op: &'static str, path: &'a Path, offset: u64) -> impl FnOnce(io::Error) -> StoreError + 'a {
        move |source| StoreError::Io { op, path: path.to_path_buf(), offset: Some(offset), source }
    }

    /// A codec failure of `op` ("encode", "decode") on `what`.
    pub fn codec(op: &'static str, what: impl Into<String>) -> impl FnOnce(bincode::Error) -> StoreError {
        let what = what.into();
        move |source| StoreError::Codec { op, what, source }
    }

    /// Whether the data on disk is what is wrong (damage, contradictions), rather than
    /// the access to it: then the node refuses to start and says what the operator can do.
    pub fn is_untrusted(&self) -> bool {
        match self {
            StoreError::Damaged(_)
            | StoreError::Untrusted(_)
            | StoreError::Undecodable { .. }
            | StoreError::CorruptRecord { .. } => true,
            StoreError::Shared(e) => e.is_untrusted(),
            _ => false,
        }
    }

    /// The damage found in the raft log, if that is what this is.
    pub fn damage(&self) -> Option<&Damaged> {
        match self {
            StoreError::Damaged(d) => Some(d),
            StoreError::Shared(e) => e.damage(),
            _ => None,
        }
    }

    /// The OS error underneath, if there is one.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            StoreError::Io { source, .. } | StoreError::ReadRecord { source, .. } => Some(source),
            StoreError::Shared(e) => e.os_error(),
            StoreError::Refused { source, .. } => source.os_error(),
            _ => None,
        }
    }

    /// As openraft's error for a write of the log, with the chain as its source.
    pub fn write_logs(self) -> StorageError {
        openraft::StorageIOError::<NodeId>::write_logs(&self).into()
    }

    /// As openraft's error for a read of the log.
    pub fn read_logs(self) -> StorageError {
        openraft::StorageIOError::<NodeId>::read_logs(&self).into()
    }

    /// As openraft's error for a write of the vote.
    pub fn write_vote(self) -> StorageError {
        openraft::StorageIOError::<NodeId>::write_vote(&self).into()
    }
}

/// Damage found at recovery: bytes that were on disk once have changed or are gone.
#[derive(Clone, Debug)]
pub struct Damaged {
    pub message: String,
    /// Whether cutting the log there and fetching the rest from a leader recovers: false
    /// when the node's metadata is older than its log (its vote may be older too).
    pub cuttable: bool,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Damaged {}

impl Damaged {
    /// Damage at byte `offset` of log file `path`: `what` was found there.
    pub fn at(path: &Path, offset: u64, what: &str) -> Damaged {
        Damaged {
            message: format!("raft log file {} is damaged at byte {offset}: {what}", path.display()),
            cuttable: true,
        }
    }
}

/// `e` and its causes, `: ` between them, as `{:#}` prints an error chain: for logs.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Runs file work on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await.map_err(StoreError::Task)?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OS error reaches openraft's error and the operator: not only its text in the
    /// message, but as a source in the chain.
    #[test]
    fn the_os_error_is_the_source_and_survives_the_conversion_to_openraft() {
        let e = StoreError::io_at("write", Path::new("/d/raft-log/1.wal"), 4096)(io::Error::from(
            io::ErrorKind::PermissionDenied,
        ));
        assert_eq!(e.to_string(), "cannot write /d/raft-log/1.wal at byte 4096");
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.downcast_ref::<io::Error>().map(|e| e.kind()), Some(io::ErrorKind::PermissionDenied));
        let openraft = e.write_logs().to_string();
        assert!(openraft.contains("cannot write /d/raft-log/1.wal at byte 4096"), "{openraft}");
        assert!(openraft.contains("permission denied"), "{openraft}");
    }
}

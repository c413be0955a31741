//! The snapshot data openraft handles: a snapshot file (`snapshot_store` writes, lists and
//! installs them), streamed chunk by chunk to and from followers.

use std::fs::{self, File};
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

/// The snapshot data openraft handles: a snapshot file, read to send it to a follower or
/// written while receiving one from the leader.
#[derive(Debug)]
pub struct SnapshotFile {
    pub(super) file: tokio::fs::File,
    /// Set while receiving: the `.tmp` file the bytes go to.
    pub(super) receiving: Option<TmpFile>,
}

/// A `.tmp` file, removed when this is dropped. After a successful rename the name no
/// longer exists and the removal does nothing; after a failure, or a stream the leader
/// abandoned, it cleans up.
#[derive(Debug)]
pub struct TmpFile(pub(super) PathBuf);

impl Drop for TmpFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

impl SnapshotFile {
    pub(super) fn reading(file: File) -> SnapshotFile {
        SnapshotFile { file: tokio::fs::File::from_std(file), receiving: None }
    }

    /// Snapshot data for openraft from a file written by [`SnapshotStore::save`].
    pub fn from_saved(file: File) -> SnapshotFile {
        Self::reading(file)
    }

    /// Whether this file was made by [`SnapshotStore::begin_receiving`] (raft wrote the
    /// leader's chunks into it) rather than opened to be read.
    pub fn is_receiving(&self) -> bool {
        self.receiving.is_some()
    }

    /// Finishes receiving: waits for every write, fsyncs, and hands over the `.tmp` file.
    pub async fn finish_receiving(self) -> io::Result<TmpFile> {
        let SnapshotFile { file, receiving } = self;
        let tmp = receiving.ok_or_else(|| io::Error::other("this snapshot file was not being received"))?;
        // tokio writes in the background: sync_all waits for the writes still in flight.
        file.sync_all().await.map_err(|e| file_err("cannot fsync", &tmp.0, e))?;
        Ok(tmp)
    }
}

// openraft reads and writes snapshot data through these; they are the file's own.
impl AsyncRead for SnapshotFile {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().file).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.get_mut().file).start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.get_mut().file).poll_complete(cx)
    }
}

/// An error naming the snapshot file and what failed.
pub(super) fn file_err(what: &str, path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what} snapshot file {}: {e}", path.display()))
}

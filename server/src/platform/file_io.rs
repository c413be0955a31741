//! Files: positional I/O, syncing by path, the page cache.

use std::fs::File;
use std::io;
use std::path::Path;

/// Positional reads and writes (`read_exact_at`, `write_all_at`): on Unix pread/pwrite.
#[cfg(unix)]
pub use std::os::unix::fs::FileExt;

/// Positional reads and writes on Windows: `seek_read`/`seek_write` (ReadFile/WriteFile at
/// an offset) in a loop until the whole buffer is done, as the Unix `read_exact_at` and
/// `write_all_at` do. They move the file cursor, which the server never uses on these files.
#[cfg(windows)]
pub trait FileExt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
}

#[cfg(windows)]
impl FileExt for File {
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt as _;
        while !buf.is_empty() {
            match self.seek_read(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt as _;
        while !buf.is_empty() {
            match self.seek_write(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer")),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Makes the names in `dir` (a file created, renamed or removed) survive a crash: fsync of
/// the directory.
#[cfg(unix)]
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A no-op on Windows: a directory cannot be opened as a file there (`File::open` fails),
/// and NTFS journals its metadata, so a rename or a new file's name is not lost the way an
/// un-synced directory entry is on ext4 or XFS.
#[cfg(windows)]
pub fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Syncs the file at `path` to the disk.
#[cfg(unix)]
pub fn sync_file(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Windows flushes only a handle that may write (FlushFileBuffers needs write access).
#[cfg(windows)]
pub fn sync_file(path: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path)?.sync_all()
}

/// Drops the cached pages of `file`, so the next reads see what the disk holds (see
/// `raft::wal::scan`).
#[cfg(all(unix, not(target_vendor = "apple")))]
pub fn drop_cached_pages(file: &File) -> io::Result<()> {
    Ok(rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)?)
}

/// A no-op on Windows and macOS: Windows has no call to drop a file's clean cached pages,
/// macOS no posix_fadvise (a Mac runs dls for development; its page cache is taken as it is).
#[cfg(any(windows, target_vendor = "apple"))]
pub fn drop_cached_pages(_file: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_io_reads_back_what_it_wrote_at_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        file.write_all_at(b"hello", 10).unwrap();
        let mut buf = [0u8; 5];
        file.read_exact_at(&mut buf, 10).unwrap();
        assert_eq!(&buf, b"hello");
        let mut past = [0u8; 4];
        assert_eq!(file.read_exact_at(&mut past, 13).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        sync_file(&path).unwrap();
        sync_dir(dir.path()).unwrap();
        drop_cached_pages(&file).unwrap();
    }
}

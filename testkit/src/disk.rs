//! Disk faults: data directories on small tmpfs mounts that can be filled up, and the
//! torn tail a power cut leaves in the raft log (docs/storage.md, "Log recovery").

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a directory, unmounted when dropped (lazily: a node still holding
/// files open must not keep the mount behind).
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount(8) syntax, e.g. "256m") on `dir`. Needs root; the
    /// error says why it could not.
    pub fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("cannot mount a tmpfs (needs root): {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes a file that takes all the space left; returns it (delete it to free the space).
    pub fn fill(&self) -> std::io::Result<PathBuf> {
        let path = self.0.join("filler");
        let mut f = File::create(&path)?;
        let chunk = vec![0xa5u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // The last partial chunk may have fit byte by byte.
        while f.write_all(&[0xa5]).is_ok() {}
        Ok(path)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Removes everything inside `dir` but not `dir` itself (it may be a mount point).
pub fn clear_dir(dir: &Path) -> std::io::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// The raft log's segment layout, as far as finding where its records end needs it
/// (`server/src/raft/wal.rs`): a 64-byte segment header, then records of a 24-byte header
/// `[crc32: u32][len: u32][index: u64][durable: u64]` and `len` payload bytes, each padded
/// to 8 bytes; zeros after the last record.
const SEGMENT_HEADER: u64 = 64;
const RECORD_HEADER: u64 = 24;

/// What a crash in the middle of a write leaves: the start of a record that never made it
/// to disk whole, right after the last record of the newest log segment. Call it on a
/// stopped node. Returns the file, the offset and how many bytes were written.
pub fn tear_tail(data_dir: &Path, garbage: &[u8]) -> std::io::Result<(PathBuf, u64, usize)> {
    let dir = data_dir.join("raft-log");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    // Names are `<seq>-<first index>.wal`, zero padded: the last in order is the newest.
    segments.sort();
    let Some(last) = segments.pop() else {
        return Err(std::io::Error::other(format!("no log segment in {}", dir.display())));
    };
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&last)?;
    let size = file.metadata()?.len();
    let mut at = SEGMENT_HEADER;
    let mut header = [0u8; RECORD_HEADER as usize];
    while at + RECORD_HEADER <= size {
        file.read_exact_at(&mut header, at)?;
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as u64;
        if len == 0 {
            break;
        }
        at += (RECORD_HEADER + len).div_ceil(8) * 8;
    }
    file.write_all_at(garbage, at)?;
    file.sync_all()?;
    Ok((last, at, garbage.len()))
}

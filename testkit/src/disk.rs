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

/// The raft log's segment layout, as far as finding its records needs it
/// (`server/src/raft/wal.rs`): a 64-byte segment header, then records of a 24-byte header
/// `[crc32: u32][len: u32][index: u64][durable: u64]` and `len` payload bytes, each padded
/// to 8 bytes; zeros after the last record.
pub const SEGMENT_HEADER: u64 = 64;
pub const RECORD_HEADER: u64 = 24;

/// One record of a log segment: where it starts and its payload's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub len: u64,
    /// The log position (segment seq << 32 | byte offset) up to which the log was on disk,
    /// and recorded so, when the record was written.
    pub durable: u64,
}

impl Record {
    /// One past its last byte (padding included).
    pub fn end(&self) -> u64 {
        self.offset + (RECORD_HEADER + self.len).div_ceil(8) * 8
    }
}

/// The raft log's segment files in `data_dir`, oldest first (names are `<seq>-<first
/// index>.wal`, zero padded).
pub fn segments(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = data_dir.join("raft-log");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    Ok(segments)
}

/// The records of a segment in order, followed by their lengths (checksums unchecked),
/// up to the first zero length.
pub fn records(segment: &Path) -> std::io::Result<Vec<Record>> {
    let file = std::fs::File::open(segment)?;
    let size = file.metadata()?.len();
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER;
    let mut header = [0u8; RECORD_HEADER as usize];
    while at + RECORD_HEADER <= size {
        file.read_exact_at(&mut header, at)?;
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as u64;
        if len == 0 {
            break;
        }
        let durable = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        let record = Record { offset: at, len, durable };
        out.push(record);
        at = record.end();
    }
    Ok(out)
}

/// The records of `segment` that were acknowledged for sure: those before the highest
/// position a record of it says was on disk (a later record's `durable` mark vouches for
/// them). Damage to one of these must never be trimmed as a torn tail.
pub fn acknowledged(segment: &Path) -> std::io::Result<Vec<Record>> {
    let seq: u64 = segment
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('-').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("{} is not a log segment", segment.display())))?;
    let records = records(segment)?;
    let vouched = records.iter().map(|r| r.durable).max().unwrap_or(0);
    Ok(records.into_iter().filter(|r| (seq << 32) | r.end() <= vouched).collect())
}

/// The newest segment that holds records, and its last record.
pub fn last_record(data_dir: &Path) -> std::io::Result<(PathBuf, Record)> {
    for segment in segments(data_dir)?.into_iter().rev() {
        if let Some(last) = records(&segment)?.pop() {
            return Ok((segment, last));
        }
    }
    Err(std::io::Error::other(format!("no log record in {}", data_dir.join("raft-log").display())))
}

/// Flips the bits of the byte at `offset` of `path`.
pub fn flip_byte(path: &Path, offset: u64) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let mut b = [0u8];
    file.read_exact_at(&mut b, offset)?;
    file.write_all_at(&[!b[0]], offset)?;
    file.sync_all()
}

/// Writes `len` zeros at `offset` of `path`.
pub fn zero(path: &Path, offset: u64, len: u64) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all_at(&vec![0u8; len as usize], offset)?;
    file.sync_all()
}

/// Copies the directory `from` to `to` (created), keeping sparse files sparse (log
/// segments are 64 MiB files of mostly holes).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = Command::new("cp").arg("-a").arg("--sparse=always").arg(from).arg(to).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("cp -a {} {} failed: {status}", from.display(), to.display())))
    }
}

/// What a crash in the middle of a write leaves: the start of a record that never made it
/// to disk whole, right after the last record of the newest log segment. Call it on a
/// stopped node. Returns the file, the offset and how many bytes were written.
pub fn tear_tail(data_dir: &Path, garbage: &[u8]) -> std::io::Result<(PathBuf, u64, usize)> {
    let Some(last) = segments(data_dir)?.pop() else {
        return Err(std::io::Error::other(format!("no log segment in {}", data_dir.join("raft-log").display())));
    };
    let at = records(&last)?.last().map_or(SEGMENT_HEADER, Record::end);
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&last)?;
    file.write_all_at(garbage, at)?;
    file.sync_all()?;
    Ok((last, at, garbage.len()))
}

//! Snapshots of the replicated state as files: `<data_dir>/snapshots/<id>.snap`.
//!
//! A snapshot of 100,000 locks is ~35 MB, so no full copy of it is ever held in memory:
//! it is written straight from the table through a small buffer, sent to a follower chunk
//! by chunk from disk, and read back at start through a small buffer.
//!
//! File layout, which is also exactly what a follower receives (so it stores the bytes as
//! they come and checks them at install):
//!
//! ```text
//! MAGIC (8 bytes) | bincode(SnapshotMeta) | bincode(Replicated) | bincode(sections) | trailer
//! trailer = [body length: u64][crc32 of the body: u32][END (4 bytes)], little endian
//! ```
//!
//! where the body is everything before the trailer. A file cut short, with bytes changed,
//! or with anything after the trailer is refused as a whole: a snapshot is never served
//! or installed in part.
//!
//! At start the newest snapshot that reads back whole is used. A damaged newer one is
//! renamed `<id>.snap.damaged` (kept for inspection) and the node starts from an older
//! snapshot, or from an empty table, only when the raft log still holds every entry after
//! it; otherwise it refuses to start (see `docs/storage.md`).
//!
//! Crash safety: a file is written as `<unique>.tmp`, fsynced, renamed to `<id>.snap`, and
//! the directory fsynced; only then are older `.snap` files deleted (and only then does
//! raft purge its log up to the snapshot). A crash leaves the old or the new snapshot whole,
//! plus maybe a `.tmp`, which [`SnapshotStore::open`] removes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use bincode::Options;

use super::replicated::Replicated;
use super::snapshot_file::{file_err, SnapshotFile, TmpFile};
use super::snapshot_schedule::LastSnapshot;
use super::store_error::StoreError;
use super::types::SnapshotMeta;

/// Marks a snapshot file of this format; bump the digit if the layout ever changes.
/// Version 4 added the sections: named parts of the table kept outside its serde form
/// (`LockTable::sections`), so new state needs no new layout. Version 3 files (no
/// sections) still read.
const MAGIC: &[u8; 8] = b"CDLSNAP4";
const MAGIC_V3: &[u8; 8] = b"CDLSNAP3";
/// Ends the trailer.
const END: &[u8; 4] = b"CDLE";
const TRAILER: usize = 16;
/// Most bytes a snapshot's header (its meta: ids and the membership) may decode from.
const MAX_HEADER: u64 = 1 << 20;
const DAMAGED_EXT: &str = "damaged";
const SNAP_EXT: &str = "snap";
const TMP_EXT: &str = "tmp";
/// Buffer between the encoder and the file: large enough that writes cost little next to
/// encoding, small next to the table.
const IO_BUF: usize = 1024 * 1024;

/// The snapshot files of one node.
pub struct SnapshotStore {
    dir: PathBuf,
    /// The newest complete snapshot. The mutex also keeps a rename-and-delete from running
    /// between looking up the current file and opening it.
    current: Mutex<Option<Current>>,
}

#[derive(Clone)]
struct Current {
    meta: SnapshotMeta,
    path: PathBuf,
    /// The file's size, for the snapshot schedule.
    bytes: u64,
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// A snapshot written by [`SnapshotStore::save`].
pub struct Saved {
    pub meta: SnapshotMeta,
    /// The committed file, open at its start (for openraft).
    pub file: File,
    pub bytes: u64,
    /// How long the state lock was held: applies wait this long.
    pub lock_held: Duration,
    /// Encoding, writing and fsyncs, lock included.
    pub total: Duration,
}

impl SnapshotStore {
    /// Opens `<data_dir>/snapshots`, creating it, removing `.tmp` files a crash left, and
    /// finding the newest snapshot (headers only; [`load_current`](Self::load_current)
    /// decodes it).
    pub fn open(data_dir: &Path) -> Result<SnapshotStore, StoreError> {
        let dir = data_dir.join("snapshots");
        fs::create_dir_all(&dir).map_err(StoreError::io("create the snapshot directory", &dir))?;
        let mut newest: Option<Current> = None;
        for path in list(&dir).map_err(StoreError::Snapshot)? {
            match path.extension().and_then(|e| e.to_str()) {
                Some(TMP_EXT) => {
                    tracing::info!(file = %path.display(), "removing an unfinished snapshot file (left by a crash)");
                    fs::remove_file(&path).map_err(StoreError::io("remove", &path))?;
                }
                Some(SNAP_EXT) => {
                    // A file whose header cannot be read is judged by `load_current`.
                    let file = open_read(&path).map_err(StoreError::Snapshot)?;
                    let Ok(meta) = read_header(&mut BufReader::new(file)) else { continue };
                    if newest.as_ref().is_none_or(|n| meta.last_log_id >= n.meta.last_log_id) {
                        newest = Some(Current { meta, bytes: file_len(&path), path });
                    }
                }
                _ => {}
            }
        }
        Ok(SnapshotStore { dir, current: Mutex::new(newest) })
    }

    pub fn current_meta(&self) -> Option<SnapshotMeta> {
        self.lock_current().as_ref().map(|c| c.meta.clone())
    }

    /// The current snapshot's last index and size (zeros when there is none).
    pub fn last(&self) -> LastSnapshot {
        self.lock_current().as_ref().map_or_else(LastSnapshot::default, |c| LastSnapshot {
            index: c.meta.last_log_id.map_or(0, |l| l.index),
            bytes: c.bytes,
        })
    }

    /// Decodes the newest snapshot that reads back whole, streaming from its file, makes it
    /// the current one and deletes older files. `log_first` is the first index the raft
    /// log holds: the snapshot must reach it, or the entries between are lost. Damaged
    /// files newer than the one used are kept as `.damaged`; if none can be used and the
    /// log does not start at 0, the node must not start.
    pub fn load_current(&self, log_first: u64) -> Result<Option<Replicated>, StoreError> {
        let mut found: Vec<(Option<SnapshotMeta>, PathBuf)> = list(&self.dir)
            .map_err(StoreError::Snapshot)?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == SNAP_EXT))
            .map(|p| (File::open(&p).ok().and_then(|f| read_header(&mut BufReader::new(f)).ok()), p))
            .collect();
        // Newest first; a file without a readable header might be the newest.
        found.sort_by(|a, b| match (&a.0, &b.0) {
            (None, _) | (_, None) => a.0.is_some().cmp(&b.0.is_some()),
            (Some(x), Some(y)) => y.last_log_id.cmp(&x.last_log_id),
        });
        let mut damaged = Vec::new();
        for (_, path) in found {
            match read_snapshot(&path) {
                Ok((meta, state)) => {
                    let reaches = meta.last_log_id.map_or(log_first == 0, |l| l.index + 1 >= log_first);
                    if !reaches {
                        let why = format!(
                            "snapshot file {} ends at {} but the raft log starts at index {log_first}",
                            path.display(),
                            meta.last_log_id.map_or("the start".into(), |l| format!("index {}", l.index))
                        );
                        return Err(refusal(&why, &damaged));
                    }
                    self.set_aside(&damaged, &meta).map_err(StoreError::Snapshot)?;
                    *self.lock_current() = Some(Current { meta, path: path.clone(), bytes: file_len(&path) });
                    self.remove_all_but(&path);
                    return Ok(Some(state));
                }
                Err(e) => damaged.push((path, e)),
            }
        }
        if damaged.is_empty() && log_first > 0 {
            // The log was purged (or moved forward by an installed snapshot): the state
            // before it lived in a snapshot file that is gone.
            let why = format!(
                "there is no snapshot file in {} but the raft log starts at index {log_first}",
                self.dir.display()
            );
            return Err(refusal(&why, &damaged));
        }
        if damaged.is_empty() {
            return Ok(None);
        }
        if log_first > 0 {
            return Err(refusal(&format!("the raft log starts at index {log_first}"), &damaged));
        }
        *self.lock_current() = None;
        let empty = SnapshotMeta { last_log_id: None, last_membership: Default::default(), snapshot_id: String::new() };
        self.set_aside(&damaged, &empty).map_err(StoreError::Snapshot)?;
        Ok(None)
    }

    /// Renames damaged snapshot files to `.damaged` (kept for inspection, never read
    /// again), saying what the node starts from instead.
    fn set_aside(&self, damaged: &[(PathBuf, io::Error)], instead: &SnapshotMeta) -> io::Result<()> {
        for (path, e) in damaged {
            let aside = path.with_extension(format!("{SNAP_EXT}.{DAMAGED_EXT}"));
            tracing::warn!(
                file = %path.display(),
                renamed_to = %aside.display(),
                starting_from = %instead.last_log_id.map_or("an empty table".into(), |l| format!("the snapshot at {l}")),
                "a snapshot file is damaged ({e}); starting from an older state and the raft log, which holds every entry after it"
            );
            fs::rename(path, &aside).map_err(|e| file_err("cannot rename", path, e))?;
        }
        if !damaged.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Writes a snapshot of `state` and makes it the current one. The read lock is held
    /// only while the state is copied (see [`freeze`]); the encoding, the fsyncs and the
    /// rename run after it is released, while applies go on.
    pub fn save(&self, state: &RwLock<Replicated>) -> io::Result<Saved> {
        self.write(freeze(state))
    }

    /// Writes a copy taken by [`freeze`] and makes it the current snapshot.
    pub fn write(&self, frozen: Frozen) -> io::Result<Saved> {
        let Frozen { meta, state, lock_held, started } = frozen;
        let (tmp, file) = self.create_tmp()?;
        let file = encode(file, &meta, &state).map_err(|e| file_err("cannot write", &tmp.0, e))?;
        let bytes = file.metadata().map_err(|e| file_err("cannot stat", &tmp.0, e))?.len();
        let file = self.commit(tmp, file, &meta)?;
        Ok(Saved { meta, file, bytes, lock_held, total: started.elapsed() })
    }

    /// Encodes `state` into a snapshot file that is never made current (a backup): an
    /// unnamed file (its `.tmp` name is removed at once), open at its start, with the meta.
    pub fn backup(&self, state: &RwLock<Replicated>) -> io::Result<(SnapshotMeta, File)> {
        let Frozen { meta, state, .. } = freeze(state);
        let (tmp, file) = self.create_tmp()?;
        let mut file = encode(file, &meta, &state).map_err(|e| file_err("cannot write", &tmp.0, e))?;
        drop(tmp);
        file.seek(SeekFrom::Start(0))?;
        Ok((meta, file))
    }

    /// A fresh `.tmp` file for a snapshot streamed in from the leader.
    pub fn begin_receiving(&self) -> io::Result<SnapshotFile> {
        let (tmp, file) = self.create_tmp()?;
        Ok(SnapshotFile { file: tokio::fs::File::from_std(file), receiving: Some(tmp) })
    }

    /// Checks and decodes a snapshot received from the leader, then makes it the current
    /// one. Returns the decoded state for the caller to install.
    pub fn install(&self, received: TmpFile, meta: &SnapshotMeta) -> io::Result<Replicated> {
        let (header, state) = read_snapshot(&received.0)?;
        if header != *meta {
            return Err(file_err(
                "received",
                &received.0,
                format!("the file's header says {header} but the leader announced {meta}"),
            ));
        }
        let file = open_read(&received.0)?;
        self.commit(received, file, meta)?;
        Ok(state)
    }

    /// The current snapshot, opened for sending to a follower.
    pub fn open_current(&self) -> io::Result<Option<(SnapshotMeta, SnapshotFile)>> {
        let current = self.lock_current();
        let Some(c) = current.as_ref() else { return Ok(None) };
        let file = open_read(&c.path)?;
        Ok(Some((c.meta.clone(), SnapshotFile::reading(file))))
    }

    fn lock_current(&self) -> std::sync::MutexGuard<'_, Option<Current>> {
        self.current.lock().expect("snapshot store lock")
    }

    fn path_of(&self, meta: &SnapshotMeta) -> PathBuf {
        self.dir.join(format!("{}.{SNAP_EXT}", file_stem(&meta.snapshot_id)))
    }

    /// A new, uniquely named `.tmp` file in the snapshot directory.
    fn create_tmp(&self) -> io::Result<(TmpFile, File)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!("{}-{}.{TMP_EXT}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let path = self.dir.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| file_err("cannot create", &path, e))?;
        Ok((TmpFile(path), file))
    }

    /// Makes a fully written `.tmp` file the current snapshot: fsync, rename, fsync the
    /// directory (so the new name survives a crash), then delete the previous snapshot. A
    /// snapshot older than the current one (a build that raced an install) is dropped.
    /// Returns the file, positioned at its start.
    fn commit(&self, tmp: TmpFile, mut file: File, meta: &SnapshotMeta) -> io::Result<File> {
        file.sync_all().map_err(|e| file_err("cannot fsync", &tmp.0, e))?;
        let path = self.path_of(meta);
        let mut current = self.lock_current();
        if current.as_ref().is_some_and(|c| c.meta.last_log_id > meta.last_log_id) {
            tracing::info!(snapshot = %meta, "dropping a snapshot older than the current one");
        } else {
            fs::rename(&tmp.0, &path).map_err(|e| file_err("cannot rename into place", &tmp.0, e))?;
            sync_dir(&self.dir)?;
            let bytes = file.metadata().map_or(0, |m| m.len());
            let previous = current.replace(Current { meta: meta.clone(), path: path.clone(), bytes });
            if let Some(previous) = previous.filter(|p| p.path != path) {
                if let Err(e) = fs::remove_file(&previous.path) {
                    tracing::warn!(file = %previous.path.display(), error = %e, "cannot delete an old snapshot file");
                }
            }
        }
        file.seek(SeekFrom::Start(0)).map_err(|e| file_err("cannot seek", &path, e))?;
        Ok(file)
    }

    /// Deletes every snapshot file except `keep` (older ones a crash left behind).
    fn remove_all_but(&self, keep: &Path) {
        let Ok(paths) = list(&self.dir) else { return };
        for path in paths.into_iter().filter(|p| p != keep && p.extension().is_some_and(|e| e == SNAP_EXT)) {
            tracing::info!(file = %path.display(), "deleting an older snapshot file");
            let _ = fs::remove_file(&path);
        }
    }
}

/// The meta of a snapshot of `st`. The id is unique even for two snapshots at the same
/// log index (a follower must never splice chunks of two different files).
fn meta_of(st: &Replicated) -> SnapshotMeta {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros();
    let snapshot_id = match st.last_applied {
        Some(l) => format!("{}-{}-{stamp}", l.leader_id, l.index),
        None => format!("empty-{stamp}"),
    };
    SnapshotMeta { last_log_id: st.last_applied, last_membership: st.membership.clone(), snapshot_id }
}

/// A file name for a snapshot id (ids come from the leader: keep only safe characters).
fn file_stem(snapshot_id: &str) -> String {
    snapshot_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// One consistent state to encode, with its meta; see [`freeze`].
pub struct Frozen {
    meta: SnapshotMeta,
    state: Replicated,
    /// How long the state's read lock was held to copy it.
    lock_held: Duration,
    started: Instant,
}

/// Copies `state` under its read lock. The copy is cheap: the table's records are shared
/// (`Arc`), so it costs the maps' nodes, not the records (a few ms for 100,000
/// transactions); a record an apply changes while the copy is encoded is copied then,
/// alone.
pub fn freeze(state: &RwLock<Replicated>) -> Frozen {
    let started = Instant::now();
    let st = state.read().expect("state lock");
    let locked = Instant::now();
    let meta = meta_of(&st);
    let copy = st.clone();
    Frozen { meta, state: copy, lock_held: locked.elapsed(), started }
}

/// Writes a whole snapshot file: header, state, sections, trailer.
fn encode(file: File, meta: &SnapshotMeta, st: &Replicated) -> io::Result<File> {
    let mut out = summed_writer(file);
    write_header(&mut out, meta)?;
    write_state(&mut out, st)?;
    finish(out)
}

fn write_header(out: &mut impl Write, meta: &SnapshotMeta) -> io::Result<()> {
    out.write_all(MAGIC)?;
    bincode::serialize_into(out, meta).map_err(io::Error::other)
}

/// Writes the state and its sections.
fn write_state(out: &mut impl Write, st: &Replicated) -> io::Result<()> {
    bincode::serialize_into(&mut *out, st).map_err(io::Error::other)?;
    bincode::serialize_into(out, &st.table.sections()).map_err(io::Error::other)
}

/// Reads the magic and the meta; the reader is left at the start of the state. Also says
/// whether the file has sections (version 4).
fn read_header_versioned(input: &mut impl Read) -> io::Result<(SnapshotMeta, bool)> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    let sections = match &magic {
        m if m == MAGIC => true,
        m if m == MAGIC_V3 => false,
        _ => {
            return Err(io::Error::other("not a Caerus snapshot file of a version this dls reads (wrong magic bytes)"))
        }
    };
    // A header is small: a damaged length in it must not make the decoder allocate (the
    // options are those of `bincode::deserialize_from`, with a limit).
    let options = bincode::DefaultOptions::new().with_fixint_encoding().allow_trailing_bytes().with_limit(MAX_HEADER);
    Ok((options.deserialize_from(input).map_err(io::Error::other)?, sections))
}

/// Checks a snapshot file's trailer and checksum before anything in it is decoded: a
/// damaged length inside could otherwise send the decoder after gigabytes that are not
/// there (it allocates what the length says) long before the trailer is reached.
fn verify(path: &Path) -> io::Result<()> {
    let mut file = open_read(path)?;
    let size = file.metadata().map_err(|e| file_err("cannot stat", path, e))?.len();
    let refuse = |what: &str| Err(file_err("refusing", path, what));
    if size < (MAGIC.len() + TRAILER) as u64 {
        return refuse("shorter than a header and a trailer (cut short)");
    }
    let body = size - TRAILER as u64;
    let mut trailer = [0u8; TRAILER];
    file.seek(SeekFrom::Start(body)).and_then(|_| file.read_exact(&mut trailer))?;
    if &trailer[12..16] != END {
        return refuse("no end marker where the trailer belongs (cut short or damaged)");
    }
    if u64::from_le_bytes(trailer[0..8].try_into().expect("8 bytes")) != body {
        return refuse("the trailer gives another length (damaged)");
    }
    file.seek(SeekFrom::Start(0))?;
    let mut summed = Summing::new(BufReader::with_capacity(IO_BUF, file.take(body)));
    io::copy(&mut summed, &mut io::sink()).map_err(|e| file_err("cannot read", path, e))?;
    if u32::from_le_bytes(trailer[8..12].try_into().expect("4 bytes")) != summed.crc.finalize() {
        return refuse("checksum mismatch (damaged)");
    }
    Ok(())
}

fn read_header(input: &mut impl Read) -> io::Result<SnapshotMeta> {
    read_header_versioned(input).map(|(meta, _)| meta)
}

/// Decodes a whole snapshot file through a small buffer and checks its trailer: the
/// state is returned only if every byte of the file is as written.
pub fn read_snapshot(path: &Path) -> io::Result<(SnapshotMeta, Replicated)> {
    verify(path)?;
    let mut input = Summing::new(BufReader::with_capacity(IO_BUF, open_read(path)?));
    let (meta, has_sections) = read_header_versioned(&mut input).map_err(|e| file_err("cannot read", path, e))?;
    let mut state: Replicated = bincode::deserialize_from(&mut input)
        .map_err(|e| file_err("cannot decode", path, format!("{e} (cut short or damaged)")))?;
    if has_sections {
        let sections: Vec<(String, Vec<u8>)> = bincode::deserialize_from(&mut input)
            .map_err(|e| file_err("cannot decode the sections of", path, format!("{e} (cut short or damaged)")))?;
        state.table.restore_sections(sections).map_err(|e| file_err("cannot restore", path, e.to_string()))?;
    }
    let (len, crc) = (input.len, input.crc.clone().finalize());
    let mut trailer = [0u8; TRAILER];
    let mut rest = input.inner;
    rest.read_exact(&mut trailer)
        .map_err(|e| file_err("cannot read the trailer of", path, format!("{e} (cut short?)")))?;
    let mut extra = [0u8; 1];
    let problem = if &trailer[12..16] != END {
        Some("no end marker where the trailer belongs (cut short or damaged)".to_string())
    } else if u64::from_le_bytes(trailer[0..8].try_into().expect("8 bytes")) != len {
        Some("the trailer gives another length (damaged)".into())
    } else if u32::from_le_bytes(trailer[8..12].try_into().expect("4 bytes")) != crc {
        Some("checksum mismatch (damaged)".into())
    } else if rest.read(&mut extra)? != 0 {
        Some("bytes after the trailer".into())
    } else {
        None
    };
    match problem {
        Some(p) => Err(file_err("refusing", path, p)),
        None => Ok((meta, state)),
    }
}

/// Counts and checksums the bytes that pass through, either way.
struct Summing<T> {
    inner: T,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<T> Summing<T> {
    fn new(inner: T) -> Self {
        Summing { inner, crc: crc32fast::Hasher::new(), len: 0 }
    }
}

/// A snapshot file being written: the buffer sits *outside* the checksum, so the encoder's
/// many small writes are plain copies and the checksum runs over whole 1 MiB blocks (with
/// the checksum outside, every field's write updated it on its own: 70–90 ms against
/// 34–43 ms to encode a 33 MB table; figures in docs/bench.md).
type SummedWriter<W> = BufWriter<Summing<W>>;

fn summed_writer<W: Write>(file: W) -> SummedWriter<W> {
    BufWriter::with_capacity(IO_BUF, Summing::new(file))
}

/// Writes the trailer (length and checksum of everything before it) and returns the file.
fn finish<W: Write>(out: SummedWriter<W>) -> io::Result<W> {
    let mut summed = out.into_inner().map_err(|e| e.into_error())?;
    let mut trailer = Vec::with_capacity(TRAILER);
    trailer.extend_from_slice(&summed.len.to_le_bytes());
    trailer.extend_from_slice(&summed.crc.clone().finalize().to_le_bytes());
    trailer.extend_from_slice(END);
    summed.inner.write_all(&trailer)?;
    Ok(summed.inner)
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Summing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// A refusal to start because of damaged snapshot files, with what the operator can do.
fn refusal(why: &str, damaged: &[(PathBuf, io::Error)]) -> StoreError {
    let files: Vec<String> = damaged.iter().map(|(_, e)| e.to_string()).collect();
    StoreError::Untrusted(format!(
        "{}; {why}, so no snapshot and log together hold the replicated state and this node does not start \
         (starting from less could hand out fencing tokens twice). Restore its data directory from a backup, or \
         re-add it empty: on a running member `dls members remove <node id>` and `dls members add <node id> \
         HOST:PORT/PEER_PORT`, then start this node with an empty --data-dir and --join; it catches up from the \
         leader. See docs/storage.md.",
        if files.is_empty() { "no usable snapshot".to_string() } else { files.join("; ") }
    ))
}

fn open_read(path: &Path) -> io::Result<File> {
    File::open(path).map_err(|e| file_err("cannot open", path, e))
}

fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).map_err(|e| file_err("cannot list", dir, e))?;
    entries.map(|e| e.map(|e| e.path()).map_err(|e| file_err("cannot list", dir, e))).collect()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    crate::platform::file_io::sync_dir(dir).map_err(|e| file_err("cannot fsync directory", dir, e))
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;
    use crate::raft::types::LogId;

    fn state_at(index: u64) -> RwLock<Replicated> {
        RwLock::new(Replicated {
            last_applied: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
            ..Default::default()
        })
    }

    fn applied(state: &Option<Replicated>) -> Option<u64> {
        state.as_ref().and_then(|s| s.last_applied).map(|l| l.index)
    }

    /// A store holding snapshots at 10 and then 20 (the older file kept, as a crash
    /// between the rename and the delete leaves it), and the newer file's path.
    fn two_snapshots(dir: &Path) -> PathBuf {
        let store = SnapshotStore::open(dir).unwrap();
        let older = store.save(&state_at(10)).unwrap();
        let kept = std::fs::read(store.path_of(&older.meta)).unwrap();
        let newer = store.save(&state_at(20)).unwrap();
        std::fs::write(store.path_of(&older.meta), kept).unwrap();
        store.path_of(&newer.meta)
    }

    fn cut(path: &Path, by: u64) {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len - by).unwrap();
    }

    #[test]
    fn a_whole_snapshot_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let newer = two_snapshots(dir.path());
        let store = SnapshotStore::open(dir.path()).unwrap();
        assert_eq!(applied(&store.load_current(15).unwrap()), Some(20));
        assert_eq!(list(&dir.path().join("snapshots")).unwrap(), vec![newer], "the older file is deleted");
    }

    #[test]
    fn sections_round_trip_and_version_3_files_still_read() {
        use crate::locks::{Begin, BeginOption, Command, LogCommand};
        let dir = tempfile::tempdir().unwrap();
        let state = state_at(10);
        let begin = Begin { request_id: None, lease_ms: 5_000, priority: 0, name: String::new(), owner: String::new() };
        let cmd = Command::BeginWith { begin, options: vec![BeginOption::MaxDurationMs(60_000)], acquire: None };
        state.write().unwrap().table.apply(&LogCommand { now_ms: 1_000, cmd });
        let store = SnapshotStore::open(dir.path()).unwrap();
        let saved = store.save(&state).unwrap();
        let (_, read) = read_snapshot(&store.path_of(&saved.meta)).unwrap();
        assert_eq!(read.table.deadline(1), Some(61_000), "the deadline comes back from its section");

        // A file of the previous format: no sections after the state.
        let path = dir.path().join("v3.snap");
        let mut out = summed_writer(File::create(&path).unwrap());
        out.write_all(MAGIC_V3).unwrap();
        bincode::serialize_into(&mut out, &saved.meta).unwrap();
        bincode::serialize_into(&mut out, &*state.read().unwrap()).unwrap();
        finish(out).unwrap();
        let (meta, read) = read_snapshot(&path).unwrap();
        assert_eq!(meta.last_log_id, saved.meta.last_log_id);
        assert!(read.table.txn(1).is_some() && read.table.deadline(1).is_none());
    }

    /// A snapshot is the state at the moment it was copied: applies that run while the copy
    /// is encoded (they share its records until they change one) change neither the file
    /// nor, through the copy, the live table.
    #[test]
    fn a_snapshot_holds_the_state_it_copied_while_applies_go_on() {
        use crate::locks::{AcquireStatus, Command, LockKey, LockMode, LogCommand, Outcome, TxnState, VictimPolicy};
        let dir = tempfile::tempdir().unwrap();
        let state = state_at(10);
        let apply = |cmd| state.write().unwrap().table.apply(&LogCommand { now_ms: 1_000, cmd });
        let begin = |request_id: &str| Command::Begin {
            request_id: Some(request_id.into()),
            lease_ms: 5_000,
            priority: 0,
            name: "".into(),
            owner: "".into(),
        };
        let Outcome::Begun { txn, .. } = apply(begin("b1")) else { panic!("begun") };
        let lock = LockKey::new("ns", "k");
        let acquire = Command::Acquire {
            txn,
            request_id: "a1".into(),
            lock: lock.clone(),
            mode: LockMode::Exclusive,
            wait_ms: 0,
            victim_policy: VictimPolicy::default(),
        };
        assert!(matches!(apply(acquire), Outcome::Acquire(AcquireStatus::Granted { .. })));

        let Frozen { meta, state: copy, .. } = freeze(&state);
        // While the copy is being encoded: the holder commits and a new transaction begins.
        apply(Command::End { txn, request_id: None, commit: true });
        let Outcome::Begun { txn: later, .. } = apply(begin("b2")) else { panic!("begun") };
        let path = dir.path().join("copy.snap");
        encode(File::create(&path).unwrap(), &meta, &copy).unwrap();
        let (_, read) = read_snapshot(&path).unwrap();
        assert_eq!(read.table.txn(txn).unwrap().state, TxnState::Active, "the file has the holder as it was copied");
        assert!(read.table.key(&lock).is_some_and(|k| k.holders.contains_key(&txn)), "and its lock");
        assert!(read.table.txn(later).is_none(), "nothing begun after the copy");
        assert!(read.table.knows_begin("b1") && !read.table.knows_begin("b2"));

        let live = state.read().unwrap();
        assert_eq!(live.table.txn(txn).unwrap().state, TxnState::Committed, "the live table kept its changes");
        assert!(live.table.key(&lock).is_none_or(|k| k.holders.is_empty()));
        assert!(live.table.knows_begin("b2"));
    }

    #[test]
    fn a_cut_or_changed_snapshot_is_never_read_in_part() {
        for damage in ["cut by one byte", "cut to half", "one byte changed", "bytes appended"] {
            let dir = tempfile::tempdir().unwrap();
            let store = SnapshotStore::open(dir.path()).unwrap();
            let saved = store.save(&state_at(10)).unwrap();
            let path = store.path_of(&saved.meta);
            match damage {
                "cut by one byte" => cut(&path, 1),
                "cut to half" => cut(&path, saved.bytes / 2),
                "one byte changed" => {
                    let f = OpenOptions::new().write(true).open(&path).unwrap();
                    crate::platform::file_io::FileExt::write_all_at(&f, b"\xff", saved.bytes - TRAILER as u64 - 3)
                        .unwrap();
                }
                _ => OpenOptions::new().append(true).open(&path).unwrap().write_all(b"x").unwrap(),
            }
            let err = read_snapshot(&path).err().unwrap_or_else(|| panic!("{damage}: read back"));
            assert!(err.to_string().contains(&path.display().to_string()), "{damage}: {err}");
            // The log was purged past the start: nothing to fall back to.
            let err = SnapshotStore::open(dir.path()).unwrap().load_current(5).err().expect("refused").to_string();
            assert!(err.contains("does not start") && err.contains("dls members remove"), "{damage}: {err}");
            assert!(path.exists(), "a refusal changes nothing");
        }
    }

    #[test]
    fn a_damaged_newest_snapshot_falls_back_to_an_older_one_the_log_reaches() {
        let dir = tempfile::tempdir().unwrap();
        let newer = two_snapshots(dir.path());
        cut(&newer, 3);
        // The log starts at 11: the snapshot at 10 plus the log hold everything.
        let store = SnapshotStore::open(dir.path()).unwrap();
        assert_eq!(applied(&store.load_current(11).unwrap()), Some(10));
        assert_eq!(store.current_meta().unwrap().last_log_id.unwrap().index, 10);
        assert!(!newer.exists());
        assert!(newer.with_extension("snap.damaged").exists(), "the damaged file is kept aside");

        // The log starts at 12: entry 11 is in no snapshot and not in the log.
        let dir = tempfile::tempdir().unwrap();
        let newer = two_snapshots(dir.path());
        cut(&newer, 3);
        let err = SnapshotStore::open(dir.path()).unwrap().load_current(12).err().expect("refused").to_string();
        assert!(err.contains(&newer.display().to_string()) && err.contains("raft log starts at index 12"), "{err}");
        assert!(newer.exists());
    }

    #[test]
    fn a_missing_snapshot_refuses_when_the_log_does_not_start_at_the_beginning() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path()).unwrap();
        assert!(store.load_current(0).unwrap().is_none(), "a new node has neither");
        let err = store.load_current(11).err().expect("refused").to_string();
        assert!(err.contains("there is no snapshot file in") && err.contains("starts at index 11"), "{err}");
        assert!(err.contains("dls members remove"), "{err}");
    }

    #[test]
    fn with_the_whole_log_a_damaged_only_snapshot_falls_back_to_an_empty_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path()).unwrap();
        let saved = store.save(&state_at(10)).unwrap();
        cut(&store.path_of(&saved.meta), 1);
        let store = SnapshotStore::open(dir.path()).unwrap();
        assert!(store.load_current(0).unwrap().is_none());
        assert!(store.current_meta().is_none());
    }
}

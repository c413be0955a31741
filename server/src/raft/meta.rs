//! The vote, the commit index, the purge point and the raft log's durable watermark, in one
//! checked file: `<data_dir>/raft-meta` (docs/storage.md, "Raft metadata").
//!
//! Why not sled (which held these up to v0.1.0): sled 0.34 reads a record that fails its
//! checksum as a torn tail and silently drops it and everything written after it, so one
//! flipped bit rolled a node's vote back (it could vote twice in one term) and its commit
//! index with it. Whatever decides a vote or a commit must be refused when it cannot be
//! read, never quietly replaced by an older value.
//!
//! # Layout
//!
//! Two copies ("slots") of 4 KiB, each `[magic "CDLSMETA"][crc32: u32][len: u32]
//! [generation: u64][payload: len bytes][zeros]`, little endian, the CRC over `len`,
//! `generation` and the payload (bincode of [`RaftMeta`]). The file is created whole (both
//! slots written to a temporary file, synced, renamed, the directory synced), so it either
//! does not exist or has both slots.
//!
//! An update writes the slot the newest generation is *not* in and `fdatasync`s it: a crash
//! in the middle of it leaves the other slot whole, one update older, and that update was
//! never reported done. A new vote is written to both slots, one after the other, before it
//! is reported saved: every acknowledged vote is then in both, so damage to one slot never
//! rolls a vote back. Reading takes the valid slot of the highest generation; a damaged slot
//! beside a valid one is reported (a crash during its write looks the same as a flipped
//! bit) and the next update overwrites it. A file of the wrong size or with no valid slot
//! refuses the start.
//!
//! What one damaged slot can cost is one update of the watermark and the commit index; an
//! older watermark than the log's own records vouch for is caught when the log is opened
//! (the records say the log was on disk past it: see `wal.rs`).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store_error::StoreError;
use super::types::{codec, LogId, Vote};
use crate::platform::file_io::{self, FileExt};

pub const FILE: &str = "raft-meta";
const SLOT: usize = 4096;
const MAGIC: &[u8; 8] = b"CDLSMETA";
/// magic, crc, len, generation.
const SLOT_HEADER: usize = 24;

/// How far the raft log is known to be on disk: an `fdatasync` covering every byte before
/// log position `pos` (segment seq in the high 32 bits, byte offset in the low ones; see
/// `wal.rs`) had returned, and the entries before `next_index` were in those bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    pub pos: u64,
    pub next_index: u64,
}

impl Watermark {
    /// The newest segment when the watermark was taken.
    pub fn segment(&self) -> u64 {
        self.pos >> 32
    }

    pub fn offset(&self) -> u64 {
        self.pos & 0xffff_ffff
    }
}

/// Everything raft keeps beside its log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftMeta {
    pub vote: Option<Vote>,
    /// The commit index last known (at most what the log holds on disk).
    pub committed: Option<LogId>,
    /// The log was purged up to here: its history before lives in a snapshot only.
    pub purged: Option<LogId>,
    /// How far the log is on disk (`None`: never recorded, a data directory of v0.1.0).
    pub durable: Option<Watermark>,
    /// Protocol-aware recovery: entries up to this index were acknowledged and then lost to
    /// damage on this disk. Until this node has applied them again from a leader, it does
    /// not vote or stand for election (see `node.rs`, "recovery").
    pub owed: Option<u64>,
}

/// The file, and the generation of its newest slot.
pub struct MetaFile {
    path: PathBuf,
    file: File,
    generation: u64,
    current: RaftMeta,
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::Untrusted(format!("raft metadata file {} is damaged: {what}", path.display()))
}

fn encode_slot(generation: u64, meta: &RaftMeta) -> Result<Vec<u8>, StoreError> {
    let payload = codec::encode(meta).map_err(StoreError::codec("encode", "the raft metadata"))?;
    if payload.len() > SLOT - SLOT_HEADER {
        return Err(StoreError::TooLarge { what: "the raft metadata", len: payload.len(), max: SLOT - SLOT_HEADER });
    }
    let mut slot = vec![0u8; SLOT];
    slot[0..8].copy_from_slice(MAGIC);
    slot[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    slot[16..24].copy_from_slice(&generation.to_le_bytes());
    slot[SLOT_HEADER..SLOT_HEADER + payload.len()].copy_from_slice(&payload);
    let crc = crc32fast::hash(&slot[12..SLOT_HEADER + payload.len()]);
    slot[8..12].copy_from_slice(&crc.to_le_bytes());
    Ok(slot)
}

/// A slot's generation and content, or why it cannot be read.
fn decode_slot(slot: &[u8]) -> Result<(u64, RaftMeta), String> {
    if slot.iter().all(|&b| b == 0) {
        return Err("all zeros".into());
    }
    if &slot[0..8] != MAGIC {
        return Err("wrong magic bytes".into());
    }
    let len = u32::from_le_bytes(slot[12..16].try_into().expect("4 bytes")) as usize;
    if len > SLOT - SLOT_HEADER {
        return Err(format!("impossible length {len}"));
    }
    let crc = u32::from_le_bytes(slot[8..12].try_into().expect("4 bytes"));
    if crc32fast::hash(&slot[12..SLOT_HEADER + len]) != crc {
        return Err("checksum mismatch".into());
    }
    let generation = u64::from_le_bytes(slot[16..24].try_into().expect("8 bytes"));
    let meta = codec::decode(&slot[SLOT_HEADER..SLOT_HEADER + len]).map_err(|e| format!("cannot decode: {e}"))?;
    Ok((generation, meta))
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    file_io::sync_dir(dir)
}

impl MetaFile {
    /// Reads the file in `data_dir`: `None` when there is none. A file that cannot be
    /// trusted is a [`StoreError::Untrusted`] naming it.
    pub fn open(data_dir: &Path) -> Result<Option<MetaFile>, StoreError> {
        let path = path(data_dir);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("open", &path)(e)),
        };
        // What the disk holds, not what the page cache kept (see `wal::scan`).
        let _ = file_io::drop_cached_pages(&file);
        let size = file.metadata().map_err(StoreError::io("stat", &path))?.len();
        if size != 2 * SLOT as u64 {
            return Err(corrupt(&path, format!("it is {size} bytes, not {} (cut short or replaced?)", 2 * SLOT)));
        }
        let mut bytes = vec![0u8; 2 * SLOT];
        file.read_exact_at(&mut bytes, 0).map_err(StoreError::io("read", &path))?;
        let slots = [decode_slot(&bytes[..SLOT]), decode_slot(&bytes[SLOT..])];
        let (generation, current) = match &slots {
            [Ok(a), Ok(b)] => {
                if a.0 >= b.0 {
                    a.clone()
                } else {
                    b.clone()
                }
            }
            [Ok(valid), Err(why)] | [Err(why), Ok(valid)] => {
                tracing::warn!(
                    file = %path.display(),
                    generation = valid.0,
                    "one copy of the raft metadata cannot be read ({why}): a write cut short by a crash, or \
                     damage; the other copy is used and the next update rewrites it"
                );
                valid.clone()
            }
            [Err(a), Err(b)] => {
                return Err(corrupt(&path, format!("neither copy can be read (first: {a}; second: {b})")));
            }
        };
        Ok(Some(MetaFile { path, file, generation, current }))
    }

    /// Creates the file in `data_dir` with `meta` in both slots; it appears whole or not at
    /// all. Refuses to replace an existing one.
    pub fn create(data_dir: &Path, meta: RaftMeta) -> Result<MetaFile, StoreError> {
        let path = path(data_dir);
        let tmp = path.with_extension("tmp");
        let mut bytes = encode_slot(1, &meta)?;
        bytes.extend(encode_slot(2, &meta)?);
        let written = (|| {
            let f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
            f.write_all_at(&bytes, 0)?;
            f.sync_all()?;
            if path.exists() {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "it exists already"));
            }
            std::fs::rename(&tmp, &path)?;
            sync_dir(data_dir)
        })();
        written.map_err(StoreError::io("create", &path))?;
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(StoreError::io("open", &path))?;
        Ok(MetaFile { path, file, generation: 2, current: meta })
    }

    pub fn get(&self) -> &RaftMeta {
        &self.current
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes `meta` durable in the older slot.
    pub fn write(&mut self, meta: RaftMeta) -> Result<(), StoreError> {
        let generation = self.generation + 1;
        let slot = encode_slot(generation, &meta)?;
        let at = (generation % 2) * SLOT as u64;
        self.file
            .write_all_at(&slot, at)
            .and_then(|()| self.file.sync_data())
            .map_err(StoreError::io_at("write", &self.path, at))?;
        self.generation = generation;
        self.current = meta;
        Ok(())
    }

    /// Makes `meta` durable in both slots, one after the other (see the module doc: a vote).
    pub fn write_both(&mut self, meta: RaftMeta) -> Result<(), StoreError> {
        self.write(meta.clone())?;
        self.write(meta)
    }

    /// Changes the copy in memory only; the next [`write`](Self::write) stores it.
    pub fn update_in_memory(&mut self, change: impl FnOnce(&mut RaftMeta)) {
        change(&mut self.current);
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    fn meta(term: u64) -> RaftMeta {
        RaftMeta {
            vote: Some(Vote::new_committed(term, 2)),
            committed: Some(LogId::new(CommittedLeaderId::new(term, 2), 40)),
            purged: None,
            durable: Some(Watermark { pos: (3 << 32) | 4096, next_index: 41 }),
            owed: None,
        }
    }

    fn damage(dir: &Path, at: u64) {
        let f = OpenOptions::new().read(true).write(true).open(path(dir)).unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x04], at).unwrap();
    }

    fn refusal(dir: &Path) -> String {
        match MetaFile::open(dir) {
            Ok(_) => panic!("a damaged file was read"),
            Err(e) => {
                assert!(e.is_untrusted(), "{e}");
                e.to_string()
            }
        }
    }

    #[test]
    fn the_newest_update_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(MetaFile::open(dir.path()).unwrap().is_none());
        let mut f = MetaFile::create(dir.path(), meta(1)).unwrap();
        assert!(MetaFile::create(dir.path(), meta(1)).is_err(), "never replaced");
        for term in 2..=5 {
            f.write(meta(term)).unwrap();
            assert_eq!(MetaFile::open(dir.path()).unwrap().unwrap().get(), &meta(term));
        }
        f.write_both(meta(6)).unwrap();
        assert_eq!(MetaFile::open(dir.path()).unwrap().unwrap().get(), &meta(6));
    }

    #[test]
    fn a_vote_written_to_both_copies_survives_damage_to_either() {
        for slot in 0..2u64 {
            let dir = tempfile::tempdir().unwrap();
            let mut f = MetaFile::create(dir.path(), meta(1)).unwrap();
            f.write_both(meta(7)).unwrap();
            damage(dir.path(), slot * SLOT as u64 + 30);
            assert_eq!(MetaFile::open(dir.path()).unwrap().unwrap().get().vote, meta(7).vote, "slot {slot}");
        }
    }

    #[test]
    fn an_update_cut_short_leaves_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = MetaFile::create(dir.path(), meta(1)).unwrap();
        f.write(meta(2)).unwrap();
        let newest = (f.generation % 2) * SLOT as u64;
        // The next update's slot, half written when the power went.
        let older = SLOT as u64 - newest;
        OpenOptions::new().write(true).open(path(dir.path())).unwrap().write_all_at(&[0xee; 100], older).unwrap();
        assert_eq!(MetaFile::open(dir.path()).unwrap().unwrap().get(), &meta(2));
    }

    #[test]
    fn both_copies_damaged_or_a_cut_file_refuse() {
        let dir = tempfile::tempdir().unwrap();
        MetaFile::create(dir.path(), meta(1)).unwrap();
        damage(dir.path(), 20);
        damage(dir.path(), SLOT as u64 + 40);
        let msg = refusal(dir.path());
        assert!(msg.contains("raft-meta is damaged: neither copy"), "{msg}");

        let dir = tempfile::tempdir().unwrap();
        MetaFile::create(dir.path(), meta(1)).unwrap();
        OpenOptions::new().write(true).open(path(dir.path())).unwrap().set_len(SLOT as u64).unwrap();
        assert!(refusal(dir.path()).contains("it is 4096 bytes"));
    }
}

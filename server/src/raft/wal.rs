//! The raft log as append-only segment files (a write-ahead log).
//!
//! Why not sled: a sled flush costs 0.36-0.57 ms here (several `sync_file_range` calls,
//! an `fsync` and hand-offs between sled's I/O threads), and openraft 0.9 waits for the
//! leader's flush before it replicates an entry, so every write paid two of them in
//! series. One `pwrite` and one `fdatasync` into a preallocated file cost ~0.15-0.2 ms.
//!
//! # Layout
//!
//! `<dir>/<seq>-<first index>.wal`, preallocated (zeros). A segment starts with a 64-byte
//! header, `[magic "CDLSWAL1"][version: u32][crc32: u32][seq: u64][first: u64]
//! [log_start: u64]` (zero padded, the CRC over every other header byte), then records of
//! consecutive entries, each at an 8-byte aligned offset:
//!
//! ```text
//! [crc32: u32][len: u32][index: u64][durable: u64][payload: len bytes][zero padding]
//! ```
//!
//! little endian, the CRC over `len`, `index`, `durable` and the payload. `durable` is the
//! log position (segment seq, byte offset) up to which every byte of the log was known to
//! be on disk (an `fdatasync` had returned, and the watermark saying so was recorded) when
//! the record was written. `log_start` is the first index the log still held when the
//! segment was created: a segment that starts past the end of the previous one is
//! legitimate only when its `log_start` says nothing before it was needed any more (a
//! snapshot moved the log forward) or the purge point (in `raft-meta`, made durable before
//! any segment is deleted) covers the gap.
//!
//! Bytes once written are never overwritten. Whenever the next entry does not simply
//! follow the last record of the active segment (after a truncation, after a snapshot
//! jumped the log forward, after every restart), a new segment is started, and recovery
//! replays segments in `seq` order with the rule "a segment's first index cuts the log
//! there". Truncated entries therefore never come back.
//!
//! # Recovery (also written down in `docs/storage.md`)
//!
//! Writes after the last completed `fdatasync` may reach the disk in any order, page by
//! page: after a crash, that region holds any mix of the bytes written and the zeros that
//! were there before. Everything before it is intact, unless the disk or someone damaged
//! it. After each sync the log store records the *watermark* outside the segments
//! (`raft-meta`: the log position synced, the next index, so also the newest segment), and
//! only then acts on the entries: every byte before the watermark may have been
//! acknowledged, no byte after it was.
//!
//! Each segment is read record by record; reading stops at the first record that is not
//! valid (a short or oversized record, a bad checksum, an unexpected index). The stop is
//! - a *clean end* when the record header and everything after it to the end of the file
//!   are zeros: the segment simply ends there;
//! - a *torn tail* when it lies at or past the watermark: those bytes were written after
//!   the last completed sync, so nothing at or after them was acknowledged. The tail is cut
//!   (zeros written over it and synced, later segments removed) and a warning names the
//!   file, the offset and the bytes dropped;
//! - *damage* when it lies before the watermark: the bytes were synced and have changed
//!   since. The node refuses to start (or, with [`Recovery::cut_damage`], cuts the log
//!   there and fetches the rest from a leader; see `log_store.rs`).
//!
//! The watermark also catches what leaves no bad record behind: the segment it names must
//! exist and its records reach it (a zeroed last page, a file cut at a record boundary, a
//! deleted newest segment); a segment created before it must have its full preallocated
//! size and a whole header (no crash shortens a file whose size was synced). A bad segment
//! header is a stop at byte 0 of that segment. A gap in the indexes between segments that
//! neither a purge nor the segment's `log_start` explains (a missing segment file) refuses
//! too. A record whose `durable` mark lies past the watermark means `raft-meta` is older
//! than the log (a lost write, an old copy put back): refused, and never cut.
//!
//! A data directory of v0.1.0 has no watermark yet: its first start judges a stop by the
//! records' own marks (damage when a valid record anywhere vouches past it, else a torn
//! tail), as v0.1.0 did, and records one.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::meta::Watermark;
use super::store_error::{Damaged, StoreError};
use crate::platform::file_io::{self, FileExt};

/// Segments are preallocated to this size (sparse) and rolled over past it.
const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// Zeros are written this far ahead of the write position, in chunks of this size.
const ZERO_AHEAD: u64 = 1024 * 1024;
/// The segment header; records start after it.
const SEGMENT_HEADER: u64 = 64;
const MAGIC: &[u8; 8] = b"CDLSWAL1";
/// Bump when the layout of headers or records changes.
const FORMAT_VERSION: u32 = 1;
/// The record header: crc, len, index, durable.
const HEADER: usize = 24;
/// Records start at offsets that are multiples of this (so that a search past damage
/// looks at few candidate offsets).
const ALIGN: u64 = 8;
/// A record larger than this is treated as corruption when reading.
const MAX_RECORD: u32 = 256 * 1024 * 1024;
/// Reads while checking for zeros go in chunks of this size.
const CHUNK: usize = 1024 * 1024;

/// Where one entry's record lives.
#[derive(Clone)]
struct Loc {
    file: Arc<File>,
    offset: u64,
    len: u32,
}

struct Segment {
    seq: u64,
    first: u64,
    path: PathBuf,
    file: Arc<File>,
}

/// The log's files and an in-memory map from index to record. Not thread safe on its
/// own: `LogStore` keeps it behind a mutex and runs `sync` outside it.
pub struct Wal {
    dir: PathBuf,
    segments: Vec<Segment>,
    /// Location of entries `first .. first + locs.len()`.
    locs: VecDeque<Loc>,
    first: u64,
    /// Write position in the active (last) segment and the index its next record must have.
    write_pos: u64,
    active_next: u64,
    /// How far the active segment has been overwritten with zeros (see `zero_ahead`).
    zeroed_to: u64,
    /// Files written since the last sync, and whether a segment was created since then.
    unsynced: Vec<(PathBuf, Arc<File>)>,
    dir_dirty: bool,
    segment_bytes: u64,
    /// Bumped by every truncation: a sync taken before one does not cover what was
    /// appended after it at the same indexes.
    epoch: u64,
    /// Log position (see [`position`]) before which everything is known on disk; every
    /// record carries it, which is what tells damage from a torn tail at recovery.
    durable_pos: u64,
    /// The sequence number the next segment gets (at least).
    next_seq: u64,
    /// A write failed: what the file holds past `write_pos` is unknown, so nothing more is
    /// appended (the node stops; recovery at the next start sorts it out).
    broken: bool,
}

/// What one sync must make durable; taken under the lock, done outside it.
pub struct SyncJob {
    files: Vec<(PathBuf, Arc<File>)>,
    dir: Option<PathBuf>,
    /// The log's epoch and next index when the job was taken: once it has run, every
    /// entry before that index is durable, unless the epoch has moved on meanwhile.
    pub covers: (u64, u64),
    /// The log position written so far when the job was taken: give it to
    /// [`Wal::synced`] once the job has run.
    pub upto: u64,
}

impl SyncJob {
    /// Whether there is nothing to sync.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dir.is_none()
    }

    /// How far the log is on disk once the job has run.
    pub fn watermark(&self) -> Watermark {
        Watermark { pos: self.upto, next_index: self.covers.1 }
    }

    pub fn run(&self) -> Result<(), StoreError> {
        for (path, f) in &self.files {
            f.sync_data().map_err(StoreError::io("sync", path))?;
        }
        if let Some(dir) = &self.dir {
            // A new segment's name must survive a crash too.
            file_io::sync_dir(dir).map_err(StoreError::io("sync the directory", dir))?;
        }
        Ok(())
    }
}

fn segment_name(seq: u64, first: u64) -> String {
    format!("{seq:016}-{first:020}.wal")
}

fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".wal")?;
    let (seq, first) = stem.split_once('-')?;
    Some((seq.parse().ok()?, first.parse().ok()?))
}

/// A place in the log: byte `offset` of segment `seq`, ordered as the bytes were written.
fn position(seq: u64, offset: u64) -> u64 {
    debug_assert!(offset < 1 << 32 && seq < 1 << 32);
    (seq << 32) | offset
}

fn describe_position(pos: u64) -> String {
    format!("segment {} byte {}", pos >> 32, pos & 0xffff_ffff)
}

fn padded(len: u64) -> u64 {
    len.div_ceil(ALIGN) * ALIGN
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The checksum of a record: its header after the CRC field, then the payload.
fn checksum(header_rest: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header_rest);
    h.update(payload);
    h.finalize()
}

fn encode_record(buf: &mut Vec<u8>, index: u64, durable: u64, payload: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&index.to_le_bytes());
    buf.extend_from_slice(&durable.to_le_bytes());
    buf.extend_from_slice(payload);
    let crc = checksum(&buf[start + 4..start + HEADER], payload);
    buf[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    buf.resize(start + padded((HEADER + payload.len()) as u64) as usize, 0);
}

/// A segment's header, as written at offset 0.
#[derive(Debug, PartialEq, Eq)]
struct SegmentHeader {
    seq: u64,
    first: u64,
    log_start: u64,
}

impl SegmentHeader {
    fn encode(&self) -> [u8; SEGMENT_HEADER as usize] {
        let mut b = [0u8; SEGMENT_HEADER as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.first.to_le_bytes());
        b[32..40].copy_from_slice(&self.log_start.to_le_bytes());
        let crc = Self::crc(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn crc(b: &[u8]) -> u32 {
        checksum(&b[0..12], &b[16..])
    }

    fn decode(b: &[u8]) -> Result<SegmentHeader, String> {
        if b.iter().all(|&x| x == 0) {
            return Err("the segment header is all zeros".into());
        }
        if &b[0..8] != MAGIC {
            return Err("not a Caerus raft log segment (wrong magic bytes)".into());
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "raft log segment format version {version}; this dls reads version {FORMAT_VERSION} only"
            ));
        }
        if u32_at(b, 12) != Self::crc(b) {
            return Err("segment header checksum mismatch".into());
        }
        Ok(SegmentHeader { seq: u64_at(b, 16), first: u64_at(b, 24), log_start: u64_at(b, 32) })
    }
}

/// Where reading a segment stopped short of a clean end.
struct Stop {
    offset: u64,
    what: String,
    /// One past the last non-zero byte of the file.
    written_end: u64,
    /// The highest `durable` mark of a valid record found past the stop, and its offset.
    vouched: Option<(u64, u64)>,
}

/// What reading one segment found.
struct Scan {
    seq: u64,
    path: PathBuf,
    file: Arc<File>,
    header: Result<SegmentHeader, String>,
    /// The file's size.
    size: u64,
    /// `(index, offset, len)` of the valid records, in order.
    records: Vec<(u64, u64, u32)>,
    /// The highest `durable` mark among `records`.
    max_durable: u64,
    stop: Option<Stop>,
}

impl Scan {
    /// The highest `durable` mark of any valid record in the file.
    fn vouches_to(&self) -> u64 {
        self.max_durable.max(self.stop.as_ref().and_then(|s| s.vouched).map_or(0, |v| v.0))
    }
}

/// One past the last non-zero byte of `file` in `from..size` (or `from` if all zero).
fn written_end(file: &File, from: u64, size: u64) -> io::Result<u64> {
    let mut end = from;
    let mut buf = vec![0u8; CHUNK];
    let zeros = vec![0u8; CHUNK];
    let mut at = from;
    while at < size {
        let n = (size - at).min(CHUNK as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        // A slice comparison is a memcmp: fast even in debug builds, and most of a
        // preallocated segment is zeros.
        if buf[..n] != zeros[..n] {
            let last = buf[..n].iter().rposition(|&b| b != 0).expect("a non-zero byte");
            end = at + last as u64 + 1;
        }
        at += n as u64;
    }
    Ok(end)
}

/// Parses a record at the start of `b`, `at` bytes into segment `seq`: `(index, len,
/// durable)` if it is whole, its checksum matches, and its durable mark lies before it.
fn parse_record(b: &[u8], seq: u64, at: u64) -> Result<(u64, u32, u64), String> {
    if b.len() < HEADER {
        return Err("a record header cut short by the end of the file".into());
    }
    let len = u32_at(b, 4);
    if len == 0 || len > MAX_RECORD {
        return Err(format!("impossible record length {len}"));
    }
    if (b.len() as u64) < (HEADER as u64) + len as u64 {
        return Err(format!("a record of {len} bytes cut short by the end of the file"));
    }
    let payload = &b[HEADER..HEADER + len as usize];
    if checksum(&b[4..HEADER], payload) != u32_at(b, 0) {
        return Err("record checksum mismatch".into());
    }
    let durable = u64_at(b, 16);
    if durable > position(seq, at) {
        return Err("record claims the log was on disk past itself".into());
    }
    Ok((u64_at(b, 8), len, durable))
}

/// Reads a segment: its header, its valid records from its first index on, and where and
/// why reading stopped if the segment does not end cleanly.
fn scan(seq: u64, path: &Path) -> io::Result<Scan> {
    let file = Arc::new(OpenOptions::new().read(true).write(true).open(path)?);
    // Read what the disk holds, not what the page cache says (fsyncgate): after a failed
    // writeback Linux may keep pages it never wrote, marked clean, and serve them. Dirty
    // pages (a killed process's last writes) are not dropped by this.
    if let Err(e) = file_io::drop_cached_pages(&file) {
        tracing::debug!(file = %path.display(), "cannot drop cached pages of a log segment: {e}");
    }
    let size = file.metadata()?.len();
    let mut head = vec![0u8; SEGMENT_HEADER.min(size) as usize];
    file.read_exact_at(&mut head, 0)?;
    let header = if head.len() < SEGMENT_HEADER as usize {
        Err(format!("the file is {size} bytes, shorter than a segment header"))
    } else {
        SegmentHeader::decode(&head)
    };
    let (records, max_durable, mut why) = match &header {
        Ok(h) => read_records(&file, seq, h.first, size)?,
        Err(e) => (Vec::new(), 0, e.clone()),
    };
    let mut out = Scan { seq, path: path.to_path_buf(), file, header, size, records, max_durable, stop: None };
    let mut offset = if out.header.is_ok() { SEGMENT_HEADER } else { 0 };
    if let Some(&(_, at, len)) = out.records.last() {
        offset = at + padded(HEADER as u64 + len as u64);
    }
    let written_end = written_end(&out.file, offset, size)?;
    // A header that is all zeros in a file of zeros is a segment created but never
    // synced; records ending in zeros to the end of the file end cleanly.
    let clean = written_end == offset && (out.header.is_ok() || head.iter().all(|&b| b == 0));
    if !clean {
        if out.header.is_ok() && written_end > offset && offset + HEADER as u64 <= size {
            let mut h = [0u8; HEADER];
            out.file.read_exact_at(&mut h, offset)?;
            if h.iter().all(|&b| b == 0) {
                why = format!("zeros where a record should start, but data follows up to byte {written_end}");
            }
        }
        let vouched = find_vouching(&out.file, seq, offset.max(SEGMENT_HEADER - ALIGN) + ALIGN, written_end)?;
        out.stop = Some(Stop { offset, what: why, written_end, vouched });
    }
    Ok(out)
}

/// Valid records read in order from a segment whose header is valid: `(index, offset,
/// len)` of each, the highest `durable` mark among them, and why reading stopped.
type Records = (Vec<(u64, u64, u32)>, u64, String);

fn read_records(file: &File, seq: u64, first: u64, size: u64) -> io::Result<Records> {
    let (mut records, mut max_durable) = (Vec::new(), 0);
    let mut offset = SEGMENT_HEADER;
    let mut expect = first;
    let mut buf = Vec::new();
    loop {
        let header_len = (size.saturating_sub(offset)).min(HEADER as u64) as usize;
        buf.resize(header_len, 0);
        file.read_exact_at(&mut buf, offset)?;
        if header_len == HEADER {
            let len = u32_at(&buf, 4);
            if len > 0 && len <= MAX_RECORD && offset + (HEADER as u64) + len as u64 <= size {
                buf.resize(HEADER + len as usize, 0);
                file.read_exact_at(&mut buf[HEADER..], offset + HEADER as u64)?;
            }
        }
        match parse_record(&buf, seq, offset) {
            Ok((index, len, durable)) if index == expect => {
                records.push((index, offset, len));
                max_durable = max_durable.max(durable);
                offset += padded(HEADER as u64 + len as u64);
                expect += 1;
            }
            Ok((index, _, _)) => {
                return Ok((records, max_durable, format!("a record of index {index} where index {expect} belongs")))
            }
            Err(e) => return Ok((records, max_durable, e)),
        }
    }
}

/// Looks for valid records at aligned offsets in `from..to` (past damage) and returns the
/// highest `durable` mark among them with its offset.
fn find_vouching(file: &File, seq: u64, from: u64, to: u64) -> io::Result<Option<(u64, u64)>> {
    let from = padded(from);
    if from >= to {
        return Ok(None);
    }
    let mut bytes = vec![0u8; (to - from) as usize];
    file.read_exact_at(&mut bytes, from)?;
    let mut best: Option<(u64, u64)> = None;
    for rel in (0..bytes.len()).step_by(ALIGN as usize) {
        if let Ok((_, _, durable)) = parse_record(&bytes[rel..], seq, from + rel as u64) {
            if best.is_none_or(|(d, _)| durable > d) {
                best = Some((durable, from + rel as u64));
            }
        }
    }
    Ok(best)
}

/// Writes zeros over `from..to` of `file` and syncs it.
fn zero_range(file: &File, from: u64, to: u64) -> io::Result<()> {
    let zeros = vec![0u8; CHUNK];
    let mut at = from;
    while at < to {
        let n = (to - at).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
}

/// What recovery checks the log against, and what it does with damage.
#[derive(Clone, Copy, Debug, Default)]
pub struct Recovery {
    /// The index up to which the log was purged, if it ever was.
    pub purged: Option<u64>,
    /// How far the log was on disk when the node last recorded it (`raft-meta`). `None`
    /// for a data directory of v0.1.0, which kept none: then the records' own `durable`
    /// marks are the only proof of what was synced (the rule v0.1.0 applied).
    pub watermark: Option<Watermark>,
    /// Cut the log at the first damage instead of refusing (protocol-aware recovery: the
    /// caller has recorded what this node acknowledged and fetches it again from a leader).
    pub cut_damage: bool,
}

/// A log opened by [`Wal::open`].
pub struct Recovered {
    pub wal: Wal,
    /// The damage the log was cut at ([`Recovery::cut_damage`]).
    pub cut: Option<Damaged>,
    /// How far the log is on disk as opened: record it before anything is appended.
    pub watermark: Watermark,
}

/// The position before which every byte of the log was synced, and who says so.
struct Limit {
    pos: u64,
    /// From `raft-meta` (else from the records' own marks).
    recorded: bool,
}

impl Wal {
    /// Opens (or creates) the log in `dir`, replaying every segment (see the module doc for
    /// what is trimmed and what refused), and starts a fresh segment for what comes next;
    /// everything found is synced before this returns.
    pub fn open(dir: &Path, recovery: &Recovery) -> Result<Recovered, StoreError> {
        Wal::open_with(dir, recovery, SEGMENT_BYTES)
    }

    fn open_with(dir: &Path, recovery: &Recovery, segment_bytes: u64) -> Result<Recovered, StoreError> {
        std::fs::create_dir_all(dir).map_err(StoreError::io("create the raft log directory", dir))?;
        let mut found = Vec::new();
        for item in std::fs::read_dir(dir).map_err(StoreError::io("list the raft log directory", dir))? {
            let item = item.map_err(StoreError::io("list the raft log directory", dir))?;
            let name = item.file_name();
            if let Some((seq, first)) = name.to_str().and_then(parse_segment_name) {
                found.push((seq, first, item.path()));
            }
        }
        found.sort();
        let watermark = recovery.watermark;
        let mut wal = Wal {
            dir: dir.to_path_buf(),
            segments: Vec::new(),
            locs: VecDeque::new(),
            // raft's first entry has index 0.
            first: 0,
            write_pos: 0,
            active_next: 0,
            zeroed_to: 0,
            unsynced: Vec::new(),
            dir_dirty: false,
            segment_bytes,
            epoch: 0,
            durable_pos: 0,
            // Positions only ever grow, even when the segments the watermark names are gone.
            next_seq: watermark.map_or(1, |w| w.segment() + 1),
            broken: false,
        };
        let scans = found
            .iter()
            .map(|(seq, _, path)| scan(*seq, path).map_err(StoreError::io("read the raft log segment", path)))
            .collect::<Result<Vec<_>, _>>()?;
        // Every byte before this position was on disk at some point, by the records' word.
        let (vouched, vouched_in) =
            scans.iter().map(|s| (s.vouches_to(), Some(&s.path))).max_by_key(|(v, _)| *v).unwrap_or((0, None));
        let limit = match watermark {
            Some(w) => {
                if vouched > w.pos && !recovery.cut_damage {
                    return Err(Damaged {
                        message: format!(
                            "the raft metadata is older than the raft log: a record in {} says the log was on disk \
                             up to {}, raft-meta only up to {} (a lost write, or an older copy of raft-meta put \
                             back), so the vote and commit index it holds cannot be trusted either",
                            vouched_in.map_or("a segment".into(), |p| p.display().to_string()),
                            describe_position(vouched),
                            describe_position(w.pos)
                        ),
                        cuttable: false,
                    }
                    .into());
                }
                Limit { pos: w.pos, recorded: true }
            }
            None => Limit { pos: vouched, recorded: false },
        };
        let mut cut: Option<Damaged> = None;
        // Refuses, or in cut mode keeps the first damage and lets the caller cut the log there.
        let mut damage = |d: Damaged| -> Result<(), StoreError> {
            if recovery.cut_damage {
                tracing::warn!("{d}: cutting the raft log here");
                cut.get_or_insert(d);
                Ok(())
            } else {
                Err(d.into())
            }
        };
        let mut saw_watermark_segment = false;
        let mut torn = false;
        for (s, (_, name_first, _)) in scans.into_iter().zip(&found) {
            if torn {
                // Everything after a cut was written after it: never synced, or cut too.
                tracing::warn!(file = %s.path.display(), "removing a raft log segment written after the end of the log");
                wal.remove(&s.path)?;
                continue;
            }
            // Created before the last recorded sync: every sync since covered its size and header.
            let synced = watermark.is_some_and(|w| s.seq <= w.segment());
            saw_watermark_segment |= watermark.is_some_and(|w| w.segment() == s.seq);
            let short = synced && s.size < segment_bytes;
            if short {
                damage(Damaged::at(
                    &s.path,
                    s.size,
                    &format!(
                        "the file is {} bytes, shorter than the {segment_bytes} every segment is created with, \
                         and it was synced since (raft-meta): the file was cut short, which no crash does",
                        s.size
                    ),
                ))?;
            }
            let header = match &s.header {
                Ok(h) => h,
                Err(_) if s.stop.is_none() && !synced => {
                    tracing::warn!(file = %s.path.display(), "removing an empty raft log segment never synced");
                    wal.remove(&s.path)?;
                    continue;
                }
                Err(why) => {
                    if s.stop.is_none() {
                        damage(Damaged::at(&s.path, 0, &format!("{why}, in a segment synced since (raft-meta)")))?;
                    } else if let Err(d) = wal.check_torn(&s, &limit) {
                        damage(d)?;
                    } else {
                        tracing::warn!(file = %s.path.display(), "removing a raft log segment whose header never reached the disk whole (a torn tail past the last sync)");
                    }
                    wal.remove(&s.path)?;
                    torn = true;
                    continue;
                }
            };
            let misnamed = (header.seq != s.seq || header.first != *name_first).then(|| {
                Damaged::at(
                    &s.path,
                    0,
                    &format!(
                        "the header says segment {} from index {}, the file name otherwise",
                        header.seq, header.first
                    ),
                )
            });
            if let Some(d) = misnamed.or_else(|| wal.check_continuity(&s.path, header, recovery.purged).err()) {
                damage(d)?;
                wal.remove(&s.path)?;
                torn = true;
                continue;
            }
            wal.cut_from(header.first);
            for &(index, offset, len) in &s.records {
                wal.push_loc(index, Loc { file: s.file.clone(), offset, len });
            }
            let records_end =
                s.records.last().map_or(SEGMENT_HEADER, |&(_, at, len)| at + padded(HEADER as u64 + len as u64));
            if let Some(stop) = &s.stop {
                match wal.check_torn(&s, &limit) {
                    Err(d) => damage(d)?,
                    Ok(()) => tracing::warn!(
                        file = %s.path.display(),
                        offset = stop.offset,
                        dropped_bytes = stop.written_end - stop.offset,
                        last_index = ?wal.last_index(),
                        "trimmed a torn tail off the raft log ({}): {}",
                        stop.what,
                        if limit.recorded {
                            format!(
                                "it lies past the last completed sync recorded in raft-meta ({}), so nothing in it \
                                 was acknowledged",
                                describe_position(limit.pos)
                            )
                        } else {
                            "no record vouches for it being on disk (no watermark recorded yet: a data directory of \
                             v0.1.0 is judged by its records' own marks)"
                                .into()
                        }
                    ),
                }
                zero_range(&s.file, stop.offset, stop.written_end).map_err(StoreError::io_at(
                    "write zeros over the torn tail of",
                    &s.path,
                    stop.offset,
                ))?;
                torn = true;
            } else if let Some(w) = watermark.filter(|w| w.segment() == s.seq && records_end < w.offset()) {
                damage(Damaged::at(
                    &s.path,
                    records_end,
                    &format!(
                        "the records end here, but raft-meta says this segment was on disk up to byte {}: synced \
                         records are gone (zeroed or cut off)",
                        w.offset()
                    ),
                ))?;
                torn = true;
            }
            if short {
                // Cut mode: the log ends here, in a segment of its normal size again.
                s.file.set_len(segment_bytes).map_err(StoreError::io("extend", &s.path))?;
                torn = true;
            }
            wal.unsynced.push((s.path.clone(), s.file.clone()));
            wal.segments.push(Segment { seq: s.seq, first: header.first, path: s.path, file: s.file });
        }
        if let Some(w) = watermark {
            // Nothing on disk was ever needed, or a purge deleted it all (a snapshot has it).
            let all_purged = recovery.purged.map_or(w.next_index == 0, |p| w.next_index <= p.saturating_add(1));
            if !saw_watermark_segment && !all_purged {
                damage(Damaged {
                    message: format!(
                        "raft log segment {seq} ({dir}/{seq:016}-*.wal) is missing: raft-meta says the log was on \
                         disk in it up to index {last} (a deleted or lost file)",
                        seq = w.segment(),
                        dir = dir.display(),
                        last = w.next_index - 1
                    ),
                    cuttable: true,
                })?;
            }
        }
        if let Some(p) = recovery.purged {
            wal.purge(p)?;
        }
        let next = wal.next_index();
        wal.start_segment(next)?;
        // What a crashed process wrote may still be only in the page cache.
        let watermark = wal.sync()?;
        Ok(Recovered { wal, cut, watermark })
    }

    fn remove(&mut self, path: &Path) -> Result<(), StoreError> {
        std::fs::remove_file(path).map_err(StoreError::io("remove", path))?;
        self.dir_dirty = true;
        Ok(())
    }

    /// Refuses a stop in `s` before `limit`: those bytes were on disk once (see the module doc).
    fn check_torn(&self, s: &Scan, limit: &Limit) -> Result<(), Damaged> {
        let stop = s.stop.as_ref().expect("a stop");
        let at = position(s.seq, stop.offset);
        if limit.pos <= at {
            return Ok(());
        }
        let proof = if limit.recorded {
            format!("raft-meta says the log was on disk up to {}", describe_position(limit.pos))
        } else {
            match stop.vouched {
                Some((d, offset)) if d > at => {
                    format!(
                        "the record at byte {offset} of the same file says the log was on disk up to {}",
                        describe_position(d)
                    )
                }
                _ => format!(
                    "a record in a later segment says the log was on disk up to {}",
                    describe_position(limit.pos)
                ),
            }
        };
        Err(Damaged::at(
            &s.path,
            stop.offset,
            &format!("{}; {proof}, so this is not a write cut short by a crash", stop.what),
        ))
    }

    /// Refuses a segment that starts past the end of the log read so far when nothing
    /// explains the jump.
    fn check_continuity(&self, path: &Path, header: &SegmentHeader, purged: Option<u64>) -> Result<(), Damaged> {
        let next = self.next_index();
        let explained = header.first <= next
            || header.log_start == header.first
            || purged.is_some_and(|p| header.first <= p.saturating_add(1));
        if explained {
            return Ok(());
        }
        let before = if self.segments.is_empty() && self.is_empty() {
            "no segment before it holds the log from its start".to_string()
        } else {
            format!("the segments before it end at index {}", next.saturating_sub(1))
        };
        Err(Damaged::at(
            path,
            0,
            &format!(
                "it starts at index {} but {before} and the log was never purged past {}: entries {}..{} are \
                 missing (a deleted or lost segment file?)",
                header.first,
                purged.map_or("the start".into(), |p| p.to_string()),
                next,
                header.first - 1
            ),
        ))
    }

    /// Index of the first entry held.
    pub fn first_index(&self) -> u64 {
        self.first
    }

    /// Index of the last entry held, if any.
    pub fn last_index(&self) -> Option<u64> {
        (!self.locs.is_empty()).then(|| self.first + self.locs.len() as u64 - 1)
    }

    /// Bumped by every truncation (see [`SyncJob::covers`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    /// Index the next appended entry gets.
    pub fn next_index(&self) -> u64 {
        self.first + self.locs.len() as u64
    }

    /// Records `loc` for `index`; a jump forward (after a purge past the end) restarts
    /// the map there.
    fn push_loc(&mut self, index: u64, loc: Loc) {
        if index != self.next_index() {
            self.locs.clear();
            self.first = index;
        }
        self.locs.push_back(loc);
    }

    /// Forgets entries at and after `index` (in memory only).
    fn cut_from(&mut self, index: u64) {
        if index <= self.first {
            self.locs.clear();
            self.first = index;
        } else if index < self.next_index() {
            self.locs.truncate((index - self.first) as usize);
        }
    }

    /// Starts a segment whose first record will have index `first`. Its header records
    /// where the log starts: at `first` itself when the log jumps forward past its end
    /// (only a snapshot does that), else where it started already.
    fn start_segment(&mut self, first: u64) -> Result<(), StoreError> {
        let seq = self.segments.last().map_or(1, |s| s.seq + 1).max(self.next_seq);
        self.next_seq = seq + 1;
        let log_start = if first > self.next_index() || self.is_empty() { first } else { self.first };
        let path = self.dir.join(segment_name(seq, first));
        let create = || {
            let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
            // Preallocated so that an fdatasync after each append does not also have to
            // commit a growing file size.
            file.set_len(self.segment_bytes)?;
            file.write_all_at(&SegmentHeader { seq, first, log_start }.encode(), 0)?;
            Ok(file)
        };
        let file = Arc::new(create().map_err(StoreError::io("create the raft log segment", &path))?);
        self.unsynced.push((path.clone(), file.clone()));
        self.dir_dirty = true;
        self.segments.push(Segment { seq, first, path, file });
        self.write_pos = SEGMENT_HEADER;
        self.active_next = first;
        self.zeroed_to = SEGMENT_HEADER;
        Ok(())
    }

    /// Keeps zeros written ahead of the write position. An `fdatasync` after a write into
    /// a hole of the sparse file must also commit the new block allocation to the
    /// journal; into blocks already written it need not, so each sync is cheaper
    /// (docs/bench.md). Returns the file to sync when it wrote zeros;
    /// the sync thread calls this between rounds, so appends never wait for it.
    pub fn zero_ahead(&mut self) -> Result<Option<(PathBuf, Arc<File>)>, StoreError> {
        if !self.wants_zeros() {
            return Ok(None);
        }
        let start = self.zeroed_to.max(self.write_pos);
        let end = (start + ZERO_AHEAD).min(self.segment_bytes);
        let segment = self.segments.last().expect("an active segment");
        let zeros = vec![0u8; (end - start) as usize];
        segment.file.write_all_at(&zeros, start).map_err(StoreError::io_at(
            "write zeros into",
            &segment.path,
            start,
        ))?;
        self.zeroed_to = end;
        Ok(Some((segment.path.clone(), segment.file.clone())))
    }

    /// Whether [`Wal::zero_ahead`] has work to do.
    pub fn wants_zeros(&self) -> bool {
        self.zeroed_to < self.write_pos + ZERO_AHEAD / 2 && self.zeroed_to < self.segment_bytes
    }

    /// Appends encoded entries `(index, payload)`, which must follow one another. They are
    /// readable at once and durable after the next [`SyncJob`] taken from [`Wal::sync_job`].
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> Result<(), StoreError> {
        if self.broken {
            return Err(StoreError::WriteFailedBefore);
        }
        let written = self.append_records(entries);
        self.broken = written.is_err();
        written
    }

    fn append_records(&mut self, entries: &[(u64, Vec<u8>)]) -> Result<(), StoreError> {
        let Some(&(first, _)) = entries.first() else { return Ok(()) };
        let size: u64 = entries.iter().map(|(_, p)| padded((HEADER + p.len()) as u64)).sum();
        if first != self.active_next || (self.write_pos > SEGMENT_HEADER && self.write_pos + size > self.segment_bytes)
        {
            self.start_segment(first)?;
        }
        let mut buf = Vec::with_capacity(size as usize);
        for (index, payload) in entries {
            encode_record(&mut buf, *index, self.durable_pos, payload);
        }
        let segment = self.segments.last().expect("an active segment");
        let (path, file) = (segment.path.clone(), segment.file.clone());
        file.write_all_at(&buf, self.write_pos).map_err(StoreError::io_at("write", &path, self.write_pos))?;
        let mut offset = self.write_pos;
        for (index, payload) in entries {
            self.cut_from(*index);
            self.push_loc(*index, Loc { file: file.clone(), offset, len: payload.len() as u32 });
            offset += padded((HEADER + payload.len()) as u64);
        }
        self.write_pos = offset;
        self.active_next = entries.last().expect("not empty").0 + 1;
        if !self.unsynced.iter().any(|(_, f)| Arc::ptr_eq(f, &file)) {
            self.unsynced.push((path, file));
        }
        Ok(())
    }

    /// The log position written so far.
    fn written_pos(&self) -> u64 {
        position(self.segments.last().map_or(0, |s| s.seq), self.write_pos)
    }

    /// What must be synced to make every append so far durable.
    pub fn sync_job(&mut self) -> SyncJob {
        SyncJob {
            files: std::mem::take(&mut self.unsynced),
            dir: std::mem::take(&mut self.dir_dirty).then(|| self.dir.clone()),
            covers: (self.epoch, self.next_index()),
            upto: self.written_pos(),
        }
    }

    /// A sync job taken at log position `upto` has run and the watermark it gives is
    /// recorded (`raft-meta`): the records written from now on say so. Never before the
    /// watermark is recorded: a record vouching for more than `raft-meta` holds would make
    /// the metadata look older than the log (a lost write) at the next start.
    pub fn synced(&mut self, upto: u64) {
        self.durable_pos = self.durable_pos.max(upto);
    }

    /// Syncs everything written so far, here and now, and returns how far the log is on
    /// disk. Records written from now on say so: call it only where nothing is appended
    /// before the caller has recorded the watermark (see [`Wal::synced`]).
    pub fn sync(&mut self) -> Result<Watermark, StoreError> {
        let job = self.sync_job();
        job.run()?;
        self.synced(job.upto);
        Ok(job.watermark())
    }

    /// Removes entries at and after `index`: they are dropped from the map and a new
    /// segment starting at `index` records the cut on disk (sync it before relying on it).
    pub fn truncate(&mut self, index: u64) -> Result<(), StoreError> {
        self.epoch += 1;
        self.cut_from(index);
        self.start_segment(index)
    }

    /// Forgets entries up to and including `index` and deletes segments that hold
    /// nothing newer. The caller has made the purge point durable first.
    pub fn purge(&mut self, index: u64) -> Result<(), StoreError> {
        if index >= self.first {
            let drop = ((index + 1 - self.first) as usize).min(self.locs.len());
            self.locs.drain(..drop);
            self.first = index + 1;
        }
        // A segment's live entries end where some later segment starts (truncations can
        // make a later segment start earlier); the active segment is never deleted.
        let mut i = 0;
        while i + 1 < self.segments.len() {
            let next_start = self.segments[i + 1..].iter().map(|s| s.first).min().expect("a later segment");
            // `None`: a later segment starts at 0, so this one holds nothing live.
            if next_start.checked_sub(1).is_none_or(|covered_up_to| covered_up_to <= index) {
                let seg = self.segments.remove(i);
                if let Err(e) = std::fs::remove_file(&seg.path) {
                    tracing::warn!(path = %seg.path.display(), "cannot delete a purged log segment: {e}");
                }
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The record of `index`, if held: the file to read and where.
    fn loc(&self, index: u64) -> Option<Loc> {
        if index < self.first {
            return None;
        }
        self.locs.get((index - self.first) as usize).cloned()
    }

    /// Locations of the entries in `start..end` that are held, in order, for reading
    /// outside the lock with [`RecordRef::read`].
    pub fn locate(&self, start: u64, end: u64) -> Vec<RecordRef> {
        let start = start.max(self.first);
        let end = end.min(self.next_index());
        (start..end).filter_map(|i| self.loc(i).map(|loc| RecordRef { index: i, loc })).collect()
    }
}

/// A record to read: see [`Wal::locate`].
pub struct RecordRef {
    index: u64,
    loc: Loc,
}

impl RecordRef {
    /// The index of the entry the record holds.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Reads and checks the record's payload.
    pub fn read(&self) -> Result<Vec<u8>, StoreError> {
        let mut buf = vec![0u8; HEADER + self.loc.len as usize];
        self.loc
            .file
            .read_exact_at(&mut buf, self.loc.offset)
            .map_err(|source| StoreError::ReadRecord { index: self.index, source })?;
        let payload = buf.split_off(HEADER);
        let len = u32_at(&buf, 4);
        if len != self.loc.len || u64_at(&buf, 8) != self.index || checksum(&buf[4..], &payload) != u32_at(&buf, 0) {
            return Err(StoreError::CorruptRecord { index: self.index });
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(index: u64, tag: &str) -> Vec<u8> {
        format!("{tag}-{index}").into_bytes()
    }

    /// Where the tests keep the watermark of the last sync (the log store keeps it in
    /// `raft-meta`); not a segment name, so the log ignores it.
    const WATERMARK: &str = "watermark.test";

    fn record(wal: &Wal, w: Watermark) {
        std::fs::write(wal.dir.join(WATERMARK), format!("{} {}", w.pos, w.next_index)).unwrap();
    }

    fn recorded(dir: &Path) -> Option<Watermark> {
        let text = std::fs::read_to_string(dir.join(WATERMARK)).ok()?;
        let (pos, next) = text.split_once(' ').unwrap();
        Some(Watermark { pos: pos.parse().unwrap(), next_index: next.parse().unwrap() })
    }

    fn recovery(dir: &Path, purged: Option<u64>) -> Recovery {
        Recovery { purged, watermark: recorded(dir), cut_damage: false }
    }

    /// Opens the log as the log store does: against the recorded watermark, recording the new one.
    fn open(dir: &Path, purged: Option<u64>) -> Result<Wal, StoreError> {
        open_sized(dir, purged, SEGMENT_BYTES)
    }

    fn open_sized(dir: &Path, purged: Option<u64>, segment_bytes: u64) -> Result<Wal, StoreError> {
        let r = Wal::open_with(dir, &recovery(dir, purged), segment_bytes)?;
        record(&r.wal, r.watermark);
        Ok(r.wal)
    }

    /// Appends `range` in one batch and syncs it, recording the watermark.
    fn append(wal: &mut Wal, range: std::ops::RangeInclusive<u64>, tag: &str) {
        append_unsynced(wal, range, tag);
        let w = wal.sync().unwrap();
        record(wal, w);
    }

    /// Appends `range` in one batch (one pwrite) without syncing it.
    fn append_unsynced(wal: &mut Wal, range: std::ops::RangeInclusive<u64>, tag: &str) {
        let entries: Vec<_> = range.map(|i| (i, payload(i, tag))).collect();
        wal.append(&entries).unwrap();
    }

    fn contents(wal: &Wal) -> Vec<(u64, String)> {
        wal.locate(0, u64::MAX).iter().map(|r| (r.index, String::from_utf8(r.read().unwrap()).unwrap())).collect()
    }

    fn expect(range: std::ops::RangeInclusive<u64>, tag: &str) -> Vec<(u64, String)> {
        range.map(|i| (i, format!("{tag}-{i}"))).collect()
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".wal"))
            .collect();
        names.sort();
        names
    }

    /// The file and byte offset of `index`'s record.
    fn where_is(wal: &Wal, index: u64) -> (PathBuf, u64) {
        let r = &wal.locate(index, index + 1)[0];
        let seg = wal.segments.iter().find(|s| Arc::ptr_eq(&s.file, &r.loc.file)).unwrap();
        (seg.path.clone(), r.loc.offset)
    }

    fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
        OpenOptions::new().write(true).open(path).unwrap().write_all_at(bytes, offset).unwrap();
    }

    fn flip_bit(path: &Path, offset: u64) {
        let f = OpenOptions::new().read(true).write(true).open(path).unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, offset).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], offset).unwrap();
    }

    fn refusal(dir: &Path) -> String {
        refusal_sized(dir, SEGMENT_BYTES)
    }

    fn refusal_sized(dir: &Path, segment_bytes: u64) -> String {
        match Wal::open_with(dir, &recovery(dir, None), segment_bytes) {
            Ok(_) => panic!("a damaged log was opened"),
            Err(e) => {
                assert!(e.damage().is_some(), "{e}");
                e.to_string()
            }
        }
    }

    /// A log of ten entries, synced batch by batch (as a follower writes it).
    fn ten_synced(dir: &Path) -> Wal {
        let mut wal = open(dir, None).unwrap();
        for i in 1..=10 {
            append(&mut wal, i..=i, "a");
        }
        wal
    }

    #[test]
    fn entries_survive_reopen_and_new_ones_follow() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        assert!(wal.is_empty());
        append(&mut wal, 1..=10, "a");
        drop(wal);
        let mut wal = open(dir.path(), None).unwrap();
        assert_eq!((wal.first_index(), wal.last_index()), (1, Some(10)));
        assert_eq!(contents(&wal), expect(1..=10, "a"));
        append(&mut wal, 11..=12, "b");
        drop(wal);
        let wal = open(dir.path(), None).unwrap();
        let mut want = expect(1..=10, "a");
        want.extend(expect(11..=12, "b"));
        assert_eq!(contents(&wal), want);
    }

    #[test]
    fn a_torn_batch_is_dropped_and_never_meets_new_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=4, "old");
        // One batch not yet synced: record 7 in it is damaged, as a crash in the middle
        // of writing it back would leave it; record 8 after it reached the disk.
        append_unsynced(&mut wal, 5..=8, "old");
        let (path, at) = where_is(&wal, 7);
        drop(wal);
        write_at(&path, at + HEADER as u64, b"X");
        let mut wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=6, "old"), "records from the bad one on are gone");
        // A new record 7 of the same size: the old record 8 behind the tear must stay dead.
        append(&mut wal, 7..=7, "new");
        drop(wal);
        let wal = open(dir.path(), None).unwrap();
        let mut want = expect(1..=6, "old");
        want.push((7, "new-7".into()));
        assert_eq!(contents(&wal), want);
    }

    #[test]
    fn an_unsynced_record_cut_short_at_the_end_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = ten_synced(dir.path());
        append_unsynced(&mut wal, 11..=11, "b");
        let (path, at) = where_is(&wal, 11);
        drop(wal);
        // Only the first bytes of record 11 reached the disk.
        write_at(&path, at + HEADER as u64 + 2, &[0u8; 6]);
        let wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=10, "a"));
        // The trimmed bytes are zeros now: a second start finds a clean log.
        drop(wal);
        let wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=10, "a"));
    }

    /// The damage issue 38 found trimmed as a torn tail (and the fencing tokens in it handed
    /// out again): every kind of it to the last, acknowledged record refuses.
    #[test]
    fn damage_to_the_last_synced_record_refuses() {
        type Damage = fn(&Path, u64, u64);
        let cases: [(&str, Damage); 7] = [
            ("a payload byte", |p, at, _| flip_bit(p, at + HEADER as u64 + 1)),
            ("the checksum", |p, at, _| flip_bit(p, at)),
            ("the length", |p, at, _| flip_bit(p, at + 4)),
            ("the last 4 KiB page zeroed", |p, _, end| {
                write_at(p, end.saturating_sub(4096).max(SEGMENT_HEADER), &[0u8; 4096])
            }),
            ("the file cut to half its written size", |p, _, end| {
                OpenOptions::new().write(true).open(p).unwrap().set_len(end / 2).unwrap()
            }),
            ("the file cut at a record boundary", |p, at, _| {
                OpenOptions::new().write(true).open(p).unwrap().set_len(at).unwrap()
            }),
            ("the first page (the header) zeroed", |p, _, _| write_at(p, 0, &[0u8; 4096])),
        ];
        for (what, damage) in cases {
            let dir = tempfile::tempdir().unwrap();
            let mut wal = open(dir.path(), None).unwrap();
            for i in 1..=200 {
                append(&mut wal, i..=i, "a");
            }
            let (path, at) = where_is(&wal, 200);
            let end = at + padded(HEADER as u64 + payload(200, "a").len() as u64);
            drop(wal);
            damage(&path, at, end);
            let msg = refusal(dir.path());
            assert!(msg.contains(&path.display().to_string()), "{what}: {msg}");
        }
    }

    #[test]
    fn a_missing_newest_segment_refuses_unless_a_purge_took_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        for i in 1..=40 {
            append(&mut wal, i..=i, "a");
        }
        drop(wal);
        let files = segment_files(dir.path());
        std::fs::remove_file(dir.path().join(files.last().unwrap())).unwrap();
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains("is missing: raft-meta says the log was on disk in it up to index 40"), "{msg}");
        // The whole log directory gone: the same.
        for f in &files {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains("is missing"), "{msg}");
        // Every entry purged (a snapshot holds them): nothing on disk was needed.
        let wal = open_sized(dir.path(), Some(40), 256).unwrap();
        assert!(wal.is_empty() && wal.next_index() == 41);
    }

    #[test]
    fn metadata_older_than_the_log_refuses_and_cannot_be_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = ten_synced(dir.path());
        let old = recorded(dir.path()).unwrap();
        append(&mut wal, 11..=12, "a");
        append(&mut wal, 13..=14, "a");
        drop(wal);
        record_at(dir.path(), old);
        let err = Wal::open(dir.path(), &recovery(dir.path(), None)).err().expect("refused");
        let damaged = err.damage().unwrap();
        assert!(!damaged.cuttable);
        assert!(damaged.message.contains("older than the raft log"), "{damaged}");
    }

    fn record_at(dir: &Path, w: Watermark) {
        std::fs::write(dir.join(WATERMARK), format!("{} {}", w.pos, w.next_index)).unwrap();
    }

    #[test]
    fn without_a_watermark_the_last_record_is_judged_as_v010_did() {
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let (path, at) = where_is(&wal, 10);
        drop(wal);
        std::fs::remove_file(dir.path().join(WATERMARK)).unwrap();
        flip_bit(&path, at + HEADER as u64);
        let wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=9, "a"));
    }

    /// Protocol-aware recovery: the log is cut at the first damage, what follows removed,
    /// and the next start finds a clean, shorter log.
    #[test]
    fn cut_mode_cuts_at_the_first_damage_and_leaves_a_clean_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        for i in 1..=40 {
            append(&mut wal, i..=i, "a");
        }
        let (path, at) = where_is(&wal, 7);
        drop(wal);
        flip_bit(&path, at + HEADER as u64);
        let mut r = recovery(dir.path(), None);
        r.cut_damage = true;
        let opened = Wal::open_with(dir.path(), &r, 256).unwrap();
        let cut = opened.cut.as_ref().expect("the damage reported");
        assert!(cut.message.contains(&format!("damaged at byte {at}")), "{cut}");
        assert_eq!(contents(&opened.wal), expect(1..=6, "a"));
        record(&opened.wal, opened.watermark);
        drop(opened);
        let wal = open_sized(dir.path(), None, 256).unwrap();
        assert_eq!(contents(&wal), expect(1..=6, "a"));

        // A segment cut short: it gets its size back and the log ends at its last record.
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let (path, at) = where_is(&wal, 8);
        drop(wal);
        OpenOptions::new().write(true).open(&path).unwrap().set_len(at).unwrap();
        let mut r = recovery(dir.path(), None);
        r.cut_damage = true;
        let opened = Wal::open(dir.path(), &r).unwrap();
        assert!(opened.cut.is_some());
        assert_eq!(contents(&opened.wal), expect(1..=7, "a"));
        record(&opened.wal, opened.watermark);
        drop(opened);
        assert_eq!(contents(&open(dir.path(), None).unwrap()), expect(1..=7, "a"));
    }

    #[test]
    fn a_hole_in_an_unsynced_batch_with_data_after_it_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=3, "a");
        // Pages of one unsynced write reach the disk in any order: the middle of the batch
        // is still zeros, records after it were written.
        append_unsynced(&mut wal, 4..=40, "b");
        let (path, from) = where_is(&wal, 10);
        let (_, to) = where_is(&wal, 20);
        drop(wal);
        write_at(&path, from, &vec![0u8; (to - from) as usize]);
        let wal = open(dir.path(), None).unwrap();
        let mut want = expect(1..=3, "a");
        want.extend(expect(4..=9, "b"));
        assert_eq!(contents(&wal), want);
    }

    #[test]
    fn a_flipped_bit_in_the_middle_refuses_naming_the_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let (path, at) = where_is(&wal, 4);
        drop(wal);
        flip_bit(&path, at + HEADER as u64 + 1);
        let msg = refusal(dir.path());
        assert!(msg.contains(&format!("{} is damaged at byte {at}", path.display())), "{msg}");
        assert!(msg.contains("checksum mismatch"), "{msg}");
        assert!(msg.contains("on disk up to"), "{msg}");
    }

    #[test]
    fn zeros_in_the_middle_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let (path, at) = where_is(&wal, 5);
        let (_, end) = where_is(&wal, 6);
        drop(wal);
        write_at(&path, at, &vec![0u8; (end - at) as usize]);
        let msg = refusal(dir.path());
        assert!(msg.contains(&format!("damaged at byte {at}")), "{msg}");
        assert!(msg.contains("zeros where a record should start"), "{msg}");
    }

    #[test]
    fn the_checksum_covers_the_length() {
        let mut rec = Vec::new();
        encode_record(&mut rec, 7, 0, b"payload!");
        assert!(parse_record(&rec, 1, SEGMENT_HEADER + 64).is_ok());
        // A shorter length still points at bytes of the same payload; only a checksum
        // over the length itself notices.
        let mut shorter = rec.clone();
        shorter[4..8].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(parse_record(&shorter, 1, SEGMENT_HEADER + 64).unwrap_err(), "record checksum mismatch");

        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let (path, at) = where_is(&wal, 3);
        drop(wal);
        flip_bit(&path, at + 4);
        let msg = refusal(dir.path());
        assert!(msg.contains(&format!("damaged at byte {at}")), "{msg}");
    }

    #[test]
    fn a_damaged_record_followed_by_later_synced_segments_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        for i in 1..=40 {
            append(&mut wal, i..=i, "a");
        }
        // The last record of the first segment holding entries: nothing after it in its
        // own file vouches for it, the next segments' records do.
        let (first_path, _) = where_is(&wal, 1);
        let last_there = (1..=40).take_while(|i| where_is(&wal, *i).0 == first_path).last().unwrap();
        let (_, at) = where_is(&wal, last_there);
        drop(wal);
        flip_bit(&first_path, at + HEADER as u64);
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains(&format!("{} is damaged at byte {at}", first_path.display())), "{msg}");
        assert!(msg.contains("raft-meta says the log was on disk up to"), "{msg}");
        // Without a recorded watermark (v0.1.0), the later records' own marks say the same.
        std::fs::remove_file(dir.path().join(WATERMARK)).unwrap();
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains("a record in a later segment"), "{msg}");
    }

    #[test]
    fn a_missing_middle_segment_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        for i in 1..=40 {
            append(&mut wal, i..=i, "a");
        }
        drop(wal);
        let files = segment_files(dir.path());
        assert!(files.len() > 3, "{files:?}");
        std::fs::remove_file(dir.path().join(&files[1])).unwrap();
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains(&files[2]), "names the segment after the gap: {msg}");
        assert!(msg.contains("missing"), "{msg}");
        // The first one missing too: the log does not start at its start.
        std::fs::remove_file(dir.path().join(&files[0])).unwrap();
        let msg = refusal_sized(dir.path(), 256);
        assert!(msg.contains(&files[2]) && msg.contains("missing"), "{msg}");
    }

    #[test]
    fn a_segment_of_another_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        let path = wal.segments[0].path.clone();
        drop(wal);
        write_at(&path, 8, &2u32.to_le_bytes());
        let msg = refusal(dir.path());
        assert!(msg.contains("format version 2; this dls reads version 1"), "{msg}");
        write_at(&path, 0, b"SOMETHIN");
        let msg = refusal(dir.path());
        assert!(msg.contains("wrong magic bytes") && msg.contains("damaged at byte 0"), "{msg}");
    }

    #[test]
    fn an_unsynced_segment_after_a_rollover_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        append(&mut wal, 1..=2, "a");
        // Unsynced writes roll over into a new segment; its header never reached the disk,
        // nor did the end of the first segment's last batch.
        for i in 3..=12 {
            append_unsynced(&mut wal, i..=i, "b");
        }
        let (path, at) = where_is(&wal, 3);
        let last = wal.segments.last().unwrap().path.clone();
        drop(wal);
        write_at(&path, at + 3, b"\0\0\0");
        write_at(&last, 0, &[0u8; SEGMENT_HEADER as usize]);
        let wal = open_sized(dir.path(), None, 256).unwrap();
        assert_eq!(contents(&wal), expect(1..=2, "a"));
        assert!(!last.exists(), "the segment after the torn tail is removed");
    }

    #[test]
    fn an_empty_segment_that_never_reached_the_disk_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let wal = ten_synced(dir.path());
        drop(wal);
        let empty = dir.path().join(segment_name(99, 11));
        std::fs::write(&empty, vec![0u8; 4096]).unwrap();
        let wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=10, "a"));
        assert!(!empty.exists());
    }

    #[test]
    fn truncated_entries_do_not_come_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=10, "a");
        wal.truncate(6).unwrap();
        wal.sync().unwrap();
        assert_eq!(wal.last_index(), Some(5));
        drop(wal);
        let mut wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(1..=5, "a"));
        append(&mut wal, 6..=7, "b");
        wal.truncate(3).unwrap();
        append(&mut wal, 3..=3, "c");
        drop(wal);
        let wal = open(dir.path(), None).unwrap();
        let mut want = expect(1..=2, "a");
        want.push((3, "c-3".into()));
        assert_eq!(contents(&wal), want);
    }

    #[test]
    fn segments_roll_over_and_purge_deletes_covered_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open_sized(dir.path(), None, 256).unwrap();
        for i in 1..=40 {
            append(&mut wal, i..=i, "a");
        }
        let before = segment_files(dir.path()).len();
        assert!(before > 3, "small segments must roll over, got {before}");
        wal.purge(30).unwrap();
        let after = segment_files(dir.path()).len();
        assert!(after < before, "purge deletes segments: {before} -> {after}");
        assert_eq!(contents(&wal), expect(31..=40, "a"));
        drop(wal);
        // The purge point explains why the log starts late.
        let wal = open_sized(dir.path(), Some(30), 256).unwrap();
        assert_eq!(contents(&wal), expect(31..=40, "a"));
        drop(wal);
        let msg = open_sized(dir.path(), Some(10), 256).err().expect("refused").to_string();
        assert!(msg.contains("missing"), "{msg}");
    }

    #[test]
    fn the_first_entry_has_index_zero() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 0..=3, "a");
        wal.purge(1).unwrap();
        drop(wal);
        let wal = open(dir.path(), Some(1)).unwrap();
        assert_eq!(contents(&wal), expect(2..=3, "a"));
    }

    #[test]
    fn the_log_can_jump_forward_past_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=3, "a");
        wal.purge(100).unwrap();
        assert!(wal.is_empty());
        append(&mut wal, 101..=102, "b");
        drop(wal);
        let wal = open(dir.path(), Some(100)).unwrap();
        assert_eq!((wal.first_index(), wal.last_index()), (101, Some(102)));
        assert_eq!(contents(&wal), expect(101..=102, "b"));
        drop(wal);
        // A follower told to jump (a snapshot installed) before the purge was recorded:
        // the new segment's header says the log starts there.
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=3, "a");
        append(&mut wal, 50..=51, "b");
        drop(wal);
        let wal = open(dir.path(), None).unwrap();
        assert_eq!(contents(&wal), expect(50..=51, "b"));
    }

    #[test]
    fn after_a_failed_write_nothing_more_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("SKIPPED: cannot mount a tmpfs (needs root)");
            return;
        }
        let unmount = || std::process::Command::new("umount").arg("-l").arg(dir.path()).status();
        let result = std::panic::catch_unwind(|| {
            let mut wal = open_sized(dir.path(), None, 4 << 20).unwrap();
            append(&mut wal, 1..=1, "a");
            let filler = dir.path().join("filler");
            let mut f = File::create(&filler).unwrap();
            while io::Write::write_all(&mut f, &[1u8; 4096]).is_ok() {}
            let big = vec![7u8; 256 * 1024];
            let err = (2..10).find_map(|i| wal.append(&[(i, big.clone())]).err()).expect("a full disk refuses a write");
            assert_eq!(err.os_error().and_then(io::Error::raw_os_error), Some(28), "{err}");
            assert!(err.to_string().contains("cannot write"), "{err}");
            std::fs::remove_file(filler).unwrap();
            let err = wal.append(&[(9, b"x".to_vec())]).unwrap_err();
            assert!(err.to_string().contains("an earlier write to the raft log failed"), "{err}");
        });
        unmount().unwrap();
        result.unwrap();
    }

    #[test]
    fn a_record_with_a_wrong_checksum_is_reported_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = open(dir.path(), None).unwrap();
        append(&mut wal, 1..=2, "a");
        let r = &wal.locate(2, 3)[0];
        r.loc.file.write_all_at(b"Z", r.loc.offset + HEADER as u64).unwrap();
        let err = r.read().unwrap_err();
        assert!(err.to_string().contains("record 2 is corrupt"), "{err}");
    }
}

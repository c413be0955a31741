//! Faults of a node's storage while clients work:
//! - `disk-full`: a node's data directory (a small tmpfs) fills up. The node must stop
//!   acknowledging and stop (docs/storage.md, "Disk faults"), never acknowledge a write it
//!   could not make durable; once space is freed and it is started again it catches up.
//! - `torn-tail`: a node is SIGKILLed right after a write and its newest log segment gets
//!   what a power cut in the middle of a write leaves (a record's first bytes and no
//!   more). It must trim exactly that, say so, and rejoin.
//!
//! - `damaged-record`: a node is SIGKILLed and an acknowledged part of its newest log
//!   segment is damaged, the kind drawn by the seed (a byte of one of its last records
//!   flipped: payload, checksum or length; the page holding its last record zeroed; the
//!   file cut at a record). A member of a cluster must not trim that as a torn tail: it
//!   cuts its log at the damage, stays out of votes and elections, fetches what it lost
//!   from the leader and takes part again (protocol-aware recovery, docs/storage.md). The
//!   history checkers then find whether any token was handed out twice.
//!
//! Each returns the broken promises it saw (besides what the history checkers find).

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;

use caerus_testkit::{disk, Cluster};

use crate::cluster::ensure_running;
use crate::history::History;

/// How long a node may take to start serving again after a torn tail.
const RESTART: Duration = Duration::from_secs(10);

pub async fn disk_full(
    c: &mut Cluster,
    n: u64,
    leader: bool,
    hold: Duration,
    h: &History,
) -> anyhow::Result<Vec<String>> {
    let Some(tmpfs) = c.disk(n) else {
        h.log("disk-full: data directories are not on tmpfs, skipped");
        return Ok(vec![]);
    };
    let filler = tmpfs.fill()?;
    h.log(format!(
        "disk-full: node {n}{}'s data directory is full for {} ms",
        if leader { " (leader)" } else { "" },
        hold.as_millis()
    ));
    tokio::time::sleep(hold).await;
    let exited = c.exited(n);
    std::fs::remove_file(&filler)?;
    let mut broken = Vec::new();
    match exited {
        Some(status) => {
            let log = c.log_of(n);
            if status.success() {
                broken.push(format!("node {n} exited 0 on a full disk instead of failing"));
            } else if !log.contains("raft stopped on this node") {
                broken.push(format!(
                    "node {n} stopped on a full disk without saying why (\"raft stopped on this node\")"
                ));
            }
            h.log(format!("disk-full: node {n} stopped ({status}); space freed, it starts again"));
        }
        None => h.log(format!("disk-full: node {n} kept running (it did not need to write); space freed")),
    }
    Ok(broken)
}

pub async fn torn_tail(
    c: &mut Cluster,
    n: u64,
    leader: bool,
    rng: &mut StdRng,
    h: &History,
) -> anyhow::Result<Vec<String>> {
    c.kill(n);
    let garbage: Vec<u8> = (0..rng.gen_range(9..200)).map(|_| rng.gen_range(1..=255u8)).collect();
    let data_dir = c.node(n).data_dir.clone();
    let (file, offset, bytes) = match disk::tear_tail(&data_dir, &garbage) {
        Ok(torn) => torn,
        Err(e) => {
            // A node with no log yet (one that has just been re-added) has no tail to tear.
            h.log(format!("torn-tail: node {n} has no log segment to tear ({e}); restarted as it was"));
            ensure_running(c, n)?;
            return Ok(vec![]);
        }
    };
    h.log(format!(
        "torn-tail: SIGKILL node {n}{}, {bytes} bytes of a half-written record at byte {offset} of {}, restart",
        if leader { " (leader)" } else { "" },
        file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    ensure_running(c, n)?;
    let mut broken = Vec::new();
    let deadline = Instant::now() + RESTART;
    loop {
        // Only what this start logs counts.
        let log = c.log_since_start(n);
        if let Some(status) = c.exited(n) {
            broken.push(format!("node {n} refused to start after a torn tail ({status}); see its log"));
            break;
        }
        if log.contains("trimmed a torn tail") && log.contains(&offset.to_string()) {
            h.log(format!("torn-tail: node {n} trimmed the tail at byte {offset} and runs"));
            break;
        }
        if Instant::now() > deadline {
            broken.push(format!("node {n} did not report trimming the torn tail at byte {offset}"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(broken)
}

/// How long a node that cut its log at damage may take to fetch what it lost.
const REFETCH: Duration = Duration::from_secs(20);

/// The damage `damaged_record` draws.
#[derive(Clone, Copy, Debug)]
enum RecordDamage {
    Payload,
    Checksum,
    Length,
    LastPageZeroed,
    CutAtRecord,
}

pub async fn damaged_record(
    c: &mut Cluster,
    n: u64,
    leader: bool,
    rng: &mut StdRng,
    h: &History,
) -> anyhow::Result<Vec<String>> {
    c.kill(n);
    let data_dir = c.node(n).data_dir.clone();
    // Only records a later one vouches for were surely acknowledged (past the watermark a
    // trim is right): the newest segment that has such records.
    let found = disk::segments(&data_dir)?.into_iter().rev().find_map(|p| {
        let records = disk::acknowledged(&p).ok().filter(|r| !r.is_empty())?;
        Some((p, records))
    });
    let Some((segment, records)) = found else {
        h.log(format!("damaged-record: node {n} has no acknowledged log record to damage; restarted as it was"));
        ensure_running(c, n)?;
        return Ok(vec![]);
    };
    // One of the last few: the tail is where a trim would hide the damage.
    let record = records[records.len() - 1 - rng.gen_range(0..records.len().min(3))];
    let kinds = [
        RecordDamage::Payload,
        RecordDamage::Checksum,
        RecordDamage::Length,
        RecordDamage::LastPageZeroed,
        RecordDamage::CutAtRecord,
    ];
    let kind = kinds[rng.gen_range(0..kinds.len())];
    let last = *records.last().expect("records");
    let at = match kind {
        RecordDamage::Payload => {
            let at = record.offset + disk::RECORD_HEADER + rng.gen_range(0..record.len);
            disk::flip_byte(&segment, at)?;
            at
        }
        RecordDamage::Checksum => {
            disk::flip_byte(&segment, record.offset + rng.gen_range(0..4))?;
            record.offset
        }
        RecordDamage::Length => {
            disk::flip_byte(&segment, record.offset + 4)?;
            record.offset
        }
        RecordDamage::LastPageZeroed => {
            let page = (last.end() - 1) / 4096 * 4096;
            disk::zero(&segment, page, 4096)?;
            page
        }
        RecordDamage::CutAtRecord => {
            std::fs::OpenOptions::new().write(true).open(&segment)?.set_len(record.offset)?;
            record.offset
        }
    };
    h.log(format!(
        "damaged-record: SIGKILL node {n}{}, {kind:?} at byte {at} of {}, restart",
        if leader { " (leader)" } else { "" },
        segment.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    ensure_running(c, n)?;
    let mut broken = Vec::new();
    let deadline = Instant::now() + REFETCH;
    loop {
        let log = c.log_since_start(n);
        if let Some(status) = c.exited(n) {
            broken.push(format!("node {n} stopped after {kind:?} damage ({status}) instead of fetching it again"));
            break;
        }
        if log.contains("trimmed a torn tail") {
            broken.push(format!("node {n} trimmed {kind:?} damage to acknowledged records as a torn tail"));
            break;
        }
        if log.contains("fetched again every entry this node had lost") {
            h.log(format!("damaged-record: node {n} cut its log at the damage and fetched it again"));
            break;
        }
        if Instant::now() > deadline {
            let cut = log.contains("cutting the raft log here");
            broken.push(format!(
                "node {n} {} within {REFETCH:?} after {kind:?} damage",
                if cut { "cut its log but did not fetch it again" } else { "did not report the damage" }
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(broken)
}

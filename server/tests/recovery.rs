//! Strict recovery on real `dls` processes and real files (docs/storage.md): a single node
//! hands out fencing tokens, is stopped, its files are damaged byte by byte, and it is
//! started again. Damage it cannot prove harmless stops it with the file and offset named;
//! a torn tail past the last sync is trimmed and logged; a fencing token is never handed
//! out twice. The damage issue 38 found trimmed is in `attacks/storage.rs`.

use crate::common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, LockMode};
use common::{grant_many, opts, wait, Cluster};

const SEGMENT_HEADER: u64 = 64;

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(
        ClientConfig::new(cluster.endpoints()).without_api_key().with_retry_deadline(Duration::from_secs(20)),
    )
    .await
    .unwrap()
}

fn data_dir(cluster: &Cluster) -> PathBuf {
    cluster.nodes[0].data_dir.clone()
}

/// One past the last non-zero byte of a file.
fn written_end(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i as u64 + 1)
}

/// The newest log segment holding records, and where its written bytes end.
fn last_written_segment(dir: &Path) -> (PathBuf, u64) {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("raft-log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segments.sort();
    segments
        .into_iter()
        .rev()
        .map(|p| {
            let end = written_end(&p);
            (p, end)
        })
        .find(|(_, end)| *end > SEGMENT_HEADER)
        .expect("a segment with records")
}

/// Starts the stopped node again and expects it to refuse: exits non-zero with a log
/// that contains every one of `needles`.
async fn expect_refusal(cluster: &mut Cluster, needles: &[&str]) {
    cluster.restart(1);
    let status = cluster.wait_exit(1, Duration::from_secs(20)).await.expect("the node must refuse to start");
    assert!(!status.success(), "exit status {status}");
    let log = cluster.log_of(1);
    for needle in needles {
        assert!(log.contains(needle), "the log must say {needle:?}:\n{log}");
    }
}

#[tokio::test]
async fn a_flipped_word_in_the_middle_of_the_log_stops_the_node_naming_file_and_offset() {
    let mut cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    grant_many(&c, "k", 30, 0).await;
    // A clean stop: everything is synced, nothing is torn.
    assert!(cluster.terminate(1, Duration::from_secs(10)).await.is_some_and(|s| s.success()));

    let (segment, end) = last_written_segment(&data_dir(&cluster));
    let at = SEGMENT_HEADER + (end - SEGMENT_HEADER) / 3;
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&segment).unwrap();
    let mut word = [0u8; 4];
    file.read_exact_at(&mut word, at).unwrap();
    file.write_all_at(&word.map(|b| !b), at).unwrap();
    drop(file);

    expect_refusal(&mut cluster, &[&format!("{} is damaged at byte", segment.display()), "dls members remove"]).await;
    // The offset named is that of the record holding the changed bytes.
    let log = cluster.log_of(1);
    let named: u64 = log.split("is damaged at byte ").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
    assert!(named <= at && at - named < 4096, "named byte {named}, changed byte {at}");
}

#[tokio::test]
async fn a_torn_tail_past_the_last_sync_is_trimmed_and_tokens_keep_rising() {
    let mut cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let before = grant_many(&c, "k", 30, 0).await;
    cluster.kill(1);

    // What a power cut in the middle of a write leaves: the first bytes of a record after
    // the last one synced, which nobody was told about.
    let (segment, offset, _) = caerus_testkit::disk::tear_tail(&data_dir(&cluster), &[0x5a; 37]).unwrap();

    cluster.restart(1);
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    let log = cluster.log_of(1);
    assert!(log.contains("trimmed a torn tail off the raft log"), "{log}");
    assert!(log.contains(&segment.display().to_string()), "the trim names the file: {log}");
    assert!(log.contains(&format!("offset={offset}")) && log.contains("dropped_bytes="), "{log}");
    assert!(log.contains("so nothing in it was acknowledged"), "{log}");

    let c = client(&cluster).await;
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "after", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(next.fencing_token > before, "token {} handed out again (had {before})", next.fencing_token);
    t.commit().await.unwrap();
}

#[tokio::test]
async fn a_truncated_snapshot_file_is_never_served_in_part() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "10"]).await;
    let c = client(&cluster).await;
    grant_many(&c, "k", 30, 0).await;
    cluster.kill(1);

    // A kill can land between writing a new snapshot and deleting the one before it (the
    // encoding runs on its own thread), so cut every snapshot file: with one left whole, the
    // node could rightly start from it and the log.
    let snapshots = data_dir(&cluster).join("snapshots");
    let snaps: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    assert!(!snaps.is_empty(), "a snapshot file");
    for snap in &snaps {
        let len = std::fs::metadata(snap).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(snap).unwrap().set_len(len * 2 / 3).unwrap();
    }

    // The log was purged past the snapshot's start (every 10 entries, 5 kept), so no older
    // state and the log hold everything: refused, with every file named.
    let names: Vec<String> = snaps.iter().map(|p| p.display().to_string()).collect();
    let mut needles: Vec<&str> = names.iter().map(String::as_str).collect();
    needles.extend(["does not start", "dls members remove"]);
    expect_refusal(&mut cluster, &needles).await;
    assert!(snaps.iter().all(|p| p.exists()), "the refusal leaves the files for inspection");
}

/// A segment the node cannot read (here a directory where the file should be) stops it
/// with the file, what it was doing and the OS's own words: before the storage errors kept
/// their causes the operator read only "Is a directory (os error 21)", no file named.
#[tokio::test]
async fn an_unreadable_segment_stops_the_node_naming_the_file_and_the_os_error() {
    let mut cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    grant_many(&c, "k", 5, 0).await;
    assert!(cluster.terminate(1, Duration::from_secs(10)).await.is_some_and(|s| s.success()));

    let (segment, _) = last_written_segment(&data_dir(&cluster));
    std::fs::remove_file(&segment).unwrap();
    std::fs::create_dir(&segment).unwrap();
    let named = format!("cannot read the raft log segment {}", segment.display());
    expect_refusal(&mut cluster, &[&named, "Is a directory (os error 21)"]).await;
}

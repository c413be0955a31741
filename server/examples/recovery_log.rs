//! Writes the data directory of a single node whose raft log holds about `MIB` MiB, for
//! measuring what recovery costs at start (`scripts/measure-recovery.sh`, issue 38).
//!
//! `cargo run --release -p caerus-server --example recovery_log -- DIR MIB [v0.1.0]`
//!
//! The log: a membership entry for node 1 (`127.0.0.1:7070`), then entries of ~4 KiB that
//! the table applies at once (an end of a transaction that does not exist, refused), all in
//! term 1, synced batch by batch. With `v0.1.0` the vote goes to sled as v0.1.0 kept it
//! (`raft.sled`), else to `raft-meta` with the watermark, as this version writes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use caerus_server::locks::{Command, LogCommand};
use caerus_server::raft::identity::{self, Identity};
use caerus_server::raft::meta::{MetaFile, RaftMeta};
use caerus_server::raft::types::{codec, Entry, LogId, Member, Vote};
use caerus_server::raft::wal::{Recovery, Wal};
use openraft::{CommittedLeaderId, EntryPayload, Membership};

const BATCH: u64 = 256;
const PAYLOAD: usize = 4000;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, mib, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: recovery_log DIR MIB [v0.1.0]");
    };
    let v010 = rest.first().is_some_and(|a| a == "v0.1.0");
    let dir = PathBuf::from(dir);
    let target = mib.parse::<u64>()? << 20;
    std::fs::create_dir_all(&dir)?;
    let mut wal = Wal::open(&dir.join("raft-log"), &Recovery::default())?.wal;
    let leader = CommittedLeaderId::new(1, 1);
    let member = Member { addr: "127.0.0.1:7070".into(), peer_addr: String::new() };
    let membership = Membership::new(vec![BTreeSet::from([1])], BTreeMap::from([(1, member)]));
    let first = Entry { log_id: LogId::new(leader, 0), payload: EntryPayload::Membership(membership) };
    wal.append(&[(0, codec::encode(&first)?)])?;
    let (mut index, mut written) = (1u64, 0u64);
    let mut watermark = wal.sync()?;
    while written < target {
        let batch: Vec<(u64, Vec<u8>)> = (index..index + BATCH)
            .map(|i| {
                let cmd = Command::End { txn: u64::MAX - i, request_id: Some("r".repeat(PAYLOAD)), commit: true };
                let payload = EntryPayload::Normal(LogCommand { now_ms: 1_700_000_000_000 + i, cmd });
                Ok((i, codec::encode(&Entry { log_id: LogId::new(leader, i), payload })?))
            })
            .collect::<anyhow::Result<_>>()?;
        written += batch.iter().map(|(_, p)| p.len() as u64 + 24).sum::<u64>();
        wal.append(&batch)?;
        watermark = wal.sync()?;
        index += BATCH;
    }
    drop(wal);
    let vote = Vote::new_committed(1, 1);
    if v010 {
        let db = sled::open(dir.join("raft.sled"))?;
        db.open_tree("raft_meta")?.insert("vote", codec::encode(&vote)?)?;
        db.flush()?;
    } else {
        MetaFile::create(&dir, RaftMeta { vote: Some(vote), durable: Some(watermark), ..RaftMeta::default() })?;
    }
    identity::store(&dir, &Identity { cluster_id: "recovery-measurement".into(), node_id: 1 })?;
    println!("{}: {index} entries, {} MiB of records", dir.display(), written >> 20);
    Ok(())
}

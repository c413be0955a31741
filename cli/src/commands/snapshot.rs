//! `dls snapshot save|restore`: back a cluster's state up to a file, and seed the data
//! directories of a new cluster from one (docs/storage.md, "Backups").

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::connect::{print_line, CliError, ClusterArgs};
use caerus_server::raft::restore::{self, DEFAULT_TOKEN_MARGIN};
use caerus_server::raft::snapshot_store::read_snapshot;
use caerus_server::ServeArgs;

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Save a consistent snapshot of the cluster's state (from the leader, after a linearizable read) to FILE.
    #[command(after_help = "The file holds every lock, transaction and the fencing token counter, with a length and \
checksum that `dls snapshot restore` checks. It is written as FILE.part and renamed once complete and checked.\n\
Needs an admin key without namespace limits on a server with an API keys file.\n\n\
Example:\n  dls snapshot save backup-2026-12-01.snap --endpoints 10.0.0.1:7070")]
    Save(SaveArgs),
    /// Seed an empty data directory for a node of a NEW cluster from a saved FILE; then start it with `dls serve`.
    #[command(after_help = "Give the same --node-id, --peers (or --listen) and --data-dir the node will be served \
with, and run it for every node of the new cluster with the same FILE and --peers; then start them all with \
`dls serve`. They elect a leader without bootstrapping and get a cluster id of their own (the old cluster's nodes \
refuse their traffic).\n\
Fencing tokens: the old cluster may have granted locks after the backup. The new cluster's tokens start above \
--token-floor, which must be at least the backup's last token; without it, 2^40 above the backup's last token.\n\
Locks held in the backup stay held until their transactions' leases expire.\n\n\
Example:\n  dls snapshot restore backup.snap --node-id 1 --peers 1=10.0.1.1:7070/7080,2=10.0.1.2:7070/7080,\
3=10.0.1.3:7070/7080 --data-dir /var/lib/dls")]
    Restore(RestoreArgs),
}

#[derive(Args, Debug)]
pub struct SaveArgs {
    /// Where to write the snapshot (refused if it exists).
    pub file: PathBuf,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The file written by `dls snapshot save`.
    pub file: PathBuf,
    /// Every fencing token of the new cluster is above this; at least the highest token the old cluster handed out
    /// (default: the backup's last token + 2^40).
    #[arg(long, value_name = "TOKEN")]
    pub token_floor: Option<u64>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

pub async fn run(command: SnapshotCommand) -> Result<(), CliError> {
    match command {
        SnapshotCommand::Save(args) => save(args).await,
        SnapshotCommand::Restore(args) => restore(args),
    }
}

async fn save(args: SaveArgs) -> Result<(), CliError> {
    if args.file.exists() {
        return Err(CliError::usage(format!("{} exists; give a new file name", args.file.display())));
    }
    let client = args.cluster.client().await?;
    let part = args.file.with_extension("part");
    let written = download(&client, &part).await;
    let checked = written.and_then(|bytes| {
        let (meta, state) = read_snapshot(&part).map_err(|e| CliError::failure(format!("{e}")))?;
        Ok((bytes, meta, state.table.last_token()))
    });
    let (bytes, meta, token) = match checked {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
    };
    std::fs::rename(&part, &args.file)
        .map_err(|e| CliError::failure(format!("cannot rename {} to {}: {e}", part.display(), args.file.display())))?;
    let index = meta.last_log_id.map_or(0, |l| l.index);
    print_line(&format!(
        "saved snapshot at log index {index} ({bytes} bytes, last fencing token {token}) to {}",
        args.file.display()
    ))
}

/// Writes the leader's snapshot into `part`, synced; the number of bytes.
async fn download(client: &caerus_core::DlsClient, part: &Path) -> Result<u64, CliError> {
    let io = |e: std::io::Error| CliError::failure(format!("cannot write {}: {e}", part.display()));
    let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(part).map_err(io)?;
    let mut pieces = client.save_snapshot().await?;
    let mut bytes = 0u64;
    while let Some(piece) = pieces.next().await? {
        out.write_all(&piece).map_err(io)?;
        bytes += piece.len() as u64;
    }
    out.sync_all().map_err(io)?;
    Ok(bytes)
}

fn restore(args: RestoreArgs) -> Result<(), CliError> {
    let (_, cfg) = args.serve.node_config().map_err(|e| CliError::usage(format!("{e:#}")))?;
    let done = restore::restore(&args.file, &cfg.data_dir, cfg.id, &cfg.members, args.token_floor)
        .map_err(|e| CliError::failure(format!("{e:#}")))?;
    let floor = if args.token_floor.is_some() {
        format!("above --token-floor {}", done.token_floor)
    } else {
        format!(
            "above {} (the backup's last token {} + {DEFAULT_TOKEN_MARGIN}, for grants the old cluster made after the \
             backup; --token-floor sets it)",
            done.token_floor, done.backup_token
        )
    };
    print_line(&format!(
        "restored node {} of new cluster {} into {} at log index {}; fencing tokens continue {floor}. Start it with \
         `dls serve` and the same flags, after restoring every member from the same file.",
        cfg.id,
        done.cluster_id,
        cfg.data_dir.display(),
        done.index
    ))
}

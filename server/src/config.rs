//! Command-line flags of `dls` (each also an environment variable).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::node::NodeConfig;

#[derive(Parser, Debug)]
#[command(name = "dls", version, about = "Caerus DLS: a raft-replicated distributed lock service with fencing tokens")]
pub struct Cli {
    /// Log filter: error, warn, info, debug, trace, or a tracing directive like `caerus_server=debug`.
    #[arg(long, env = "DLS_LOG", default_value = "info", global = true)]
    pub log: String,
    #[command(subcommand)]
    pub command: CliCommand,
}

#[derive(Subcommand, Debug)]
pub enum CliCommand {
    /// Run a lock server node. With no flags: a single-node cluster on 127.0.0.1:7070 with data in ./dls-data.
    Serve(ServeArgs),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// This node's id in the cluster (a key of --peers).
    #[arg(long, env = "DLS_NODE_ID", default_value_t = 1)]
    pub node_id: u64,
    /// Address to listen on for clients and peers. Default: this node's --peers address, or 127.0.0.1:7070.
    #[arg(long, env = "DLS_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Directory for the raft log, vote and snapshots.
    #[arg(long, env = "DLS_DATA_DIR", default_value = "./dls-data")]
    pub data_dir: PathBuf,
    /// Cluster members as ID=HOST:PORT,... (three or five nodes). Nodes started with the
    /// same list form the cluster by themselves. Omit for a single-node cluster.
    #[arg(long, env = "DLS_PEERS")]
    pub peers: Option<String>,
    /// API keys file (TOML with SHA-256 hashes; see `dls keys add`). Without it the server is open.
    #[arg(long, env = "DLS_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// Raft heartbeat interval in milliseconds.
    #[arg(long, env = "DLS_HEARTBEAT_MS", default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Minimum raft election timeout in milliseconds (the maximum is twice this).
    #[arg(long, env = "DLS_ELECTION_TIMEOUT_MS", default_value_t = 500)]
    pub election_timeout_ms: u64,
    /// Take a snapshot and compact the log every this many log entries.
    #[arg(long, env = "DLS_SNAPSHOT_EVERY", default_value_t = 10_000)]
    pub snapshot_every: u64,
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Create a new API key, append its SHA-256 hash to FILE and print the key once.
    Add {
        /// The keys file (created if missing).
        #[arg(long)]
        file: PathBuf,
        /// A unique name for the key (shown in logs; owns the transactions it begins).
        #[arg(long)]
        name: String,
        /// Limit the key to namespaces starting with this prefix (repeatable). Default: all namespaces.
        #[arg(long = "namespace")]
        namespaces: Vec<String>,
    },
}

/// Parses `1=127.0.0.1:7070,2=127.0.0.1:7071`.
pub fn parse_peers(raw: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--peers entry {part:?} must look like ID=HOST:PORT"))?;
        let id: u64 =
            id.trim().parse().map_err(|_| anyhow::anyhow!("--peers entry {part:?}: {id:?} is not a node id"))?;
        if id == 0 {
            anyhow::bail!("--peers entry {part:?}: node ids start at 1");
        }
        if out.insert(id, addr.trim().to_string()).is_some() {
            anyhow::bail!("--peers names node {id} twice");
        }
    }
    if out.is_empty() {
        anyhow::bail!("--peers is empty; give ID=HOST:PORT for every member");
    }
    Ok(out)
}

impl ServeArgs {
    /// Resolves the listen address and the member list.
    pub fn node_config(&self) -> anyhow::Result<(SocketAddr, NodeConfig)> {
        let (listen, members) = match &self.peers {
            Some(raw) => {
                let members = parse_peers(raw)?;
                let own = members.get(&self.node_id).ok_or_else(|| {
                    anyhow::anyhow!("--node-id {} is not in --peers {raw}; add it or fix the id", self.node_id)
                })?;
                let listen = match self.listen {
                    Some(l) => l,
                    None => {
                        own.parse().map_err(|e| anyhow::anyhow!("node {}'s peer address {own:?}: {e}", self.node_id))?
                    }
                };
                (listen, members)
            }
            None => {
                let listen = self.listen.unwrap_or_else(|| "127.0.0.1:7070".parse().expect("valid default"));
                (listen, BTreeMap::from([(self.node_id, listen.to_string())]))
            }
        };
        if self.election_timeout_ms < self.heartbeat_ms * 2 {
            anyhow::bail!("--election-timeout-ms must be at least twice --heartbeat-ms");
        }
        if self.snapshot_every < 10 {
            anyhow::bail!("--snapshot-every must be at least 10");
        }
        let cfg = NodeConfig {
            id: self.node_id,
            advertise: members[&self.node_id].clone(),
            data_dir: self.data_dir.clone(),
            members,
            heartbeat_ms: self.heartbeat_ms,
            election_timeout_ms: self.election_timeout_ms,
            snapshot_every: self.snapshot_every,
        };
        Ok((listen, cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_reject_mistakes() {
        let p = parse_peers("1=127.0.0.1:7070, 2=127.0.0.1:7071").unwrap();
        assert_eq!(p[&2], "127.0.0.1:7071");
        assert!(parse_peers("1=a,1=b").is_err());
        assert!(parse_peers("x=a").is_err());
        assert!(parse_peers("0=a").is_err());
        assert!(parse_peers("127.0.0.1:7070").is_err());
    }
}

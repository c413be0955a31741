//! The `dls` command line: `serve`, `keys`, and the operator commands.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::ServeArgs;

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
        /// Allow the key to call the operator API (list locks, abort transactions, status).
        #[arg(long)]
        admin: bool,
    },
}

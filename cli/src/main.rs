//! `dls`: the Caerus DLS server and its admin commands.

mod commands;
mod config_file;

use clap::CommandFactory;
use tracing_subscriber::EnvFilter;

use caerus_server::add_key;
use commands::connect::CliError;
use commands::{
    events, health, keys, lock, lock_delay, locks, members, snapshot, status, txn, Cli, CliCommand, KeysCommand,
    LogFormat, VERSION,
};

/// jemalloc rather than glibc's malloc: a gRPC call and a raft entry allocate and free
/// many small buffers across threads (10 % of the leader's CPU was malloc/free). Measured
/// side by side in 7 pairs of runs: medians 0.93× the leader CPU per client write and
/// 1.05× the uncontended cycles/s, 6 of 7 pairs better (docs/bench.md). mimalloc gained as much but held
/// the state lock longer while a snapshot copied the table (fresh pages for every copy).
/// Not on macOS (a development machine; jemalloc does not cross-build there with zig) nor on
/// Windows (it does not build there): the system allocator.
#[cfg(not(any(target_vendor = "apple", windows)))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    let loaded = config_file::load(std::env::args_os().collect()).unwrap_or_else(|e| config_file::exit_on(e));
    let cli = loaded.cli;
    let filter = EnvFilter::try_new(cli.log_filter()).unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout carries the commands' output (tables, JSON, keys).
    // Colours only on a terminal: log files and CI output stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(ansi).init(),
        // One JSON object per line, the event's fields (message included) at the top level
        // where log collectors look for them.
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }

    let result = match cli.command {
        CliCommand::Serve(args) => match loaded.print_config {
            // Checked as `serve` would before it opens anything: a config that prints is one that starts.
            Some(shown) => args
                .node_config()
                .map(|(listen, _)| {
                    let peer = listen.peer.map_or_else(|| "none (single node)".to_string(), |p| p.to_string());
                    print!("{shown}");
                    println!("# Resolved: client port {}, peer port {peer}, HTTP port {}.", listen.client, listen.http);
                })
                .map_err(failure),
            None => caerus_server::serve::run(args, VERSION).await.map_err(failure),
        },
        CliCommand::Keys(KeysCommand::Add { file, name, namespaces, admin }) => {
            add_key(&file, &name, namespaces, admin)
                .map(|key| {
                    eprintln!("added key {name:?} to {} (only its SHA-256 hash is stored)", file.display());
                    println!("{key}");
                })
                .map_err(failure)
        }
        CliCommand::Keys(KeysCommand::Cluster(command)) => keys::run(command).await,
        CliCommand::Certs(command) => caerus_server::write_certs(&command)
            .map(|files| {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            })
            .map_err(failure),
        CliCommand::Locks(args) => locks::run(args).await,
        CliCommand::LockDelay(command) => lock_delay::run(command).await,
        CliCommand::Txn(command) => txn::run(command).await,
        CliCommand::Events(args) => events::run(args).await,
        CliCommand::Status(args) => status::run(args).await,
        CliCommand::Members(command) => members::run(command).await,
        CliCommand::Snapshot(command) => snapshot::run(command).await,
        CliCommand::Health(args) => health::run(args).await,
        // Ends with the command's exit status (or the lock's own codes, see `dls lock --help`).
        CliCommand::Lock(args) => lock::run(args).await.map(|code| std::process::exit(code)),
        CliCommand::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "dls", &mut std::io::stdout());
            Ok(())
        }
        CliCommand::Man { dir } => man(dir).map_err(failure),
    };
    if let Err(e) = result {
        if !e.message.is_empty() {
            eprintln!("dls: {}", e.message);
        }
        std::process::exit(e.exit_code);
    }
}

fn man(dir: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    match dir {
        None => clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), &dir)
                .map_err(|e| anyhow::anyhow!("cannot write man pages into {}: {e}", dir.display()))?;
            eprintln!("wrote dls.1 and a page per command into {}", dir.display());
        }
    }
    Ok(())
}

fn failure(e: anyhow::Error) -> CliError {
    CliError::failure(format!("{e:#}"))
}

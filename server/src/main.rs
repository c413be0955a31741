//! `dls`: the Caerus DLS server and its admin commands.

use clap::Parser;
use tracing_subscriber::EnvFilter;

use caerus_server::api::auth::add_key;
use caerus_server::cli::connect::CliError;
use caerus_server::cli::{events, lock, locks, members, snapshot, status, txn, Cli, CliCommand, KeysCommand};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let filter = EnvFilter::try_new(format!("warn,caerus_server={0},dls={0}", cli.log))
        .or_else(|_| EnvFilter::try_new(&cli.log))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout carries the commands' output (tables, JSON, keys).
    // Colours only on a terminal: log files and CI output stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();

    let result = match cli.command {
        CliCommand::Serve(args) => caerus_server::serve::run(args).await.map_err(failure),
        CliCommand::Keys(KeysCommand::Add { file, name, namespaces, admin }) => {
            add_key(&file, &name, namespaces, admin)
                .map(|key| {
                    eprintln!("added key {name:?} to {} (only its SHA-256 hash is stored)", file.display());
                    println!("{key}");
                })
                .map_err(failure)
        }
        CliCommand::Certs(command) => caerus_server::certs::run(&command)
            .map(|files| {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            })
            .map_err(failure),
        CliCommand::Locks(args) => locks::run(args).await,
        CliCommand::Txn(command) => txn::run(command).await,
        CliCommand::Events(args) => events::run(args).await,
        CliCommand::Status(args) => status::run(args).await,
        CliCommand::Members(command) => members::run(command).await,
        CliCommand::Snapshot(command) => snapshot::run(command).await,
        // Ends with the command's exit status (or the lock's own codes, see `dls lock --help`).
        CliCommand::Lock(args) => lock::run(args).await.map(|code| std::process::exit(code)),
    };
    if let Err(e) = result {
        if !e.message.is_empty() {
            eprintln!("dls: {}", e.message);
        }
        std::process::exit(e.exit_code);
    }
}

fn failure(e: anyhow::Error) -> CliError {
    CliError::failure(format!("{e:#}"))
}

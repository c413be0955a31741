//! `dls`: the Caerus DLS server and its admin commands.

use clap::Parser;
use tracing_subscriber::EnvFilter;

use caerus_server::api::auth::add_key;
use caerus_server::cli::{Cli, CliCommand, KeysCommand};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let filter = EnvFilter::try_new(format!("warn,caerus_server={0},dls={0}", cli.log))
        .or_else(|_| EnvFilter::try_new(&cli.log))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).init();

    let result = match cli.command {
        CliCommand::Serve(args) => caerus_server::serve::run(args).await,
        CliCommand::Keys(KeysCommand::Add { file, name, namespaces, admin }) => {
            add_key(&file, &name, namespaces, admin).map(|key| {
                eprintln!("added key {name:?} to {} (only its SHA-256 hash is stored)", file.display());
                println!("{key}");
            })
        }
    };
    if let Err(e) = result {
        eprintln!("dls: {e:#}");
        std::process::exit(1);
    }
}

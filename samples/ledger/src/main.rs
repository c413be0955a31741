//! `ledger --listen 127.0.0.1:8080 --data-dir ./ledger-data`: the fenced billing ledger.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "ledger", about = "Sample billing ledger that rejects writes with stale fencing tokens")]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "LEDGER_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Where the JSON-lines files live (created if missing; replayed at start).
    #[arg(long, env = "LEDGER_DATA_DIR", default_value = "ledger-data")]
    data_dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ledger = ledger::Ledger::open(&args.data_dir)?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!(
        "ledger: listening on http://{} with {} charges from {}",
        listener.local_addr()?,
        ledger.charges(None).len(),
        ledger.dir().display()
    );
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    axum::serve(listener, ledger::router(ledger)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

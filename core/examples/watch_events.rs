//! Follow the cluster's event log: deadlocks resolved, expiries, operator aborts, revoked
//! locks. The stream survives leader changes without missing or repeating an event.
//!
//! Run with `cargo run -p caerus-core --example watch_events` (endpoints from
//! `DLS_ENDPOINTS`, default `127.0.0.1:7070`; API key from `CAERUS_API_KEY`).

use std::process::ExitCode;

use caerus_core::{ClientConfig, DlsClient, Error, EventDetail, WatchOptions};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error ({}): {e}", e.code());
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Error> {
    let client = DlsClient::connect(ClientConfig::from_env()).await?;
    let mut events = client.watch_events(WatchOptions::new()).await?;
    while let Some(event) = events.next_event().await {
        let event = event?;
        match &event.detail {
            EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
                let members: Vec<String> = cycle.iter().map(|m| m.transaction_id.to_string()).collect();
                println!(
                    "#{} deadlock {} broken: transaction {victim_transaction_id} aborted ({policy})",
                    event.sequence,
                    members.join(" -> ")
                );
            }
            other => println!("#{} {}: {other:?}", event.sequence, event.kind()),
        }
    }
    Ok(())
}

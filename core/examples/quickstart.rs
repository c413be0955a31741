//! Quick start: take an exclusive lock, use its fencing token, release it by committing.
//!
//! Run against a local server with `cargo run -p caerus-core --example quickstart`
//! (endpoints from `DLS_ENDPOINTS`, default `127.0.0.1:7070`; API key from `CAERUS_API_KEY`).

use std::process::ExitCode;
use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, TransactionOptions};

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
    client
        .with_transaction(TransactionOptions::default(), |tx| async move {
            let lock = tx
                .acquire_lock(
                    "billing-jobs",
                    "monthly-billing-job",
                    LockMode::Exclusive,
                    AcquireOptions::default().with_timeout(Duration::from_secs(10)),
                )
                .await?;
            println!("Lock acquired. Fencing token: {}", lock.fencing_token);
            // The protected work goes here; pass lock.fencing_token to the storage it writes.
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<(), Error>(())
        })
        .await
}

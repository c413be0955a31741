//! Runs conformance/scenarios.json through the Rust core client (`caerus-core`), the typed
//! SDK every language binding wraps. Raw-only scenarios are skipped, and so would be any
//! needing a capability the core client lacks (it has them all so far); see
//! conformance/README.md for the format and for how an SDK maps each step.

mod background;
mod expect;
mod scenario;
mod spec;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use caerus_core::{ClientConfig, DlsClient};
use clap::Parser;

/// The capabilities a scenario may need (its `needs`; README "Capabilities") that the core
/// client has: `permits`, semaphore permits through `Transaction::acquire_permit`.
const CAPABILITIES: [&str; 1] = ["permits"];

/// Run the Caerus DLS conformance scenarios through the caerus-core client.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// HOST:PORT of a node; repeat for every node of a cluster (the client finds the leader)
    #[arg(long = "endpoint", default_value = "127.0.0.1:7070")]
    endpoints: Vec<String>,
    /// API key, sent as `authorization: Bearer KEY`; it must be allowed every namespace
    #[arg(long, env = "CAERUS_API_KEY")]
    api_key: Option<String>,
    /// The scenario file
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios.json"))]
    scenarios: PathBuf,
    /// Run only this scenario (repeatable)
    #[arg(long)]
    only: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    // The client's own logs (retries, redirects) go to stderr; results go to stdout.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("DLS_LOG").unwrap_or_else(|_| "error".into()))
        .init();
    let args = Args::parse();
    let text =
        std::fs::read_to_string(&args.scenarios).with_context(|| format!("reading {}", args.scenarios.display()))?;
    let file: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", args.scenarios.display()))?;
    let scenarios = file["scenarios"].as_array().context("the file has no \"scenarios\" list")?;

    let mut config = ClientConfig::new(args.endpoints.iter().map(String::as_str));
    config = match &args.api_key {
        Some(key) => config.with_api_key(key),
        None => config.without_api_key(),
    };
    let client = DlsClient::connect(config).await?;

    let run = format!("cf-rs-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (index, s) in scenarios.iter().enumerate() {
        let name = s["name"].as_str().unwrap_or("?");
        if !args.only.is_empty() && !args.only.iter().any(|o| o == name) {
            continue;
        }
        if s["raw_only"].as_bool() == Some(true) {
            skipped += 1;
            println!("SKIP {name} (raw only: {})", s["why_raw_only"].as_str().unwrap_or("no reason given"));
            continue;
        }
        let needs = s["needs"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str);
        let lacking: Vec<&str> = needs.filter(|n| !CAPABILITIES.contains(n)).collect();
        if !lacking.is_empty() {
            skipped += 1;
            println!("SKIP {name} (needs {}: not implemented by this runner)", lacking.join(", "));
            continue;
        }
        let ns = format!("{run}-{index:02}");
        match scenario::Scenario::new(client.clone(), ns).run(s).await {
            Ok(()) => {
                passed += 1;
                println!("PASS {name}");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {name}: {e}");
            }
        }
    }
    println!(
        "rust caerus-core runner: {passed} passed, {failed} failed, {skipped} skipped ({})",
        args.endpoints.join(",")
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

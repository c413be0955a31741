//! `dls-call-overhead`: latency of one cheap call through the Rust core, the baseline the
//! bindings' per-call overhead is measured against (bench/sdk/overhead.sh).
//!
//! Begins a transaction, then calls `transaction_status` on it sequentially: `--warmup`
//! calls, then `--calls` timed ones. The leader answers from memory (no raft round), so the
//! figure is the client stack plus one loopback gRPC exchange. Prints one JSON line.
//!
//! `--runtime current-thread` (the floor: the loop, the connection's I/O and its tasks on one
//! thread, no hand-over between threads), `multi-thread` (the loop as a task on tokio's
//! default multi-thread runtime, as a Rust service runs it) or `foreign` (each call spawned
//! on that runtime from a plain thread that blocks for the result: the two thread crossings
//! every binding driven by an event loop or a coroutine makes, its floor).

use std::process::ExitCode;
use std::time::Instant;

use caerus_core::{ClientConfig, DlsClient, TransactionOptions};
use clap::Parser;
use serde_json::json;

/// Latency of sequential transaction_status calls through caerus-core.
#[derive(Parser, Debug, Clone)]
#[command(name = "dls-call-overhead", version, about, long_about = None)]
struct Args {
    /// Comma-separated host:port list of the DLS node(s).
    #[arg(long, default_value = "127.0.0.1:7070")]
    endpoints: String,
    /// Timed calls.
    #[arg(long, default_value_t = 5000)]
    calls: usize,
    /// Untimed calls first.
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Tokio runtime flavour.
    #[arg(long, value_enum, default_value = "current-thread")]
    runtime: Flavor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Flavor {
    CurrentThread,
    MultiThread,
    /// Each call spawned onto the multi-thread runtime from a thread outside it, which
    /// blocks for the result: the hand-over a binding's event loop or coroutine pays.
    Foreign,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let built = match args.runtime {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        Flavor::MultiThread | Flavor::Foreign => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
    };
    let runtime = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dls-call-overhead: tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = match args.runtime {
        Flavor::CurrentThread => runtime.block_on(run(args.clone(), None)),
        // On a worker thread, as a spawned task: block_on would poll it on this thread.
        Flavor::MultiThread => match runtime.block_on(runtime.spawn(run(args.clone(), None))) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("dls-call-overhead: {e}");
                return ExitCode::from(1);
            }
        },
        Flavor::Foreign => runtime.block_on(run(args.clone(), Some(runtime.handle().clone()))),
    };
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dls-call-overhead: {e}");
            ExitCode::from(1)
        }
    }
}

/// `hand_over`: spawn each timed call on this runtime and wait for it on a thread outside
/// it (the `foreign` flavour); otherwise the calls are awaited in place.
async fn run(args: Args, hand_over: Option<tokio::runtime::Handle>) -> Result<serde_json::Value, caerus_core::Error> {
    let endpoints: Vec<String> =
        args.endpoints.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let client = DlsClient::connect(ClientConfig::new(endpoints)).await?;
    let tx = client.begin_transaction(TransactionOptions::default()).await?;
    let id = tx.id();
    for _ in 0..args.warmup {
        client.transaction_status(id).await?;
    }
    let ns = match hand_over {
        None => {
            let mut ns = Vec::with_capacity(args.calls);
            for _ in 0..args.calls {
                let t0 = Instant::now();
                client.transaction_status(id).await?;
                ns.push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
            }
            ns
        }
        Some(rt) => {
            let (calls, c) = (args.calls, client.clone());
            let timed = std::thread::spawn(move || foreign_calls(&rt, &c, id, calls));
            tokio::task::spawn_blocking(move || timed.join()).await.expect("join").expect("the calling thread")?
        }
    };
    tx.abort().await?;
    Ok(summary(ns, args.runtime))
}

/// Timed calls from a plain thread: each is spawned on the runtime and its result handed
/// back through a channel the thread blocks on.
fn foreign_calls(
    rt: &tokio::runtime::Handle,
    client: &DlsClient,
    id: u64,
    calls: usize,
) -> Result<Vec<u64>, caerus_core::Error> {
    let mut ns = Vec::with_capacity(calls);
    for _ in 0..calls {
        let (done, result) = std::sync::mpsc::sync_channel(1);
        let c = client.clone();
        let t0 = Instant::now();
        rt.spawn(async move {
            let _ = done.send(c.transaction_status(id).await);
        });
        result.recv().expect("the call's task")?;
        ns.push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(ns)
}

fn summary(mut ns: Vec<u64>, flavor: Flavor) -> serde_json::Value {
    ns.sort_unstable();
    let pct = |p: f64| -> f64 {
        let i = ((p * ns.len() as f64).ceil() as usize).clamp(1, ns.len().max(1)) - 1;
        ns.get(i).map_or(0.0, |v| (*v as f64 / 100.0).round() / 10.0)
    };
    json!({
        "language": "rust",
        "api": match flavor {
            Flavor::CurrentThread => "caerus-core (tokio current_thread)",
            Flavor::MultiThread => "caerus-core (tokio multi_thread, spawned task)",
            Flavor::Foreign => "caerus-core (spawned from a thread outside tokio, result over a channel)",
        },
        "call": "transaction_status",
        "calls": ns.len(),
        "p50_us": pct(0.50),
        "p90_us": pct(0.90),
        "p99_us": pct(0.99),
    })
}

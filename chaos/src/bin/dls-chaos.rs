//! `dls-chaos`: runs a real `dls` cluster behind per-node TCP proxies, lets clients contend
//! for a few keys in both modes while faults are injected, records every operation and
//! checks the history. Exits non-zero on any violation. `dls-chaos rolling` restarts (or
//! upgrades) every node in turn under load and reports the pauses. `dls-chaos check-history FILE`
//! re-checks a recorded history; `stall-client` is the subprocess some faults freeze.

use caerus_chaos::{rolling, run, stall};
use clap::Parser;

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("check-history") {
        let Some(path) = argv.get(2) else {
            eprintln!("usage: dls-chaos check-history HISTORY.jsonl");
            return std::process::ExitCode::from(2);
        };
        return match run::check_history(path) {
            Ok(true) => std::process::ExitCode::SUCCESS,
            Ok(false) => std::process::ExitCode::from(1),
            Err(e) => {
                eprintln!("dls-chaos: {e:#}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    if argv.get(1).map(String::as_str) == Some("stall-client") {
        let [_, _, endpoints, key, lease] = &argv[..] else {
            eprintln!("usage: dls-chaos stall-client ENDPOINTS KEY LEASE_MS");
            return std::process::ExitCode::from(2);
        };
        let lease = lease.parse().unwrap_or(2000);
        return match rt.block_on(stall::stall_client(endpoints, key, lease)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                println!("ERROR {e}");
                std::process::ExitCode::from(1)
            }
        };
    }
    if argv.get(1).map(String::as_str) == Some("rolling") {
        let args = rolling::RollingArgs::parse_from(argv.iter().skip(1));
        return exit_code(rt.block_on(rolling::run(args)));
    }
    let args = run::Args::parse();
    exit_code(rt.block_on(run::run(args)))
}

/// 0 when a run found nothing, 1 when it found violations, 2 when it could not run.
fn exit_code(verdict: anyhow::Result<bool>) -> std::process::ExitCode {
    match verdict {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("dls-chaos: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

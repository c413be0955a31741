//! `dls-cluster`: the kit's cluster for shell runners (conformance/run.sh, bench/run.sh),
//! so that they pick ports and start nodes the way every Rust harness does.
//!
//!   dls-cluster --dls PATH [--nodes N] [--dir DIR] [--fast-elections] [-- EXTRA SERVE FLAGS]
//!
//! Starts the nodes, waits for a leader, prints shell assignments (DLS_ENDPOINTS, DLS_HTTP,
//! DLS_PIDS, DLS_DIR) on stdout, then runs until SIGTERM or SIGINT and SIGKILLs its nodes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use caerus_testkit::{Cluster, Spec};
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: dls-cluster --dls PATH [--nodes N] [--dir DIR] [--fast-elections] [-- EXTRA SERVE FLAGS]";

const HELP: &str = "\
Starts a local DLS cluster on free 127.0.0.1 ports, waits for a leader, prints
DLS_ENDPOINTS, DLS_HTTP, DLS_PIDS and DLS_DIR as shell assignments, then runs until
SIGTERM or SIGINT and kills its nodes.

  --dls PATH          the dls binary to run (required)
  --nodes N           how many nodes (default 1)
  --dir DIR           where the nodes' data directories go (default: a new temporary one)
  --fast-elections    short election timeouts (for tests that change leaders)
  -- FLAGS...         passed on to every `dls serve`
  -h, --help          this text";

fn parse(args: &[String]) -> Result<Spec, String> {
    let mut spec = Spec { fast_elections: false, ..Spec::default() };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--dls" => spec.bin = Some(PathBuf::from(value()?)),
            "--nodes" => spec.nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--dir" => spec.dir = Some(PathBuf::from(value()?)),
            "--fast-elections" => spec.fast_elections = true,
            "--" => {
                spec.extra = it.cloned().collect();
                break;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if spec.bin.is_none() {
        return Err("--dls is required".into());
    }
    Ok(spec)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{USAGE}\n\n{HELP}");
        return ExitCode::SUCCESS;
    }
    let spec = match parse(&args) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("dls-cluster: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("dls-cluster: cannot handle signals");
        return ExitCode::from(1);
    };
    let mut cluster = match Cluster::new(spec) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dls-cluster: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = cluster.start_all() {
        eprintln!("dls-cluster: {e}");
        return ExitCode::from(1);
    }
    cluster.wait_for_leader(Duration::from_secs(30)).await;
    let list = |f: &dyn Fn(u64) -> String| cluster.ids().into_iter().map(f).collect::<Vec<_>>().join(",");
    println!("DLS_ENDPOINTS={}", list(&|id| cluster.addr(id)));
    println!("DLS_HTTP={}", list(&|id| cluster.http_addr(id)));
    println!("DLS_PIDS={}", list(&|id| cluster.pid(id).unwrap_or(0).to_string()));
    println!("DLS_DIR={}", cluster.dir().display());
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn error(a: &[&str]) -> String {
        parse(&args(a)).err().expect("an error")
    }

    #[test]
    fn flags_fill_the_spec_and_mistakes_are_named() {
        let Ok(spec) = parse(&args(&["--dls", "/bin/dls", "--nodes", "3", "--", "--snapshot-every", "10"])) else {
            panic!("a valid command line")
        };
        assert_eq!((spec.nodes, spec.extra.clone()), (3, args(&["--snapshot-every", "10"])));
        assert_eq!(error(&["--nodes", "3"]), "--dls is required");
        assert_eq!(error(&["--dls"]), "--dls needs a value");
        assert!(error(&["--dls", "x", "--nodes", "many"]).starts_with("--nodes: "));
        assert_eq!(error(&["--dls", "x", "--bogus"]), "unknown argument \"--bogus\"");
    }

    #[test]
    fn help_names_every_flag() {
        for flag in ["--dls", "--nodes", "--dir", "--fast-elections", "--help"] {
            assert!(HELP.contains(flag), "{flag} missing from --help");
        }
    }
}

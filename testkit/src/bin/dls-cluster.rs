//! `dls-cluster`: the kit's cluster for every runner outside Rust (conformance/run.sh,
//! bench/run.sh, the Python, Node and Kotlin suites), so that they start nodes, learn their
//! ports and wait for readiness the way every Rust harness does.
//!
//! Ports: a single node binds port 0 and reports what it bound (`dls serve --ports-file`),
//! so nothing can take its ports between picking and binding. Several nodes must be told
//! each other's client and peer addresses in `--peers` before any starts, so those are
//! picked from below the ephemeral range ([`caerus_testkit::ports`]) and the whole cluster
//! is laid out again when a node finds one taken; their HTTP ports are bound at port 0.
//! What remains: another process on the machine may take a picked port of a multi-node
//! cluster in the moment before its node binds it (then the retry), and a node stopped
//! with `kill` may find its old port taken when started again (its peers and clients know
//! only that one).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use caerus_testkit::{client_tls, Cluster, Spec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: dls-cluster --dls PATH [--nodes N] [--dir DIR] [--fast-elections] [--tls DIR] \
                     [--probe-key KEY] [--control] [-- EXTRA SERVE FLAGS]";

const HELP: &str = "\
Starts a local DLS cluster on 127.0.0.1 (a single node binds port 0; several nodes get
free ports, laid out again if one is taken), waits until every node serves, prints
DLS_ENDPOINTS, DLS_HTTP, DLS_PIDS (comma lists in node order), DLS_LEADER and DLS_DIR (last)
as shell assignments, then runs until SIGTERM or SIGINT and kills its nodes. Node i's log is
DIR/node-i.log.

  --dls PATH          the dls binary to run (required)
  --nodes N           how many nodes (default 1)
  --dir DIR           where the nodes' data directories go (default: a new temporary one)
  --fast-elections    short election timeouts (for tests that change leaders)
  --tls DIR           the client ports serve TLS with DIR/node-ID.pem (made by `dls certs`)
                      and require client certificates of DIR/ca.pem; readiness is probed
                      with DIR/client-app.pem
  --probe-key KEY     an API key valid on the nodes (for the readiness probe, when the
                      nodes are started with --api-keys-file)
  --control           read commands on stdin, one per line, each answered by one line on
                      stdout (`ok [VALUE]` or `error MESSAGE`); exit when stdin closes:
                        leader       the id of the node that leads (waits up to 30 s)
                        kill ID      SIGKILL node ID
                        term ID      SIGTERM node ID and wait up to 10 s for it to exit
                        start ID     start node ID again on its addresses; answers its pid
                        restart ID   kill, then start
                        pids         DLS_PIDS now
  -- FLAGS...         passed on to every `dls serve` ({id} in a flag is the node's id)
  -h, --help          this text";

struct Options {
    spec: Spec,
    control: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut spec = Spec { fast_elections: false, bound_ports: true, ..Spec::default() };
    let mut control = false;
    let mut tls = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--dls" => spec.bin = Some(PathBuf::from(value()?)),
            "--nodes" => spec.nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--dir" => spec.dir = Some(PathBuf::from(value()?)),
            "--fast-elections" => spec.fast_elections = true,
            "--tls" => tls = Some(PathBuf::from(value()?)),
            "--probe-key" => spec.probe_key = Some(value()?.clone()),
            "--control" => control = true,
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
    if let Some(dir) = tls {
        let d = dir.display();
        let mut flags = vec![format!("--tls-cert={d}/node-{{id}}.pem"), format!("--tls-key={d}/node-{{id}}-key.pem")];
        flags.push(format!("--tls-client-ca={d}/ca.pem"));
        flags.append(&mut spec.extra);
        spec.extra = flags;
        spec.probe_tls = Some(client_tls(&dir, Some("client-app")));
    }
    Ok(Options { spec, control })
}

/// Starts the cluster; lays it out again (fresh ports) when a node could not bind a picked
/// port. The cluster lives in `dir` when given, else in a temporary directory.
async fn start(spec: &Spec) -> Result<Cluster, String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut cluster = Cluster::new(spec.clone()).map_err(|e| e.to_string())?;
        match cluster.start_all() {
            Ok(()) => break Ok(cluster),
            Err(e) if e.to_string().contains("in use") && attempt < 5 => {
                eprintln!("dls-cluster: a port was taken, laying the cluster out again: {e}");
                cluster.kill_all();
            }
            Err(e) => break Err(e.to_string()),
        }
    }
}

fn pids(cluster: &Cluster) -> String {
    cluster.ids().into_iter().map(|id| cluster.pid(id).unwrap_or(0).to_string()).collect::<Vec<_>>().join(",")
}

/// One `--control` command; its answer's value, or why it failed.
async fn command(cluster: &mut Cluster, line: &str) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let node = |i: usize| -> Result<u64, String> {
        let id: u64 = words.get(i).ok_or("a node id is missing")?.parse().map_err(|e| format!("node id: {e}"))?;
        if cluster.ids().contains(&id) {
            Ok(id)
        } else {
            Err(format!("no node {id}"))
        }
    };
    match words.first().copied() {
        Some("leader") => {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(id) = cluster.leader_now().await {
                    return Ok(id.to_string());
                }
                if tokio::time::Instant::now() > deadline {
                    return Err("no leader within 30 s".into());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Some("kill") => {
            cluster.kill(node(1)?);
            Ok(String::new())
        }
        Some("term") => match cluster.terminate(node(1)?, Duration::from_secs(10)).await {
            Some(status) => Ok(status.to_string()),
            None => Err("still running 10 s after SIGTERM; killed".into()),
        },
        Some(verb @ ("start" | "restart")) => {
            let id = node(1)?;
            if verb == "restart" {
                cluster.kill(id);
            }
            cluster.start_node(id).map_err(|e| e.to_string())?;
            Ok(cluster.pid(id).unwrap_or(0).to_string())
        }
        Some("pids") => Ok(pids(cluster)),
        _ => Err(format!("unknown command {line:?}")),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{USAGE}\n\n{HELP}");
        return ExitCode::SUCCESS;
    }
    let Options { spec, control } = match parse(&args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("dls-cluster: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("dls-cluster: cannot handle signals");
        return ExitCode::from(1);
    };
    let mut cluster = match start(&spec).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dls-cluster: {e}");
            return ExitCode::from(1);
        }
    };
    let leader = cluster.wait_for_leader(Duration::from_secs(30)).await;
    // A majority elects; a follower serves once it has heard from the leader, and a caller
    // may turn to any node at once.
    cluster.wait_all_serve(Duration::from_secs(30)).await;
    let list = |f: &dyn Fn(u64) -> String| cluster.ids().into_iter().map(f).collect::<Vec<_>>().join(",");
    println!("DLS_ENDPOINTS={}", list(&|id| cluster.addr(id)));
    println!("DLS_HTTP={}", list(&|id| cluster.http_addr(id)));
    println!("DLS_PIDS={}", pids(&cluster));
    println!("DLS_LEADER={leader}");
    println!("DLS_DIR={}", cluster.dir().display());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            line = lines.next_line(), if control => match line {
                Ok(Some(line)) => match command(&mut cluster, &line).await {
                    Ok(value) => println!("{}", format!("ok {value}").trim_end()),
                    Err(e) => println!("error {e}"),
                },
                // The runner is gone (or closed its end): so are its nodes.
                _ => break,
            },
        }
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
        let Ok(Options { spec, control }) =
            parse(&args(&["--dls", "/bin/dls", "--nodes", "3", "--control", "--", "--snapshot-every", "10"]))
        else {
            panic!("a valid command line")
        };
        assert!(control && spec.bound_ports);
        assert_eq!((spec.nodes, spec.extra.clone()), (3, args(&["--snapshot-every", "10"])));
        assert_eq!(error(&["--nodes", "3"]), "--dls is required");
        assert_eq!(error(&["--dls"]), "--dls needs a value");
        assert!(error(&["--dls", "x", "--nodes", "many"]).starts_with("--nodes: "));
        assert_eq!(error(&["--dls", "x", "--bogus"]), "unknown argument \"--bogus\"");
    }

    #[test]
    fn help_names_every_flag() {
        for flag in ["--dls", "--nodes", "--dir", "--fast-elections", "--tls", "--probe-key", "--control", "--help"] {
            assert!(HELP.contains(flag), "{flag} missing from --help");
        }
    }
}

//! `dls-chaos`: runs a real `dls` cluster behind per-node TCP proxies, lets clients contend
//! for a few keys in both modes while faults are injected, records every operation and
//! checks the history. Exits non-zero on any violation.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use caerus_chaos::checker::{self, Violation};
use caerus_chaos::cluster::{signal, Cluster};
use caerus_chaos::fault::Fault;
use caerus_chaos::history::{History, Mode, Op, OpKind, Outcome};
use caerus_chaos::proxy::Links;
use caerus_chaos::register::FencedRegister;
use caerus_chaos::stats::summary_ms;
use caerus_chaos::{disk, linearizable, membership, storage_faults};
use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, TransactionOptions};
use clap::Parser;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const NS: &str = "chaos";
/// Grants the linearizability search may try per key before calling the key inconclusive.
const LIN_BUDGET: u64 = 200_000;
/// Each node's data directory is a tmpfs of this size when disk-full is injected.
const TMPFS_SIZE: &str = "256m";
/// Where Debian's `faketime` package puts the thread-safe preload library.
const FAKETIME_LIBS: [&str; 2] =
    ["/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"];

#[derive(Parser, Debug)]
#[command(
    name = "dls-chaos",
    about = "Fault injection for Caerus DLS: kills, pauses, partitions and delays a real cluster while clients contend for locks, then checks the recorded history"
)]
struct Args {
    /// Cluster size (3 or 5).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long clients run while faults are injected, in seconds.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Random seed (printed; the same seed replays the same fault schedule and client choices).
    #[arg(long, env = "SEED")]
    seed: Option<u64>,
    /// Concurrent client processes (in-process tasks, one transaction at a time each).
    #[arg(long, default_value_t = 5)]
    clients: usize,
    /// Keys they contend for.
    #[arg(long, default_value_t = 3)]
    keys: usize,
    /// The dls binary.
    #[arg(long, env = "DLS_BIN")]
    dls: PathBuf,
    /// Comma-separated faults to inject. "classic": kill-leader, kill-follower, pause-node,
    /// pause-client, pause-queued, partition-client, partition-leader, partition-split,
    /// one-way, latency, restart-all, crash-after-write. Life cycle: wipe-rejoin,
    /// membership-partition. "all" (the default) is both groups; "one-new" adds one
    /// life-cycle fault chosen by the seed. clock-jump only when named (e.g.
    /// "all,clock-jump": needs libfaketime; every node then runs under it). Or "none".
    #[arg(long, default_value = "all")]
    faults: String,
    /// Transaction lease of the clients, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Where to write the history (JSON lines); default: in the run directory.
    #[arg(long)]
    history: Option<PathBuf>,
}

fn classify(e: &Error) -> Outcome {
    match e {
        Error::LockTimeout { .. }
        | Error::DeadlockVictim { .. }
        | Error::TransactionLost { .. }
        | Error::TransactionNotFound { .. }
        | Error::WaitCancelled { .. }
        | Error::AlreadyWaiting { .. }
        | Error::InvalidArgument { .. } => Outcome::Fail,
        _ => Outcome::Unknown,
    }
}

fn client_config(endpoints: Vec<String>) -> ClientConfig {
    ClientConfig::new(endpoints)
        .without_api_key()
        .with_connect_timeout(Duration::from_millis(500))
        .with_request_timeout(Duration::from_secs(2))
        .with_retry_deadline(Duration::from_secs(8))
}

struct Ctx {
    history: Arc<History>,
    register: Arc<FencedRegister>,
    stop: Arc<AtomicBool>,
    keys: usize,
    lease_ms: u64,
}

fn key_name(i: usize) -> String {
    format!("k{i}")
}

/// Begins a transaction with the run's lease and records the Begin (ok or failed) in the
/// history; `None` when it failed.
async fn recorded_begin(client: &DlsClient, ctx: &Ctx, p: u64) -> Option<caerus_core::Transaction> {
    let h = &ctx.history;
    let t = h.now_us();
    match client.begin_transaction(TransactionOptions::default().with_timeout_ms(ctx.lease_ms)).await {
        Ok(tx) => {
            h.push(Op { invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Begin, tx.id()) });
            Some(tx)
        }
        Err(e) => {
            h.push(Op {
                invoke_us: t,
                complete_us: h.now_us(),
                outcome: classify(&e),
                error: e.code().into(),
                ..Op::new(p, OpKind::Begin, 0)
            });
            None
        }
    }
}

async fn worker(p: u64, client: DlsClient, ctx: Arc<Ctx>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let h = &ctx.history;
    let mut value = 0u64;
    while !ctx.stop.load(Ordering::Relaxed) {
        let Some(tx) = recorded_begin(&client, &ctx, p).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let id = tx.id();
        let key = key_name(rng.gen_range(0..ctx.keys));
        let mode = if rng.gen_bool(0.7) { Mode::Exclusive } else { Mode::Shared };
        let lm = if mode == Mode::Exclusive { LockMode::Exclusive } else { LockMode::SharedRead };
        let t = h.now_us();
        let res = tx.acquire_lock(NS, &key, lm, AcquireOptions::default().with_timeout_ms(1500)).await;
        let base = Op {
            key: key.clone(),
            mode: Some(mode),
            invoke_us: t,
            complete_us: h.now_us(),
            ..Op::new(p, OpKind::Acquire, id)
        };
        match res {
            Ok(lock) => {
                let token = lock.fencing_token;
                h.push(Op { token, ..base.clone() });
                // Strictly greater tokens only: a holder writes once per hold; readers read 1-3 times.
                let steps = if mode == Mode::Exclusive { 1 } else { rng.gen_range(1..=3) };
                for _ in 0..steps {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(5..80))).await;
                    if tx.is_lost() {
                        break;
                    }
                    let t = h.now_us();
                    if mode == Mode::Exclusive {
                        value += 1;
                        let (outcome, observed) = match ctx.register.write(&key, token, p * 1_000_000 + value) {
                            Ok(prev) => (Outcome::Ok, prev),
                            Err(last) => (Outcome::Fail, last),
                        };
                        h.push(Op {
                            kind: OpKind::Write,
                            token,
                            observed,
                            outcome,
                            invoke_us: t,
                            complete_us: t,
                            ..base.clone()
                        });
                    } else {
                        let (observed, _) = ctx.register.read(&key);
                        h.push(Op {
                            kind: OpKind::Read,
                            token,
                            observed,
                            invoke_us: t,
                            complete_us: t,
                            ..base.clone()
                        });
                    }
                }
                if rng.gen_bool(0.4) {
                    let t = h.now_us();
                    let r = tx.release(NS, &key).await;
                    let (outcome, error) = match &r {
                        Ok(_) => (Outcome::Ok, String::new()),
                        Err(e) => (classify(e), e.code().to_string()),
                    };
                    h.push(Op {
                        kind: OpKind::Release,
                        mode: None,
                        outcome,
                        error,
                        invoke_us: t,
                        complete_us: h.now_us(),
                        ..base.clone()
                    });
                }
            }
            Err(e) => h.push(Op { outcome: classify(&e), error: e.code().into(), ..base }),
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..30))).await;
        let abort = rng.gen_bool(0.1);
        let t = h.now_us();
        let r = if abort { tx.abort().await } else { tx.commit().await };
        let kind = if abort { OpKind::Abort } else { OpKind::Commit };
        let (outcome, error) = match &r {
            Ok(()) => (Outcome::Ok, String::new()),
            Err(e) => (classify(e), e.code().to_string()),
        };
        h.push(Op { outcome, error, invoke_us: t, complete_us: h.now_us(), ..Op::new(p, kind, id) });
    }
}

/// The stalled client, run as a subprocess so that SIGSTOP freezes its heartbeat too.
/// Says BEGIN and WAITING, asks for `key` exclusively (waiting up to 30 s: queued behind a
/// holder in `queue` mode), says GRANT or NOGRANT, waits for a line on stdin, says WRITE
/// (the parent applies the write to the register) or NOWRITE, waits for another line, then
/// commits and says how that went.
async fn stall_client(endpoints: &str, key: &str, lease_ms: u64) -> anyhow::Result<()> {
    let client = DlsClient::connect(client_config(endpoints.split(',').map(String::from).collect())).await?;
    let tx = client.begin_transaction(TransactionOptions::default().with_timeout_ms(lease_ms)).await?;
    println!("BEGIN {}", tx.id());
    println!("WAITING");
    std::io::stdout().flush()?;
    let granted =
        tx.acquire_lock(NS, key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(30_000)).await;
    match &granted {
        Ok(lock) => println!("GRANT {} {}", tx.id(), lock.fencing_token),
        Err(e) => println!("NOGRANT {} {}", if classify(e) == Outcome::Fail { "fail" } else { "unknown" }, e.code()),
    }
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    // Woken (or healed): a naive holder writes at once with the token it has.
    match &granted {
        Ok(lock) => println!("WRITE {} {}", tx.id(), lock.fencing_token),
        Err(_) => println!("NOWRITE"),
    }
    std::io::stdout().flush()?;
    line.clear();
    std::io::stdin().lock().read_line(&mut line)?;
    match tx.commit().await {
        Ok(()) => println!("COMMIT ok"),
        Err(e) => println!("COMMIT {} {}", if classify(&e) == Outcome::Fail { "fail" } else { "unknown" }, e.code()),
    }
    std::io::stdout().flush()?;
    Ok(())
}

/// A client whose lease must run out: the time from its stop (or cut) to the next grant of
/// its key to anyone else.
struct Stall {
    kind: &'static str,
    key: String,
    txn: u64,
    stopped_us: u64,
    /// The harness's own request for the key after the stop, when it made one: its grant
    /// (clients queued ahead of it may be granted earlier, while the stalled one is in line
    /// behind them; the probe's grant is when the stalled client stopped blocking).
    probe_granted_us: Option<u64>,
}

struct Figures {
    faults: HashMap<&'static str, u64>,
    leader_kills_us: Vec<u64>,
    stalls: Vec<Stall>,
    extra_violations: Vec<Violation>,
    /// Next history process id for the harness's own clients and subprocesses.
    next_process: u64,
}

impl Figures {
    fn process(&mut self) -> u64 {
        self.next_process += 1;
        self.next_process - 1
    }
}

fn log(h: &History, msg: impl AsRef<str>) {
    println!("[{:7.1}s] {}", h.now_us() as f64 / 1e6, msg.as_ref());
}

/// A stall client subprocess and its line protocol.
struct StallChild {
    child: tokio::process::Child,
    out: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    stdin: tokio::process::ChildStdin,
    pid: u32,
    links: Arc<Links>,
}

impl Drop for StallChild {
    fn drop(&mut self) {
        self.links.forget_pid(self.pid);
    }
}

impl StallChild {
    /// Starts one as history process `p`; its pid is registered with the proxies as `p`, so
    /// its connections (direct ones that follow a leader redirect to a proxy too) are
    /// identified.
    fn spawn(c: &Cluster, endpoints: &[String], key: &str, lease_ms: u64, p: u64) -> anyhow::Result<StallChild> {
        let exe = std::env::current_exe()?;
        let mut child = tokio::process::Command::new(exe)
            .args(["stall-client", &endpoints.join(","), key, &lease_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stdin = child.stdin.take().expect("stdin");
        let pid = child.id().unwrap_or(0);
        c.links.set_pid(pid, p);
        Ok(StallChild { child, out, stdin, pid, links: c.links.clone() })
    }

    async fn line(&mut self, within: Duration) -> Option<String> {
        match tokio::time::timeout(within, self.out.next_line()).await {
            Ok(Ok(Some(l))) => Some(l),
            _ => None,
        }
    }

    /// Waits for `BEGIN txn`; pushes the Begin.
    async fn begun(&mut self, h: &History, p: u64) -> Option<u64> {
        let t = h.now_us();
        let line = self.line(Duration::from_secs(15)).await?;
        let txn = line.strip_prefix("BEGIN ")?.parse().ok()?;
        h.push(Op { invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Begin, txn) });
        self.line(Duration::from_secs(5)).await.filter(|l| l == "WAITING")?;
        Some(txn)
    }

    /// Reads the answer to the acquire invoked at `invoke_us`; pushes it and returns it.
    async fn acquired(&mut self, h: &History, p: u64, txn: u64, key: &str, invoke_us: u64, within: Duration) -> Op {
        let line = self.line(within).await.unwrap_or_default();
        let f: Vec<&str> = line.split_whitespace().collect();
        let base = Op {
            key: key.to_string(),
            mode: Some(Mode::Exclusive),
            invoke_us,
            complete_us: h.now_us(),
            ..Op::new(p, OpKind::Acquire, txn)
        };
        let op = match f[..] {
            ["GRANT", _, token] => Op { token: token.parse().unwrap_or(0), ..base },
            ["NOGRANT", "fail", code] => Op { outcome: Outcome::Fail, error: code.into(), ..base },
            _ => Op { outcome: Outcome::Unknown, error: format!("said {line:?}"), ..base },
        };
        h.push(op.clone());
        op
    }

    /// Lets it go on: it writes with the token it has (applied to the register here), then
    /// commits. Returns the write's outcome (None: no write) and the commit op.
    async fn write_and_commit(
        &mut self,
        ctx: &Ctx,
        acq: &Op,
        p: u64,
        what: &str,
    ) -> anyhow::Result<(Option<Outcome>, Op)> {
        let h = &ctx.history;
        self.stdin.write_all(b"go\n").await?;
        let mut wrote = None;
        if let Some(line) = self.line(Duration::from_secs(10)).await {
            if line.starts_with("WRITE") {
                let t = h.now_us();
                let (outcome, observed) = match ctx.register.write(&acq.key, acq.token, p) {
                    Ok(prev) => (Outcome::Ok, prev),
                    Err(last) => (Outcome::Fail, last),
                };
                h.push(Op { kind: OpKind::Write, observed, outcome, invoke_us: t, complete_us: t, ..acq.clone() });
                wrote = Some(outcome);
                log(
                    h,
                    format!(
                        "  {what}: wrote with token {}: {}",
                        acq.token,
                        if outcome == Outcome::Ok {
                            "accepted".to_string()
                        } else {
                            format!("rejected (register at {observed})")
                        }
                    ),
                );
            }
        }
        let t = h.now_us();
        self.stdin.write_all(b"go\n").await?;
        let line = self.line(Duration::from_secs(30)).await;
        let (outcome, error) = match line {
            Some(l) if l == "COMMIT ok" => (Outcome::Ok, String::new()),
            Some(l) if l.starts_with("COMMIT fail") => (Outcome::Fail, l[12..].to_string()),
            Some(l) => (Outcome::Unknown, l),
            None => (Outcome::Unknown, "no answer".into()),
        };
        log(h, format!("  {what}: its commit: {outcome:?} {error}"));
        let op = Op { outcome, error, invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Commit, acq.txn) };
        h.push(op.clone());
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        Ok((wrote, op))
    }
}

/// The harness's own in-process transaction on `key` (recorded under process `p`): begin,
/// acquire exclusively within `wait`. Returns the transaction and its grant.
async fn harness_acquire(
    client: &DlsClient,
    ctx: &Ctx,
    p: u64,
    key: &str,
    wait: Duration,
) -> Option<(caerus_core::Transaction, Op)> {
    let h = &ctx.history;
    let tx = recorded_begin(client, ctx, p).await?;
    let t = h.now_us();
    let r = tx
        .acquire_lock(NS, key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(wait.as_millis() as u64))
        .await;
    let base = Op {
        key: key.to_string(),
        mode: Some(Mode::Exclusive),
        invoke_us: t,
        complete_us: h.now_us(),
        ..Op::new(p, OpKind::Acquire, tx.id())
    };
    match r {
        Ok(lock) => {
            let op = Op { token: lock.fencing_token, ..base };
            h.push(op.clone());
            Some((tx, op))
        }
        Err(e) => {
            h.push(Op { outcome: classify(&e), error: e.code().into(), ..base });
            let t = h.now_us();
            let r = tx.abort().await;
            h.push(Op {
                outcome: r.as_ref().map_or_else(classify, |_| Outcome::Ok),
                error: r.err().map(|e| e.code().to_string()).unwrap_or_default(),
                invoke_us: t,
                complete_us: h.now_us(),
                ..Op::new(p, OpKind::Abort, tx.id())
            });
            None
        }
    }
}

/// Writes to the register with the harness transaction's token, then commits it.
/// Returns whether the write was accepted.
async fn harness_write_commit(ctx: &Ctx, tx: caerus_core::Transaction, acq: &Op, p: u64) -> bool {
    let h = &ctx.history;
    let t = h.now_us();
    let (outcome, observed) = match ctx.register.write(&acq.key, acq.token, p) {
        Ok(prev) => (Outcome::Ok, prev),
        Err(last) => (Outcome::Fail, last),
    };
    h.push(Op { kind: OpKind::Write, observed, outcome, invoke_us: t, complete_us: t, ..acq.clone() });
    let t = h.now_us();
    let r = tx.commit().await;
    h.push(Op {
        outcome: r.as_ref().map_or_else(classify, |_| Outcome::Ok),
        error: r.err().map(|e| e.code().to_string()).unwrap_or_default(),
        invoke_us: t,
        complete_us: h.now_us(),
        ..Op::new(p, OpKind::Commit, acq.txn)
    });
    outcome == Outcome::Ok
}

/// pause-client: a holder is SIGSTOPped past its lease, woken, writes with its old token.
async fn pause_client(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let h = &ctx.history;
    let key = key_name(rng.gen_range(0..ctx.keys));
    let p = figs.process();
    let mut child = StallChild::spawn(c, &c.endpoints(), &key, ctx.lease_ms, p)?;
    let Some(txn) = child.begun(h, p).await else {
        log(h, "  pause-client: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let acq = child.acquired(h, p, txn, &key, h.now_us(), Duration::from_secs(15)).await;
    if acq.outcome != Outcome::Ok {
        log(h, format!("  pause-client: no grant ({}), skipped", acq.error));
        let _ = child.write_and_commit(ctx, &acq, p, "pause-client").await?;
        return Ok(());
    }
    signal(child.pid, "STOP");
    let stopped_us = h.now_us();
    let pause = Duration::from_millis(ctx.lease_ms * 2 + 1000);
    log(
        h,
        format!("  pause-client: txn {txn} holds {key} with token {}; SIGSTOP for {} ms", acq.token, pause.as_millis()),
    );
    tokio::time::sleep(pause).await;
    signal(child.pid, "CONT");
    figs.stalls.push(Stall { kind: "SIGSTOP of a holder", key: key.clone(), txn, stopped_us, probe_granted_us: None });
    child.write_and_commit(ctx, &acq, p, "pause-client").await?;
    Ok(())
}

/// pause-queued: a client queued behind a holder is SIGSTOPped past its lease; the holder
/// leaves, and the harness's next request for the key must be granted within a lease plus
/// an election of the stop — the frozen waiter must not keep (or be handed) the lock.
async fn pause_queued(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let h = &ctx.history;
    let key = key_name(rng.gen_range(0..ctx.keys));
    let client = DlsClient::connect(client_config(c.endpoints())).await?;
    let pb = figs.process();
    let Some((blocker, bacq)) = harness_acquire(&client, ctx, pb, &key, Duration::from_secs(10)).await else {
        log(h, "  pause-queued: the blocker got no grant, skipped");
        return Ok(());
    };
    let p = figs.process();
    let mut child = match StallChild::spawn(c, &c.endpoints(), &key, ctx.lease_ms, p) {
        Ok(child) => child,
        Err(e) => {
            // End the blocker's transaction, or the terminal checker would count it unended.
            harness_write_commit(ctx, blocker, &bacq, pb).await;
            return Err(e);
        }
    };
    let Some(txn) = child.begun(h, p).await else {
        harness_write_commit(ctx, blocker, &bacq, pb).await;
        log(h, "  pause-queued: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let invoke_us = h.now_us();
    // Wait until the server has queued it (else it would be paused before asking).
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut queued = false;
    while !queued && Instant::now() < deadline {
        if let Ok(keys) = client.list_locks(NS).await {
            queued = keys.iter().any(|k| k.key == key && k.waiters.iter().any(|w| w.transaction_id == txn));
        }
        if !queued {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    signal(child.pid, "STOP");
    let stopped_us = h.now_us();
    log(
        h,
        format!(
            "  pause-queued: txn {txn} {} behind txn {} on {key}; SIGSTOP, the holder commits",
            if queued { "queued" } else { "not seen queued" },
            bacq.txn
        ),
    );
    harness_write_commit(ctx, blocker, &bacq, pb).await;
    let pp = figs.process();
    let bound = Duration::from_millis(ctx.lease_ms) + Duration::from_secs(10);
    let mut probe_granted_us = None;
    match harness_acquire(&client, ctx, pp, &key, bound).await {
        Some((tx, acq)) => {
            probe_granted_us = Some(acq.complete_us);
            log(
                h,
                format!(
                    "  pause-queued: next grant of {key} {} ms after the SIGSTOP",
                    (acq.complete_us - stopped_us) / 1000
                ),
            );
            harness_write_commit(ctx, tx, &acq, pp).await;
        }
        None => figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "key {key}: a SIGSTOPped waiter (txn {txn}) blocked it for more than {} ms",
                bound.as_millis()
            ),
        }),
    }
    if queued {
        figs.stalls.push(Stall {
            kind: "SIGSTOP of a queued waiter",
            key: key.clone(),
            txn,
            stopped_us,
            probe_granted_us,
        });
    }
    let rest =
        Duration::from_millis(ctx.lease_ms * 2 + 1000).saturating_sub(Duration::from_micros(h.now_us() - stopped_us));
    tokio::time::sleep(rest).await;
    signal(child.pid, "CONT");
    let acq = child.acquired(h, p, txn, &key, invoke_us, Duration::from_secs(15)).await;
    log(h, format!("  pause-queued: woken, its acquire: {:?} {} token {}", acq.outcome, acq.error, acq.token));
    child.write_and_commit(ctx, &acq, p, "pause-queued").await?;
    Ok(())
}

/// partition-client: a holder that reaches the cluster only through the proxies is cut
/// off from every node past its lease (its heartbeats fail; it is not paused), then
/// healed. Meanwhile the harness takes the key and writes with the next token. The cut
/// client's late write with its old token must be rejected and its commit must fail: it
/// must learn that its transaction was lost.
async fn partition_client(c: &Cluster, ctx: &Ctx, rng: &mut StdRng, figs: &mut Figures) -> anyhow::Result<()> {
    let key = key_name(rng.gen_range(0..ctx.keys));
    let p = figs.process();
    // Its connections through the proxies are told apart by its pid.
    let mut child = StallChild::spawn(c, &c.proxy_endpoints(), &key, ctx.lease_ms, p)?;
    partition_client_run(c, ctx, figs, &key, p, &mut child).await
}

async fn partition_client_run(
    c: &Cluster,
    ctx: &Ctx,
    figs: &mut Figures,
    key: &str,
    p: u64,
    child: &mut StallChild,
) -> anyhow::Result<()> {
    let h = &ctx.history;
    let Some(txn) = child.begun(h, p).await else {
        log(h, "  partition-client: the client did not begin within 15 s, skipped");
        return Ok(());
    };
    let acq = child.acquired(h, p, txn, key, h.now_us(), Duration::from_secs(15)).await;
    if acq.outcome != Outcome::Ok {
        log(h, format!("  partition-client: no grant ({}), skipped", acq.error));
        child.write_and_commit(ctx, &acq, p, "partition-client").await?;
        return Ok(());
    }
    for n in c.ids() {
        c.links.block(p, n);
    }
    let cut_us = h.now_us();
    let cut = Duration::from_millis(ctx.lease_ms * 2 + 1000);
    log(
        h,
        format!(
            "  partition-client: txn {txn} holds {key} with token {}; cut from every node for {} ms",
            acq.token,
            cut.as_millis()
        ),
    );
    figs.stalls.push(Stall {
        kind: "client cut off holding",
        key: key.to_string(),
        txn,
        stopped_us: cut_us,
        probe_granted_us: None,
    });
    let client = DlsClient::connect(client_config(c.endpoints())).await?;
    let pp = figs.process();
    let bound = Duration::from_millis(ctx.lease_ms) + Duration::from_secs(10);
    let mut fenced_by = None;
    match harness_acquire(&client, ctx, pp, key, bound).await {
        Some((tx, nacq)) => {
            log(
                h,
                format!(
                    "  partition-client: next grant of {key} {} ms after the cut, token {}",
                    (nacq.complete_us - cut_us) / 1000,
                    nacq.token
                ),
            );
            if harness_write_commit(ctx, tx, &nacq, pp).await {
                fenced_by = Some(nacq.token);
            }
        }
        None => figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "key {key}: a client cut off while holding it (txn {txn}) blocked it for more than {} ms",
                bound.as_millis()
            ),
        }),
    }
    let rest = cut.saturating_sub(Duration::from_micros(h.now_us() - cut_us));
    tokio::time::sleep(rest).await;
    c.links.heal();
    log(h, "  partition-client: healed");
    let (wrote, commit) = child.write_and_commit(ctx, &acq, p, "partition-client").await?;
    if let (Some(Outcome::Ok), Some(t)) = (wrote, fenced_by) {
        figs.extra_violations.push(Violation {
            checker: "fenced-register",
            message: format!(
                "key {key}: cut-off txn {txn}'s late write with token {} accepted after token {t} was written",
                acq.token
            ),
        });
    }
    if commit.outcome != Outcome::Fail {
        figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!(
                "txn {txn} was cut off past its lease and healed, yet its commit was {:?} {} (not lost)",
                commit.outcome, commit.error
            ),
        });
    }
    Ok(())
}

fn grants_count(h: &History) -> u64 {
    h.grants()
}

async fn inject(
    fault: Fault,
    c: &mut Cluster,
    admin: &DlsClient,
    ctx: &Ctx,
    rng: &mut StdRng,
    figs: &mut Figures,
) -> anyhow::Result<()> {
    let h = &ctx.history;
    let hold = Duration::from_millis(rng.gen_range(2000..4500));
    let leader = c.wait_for_leader(admin, Duration::from_secs(10)).await;
    let others = |l: u64| c.ids().into_iter().filter(|&i| i != l).collect::<Vec<u64>>();
    match fault {
        Fault::KillLeader | Fault::CrashAfterWrite => {
            let Some(l) = leader else { return skip(h, format!("{fault}: no leader, skipped")) };
            if fault == Fault::CrashAfterWrite {
                let before = grants_count(h);
                let deadline = Instant::now() + Duration::from_secs(5);
                while grants_count(h) == before && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            let t = h.now_us();
            c.kill(l);
            figs.leader_kills_us.push(t);
            log(h, format!("{fault}: SIGKILL leader node {l}, restart in {} ms", hold.as_millis() / 2));
            tokio::time::sleep(hold / 2).await;
            c.spawn(l)?;
        }
        Fault::KillFollower => {
            let Some(l) = leader else { return skip(h, "kill-follower: no leader, skipped") };
            let f = *others(l).choose(rng).expect("followers");
            log(h, format!("kill-follower: SIGKILL node {f}, restart in {} ms", hold.as_millis() / 2));
            c.kill(f);
            tokio::time::sleep(hold / 2).await;
            c.spawn(f)?;
        }
        Fault::PauseNode => {
            let n = match leader {
                Some(l) if rng.gen_bool(0.5) => l,
                _ => *c.ids().choose(rng).expect("nodes"),
            };
            log(
                h,
                format!(
                    "pause-node: SIGSTOP node {n}{} for {} ms",
                    if Some(n) == leader { " (leader)" } else { "" },
                    hold.as_millis()
                ),
            );
            c.pause(n, true);
            tokio::time::sleep(hold).await;
            c.pause(n, false);
        }
        Fault::PauseClient => pause_client(c, ctx, rng, figs).await?,
        Fault::PauseQueued => pause_queued(c, ctx, rng, figs).await?,
        Fault::PartitionClient => partition_client(c, ctx, rng, figs).await?,
        Fault::PartitionLeader => {
            let Some(l) = leader else { return skip(h, "partition-leader: no leader, skipped") };
            log(h, format!("partition-leader: isolate node {l} for {} ms", hold.as_millis()));
            c.links.partition(&[l], &others(l));
            tokio::time::sleep(hold).await;
            c.links.heal();
        }
        Fault::PartitionSplit => {
            let mut ids = c.ids();
            ids.shuffle(rng);
            let (minority, majority) = ids.split_at(ids.len() / 2);
            log(h, format!("partition-split: {minority:?} | {majority:?} for {} ms", hold.as_millis()));
            c.links.partition(minority, majority);
            tokio::time::sleep(hold).await;
            c.links.heal();
        }
        Fault::OneWay => {
            let Some(l) = leader else { return skip(h, "one-way: no leader, skipped") };
            log(h, format!("one-way: node {l} (leader) cannot send to the others for {} ms", hold.as_millis()));
            for o in others(l) {
                c.links.block(l, o);
            }
            tokio::time::sleep(hold).await;
            c.links.heal();
        }
        Fault::Latency => {
            let d = Duration::from_millis(rng.gen_range(20..150));
            log(h, format!("latency: +{} ms per chunk between nodes for {} ms", d.as_millis(), hold.as_millis()));
            c.links.set_delay(d);
            tokio::time::sleep(hold).await;
            c.links.heal();
        }
        Fault::ClockJump => {
            if c.faketime.is_none() {
                return skip(h, "clock-jump: nodes are not under faketime, skipped");
            }
            // Half the time a wall-clock-only node's CLOCK_REALTIME steps back (an NTP step);
            // else a fully faked node's clocks, CLOCK_MONOTONIC included, jump forward.
            let back = rng.gen_bool(0.5);
            let class: Vec<u64> = c.nodes.iter().filter(|n| n.wall_only == back).map(|n| n.id).collect();
            let n = match leader {
                Some(l) if class.contains(&l) && rng.gen_bool(0.5) => l,
                _ => *class.choose(rng).expect("nodes of both classes"),
            };
            let jump = rng.gen_range(3..9i64);
            let node = c.node(n);
            node.clock_offset_s += if back { -jump } else { jump };
            std::fs::write(&node.clock_file, format!("{:+}s\n", node.clock_offset_s))?;
            *figs
                .faults
                .entry(if back { "clock-jump (wall back)" } else { "clock-jump (all forward)" })
                .or_default() += 1;
            log(
                h,
                format!(
                    "clock-jump: node {n}{}'s {} (within 1 s; now {:+} s), watch for {} ms",
                    if Some(n) == leader { " (leader)" } else { "" },
                    if back {
                        format!("wall clock steps {jump} s back")
                    } else {
                        format!("clocks (monotonic too) jump {jump} s forward")
                    },
                    node.clock_offset_s,
                    hold.as_millis()
                ),
            );
            tokio::time::sleep(hold).await;
            return Ok(());
        }
        Fault::RestartAll => {
            log(h, "restart-all: SIGKILL every node, restart all");
            if let Some(l) = leader {
                figs.leader_kills_us.push(h.now_us());
                let _ = l;
            }
            for id in c.ids() {
                c.kill(id);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            for id in c.ids() {
                c.spawn(id)?;
            }
        }
        Fault::WipeRejoin | Fault::MembershipPartition => {
            let Some(l) = leader else { return skip(h, format!("{fault}: no leader, skipped")) };
            let say = |m: String| log(h, m);
            let broken = if fault == Fault::WipeRejoin {
                membership::wipe_and_rejoin(c, admin, l, rng, &say).await?
            } else {
                membership::membership_during_partition(c, admin, l, hold, rng, &say).await?
            };
            for message in broken {
                log(h, format!("{fault}: VIOLATION {message}"));
                figs.extra_violations.push(Violation { checker: "membership", message });
            }
        }
        Fault::DiskFull | Fault::TornTail => {
            // Mostly the leader (the node that must stop acknowledging), sometimes a follower.
            let n = match leader {
                Some(l) if rng.gen_bool(0.7) => l,
                _ => *c.ids().choose(rng).expect("nodes"),
            };
            let say = |m: String| log(h, m);
            let broken = if fault == Fault::DiskFull {
                storage_faults::disk_full(c, n, Some(n) == leader, hold, &say).await?
            } else {
                storage_faults::torn_tail(c, n, Some(n) == leader, rng, &say).await?
            };
            if Some(n) == leader {
                figs.leader_kills_us.push(h.now_us());
            }
            for message in broken {
                log(h, format!("{fault}: VIOLATION {message}"));
                figs.extra_violations.push(Violation { checker: "storage", message });
            }
        }
    }
    *figs.faults.entry(fault.name()).or_default() += 1;
    Ok(())
}

/// Time from each leader kill to the next acknowledged grant, in microseconds.
fn unavailability(history: &[caerus_chaos::history::Op], kills: &[u64]) -> Vec<u64> {
    let mut grants: Vec<u64> = history
        .iter()
        .filter(|o| o.kind == OpKind::Acquire && o.outcome == Outcome::Ok && o.process < 1000)
        .map(|o| o.complete_us)
        .collect();
    grants.sort_unstable();
    kills.iter().filter_map(|&k| grants.iter().find(|&&g| g > k).map(|g| g - k)).collect()
}

async fn run(args: Args) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000)
            .unwrap_or(1)
    });
    let faults = Fault::parse_list(&args.faults, seed).map_err(anyhow::Error::msg)?;
    if args.nodes != 3 && args.nodes != 5 {
        bail!("--nodes must be 3 or 5");
    }
    let dir = tempfile::Builder::new().prefix("dls-chaos-").tempdir()?;
    println!(
        "dls-chaos: seed {seed} (replay with SEED={seed}), {} nodes, {} clients, {} keys, {} s, lease {} ms, run dir {}",
        args.nodes, args.clients, args.keys, args.duration, args.lease_ms, dir.path().display()
    );
    let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    println!("faults: {}", if names.is_empty() { "none".to_string() } else { names.join(",") });
    let mut rng = StdRng::seed_from_u64(seed);
    let faketime = if faults.contains(&Fault::ClockJump) {
        let lib = std::env::var_os("FAKETIME_LIB")
            .map(PathBuf::from)
            .or_else(|| FAKETIME_LIBS.iter().map(PathBuf::from).find(|p| p.exists()));
        match lib {
            Some(l) => {
                println!("clock-jump: every node runs under {}", l.display());
                Some(l)
            }
            None => {
                println!(
                    "clock-jump: no libfaketime (apt-get install faketime, or FAKETIME_LIB=…): it will be skipped"
                );
                None
            }
        }
    } else {
        None
    };
    let mut faults = faults;
    let tmpfs = if faults.contains(&Fault::DiskFull) {
        match disk::Tmpfs::mount(&dir.path().join("probe"), "1m") {
            Ok(_) => {
                println!("disk-full: every node's data directory is a {TMPFS_SIZE} tmpfs");
                Some(TMPFS_SIZE)
            }
            Err(e) => {
                println!("disk-full: {e}; it will not be injected");
                faults.retain(|f| *f != Fault::DiskFull);
                None
            }
        }
    } else {
        None
    };
    let mut cluster = Cluster::start(args.dls.clone(), args.nodes, dir.path(), faketime, tmpfs).await?;
    let admin = DlsClient::connect(client_config(cluster.endpoints())).await?;
    let history = Arc::new(History::new());
    let Some(l) = cluster.wait_for_leader(&admin, Duration::from_secs(30)).await else {
        bail!("no leader within 30 s; logs in {}", dir.keep().display());
    };
    log(&history, format!("cluster up, leader node {l}"));
    let ctx = Arc::new(Ctx {
        history: history.clone(),
        register: Arc::new(FencedRegister::new()),
        stop: Arc::new(AtomicBool::new(false)),
        keys: args.keys.max(1),
        lease_ms: args.lease_ms,
    });
    let mut workers = Vec::new();
    for p in 0..args.clients as u64 {
        let client = DlsClient::connect(client_config(cluster.endpoints())).await?;
        workers.push(tokio::spawn(worker(p, client, ctx.clone(), seed.wrapping_mul(1000).wrapping_add(p))));
    }
    let mut figs = Figures {
        faults: HashMap::new(),
        leader_kills_us: vec![],
        stalls: vec![],
        extra_violations: vec![],
        next_process: 1000,
    };
    let end = Instant::now() + Duration::from_secs(args.duration);
    let ticks = Arc::new(AtomicU64::new(0));
    let mut order: Vec<Fault> = Vec::new();
    let mut next_fault = 0;
    while Instant::now() < end {
        let quiet = Duration::from_millis(rng.gen_range(1500..3000));
        tokio::time::sleep(quiet.min(end.saturating_duration_since(Instant::now()))).await;
        if Instant::now() >= end {
            break;
        }
        log(&history, format!("ops so far: {}, grants: {}", history.len(), grants_count(&history)));
        ticks.fetch_add(1, Ordering::Relaxed);
        // Every fault once per round, in a seeded order, so short runs cover them all.
        if next_fault == order.len() {
            order = faults.clone();
            order.shuffle(&mut rng);
            next_fault = 0;
        }
        if let Some(&f) = order.get(next_fault) {
            next_fault += 1;
            inject(f, &mut cluster, &admin, &ctx, &mut rng, &mut figs).await?;
            for id in cluster.ids() {
                cluster.pause(id, false);
                cluster.spawn(id)?;
            }
            cluster.links.heal();
        }
    }
    log(&history, "stopping clients");
    ctx.stop.store(true, Ordering::Relaxed);
    for w in workers {
        if tokio::time::timeout(Duration::from_secs(60), w).await.is_err() {
            figs.extra_violations
                .push(Violation { checker: "terminal", message: "a client did not finish within 60 s".into() });
        }
    }
    // (d) No lock stays held once every client has ended: within a lease plus elections.
    let bound = Duration::from_millis(args.lease_ms) + Duration::from_secs(10);
    let deadline = Instant::now() + bound;
    let mut held = String::new();
    loop {
        match admin.list_locks("").await {
            Ok(keys) => {
                let holders: Vec<String> = keys
                    .iter()
                    .flat_map(|k| {
                        k.holders.iter().map(move |h| format!("{}/{} by txn {}", k.namespace, k.key, h.transaction_id))
                    })
                    .collect();
                if holders.is_empty() {
                    held.clear();
                    break;
                }
                held = holders.join(", ");
            }
            Err(e) => held = format!("list_locks failed: {e}"),
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !held.is_empty() {
        figs.extra_violations.push(Violation {
            checker: "terminal",
            message: format!("{} ms after every client ended, still held: {held}", bound.as_millis()),
        });
    }
    let ops = history.snapshot();
    let mut violations = checker::check_all(&ops, &ctx.register.tokens());
    let lin = linearizable::check(&ops, LIN_BUDGET);
    violations.extend(lin.violations.iter().cloned());
    violations.append(&mut figs.extra_violations);
    // A stopped (or cut-off) client's stop to the next grant of its key to anyone else.
    let mut expiry_to_grant: Vec<(&'static str, Vec<u64>)> = Vec::new();
    for s in &figs.stalls {
        let expiry = s.stopped_us;
        let next = ops
            .iter()
            .filter(|o| {
                o.kind == OpKind::Acquire
                    && o.outcome == Outcome::Ok
                    && o.key == s.key
                    && o.complete_us > s.stopped_us
                    && o.txn != s.txn
            })
            .map(|o| o.complete_us)
            .min();
        if let Some(g) = s.probe_granted_us.or(next) {
            match expiry_to_grant.iter_mut().find(|(k, _)| *k == s.kind) {
                Some((_, v)) => v.push(g.saturating_sub(expiry)),
                None => expiry_to_grant.push((s.kind, vec![g.saturating_sub(expiry)])),
            }
            if g > expiry + args.lease_ms * 1000 + 10_000_000 {
                violations.push(Violation {
                    checker: "terminal",
                    message: format!(
                        "key {}: {} (txn {}): next granted {} ms after",
                        s.key,
                        s.kind,
                        s.txn,
                        (g - expiry) / 1000
                    ),
                });
            }
        }
    }
    let path = args.history.clone().unwrap_or_else(|| dir.path().join("history.jsonl"));
    std::fs::write(&path, history.to_jsonl())?;
    let count = |k: OpKind, o: Outcome| ops.iter().filter(|x| x.kind == k && x.outcome == o).count();
    println!("==== figures (seed {seed}, {} nodes) ====", args.nodes);
    let mut fl: Vec<_> = figs.faults.iter().collect();
    fl.sort();
    println!(
        "faults injected: {} ({})",
        figs.faults.values().sum::<u64>(),
        fl.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    );
    println!(
        "operations: {} (txns begun {}, grants {}, acquire failed/unknown {}/{}, commits ok/failed/unknown {}/{}/{}, writes accepted/rejected {}/{}, reads {})",
        ops.len(),
        count(OpKind::Begin, Outcome::Ok),
        count(OpKind::Acquire, Outcome::Ok),
        count(OpKind::Acquire, Outcome::Fail),
        count(OpKind::Acquire, Outcome::Unknown),
        count(OpKind::Commit, Outcome::Ok),
        count(OpKind::Commit, Outcome::Fail),
        count(OpKind::Commit, Outcome::Unknown),
        count(OpKind::Write, Outcome::Ok),
        count(OpKind::Write, Outcome::Fail),
        count(OpKind::Read, Outcome::Ok),
    );
    println!(
        "unavailability after a leader kill (to the next grant): {}",
        summary_ms(&unavailability(&ops, &figs.leader_kills_us))
    );
    expiry_to_grant.sort_by_key(|(k, _)| *k);
    for (kind, v) in &expiry_to_grant {
        println!(
            "{kind} to the next grant of its key (lease {} ms, heartbeat every third): {}",
            args.lease_ms,
            summary_ms(v)
        );
    }
    println!("{}", lin_summary(&lin));
    println!(
        "proxy: node connections accepted {}, accept to forwarding {}; client connections {}; unidentified {} (closed before the scan {}, cut while a link into their node was blocked {})",
        cluster.links.setup_times().len(),
        summary_ms(&cluster.links.setup_times()),
        cluster.links.client_connections(),
        cluster.links.unknown_diallers(),
        cluster.links.unknown_gone(),
        cluster.links.unknown_cut()
    );
    println!("history: {}", path.display());
    println!("violations: {}", violations.len());
    for v in violations.iter().take(50) {
        println!("  {v}");
    }
    cluster.shutdown();
    if violations.is_empty() {
        println!("OK (seed {seed})");
        Ok(true)
    } else {
        let kept = dir.keep();
        println!("FAILED (seed {seed}; replay with SEED={seed}); node logs kept in {}", kept.display());
        Ok(false)
    }
}

fn lin_summary(lin: &linearizable::Report) -> String {
    format!(
        "linearizability per key (reader-writer lock, rising tokens): {} keys checked, {} linearizable, {} not, {} inconclusive{} ({} ops, {} search steps, budget {LIN_BUDGET}/key)",
        lin.keys,
        lin.linearizable,
        lin.violations.len(),
        lin.inconclusive.len(),
        if lin.inconclusive.is_empty() { String::new() } else { format!(" {:?}", lin.inconclusive) },
        lin.ops,
        lin.steps,
    )
}

/// `dls-chaos check-history FILE`: re-checks a recorded history offline (the register's
/// final state is taken from the history's last accepted writes).
fn check_history(path: &str) -> anyhow::Result<bool> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {path}"))?;
    let mut ops = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        ops.push(serde_json::from_str::<Op>(line).with_context(|| format!("{path}:{}", i + 1))?);
    }
    let mut finals: HashMap<String, u64> = HashMap::new();
    for o in ops.iter().filter(|o| o.kind == OpKind::Write && o.outcome == Outcome::Ok) {
        let t = finals.entry(o.key.clone()).or_default();
        *t = (*t).max(o.token);
    }
    let started = Instant::now();
    let mut violations = checker::check_all(&ops, &finals);
    let lin = linearizable::check(&ops, LIN_BUDGET);
    violations.extend(lin.violations.iter().cloned());
    println!("{} operations", ops.len());
    println!("{} in {} ms", lin_summary(&lin), started.elapsed().as_millis());
    println!("violations: {}", violations.len());
    for v in violations.iter() {
        println!("  {v}");
    }
    Ok(violations.is_empty())
}

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("check-history") {
        let Some(path) = argv.get(2) else {
            eprintln!("usage: dls-chaos check-history HISTORY.jsonl");
            return std::process::ExitCode::from(2);
        };
        return match check_history(path) {
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
        return match rt.block_on(stall_client(endpoints, key, lease)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                println!("ERROR {e}");
                std::process::ExitCode::from(1)
            }
        };
    }
    let args = Args::parse();
    match rt.block_on(run(args)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("dls-chaos: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn skip(h: &History, msg: impl AsRef<str>) -> anyhow::Result<()> {
    log(h, msg);
    Ok(())
}

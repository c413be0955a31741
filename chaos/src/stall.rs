//! The stalled client: a subprocess (`dls-chaos stall-client`) holding or awaiting one lock,
//! so that SIGSTOP freezes its heartbeats too, and a partition can cut it alone. It speaks a
//! line protocol on stdin/stdout; [`StallChild`] drives it and records what it did.

use std::io::{BufRead, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use caerus_core::{AcquireOptions, DlsClient, LockMode, TransactionOptions};
use caerus_testkit::proxy::Links;
use caerus_testkit::{signal_pid, Cluster};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::fault::Fault;
use crate::history::{History, Mode, Op, OpKind, Outcome};
use crate::workload::{classify, client_config, Ctx, NS};

/// The stalled client, run as a subprocess so that SIGSTOP freezes its heartbeat too.
/// Says BEGIN and WAITING, asks for `key` exclusively (waiting up to 30 s: queued behind a
/// holder in `queue` mode), says GRANT or NOGRANT, waits for a line on stdin, says WRITE
/// (the parent applies the write to the register) or NOWRITE, waits for another line, then
/// commits and says how that went.
pub async fn stall_client(endpoints: &str, key: &str, lease_ms: u64) -> anyhow::Result<()> {
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

/// A stall client subprocess and its line protocol.
pub struct StallChild {
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
    pub fn spawn(c: &Cluster, endpoints: &[String], key: &str, lease_ms: u64, p: u64) -> anyhow::Result<StallChild> {
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
        c.links().set_pid(pid, p);
        Ok(StallChild { child, out, stdin, pid, links: c.links().clone() })
    }

    /// Sends `sig` to it (kill(1)): STOP freezes it, heartbeats included; CONT wakes it.
    pub fn signal(&self, sig: &str) {
        signal_pid(self.pid, sig);
    }

    async fn line(&mut self, within: Duration) -> Option<String> {
        match tokio::time::timeout(within, self.out.next_line()).await {
            Ok(Ok(Some(l))) => Some(l),
            _ => None,
        }
    }

    /// Waits for `BEGIN txn`; pushes the Begin.
    pub async fn begun(&mut self, h: &History, p: u64) -> Option<u64> {
        let t = h.now_us();
        let line = self.line(Duration::from_secs(15)).await?;
        let txn = line.strip_prefix("BEGIN ")?.parse().ok()?;
        h.push(Op { invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Begin, txn) });
        self.line(Duration::from_secs(5)).await.filter(|l| l == "WAITING")?;
        Some(txn)
    }

    /// Reads the answer to the acquire invoked at `invoke_us`; pushes it and returns it.
    pub async fn acquired(&mut self, h: &History, p: u64, txn: u64, key: &str, invoke_us: u64, within: Duration) -> Op {
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
    pub async fn write_and_commit(
        &mut self,
        ctx: &Ctx,
        acq: &Op,
        p: u64,
        what: Fault,
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
                h.log(format!(
                    "  {what}: wrote with token {}: {}",
                    acq.token,
                    if outcome == Outcome::Ok {
                        "accepted".to_string()
                    } else {
                        format!("rejected (register at {observed})")
                    }
                ));
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
        h.log(format!("  {what}: its commit: {outcome:?} {error}"));
        let op = Op { outcome, error, invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Commit, acq.txn) };
        h.push(op.clone());
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        Ok((wrote, op))
    }
}

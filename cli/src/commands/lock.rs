//! `dls lock NAMESPACE KEY -- COMMAND...`: run a command while holding a lock.
//!
//! The lock is taken in a transaction whose lease the client heartbeats while the command
//! runs. The command sees the lock in its environment (`DLS_FENCING_TOKEN`,
//! `DLS_NAMESPACE`, `DLS_KEY`, `DLS_TRANSACTION_ID`), SIGINT and SIGTERM are forwarded to
//! it, and the transaction is committed (the lock released) when it exits.
//!
//! The command must have stopped before the server can expire the lease and grant the lock
//! to another host. When no heartbeat has been acknowledged for the lease's renew window,
//! the command's process group gets SIGTERM, and SIGKILL `--kill-grace` later, at the
//! lease's renew deadline: a margin before the server can expire the lease (see
//! `docs/leases.md`). A grace the lease cannot honour is refused before anything starts.
//! The command runs in a process group of its own, so the processes it starts stop too.
//!
//! With `--permits N` the lock is one permit of a counted semaphore: at most N commands
//! run at once across every host (e.g. `--permits 3` for "at most three backups").
//!
//! For cron on several hosts, `--skip-if-locked` tries the lock once and skips the command
//! at once when it is held (a waiting host would run the job again right after the first),
//! and `--min-hold` keeps the lock for a while after a short job, so a host whose cron
//! fires a few seconds late still finds it held.
//!
//! With `--once-per PERIOD` the command runs at most once per schedule slot, decided by the
//! cluster: holding the lock, `dls lock` claims the slot the cluster's clock is in (slots
//! aligned to the Unix epoch, `floor(t / PERIOD)`), skips the command (exit 0) if that slot
//! already ran on any host, and records how it ended. A host whose clock is off or whose
//! cron fired late cannot run a slot again. A slot whose run failed (non-zero exit) or was
//! lost (the lock was lost, `dls lock` was killed) is not run again unless
//! `--retry-failed`: the run may have done part of its work, and only the job knows whether
//! doing it twice is safe.
//!
//! Exit codes: the command's own status (128+N if it died of signal N); 75 if the lock
//! could not be had within `--wait-timeout` (0 with `--skip-if-locked`); 76 if the lock was
//! lost while the command ran; 126/127 if the command could not be started; 1 if the
//! cluster could not be reached; 2 for a usage mistake.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use caerus_core::{AcquireOptions, Error, LeaseBudget, LockMode, SlotClaim, SlotOutcome, TransactionOptions};
use clap::Args;
use tokio::process::{Child, Command};
#[cfg(unix)]
use tokio::signal::unix::{signal, SignalKind};

#[cfg(windows)]
use caerus_server::child::{send_signal, ProcessGroup};
#[cfg(windows)]
use caerus_server::signals::{signal, SignalKind};

use super::connect::{CliError, ClusterArgs};

/// Exit code when the lock could not be had within `--wait-timeout` (EX_TEMPFAIL).
pub const EXIT_LOCK_BUSY: i32 = 75;
/// Exit code when the lock was lost while the command ran (the command was stopped).
pub const EXIT_LOCK_LOST: i32 = 76;
/// Exit code when the command exists but could not be run (as shells use it).
pub const EXIT_CANNOT_RUN: i32 = 126;
/// Exit code when the command was not found (as shells use it).
pub const EXIT_NOT_FOUND: i32 = 127;
/// The command's time to stop after a lost lock when `--kill-grace` is not given (less when
/// the `--ttl` is too short for it): enough to finish the current item of a job.
const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the lock by default, unless `--skip-if-locked` is given.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// `--skip-if-locked` without `--wait-timeout`: a try-lock, answered at once (granted, or
/// busy without joining the queue).
const TRY_ONCE_WAIT_MS: u64 = 0;

#[derive(Args, Debug)]
#[command(after_help = "Exit codes: the command's status (128+N if it died of signal N); \
75 if the lock was not had within --wait-timeout (0 with --skip-if-locked); 76 if the lock \
was lost while the command ran (its process group got SIGTERM, then SIGKILL after --kill-grace, \
before the server could expire the lease); 126/127 if \
the command could not be run / was not found; 1 if the cluster could not be reached.\n\n\
The command's environment gets DLS_FENCING_TOKEN, DLS_NAMESPACE, DLS_KEY and DLS_TRANSACTION_ID.\n\n\
Example (cron on every host: the job runs on one host only; the others skip at once, even \
if their cron fires up to a minute later):\n  \
dls lock --skip-if-locked --min-hold 1m --ttl 30s jobs nightly-report -- ./report.sh\n\n\
Example (at most once per 5-minute slot, whatever the hosts' clocks say; the command gets \
DLS_SLOT and DLS_SLOT_ATTEMPT):\n  \
dls lock --once-per 5m jobs sync -- ./sync.sh")]
pub struct LockArgs {
    /// Take a shared (read) lock instead of an exclusive one.
    #[arg(long, conflicts_with = "permits")]
    pub shared: bool,
    /// Take one permit of a counted semaphore of N permits instead: at most N commands hold
    /// the key at once (every user of the key must say the same N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub permits: Option<u32>,
    /// How long to wait for the lock, like 500ms, 30s, 5m [default: 30s; with
    /// --skip-if-locked the lock is tried once, without waiting, unless this is given].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait_timeout: Option<Duration>,
    /// The transaction's lease: how soon the lock is freed if this process stops heartbeating.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub ttl: Duration,
    /// Exit 0 without running the command when the lock is held (for cron): the lock is
    /// tried once and the command skipped at once, unless --wait-timeout is given. Silent on
    /// stderr (cron mails what a job prints) unless -v.
    #[arg(long)]
    pub skip_if_locked: bool,
    /// Say on stderr when --skip-if-locked skips the command.
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Say nothing on stderr when the command is skipped (--once-per: the slot already ran)
    /// or when the lock is lost after the command finished (--min-hold); errors and the
    /// exit code still tell.
    #[arg(short, long)]
    pub quiet: bool,
    /// Keep the lock at least this long from the start of `dls lock`, even if the command
    /// finishes sooner (dls lock then exits when it has passed), so hosts whose cron fires
    /// a few seconds apart still skip. SIGINT/SIGTERM release it early.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub min_hold: Option<Duration>,
    /// After a lost lock, how long the command has to exit after SIGTERM before SIGKILL. The
    /// lock is declared lost this long before the lease's renew deadline, so SIGKILL comes
    /// before the server can expire the lease: at most the --ttl less a margin (1% and up to
    /// 1s) less a third of it for heartbeats (8.85s for --ttl 15s; a larger grace is refused)
    /// [default: 5s, or the largest the --ttl allows when that is less].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub kill_grace: Option<Duration>,
    /// Run the command at most once per schedule slot of this period (like 5m, 1h, 24h;
    /// slots aligned to the Unix epoch by the cluster's clock, not this host's): exit 0
    /// without running it when the slot already ran on any host. Needs every node of the
    /// cluster upgraded to a version that knows it.
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration, conflicts_with_all = ["shared", "permits"])]
    pub once_per: Option<Duration>,
    /// With --once-per: a slot whose run failed (non-zero exit) or was lost may run again.
    /// Off by default: a failed run may have done part of its work.
    #[arg(long, requires = "once_per")]
    pub retry_failed: bool,
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key.
    pub key: String,
    /// The command to run and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// What to run when the key is a semaphore of `permits` permits and was asked for with
/// another count or as a lock: the same command with `--permits` (in the server's API words
/// it is "mode SEMAPHORE and permits N", which names nothing a CLI user can type).
fn semaphore_advice(args: &LockArgs, permits: u32) -> String {
    format!(
        "{}/{} is a semaphore with {permits} permits: run `dls lock --permits {permits} {} {} -- {}`, \
         or use another key",
        args.namespace,
        args.key,
        args.namespace,
        args.key,
        args.command.join(" ")
    )
}

/// Parses `500ms`, `30s`, `5m`, `1h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{text:?} is not a duration like 500ms, 30s or 5m"))?;
    let secs = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        u => return Err(format!("unknown unit {u:?} in {text:?}: use ms, s, m or h")),
    };
    if !secs.is_finite() || !(0.0..=86_400.0 * 365.0).contains(&secs) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs the command under the lock; returns the exit code for `dls` to end with.
pub async fn run(args: LockArgs) -> Result<i32, CliError> {
    // --min-hold counts from here: hosts whose cron fires together start together.
    let started = Instant::now();
    // Installed first: from here on SIGINT/SIGTERM no longer kill `dls`, so the transaction
    // is always ended (or forwarded to the command).
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| CliError::failure(format!("signal handler: {e}")))?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| CliError::failure(format!("signal handler: {e}")))?;

    if let Some(why) = args.once_per.and_then(once_per_refusal) {
        return Err(CliError::usage(format!("--once-per: {why}")));
    }
    let ttl_ms = lease_ms(args.ttl)?;
    if let Some(wait) = args.wait_timeout.filter(|w| *w > MAX_DURATION) {
        return Err(CliError::usage(format!("--wait-timeout {wait:?} is too long: at most 1h")));
    }
    let budget = lease_budget(Duration::from_millis(ttl_ms), args.kill_grace)?;
    let client = args.cluster.client().await?;
    // Begins with the acquire below, in the same request.
    let tx = client.transaction(
        TransactionOptions::new()
            .with_timeout_ms(ttl_ms)
            .with_stop_grace(budget.stop_grace())
            .with_name(transaction_name(&args.namespace, &args.key, &args.command[0])),
    )?;
    let mode = if args.shared { LockMode::SharedRead } else { LockMode::Exclusive };
    let wait_ms = match (args.wait_timeout, args.skip_if_locked) {
        (Some(wait), _) => wait.as_millis() as u64,
        (None, true) => TRY_ONCE_WAIT_MS,
        (None, false) => DEFAULT_WAIT.as_millis() as u64,
    };
    let opts = AcquireOptions::new().with_timeout_ms(wait_ms);
    let acquire = async {
        match args.permits {
            Some(n) => tx.acquire_permit(&args.namespace, &args.key, n, opts).await,
            None => tx.acquire_lock(&args.namespace, &args.key, mode, opts).await,
        }
    };
    let lock = tokio::select! {
        r = acquire => r,
        _ = sigint.recv() => { let _ = tx.abort().await; return Ok(128 + 2); }
        _ = sigterm.recv() => { let _ = tx.abort().await; return Ok(128 + 15); }
    };
    let lock = match lock {
        Ok(lock) => lock,
        Err(Error::LockTimeout { .. }) => {
            let _ = tx.abort().await;
            let held = match args.permits {
                Some(n) => format!("every one of the {n} permits of "),
                None => String::new(),
            };
            let what = match wait_ms {
                TRY_ONCE_WAIT_MS => format!("{held}{}/{} is locked", args.namespace, args.key),
                ms => format!(
                    "{held}{}/{} is locked (not acquired within {:?})",
                    args.namespace,
                    args.key,
                    Duration::from_millis(ms)
                ),
            };
            if args.skip_if_locked {
                // Every losing host skips on every run: only -v says so.
                if args.verbose {
                    eprintln!("dls: {what}; skipping the command");
                }
                return Ok(0);
            }
            eprintln!("dls: {what}");
            return Ok(EXIT_LOCK_BUSY);
        }
        Err(Error::InvalidArgument { semaphore_permits: Some(n), .. }) if args.permits != Some(n) => {
            let _ = tx.abort().await;
            return Err(CliError::usage(semaphore_advice(&args, n)));
        }
        Err(e) => {
            let _ = tx.abort().await;
            return Err(e.into());
        }
    };

    let claim = match args.once_per {
        Some(period) => match claim_slot(&tx, &args, period).await? {
            Some(claim) => Some(claim),
            None => return Ok(0),
        },
        None => None,
    };
    let mut command = Command::new(&args.command[0]);
    if let Some(claim) = &claim {
        command.env("DLS_SLOT", claim.slot.to_string()).env("DLS_SLOT_ATTEMPT", claim.attempt.to_string());
    }
    let mut child = match command
        .args(&args.command[1..])
        .env("DLS_FENCING_TOKEN", lock.fencing_token.to_string())
        .env("DLS_NAMESPACE", &args.namespace)
        .env("DLS_KEY", &args.key)
        .env("DLS_TRANSACTION_ID", tx.id().to_string())
        .stdin(Stdio::inherit())
        // Its own process group: a lost lock stops whatever the command started as well.
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_CANNOT_RUN };
            if let Some(claim) = &claim {
                // The slot's run failed before it started: recorded as such, not left to
                // look lost.
                let _ = tx.finish_slot(claim, SlotOutcome::Failed { exit_code: Some(code) }).await;
            }
            let _ = tx.abort().await;
            eprintln!("dls: cannot run {:?}: {e}", args.command[0]);
            return Ok(code);
        }
    };
    let pid = child.id().unwrap_or(0);

    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = sigint.recv() => send_signal(pid, "INT").await,
            _ = sigterm.recv() => send_signal(pid, "TERM").await,
            reason = tx.lost() => {
                // SIGKILL at the renew deadline at the latest, whatever the grace (the
                // deadline no longer moves once the lock is lost).
                let now = Instant::now();
                let kill_at = tx.renew_deadline().map_or(now, |deadline| deadline.min(now + budget.stop_grace()));
                eprintln!(
                    "dls: lock {}/{} lost while the command ran ({reason}); stopping it (SIGTERM, SIGKILL after {:?})",
                    args.namespace, args.key, kill_at.saturating_duration_since(now)
                );
                stop_child(&mut child, pid, kill_at).await;
                eprintln!("dls: the command was stopped because the lock was lost; its work may be incomplete");
                return Ok(EXIT_LOCK_LOST);
            }
        }
    };
    let code = exit_code(status.map_err(|e| CliError::failure(format!("waiting for the command: {e}")))?);
    if let Some(claim) = &claim {
        // Recorded while the lock is still held: a run whose lock goes first counts as lost.
        let outcome = if code == 0 { SlotOutcome::Succeeded } else { SlotOutcome::Failed { exit_code: Some(code) } };
        match tx.finish_slot(claim, outcome).await {
            Ok(_) => {}
            Err(
                e @ (Error::TransactionLost { .. } | Error::DeadlockVictim { .. } | Error::TransactionNotFound { .. }),
            ) => {
                eprintln!("dls: the command finished but the lock was lost before its run was recorded: {e}");
                return Ok(EXIT_LOCK_LOST);
            }
            Err(e) => {
                let _ = tx.abort().await;
                return Err(e.into());
            }
        }
    }
    if let Some(hold) = args.min_hold {
        // The lock stays held (and heartbeated) after a short job, so a host whose cron fires
        // a little later still finds it held and skips.
        tokio::select! {
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(started + hold)) => {}
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
            reason = tx.lost() => {
                // The command finished under the lock; only the hold was cut short.
                if !args.quiet {
                    eprintln!("dls: lock {}/{} lost during --min-hold ({reason}); the command had finished", args.namespace, args.key);
                }
                return Ok(code);
            }
        }
    }
    match tx.commit().await {
        Ok(()) => Ok(code),
        Err(e @ (Error::TransactionLost { .. } | Error::DeadlockVictim { .. } | Error::TransactionNotFound { .. })) => {
            eprintln!("dls: the command finished but the lock was lost before it was released: {e}");
            Ok(EXIT_LOCK_LOST)
        }
        Err(e) => Err(e.into()),
    }
}

/// The shortest lease the server takes: heartbeats every third of it must make it.
const MIN_TTL: Duration = Duration::from_millis(100);
/// The longest lease or wait the server takes; longer is almost surely a unit mistake.
const MAX_DURATION: Duration = Duration::from_secs(3600);

/// `--ttl` in milliseconds, or the usage error naming the allowed range: a lease silently
/// made longer or shorter than asked would free the lock at a time nobody chose.
fn lease_ms(ttl: Duration) -> Result<u64, CliError> {
    if !(MIN_TTL..=MAX_DURATION).contains(&ttl) {
        return Err(CliError::usage(format!("--ttl {ttl:?} is out of range: the lease must be 100ms to 1h")));
    }
    Ok(ttl.as_millis() as u64)
}

/// The longest transaction name the server takes, in bytes (as a namespace or a key).
const MAX_TRANSACTION_NAME: usize = 256;

/// The transaction's name, for `dls locks` and the event log: `dls lock NS/KEY: COMMAND`,
/// cut (on a character boundary) to what the server takes and with control characters
/// replaced. The name is only a label: a namespace or key the server takes must never be
/// refused because the name that embeds it is longer, and a bad namespace or key is then
/// refused by its own name.
fn transaction_name(namespace: &str, key: &str, command: &str) -> String {
    let full: String = format!("dls lock {namespace}/{key}: {command}")
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if full.len() <= MAX_TRANSACTION_NAME {
        return full;
    }
    let cut = MAX_TRANSACTION_NAME - '…'.len_utf8();
    let end = (0..=cut).rev().find(|&i| full.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &full[..end])
}

/// Why `--once-per` cannot be used, or None (the server's bounds, checked before anything
/// starts).
fn once_per_refusal(period: Duration) -> Option<String> {
    caerus_server::locks::invalid_slot_period(u64::try_from(period.as_millis()).unwrap_or(u64::MAX))
}

/// Claims the slot for `--once-per`: the claim to run it under, or None when the slot
/// already has a run (said on stderr; the transaction is ended).
async fn claim_slot(
    tx: &caerus_core::Transaction,
    args: &LockArgs,
    period: Duration,
) -> Result<Option<SlotClaim>, CliError> {
    let claim = match tx.claim_slot(&args.namespace, &args.key, period, args.retry_failed).await {
        Ok(claim) => claim,
        Err(e) => {
            let _ = tx.abort().await;
            return Err(e.into());
        }
    };
    if claim.run {
        return Ok(Some(claim));
    }
    let _ = tx.commit().await;
    let how = match &claim.last_run {
        Some(run) => format!(
            "{} by {:?} (transaction {}, attempt {}{})",
            run.state.as_str().to_lowercase(),
            run.transaction_name,
            run.transaction_id,
            run.attempt,
            run.exit_code.map(|c| format!(", exit {c}")).unwrap_or_default()
        ),
        None => "already".to_string(),
    };
    let retry = match claim.last_run.as_ref().map(|r| r.state) {
        Some(caerus_core::SlotRunState::Failed | caerus_core::SlotRunState::Lost) if !args.retry_failed => {
            "; --retry-failed would run it again"
        }
        _ => "",
    };
    if !args.quiet {
        eprintln!(
            "dls: slot {} of {}/{} (every {:?}) ran {how}; skipping the command{retry}",
            claim.slot, args.namespace, args.key, period
        );
    }
    Ok(None)
}

/// The lease's budget for `--kill-grace`, or the usage error naming the largest grace the
/// lease allows. Without the flag: [`DEFAULT_KILL_GRACE`], or less if the lease is short.
fn lease_budget(ttl: Duration, kill_grace: Option<Duration>) -> Result<LeaseBudget, CliError> {
    let Some(kill_grace) = kill_grace else {
        return Ok(LeaseBudget::new(ttl, DEFAULT_KILL_GRACE.min(LeaseBudget::max_stop_grace(ttl)))?);
    };
    LeaseBudget::new(ttl, kill_grace).map_err(|_| {
        let max = LeaseBudget::max_stop_grace(ttl);
        CliError::usage(format!(
            "--kill-grace {kill_grace:?} does not fit --ttl {ttl:?}: the command must be killed {:?} before the \
             server can expire the lease, and heartbeats need a third of it; the largest --kill-grace for \
             --ttl {ttl:?} is {max:?} (or raise --ttl)",
            LeaseBudget::margin(ttl),
        ))
    })
}

/// SIGTERM to the command's process group, then SIGKILL at `kill_at` if the command is still
/// there.
#[cfg(unix)]
async fn stop_child(child: &mut Child, pid: u32, kill_at: Instant) {
    let started = Instant::now();
    send_signal(pid, "TERM").await;
    if tokio::time::timeout_at(tokio::time::Instant::from_std(kill_at), child.wait()).await.is_err() {
        // The command first (no process to start), then the rest of its group; the command
        // is not reaped before, so its group id cannot be reused in between.
        let _ = child.start_kill();
        send_signal(pid, "KILL").await;
        eprintln!(
            "dls: the command did not exit within {:?} of SIGTERM; sent SIGKILL",
            kill_at.saturating_duration_since(started)
        );
        let _ = child.wait().await;
    }
}

/// Windows: the command and what it started are asked to close (`taskkill /T`), then ended
/// (`taskkill /F /T`, before the command's own handle is killed: /T finds the others through it).
#[cfg(windows)]
async fn stop_child(child: &mut Child, pid: u32, kill_at: Instant) {
    let started = Instant::now();
    send_signal(pid, "TERM").await;
    if tokio::time::timeout_at(tokio::time::Instant::from_std(kill_at), child.wait()).await.is_err() {
        send_signal(pid, "KILL").await;
        let _ = child.start_kill();
        eprintln!(
            "dls: the command did not exit within {:?} of being asked to close; ended it",
            kill_at.saturating_duration_since(started)
        );
        let _ = child.wait().await;
    }
}

/// Sends a signal to the command's process group (its pid: it leads the group) with
/// kill(1): the workspace forbids `unsafe`, so no direct kill(2).
#[cfg(unix)]
async fn send_signal(pid: u32, signal: &str) {
    if pid == 0 {
        return;
    }
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pid}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(e) = sent {
        eprintln!("dls: cannot send SIG{signal} to the command (pid {pid}): {e}");
    }
}

/// The shell convention: the exit code, or 128+N after signal N.
#[cfg(unix)]
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Windows: the exit code (a killed process has one too).
#[cfg(windows)]
fn exit_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_grace_fits_the_ttl_and_a_grace_that_does_not_is_refused() {
        let secs = Duration::from_secs;
        assert_eq!(lease_budget(secs(15), None).unwrap().stop_grace(), DEFAULT_KILL_GRACE);
        // A 5 s lease allows at most 2.28 s: the default shrinks to it.
        let short = lease_budget(secs(5), None).unwrap();
        assert_eq!(short.stop_grace(), LeaseBudget::max_stop_grace(secs(5)));
        assert!(short.stop_grace() < DEFAULT_KILL_GRACE);
        let err = lease_budget(secs(15), Some(secs(10))).unwrap_err();
        assert_eq!(err.exit_code, 2);
        assert!(err.message.contains("the largest --kill-grace for --ttl 15s is 8.85s"), "{}", err.message);
    }

    #[test]
    fn the_transaction_name_fits_whatever_the_key() {
        assert_eq!(transaction_name("jobs", "nightly", "./r.sh"), "dls lock jobs/nightly: ./r.sh");
        assert_eq!(transaction_name("a\tb", "k", "x"), "dls lock a?b/k: x");
        for key in ["k".repeat(240), "é".repeat(125), "日".repeat(85)] {
            let name = transaction_name("jobs", &key, "sh");
            assert!(name.len() <= MAX_TRANSACTION_NAME && name.ends_with('…'), "{} bytes: {name}", name.len());
            assert!(name.starts_with("dls lock jobs/"));
        }
    }

    #[test]
    fn a_ttl_out_of_range_is_refused_not_clamped() {
        assert_eq!(lease_ms(Duration::from_secs(15)).unwrap(), 15_000);
        assert_eq!(lease_ms(MIN_TTL).unwrap(), 100);
        assert_eq!(lease_ms(MAX_DURATION).unwrap(), 3_600_000);
        for bad in [Duration::from_millis(10), Duration::from_secs(7200)] {
            let e = lease_ms(bad).unwrap_err();
            assert_eq!(e.exit_code, crate::commands::connect::EXIT_USAGE);
            assert!(e.message.contains("100ms to 1h"), "{}", e.message);
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("").is_err());
    }
}

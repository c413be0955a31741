//! At most once per schedule slot, decided by the cluster (issue 39 item 2): `dls lock
//! --once-per` "hosts" (processes), one whose clock is a minute behind and one whose cron
//! fired after the first run finished, run the job once per slot; a failed run's slot runs
//! again only with --retry-failed; a run whose lock is lost is recorded LOST; `dls locks`
//! and the HTTP API show the last run; the slot-record bounds refuse with
//! RESOURCE_EXHAUSTED naming their flags. `--min-hold` alone let a host whose clock was a
//! minute off run the slot again (the finding).
//!
//! The skewed host needs libfaketime (Debian `faketime`, installed by `make deps`); that
//! part is skipped with a message without it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use caerus_core::{
    AcquireOptions, ClientConfig, DlsClient, Error, LockMode, SlotOutcome, SlotRunState, TransactionOptions,
};
use caerus_testkit::{add_key, dls_bin, eventually_async, grant_many, patient_client, Cluster, PATIENCE};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// What a `dls` run printed on stderr and how it ended.
#[derive(Debug)]
struct Run {
    code: i32,
    stderr: String,
}

fn dls_command(cluster: &Cluster, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(dls_bin());
    cmd.args(args)
        .env_remove("CAERUS_API_KEY")
        .env("DLS_ENDPOINTS", cluster.endpoints().join(","))
        .env("DLS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn finish(child: tokio::process::Child) -> (Run, String) {
    let out = tokio::time::timeout(PATIENCE * 2, child.wait_with_output()).await.expect("dls finished").unwrap();
    let run = Run { code: out.status.code().unwrap_or(-1), stderr: String::from_utf8_lossy(&out.stderr).into_owned() };
    (run, String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn dls(cluster: &Cluster, args: &[&str]) -> Run {
    finish(dls_command(cluster, args).spawn().unwrap()).await.0
}

/// A job that appends its slot and attempt to `runs` and takes `secs` seconds.
fn job(runs: &Path, secs: f64, exit: i32) -> String {
    format!("echo \"$DLS_SLOT $DLS_SLOT_ATTEMPT\" >> {}; sleep {secs}; exit {exit}", runs.display())
}

/// The (slot, attempt) of every run of the job, in order.
fn runs_of(runs: &Path) -> Vec<(u64, u32)> {
    let text = std::fs::read_to_string(runs).unwrap_or_default();
    text.lines()
        .map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().unwrap());
            (f.next().unwrap(), f.next().unwrap() as u32)
        })
        .collect()
}

/// The slot a skipping host was told had run ("slot N of ...").
fn skipped_slot(run: &Run) -> u64 {
    let at = run.stderr.find("dls: slot ").unwrap_or_else(|| panic!("no skip message: {run:?}"));
    run.stderr[at + 10..].split_whitespace().next().unwrap().parse().unwrap()
}

async fn client(cluster: &Cluster, key: Option<&str>) -> DlsClient {
    let config = ClientConfig::new(cluster.endpoints()).with_retry_deadline(PATIENCE);
    let config = match key {
        Some(key) => config.with_api_key(key),
        None => config.without_api_key(),
    };
    DlsClient::connect(config).await.unwrap()
}

#[tokio::test]
async fn three_hosts_one_a_minute_behind_and_one_late_run_the_job_once_per_slot() {
    let cluster = Cluster::start(3).await;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // An hour's slot: the three hosts fire within seconds of each other, well inside it
    // (should a slot boundary still fall in between, each slot must have run once).
    let script = job(&runs, 1.5, 0);
    let args = ["lock", "--once-per", "1h", "jobs", "sync", "--", "sh", "-c", script.as_str()];
    let first = dls_command(&cluster, &args).spawn().unwrap();
    // Its cron fires at the same moment, but its clock is a minute behind: it waits for the
    // lock, then finds the slot taken by the cluster's clock, whatever its own says.
    let skewed = Path::new(LIBFAKETIME).exists().then(|| {
        let mut cmd = dls_command(&cluster, &args);
        cmd.env("LD_PRELOAD", LIBFAKETIME)
            .env("FAKETIME", "-1m")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .env("FAKETIME_NO_CACHE", "1");
        cmd.spawn().unwrap()
    });
    if skewed.is_none() {
        eprintln!("SKIPPED the skewed host: no {LIBFAKETIME} (apt-get install faketime, or make deps)");
    }
    let (first, _) = finish(first).await;
    assert_eq!(first.code, 0, "{first:?}");
    // Its cron fired late: after the first run finished.
    let late = dls(&cluster, &args).await;
    assert_eq!(late.code, 0, "{late:?}");
    let mut seen = vec![runs_of(&runs)[0].0];
    if let Some(skewed) = skewed {
        let (skewed, _) = finish(skewed).await;
        assert_eq!(skewed.code, 0, "{skewed:?}");
        if !skewed.stderr.contains("skipping") {
            seen.push(runs_of(&runs).last().unwrap().0);
        } else {
            seen.push(skipped_slot(&skewed));
        }
    }
    seen.push(if late.stderr.contains("skipping") { skipped_slot(&late) } else { runs_of(&runs).last().unwrap().0 });

    let ran = runs_of(&runs);
    let mut per_slot: BTreeMap<u64, usize> = BTreeMap::new();
    for (slot, _) in &ran {
        *per_slot.entry(*slot).or_default() += 1;
    }
    assert!(per_slot.values().all(|n| *n == 1), "a slot ran twice: {ran:?} (hosts saw slots {seen:?})");
    if seen.iter().all(|s| *s == seen[0]) {
        assert_eq!(ran.len(), 1, "three hosts in one slot ran the job {} times: {ran:?}", ran.len());
        assert!(late.stderr.contains("ran succeeded"), "{late:?}");
    }

    // The cluster shows the last run: who, when, how it ended.
    let c = client(&cluster, None).await;
    let last = c.list_slot_runs("jobs").await.unwrap();
    assert_eq!(last.len(), 1, "{last:?}");
    let r = &last[0];
    assert_eq!((r.key.as_str(), r.state, r.exit_code, r.attempt), ("sync", SlotRunState::Succeeded, Some(0), 1));
    assert_eq!(r.period, Duration::from_secs(3600));
    assert!(r.transaction_name.starts_with("dls lock jobs/sync"), "{r:?}");
    assert!(r.finished_at_ms >= r.started_at_ms && r.started_at_ms > 0, "{r:?}");
    let (_, listed) = finish(dls_command(&cluster, &["locks", "--namespace", "jobs"]).spawn().unwrap()).await;
    assert!(listed.contains("last run per schedule slot"), "{listed}");
    assert!(listed.contains("jobs/sync") && listed.contains("SUCCEEDED"), "{listed}");

    // The same over HTTP.
    let body =
        http_get(&cluster.http_addr(cluster.wait_for_leader(PATIENCE).await), "/api/v1/locks?namespace_prefix=jobs");
    assert!(body.contains("\"slot_runs\":[{"), "{body}");
    assert!(body.contains("\"state\":\"SUCCEEDED\"") && body.contains("\"exit_code\":0"), "{body}");
}

/// A plain HTTP/1.1 GET without a key; the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

#[tokio::test]
async fn a_failed_slot_runs_again_only_with_retry_failed() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let fail = job(&runs, 0.0, 3);
    let ok = job(&runs, 0.0, 0);
    let once = |script: &str| {
        ["lock", "--once-per", "1h", "jobs", "report", "--", "sh", "-c", script].map(String::from).to_vec()
    };
    let failed = dls(&cluster, &once(&fail).iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(failed.code, 3, "{failed:?}");
    let skipped = dls(&cluster, &once(&ok).iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(skipped.code, 0, "{skipped:?}");
    assert!(skipped.stderr.contains("ran failed") && skipped.stderr.contains("--retry-failed"), "{skipped:?}");
    let mut retry = once(&ok);
    retry.insert(1, "--retry-failed".into());
    let retried = dls(&cluster, &retry.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(retried.code, 0, "{retried:?}");
    let ran = runs_of(&runs);
    assert_eq!(ran.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 2], "{ran:?}");
    if ran[0].0 == ran[1].0 {
        // Succeeded now: even --retry-failed skips it.
        let again = dls(&cluster, &retry.iter().map(String::as_str).collect::<Vec<_>>()).await;
        assert!(again.code == 0 && again.stderr.contains("ran succeeded"), "{again:?}");
        assert_eq!(runs_of(&runs).len(), 2);
    }
    let usage = dls(&cluster, &["lock", "--once-per", "10ms", "jobs", "report", "--", "true"]).await;
    assert_eq!(usage.code, 2, "{usage:?}");
    assert!(usage.stderr.contains("--once-per"), "{usage:?}");
}

#[tokio::test]
async fn a_run_whose_lock_is_lost_is_recorded_lost_and_its_slot_is_not_run_again_by_default() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster, None).await;
    let period = Duration::from_secs(3600);
    let tx = c.begin_transaction(TransactionOptions::new().with_timeout_ms(1_000)).await.unwrap();
    tx.acquire_lock("jobs", "billing", LockMode::Exclusive, AcquireOptions::new()).await.unwrap();
    let claim = tx.claim_slot("jobs", "billing", period, false).await.unwrap();
    assert!(claim.run && claim.attempt == 1, "{claim:?}");
    // The host stops heartbeating mid-job: its lease lapses on the server.
    tx.abandon();
    let lost = eventually_async(PATIENCE, "the run to be recorded lost", || async {
        let runs = c.list_slot_runs("jobs").await.ok()?;
        runs.into_iter().find(|r| r.state == SlotRunState::Lost)
    })
    .await;
    assert!(lost.reason.contains("lease expired"), "{lost:?}");

    let next = c.begin_transaction(TransactionOptions::new().with_timeout_ms(10_000)).await.unwrap();
    // Claiming needs the lock held EXCLUSIVE.
    let refused = next.claim_slot("jobs", "billing", period, false).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidArgument { .. }), "{refused:?}");
    next.acquire_lock("jobs", "billing", LockMode::Exclusive, AcquireOptions::new()).await.unwrap();
    let skip = next.claim_slot("jobs", "billing", period, false).await.unwrap();
    if skip.slot == claim.slot {
        assert!(!skip.run, "{skip:?}");
        assert_eq!(skip.last_run.as_ref().map(|r| r.state), Some(SlotRunState::Lost), "{skip:?}");
        let retry = next.claim_slot("jobs", "billing", period, true).await.unwrap();
        assert!(retry.run && retry.attempt == 2, "{retry:?}");
        let done = next.finish_slot(&retry, SlotOutcome::Failed { exit_code: Some(9) }).await.unwrap();
        assert_eq!((done.state, done.exit_code), (SlotRunState::Failed, Some(9)));
    }
    next.commit().await.unwrap();
}

#[tokio::test]
async fn slot_records_are_bounded_per_node_and_per_api_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let (a, b) = (add_key(&file, "a", &[], false), add_key(&file, "b", &[], false));
    let flags =
        ["--api-keys-file", file.to_str().unwrap(), "--max-slot-records", "3", "--max-slot-records-per-api-key", "2"];
    let cluster = Cluster::start_full(1, &flags, Some(a.clone())).await;
    let (ca, cb) = (client(&cluster, Some(&a)).await, client(&cluster, Some(&b)).await);
    let hour = Duration::from_secs(3600);
    let claim = |c: &DlsClient, key: &'static str| {
        let c = c.clone();
        async move {
            let tx = c.begin_transaction(TransactionOptions::new().with_timeout_ms(10_000)).await.unwrap();
            tx.acquire_lock("jobs", key, LockMode::Exclusive, AcquireOptions::new()).await.unwrap();
            let claimed = tx.claim_slot("jobs", key, hour, false).await;
            if let Ok(claim) = &claimed {
                if claim.run {
                    tx.finish_slot(claim, SlotOutcome::Succeeded).await.unwrap();
                }
            }
            tx.commit().await.unwrap();
            claimed
        }
    };
    claim(&ca, "a1").await.unwrap();
    claim(&ca, "a2").await.unwrap();
    // Key a has its share: a third record of its own is refused, nothing recorded.
    let over_share = claim(&ca, "a3").await.unwrap_err();
    assert!(
        matches!(&over_share, Error::ResourceExhausted { message, .. } if message.contains("--max-slot-records-per-api-key")),
        "{over_share:?}"
    );
    // Its own keys still answer (no new record), and key b is not refused by a's records.
    assert!(!claim(&ca, "a1").await.unwrap().run);
    claim(&cb, "b1").await.unwrap();
    // The node's bound: three records in all.
    let full = claim(&cb, "b2").await.unwrap_err();
    assert!(
        matches!(&full, Error::ResourceExhausted { message, .. } if message.contains("--max-slot-records ")),
        "{full:?}"
    );
}

#[tokio::test]
async fn a_slot_record_survives_a_new_leader_and_a_restart_from_a_snapshot() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "10"]).await;
    let c = patient_client(cluster.endpoints()).await;
    let hour = Duration::from_secs(3600);
    let tx = c.begin_transaction(TransactionOptions::new().with_timeout_ms(10_000)).await.unwrap();
    tx.acquire_lock("jobs", "nightly", LockMode::Exclusive, AcquireOptions::new()).await.unwrap();
    let claim = tx.claim_slot("jobs", "nightly", hour, false).await.unwrap();
    assert!(claim.run, "{claim:?}");
    tx.finish_slot(&claim, SlotOutcome::Succeeded).await.unwrap();
    tx.commit().await.unwrap();
    // Enough entries after it that a snapshot holds the record and the log before it goes.
    grant_many(&c, "filler", 25, 0).await;

    // Another leader: the record was replicated.
    let leader = cluster.wait_for_leader(PATIENCE).await;
    cluster.kill(leader);
    let again = claim_after_restart(&cluster, hour).await;
    assert_eq!(again.1.as_ref().map(|r| r.state), Some(SlotRunState::Succeeded), "{again:?}");
    // Every node restarted: from their snapshot files (section "slot-runs") and log tails.
    cluster.kill_all();
    cluster.start_all().unwrap();
    let restarted = claim_after_restart(&cluster, hour).await;
    assert_eq!(restarted.1.as_ref().map(|r| (r.state, r.transaction_id)), Some((SlotRunState::Succeeded, tx.id())));
    if restarted.0 == claim.slot {
        assert!(!restarted.2, "slot {} ran again after the restart", claim.slot);
    }
}

/// A fresh host's claim of jobs/nightly once a leader serves: (slot, its last run, run?).
async fn claim_after_restart(cluster: &Cluster, period: Duration) -> (u64, Option<caerus_core::SlotRun>, bool) {
    cluster.wait_for_leader(PATIENCE).await;
    let c = patient_client(cluster.endpoints()).await;
    let tx = c.begin_transaction(TransactionOptions::new().with_timeout_ms(10_000)).await.unwrap();
    tx.acquire_lock("jobs", "nightly", LockMode::Exclusive, AcquireOptions::new()).await.unwrap();
    let claim = tx.claim_slot("jobs", "nightly", period, false).await.unwrap();
    if claim.run {
        tx.finish_slot(&claim, SlotOutcome::Succeeded).await.unwrap();
    }
    tx.commit().await.unwrap();
    let last = c.list_slot_runs("jobs").await.unwrap().into_iter().next();
    (claim.slot, if claim.run { last } else { claim.last_run }, claim.run)
}

#[tokio::test]
async fn dls_lock_whose_lock_is_revoked_mid_run_records_the_slot_lost() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let (txn_file, runs) = (dir.path().join("txn"), dir.path().join("runs"));
    // The job tells its transaction, then works for a long time.
    let (r, t) = (runs.display(), txn_file.display());
    let slow = format!(
        "echo \"$DLS_SLOT $DLS_SLOT_ATTEMPT\" >> {r}; echo $DLS_TRANSACTION_ID > {t}.tmp; mv {t}.tmp {t}; sleep 60"
    );
    let once = |script: &str, retry: bool| {
        let mut args = vec!["lock", "--once-per", "1h", "--kill-grace", "1s"];
        if retry {
            args.push("--retry-failed");
        }
        args.extend(["jobs", "lossy", "--", "sh", "-c"]);
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        args.push(script.to_string());
        args
    };
    let args = once(&slow, false);
    let first = dls_command(&cluster, &args.iter().map(String::as_str).collect::<Vec<_>>()).spawn().unwrap();
    let c = client(&cluster, None).await;
    let txn: u64 = eventually_async(PATIENCE, "the job to start", || async {
        std::fs::read_to_string(&txn_file).ok()?.trim().parse().ok()
    })
    .await;
    // An operator revokes the lock while the job runs: the job is stopped, the slot is LOST.
    c.abort_transaction(txn, "stuck").await.unwrap();
    let (first, _) = finish(first).await;
    assert_eq!(first.code, 76, "{first:?}");
    let lost = c.list_slot_runs("jobs").await.unwrap();
    assert_eq!(lost.iter().map(|r| r.state).collect::<Vec<_>>(), [SlotRunState::Lost], "{lost:?}");
    assert!(lost[0].reason.contains("stuck"), "{lost:?}");

    let quick = job(&runs, 0.0, 0);
    let args = once(&quick, false);
    let skipped = dls(&cluster, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let args = once(&quick, true);
    let retried = dls(&cluster, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!((skipped.code, retried.code), (0, 0), "{skipped:?} {retried:?}");
    let ran = runs_of(&runs);
    if ran.len() == 2 && ran[0].0 == ran[1].0 {
        assert!(skipped.stderr.contains("ran lost") && skipped.stderr.contains("--retry-failed"), "{skipped:?}");
        assert_eq!(ran[1].1, 2, "the retry is attempt 2: {ran:?}");
    }
    assert!(ran.len() <= 3, "{ran:?}");
}

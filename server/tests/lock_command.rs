//! `dls lock NAMESPACE KEY -- COMMAND` against a real single-node server: the command's
//! environment and exit status, the busy exit code, --skip-if-locked and --min-hold, signal
//! forwarding, and a lost lock stopping the command.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, LockMode, TransactionOptions};
use common::{eventually, eventually_async, Cluster, PATIENCE};

/// What a `dls` run printed on stderr and how it ended.
struct Run {
    code: i32,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stderr\n{}", self.code, self.stderr)
    }
}

fn dls_command(cluster: &Cluster, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(caerus_testkit::dls_bin());
    cmd.args(args)
        .env_remove("CAERUS_API_KEY")
        .env_remove("CAERUS_API_KEY_FILE")
        .env("DLS_ENDPOINTS", cluster.endpoints().join(","))
        // The CLI's own default log level: what a user sees.
        .env_remove("DLS_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn finish(child: tokio::process::Child) -> Run {
    let out = tokio::time::timeout(PATIENCE * 2, child.wait_with_output()).await.expect("dls finished").unwrap();
    Run { code: out.status.code().unwrap_or(-1), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

async fn dls(cluster: &Cluster, args: &[&str]) -> Run {
    finish(dls_command(cluster, args).spawn().unwrap()).await
}

async fn client(cluster: &Cluster) -> DlsClient {
    DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_retry_deadline(PATIENCE).without_api_key())
        .await
        .unwrap()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().filter(|s| s.ends_with('\n'))
}

#[tokio::test]
async fn runs_the_command_with_the_lock_in_its_environment_and_returns_its_status() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("env");
    let script =
        format!("echo \"$DLS_FENCING_TOKEN $DLS_NAMESPACE $DLS_KEY $DLS_TRANSACTION_ID\" > {}; exit 7", out.display());
    let run = dls(&cluster, &["lock", "jobs", "nightly", "--", "sh", "-c", &script]).await;
    assert_eq!(run.code, 7, "{run:?}");
    let env = read(&out).expect("the command ran");
    let fields: Vec<&str> = env.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{env}");
    let token: u64 = fields[0].parse().unwrap();
    assert!(token > 0);
    assert_eq!((fields[1], fields[2]), ("jobs", "nightly"));
    let txn: u64 = fields[3].parse().unwrap();
    assert!(txn > 0);

    // Released at exit: the next run gets the lock at once, with a higher token.
    let run = dls(&cluster, &["lock", "--wait-timeout", "1s", "jobs", "nightly", "--", "sh", "-c", &script]).await;
    assert_eq!(run.code, 7, "{run:?}");
    let second: u64 = read(&out).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(second > token, "{second} > {token}");

    // Success, death by signal, and a missing command.
    assert_eq!(dls(&cluster, &["lock", "jobs", "nightly", "--", "true"]).await.code, 0);
    assert_eq!(dls(&cluster, &["lock", "jobs", "nightly", "--", "sh", "-c", "kill -KILL $$"]).await.code, 128 + 9);
    let run = dls(&cluster, &["lock", "jobs", "nightly", "--", "/no/such/command"]).await;
    assert_eq!(run.code, 127, "{run:?}");
    // Shared locks coexist: a shared run while another shared holder exists.
    let c = client(&cluster).await;
    let tx = c.begin_transaction(TransactionOptions::default()).await.unwrap();
    tx.acquire_lock("jobs", "nightly", LockMode::SharedRead, AcquireOptions::default()).await.unwrap();
    let run = dls(&cluster, &["lock", "--shared", "--wait-timeout", "1s", "jobs", "nightly", "--", "true"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_held_lock_gives_exit_75_or_a_skip_with_skip_if_locked() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("echo ran > {}", marker.display());
    let c = client(&cluster).await;
    let holder = c.begin_transaction(TransactionOptions::default()).await.unwrap();
    holder.acquire_lock("jobs", "nightly", LockMode::Exclusive, AcquireOptions::default()).await.unwrap();

    let run = dls(&cluster, &["lock", "--wait-timeout", "300ms", "jobs", "nightly", "--", "sh", "-c", &script]).await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(run.stderr.contains("is locked"), "{run:?}");
    let run = dls(
        &cluster,
        &["lock", "--skip-if-locked", "-v", "--wait-timeout", "300ms", "jobs", "nightly", "--", "sh", "-c", &script],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("skipping"), "{run:?}");
    assert!(!marker.exists(), "the command must not run without the lock");

    // A waiter that gets the lock within its wait timeout runs the command.
    let waiter =
        dls_command(&cluster, &["lock", "--wait-timeout", "20s", "jobs", "nightly", "--", "sh", "-c", &script])
            .spawn()
            .unwrap();
    eventually_async(PATIENCE, "the waiting dls lock to queue for jobs/nightly", || async {
        let locks = c.list_locks("jobs").await.ok()?;
        locks.iter().any(|l| l.key == "nightly" && !l.waiters.is_empty()).then_some(())
    })
    .await;
    assert!(!marker.exists(), "the command must not run while it waits");
    holder.commit().await.unwrap();
    let run = finish(waiter).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(marker.exists());
}

/// `--permits 2`: at most two commands run at once across hosts; a third waits for a permit
/// (or skips with --skip-if-locked), and each command sees its own fencing token.
#[tokio::test]
async fn permits_let_n_commands_run_at_once() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tokens");
    let job = format!("echo $DLS_FENCING_TOKEN >> {}; sleep 2", log.display());
    let args = |extra: &[&'static str]| {
        let mut a = vec!["lock", "--permits", "2"];
        a.extend_from_slice(extra);
        a.extend(["backups", "slots", "--", "sh", "-c"]);
        a
    };
    let mut running = Vec::new();
    for _ in 0..2 {
        let mut a = args(&[]);
        a.push(&job);
        running.push(dls_command(&cluster, &a).spawn().unwrap());
    }
    eventually(PATIENCE, "two commands to run", || read(&log).filter(|t| t.lines().count() == 2)).await;
    let mut a = args(&["--skip-if-locked", "--verbose"]);
    a.push(&job);
    let third = dls(&cluster, &a).await;
    assert_eq!(third.code, 0, "{third:?}");
    assert!(third.stderr.contains("every one of the 2 permits of backups/slots is locked; skipping"), "{third:?}");
    let mut a = args(&["--wait-timeout", "20s"]);
    a.push(&job);
    let waiter = dls_command(&cluster, &a).spawn().unwrap();
    for child in running {
        assert_eq!(finish(child).await.code, 0);
    }
    assert_eq!(finish(waiter).await.code, 0, "the third ran once a permit was free");
    let tokens: Vec<u64> = read(&log).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens[0] != tokens[1] && tokens[2] > tokens[0].max(tokens[1]), "a token each: {tokens:?}");
    let run = dls(&cluster, &["lock", "--permits", "2", "--shared", "backups", "slots", "--", "true"]).await;
    assert_eq!(run.code, 2, "--shared and --permits do not mix: {run:?}");
}

/// The README's crontab line for `job`.
fn cron(job: &str) -> Vec<&str> {
    vec!["lock", "--skip-if-locked", "--ttl", "30s", "reports", "nightly", "--", "sh", "-c", job]
}

/// The README's crontab on two hosts: `dls lock --skip-if-locked` on the second host,
/// started while the first runs a 3 s job, skips at once instead of waiting and running
/// the job again after it.
#[tokio::test]
async fn skip_if_locked_skips_at_once_while_another_host_runs_the_job() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let job = |host: &str| format!("echo {host} >> {}; sleep 3", runs.display());
    let (job_a, job_b) = (job("A"), job("B"));
    let mut first = dls_command(&cluster, &cron(&job_a)).spawn().unwrap();
    eventually(PATIENCE, "the first host's job to start", || read(&runs)).await;
    let second = dls(&cluster, &cron(&job_b)).await;
    assert_eq!(second.code, 0, "{second:?}");
    // Silent: cron mails whatever a job prints, and every losing host skips on every run.
    assert_eq!(second.stderr, "", "{second:?}");
    let mut verbose = cron(&job_b);
    verbose.insert(1, "-v");
    let second = dls(&cluster, &verbose).await;
    assert_eq!(second.code, 0, "{second:?}");
    assert!(second.stderr.contains("is locked; skipping"), "-v says why: {second:?}");
    assert!(first.try_wait().unwrap().is_none(), "the second host must not wait for the first one's job");
    let first = finish(first).await;
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(read(&runs).as_deref(), Some("A\n"), "the job ran once");
}

/// With --min-hold the lock outlives a short job, so a host whose cron fires just after the
/// job finished still skips; the first run keeps the command's status and exits when the
/// hold has passed, and the lock is free again after it.
#[tokio::test]
async fn min_hold_keeps_the_lock_after_a_short_job_so_a_late_host_still_skips() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let job = |host: &str, code: i32| format!("echo {host} >> {}; exit {code}", runs.display());
    let started = std::time::Instant::now();
    let first_job = job("A", 3);
    let first = dls_command(
        &cluster,
        &["lock", "--skip-if-locked", "--min-hold", "3s", "reports", "nightly", "--", "sh", "-c", &first_job],
    )
    .spawn()
    .unwrap();
    eventually(PATIENCE, "the first host's job to run", || read(&runs)).await;
    let late_job = job("B", 0);
    let late = dls(&cluster, &["lock", "--skip-if-locked", "reports", "nightly", "--", "sh", "-c", &late_job]).await;
    assert_eq!(late.code, 0, "{late:?}");
    assert_eq!(late.stderr, "", "{late:?}");
    let first = finish(first).await;
    assert_eq!(first.code, 3, "the command's status: {first:?}");
    assert!(started.elapsed() >= Duration::from_secs(3), "the lock is held for --min-hold");
    assert_eq!(read(&runs).as_deref(), Some("A\n"));
    // The hold is over and the lock released: the next run gets it.
    let next_job = job("C", 0);
    let next = dls(&cluster, &["lock", "--skip-if-locked", "reports", "nightly", "--", "sh", "-c", &next_job]).await;
    assert_eq!(next.code, 0, "{next:?}");
    assert_eq!(read(&runs).as_deref(), Some("A\nC\n"));
}

#[tokio::test]
async fn sigterm_and_sigint_are_forwarded_to_the_command() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    for (signal, code) in [("TERM", 3), ("INT", 4)] {
        let ready = dir.path().join(format!("ready-{signal}"));
        let got = dir.path().join(format!("got-{signal}"));
        let script = format!(
            "trap 'echo {signal} > {got}; exit {code}' {signal}; echo ready > {ready}; while true; do sleep 0.05; done",
            got = got.display(),
            ready = ready.display()
        );
        let child = dls_command(&cluster, &["lock", "jobs", "signals", "--", "sh", "-c", &script]).spawn().unwrap();
        let pid = child.id().unwrap();
        eventually(PATIENCE, "the command to start", || read(&ready)).await;
        let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
        assert!(status.unwrap().success());
        let run = finish(child).await;
        assert_eq!(run.code, code, "{run:?}");
        assert_eq!(read(&got).as_deref(), Some(format!("{signal}\n").as_str()));
    }
    // The lock was released both times.
    assert_eq!(dls(&cluster, &["lock", "--wait-timeout", "1s", "jobs", "signals", "--", "true"]).await.code, 0);
}

#[tokio::test]
async fn a_lost_lock_stops_the_command_with_sigterm_then_sigkill() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let endpoints = cluster.endpoints().join(",");
    // First a command that exits on SIGTERM, then one that ignores it (killed after the grace).
    for (trap, expect_term) in [("echo TERM > {got}; exit 0", true), ("echo ignored > {got}", false)] {
        let id_file = dir.path().join(format!("id-{expect_term}"));
        let got = dir.path().join(format!("got-{expect_term}"));
        let trap = trap.replace("{got}", &got.display().to_string());
        let script = format!(
            "trap '{trap}' TERM; echo $DLS_TRANSACTION_ID > {id}; while true; do sleep 0.05; done",
            id = id_file.display()
        );
        let child = dls_command(
            &cluster,
            &["lock", "--ttl", "3s", "--kill-grace", "700ms", "jobs", "lost", "--", "sh", "-c", &script],
        )
        .spawn()
        .unwrap();
        let id = eventually(PATIENCE, "the transaction id", || read(&id_file)).await;
        let abort = dls(&cluster, &["txn", "abort", id.trim(), "--reason", "test", "--endpoints", &endpoints]).await;
        assert_eq!(abort.code, 0, "{abort:?}");
        let started = std::time::Instant::now();
        let run = finish(child).await;
        assert_eq!(run.code, 76, "{run:?}");
        // dls lock's own words first, not the client library's timestamped WARN line.
        assert!(run.stderr.starts_with("dls: lock jobs/lost lost while the command ran"), "{run:?}");
        assert!(read(&got).is_some(), "the command got SIGTERM");
        if !expect_term {
            assert!(run.stderr.contains("SIGKILL"), "{run:?}");
            assert!(started.elapsed() >= Duration::from_millis(600), "waited for the grace period");
        }
    }
}

#[tokio::test]
async fn a_kill_grace_the_lease_cannot_honour_is_refused_naming_the_largest() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let job = format!("touch {}", ran.display());
    // The old defaults: SIGKILL would come 10 s after a loss declared at the end of the lease.
    let run =
        dls(&cluster, &["lock", "--ttl", "15s", "--kill-grace", "10s", "jobs", "grace", "--", "sh", "-c", &job]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("the largest --kill-grace for --ttl 15s is 8.85s"), "{run:?}");
    assert!(!ran.exists(), "nothing ran");
    let run =
        dls(&cluster, &["lock", "--ttl", "15s", "--kill-grace", "8850ms", "jobs", "grace", "--", "sh", "-c", &job])
            .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(ran.exists());
}

/// Nanoseconds since the Unix epoch: the clock the jobs below stamp their actions with.
fn epoch_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Whether process `pid` still runs (a zombie has stopped running).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// The scenario: `dls lock` runs a job that ignores SIGTERM on the raft leader's
/// host, and that host is cut off from the other two nodes (the holder still reaches the
/// old leader, which can no longer confirm its leadership). Another host waits for the
/// lock. The job must be dead before the other host gets the lock, with the default flags
/// and with the largest grace the default lease allows; the margin between the old job's
/// last action and the new holder's grant is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holder_has_killed_its_job_before_another_host_gets_the_lock() {
    use caerus_core::LeaseBudget;
    use common::proxy::{CLIENT_BASE, HARNESS};
    use common::{Proxies, Spec};

    let cluster = Cluster::start_spec(Spec { nodes: 3, proxies: Proxies::Kit, ..Spec::default() }).await;
    let leader = cluster.wait_for_leader(PATIENCE).await;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|&n| n != leader).collect();
    let dir = tempfile::tempdir().unwrap();
    let largest = LeaseBudget::max_stop_grace(Duration::from_secs(15));
    let cases = [
        ("defaults", vec![]),
        ("largest grace", vec!["--kill-grace".to_string(), format!("{}ms", largest.as_millis())]),
    ];

    let mut holders = Vec::new();
    for (i, (case, flags)) in cases.iter().enumerate() {
        let actions = dir.path().join(format!("actions-{i}"));
        let pid_file = dir.path().join(format!("pid-{i}"));
        // Ignores SIGTERM, as a job finishing its current item would, and stamps every action.
        let job = format!(
            "trap '' TERM; echo $$ > {pid}; while true; do date +%s%N >> {actions}; sleep 0.02; done",
            pid = pid_file.display(),
            actions = actions.display()
        );
        let key = format!("cut-{i}");
        let mut args = vec!["lock".to_string()];
        args.extend(flags.iter().cloned());
        args.extend(["jobs".to_string(), key.clone(), "--".into(), "sh".into(), "-c".into(), job]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = dls_command(&cluster, &args).spawn().unwrap();
        // Its connections through the kit's proxies are told apart by its pid.
        cluster.links().set_pid(child.id().unwrap(), CLIENT_BASE + i as u64);
        holders.push((*case, key, actions, pid_file, child));
    }
    let mut jobs = Vec::new();
    for (case, _, actions, pid_file, _) in &holders {
        let pid = eventually(PATIENCE, "the job runs under the lock", || read(pid_file)).await;
        eventually(PATIENCE, "the job's first action", || read(actions)).await;
        jobs.push(pid.trim().parse::<u32>().unwrap_or_else(|e| panic!("{case}: pid {pid:?}: {e}")));
    }

    // Cut the leader's host off: the leader from its peers, the holders from the other nodes.
    cluster.links().partition(&[leader], &others);
    for i in 0..holders.len() as u64 {
        for &n in &others {
            cluster.links().block(CLIENT_BASE + i, n);
        }
    }
    cluster.links().block(HARNESS, leader);

    // Another host, reaching only the other two nodes, waits for each lock.
    let other_host = DlsClient::connect(
        ClientConfig::new(others.iter().map(|&n| cluster.node(n).listen.clone()))
            .with_retry_deadline(PATIENCE)
            .without_api_key(),
    )
    .await
    .unwrap();
    let waits = holders.iter().zip(&jobs).map(|((_, key, ..), &job)| {
        let c = other_host.clone();
        let key = key.clone();
        async move {
            let tx = c.transaction(TransactionOptions::default()).unwrap();
            let lock =
                tx.acquire_lock("jobs", &key, LockMode::Exclusive, AcquireOptions::new().with_timeout_ms(60_000));
            let lock = lock.await.unwrap_or_else(|e| panic!("{key}: {e}"));
            (epoch_ns(), alive(job), tx, lock)
        }
    });
    let grants = futures::future::join_all(waits).await;

    let mut outcomes = Vec::new();
    for ((case, _, actions, _, child), (granted_ns, job_alive, ..)) in holders.into_iter().zip(grants) {
        // The old holder has exited (its job is dead) before its last action is read.
        let run = finish(child).await;
        let last_ns: u128 = std::fs::read_to_string(&actions)
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .max()
            .expect("stamped actions");
        let margin_ms = (granted_ns as i128 - last_ns as i128) as f64 / 1e6;
        println!("{case}: the old job's last action came {margin_ms:.0} ms before the new holder's grant");
        outcomes.push((case, margin_ms, job_alive, run));
    }
    for (case, margin_ms, job_alive, run) in outcomes {
        assert!(!job_alive, "{case}: the job still ran when another host got the lock\n{run:?}");
        assert!(margin_ms > 0.0, "{case}: the old job acted {:.0} ms after the new grant\n{run:?}", -margin_ms);
        assert_eq!(run.code, 76, "{case}: {run:?}");
        assert!(run.stderr.contains("SIGKILL"), "{case}: the job ignored SIGTERM and was killed\n{run:?}");
    }
}

/// `--quiet` silences the skip of a slot that already ran (--once-per); the exit code (0)
/// is the same, and without it the skip is said.
#[tokio::test]
async fn quiet_silences_the_skip_of_a_slot_that_already_ran() {
    let cluster = Cluster::start(1).await;
    let first = dls(&cluster, &["lock", "--once-per", "1h", "jobs", "quiet", "--", "true"]).await;
    assert_eq!((first.code, first.stderr.as_str()), (0, ""), "{first:?}");
    let said = dls(&cluster, &["lock", "--once-per", "1h", "jobs", "quiet", "--", "true"]).await;
    assert_eq!(said.code, 0, "{said:?}");
    assert!(said.stderr.contains("skipping the command"), "{said:?}");
    let quiet = dls(&cluster, &["lock", "--quiet", "--once-per", "1h", "jobs", "quiet", "--", "true"]).await;
    assert_eq!((quiet.code, quiet.stderr.as_str()), (0, ""), "{quiet:?}");
    let both = dls(&cluster, &["lock", "-q", "-v", "--skip-if-locked", "jobs", "quiet", "--", "true"]).await;
    assert_eq!(both.code, 2, "-q and -v do not mix: {both:?}");
}

/// `dls keys add`: the new key, printed once on stdout.
fn add_key(file: &Path, name: &str, admin: bool) -> String {
    let mut cmd = std::process::Command::new(caerus_testkit::dls_bin());
    cmd.args(["keys", "add", "--file", file.to_str().unwrap(), "--name", name]);
    if admin {
        cmd.arg("--admin");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `--api-key-file` (or CAERUS_API_KEY_FILE) keeps the key out of `ps` and the crontab: the
/// key is read trimmed; a file every user can read, an empty or missing file, and a key
/// given twice are refused as usage mistakes before anything runs.
#[tokio::test]
async fn api_key_file_gives_the_key_and_a_careless_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = add_key(&keys, "ops", true);
    let app = add_key(&keys, "app", false);
    let cluster = Cluster::start_full(1, &["--api-keys-file", keys.to_str().unwrap()], Some(admin)).await;
    let key_file = dir.path().join("app.key");
    std::fs::write(&key_file, format!("  {app}\n")).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let kf = key_file.to_str().unwrap();

    let keyless = dls(&cluster, &["lock", "jobs", "keyed", "--", "true"]).await;
    assert_eq!(keyless.code, 1, "the server wants a key: {keyless:?}");
    let run = dls(&cluster, &["lock", "--api-key-file", kf, "jobs", "keyed", "--", "true"]).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    let run = finish(
        dls_command(&cluster, &["lock", "jobs", "keyed", "--", "true"]).env("CAERUS_API_KEY_FILE", kf).spawn().unwrap(),
    )
    .await;
    assert_eq!(run.code, 0, "CAERUS_API_KEY_FILE: {run:?}");

    let twice = dls(&cluster, &["lock", "--api-key", &app, "--api-key-file", kf, "jobs", "keyed", "--", "true"]).await;
    assert_eq!(twice.code, 2, "{twice:?}");
    assert!(twice.stderr.contains("given twice"), "{twice:?}");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open = dls(&cluster, &["lock", "--api-key-file", kf, "jobs", "keyed", "--", "true"]).await;
    assert_eq!(open.code, 2, "{open:?}");
    assert!(open.stderr.contains("readable by every user") && open.stderr.contains("chmod 600"), "{open:?}");
    std::fs::write(&key_file, " \n").unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let empty = dls(&cluster, &["lock", "--api-key-file", kf, "jobs", "keyed", "--", "true"]).await;
    assert_eq!(empty.code, 2, "{empty:?}");
    assert!(empty.stderr.contains("is empty"), "{empty:?}");
    let missing = dir.path().join("nope.key");
    let missing =
        dls(&cluster, &["lock", "--api-key-file", missing.to_str().unwrap(), "jobs", "keyed", "--", "true"]).await;
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("cannot read") && missing.stderr.contains("nope.key"), "{missing:?}");
}

/// `dls lock`'s own transaction name embeds the namespace and key: it must never make a
/// valid key fail (a 240-byte key, or multi-byte characters near the limit), and a bad
/// namespace is refused naming the namespace, not the name.
#[tokio::test]
async fn a_long_key_runs_and_a_bad_namespace_is_named_as_such() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("key");
    let script = format!("echo \"$DLS_KEY\" > {}", out.display());
    for key in ["k".repeat(240), "é".repeat(128)] {
        let run = dls(&cluster, &["lock", "jobs", &key, "--", "sh", "-c", &script]).await;
        assert_eq!(run.code, 0, "a {}-byte key: {run:?}", key.len());
        assert_eq!(read(&out).as_deref(), Some(format!("{key}\n").as_str()));
    }
    let run = dls(&cluster, &["lock", "jo\tbs", "nightly", "--", "true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("namespace must not contain control characters"), "{run:?}");
    let run = dls(&cluster, &["lock", "jobs", &"k".repeat(257), "--", "true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("key is 257 bytes; the limit is 256"), "{run:?}");
}

/// `dls events` prints plain words: an operator abort on a server without keys shows no
/// `operator=""`, and the revoked lock's cause is a word, not `Some(OperatorAbort)`.
#[tokio::test]
async fn events_print_plain_words() {
    let cluster = Cluster::start(1).await;
    let c = client(&cluster).await;
    let tx = c.begin_transaction(TransactionOptions::new().with_name("nightly worker")).await.unwrap();
    tx.acquire_lock("jobs", "words", LockMode::Exclusive, AcquireOptions::default()).await.unwrap();
    let id = tx.id().to_string();
    let abort = dls(&cluster, &["txn", "abort", &id, "--reason", "stuck"]).await;
    assert_eq!(abort.code, 0, "{abort:?}");
    let out = dls_command(&cluster, &["events"]).stdout(Stdio::piped()).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let aborted = text.lines().find(|l| l.contains("transaction_aborted")).expect("an abort event");
    assert!(aborted.contains(&format!("txn={id} name=\"nightly worker\" reason=stuck released=1")), "{aborted}");
    let revoked = text.lines().find(|l| l.contains("lock_revoked")).expect("a revoke event");
    assert!(revoked.ends_with("cause=operator_abort"), "{revoked}");
    assert!(!text.contains("Some(") && !text.contains("=\"\""), "{text}");
}

/// `--ttl 10ms` and `--ttl 2h` were silently clamped to 100ms and 1h: refused now, naming
/// the range, before the command runs (as a `--wait-timeout` over an hour).
#[tokio::test]
async fn a_ttl_out_of_range_is_refused_with_the_range() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let job = format!("touch {}", ran.display());
    for ttl in ["10ms", "2h"] {
        let run = dls(&cluster, &["lock", "--ttl", ttl, "jobs", "ttl", "--", "sh", "-c", &job]).await;
        assert_eq!(run.code, 2, "--ttl {ttl}: {run:?}");
        assert!(run.stderr.contains("--ttl") && run.stderr.contains("100ms to 1h"), "{run:?}");
    }
    let run = dls(&cluster, &["lock", "--wait-timeout", "2h", "jobs", "ttl", "--", "sh", "-c", &job]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("at most 1h"), "{run:?}");
    assert!(!ran.exists(), "nothing runs on a usage mistake");
    // The bounds themselves are accepted. (Whether a 100 ms lease then survives depends on
    // the machine's load, which is not what this test is about.)
    let run =
        dls(&cluster, &["lock", "--ttl", "100ms", "--kill-grace", "10ms", "jobs", "ttl", "--", "sh", "-c", &job]).await;
    assert!(run.code != 2 && !run.stderr.contains("100ms to 1h"), "the shortest lease is not a usage error: {run:?}");
    let run = dls(&cluster, &["lock", "--ttl", "1h", "jobs", "ttl", "--", "sh", "-c", &job]).await;
    assert_eq!(run.code, 0, "the longest lease is taken: {run:?}");
}

/// Runs `dls ARGS` against a cluster that cannot answer and checks that it gives up within
/// its timeout (with slack for a loaded machine) as unavailable; returns how long it took.
async fn gives_up_in_time(cluster: &Cluster, args: &[&str], timeout: Duration) -> Duration {
    let started = std::time::Instant::now();
    let run = dls(cluster, args).await;
    let took = started.elapsed();
    assert_eq!(run.code, 1, "{args:?}: {run:?}");
    assert!(run.stderr.contains("cluster unavailable") && run.stderr.contains("got no answer"), "{args:?}: {run:?}");
    // The requirement is timeout + 1 s; the slack is for a machine shared with other builds.
    assert!(took < timeout + Duration::from_secs(3), "{args:?} took {took:?}: {run:?}");
    took
}

#[tokio::test]
async fn every_wait_ends_at_its_timeout_when_the_cluster_cannot_answer() {
    let mut cluster = Cluster::start(3).await;
    let two = Duration::from_secs(2);
    let lock = ["lock", "--timeout", "2", "jobs", "nightly", "--", "true"];
    // The wait for the lock (30 s by default) is no reason to wait for a cluster that
    // never answers; nor is a wait of 2 s a reason to wait the default 15 s for it.
    let wait = ["lock", "--wait-timeout", "2s", "jobs", "nightly", "--", "true"];
    let skip = ["lock", "--skip-if-locked", "--timeout", "2", "jobs", "nightly", "--", "true"];
    let permit = ["lock", "--permits", "3", "--timeout", "2", "jobs", "backup", "--", "true"];
    let locks = ["locks", "--timeout", "2"];
    let promote = ["members", "promote", "--timeout", "2", "3"];
    let commands: [&[&str]; 6] = [&lock, &wait, &skip, &permit, &locks, &promote];

    // No leader: one node of three up.
    cluster.kill(2);
    cluster.kill(3);
    let mut took = Vec::new();
    for args in commands {
        took.push(gives_up_in_time(&cluster, args, two).await);
    }
    // Every endpoint refuses connections.
    cluster.kill(1);
    for args in commands {
        took.push(gives_up_in_time(&cluster, args, two).await);
    }
    eprintln!("took (no leader, then refused): {took:?}");
}

/// A key held as a semaphore of 3 permits, asked for as a lock (or with another count): the
/// CLI says which flag to run (`--permits 3`), from the count the server sends as data; the
/// SDKs keep the server's words.
#[tokio::test]
async fn a_semaphore_asked_for_as_a_lock_is_told_the_permits_flag_to_run() {
    let cluster = Cluster::start(1).await;
    let client = client(&cluster).await;
    let holder = client.begin_transaction(TransactionOptions::new()).await.unwrap();
    holder.acquire_permit("jobs", "backup", 3, AcquireOptions::new().with_timeout_ms(1_000)).await.unwrap();
    for flags in [&[][..], &["--shared"], &["--permits", "2"]] {
        let mut args = vec!["lock"];
        args.extend_from_slice(flags);
        args.extend(["jobs", "backup", "--", "true"]);
        let run = dls(&cluster, &args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(
            run.stderr
                .contains("jobs/backup is a semaphore with 3 permits: run `dls lock --permits 3 jobs backup -- true`"),
            "{args:?}: {run:?}"
        );
        assert!(!run.stderr.contains("mode SEMAPHORE"), "{args:?}: {run:?}");
    }
    let run = dls(&cluster, &["lock", "--permits", "3", "jobs", "backup", "--", "true"]).await;
    assert_eq!(run.code, 0, "{run:?}");

    let other = client.begin_transaction(TransactionOptions::new()).await.unwrap();
    let err = other.acquire_lock("jobs", "backup", LockMode::Exclusive, AcquireOptions::new()).await.unwrap_err();
    assert!(matches!(err, caerus_core::Error::InvalidArgument { semaphore_permits: Some(3), .. }), "{err:?}");
    assert!(err.message().contains("ask for it with mode SEMAPHORE and permits 3"), "{err}");
}

fn add_limited_key(file: &Path, name: &str, namespace: &str) -> String {
    let out = std::process::Command::new(caerus_testkit::dls_bin())
        .args(["keys", "add", "--file", file.to_str().unwrap(), "--name", name, "--namespace", namespace])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A key limited to namespaces, used on another one: the CLI says which namespaces the key
/// may use (the server sends them as data) and does not send the user for an admin key,
/// which an operator command without one still gets.
#[tokio::test]
async fn a_namespace_denial_names_the_keys_namespaces_not_an_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let admin = add_key(&keys, "ops", true);
    let billing = add_limited_key(&keys, "billing", "billing-");
    let cluster = Cluster::start_full(1, &["--api-keys-file", keys.to_str().unwrap()], Some(admin)).await;

    let run = dls(&cluster, &["lock", "--api-key", &billing, "jobs", "nightly", "--", "true"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("may not use namespace \"jobs\""), "{run:?}");
    assert!(run.stderr.contains("this API key may use only namespaces starting with \"billing-\""), "{run:?}");
    assert!(!run.stderr.contains("admin"), "{run:?}");
    let run = dls(&cluster, &["lock", "--api-key", &billing, "billing-jobs", "nightly", "--", "true"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = dls(&cluster, &["locks", "--api-key", &billing]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("operator commands need an admin key"), "{run:?}");
}

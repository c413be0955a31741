//! `dls locks`: who holds and who waits for which lock.

use caerus_core::{KeyLocks, SlotRun};
use clap::Args;
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::{age, duration_ms, ids, now_ms, or_dash, rfc3339, table};

#[derive(Args, Debug)]
#[command(after_help = "Needs an admin key on a server with an API keys file.\n\n\
Example:\n  dls locks --namespace billing- --endpoints 10.0.0.1:7070")]
pub struct LocksArgs {
    /// Only namespaces starting with this prefix.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub namespace: String,
    /// Print JSON (one object with a `locks` array) instead of tables.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub async fn run(args: LocksArgs) -> Result<(), CliError> {
    let client = args.cluster.client().await?;
    let locks = client.list_locks(&args.namespace).await?;
    let runs = client.list_slot_runs(&args.namespace).await?;
    if args.json {
        return print_json(&json!({
            "locks": locks.iter().map(to_json).collect::<Vec<_>>(),
            "slot_runs": runs.iter().map(run_json).collect::<Vec<_>>(),
        }));
    }
    if locks.is_empty() {
        let scope =
            if args.namespace.is_empty() { String::new() } else { format!(" in namespaces {:?}*", args.namespace) };
        print_line(&format!("no lock is held, waited for or delayed{scope}"))?;
    }
    for (i, lock) in locks.iter().enumerate() {
        if i > 0 {
            print_line("")?;
        }
        for line in render(lock) {
            print_line(&line)?;
        }
    }
    if !runs.is_empty() {
        print_line("")?;
        for line in render_runs(&runs) {
            print_line(&line)?;
        }
    }
    Ok(())
}

/// The last run of each key claimed per schedule slot (`dls lock --once-per`).
fn render_runs(runs: &[SlotRun]) -> Vec<String> {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let ended = if r.finished_at_ms > 0 { age(r.finished_at_ms) } else { "-".to_string() };
            vec![
                format!("{}/{}", r.namespace, r.key),
                format!("{} (every {})", r.slot, duration_ms(r.period.as_millis() as i64)),
                r.state.as_str().to_string(),
                r.exit_code.map_or("-".to_string(), |c| c.to_string()),
                r.attempt.to_string(),
                r.transaction_id.to_string(),
                or_dash(&r.transaction_name),
                rfc3339(r.started_at_ms),
                ended,
            ]
        })
        .collect();
    let mut lines = vec!["last run per schedule slot (dls lock --once-per):".to_string()];
    lines.extend(table(
        &["LOCK", "SLOT", "STATE", "EXIT", "ATTEMPT", "TXN", "RAN BY", "STARTED", "ENDED AGO"],
        &rows,
        "  ",
    ));
    lines.extend(
        runs.iter().filter(|r| !r.reason.is_empty()).map(|r| format!("  {}/{}: {}", r.namespace, r.key, r.reason)),
    );
    lines
}

fn run_json(r: &SlotRun) -> serde_json::Value {
    json!({
        "namespace": r.namespace,
        "key": r.key,
        "period_ms": r.period.as_millis() as u64,
        "slot": r.slot,
        "transaction_id": r.transaction_id,
        "transaction_name": r.transaction_name,
        "api_key": r.api_key,
        "started_at_ms": r.started_at_ms,
        "finished_at_ms": r.finished_at_ms,
        "state": r.state.as_str(),
        "exit_code": r.exit_code,
        "reason": r.reason,
        "attempt": r.attempt,
    })
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One lock as a title line and a table each for holders and waiters.
fn render(lock: &KeyLocks) -> Vec<String> {
    let kind = match lock.permits {
        0 => String::new(),
        n => format!("semaphore of {}, ", plural(n as usize, "permit", "permits")),
    };
    let mut lines = vec![format!(
        "{}/{}  ({kind}{}, {})",
        lock.namespace,
        lock.key,
        plural(lock.holders.len(), "holder", "holders"),
        plural(lock.waiters.len(), "waiter", "waiters")
    )];
    if let Some(d) = &lock.delay {
        let cause = d.cause.map_or("revoked", |c| c.describe());
        lines.push(format!(
            "  lock-delay: nothing is granted until {} (in {}): holder {} {cause}",
            rfc3339(d.until_ms),
            // By the cluster's clock, which need not match this machine's (older servers
            // send no remaining time).
            duration_ms(if d.remaining_ms > 0 { d.remaining_ms } else { d.until_ms - now_ms() }),
            d.transaction_id
        ));
    }
    if !lock.holders.is_empty() {
        let rows: Vec<Vec<String>> = lock
            .holders
            .iter()
            .map(|h| {
                vec![
                    h.transaction_id.to_string(),
                    or_dash(&h.transaction_name),
                    h.mode.to_string(),
                    h.fencing_token.to_string(),
                    age(h.since_ms),
                ]
            })
            .collect();
        lines.push("  holders:".into());
        lines.extend(table(&["TXN", "NAME", "MODE", "TOKEN", "HELD FOR"], &rows, "    "));
    }
    if !lock.waiters.is_empty() {
        let rows: Vec<Vec<String>> = lock
            .waiters
            .iter()
            .map(|w| {
                vec![
                    w.position.to_string(),
                    w.transaction_id.to_string(),
                    or_dash(&w.transaction_name),
                    w.mode.to_string(),
                    if w.upgrade { "yes" } else { "no" }.to_string(),
                    ids(&w.blocking_transaction_ids),
                    age(w.since_ms),
                ]
            })
            .collect();
        lines.push("  waiters:".into());
        lines.extend(table(&["POS", "TXN", "NAME", "MODE", "UPGRADE", "BLOCKED BY", "WAITING FOR"], &rows, "    "));
    }
    lines
}

fn to_json(lock: &KeyLocks) -> serde_json::Value {
    json!({
        "namespace": lock.namespace,
        "key": lock.key,
        "holders": lock.holders.iter().map(|h| json!({
            "transaction_id": h.transaction_id,
            "transaction_name": h.transaction_name,
            "mode": h.mode.as_str(),
            "fencing_token": h.fencing_token,
            "since_ms": h.since_ms,
        })).collect::<Vec<_>>(),
        "waiters": lock.waiters.iter().map(|w| json!({
            "transaction_id": w.transaction_id,
            "transaction_name": w.transaction_name,
            "mode": w.mode.as_str(),
            "position": w.position,
            "blocking_transaction_ids": w.blocking_transaction_ids,
            "since_ms": w.since_ms,
            "upgrade": w.upgrade,
        })).collect::<Vec<_>>(),
        "permits": lock.permits,
        "delay": lock.delay.map(|d| json!({
            "until_ms": d.until_ms,
            "remaining_ms": d.remaining_ms,
            "transaction_id": d.transaction_id,
            "cause": d.cause.map(|c| c.as_str()),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use caerus_core::{LockHolder, LockMode, LockWaiter};

    #[test]
    fn a_lock_shows_holders_and_waiters_with_blockers() {
        let lock = KeyLocks {
            namespace: "ns".into(),
            key: "k".into(),
            holders: vec![LockHolder {
                transaction_id: 5,
                transaction_name: "worker-1".into(),
                mode: LockMode::Exclusive,
                fencing_token: 12,
                since_ms: 0,
            }],
            waiters: vec![LockWaiter {
                transaction_id: 6,
                transaction_name: String::new(),
                mode: LockMode::SharedRead,
                position: 1,
                blocking_transaction_ids: vec![5],
                since_ms: 0,
                upgrade: false,
            }],
            delay: None,
            permits: 0,
        };
        let text = render(&lock).join("\n");
        assert!(text.starts_with("ns/k  (1 holder, 1 waiter)"), "{text}");
        assert!(text.contains("TXN  NAME      MODE       TOKEN  HELD FOR"), "{text}");
        assert!(text.contains("5    worker-1  EXCLUSIVE  12     -"), "{text}");
        assert!(text.contains("1    6    -     SHARED_READ  no       5"), "{text}");
        assert_eq!(to_json(&lock)["waiters"][0]["blocking_transaction_ids"], json!([5]));
        assert!(!text.contains("lock-delay"), "{text}");
    }

    #[test]
    fn a_delayed_key_says_until_when_and_why() {
        let lock = KeyLocks {
            namespace: "ns".into(),
            key: "k".into(),
            holders: vec![],
            waiters: vec![],
            delay: Some(caerus_core::KeyDelay {
                until_ms: 1_764_770_400_000,
                remaining_ms: 10_000,
                transaction_id: 9,
                cause: Some(caerus_core::EndCause::LeaseExpired),
            }),
            permits: 3,
        };
        let text = render(&lock).join("\n");
        assert!(text.contains("lock-delay: nothing is granted until 2025-12-03T14:00:00Z (in 10.0s)"), "{text}");
        assert!(text.contains("holder 9 lease expired"), "{text}");
        assert!(text.starts_with("ns/k  (semaphore of 3 permits, 0 holders, 0 waiters)"), "{text}");
        assert_eq!(to_json(&lock)["delay"]["cause"], json!("LEASE_EXPIRED"));
    }
}

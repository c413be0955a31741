//! `dls events`: the cluster's event log, one event per line.

use std::time::Duration;

use caerus_core::{Event, EventDetail, EventKind, Lock, VictimPolicy, WatchOptions};
use clap::Args;
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::rfc3339;

/// Without --follow and with filters that hide the backlog's last event, the backlog counts
/// as printed once the stream has been this quiet (the server sends the retained events in
/// one burst right after attaching).
const BACKLOG_QUIET: Duration = Duration::from_secs(1);

#[derive(Args, Debug)]
#[command(
    after_help = "Kinds: deadlock_resolved, transaction_expired, transaction_aborted, lock_revoked, api_key_changed.\n\n\
Without --follow, prints the retained events (from --from on) and exits once the server has sent them all.\n\
With --follow, keeps printing new events until interrupted, across leader changes.\n\n\
Example:\n  dls events --follow --kind deadlock_resolved --namespace billing-"
)]
pub struct EventsArgs {
    /// Keep streaming new events (until Ctrl-C).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// First sequence number to print (default: the oldest retained event).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub from: u64,
    /// Only events touching a namespace starting with PREFIX (repeatable).
    #[arg(long = "namespace", value_name = "PREFIX")]
    pub namespaces: Vec<String>,
    /// Only events of KIND (repeatable).
    #[arg(long = "kind", value_name = "KIND", value_parser = parse_kind)]
    pub kinds: Vec<EventKind>,
    /// Print one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

fn parse_kind(raw: &str) -> Result<EventKind, String> {
    raw.parse::<EventKind>().map_err(|e| e.to_string())
}

pub async fn run(args: EventsArgs) -> Result<(), CliError> {
    let client = args.cluster.client().await?;
    let opts = WatchOptions {
        from_sequence: args.from,
        namespace_prefixes: args.namespaces.clone(),
        kinds: args.kinds.clone(),
        only_new: false,
    };
    let mut stream = client.watch_events(opts).await?;
    // Without --follow, stop at the last event committed when the stream attached. Filters
    // may hide that very event, so a quiet stream also ends the backlog.
    let backlog_end = stream.backlog_end();
    if !args.follow && backlog_end.is_some_and(|end| end == 0 || end < args.from) {
        return Ok(());
    }
    loop {
        let next = if args.follow {
            stream.next_event().await
        } else {
            match tokio::time::timeout(BACKLOG_QUIET, stream.next_event()).await {
                Ok(next) => next,
                Err(_) => return Ok(()),
            }
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => return Err(e.into()),
            None => return Ok(()),
        };
        if args.json {
            print_json(&to_json(&event))?;
        } else {
            print_line(&line(&event))?;
        }
        if !args.follow && backlog_end.is_some_and(|end| event.sequence >= end) {
            return Ok(());
        }
    }
}

/// `deadlock_resolved` for `DEADLOCK_RESOLVED`.
fn kind_name(kind: EventKind) -> String {
    kind.as_str().to_ascii_lowercase()
}

/// `lowest-priority-then-youngest`, as `dls serve --victim-policy` spells it.
fn policy_name(policy: VictimPolicy) -> String {
    policy.as_str().to_ascii_lowercase().replace('_', "-")
}

fn released(locks: &[Lock]) -> String {
    let list: Vec<String> =
        locks.iter().map(|l| format!("{}/{} token {}", l.namespace, l.key, l.fencing_token)).collect();
    if list.is_empty() {
        "0".into()
    } else {
        format!("{} ({})", list.len(), list.join(", "))
    }
}

/// ` name=VALUE` for the text line, or nothing when the value is empty (an operator on a
/// server without keys): a plain word as is, anything with spaces, quotes or `=` quoted.
fn field(name: &str, value: &str) -> String {
    if value.is_empty() {
        return String::new();
    }
    let plain = value.chars().all(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '"' | '\\' | '='));
    match plain {
        true => format!(" {name}={value}"),
        false => format!(" {name}={}", serde_json::Value::from(value)),
    }
}

/// `#12 2026-11-29T14:03:01Z deadlock_resolved victim=7 cycle=7→5→7 (ns/k1, ns/k2) policy=oldest`
fn line(e: &Event) -> String {
    let what = match &e.detail {
        EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => {
            let mut ids: Vec<String> = cycle.iter().map(|m| m.transaction_id.to_string()).collect();
            if let Some(first) = ids.first().cloned() {
                ids.push(first);
            }
            let locks: Vec<String> = cycle.iter().map(|m| format!("{}/{}", m.namespace, m.key)).collect();
            format!(
                "victim={victim_transaction_id} cycle={} ({}) policy={}",
                ids.join("→"),
                locks.join(", "),
                policy_name(*policy)
            )
        }
        EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => {
            format!("txn={transaction_id}{} released={}", field("name", transaction_name), released(released_locks))
        }
        EventDetail::TransactionAborted { transaction_id, transaction_name, reason, operator, released_locks } => {
            format!(
                "txn={transaction_id}{}{}{} released={}",
                field("name", transaction_name),
                field("operator", operator),
                field("reason", reason),
                released(released_locks)
            )
        }
        EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => {
            let cause = cause.map(|c| c.as_str().to_ascii_lowercase()).unwrap_or_default();
            format!(
                "txn={transaction_id} lock={namespace}/{key} mode={mode} token={fencing_token}{}",
                field("cause", &cause)
            )
        }
        EventDetail::ApiKeyChanged { change, key_name, by } => {
            format!(
                "{} change={}{}",
                field("key", key_name).trim_start(),
                change.as_str().to_ascii_lowercase(),
                field("by", by)
            )
        }
        // A kind newer than this dls: its name (in the line's kind) is all it can say.
        _ => "(details unknown to this version of dls)".to_string(),
    };
    format!("#{} {} {} {what}", e.sequence, rfc3339(e.time_ms), kind_name(e.kind()))
}

fn lock_json(l: &Lock) -> serde_json::Value {
    json!({ "namespace": l.namespace, "key": l.key, "mode": l.mode.as_str(), "fencing_token": l.fencing_token })
}

fn to_json(e: &Event) -> serde_json::Value {
    let detail = match &e.detail {
        EventDetail::DeadlockResolved { cycle, victim_transaction_id, policy } => json!({
            "cycle": cycle.iter().map(|m| json!({
                "transaction_id": m.transaction_id,
                "transaction_name": m.transaction_name,
                "priority": m.priority,
                "namespace": m.namespace,
                "key": m.key,
                "mode": m.mode.as_str(),
            })).collect::<Vec<_>>(),
            "victim_transaction_id": victim_transaction_id,
            "policy": policy.as_str(),
        }),
        EventDetail::TransactionExpired { transaction_id, transaction_name, released_locks } => json!({
            "transaction_id": transaction_id,
            "transaction_name": transaction_name,
            "released_locks": released_locks.iter().map(lock_json).collect::<Vec<_>>(),
        }),
        EventDetail::TransactionAborted { transaction_id, transaction_name, reason, operator, released_locks } => {
            json!({
                "transaction_id": transaction_id,
                "transaction_name": transaction_name,
                "reason": reason,
                "operator": operator,
                "released_locks": released_locks.iter().map(lock_json).collect::<Vec<_>>(),
            })
        }
        EventDetail::LockRevoked { transaction_id, namespace, key, mode, fencing_token, cause } => json!({
            "transaction_id": transaction_id,
            "namespace": namespace,
            "key": key,
            "mode": mode.as_str(),
            "fencing_token": fencing_token,
            "cause": cause,
        }),
        EventDetail::ApiKeyChanged { change, key_name, by } => json!({
            "change": change.as_str(),
            "key_name": key_name,
            "by": by,
        }),
        other => json!(format!("{other:?}")),
    };
    json!({
        "sequence": e.sequence,
        "time_ms": e.time_ms,
        "time": rfc3339(e.time_ms),
        "kind": kind_name(e.kind()),
        "namespaces": e.namespaces,
        "detail": detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use caerus_core::{CycleMember, LockMode};

    fn member(id: u64, key: &str) -> CycleMember {
        CycleMember {
            transaction_id: id,
            transaction_name: String::new(),
            priority: 0,
            namespace: "ns".into(),
            key: key.into(),
            mode: LockMode::Exclusive,
        }
    }

    #[test]
    fn deadlock_line() {
        let e = Event {
            sequence: 12,
            time_ms: 1_795_960_981_000,
            namespaces: vec!["ns".into()],
            detail: EventDetail::DeadlockResolved {
                cycle: vec![member(7, "k1"), member(5, "k2")],
                victim_transaction_id: 7,
                policy: VictimPolicy::LowestPriorityThenYoungest,
            },
        };
        assert_eq!(
            line(&e),
            "#12 2026-11-29T14:03:01Z deadlock_resolved victim=7 cycle=7→5→7 (ns/k1, ns/k2) policy=lowest-priority-then-youngest"
        );
        let j = to_json(&e);
        assert_eq!(j["kind"], "deadlock_resolved");
        assert_eq!(j["detail"]["victim_transaction_id"], 7);
    }

    #[test]
    fn abort_line_and_kinds() {
        let e = Event {
            sequence: 3,
            time_ms: 0,
            namespaces: vec!["ns".into()],
            detail: EventDetail::TransactionAborted {
                transaction_id: 9,
                transaction_name: "w".into(),
                reason: "stuck".into(),
                operator: "ops".into(),
                released_locks: vec![Lock {
                    namespace: "ns".into(),
                    key: "k".into(),
                    mode: LockMode::Exclusive,
                    fencing_token: 4,
                }],
            },
        };
        assert_eq!(
            line(&e),
            "#3 1970-01-01T00:00:00Z transaction_aborted txn=9 name=w operator=ops reason=stuck released=1 (ns/k token 4)"
        );
        let e = Event {
            detail: EventDetail::TransactionAborted {
                transaction_id: 9,
                transaction_name: String::new(),
                reason: "disk \"full\"".into(),
                operator: String::new(),
                released_locks: vec![],
            },
            ..e
        };
        assert_eq!(
            line(&e),
            "#3 1970-01-01T00:00:00Z transaction_aborted txn=9 reason=\"disk \\\"full\\\"\" released=0"
        );
        let e = Event {
            detail: EventDetail::LockRevoked {
                transaction_id: 9,
                namespace: "ns".into(),
                key: "k".into(),
                mode: LockMode::Exclusive,
                fencing_token: 4,
                cause: Some(caerus_core::EndCause::LeaseExpired),
            },
            ..e
        };
        assert!(line(&e).ends_with("token=4 cause=lease_expired"), "{}", line(&e));
        assert_eq!(parse_kind("lock-revoked"), Ok(EventKind::LockRevoked));
        assert!(parse_kind("nope").unwrap_err().contains("deadlock_resolved"));
    }
}

//! `dls txn show` and `dls txn abort`: inspect and end one transaction.

use caerus_core::{Error, TransactionStatus};
use clap::{Args, Subcommand};
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::{duration_ms, or_dash};

#[derive(Subcommand, Debug)]
pub enum TxnCommand {
    /// Show a transaction: state, name, priority, lease, held locks with tokens, pending wait, end reason.
    #[command(after_help = "Any key may read its own transactions; an admin key may read every transaction.")]
    Show(ShowArgs),
    /// Abort a transaction as an operator: its locks are released and passed to the next waiters,
    /// its holder's client reports it lost, and a transaction_aborted event is recorded.
    #[command(after_help = "Needs an admin key on a server with an API keys file.\n\n\
Example:\n  dls txn abort 42 --reason \"stuck since the 14:00 deploy\"")]
    Abort(AbortArgs),
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The transaction id.
    pub id: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct AbortArgs {
    /// The transaction id.
    pub id: u64,
    /// Why (recorded in the transaction's end reason and in the event), at most 256 bytes.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub async fn run(command: TxnCommand) -> Result<(), CliError> {
    match command {
        TxnCommand::Show(args) => show(args).await,
        TxnCommand::Abort(args) => abort(args).await,
    }
}

async fn show(args: ShowArgs) -> Result<(), CliError> {
    let client = args.cluster.client().await?;
    let status = client.transaction_status(args.id).await?;
    if args.json {
        return print_json(&to_json(&status));
    }
    for line in render(&status) {
        print_line(&line)?;
    }
    Ok(())
}

async fn abort(args: AbortArgs) -> Result<(), CliError> {
    let client = args.cluster.client().await?;
    let outcome = client.abort_transaction_outcome(args.id, &args.reason).await.map_err(|e| match e {
        // "Not active" is the usual surprise here: say so plainly.
        Error::TransactionLost { message, .. } => {
            CliError::failure(format!("transaction {} has already ended: {message}", args.id))
        }
        e => CliError::from(e),
    })?;
    if args.json {
        return print_json(&json!({
            "transaction_id": args.id,
            "state": outcome.state.as_str(),
            "released_locks": outcome.released_locks,
        }));
    }
    let locks = if outcome.released_locks == 1 { "lock" } else { "locks" };
    print_line(&format!("transaction {} is {}; {} {locks} released", args.id, outcome.state, outcome.released_locks))
}

fn render(s: &TransactionStatus) -> Vec<String> {
    // A continuation line (empty name) lines up under the first value.
    let field = |name: &str, value: String| {
        let label = if name.is_empty() { String::new() } else { format!("{name}:") };
        format!("  {label:<13}{value}")
    };
    let mut lines =
        vec![format!("transaction {}{}", s.id, s.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default())];
    lines.push(field("state", s.state.to_string()));
    lines.push(field("priority", s.priority.to_string()));
    let lease = duration_ms(s.lease_timeout_ms as i64);
    lines.push(field(
        "lease",
        if s.state == caerus_core::TransactionState::Active {
            format!("{lease}, {} remaining", duration_ms(s.lease_remaining_ms as i64))
        } else {
            lease
        },
    ));
    if s.locks.is_empty() {
        lines.push(field("holds", "-".into()));
    }
    for (i, l) in s.locks.iter().enumerate() {
        let text = format!("{}/{} {} token {}", l.namespace, l.key, l.mode, l.fencing_token);
        lines.push(if i == 0 { field("holds", text) } else { field("", text) });
    }
    lines.push(field(
        "waiting for",
        match &s.waiting {
            Some(w) => {
                format!("{}/{} {}, position {} (request {})", w.namespace, w.key, w.mode, w.position, w.request_id)
            }
            None => "-".into(),
        },
    ));
    lines.push(field("end reason", or_dash(&s.end_reason)));
    lines
}

fn to_json(s: &TransactionStatus) -> serde_json::Value {
    json!({
        "transaction_id": s.id,
        "state": s.state.as_str(),
        "name": s.name,
        "priority": s.priority,
        "lease_timeout_ms": s.lease_timeout_ms,
        "lease_remaining_ms": s.lease_remaining_ms,
        "locks": s.locks.iter().map(|l| json!({
            "namespace": l.namespace,
            "key": l.key,
            "mode": l.mode.as_str(),
            "fencing_token": l.fencing_token,
        })).collect::<Vec<_>>(),
        "waiting": s.waiting.as_ref().map(|w| json!({
            "namespace": w.namespace,
            "key": w.key,
            "mode": w.mode.as_str(),
            "position": w.position,
            "request_id": w.request_id,
        })),
        "end_reason": s.end_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use caerus_core::{Lock, LockMode, TransactionState};

    #[test]
    fn status_text() {
        let s = TransactionStatus {
            id: 5,
            state: TransactionState::Active,
            name: Some("worker".into()),
            priority: 2,
            lease_timeout_ms: 15_000,
            lease_remaining_ms: 12_300,
            locks: vec![
                Lock { namespace: "ns".into(), key: "a".into(), mode: LockMode::Exclusive, fencing_token: 12 },
                Lock { namespace: "ns".into(), key: "b".into(), mode: LockMode::SharedRead, fencing_token: 13 },
            ],
            waiting: None,
            end_reason: String::new(),
            end_cause: None,
        };
        let text = render(&s).join("\n");
        assert!(text.starts_with("transaction 5 \"worker\""), "{text}");
        assert!(text.contains("  lease:       15.0s, 12.3s remaining"), "{text}");
        assert!(
            text.contains("  holds:       ns/a EXCLUSIVE token 12\n               ns/b SHARED_READ token 13"),
            "{text}"
        );
        assert!(text.contains("  end reason:  -"), "{text}");
        assert_eq!(to_json(&s)["locks"][1]["fencing_token"], 13);
    }
}

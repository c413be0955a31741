//! `dls lock-delay set` and `dls lock-delay list`: the lock-delay rules of a cluster.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::{duration_ms, table};
use super::lock::parse_duration;

#[derive(Subcommand, Debug)]
pub enum LockDelayCommand {
    /// Set how long a revoked holder's keys stay unavailable in namespaces starting with PREFIX.
    ///
    /// When a holder's lease expires, or an operator, the deadlock detector or a maximum
    /// duration ends its transaction, its keys there grant nothing for DURATION, so a
    /// process that still believes it holds the lock (a long pause, a partition) has time
    /// to stop before the next holder starts. A release or commit is never delayed. Use it
    /// for resources that cannot check fencing tokens. The longest matching prefix decides;
    /// "" matches every namespace; a DURATION of 0 removes the rule.
    #[command(after_help = "Needs an admin key on a server with an API keys file.\n\n\
Examples:\n  dls lock-delay set billing- 15s\n  dls lock-delay set \"\" 5s      # every namespace\n  dls lock-delay set billing- 0   # off again")]
    Set(SetArgs),
    /// List the lock-delay rules.
    #[command(after_help = "Needs an admin key on a server with an API keys file.")]
    List(ListArgs),
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// Namespaces starting with this prefix ("" = every namespace).
    pub prefix: String,
    /// How long, e.g. 500ms, 15s, 2m (at most 10m); 0 removes the rule.
    #[arg(value_parser = parse_delay)]
    pub delay: Duration,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON (one object with a `rules` array) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// A duration, or a bare 0 (remove the rule).
fn parse_delay(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

pub async fn run(command: LockDelayCommand) -> Result<(), CliError> {
    match command {
        LockDelayCommand::Set(args) => {
            let client = args.cluster.client().await?;
            let previous = client.set_lock_delay(&args.prefix, args.delay).await?;
            let was = |d: Duration| if d.is_zero() { "none".to_string() } else { duration_ms(d.as_millis() as i64) };
            print_line(&format!(
                "lock-delay for namespaces {:?}*: {} (was {})",
                args.prefix,
                was(args.delay),
                was(previous)
            ))
        }
        LockDelayCommand::List(args) => {
            let client = args.cluster.client().await?;
            let rules = client.lock_delays().await?;
            if args.json {
                let rules: Vec<_> = rules
                    .iter()
                    .map(|r| json!({"namespace_prefix": r.namespace_prefix, "delay_ms": r.delay.as_millis() as u64}))
                    .collect();
                return print_json(&json!({ "rules": rules }));
            }
            if rules.is_empty() {
                return print_line("no lock-delay rule: revoked holders' keys pass to the next waiter at once");
            }
            let rows: Vec<Vec<String>> = rules
                .iter()
                .map(|r| vec![format!("{:?}", r.namespace_prefix), duration_ms(r.delay.as_millis() as i64)])
                .collect();
            for line in table(&["PREFIX", "DELAY"], &rows, "") {
                print_line(&line)?;
            }
            Ok(())
        }
    }
}

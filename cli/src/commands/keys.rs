//! `dls keys create|list|revoke|rotate`: API keys kept by the cluster (`dls keys add
//! --file` writes a node's keys file, for bootstrap; see `main`).

use std::time::Duration;

use caerus_core::{ApiKeyInfo, ApiKeyLimits, ApiKeySecret, NewApiKey};
use clap::{Args, Subcommand};
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::{rfc3339, table};
use super::lock::parse_duration;

#[derive(Subcommand, Debug)]
pub enum ClusterKeysCommand {
    /// Create an API key kept by the cluster and print its secret once (only its hash is stored).
    #[command(after_help = "Needs an admin key; one limited to namespace prefixes creates keys inside them only.\n\n\
Examples:\n  dls keys create billing-worker --namespace billing-\n  dls keys create ci --expires 30d\n  dls keys create ops --admin")]
    Create(CreateArgs),
    /// List the cluster's API keys (names and rights; never secrets).
    List(ListArgs),
    /// Revoke a cluster API key: every node refuses it from now on and its open streams end.
    Revoke(NameArgs),
    /// Give a cluster API key a new secret (printed once); the old one works for --grace longer.
    #[command(after_help = "Example (roll a key without downtime):\n  dls keys rotate billing-worker --grace 10m\n  \
# deploy the new secret to the workers within 10 minutes; the old one then stops working")]
    Rotate(RotateArgs),
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// A unique name (shown in logs; owns the transactions the key begins).
    pub name: String,
    /// Limit the key to namespaces starting with this prefix (repeatable). Default: all namespaces.
    #[arg(long = "namespace", value_name = "PREFIX")]
    pub namespaces: Vec<String>,
    /// Allow the key to call the operator API.
    #[arg(long)]
    pub admin: bool,
    /// Stop the key working after this long, e.g. 12h or 30d (the cluster's clock). Default: never.
    #[arg(long, value_name = "DURATION", value_parser = parse_long_duration)]
    pub expires: Option<Duration>,
    /// This key's own limit of active transactions (instead of --max-txns-per-api-key).
    #[arg(long, value_name = "N")]
    pub max_txns: Option<u64>,
    /// This key's own limit of open watches (instead of --max-watches-per-api-key).
    #[arg(long, value_name = "N")]
    pub max_watches: Option<u64>,
    /// This key's own limit of schedule-slot records (instead of --max-slot-records-per-api-key).
    #[arg(long, value_name = "N")]
    pub max_slot_records: Option<u64>,
    /// Print JSON (the secret and the key) instead of the bare secret.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON (one object with a `keys` array) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct NameArgs {
    /// The key's name.
    pub name: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct RotateArgs {
    /// The key's name.
    pub name: String,
    /// How long the old secret keeps working, e.g. 10m (at most 30 days). Default: it stops at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_long_duration)]
    pub grace: Option<Duration>,
    /// Print JSON (the secret and the key) instead of the bare secret.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// A duration as `dls lock` takes it, or in days (`30d`).
fn parse_long_duration(text: &str) -> Result<Duration, String> {
    match text.trim().strip_suffix('d').map(str::parse::<u64>) {
        Some(Ok(days)) if days <= 3650 => Ok(Duration::from_secs(days * 86_400)),
        Some(_) => Err(format!("{text:?} is not a number of days up to 3650")),
        None => parse_duration(text),
    }
}

fn key_json(k: &ApiKeyInfo) -> serde_json::Value {
    json!({
        "name": k.name,
        "namespace_prefixes": k.namespace_prefixes,
        "admin": k.admin,
        "expires_at_ms": k.expires_at_ms,
        "created_by": k.created_by,
        "created_at_ms": k.created_at_ms,
        "rotated_at_ms": k.rotated_at_ms,
        "previous_valid_until_ms": k.previous_valid_until_ms,
        "limits": {
            "max_transactions": k.limits.max_transactions,
            "max_watches": k.limits.max_watches,
            "max_slot_records": k.limits.max_slot_records,
        },
    })
}

/// The secret alone on stdout (for `$(dls keys create ...)`), what it is on stderr.
fn print_secret(s: &ApiKeySecret, json: bool, what: &str) -> Result<(), CliError> {
    if json {
        return print_json(&json!({ "key": s.secret, "info": key_json(&s.info) }));
    }
    eprintln!("{what} API key {:?}; the secret below is shown only now (the cluster keeps its hash)", s.info.name);
    print_line(&s.secret)
}

pub async fn run(command: ClusterKeysCommand) -> Result<(), CliError> {
    match command {
        ClusterKeysCommand::Create(a) => {
            let client = a.cluster.client().await?;
            let key = NewApiKey {
                namespace_prefixes: a.namespaces,
                admin: a.admin,
                expires_in: a.expires,
                limits: ApiKeyLimits {
                    max_transactions: a.max_txns,
                    max_watches: a.max_watches,
                    max_slot_records: a.max_slot_records,
                },
            };
            let created = client.create_api_key(&a.name, key).await?;
            print_secret(&created, a.json, "created")
        }
        ClusterKeysCommand::List(a) => {
            let keys = a.cluster.client().await?.list_api_keys().await?;
            if a.json {
                return print_json(&json!({ "keys": keys.iter().map(key_json).collect::<Vec<_>>() }));
            }
            if keys.is_empty() {
                return print_line("no API keys kept by the cluster (keys files are per node: see `dls keys add`)");
            }
            let when = |ms: Option<i64>| ms.map_or("-".to_string(), rfc3339);
            let rows: Vec<Vec<String>> = keys
                .iter()
                .map(|k| {
                    vec![
                        k.name.clone(),
                        if k.namespace_prefixes.is_empty() { "*".into() } else { k.namespace_prefixes.join(",") },
                        if k.admin { "yes" } else { "no" }.into(),
                        when(k.expires_at_ms),
                        format!("{:?}", k.created_by),
                        rfc3339(k.created_at_ms),
                    ]
                })
                .collect();
            for line in table(&["NAME", "NAMESPACES", "ADMIN", "EXPIRES", "CREATED BY", "CREATED"], &rows, "") {
                print_line(&line)?;
            }
            Ok(())
        }
        ClusterKeysCommand::Revoke(a) => {
            a.cluster.client().await?.revoke_api_key(&a.name).await?;
            print_line(&format!("revoked API key {:?}: every node refuses it once it applied the change", a.name))
        }
        ClusterKeysCommand::Rotate(a) => {
            let client = a.cluster.client().await?;
            let rotated = client.rotate_api_key(&a.name, a.grace.unwrap_or_default()).await?;
            print_secret(&rotated, a.json, "rotated")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_and_graces_take_days_too() {
        assert_eq!(parse_long_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_long_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_long_duration("9999d").is_err());
        assert!(parse_long_duration("soon").is_err());
    }
}

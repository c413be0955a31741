//! The `dls` command line: `serve`, `keys`, and the operator commands (`locks`, `txn`,
//! `events`, `status`, `members`), which reach the cluster through the Rust client like any user.

pub mod connect;
pub mod events;
mod format;
pub mod health;
pub mod keys;
pub mod lock;
pub mod lock_delay;
pub mod locks;
pub mod members;
pub mod snapshot;
pub mod status;
pub mod txn;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use caerus_server::ServeArgs;

/// `dls --version`, and the version `dls serve` tells peers and clients: the crate version
/// and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("DLS_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(name = "dls", version = VERSION, about = "Caerus DLS: a raft-replicated distributed lock service with fencing tokens")]
pub struct Cli {
    /// Log filter: error, warn, info, debug, trace, or a tracing directive like `caerus_server=debug`
    /// [default: info for `serve`; error for the client commands, which say what happened in
    /// their own words].
    #[arg(long, env = "DLS_LOG", global = true)]
    pub log: Option<String>,
    /// Log line format on stderr: text for people, json (one object per line with
    /// timestamp, level, message and fields) for log collectors.
    #[arg(long, env = "DLS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: CliCommand,
}

#[derive(Subcommand, Debug)]
pub enum CliCommand {
    /// Run a lock server node. With no flags: a single-node cluster on 127.0.0.1:7070 with data in ./dls-data.
    Serve(ServeArgs),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Make a cluster CA and node or client certificates for TLS (`dls certs init`, then `dls certs node N --host H`).
    #[command(subcommand)]
    Certs(caerus_server::CertsCommand),
    /// List held and waited-for locks: holders with tokens, waiters with their blockers.
    Locks(locks::LocksArgs),
    /// Set or list lock-delays: how long a revoked holder's keys stay unavailable, per namespace prefix.
    #[command(subcommand)]
    LockDelay(lock_delay::LockDelayCommand),
    /// Inspect or abort one transaction.
    #[command(subcommand)]
    Txn(txn::TxnCommand),
    /// Print the cluster's event log (deadlocks, expiries, operator aborts, revoked locks).
    Events(events::EventsArgs),
    /// Show every node's view of the cluster: role, term, leader, indexes.
    Status(status::StatusArgs),
    /// List, add, remove or promote cluster members online (joint consensus; new nodes catch up as learners).
    #[command(subcommand)]
    Members(members::MembersCommand),
    /// Run a command while holding a lock: `dls lock [--shared] NAMESPACE KEY -- COMMAND [ARGS...]`.
    Lock(lock::LockArgs),
    /// Back up the cluster's state to a file, or seed a new cluster's data directories from one.
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    /// Check that a node is ready: GET its /readyz (or --url), exit 0 on 2xx, else 1 (the container's HEALTHCHECK).
    Health(health::HealthArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// bash: `dls completions bash > /etc/bash_completion.d/dls`; zsh: save it as `_dls` in a
    /// directory of $fpath; fish: `dls completions fish > ~/.config/fish/completions/dls.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page dls(1), or write it and a page per command into a directory.
    ///
    /// Without --dir: dls(1) in roff on stdout (`dls man | man -l -`). With --dir: dls.1 and
    /// dls-serve.1, dls-lock.1, ... (one per command) into DIR, e.g. /usr/local/share/man/man1.
    Man {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

impl Cli {
    /// The tracing filter: `--log` if given, else the command's own default. A client command
    /// (`dls lock`, `dls locks`, ...) logs errors only: the client library's warnings (a lost
    /// transaction) would come as timestamped lines before the command's own message.
    /// A bare level applies to the server's own crates, other crates log warnings and up.
    pub fn log_filter(&self) -> String {
        let level = match (&self.log, &self.command) {
            (Some(level), _) => level.as_str(),
            (None, CliCommand::Serve(_)) => "info",
            (None, _) => return "error".to_string(),
        };
        let levels = ["off", "error", "warn", "info", "debug", "trace"];
        match levels.contains(&level.to_ascii_lowercase().as_str()) {
            true => format!("warn,caerus_server={level},dls={level}"),
            false => level.to_string(),
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Create a new API key in a node's keys file (for bootstrap: the first admin key), append its SHA-256 hash to FILE and print the key once.
    Add {
        /// The keys file (created if missing).
        #[arg(long)]
        file: PathBuf,
        /// A unique name for the key (shown in logs; owns the transactions it begins).
        #[arg(long)]
        name: String,
        /// Limit the key to namespaces starting with this prefix (repeatable). Default: all namespaces.
        #[arg(long = "namespace")]
        namespaces: Vec<String>,
        /// Allow the key to call the operator API (list locks, abort transactions, status).
        #[arg(long)]
        admin: bool,
    },
    #[command(flatten)]
    Cluster(keys::ClusterKeysCommand),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn operator_commands_parse() {
        let cli = Cli::try_parse_from([
            "dls",
            "events",
            "--follow",
            "--from",
            "7",
            "--kind",
            "deadlock_resolved",
            "--namespace",
            "a",
            "--namespace",
            "b",
            "--endpoints",
            "h:1,h:2",
        ])
        .unwrap();
        let CliCommand::Events(e) = cli.command else { panic!("events") };
        assert!(e.follow);
        assert_eq!(e.from, 7);
        assert_eq!(e.namespaces, vec!["a", "b"]);
        assert_eq!(e.cluster.endpoints, vec!["h:1", "h:2"]);
        let cli = Cli::try_parse_from(["dls", "txn", "abort", "42", "--reason", "stuck"]).unwrap();
        assert!(matches!(cli.command, CliCommand::Txn(txn::TxnCommand::Abort(a)) if a.id == 42 && a.reason == "stuck"));
        let mut argv: Vec<&str> =
            "dls lock --shared --wait-timeout 500ms --ttl 5s jobs nightly -- sh -c".split(' ').collect();
        argv.push("exit 3");
        let cli = Cli::try_parse_from(argv).unwrap();
        let CliCommand::Lock(l) = cli.command else { panic!("lock") };
        assert!(l.shared && !l.skip_if_locked);
        assert_eq!(l.wait_timeout, Some(std::time::Duration::from_millis(500)));
        assert_eq!(l.min_hold, None);
        assert_eq!(l.kill_grace, None, "fitted to --ttl when dls lock runs");
        assert_eq!((l.namespace.as_str(), l.key.as_str()), ("jobs", "nightly"));
        assert_eq!(l.command, vec!["sh", "-c", "exit 3"]);
        assert!(Cli::try_parse_from(["dls", "lock", "jobs", "nightly"]).is_err(), "a command is required");
        let cli = Cli::try_parse_from(["dls", "members", "add", "4", "h:1/2", "--learner", "--catch-up-timeout", "5s"])
            .unwrap();
        let CliCommand::Members(members::MembersCommand::Add(a)) = cli.command else { panic!("members add") };
        assert_eq!((a.id, a.address.as_str(), a.learner), (4, "h:1/2", true));
        assert_eq!(a.catch_up_timeout, std::time::Duration::from_secs(5));
        let err = Cli::try_parse_from(["dls", "events", "--kind", "nope"]).unwrap_err();
        assert_eq!(err.exit_code(), connect::EXIT_USAGE);
    }

    #[test]
    fn client_commands_log_errors_only_unless_told() {
        let filter = |argv: &str| Cli::try_parse_from(argv.split(' ')).unwrap().log_filter();
        assert_eq!(filter("dls lock jobs nightly -- true"), "error");
        assert_eq!(filter("dls serve"), "warn,caerus_server=info,dls=info");
        assert_eq!(filter("dls lock --log warn jobs nightly -- true"), "warn,caerus_server=warn,dls=warn");
        assert_eq!(filter("dls locks --log caerus_core=debug"), "caerus_core=debug");
    }

    #[test]
    fn tls_flags_parse_and_a_certificate_needs_its_key() {
        let argv = "dls lock --cacert ca.pem --cert app.pem --key app-key.pem jobs nightly -- true";
        let cli = Cli::try_parse_from(argv.split(' ')).unwrap();
        let CliCommand::Lock(l) = cli.command else { panic!("lock") };
        assert_eq!(l.key, "nightly", "--key is the client key, the positional KEY the lock's");
        assert_eq!(l.cluster.client_key, Some(PathBuf::from("app-key.pem")));
        assert_eq!(l.cluster.cacert, Some(PathBuf::from("ca.pem")));
        for argv in ["dls status --cert app.pem", "dls locks --key app-key.pem"] {
            let err = Cli::try_parse_from(argv.split(' ')).unwrap_err();
            assert_eq!(err.exit_code(), connect::EXIT_USAGE, "{argv}");
        }
    }
}

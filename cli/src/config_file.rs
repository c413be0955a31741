//! `dls serve --config FILE`: the settings of the flags, read from TOML, and
//! `--print-config`, the effective configuration.
//!
//! A key is a long flag of `dls serve` as written on the command line (`data-dir`,
//! `peers`, `max-locks-per-txn`, `log-format`), so the flag's `--help` documents the key
//! and nothing has to be kept in step by hand. A source only fills what the ones above it
//! left unset: flags, then the `DLS_*` environment, then the file, then the defaults.
//! The file's values are handed to clap as if they were flags given after the user's, for
//! the settings neither the command line nor the environment set, so each is checked by
//! the flag's own parser.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

use crate::commands::Cli;

/// Arguments of `dls serve` that are not settings a file could hold.
const NOT_SETTINGS: [&str; 4] = ["help", "version", "config", "print-config"];

/// Why the command line and the config file together are not a valid configuration.
#[derive(Debug)]
pub enum LoadError {
    /// Bad flags, `--help` or `--version`: clap prints and exits as usual.
    Clap(clap::Error),
    /// The config file is missing, not TOML, or has a key or value no flag takes.
    Config(String),
}

/// The parsed command line, and the effective `serve` configuration when `--print-config`
/// asked for it.
pub struct Loaded {
    pub cli: Cli,
    pub print_config: Option<String>,
}

/// Parses `argv`, merging in the `serve --config` file (if any).
pub fn load(argv: Vec<OsString>) -> Result<Loaded, LoadError> {
    let mut cmd = Cli::command();
    // Built, so that `serve` carries the global settings (`--log`, `--log-format`) too.
    cmd.build();
    let serve_cmd = cmd.find_subcommand("serve").expect("serve is a subcommand");
    let mut from_file = BTreeSet::new();
    let mut merged = argv.clone();
    let config = serve_config(&argv);
    if let Some((path, given)) = &config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LoadError::Config(format!("cannot read the config file {}: {e}", path.display())))?;
        let extra = file_args(&text, serve_cmd, given, &mut from_file)
            .map_err(|e| LoadError::Config(format!("config file {}: {e}", path.display())))?;
        merged.extend(extra);
    }
    let matches = cmd.clone().try_get_matches_from(merged).map_err(|e| match &config {
        // A mistake in the flags themselves is told as clap tells it; what only fails once
        // the file's values are in is the file's.
        Some((path, _)) => match cmd.clone().try_get_matches_from(&argv) {
            Err(own) if own.kind() != ErrorKind::MissingRequiredArgument => LoadError::Clap(own),
            _ => LoadError::Config(format!(
                "config file {}: {}",
                path.display(),
                e.render().to_string().trim().trim_start_matches("error: ")
            )),
        },
        None => LoadError::Clap(e),
    })?;
    let print_config = match matches.subcommand() {
        Some(("serve", serve)) if serve.get_flag("print_config") => Some(render(serve_cmd, serve, &from_file)),
        _ => None,
    };
    Ok(Loaded { cli: Cli::from_arg_matches(&matches).map_err(LoadError::Clap)?, print_config })
}

/// The `serve --config` file and what the command line and the environment set, read
/// leniently: a flag may need another that only the file gives (`--peer-tls-cert` needs
/// `--peer-tls-ca`), which the strict parse after the merge checks.
fn serve_config(argv: &[OsString]) -> Option<(PathBuf, ArgMatches)> {
    let lenient = Cli::command().ignore_errors(true).try_get_matches_from(argv).ok()?;
    let Some(("serve", serve)) = lenient.subcommand() else { return None };
    Some((serve.get_one::<PathBuf>("config")?.clone(), serve.clone()))
}

/// The settings arguments of `dls serve` (its flags and the global ones such as `--log`).
fn settings(serve_cmd: &Command) -> impl Iterator<Item = (&clap::Arg, &str)> {
    serve_cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(|long| (a, long)))
        .filter(|(_, long)| !NOT_SETTINGS.contains(long))
}

/// The file's settings as `--flag=value` arguments, for those the command line and the
/// environment left unset. `from_file` collects the ids they set.
fn file_args(
    text: &str,
    serve_cmd: &Command,
    given: &ArgMatches,
    from_file: &mut BTreeSet<String>,
) -> Result<Vec<OsString>, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("not valid TOML: {e}"))?;
    let mut args = Vec::new();
    for (key, value) in &table {
        let Some((arg, long)) = settings(serve_cmd).find(|(_, long)| long == key) else {
            return Err(unknown_key(key, serve_cmd));
        };
        let id = arg.get_id().as_str();
        if matches!(given.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable)) {
            continue;
        }
        let flag = |v: &str| OsString::from(format!("--{long}={v}"));
        match (arg.get_action(), value) {
            (ArgAction::SetTrue, toml::Value::Boolean(on)) => {
                if *on {
                    args.push(OsString::from(format!("--{long}")));
                }
            }
            (ArgAction::SetTrue, _) => return Err(format!("{key} is a switch: write {key} = true or false")),
            (ArgAction::Append, toml::Value::Array(items)) => {
                for item in items {
                    args.push(flag(&scalar(key, item)?));
                }
            }
            (ArgAction::Append, v) => args.push(flag(&scalar(key, v)?)),
            (_, v) => args.push(flag(&scalar(key, v)?)),
        }
        from_file.insert(id.to_string());
    }
    Ok(args)
}

fn scalar(key: &str, value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        other => Err(format!("{key} takes a string or a number (like its flag), not {}", other.type_str())),
    }
}

fn unknown_key(key: &str, serve_cmd: &Command) -> String {
    let dashed = key.replace('_', "-");
    let hint = if settings(serve_cmd).any(|(_, long)| long == dashed) {
        format!("write it as {dashed} (keys are spelled like the long flags)")
    } else {
        "keys are the long flags of `dls serve` without the dashes in front (see `dls serve --help`, \
         or `dls serve --print-config` for them all)"
            .to_string()
    };
    format!("unknown key {key:?}: {hint}")
}

/// The effective configuration as TOML: every setting with where its value came from;
/// unset ones and secrets as comments, so the output can be fed back as a config file.
fn render(serve_cmd: &Command, m: &ArgMatches, from_file: &BTreeSet<String>) -> String {
    let mut out = String::from(
        "# Effective configuration of `dls serve` (flags > DLS_* environment > config file > defaults).\n",
    );
    for (arg, long) in settings(serve_cmd) {
        let id = arg.get_id().as_str();
        let source = if from_file.contains(id) {
            "config file".to_string()
        } else {
            match m.value_source(id) {
                Some(ValueSource::CommandLine) => "flag".to_string(),
                Some(ValueSource::EnvVariable) => {
                    format!("env {}", arg.get_env().map_or_else(String::new, |e| e.to_string_lossy().into_owned()))
                }
                _ => "default".to_string(),
            }
        };
        let raw: Vec<String> =
            m.get_raw(id).map(|vals| vals.map(|v| v.to_string_lossy().into_owned()).collect()).unwrap_or_default();
        let numeric_default = arg.get_default_values().iter().any(|d| d.to_string_lossy().parse::<u64>().is_ok());
        let value = match arg.get_action() {
            _ if raw.is_empty() && !matches!(arg.get_action(), ArgAction::Append) => None,
            ArgAction::SetTrue => Some(raw[0].clone()),
            ArgAction::Append => {
                let items: Vec<String> = raw.iter().map(|v| toml::Value::String(v.clone()).to_string()).collect();
                Some(format!("[{}]", items.join(", ")))
            }
            _ if numeric_default && raw[0].parse::<u64>().is_ok() => Some(raw[0].clone()),
            _ => Some(toml::Value::String(raw[0].clone()).to_string()),
        };
        let _ = match value {
            None => writeln!(out, "# {long} = (unset)"),
            Some(_) if arg.is_hide_env_values_set() => writeln!(out, "# {long} = (secret, redacted)  # {source}"),
            Some(v) => writeln!(out, "{long} = {v}  # {source}"),
        };
    }
    out
}

/// Exits like clap on a bad command line, or with the config file's problem.
pub fn exit_on(e: LoadError) -> ! {
    match e {
        LoadError::Clap(e) => e.exit(),
        LoadError::Config(message) => {
            eprintln!("dls: {message}");
            std::process::exit(crate::commands::connect::EXIT_USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_with(file: &str, flags: &[&str]) -> Result<Loaded, LoadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dls.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv: Vec<OsString> = vec!["dls".into(), "serve".into(), "--config".into(), path.into()];
        argv.extend(flags.iter().map(OsString::from));
        argv.push("--print-config".into());
        load(argv)
    }

    fn config_error(r: Result<Loaded, LoadError>) -> String {
        match r {
            Err(LoadError::Config(m)) => m,
            Err(LoadError::Clap(e)) => panic!("a clap error instead: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    fn serve_args(l: &Loaded) -> &caerus_server::ServeArgs {
        match &l.cli.command {
            crate::commands::CliCommand::Serve(a) => a,
            _ => panic!("serve"),
        }
    }

    #[test]
    fn the_file_fills_what_flags_leave_unset() {
        let file = r#"
            node-id = 3
            data-dir = "/var/lib/dls"
            peers = "1=10.0.0.1:7070/7080,2=10.0.0.2:7070/7080,3=10.0.0.3:7070/7080"
            insecure = true
            namespace-victim-policy = ["billing-=oldest", "reports=youngest"]
            http-allowed-host = "dls.internal"
            max-locks-per-txn = 50
            log-format = "json"
            cluster-secret = "0123456789abcdef0123"
        "#;
        let l = load_with(file, &["--data-dir", "/tmp/over", "--log", "debug"]).unwrap();
        let a = serve_args(&l);
        assert_eq!(a.node_id, 3);
        assert_eq!(a.data_dir, std::path::PathBuf::from("/tmp/over"), "the flag wins over the file");
        assert!(a.security.insecure);
        assert_eq!(a.namespace_victim_policies.len(), 2);
        assert_eq!(a.http_access.allowed_hosts, vec!["dls.internal"]);
        assert_eq!(a.limits.max_locks_per_txn, 50);
        assert_eq!(l.cli.log.as_deref(), Some("debug"));
        assert_eq!(l.cli.log_format, crate::commands::LogFormat::Json);

        let shown = l.print_config.unwrap();
        assert!(shown.contains("node-id = 3  # config file"), "{shown}");
        assert!(shown.contains("data-dir = \"/tmp/over\"  # flag"), "{shown}");
        assert!(shown.contains("heartbeat-ms = 50  # default"), "{shown}");
        assert!(shown.contains("namespace-victim-policy = [\"billing-=oldest\", \"reports=youngest\"]"), "{shown}");
        assert!(shown.contains("# tls-cert = (unset)"), "{shown}");
        assert!(shown.contains("# cluster-secret = (secret, redacted)  # config file"), "{shown}");
        assert!(!shown.contains("0123456789abcdef"), "the secret is shown:\n{shown}");
        // What it prints reads back as a config file with the same settings.
        let again = load_with(&shown, &[]).unwrap();
        assert_eq!(serve_args(&again).data_dir, std::path::PathBuf::from("/tmp/over"));
        assert_eq!(serve_args(&again).limits.max_locks_per_txn, 50);
    }

    #[test]
    fn a_flag_may_need_what_only_the_file_gives() {
        let file = "peer-tls-key = \"k.pem\"\npeer-tls-ca = \"ca.pem\"\n";
        let l = load_with(file, &["--peer-tls-cert", "n.pem"]).unwrap();
        assert_eq!(serve_args(&l).security.peer_tls_ca, Some(std::path::PathBuf::from("ca.pem")));
        let e = config_error(load_with("peer-tls-key = \"k.pem\"\n", &["--peer-tls-cert", "n.pem"]));
        assert!(e.contains("--peer-tls-ca"), "{e}");
        // A mistake in the flags is the flags', whatever the file holds.
        match load_with(file, &["--node-id", "x"]) {
            Err(LoadError::Clap(e)) => assert_eq!(e.kind(), ErrorKind::ValueValidation),
            _ => panic!("--node-id x accepted or blamed on the file"),
        }
    }

    #[test]
    fn mistakes_in_the_file_name_the_key() {
        let e = config_error(load_with("data_dir = \"x\"\n", &[]));
        assert!(e.contains("\"data_dir\"") && e.contains("data-dir"), "{e}");
        let e = config_error(load_with("colour = \"red\"\n", &[]));
        assert!(e.contains("unknown key \"colour\""), "{e}");
        let e = config_error(load_with("config = \"other.toml\"\n", &[]));
        assert!(e.contains("unknown key \"config\""), "{e}");
        let e = config_error(load_with("insecure = \"yes\"\n", &[]));
        assert!(e.contains("insecure = true or false"), "{e}");
        let e = config_error(load_with("max-locks-per-txn = 0\n", &[]));
        assert!(e.contains("max-locks-per-txn"), "{e}");
        let e = config_error(load_with("listen = [\"a\"]\n", &[]));
        assert!(e.contains("listen"), "{e}");
        let e = config_error(load_with("node-id = \n", &[]));
        assert!(e.contains("not valid TOML"), "{e}");
    }
}

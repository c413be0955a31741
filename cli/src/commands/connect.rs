//! How the operator commands reach the cluster, and how their failures are told to the
//! user: one place for the flags, the client and the error wording.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use caerus_core::{
    ClientConfig, DlsClient, Error, API_KEY_ENV, CA_FILE_ENV, CLIENT_CERT_FILE_ENV, CLIENT_KEY_FILE_ENV,
    DEFAULT_ENDPOINT, ENDPOINTS_ENV,
};
use clap::Args;

/// The environment variable for `--api-key-file`.
pub const API_KEY_FILE_ENV: &str = "CAERUS_API_KEY_FILE";

/// Exit code of a failure (the cluster said no, or could not be reached).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code of a usage mistake (bad flag or argument), as clap uses it.
pub const EXIT_USAGE: i32 = 2;

/// Where the cluster is and who we are.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Cluster nodes as HOST:PORT, comma separated (any or all nodes; the leader is found by
    /// itself). https://HOST:PORT for TLS; a bare HOST:PORT uses TLS once --cacert or --cert is given.
    #[arg(long, env = ENDPOINTS_ENV, value_delimiter = ',', default_value = DEFAULT_ENDPOINT, value_name = "LIST")]
    pub endpoints: Vec<String>,
    /// API key (operator commands need an admin key on a server with a keys file). It shows
    /// in `ps` and in a crontab: --api-key-file keeps it out of both.
    #[arg(long, env = API_KEY_ENV, hide_env_values = true, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Read the API key from FILE (surrounding whitespace trimmed). The file must not be
    /// readable by others (`chmod 600`); not with --api-key.
    #[arg(long, env = API_KEY_FILE_ENV, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Give up after this many seconds without an answer from the cluster (down, or without
    /// a leader), whatever the command waits for: `dls lock` after the shorter of this and
    /// --wait-timeout; `dls members add` waits --catch-up-timeout more only on a leader that
    /// took the request.
    #[arg(long, default_value_t = 15, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// CA bundle (PEM) the nodes' TLS certificates must chain to: the cluster's ca.pem from
    /// `dls certs init`. Without it, https endpoints are checked against the public web roots.
    #[arg(long, env = CA_FILE_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) for nodes started with --tls-client-ca (`dls certs client NAME`).
    #[arg(long, env = CLIENT_CERT_FILE_ENV, value_name = "FILE", requires = "client_key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long = "key", id = "client_key", env = CLIENT_KEY_FILE_ENV, value_name = "FILE", requires = "cert")]
    pub client_key: Option<PathBuf>,
}

impl ClusterArgs {
    /// The endpoints as given, without blanks.
    pub fn endpoint_list(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect()
    }

    fn config(&self, request_timeout: Duration) -> Result<ClientConfig, CliError> {
        let total = Duration::from_secs(self.timeout);
        let config = ClientConfig::new(self.endpoint_list())
            .with_retry_deadline(total)
            .with_request_timeout(request_timeout.min(total))
            .with_connect_timeout(ClientConfig::DEFAULT_CONNECT_TIMEOUT.min(total));
        // The flags (or their environment variables, read by clap) decide; nothing else.
        let config = ClientConfig {
            ca_file: self.cacert.clone(),
            client_cert: self.cert.clone().zip(self.client_key.clone()),
            ..config
        };
        Ok(match self.key()? {
            Some(key) => config.with_api_key(key),
            None => config.without_api_key(),
        })
    }

    /// The API key from --api-key or --api-key-file (or their environment variables).
    fn key(&self) -> Result<Option<String>, CliError> {
        let given = self.api_key.as_deref().map(str::trim).filter(|k| !k.is_empty());
        let Some(path) = &self.api_key_file else { return Ok(given.map(str::to_string)) };
        if given.is_some() {
            // Checked here rather than by clap: either may come from the environment, and
            // the message names both spellings.
            return Err(CliError::usage(format!(
                "the API key is given twice: --api-key (or {API_KEY_ENV}) and --api-key-file (or \
                 {API_KEY_FILE_ENV}); keep one"
            )));
        }
        read_key_file(path).map(Some)
    }

    /// A client with the usual per-attempt timeout.
    pub async fn client(&self) -> Result<DlsClient, CliError> {
        self.client_with(ClientConfig::DEFAULT_REQUEST_TIMEOUT).await
    }

    /// A client whose single attempts (and pinned per-node queries) end after `request_timeout`.
    pub async fn client_with(&self, request_timeout: Duration) -> Result<DlsClient, CliError> {
        if self.endpoint_list().is_empty() {
            return Err(CliError::usage(format!(
                "--endpoints is empty; give HOST:PORT of at least one node (or set {ENDPOINTS_ENV})"
            )));
        }
        DlsClient::connect(self.config(request_timeout)?).await.map_err(CliError::from)
    }
}

/// Reads an API key file: the key, trimmed. A file others can read is refused (the key is
/// a password; ssh refuses such private keys too), and a missing or empty file says so.
fn read_key_file(path: &std::path::Path) -> Result<String, CliError> {
    let shown = path.display();
    let file =
        std::fs::File::open(path).map_err(|e| CliError::usage(format!("--api-key-file: cannot read {shown}: {e}")))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            file.metadata().map_err(|e| CliError::usage(format!("--api-key-file: {shown}: {e}")))?.permissions().mode();
        if mode & 0o004 != 0 {
            return Err(CliError::usage(format!(
                "--api-key-file: {shown} is readable by every user (mode {:o}); `chmod 600 {shown}` \
                 (a Kubernetes secret volume: defaultMode 0440)",
                mode & 0o777
            )));
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &file, &mut text)
        .map_err(|e| CliError::usage(format!("--api-key-file: cannot read {shown}: {e}")))?;
    match text.trim() {
        "" => Err(CliError::usage(format!("--api-key-file: {shown} is empty; it should hold the API key"))),
        key => Ok(key.to_string()),
    }
}

/// A failed command: what to print after `dls: `, and the exit code.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub exit_code: i32,
}

impl CliError {
    pub fn failure(message: impl Into<String>) -> Self {
        CliError { message: message.into(), exit_code: EXIT_FAILURE }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        CliError { message: message.into(), exit_code: EXIT_USAGE }
    }

    /// The reader went away (e.g. `dls events --follow | head`): stop without a word.
    pub fn quiet() -> Self {
        CliError { message: String::new(), exit_code: 0 }
    }
}

impl From<Error> for CliError {
    /// Says what happened and what to do about it.
    fn from(e: Error) -> Self {
        let m = e.message();
        match &e {
            // The key is limited to other namespaces: an admin key is not what is missing.
            Error::PermissionDenied { key_namespaces: Some(prefixes), .. } => CliError::failure(format!(
                "permission denied: {m}\n     this API key may use only namespaces starting with {}; use one of \
                 those, or a key that may use this namespace",
                prefixes.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
            )),
            Error::PermissionDenied { .. } => CliError::failure(format!(
                "permission denied: {m}\n     operator commands need an admin key: create one with \
                 `dls keys add --file KEYS --name NAME --admin`, add it to the server's keys file, and pass it \
                 with --api-key-file, --api-key or {API_KEY_ENV}"
            )),
            Error::Unauthenticated { .. } => CliError::failure(format!(
                "not authenticated: {m}\n     pass an API key from the server's keys file with --api-key-file, --api-key or {API_KEY_ENV}"
            )),
            Error::Unavailable { .. } => CliError::failure(format!(
                "cluster unavailable: {m}\n     check --endpoints (or {ENDPOINTS_ENV}) and that the nodes are running; \
                 nodes that serve TLS need --cacert (and --cert/--key if they require client certificates)"
            )),
            Error::Config { .. } => {
                CliError::usage(format!("{m} (check --endpoints, --api-key, --cacert, --cert and --key)"))
            }
            Error::InvalidArgument { .. } => CliError::usage(format!("invalid argument: {m}")),
            Error::TransactionNotFound { .. } => CliError::failure(format!(
                "{m}\n     finished transactions are forgotten after the retention window (10 minutes by default)"
            )),
            Error::CursorExpired { .. } => CliError::failure(format!(
                "{m}\n     older events are no longer kept: start from the oldest retained one (omit --from)"
            )),
            _ => CliError::failure(e.to_string()),
        }
    }
}

/// Writes one line to stdout; a closed stdout ends the command quietly.
pub fn print_line(line: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}") {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::quiet()),
        Err(e) => Err(CliError::failure(format!("cannot write to stdout: {e}"))),
    }
}

/// Prints a JSON value on one line.
pub fn print_json(value: &serde_json::Value) -> Result<(), CliError> {
    print_line(&value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_do() {
        let e = CliError::from(Error::PermissionDenied { message: "not an admin key".into(), key_namespaces: None });
        assert_eq!(e.exit_code, EXIT_FAILURE);
        assert!(e.message.contains("dls keys add") && e.message.contains("--admin"), "{}", e.message);
        let denied = Error::PermissionDenied {
            message: "may not use namespace \"ops\"".into(),
            key_namespaces: Some(vec!["billing-".into(), "jobs".into()]),
        };
        let e = CliError::from(denied);
        assert!(e.message.contains("only namespaces starting with \"billing-\", \"jobs\""), "{}", e.message);
        assert!(!e.message.contains("admin"), "{}", e.message);
        let e = CliError::from(Error::Unavailable { message: "no leader".into() });
        assert!(e.message.contains("--endpoints"), "{}", e.message);
        let e =
            CliError::from(Error::InvalidArgument { message: "namespace_prefixes".into(), semaphore_permits: None });
        assert_eq!(e.exit_code, EXIT_USAGE);
    }

    #[test]
    fn endpoints_and_timeouts() {
        let args = ClusterArgs {
            endpoints: vec![" a:1".into(), "".into(), "b:2".into()],
            api_key: None,
            api_key_file: None,
            timeout: 3,
            cacert: None,
            cert: None,
            client_key: None,
        };
        assert_eq!(args.endpoint_list(), vec!["a:1", "b:2"]);
        let c = args.config(Duration::from_secs(5)).unwrap();
        assert_eq!(c.retry_deadline, Duration::from_secs(3));
        assert_eq!(c.request_timeout, Duration::from_secs(3));
        assert_eq!(c.api_key, None);
        assert_eq!((c.ca_file, c.client_cert), (None, None));
        let keyed = ClusterArgs { api_key: Some(" k ".into()), ..args };
        assert_eq!(keyed.config(Duration::from_secs(1)).unwrap().api_key.as_deref(), Some("k"));
    }

    #[test]
    fn an_api_key_file_is_read_trimmed_and_a_careless_one_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, " secret \n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let args = ClusterArgs {
            endpoints: vec!["a:1".into()],
            api_key: None,
            api_key_file: Some(path.clone()),
            timeout: 3,
            cacert: None,
            cert: None,
            client_key: None,
        };
        assert_eq!(args.key().unwrap().as_deref(), Some("secret"));
        let twice = ClusterArgs { api_key: Some("k".into()), ..args.clone() };
        assert_eq!(twice.key().unwrap_err().exit_code, EXIT_USAGE);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o604)).unwrap();
        assert!(args.key().unwrap_err().message.contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "\n").unwrap();
        assert!(args.key().unwrap_err().message.contains("is empty"));
        let missing = ClusterArgs { api_key_file: Some(dir.path().join("none")), ..args };
        assert!(missing.key().unwrap_err().message.contains("cannot read"));
    }

    #[test]
    fn tls_flags_reach_the_client() {
        let args = ClusterArgs {
            endpoints: vec!["a:1".into()],
            api_key: None,
            api_key_file: None,
            timeout: 3,
            cacert: Some("ca.pem".into()),
            cert: Some("client-app.pem".into()),
            client_key: Some("client-app-key.pem".into()),
        };
        let c = args.config(Duration::from_secs(5)).unwrap();
        assert_eq!(c.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(c.client_cert, Some(("client-app.pem".into(), "client-app-key.pem".into())));
    }
}

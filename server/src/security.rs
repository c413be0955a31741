//! The trust settings of `dls serve`: TLS on the client and HTTP ports, how peers
//! authenticate each other, and the secure-by-default rule that refuses to expose a port
//! beyond loopback without keys and TLS.
//!
//! Three ports, three audiences: the client port (API keys, optional TLS and client
//! certificates), the peer port (raft only: mutual TLS, or a cluster secret on loopback),
//! the HTTP port (operators and the Playground: same keys, optional TLS).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::listeners::Listeners;
use crate::raft::peer_tls::PeerTlsFiles;
use crate::secret_files::{self, Strictness};
use crate::tls::{Protocol, ServerTls, TlsFiles};

#[derive(Args, Debug, Clone, Default)]
pub struct SecurityArgs {
    /// Certificate chain (PEM) for TLS on the client and HTTP ports (`dls certs node`).
    /// Reloaded on SIGHUP (Windows has none: read at start only).
    #[arg(long, env = "DLS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "DLS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA bundle (PEM): clients of the client and HTTP ports must present a certificate
    /// signed by it (mutual TLS). Needs --tls-cert.
    #[arg(long, env = "DLS_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// This node's certificate (PEM) on the peer port: mutual TLS between nodes, against
    /// --peer-tls-ca. Reloaded on SIGHUP (Windows has none: read at start only).
    #[arg(long, env = "DLS_PEER_TLS_CERT", requires_all = ["peer_tls_key", "peer_tls_ca"])]
    pub peer_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --peer-tls-cert.
    #[arg(long, env = "DLS_PEER_TLS_KEY", requires = "peer_tls_cert")]
    pub peer_tls_key: Option<PathBuf>,
    /// The cluster CA (PEM): peers must present a node certificate (`dls certs node`) signed by it.
    #[arg(long, env = "DLS_PEER_TLS_CA", requires = "peer_tls_cert")]
    pub peer_tls_ca: Option<PathBuf>,
    /// File holding the cluster secret every peer call carries (at least 16 printable
    /// characters; the same on every node). Enough on loopback; across machines use peer TLS.
    /// Refused when its group or others may read it (`chmod 600`).
    #[arg(long, env = "DLS_CLUSTER_SECRET_FILE", conflicts_with = "cluster_secret")]
    pub cluster_secret_file: Option<PathBuf>,
    /// The cluster secret itself (prefer the environment variable or --cluster-secret-file:
    /// a command line is visible to every local user).
    #[arg(long, env = "DLS_CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Option<String>,
    /// Serve on a non-loopback address without API keys or TLS (or peers without TLS).
    /// Anyone who reaches the port can then take, see and break locks: for isolated test
    /// networks only.
    #[arg(long, env = "DLS_INSECURE")]
    pub insecure: bool,
}

/// The resolved TLS and peer settings of a node.
pub struct Security {
    /// The client port's TLS (ALPN h2), if any.
    pub grpc_tls: Option<Arc<ServerTls>>,
    /// The HTTP port's TLS (same files, ALPN http/1.1), if any.
    pub http_tls: Option<Arc<ServerTls>>,
    /// The peer port's TLS (mutual, against the cluster CA), if any.
    pub peer_tls: Option<Arc<ServerTls>>,
    pub peer_tls_files: Option<PeerTlsFiles>,
    pub cluster_secret: Option<String>,
}

impl SecurityArgs {
    /// Reads the files and applies the secure-by-default rule. `has_keys`: an API keys
    /// file is configured. Returns the warnings to log (for `--insecure`).
    pub fn resolve(&self, listeners: &Listeners, has_keys: bool) -> anyhow::Result<(Security, Vec<String>)> {
        let client_files = self.tls_cert.as_ref().map(|cert| TlsFiles {
            cert: cert.clone(),
            key: self.tls_key.clone().expect("clap requires --tls-key"),
            client_ca: self.tls_client_ca.clone(),
        });
        let peer_tls_files = self.peer_tls_cert.as_ref().map(|cert| PeerTlsFiles {
            cert: cert.clone(),
            key: self.peer_tls_key.clone().expect("clap requires --peer-tls-key"),
            ca: self.peer_tls_ca.clone().expect("clap requires --peer-tls-ca"),
        });
        let cluster_secret = self.cluster_secret()?;
        let mut warnings =
            exposure(listeners, has_keys, client_files.is_some(), peer_tls_files.is_some(), self.insecure)?;
        for (flag, key) in [("--tls-key", &self.tls_key), ("--peer-tls-key", &self.peer_tls_key)] {
            if let Some(key) = key {
                warnings.extend(secret_files::check_mode(key, flag, Strictness::NoOthers)?);
            }
        }
        if listeners.peer.is_some() && peer_tls_files.is_none() && cluster_secret.is_none() {
            anyhow::bail!(
                "peers must authenticate each other: give every node --peer-tls-cert/--peer-tls-key/--peer-tls-ca \
                 (see `dls certs`), or on loopback the same --cluster-secret-file (or DLS_CLUSTER_SECRET)"
            );
        }
        let server = |files: &TlsFiles, protocol| ServerTls::load(files.clone(), protocol).map(Arc::new);
        let security = Security {
            grpc_tls: client_files.as_ref().map(|f| server(f, Protocol::Grpc)).transpose()?,
            http_tls: client_files.as_ref().map(|f| server(f, Protocol::Http1)).transpose()?,
            peer_tls: match (&peer_tls_files, listeners.peer) {
                (Some(p), Some(_)) => Some(server(
                    &TlsFiles { cert: p.cert.clone(), key: p.key.clone(), client_ca: Some(p.ca.clone()) },
                    Protocol::Grpc,
                )?),
                _ => None,
            },
            peer_tls_files,
            cluster_secret,
        };
        Ok((security, warnings))
    }

    fn cluster_secret(&self) -> anyhow::Result<Option<String>> {
        let secret = match (&self.cluster_secret_file, &self.cluster_secret) {
            (Some(path), _) => Some({
                secret_files::check_mode(path, "--cluster-secret-file", Strictness::OwnerOnly)?;
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read --cluster-secret-file {}", path.display()))?
                    .trim()
                    .to_string()
            }),
            (None, Some(s)) => Some(s.trim().to_string()),
            (None, None) => None,
        };
        if let Some(s) = &secret {
            crate::raft::peer_auth::validate_secret(s).map_err(|e| anyhow::anyhow!("--cluster-secret-file: {e}"))?;
        }
        Ok(secret)
    }
}

/// Whether `addr` (HOST:PORT) names this machine: a loopback IP address or `localhost`.
/// Any other host name may resolve anywhere, so it is not taken for loopback.
pub fn is_loopback_host(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Secure by default: a port reachable beyond this machine needs keys and TLS (client and
/// HTTP ports) or mutual TLS (peer port), unless `--insecure` says the network is trusted.
fn exposure(
    listeners: &Listeners,
    has_keys: bool,
    client_tls: bool,
    peer_tls: bool,
    insecure: bool,
) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for (port, addr) in [("client port (--listen)", listeners.client), ("HTTP port (--http-listen)", listeners.http)] {
        if addr.ip().is_loopback() {
            continue;
        }
        let mut missing = Vec::new();
        if !has_keys {
            missing.push("--api-keys-file (see `dls keys add`)");
        }
        if !client_tls {
            missing.push("--tls-cert and --tls-key (see `dls certs`)");
        }
        if !missing.is_empty() {
            problems.push(format!("the {port} {addr} is not loopback but has no {}", missing.join(" and no ")));
        }
    }
    if let Some(addr) = listeners.peer.filter(|a| !a.ip().is_loopback()) {
        if !peer_tls {
            problems.push(format!(
                "the peer port {addr} is not loopback but has no --peer-tls-cert/--peer-tls-key/--peer-tls-ca \
                 (a cluster secret alone travels in clear)"
            ));
        }
    }
    if problems.is_empty() {
        return Ok(Vec::new());
    }
    if insecure {
        return Ok(problems
            .into_iter()
            .map(|p| format!("INSECURE: {p}; anyone who reaches it can take, read and break locks"))
            .collect());
    }
    anyhow::bail!(
        "refusing to start: {}. Add them, bind to 127.0.0.1, or pass --insecure on an isolated network",
        problems.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(client: &str, peer: Option<&str>, http: &str) -> Listeners {
        Listeners {
            client: client.parse().unwrap(),
            peer: peer.map(|p| p.parse().unwrap()),
            http: http.parse().unwrap(),
        }
    }

    #[test]
    fn only_loopback_addresses_and_localhost_are_taken_for_this_machine() {
        for local in ["127.0.0.1:7080", "127.9.9.9:1", "[::1]:7080", "localhost:7080", "LOCALHOST:1"] {
            assert!(is_loopback_host(local), "{local}");
        }
        for remote in ["10.0.0.2:7080", "[::2]:7080", "node-2.internal:7080", "localhost.evil.com:1", "0.0.0.0:1"] {
            assert!(!is_loopback_host(remote), "{remote}");
        }
    }

    #[test]
    fn loopback_needs_nothing_and_an_exposed_port_needs_keys_and_tls() {
        let local = listeners("127.0.0.1:7070", Some("127.0.0.1:7080"), "127.0.0.1:7071");
        assert!(exposure(&local, false, false, false, false).unwrap().is_empty());

        let open = listeners("0.0.0.0:7070", None, "127.0.0.1:7071");
        let err = exposure(&open, false, false, false, false).unwrap_err().to_string();
        assert!(err.contains("--api-keys-file") && err.contains("--tls-cert") && err.contains("--insecure"), "{err}");
        let err = exposure(&open, true, false, false, false).unwrap_err().to_string();
        assert!(!err.contains("--api-keys-file") && err.contains("--tls-cert"), "{err}");
        assert!(exposure(&open, true, true, false, false).unwrap().is_empty());

        let http = listeners("127.0.0.1:7070", None, "10.0.0.1:7071");
        assert!(exposure(&http, true, false, false, false).unwrap_err().to_string().contains("HTTP port"));

        let peers = listeners("127.0.0.1:7070", Some("10.0.0.1:7080"), "127.0.0.1:7071");
        assert!(exposure(&peers, false, false, false, false).unwrap_err().to_string().contains("--peer-tls-cert"));
        assert!(exposure(&peers, false, false, true, false).unwrap().is_empty());

        let warnings = exposure(&open, false, false, false, true).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("INSECURE"), "{warnings:?}");
    }
}

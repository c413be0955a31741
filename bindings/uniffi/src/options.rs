//! What the foreign side configures: the client's connection and a transaction's options.

use std::time::Duration;

use caerus_core as core;

/// Connection settings. Empty `endpoints` and a null `api_key` fall back to
/// `DLS_ENDPOINTS` / `CAERUS_API_KEY`, then `127.0.0.1:7070` and no key.
/// TLS: `https://host:port` endpoints (a bare `host:port` means TLS once a CA file or a
/// client certificate is set); the CA file is the cluster CA (PEM) the nodes'
/// certificates must chain to, the client certificate and key (PEM) are for nodes started
/// with `--tls-client-ca`. Null TLS files fall back to `DLS_CA_FILE`,
/// `DLS_CLIENT_CERT_FILE` and `DLS_CLIENT_KEY_FILE`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ClientConfig {
    #[uniffi(default)]
    pub endpoints: Vec<String>,
    #[uniffi(default)]
    pub api_key: Option<String>,
    #[uniffi(default)]
    pub connect_timeout_ms: Option<u64>,
    #[uniffi(default)]
    pub request_timeout_ms: Option<u64>,
    #[uniffi(default)]
    pub retry_deadline_ms: Option<u64>,
    #[uniffi(default)]
    pub ca_file: Option<String>,
    #[uniffi(default)]
    pub client_cert_file: Option<String>,
    #[uniffi(default)]
    pub client_key_file: Option<String>,
}

impl TryFrom<ClientConfig> for core::ClientConfig {
    type Error = core::Error;

    fn try_from(c: ClientConfig) -> Result<Self, core::Error> {
        let mut config = core::ClientConfig::from_env();
        if !c.endpoints.is_empty() {
            config.endpoints = c.endpoints;
        }
        if let Some(key) = c.api_key.filter(|k| !k.is_empty()) {
            config = config.with_api_key(key);
        }
        if let Some(ms) = c.connect_timeout_ms {
            config = config.with_connect_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = c.request_timeout_ms {
            config = config.with_request_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = c.retry_deadline_ms {
            config = config.with_retry_deadline(Duration::from_millis(ms));
        }
        let path = |p: Option<String>| p.filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
        config.with_tls_files(path(c.ca_file), path(c.client_cert_file), path(c.client_key_file))
    }
}

/// Options of a transaction; null fields take core's defaults.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TransactionOptions {
    /// Lease timeout in milliseconds (heartbeats keep it alive).
    #[uniffi(default)]
    pub timeout_ms: Option<u64>,
    /// Deadlock victim choice: lower priority is aborted first.
    #[uniffi(default)]
    pub priority: Option<i32>,
    /// A label shown by `dls locks` / `dls txn show` and in events.
    #[uniffi(default)]
    pub name: Option<String>,
    /// The server ends the transaction this many milliseconds after it began, heartbeats
    /// or not (100 ms .. 7 days; null: no bound).
    #[uniffi(default)]
    pub max_duration_ms: Option<u64>,
    /// Keep acquire streams open to hear at once that the server ended the transaction
    /// (operator abort, deadlock victim, lease expiry, max duration): the lost signal fires
    /// then, not at the next heartbeat. One open stream per transaction. Default false.
    #[uniffi(default = false)]
    pub lost_stream: bool,
}

impl From<TransactionOptions> for core::TransactionOptions {
    fn from(o: TransactionOptions) -> Self {
        let mut out = core::TransactionOptions::default();
        if let Some(ms) = o.timeout_ms {
            out = out.with_timeout_ms(ms);
        }
        if let Some(p) = o.priority {
            out = out.with_priority(p);
        }
        if let Some(n) = o.name {
            out = out.with_name(n);
        }
        if let Some(ms) = o.max_duration_ms {
            out = out.with_max_duration_ms(ms);
        }
        out.with_lost_stream(o.lost_stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_falls_back_to_defaults() {
        let c: core::ClientConfig = ClientConfig {
            endpoints: vec!["10.0.0.1:7070".into()],
            api_key: None,
            connect_timeout_ms: Some(100),
            request_timeout_ms: None,
            retry_deadline_ms: None,
            ca_file: Some("ca.pem".into()),
            client_cert_file: None,
            client_key_file: None,
        }
        .try_into()
        .unwrap();
        assert_eq!(c.endpoints, vec!["10.0.0.1:7070".to_string()]);
        assert_eq!(c.connect_timeout, Duration::from_millis(100));
        assert_eq!(c.ca_file, Some("ca.pem".into()));
    }
}

//! Client configuration: which nodes to talk to, the API key, and time budgets.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::error::{Error, Result};

/// Environment variable holding a comma-separated endpoint list, read by [`ClientConfig::from_env`].
pub const ENDPOINTS_ENV: &str = "DLS_ENDPOINTS";
/// Environment variable holding the API key, read by [`ClientConfig::new`] and [`ClientConfig::from_env`].
pub const API_KEY_ENV: &str = "CAERUS_API_KEY";
/// Endpoint used by [`ClientConfig::from_env`] when `DLS_ENDPOINTS` is unset or empty.
pub const DEFAULT_ENDPOINT: &str = "127.0.0.1:7070";
/// Environment variable naming a CA bundle (PEM) to trust for TLS, read by [`ClientConfig::new`].
pub const CA_FILE_ENV: &str = "DLS_CA_FILE";
/// Environment variable naming a client certificate (PEM), for servers that require one.
pub const CLIENT_CERT_FILE_ENV: &str = "DLS_CLIENT_CERT_FILE";
/// Environment variable naming the client certificate's private key (PEM).
pub const CLIENT_KEY_FILE_ENV: &str = "DLS_CLIENT_KEY_FILE";

/// How a [`DlsClient`](crate::DlsClient) reaches the cluster.
#[derive(Clone)]
pub struct ClientConfig {
    /// Cluster nodes as `host:port`, `http://host:port` or `https://host:port`. One is
    /// enough; the client finds the leader through redirects, and more make it robust to
    /// that one node being down. A bare `host:port` uses TLS when a CA file or a client
    /// certificate is configured.
    pub endpoints: Vec<String>,
    /// Sent as `authorization: Bearer <key>` on every call.
    pub api_key: Option<String>,
    /// Time allowed to open a TCP/HTTP2 connection to a node. Default 2 s.
    pub connect_timeout: Duration,
    /// Time allowed for one attempt of a unary call. Default 5 s.
    pub request_timeout: Duration,
    /// Total time to keep retrying a call across leader elections and unreachable nodes
    /// before giving up with [`Error::Unavailable`]. Default 15 s.
    pub retry_deadline: Duration,
    /// CA bundle (PEM) that server certificates must chain to. Without it, TLS endpoints
    /// are checked against the public web roots. Default: `DLS_CA_FILE`.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM), for servers started with `--tls-client-ca`.
    /// Default: `DLS_CLIENT_CERT_FILE` and `DLS_CLIENT_KEY_FILE`.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: never let it reach logs through a Debug print.
        f.debug_struct("ClientConfig")
            .field("endpoints", &self.endpoints)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("retry_deadline", &self.retry_deadline)
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert)
            .finish()
    }
}

impl ClientConfig {
    /// Default connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default per-attempt timeout of unary calls.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default total retry budget.
    pub const DEFAULT_RETRY_DEADLINE: Duration = Duration::from_secs(15);

    /// A configuration for these endpoints with default timeouts. The API key is taken
    /// from `CAERUS_API_KEY` if that is set and non-empty, the TLS files from
    /// `DLS_CA_FILE`, `DLS_CLIENT_CERT_FILE` and `DLS_CLIENT_KEY_FILE`.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_lookup(endpoints.into_iter().map(Into::into).collect(), env_var)
    }

    fn with_lookup(endpoints: Vec<String>, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let file = |name| lookup(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            endpoints,
            api_key: api_key_from(lookup(API_KEY_ENV)),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            retry_deadline: Self::DEFAULT_RETRY_DEADLINE,
            ca_file: file(CA_FILE_ENV),
            // One of the pair without the other is kept with an empty path, so that connecting
            // fails naming the missing variable instead of silently sending no certificate.
            client_cert: match (file(CLIENT_CERT_FILE_ENV), file(CLIENT_KEY_FILE_ENV)) {
                (None, None) => None,
                (cert, key) => Some((cert.unwrap_or_default(), key.unwrap_or_default())),
            },
        }
    }

    /// A configuration from the environment: endpoints from `DLS_ENDPOINTS` (comma
    /// separated, default `127.0.0.1:7070`), API key from `CAERUS_API_KEY`.
    pub fn from_env() -> Self {
        Self::from_lookup(env_var)
    }

    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let endpoints = parse_endpoint_list(lookup(ENDPOINTS_ENV).as_deref());
        Self::with_lookup(endpoints, lookup)
    }

    /// Sets the API key sent as `authorization: Bearer <key>`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sends no API key, even if `CAERUS_API_KEY` is set.
    pub fn without_api_key(mut self) -> Self {
        self.api_key = None;
        self
    }

    /// Sets the connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the per-attempt timeout of unary calls.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the total retry budget of a call.
    pub fn with_retry_deadline(mut self, deadline: Duration) -> Self {
        self.retry_deadline = deadline;
        self
    }

    /// Trusts this CA bundle (PEM) for TLS endpoints; bare `host:port` endpoints then use TLS.
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Presents this client certificate and key (PEM) to servers that require one.
    pub fn with_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// Applies the TLS files a language binding was given: each `None` keeps what the
    /// environment said (`DLS_CA_FILE`, ...). A certificate and its key come together, so
    /// one without the other is a configuration error rather than a client that silently
    /// presents no certificate.
    pub fn with_tls_files(
        mut self,
        ca_file: Option<PathBuf>,
        client_cert_file: Option<PathBuf>,
        client_key_file: Option<PathBuf>,
    ) -> Result<Self> {
        if let Some(ca) = ca_file {
            self.ca_file = Some(ca);
        }
        match (client_cert_file, client_key_file) {
            (Some(cert), Some(key)) => self.client_cert = Some((cert, key)),
            (None, None) => {}
            (Some(cert), None) => {
                return Err(Error::config(format!("client certificate {} given without its key file", cert.display())))
            }
            (None, Some(key)) => {
                return Err(Error::config(format!("client key {} given without its certificate file", key.display())))
            }
        }
        Ok(self)
    }

    /// Whether a bare `host:port` means TLS: a CA file or a client certificate is set, or
    /// some endpoint says `https://`.
    pub(crate) fn default_tls(&self) -> bool {
        self.ca_file.is_some()
            || self.client_cert.is_some()
            || self.endpoints.iter().any(|e| e.trim().to_ascii_lowercase().starts_with("https://"))
    }

    /// The TLS settings of `https://` channels, with the files read now so a missing or
    /// broken file is reported at connect time, naming it.
    pub(crate) fn tls(&self) -> Result<ClientTlsConfig> {
        let read = |p: &Path, what: &str| {
            let bytes =
                std::fs::read(p).map_err(|e| Error::config(format!("cannot read {what} {}: {e}", p.display())))?;
            if !String::from_utf8_lossy(&bytes).contains("-----BEGIN") {
                return Err(Error::config(format!("{what} {} is not a PEM file", p.display())));
            }
            Ok(bytes)
        };
        let mut tls = ClientTlsConfig::new();
        tls = match &self.ca_file {
            Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca, "CA file")?)),
            None => tls.with_webpki_roots(),
        };
        if let Some((cert, key)) = &self.client_cert {
            if cert.as_os_str().is_empty() || key.as_os_str().is_empty() {
                return Err(Error::config(format!(
                    "a client certificate needs both files: set {CLIENT_CERT_FILE_ENV} and {CLIENT_KEY_FILE_ENV} (or neither)"
                )));
            }
            tls = tls.identity(Identity::from_pem(read(cert, "client certificate")?, read(key, "client key")?));
        }
        Ok(tls)
    }

    /// Checks the configuration and returns the endpoints as `http(s)://host:port` URIs.
    pub(crate) fn validate(&self) -> Result<Vec<String>> {
        if self.endpoints.is_empty() {
            return Err(Error::config("no endpoints configured"));
        }
        for (name, value) in [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
            ("retry_deadline", self.retry_deadline),
        ] {
            if value.is_zero() {
                return Err(Error::config(format!("{name} must be greater than zero")));
            }
        }
        if let Some(key) = &self.api_key {
            if key.trim().is_empty() {
                return Err(Error::config("api_key is empty"));
            }
            if !key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::config(
                    "api_key must be printable ASCII without spaces (it travels in an HTTP header)",
                ));
            }
        }
        let tls = self.default_tls();
        let mut uris: Vec<String> = Vec::with_capacity(self.endpoints.len());
        for e in &self.endpoints {
            let uri = normalize_endpoint(e, tls)?;
            if !uris.contains(&uri) {
                uris.push(uri);
            }
        }
        Ok(uris)
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn api_key_from(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Splits a comma-separated endpoint list; empty or missing means the default endpoint.
pub(crate) fn parse_endpoint_list(value: Option<&str>) -> Vec<String> {
    let list: Vec<String> =
        value.unwrap_or("").split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if list.is_empty() {
        vec![DEFAULT_ENDPOINT.to_string()]
    } else {
        list
    }
}

/// Turns `host:port`, `http://host:port` or `https://host:port` into the URI a channel is
/// built from; a bare `host:port` gets `https` when `tls` is set.
pub(crate) fn normalize_endpoint(endpoint: &str, tls: bool) -> Result<String> {
    let trimmed = endpoint.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(Error::config("empty endpoint"));
    }
    let (scheme, rest) = match trimmed.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => ("http", rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => ("https", rest),
        Some((scheme, _)) => {
            return Err(Error::config(format!(
                "endpoint {endpoint:?}: unsupported scheme {scheme:?} (use host:port, http://host:port or https://host:port)"
            )))
        }
        None => (if tls { "https" } else { "http" }, trimmed),
    };
    if rest.is_empty() || rest.contains('/') {
        return Err(Error::config(format!("endpoint {endpoint:?}: expected host:port")));
    }
    let uri = format!("{scheme}://{rest}");
    let parsed: tonic::codegen::http::Uri =
        uri.parse().map_err(|e| Error::config(format!("endpoint {endpoint:?}: {e}")))?;
    if parsed.port_u16().is_none() {
        return Err(Error::config(format!("endpoint {endpoint:?}: missing port (expected host:port)")));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn env_defaults() {
        let c = ClientConfig::from_lookup(lookup(&[]));
        assert_eq!(c.endpoints, vec!["127.0.0.1:7070"]);
        assert_eq!(c.api_key, None);
        assert_eq!(c.connect_timeout, Duration::from_secs(2));
        assert_eq!(c.request_timeout, Duration::from_secs(5));
        assert_eq!(c.retry_deadline, Duration::from_secs(15));
    }

    #[test]
    fn env_endpoint_list_and_key() {
        let c = ClientConfig::from_lookup(lookup(&[
            ("DLS_ENDPOINTS", " a:1, http://b:2 ,,c:3,"),
            ("CAERUS_API_KEY", "  secret-key \n"),
        ]));
        assert_eq!(c.endpoints, vec!["a:1", "http://b:2", "c:3"]);
        assert_eq!(c.api_key.as_deref(), Some("secret-key"));
    }

    #[test]
    fn env_blank_values_mean_defaults() {
        let c = ClientConfig::from_lookup(lookup(&[("DLS_ENDPOINTS", " , "), ("CAERUS_API_KEY", "   ")]));
        assert_eq!(c.endpoints, vec!["127.0.0.1:7070"]);
        assert_eq!(c.api_key, None);
    }

    #[test]
    fn builders() {
        let c = ClientConfig::new(["n1:7070"])
            .with_api_key("k")
            .with_connect_timeout(Duration::from_millis(100))
            .with_request_timeout(Duration::from_millis(200))
            .with_retry_deadline(Duration::from_millis(300));
        assert_eq!(c.api_key.as_deref(), Some("k"));
        assert_eq!(c.connect_timeout, Duration::from_millis(100));
        assert_eq!(c.request_timeout, Duration::from_millis(200));
        assert_eq!(c.retry_deadline, Duration::from_millis(300));
        assert_eq!(c.without_api_key().api_key, None);
    }

    #[test]
    fn debug_redacts_key() {
        let c = ClientConfig::new(["n1:7070"]).with_api_key("topsecret");
        let text = format!("{c:?}");
        assert!(!text.contains("topsecret"), "{text}");
    }

    #[test]
    fn endpoint_normalization() {
        assert_eq!(normalize_endpoint("n1:7070", false).unwrap(), "http://n1:7070");
        assert_eq!(normalize_endpoint(" HTTP://10.0.0.1:7070/ ", false).unwrap(), "http://10.0.0.1:7070");
        assert_eq!(normalize_endpoint("[::1]:7070", false).unwrap(), "http://[::1]:7070");
        assert_eq!(normalize_endpoint("https://n1:7070", false).unwrap(), "https://n1:7070");
        assert_eq!(normalize_endpoint("n1:7070", true).unwrap(), "https://n1:7070");
        // An explicit scheme wins over the TLS default.
        assert_eq!(normalize_endpoint("http://n1:7070", true).unwrap(), "http://n1:7070");
        for bad in ["", "n1", "ftp://n1:7070", "n1:7070/path", "http://", "n1:x"] {
            let err = normalize_endpoint(bad, false).unwrap_err();
            assert_eq!(err.code(), "CONFIG", "{bad:?}");
        }
    }

    #[test]
    fn tls_files_come_from_the_environment_and_make_bare_endpoints_https() {
        let c = ClientConfig::from_lookup(lookup(&[
            ("DLS_ENDPOINTS", "a:1,http://b:2"),
            ("DLS_CA_FILE", "/etc/dls/ca.pem"),
            ("DLS_CLIENT_CERT_FILE", "/etc/dls/app.pem"),
            ("DLS_CLIENT_KEY_FILE", "/etc/dls/app-key.pem"),
        ]));
        assert_eq!(c.ca_file.as_deref(), Some(Path::new("/etc/dls/ca.pem")));
        assert_eq!(c.client_cert, Some(("/etc/dls/app.pem".into(), "/etc/dls/app-key.pem".into())));
        assert_eq!(c.clone().without_api_key().validate().unwrap(), vec!["https://a:1", "http://b:2"]);
        let err = c.tls().unwrap_err();
        assert!(err.to_string().contains("/etc/dls/ca.pem"), "a missing file is named: {err}");
        let plain = ClientConfig::from_lookup(lookup(&[("DLS_ENDPOINTS", "a:1")]));
        assert!(!plain.default_tls() && plain.ca_file.is_none() && plain.client_cert.is_none());
        let half = ClientConfig::from_lookup(lookup(&[("DLS_CLIENT_CERT_FILE", "/etc/dls/app.pem")]));
        let err = half.tls().unwrap_err().to_string();
        assert!(err.contains("DLS_CLIENT_KEY_FILE"), "a certificate without its key is an error: {err}");
        let https = ClientConfig::from_lookup(lookup(&[("DLS_ENDPOINTS", "https://a:1,b:2")]));
        assert_eq!(https.without_api_key().validate().unwrap(), vec!["https://a:1", "https://b:2"]);
    }

    #[test]
    fn tls_files_of_a_binding_override_the_environment_in_pairs() {
        let env = ClientConfig::from_lookup(lookup(&[("DLS_CA_FILE", "/env/ca.pem")]));
        let kept = env.clone().with_tls_files(None, None, None).unwrap();
        assert_eq!(kept.ca_file.as_deref(), Some(Path::new("/env/ca.pem")));
        let given = env.clone().with_tls_files(Some("ca.pem".into()), Some("c.pem".into()), Some("k.pem".into()));
        let given = given.unwrap();
        assert_eq!(given.ca_file.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(given.client_cert, Some(("c.pem".into(), "k.pem".into())));
        let err = env.clone().with_tls_files(None, Some("c.pem".into()), None).unwrap_err();
        assert!(err.code() == "CONFIG" && err.to_string().contains("without its key"), "{err}");
        let err = env.with_tls_files(None, None, Some("k.pem".into())).unwrap_err();
        assert!(err.to_string().contains("without its certificate"), "{err}");
    }

    #[test]
    fn validation() {
        let ok = ClientConfig::new(["a:1", "http://a:1", "b:2"]).without_api_key();
        assert_eq!(ok.validate().unwrap(), vec!["http://a:1", "http://b:2"]);
        let empty: [&str; 0] = [];
        assert!(ClientConfig::new(empty).validate().is_err());
        assert!(ClientConfig::new(["a:1"]).with_request_timeout(Duration::ZERO).validate().is_err());
        assert!(ClientConfig::new(["a:1"]).with_api_key("has space").validate().is_err());
        assert!(ClientConfig::new(["a:1"]).with_api_key("").validate().is_err());
    }
}

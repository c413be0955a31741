//! Client configuration: which nodes to talk to, the API key, and time budgets.

use std::time::Duration;

use crate::error::{Error, Result};

/// Environment variable holding a comma-separated endpoint list, read by [`ClientConfig::from_env`].
pub const ENDPOINTS_ENV: &str = "DLS_ENDPOINTS";
/// Environment variable holding the API key, read by [`ClientConfig::new`] and [`ClientConfig::from_env`].
pub const API_KEY_ENV: &str = "CAERUS_API_KEY";
/// Endpoint used by [`ClientConfig::from_env`] when `DLS_ENDPOINTS` is unset or empty.
pub const DEFAULT_ENDPOINT: &str = "127.0.0.1:7070";

/// How a [`DlsClient`](crate::DlsClient) reaches the cluster.
#[derive(Clone)]
pub struct ClientConfig {
    /// Cluster nodes as `host:port` or `http://host:port`. One is enough; the client finds
    /// the leader through redirects, and more make it robust to that one node being down.
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
    /// from `CAERUS_API_KEY` if that is set and non-empty.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            api_key: api_key_from(env_var(API_KEY_ENV)),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            retry_deadline: Self::DEFAULT_RETRY_DEADLINE,
        }
    }

    /// A configuration from the environment: endpoints from `DLS_ENDPOINTS` (comma
    /// separated, default `127.0.0.1:7070`), API key from `CAERUS_API_KEY`.
    pub fn from_env() -> Self {
        Self::from_lookup(env_var)
    }

    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = Self::new(parse_endpoint_list(lookup(ENDPOINTS_ENV).as_deref()));
        config.api_key = api_key_from(lookup(API_KEY_ENV));
        config
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

    /// Checks the configuration and returns the endpoints as `http://host:port` URIs.
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
        let mut uris: Vec<String> = Vec::with_capacity(self.endpoints.len());
        for e in &self.endpoints {
            let uri = normalize_endpoint(e)?;
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

/// Turns `host:port` or `http://host:port` into the URI a channel is built from.
pub(crate) fn normalize_endpoint(endpoint: &str) -> Result<String> {
    let trimmed = endpoint.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(Error::config("empty endpoint"));
    }
    let rest = match trimmed.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(Error::config(format!(
                "endpoint {endpoint:?}: unsupported scheme {scheme:?} (this client speaks plain http/2; use host:port or http://host:port)"
            )))
        }
        None => trimmed,
    };
    if rest.is_empty() || rest.contains('/') {
        return Err(Error::config(format!("endpoint {endpoint:?}: expected host:port")));
    }
    let uri = format!("http://{rest}");
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
        assert_eq!(normalize_endpoint("n1:7070").unwrap(), "http://n1:7070");
        assert_eq!(normalize_endpoint(" HTTP://10.0.0.1:7070/ ").unwrap(), "http://10.0.0.1:7070");
        assert_eq!(normalize_endpoint("[::1]:7070").unwrap(), "http://[::1]:7070");
        for bad in ["", "n1", "https://n1:7070", "n1:7070/path", "http://", "n1:x"] {
            let err = normalize_endpoint(bad).unwrap_err();
            assert_eq!(err.code(), "CONFIG", "{bad:?}");
        }
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

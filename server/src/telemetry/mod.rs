//! What a node tells operators beyond its own counters: the flags of per-namespace
//! metrics, and OpenTelemetry spans of traced lock calls (`spans`, exported by `otlp`
//! when `--otlp-endpoint` is set; without it nothing is followed or exported).

pub mod otlp;
pub mod spans;
pub mod trace_context;

use clap::Args;

use crate::metrics::namespaces::DEFAULT_LABELLED;

#[derive(Args, Debug, Clone)]
pub struct TelemetryArgs {
    /// Namespaces that get a label of their own in the per-namespace metrics
    /// (`dls_namespace_*`): the first ones seen, a label idle for an hour going to the next
    /// new namespace; all others are counted as namespace="other". Bounds the series a
    /// client can make /metrics hold, whatever namespaces it uses.
    #[arg(long, env = "DLS_METRICS_NAMESPACES", default_value_t = DEFAULT_LABELLED)]
    pub metrics_namespaces: usize,
    /// OpenTelemetry collector to export spans of traced lock calls to (OTLP over HTTP,
    /// JSON), as a base URL: spans are POSTed to URL/v1/traces. A client traces a call by
    /// sending a W3C `traceparent` (gRPC metadata or HTTP header). Unset: nothing is
    /// exported and trace context is ignored.
    #[arg(long, env = "DLS_OTLP_ENDPOINT", value_name = "URL", value_parser = traces_uri)]
    pub otlp_endpoint: Option<http::Uri>,
}

/// `URL` of `--otlp-endpoint` with `/v1/traces` appended (the OTLP/HTTP traces path).
fn traces_uri(raw: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = raw.parse().map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!("{raw:?} must be an http:// or https:// URL, e.g. http://127.0.0.1:4318"));
    }
    if uri.query().is_some() {
        return Err(format!("{raw:?}: give the collector's base URL, without a query"));
    }
    let path = format!("{}/v1/traces", uri.path().trim_end_matches('/'));
    let mut parts = uri.into_parts();
    parts.path_and_query = Some(path.parse().map_err(|e| format!("{raw:?}: {e}"))?);
    http::Uri::from_parts(parts).map_err(|e| format!("{raw:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_otlp_endpoint_is_a_base_url_that_gets_the_traces_path() {
        assert_eq!(traces_uri("http://127.0.0.1:4318").unwrap().to_string(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(
            traces_uri("https://otel.example/base/").unwrap().to_string(),
            "https://otel.example/base/v1/traces"
        );
        assert!(traces_uri("127.0.0.1:4318").is_err());
        assert!(traces_uri("ftp://x").is_err());
        assert!(traces_uri("http://x/?a=b").is_err());
    }
}

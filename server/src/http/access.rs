//! Who may reach `/api/v1` from a browser. The API changes lock state with a bearer key,
//! but a browser page of another origin must not be able to call it through the user's
//! browser, so every `/api/v1` request passes these checks first:
//! - `Host` must name this server: the HTTP listen address, the loopback names when it is
//!   bound to loopback, any IP address when it is bound to all addresses (an IP literal
//!   cannot be rebound to another server), and `--http-allowed-host` names. A DNS-rebinding
//!   page reaches the port under its own name and is refused.
//! - `Origin`, when sent, must be this server's own (same scheme-less authority as `Host`)
//!   or one of `--http-cors-origin`. Browsers send it on every cross-origin call and on
//!   every POST, so a page of another origin is refused even where CORS would not stop the
//!   request from being sent (a form post).
//! - POST bodies must be `Content-Type: application/json`: an HTML form cannot send that
//!   type, and a script of another origin can only after a CORS preflight.
//! - CORS is off unless `--http-cors-origin` lists origins: only those get CORS headers, and
//!   their preflight (OPTIONS) is answered; every other preflight is refused.
//!
//! `/metrics`, `/healthz`, `/readyz` and the Playground's files are outside `/api/v1` and
//! stay plain GETs for scrapers and probes.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clap::Args;
use tonic::Code;

use super::json::ApiFailure;

/// How long a browser may cache a granted preflight.
const PREFLIGHT_MAX_AGE_SECS: &str = "600";

/// Flags of the HTTP port's browser checks (flattened into `dls serve`).
#[derive(Args, Debug, Clone, Default)]
pub struct HttpAccessArgs {
    /// Another host name (or IP address) under which clients reach the HTTP port, such as
    /// the name of a load balancer; `/api/v1` answers only requests whose Host is this
    /// server's (repeatable, or comma-separated in the environment).
    #[arg(long = "http-allowed-host", env = "DLS_HTTP_ALLOWED_HOST", value_name = "HOST", value_delimiter = ',', value_parser = parse_host)]
    pub allowed_hosts: Vec<String>,
    /// A browser origin (scheme://host[:port]) whose pages may call `/api/v1`: it gets CORS
    /// headers and its preflight is answered. Without it CORS is off and only the server's
    /// own pages (the Playground) may call the API from a browser (repeatable, or
    /// comma-separated in the environment).
    #[arg(long = "http-cors-origin", env = "DLS_HTTP_CORS_ORIGIN", value_name = "ORIGIN", value_delimiter = ',', value_parser = parse_origin)]
    pub cors_origins: Vec<String>,
}

/// A `--http-allowed-host` value: a name or IP address, without scheme or port.
fn parse_host(raw: &str) -> Result<String, String> {
    let v = raw.trim().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if v.parse::<IpAddr>().is_ok() {
        return Ok(v);
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    if v.is_empty() || !v.chars().all(name_char) {
        return Err(format!("{raw:?} is not a host name or IP address (give it without scheme, port or path)"));
    }
    Ok(v)
}

/// A `--http-cors-origin` value: `http://` or `https://`, a host and an optional port.
fn parse_origin(raw: &str) -> Result<String, String> {
    let v = raw.trim().trim_end_matches('/').to_ascii_lowercase();
    let authority = v.strip_prefix("http://").or_else(|| v.strip_prefix("https://"));
    match authority {
        Some(a) if !a.is_empty() && !a.contains(['/', '?', '#', '@']) => Ok(v),
        _ => {
            Err(format!("{raw:?} is not an origin; write it as a browser shows it, like https://ops.example.com:8443"))
        }
    }
}

/// The host name of a `Host` value or an origin's authority, without port or brackets.
fn host_name(authority: &str) -> &str {
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(name, _)| name),
    }
}

/// The checks, resolved for one HTTP listener.
#[derive(Debug)]
pub struct Access {
    hosts: BTreeSet<String>,
    /// Bound to every address: any IP literal names this server.
    any_ip: bool,
    cors_origins: BTreeSet<String>,
}

/// Why a request is refused.
fn refuse(status: StatusCode, code: Code, message: String) -> Response {
    let kind = match code {
        Code::PermissionDenied => "PERMISSION_DENIED",
        _ => "INVALID_ARGUMENT",
    };
    ApiFailure { code, kind: kind.into(), message, detail: None, leader_addr: None, retry_after_ms: None }
        .into_response_with(status)
}

impl Access {
    pub fn new(args: &HttpAccessArgs, listen: SocketAddr) -> Access {
        let ip = listen.ip();
        let mut hosts: BTreeSet<String> = args.allowed_hosts.iter().cloned().collect();
        if ip.is_unspecified() || ip.is_loopback() {
            hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
        }
        if !ip.is_unspecified() {
            hosts.insert(ip.to_string());
        }
        Access { hosts, any_ip: ip.is_unspecified(), cors_origins: args.cors_origins.iter().cloned().collect() }
    }

    fn check_host(&self, host: Option<&str>) -> Result<(), Response> {
        let Some(host) = host else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                Code::InvalidArgument,
                "the request has no Host header; /api/v1 needs one".into(),
            ));
        };
        let name = host_name(host);
        if self.hosts.contains(name) || (self.any_ip && name.parse::<IpAddr>().is_ok()) {
            return Ok(());
        }
        let allowed: Vec<&str> = self.hosts.iter().map(String::as_str).collect();
        Err(refuse(
            StatusCode::FORBIDDEN,
            Code::PermissionDenied,
            format!(
                "Host {host:?} is not a name of this server (allowed: {}); if clients reach it under this name, add --http-allowed-host {name}",
                allowed.join(", ")
            ),
        ))
    }

    /// The origin to send CORS headers to, if any; refuses a foreign origin.
    fn check_origin(&self, origin: Option<&str>, host: &str) -> Result<Option<String>, Response> {
        let Some(origin) = origin.map(str::to_ascii_lowercase) else { return Ok(None) };
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        if authority == Some(host) {
            return Ok(None);
        }
        if self.cors_origins.contains(&origin) {
            return Ok(Some(origin));
        }
        Err(refuse(
            StatusCode::FORBIDDEN,
            Code::PermissionDenied,
            format!(
                "a browser page of origin {origin:?} may not call /api/v1 of this server; to allow it, start dls serve with --http-cors-origin {origin}"
            ),
        ))
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn is_json(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE)
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

fn add_cors(headers: &mut HeaderMap, origin: &str) {
    if let Ok(v) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// The middleware in front of every `/api/v1` route.
pub async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = header_str(headers, header::HOST).map(str::to_ascii_lowercase);
    if let Err(refused) = access.check_host(host.as_deref()) {
        return refused;
    }
    let host = host.unwrap_or_default();
    let cors = match access.check_origin(header_str(headers, header::ORIGIN), &host) {
        Ok(cors) => cors,
        Err(refused) => return refused,
    };
    if req.method() == Method::OPTIONS && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        // A same-origin page never sends a preflight; only a listed origin gets an answer.
        let Some(origin) = cors else {
            return refuse(
                StatusCode::FORBIDDEN,
                Code::PermissionDenied,
                "CORS preflight without a cross-origin Origin; /api/v1 answers preflights only for --http-cors-origin origins".into(),
            );
        };
        let mut resp = StatusCode::NO_CONTENT.into_response();
        let h = resp.headers_mut();
        add_cors(h, &origin);
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST"));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, last-event-id"),
        );
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(PREFLIGHT_MAX_AGE_SECS));
        return resp;
    }
    if req.method() == Method::POST && !is_json(headers) {
        let got = header_str(headers, header::CONTENT_TYPE).unwrap_or("none");
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InvalidArgument,
            format!("POST bodies under /api/v1 must be JSON: send Content-Type: application/json (got {got})"),
        );
    }
    let mut resp = next.run(req).await;
    if let Some(origin) = cors {
        add_cors(resp.headers_mut(), &origin);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(listen: &str, hosts: &[&str], origins: &[&str]) -> Access {
        let args = HttpAccessArgs {
            allowed_hosts: hosts.iter().map(|h| parse_host(h).unwrap()).collect(),
            cors_origins: origins.iter().map(|o| parse_origin(o).unwrap()).collect(),
        };
        Access::new(&args, listen.parse().unwrap())
    }

    #[test]
    fn hosts_are_the_listen_address_loopback_names_and_the_listed_ones() {
        let local = access("127.0.0.1:7071", &[], &[]);
        for ok in ["127.0.0.1:7071", "localhost:7071", "[::1]:7071", "localhost"] {
            assert!(local.check_host(Some(ok)).is_ok(), "{ok}");
        }
        for bad in ["evil.example:7071", "10.0.0.5:7071", "127.0.0.1.evil.example"] {
            assert!(local.check_host(Some(bad)).is_err(), "{bad}");
        }
        assert!(local.check_host(None).is_err());
        let lan = access("10.0.0.5:7071", &["dls.internal"], &[]);
        assert!(lan.check_host(Some("10.0.0.5:7071")).is_ok());
        assert!(lan.check_host(Some("dls.internal:7071")).is_ok());
        assert!(lan.check_host(Some("localhost:7071")).is_err(), "not bound to loopback");
        let all = access("0.0.0.0:7071", &[], &[]);
        assert!(all.check_host(Some("192.168.1.9:7071")).is_ok() && all.check_host(Some("[fe80::1]:7071")).is_ok());
        assert!(all.check_host(Some("rebind.example:7071")).is_err());
    }

    #[test]
    fn origins_must_be_same_origin_or_listed() {
        let a = access("127.0.0.1:7071", &[], &["https://ops.example"]);
        assert_eq!(a.check_origin(None, "127.0.0.1:7071").unwrap(), None);
        assert_eq!(a.check_origin(Some("http://127.0.0.1:7071"), "127.0.0.1:7071").unwrap(), None);
        assert_eq!(
            a.check_origin(Some("https://OPS.example"), "127.0.0.1:7071").unwrap(),
            Some("https://ops.example".into())
        );
        for bad in ["http://127.0.0.1:9999", "null", "https://evil.example", "http://localhost:7071"] {
            assert!(a.check_origin(Some(bad), "127.0.0.1:7071").is_err(), "{bad}");
        }
    }

    #[test]
    fn flag_values_are_checked() {
        assert_eq!(parse_host("[::1]"), Ok("::1".into()));
        assert_eq!(parse_host("DLS.example"), Ok("dls.example".into()));
        assert!(parse_host("dls.example:7071").is_err());
        assert!(parse_host("http://dls.example").is_err());
        assert_eq!(parse_origin("https://ops.example:8443/"), Ok("https://ops.example:8443".into()));
        assert!(parse_origin("ops.example").is_err());
        assert!(parse_origin("https://ops.example/path").is_err());
    }
}

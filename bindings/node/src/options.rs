//! Option objects passed from JavaScript and their translation into core's options.

use caerus_core::{AcquireOptions, TransactionOptions};
use napi::bindgen_prelude::BigInt;
use napi::Result;
use napi_derive::napi;

use crate::types::ms_of;

/// Options of the client (all optional; the JS wrapper documents the defaults).
#[napi(object)]
pub struct ClientOptions {
    /// Defaults to `CAERUS_API_KEY`.
    pub api_key: Option<String>,
    /// Defaults to `DLS_ENDPOINTS` (comma separated), then `127.0.0.1:7070`.
    pub endpoints: Option<Vec<String>>,
    pub connect_timeout_ms: Option<f64>,
    pub request_timeout_ms: Option<f64>,
    pub retry_deadline_ms: Option<f64>,
    /// CA bundle (PEM) the nodes' certificates must chain to. Defaults to `DLS_CA_FILE`.
    pub ca_file: Option<String>,
    /// Client certificate (PEM). Defaults to `DLS_CLIENT_CERT_FILE`.
    pub client_cert_file: Option<String>,
    /// Its private key (PEM). Defaults to `DLS_CLIENT_KEY_FILE`.
    pub client_key_file: Option<String>,
}

/// Options of a transaction.
#[napi(object)]
pub struct TxOptions {
    pub timeout_ms: Option<f64>,
    pub priority: Option<i32>,
    pub name: Option<String>,
    pub max_duration_ms: Option<f64>,
    /// Keep acquire streams open to hear at once that the server ended the transaction
    /// (`TransactionOptions::lost_stream` of the core). Default false.
    pub lost_stream: Option<bool>,
}

/// Options of an event watch.
#[napi(object)]
pub struct EventWatchOptions {
    pub from_sequence: Option<BigInt>,
    pub namespace_prefixes: Option<Vec<String>>,
    pub kinds: Option<Vec<String>>,
    pub only_new: Option<bool>,
}

pub(crate) fn acquire_options(timeout_ms: Option<f64>) -> Result<AcquireOptions> {
    let mut opts = AcquireOptions::default();
    if let Some(ms) = ms_of(timeout_ms, "timeoutMs")? {
        opts = opts.with_timeout_ms(ms);
    }
    Ok(opts)
}

/// What a new cluster API key may do (`createApiKey`).
#[napi(object)]
pub struct ApiKeyOptions {
    /// Allowed namespace prefixes (default: every namespace).
    pub namespace_prefixes: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: Option<bool>,
    /// How long it works, by the cluster's clock (default: until revoked).
    pub expires_in_ms: Option<f64>,
}

pub(crate) fn tx_options(opts: Option<TxOptions>) -> Result<TransactionOptions> {
    let mut out = TransactionOptions::default();
    if let Some(o) = opts {
        if let Some(ms) = ms_of(o.timeout_ms, "timeoutMs")? {
            out = out.with_timeout_ms(ms);
        }
        if let Some(p) = o.priority {
            out = out.with_priority(p);
        }
        if let Some(n) = o.name {
            out = out.with_name(n);
        }
        if let Some(ms) = ms_of(o.max_duration_ms, "maxDurationMs")? {
            out = out.with_max_duration_ms(ms);
        }
        out = out.with_lost_stream(o.lost_stream.unwrap_or(false));
    }
    Ok(out)
}

//! `dls health`: GETs a node's `/readyz` and exits 0 when it answers 2xx, 1 otherwise. The
//! container image's HEALTHCHECK runs it: the image has no curl, and the probe must find the
//! port the node was given at run time (`DLS_HTTP_LISTEN`, the `DLS_CONFIG` file).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::connect::CliError;
use super::lock::parse_duration;
use super::CliCommand;
use crate::config_file;

#[derive(Args, Debug)]
pub struct HealthArgs {
    /// The URL to GET (http or https; https is checked against the Mozilla roots). Without
    /// it: /readyz on this host's node, at the HTTP port `dls serve` would use with the same
    /// environment (`DLS_HTTP_LISTEN`, the `DLS_CONFIG` file; https when it has `tls-cert`).
    #[arg(long)]
    pub url: Option<String>,
    /// Give up (unhealthy) after this long.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
}

pub async fn run(args: HealthArgs) -> Result<(), CliError> {
    let (url, own_node) = match args.url {
        Some(url) => (url, false),
        None => (own_readyz()?, true),
    };
    let uri: http::Uri = url.parse().map_err(|e| CliError::usage(format!("{url:?} is not a URL: {e}")))?;
    let tls = hyper_rustls::HttpsConnectorBuilder::new();
    let tls = if own_node { tls.with_tls_config(loopback_tls()) } else { tls.with_webpki_roots() };
    let connector = tls.https_or_http().enable_http1().build();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let request = http::Request::get(uri)
        .header(http::header::USER_AGENT, concat!("dls-health/", env!("CARGO_PKG_VERSION")))
        .body(Empty::new())
        .map_err(|e| CliError::usage(format!("cannot make a request to {url}: {e}")))?;
    let answer = async {
        let response = client.request(request).await.map_err(|e| format!("{url}: {}", causes(&e)))?;
        let status = response.status();
        let body = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        Ok::<_, String>((status, body))
    };
    let (status, body) = tokio::time::timeout(args.timeout, answer)
        .await
        .map_err(|_| CliError::failure(format!("{url}: no answer within {:?}", args.timeout)))?
        .map_err(CliError::failure)?;
    let body = String::from_utf8_lossy(&body);
    if status.is_success() {
        println!("{url}: {status} {}", body.trim());
        Ok(())
    } else {
        Err(CliError::failure(format!("{url}: {status} {}", body.trim())))
    }
}

/// /readyz on the HTTP port of this host's node, as `dls serve` would resolve its settings
/// (flags aside) from the same environment and config file.
fn own_readyz() -> Result<String, CliError> {
    let loaded = config_file::load(vec!["dls".into(), "serve".into()]).map_err(|e| {
        CliError::failure(match e {
            config_file::LoadError::Clap(e) => format!("cannot resolve the node's settings: {}", e.render()),
            config_file::LoadError::Config(e) => format!("cannot resolve the node's settings: {e}"),
        })
    })?;
    let CliCommand::Serve(serve) = loaded.cli.command else { unreachable!("parsed as `dls serve`") };
    let scheme = if serve.security.tls_cert.is_some() { "https" } else { "http" };
    Ok(format!("{scheme}://{}/readyz", loopback_for(serve.http_listen)))
}

/// A node listening on every interface is reached on loopback, which is one of them.
fn loopback_for(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), listen.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), listen.port()),
        _ => listen,
    }
}

/// TLS to this host's own node, whose certificate is not checked: the probe sends nothing
/// secret and learns only "ready or not", the certificate's names need not include the
/// loopback address, and the CA is not among the settings `dls serve` has (clients bring
/// their own). Whoever could answer on the node's port inside its host already has the node.
fn loopback_tls() -> rustls::ClientConfig {
    let provider = provider();
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any certificate but still checks the handshake's signatures with its key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The error and its causes on one line ("client error (Connect): tcp connect error: Connection refused").
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

//! The client side of mutual TLS between nodes: a connection to node N is made only to a
//! peer whose certificate chains to the cluster CA, names the host called (as any TLS
//! client checks), and is node N's own (`dls certs node N`, common name `dls-node-N`).
//! Every node certificate of the CA passes the first two checks; without the third, an
//! address taken over by another node (a reused port, a stale member list, a node of the
//! CA that went rogue) would receive this node's raft calls, and its forwarded clients'
//! API keys. The peer's side checks the same of the caller (`peer_auth`).
//!
//! tonic's own TLS settings cannot check a certificate's name, so the handshake runs in
//! [`NodeConnector`] and tonic is given the finished stream.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::types::NodeId;
use crate::certs;
use crate::tls::TlsError;

/// The PEM files of mutual TLS between nodes.
#[derive(Clone, Debug)]
pub struct PeerTlsFiles {
    /// This node's certificate (`dls certs node`), presented to the peers it calls.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The cluster CA: peers' certificates must chain to it.
    pub ca: PathBuf,
}

/// This node's certificate and the cluster CA, read from [`PeerTlsFiles`].
pub struct PeerTlsClient {
    roots: Arc<rustls::RootCertStore>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl PeerTlsClient {
    /// Reads the files; fails at start (or reload) when one is not what it should be,
    /// rather than at the first raft call.
    pub fn load(files: &PeerTlsFiles) -> Result<PeerTlsClient, TlsError> {
        let roots = Arc::new(crate::tls::root_store(&files.ca)?);
        let chain = crate::tls::read_certs(&files.cert)?;
        let key = crate::tls::read_key(&files.key)?;
        // The pair must fit, or every peer would refuse this node's handshakes.
        let _ = connector_config(&roots, &chain, &key, 0).map_err(|e| TlsError::PeerClient {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source: Box::new(e),
        })?;
        Ok(PeerTlsClient { roots, chain, key })
    }

    /// A connector for calls to node `to`.
    pub fn connector(&self, to: NodeId) -> Result<NodeConnector, TlsError> {
        Ok(NodeConnector { config: Arc::new(connector_config(&self.roots, &self.chain, &self.key, to)?) })
    }
}

fn connector_config(
    roots: &Arc<rustls::RootCertStore>,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    to: NodeId,
) -> Result<ClientConfig, TlsError> {
    let provider = crate::tls::provider();
    let webpki = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(TlsError::Verifier)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NodeCertificate { webpki, to }))
        .with_client_auth_cert(chain.to_vec(), key.clone_key())
        .map_err(TlsError::Rustls)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Checks a peer's certificate as any TLS client does, then that it is node `to`'s.
#[derive(Debug)]
struct NodeCertificate {
    webpki: Arc<WebPkiServerVerifier>,
    to: NodeId,
}

/// Why a peer's certificate is not the one of the node called.
pub fn wrong_node(to: NodeId, holder: Option<NodeId>) -> String {
    let holder =
        holder.map_or("a certificate that is not a node's".to_string(), |id| format!("node {id}'s certificate"));
    format!(
        "the peer called as node {to} presented {holder}: nothing is sent to it (check the member list's address \
         for node {to}, and that node's --peer-tls-cert)"
    )
}

impl ServerCertVerifier for NodeCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        match certs::node_id_of(end_entity) {
            Some(id) if id == self.to => Ok(verified),
            holder => {
                let why = wrong_node(self.to, holder);
                tracing::warn!("{why}");
                Err(rustls::Error::General(why))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Opens TCP connections to a peer and completes the TLS handshake with [`NodeCertificate`]
/// (for tonic's `Endpoint::connect_with_connector_lazy`, with an `http://` URI: the stream
/// it gets is already TLS).
#[derive(Clone)]
pub struct NodeConnector {
    config: Arc<ClientConfig>,
}

impl tonic::codegen::Service<Uri> for NodeConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let config = self.config.clone();
        Box::pin(async move {
            let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("peer address {uri} is not HOST:PORT"));
            let host = uri.host().ok_or_else(bad)?.trim_start_matches('[').trim_end_matches(']').to_string();
            let port = uri.port_u16().ok_or_else(bad)?;
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            // Nagle off, as on every other connection between nodes.
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let tls = TlsConnector::from(config).connect(name, tcp).await?;
            Ok(TokioIo::new(tls))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_certificate_must_be_the_called_node_s() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let common = || certs::CertsArgs { dir: d.to_path_buf(), days: 30, force: false };
        certs::run(&certs::CertsCommand::Init { common: common() }).unwrap();
        for id in [1, 2] {
            certs::run(&certs::CertsCommand::Node { id, hosts: vec!["127.0.0.1".into()], common: common() }).unwrap();
        }
        let files = PeerTlsFiles { cert: d.join("node-1.pem"), key: d.join("node-1-key.pem"), ca: d.join("ca.pem") };
        let client = PeerTlsClient::load(&files).unwrap();
        let webpki =
            WebPkiServerVerifier::builder_with_provider(client.roots.clone(), crate::tls::provider()).build().unwrap();
        let two = crate::tls::read_certs(&d.join("node-2.pem")).unwrap().remove(0);
        let host = ServerName::try_from("127.0.0.1").unwrap();
        let check = |to| {
            NodeCertificate { webpki: webpki.clone(), to }.verify_server_cert(&two, &[], &host, &[], UnixTime::now())
        };
        assert!(check(2).is_ok(), "node 2's certificate, called as node 2");
        let err = check(3).unwrap_err().to_string();
        assert!(err.contains("called as node 3 presented node 2's certificate"), "{err}");
    }
}

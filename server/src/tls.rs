//! TLS for the client, HTTP and peer ports: certificates and keys read from PEM files,
//! client certificates optionally required, everything reloaded on SIGHUP.
//!
//! tonic's own TLS setting is fixed for the server's lifetime, so the handshake runs in the
//! ports' accept loop (`conn`) and the servers are fed finished TLS streams: a reload swaps
//! the configuration the next handshake uses, and connections already open keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::{Accept, TlsAcceptor};

/// The PEM files of one TLS listener.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by one of these CAs.
    pub client_ca: Option<PathBuf>,
}

/// What a port speaks, announced by ALPN.
#[derive(Clone, Copy, Debug)]
pub enum Protocol {
    /// gRPC: HTTP/2 only.
    Grpc,
    /// The HTTP port: HTTP/1.1.
    Http1,
}

impl Protocol {
    fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Protocol::Grpc => vec![b"h2".to_vec()],
            Protocol::Http1 => vec![b"http/1.1".to_vec()],
        }
    }
}

/// A listener's TLS configuration, replaced as a whole by [`ServerTls::reload`].
pub struct ServerTls {
    files: TlsFiles,
    protocol: Protocol,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    pub fn load(files: TlsFiles, protocol: Protocol) -> Result<ServerTls, TlsError> {
        let config = server_config(&files, protocol)?;
        Ok(ServerTls { files, protocol, current: RwLock::new(config) })
    }

    /// Reads the files again. On any error the previous configuration stays in use (a
    /// half-written certificate must not take the port down).
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files, self.protocol)?;
        *self.current.write().expect("tls config lock") = config;
        Ok(())
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().expect("tls config lock").clone())
    }
}

/// The crypto provider of every TLS endpoint here: ring (no C toolchain beyond cc, no
/// cmake), the same as the webhook client's.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a TLS configuration cannot be built from its files; the cause (the PEM parser's,
/// rustls's) is the source.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read or parsed.
    #[error("cannot read {what} from {}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{} holds no PEM certificate (BEGIN CERTIFICATE)", .0.display())]
    NoCertificate(PathBuf),
    /// A CA file's certificate cannot be trusted as a root.
    #[error("CA file {}", path.display())]
    Ca {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    /// The client CA file cannot verify client certificates.
    #[error("client CA file {}", path.display())]
    ClientCa {
        path: PathBuf,
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The certificate and the key are not a pair.
    #[error("certificate {} and key {} do not fit", cert.display(), key.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    /// The CA cannot verify peers' certificates.
    #[error("the CA cannot verify certificates")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// The peer client configuration cannot be built from this node's certificate and key.
    #[error("{} and {}", cert.display(), key.display())]
    PeerClient {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: Box<TlsError>,
    },
    /// rustls refuses its own defaults (a provider without the protocol versions), or a
    /// certificate and key.
    #[error("cannot set up TLS")]
    Rustls(#[source] rustls::Error),
}

fn server_config(files: &TlsFiles, protocol: Protocol) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let roots = Arc::new(root_store(ca)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|source| TlsError::ClientCa { path: ca.clone(), source })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|source| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })?;
    config.alpn_protocols = protocol.alpn();
    Ok(Arc::new(config))
}

/// Every certificate in a PEM file (a chain or a CA bundle).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Pem { what: "certificates", path: path.to_path_buf(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| TlsError::Pem {
        what: "a PEM private key",
        path: path.to_path_buf(),
        source,
    })
}

pub fn root_store(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(ca)? {
        roots.add(cert).map_err(|source| TlsError::Ca { path: ca.to_path_buf(), source })?;
    }
    Ok(roots)
}

/// How the ports' accept loop (`conn::incoming`) turns a TCP connection into a TLS stream:
/// with the configuration current at that moment, so a reload applies to the next handshake.
pub fn upgrade(tls: Arc<ServerTls>) -> impl Fn(TcpStream) -> Accept<TcpStream> + Send + Sync + 'static {
    move |tcp| tls.acceptor().accept(tcp)
}

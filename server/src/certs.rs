//! `dls certs`: a cluster CA and the certificates signed by it, in one command each.
//!
//! - `init` makes the CA (`ca.pem`, `ca-key.pem`).
//! - `node N --host H...` makes node N's certificate: server and client use (the same file
//!   serves the client port and authenticates the node to its peers), subject CN
//!   `dls-node-N`, SANs = the hosts.
//! - `client NAME` makes a client certificate (client use only, CN = NAME).
//!
//! The peer port accepts only certificates whose CN says `dls-node-<id>`, so a client
//! certificate of the same CA can reach the client port but never the raft transport.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Prefix of a node certificate's common name.
pub const NODE_CN_PREFIX: &str = "dls-node-";

#[derive(Subcommand, Debug)]
pub enum CertsCommand {
    /// Create a cluster CA: DIR/ca.pem (give it to nodes and clients) and DIR/ca-key.pem (keep it safe).
    Init {
        #[command(flatten)]
        common: CertsArgs,
    },
    /// Create node N's certificate (DIR/node-N.pem, DIR/node-N-key.pem), signed by the CA in DIR.
    Node {
        /// The node id (as in --node-id).
        id: u64,
        /// A host name or IP address clients and peers use to reach the node (repeatable).
        #[arg(long = "host", required = true)]
        hosts: Vec<String>,
        #[command(flatten)]
        common: CertsArgs,
    },
    /// Create a client certificate (DIR/client-NAME.pem, DIR/client-NAME-key.pem), signed by the CA in DIR.
    Client {
        /// A name for the client (the certificate's common name).
        name: String,
        #[command(flatten)]
        common: CertsArgs,
    },
}

#[derive(clap::Args, Debug)]
pub struct CertsArgs {
    /// Directory holding the CA and the certificates.
    #[arg(long, default_value = "./dls-certs")]
    pub dir: PathBuf,
    /// Validity in days.
    #[arg(long, default_value_t = 825)]
    pub days: u32,
    /// Replace files that already exist.
    #[arg(long)]
    pub force: bool,
}

/// Runs a `dls certs` command; returns the files written.
pub fn run(command: &CertsCommand) -> anyhow::Result<Vec<PathBuf>> {
    match command {
        CertsCommand::Init { common } => init(common),
        CertsCommand::Node { id, hosts, common } => {
            if *id == 0 {
                anyhow::bail!("node ids start at 1");
            }
            let mut params = leaf_params(&format!("{NODE_CN_PREFIX}{id}"), hosts, common.days)?;
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
            issue(common, &format!("node-{id}"), params)
        }
        CertsCommand::Client { name, common } => {
            if name.starts_with(NODE_CN_PREFIX) {
                anyhow::bail!(
                    "client names may not start with {NODE_CN_PREFIX:?}: that prefix marks node certificates"
                );
            }
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                anyhow::bail!("client name {name:?}: use letters, digits, '.', '_' and '-'");
            }
            let mut params = leaf_params(name, &[], common.days)?;
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            issue(common, &format!("client-{name}"), params)
        }
    }
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // An hour of slack for clocks slightly behind the one that made the certificate.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

fn init(common: &CertsArgs) -> anyhow::Result<Vec<PathBuf>> {
    let (cert_path, key_path) = (common.dir.join("ca.pem"), common.dir.join("ca-key.pem"));
    refuse_overwrite(common, &[&cert_path, &key_path])?;
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "Caerus DLS cluster CA");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params, common.days.max(3650));
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    std::fs::create_dir_all(&common.dir).with_context(|| format!("cannot create {}", common.dir.display()))?;
    write(&cert_path, &cert.pem(), false)?;
    write(&key_path, &key.serialize_pem(), true)?;
    Ok(vec![cert_path, key_path])
}

fn leaf_params(common_name: &str, hosts: &[String], days: u32) -> anyhow::Result<CertificateParams> {
    let mut params = CertificateParams::new(hosts.to_vec()).with_context(|| format!("--host {hosts:?}"))?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, days);
    Ok(params)
}

/// Signs `params` with the CA in the directory and writes `<stem>.pem` and `<stem>-key.pem`.
fn issue(common: &CertsArgs, stem: &str, params: CertificateParams) -> anyhow::Result<Vec<PathBuf>> {
    let (ca_cert, ca_key) = (common.dir.join("ca.pem"), common.dir.join("ca-key.pem"));
    let missing =
        |p: &Path| format!("cannot read {} (run `dls certs init --dir {}` first)", p.display(), common.dir.display());
    let ca_pem = std::fs::read_to_string(&ca_cert).with_context(|| missing(&ca_cert))?;
    let ca_key_pem = std::fs::read_to_string(&ca_key).with_context(|| missing(&ca_key))?;
    let ca_key = KeyPair::from_pem(&ca_key_pem).with_context(|| ca_key.display().to_string())?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).with_context(|| ca_cert.display().to_string())?;
    let (cert_path, key_path) = (common.dir.join(format!("{stem}.pem")), common.dir.join(format!("{stem}-key.pem")));
    refuse_overwrite(common, &[&cert_path, &key_path])?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    write(&cert_path, &cert.pem(), false)?;
    write(&key_path, &key.serialize_pem(), true)?;
    Ok(vec![cert_path, key_path])
}

fn refuse_overwrite(common: &CertsArgs, paths: &[&Path]) -> anyhow::Result<()> {
    if common.force {
        return Ok(());
    }
    match paths.iter().find(|p| p.exists()) {
        Some(p) => anyhow::bail!("{} already exists; pass --force to replace it", p.display()),
        None => Ok(()),
    }
}

/// Writes a file; private keys are readable by their owner only, also when `--force`
/// replaces a wider one.
fn write(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    if private {
        return Ok(crate::secret_files::write_private(path, text)?);
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The node id in a certificate made by `dls certs node`, or None for any other
/// certificate (a client's, or an unparsable one).
pub fn node_id_of(cert_der: &[u8]) -> Option<u64> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    cn.strip_prefix(NODE_CN_PREFIX)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    fn args(dir: &Path) -> CertsArgs {
        CertsArgs { dir: dir.to_path_buf(), days: 30, force: false }
    }

    fn der(path: &Path) -> Vec<u8> {
        CertificateDer::from_pem_file(path).unwrap().to_vec()
    }

    #[test]
    fn node_and_client_certificates_are_told_apart_and_chain_to_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        run(&CertsCommand::Init { common: args(dir.path()) }).unwrap();
        let err = run(&CertsCommand::Init { common: args(dir.path()) }).unwrap_err();
        assert!(err.to_string().contains("--force"), "{err}");
        let hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        run(&CertsCommand::Node { id: 3, hosts, common: args(dir.path()) }).unwrap();
        run(&CertsCommand::Client { name: "billing".into(), common: args(dir.path()) }).unwrap();
        assert!(run(&CertsCommand::Client { name: "dls-node-1".into(), common: args(dir.path()) }).is_err());

        assert_eq!(node_id_of(&der(&dir.path().join("node-3.pem"))), Some(3));
        assert_eq!(node_id_of(&der(&dir.path().join("client-billing.pem"))), None);
        assert_eq!(node_id_of(&der(&dir.path().join("ca.pem"))), None);

        // The node certificate verifies against the CA (a rustls client would accept it).
        let roots = crate::tls::root_store(&dir.path().join("ca.pem")).unwrap();
        let node = CertificateDer::from_pem_file(dir.path().join("node-3.pem")).unwrap();
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), crate::tls::provider())
                .build()
                .unwrap();
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        verifier
            .verify_server_cert(&node, &[], &name, &[], rustls_pki_types::UnixTime::now())
            .expect("node certificate chains to the CA and names its host");

        let key_mode = || {
            let meta = std::fs::metadata(dir.path().join("node-3-key.pem")).unwrap();
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777
        };
        assert_eq!(key_mode(), 0o600);
        // Replaced with --force over a key file someone opened up: owner-only again.
        let wide = std::os::unix::fs::PermissionsExt::from_mode(0o644);
        std::fs::set_permissions(dir.path().join("node-3-key.pem"), wide).unwrap();
        let forced = CertsArgs { force: true, ..args(dir.path()) };
        run(&CertsCommand::Node { id: 3, hosts: vec!["127.0.0.1".into()], common: forced }).unwrap();
        assert_eq!(key_mode(), 0o600);
    }

    #[test]
    fn issuing_without_a_ca_says_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let err =
            run(&CertsCommand::Node { id: 1, hosts: vec!["localhost".into()], common: args(dir.path()) }).unwrap_err();
        assert!(err.to_string().contains("dls certs init"), "{err}");
    }
}

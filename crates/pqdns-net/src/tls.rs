//! TLS for DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484): rustls with the aws-lc-rs
//! provider, hybrid post-quantum key exchange (X25519MLKEM768, draft-ietf-tls-ecdhe-mlkem)
//! preferred, session resumption (tickets and a session cache), and a self-signed ECDSA P-256
//! certificate when none is configured.
//!
//! The generated certificate and key are kept in the key directory as `pqdns-server.crt` and
//! `pqdns-server.key` (mode 0600) and reused on the next start, so the fingerprint is stable.
//! Private keys are never logged.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::aws_lc_rs::{self, kx_group};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ServerSessionMemoryCache;
use sha2::{Digest, Sha256};

use crate::settings::{KxPolicy, TlsSettings};

/// File name of the generated certificate in the key directory.
pub const GENERATED_CERT_FILE: &str = "pqdns-server.crt";
/// File name of the generated certificate's private key in the key directory.
pub const GENERATED_KEY_FILE: &str = "pqdns-server.key";
/// TLS sessions remembered for stateful resumption, per listener.
pub const SESSION_CACHE_SIZE: usize = 1024;
/// ALPN protocol id of DNS over TLS (RFC 7858 §3.2, IANA).
pub const ALPN_DOT: &[u8] = b"dot";

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A PEM file held no certificate or no private key.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is missing.
        what: &'static str,
    },
    /// Certificate generation failed.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls rejected the configuration (e.g. key and certificate do not match).
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The key exchange groups offered under `policy`, in preference order.
pub fn kx_groups(policy: KxPolicy) -> Vec<&'static dyn rustls::crypto::SupportedKxGroup> {
    match policy {
        KxPolicy::HybridPreferred => vec![
            kx_group::X25519MLKEM768,
            kx_group::X25519,
            kx_group::SECP256R1,
            kx_group::SECP384R1,
        ],
        KxPolicy::PqOnly => vec![kx_group::X25519MLKEM768, kx_group::SECP256R1MLKEM768],
    }
}

/// The aws-lc-rs provider with the key exchange groups of `policy`.
pub fn crypto_provider(policy: KxPolicy) -> CryptoProvider {
    CryptoProvider {
        kx_groups: kx_groups(policy),
        ..aws_lc_rs::default_provider()
    }
}

/// A certificate chain and its private key.
pub struct Identity {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key.
    pub key: PrivateKeyDer<'static>,
    /// The certificate file.
    pub cert_path: PathBuf,
    /// SHA-256 fingerprint of the leaf certificate (hex bytes joined by `:`).
    pub fingerprint: String,
    /// True if the certificate was generated (now or on an earlier start).
    pub self_signed: bool,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Identity({}, sha256 {})",
            self.cert_path.display(),
            self.fingerprint
        )
    }
}

/// SHA-256 fingerprint of a DER certificate, as `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |error| TlsError::Io {
        path: path.to_path_buf(),
        error,
    }
}

fn read_pem(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert_pem = std::fs::read(cert).map_err(io_err(cert))?;
    let chain = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err(cert))?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_path_buf(),
            what: "no CERTIFICATE block",
        });
    }
    let key_pem = std::fs::read(key).map_err(io_err(key))?;
    let private = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(io_err(key))?
        .ok_or_else(|| TlsError::Pem {
            path: key.to_path_buf(),
            what: "no PRIVATE KEY block",
        })?;
    Ok((chain, private))
}

/// Loads the configured certificate, or the generated one from `generated_cert_dir`, making it
/// first if it does not exist (ECDSA P-256, names `localhost`, 127.0.0.1 and ::1).
///
/// # Errors
/// [`TlsError`] if files cannot be read or written or hold no usable PEM.
pub fn load_or_generate(settings: &TlsSettings) -> Result<Identity, TlsError> {
    let (cert_path, key_path, self_signed) = match &settings.cert_and_key {
        Some((c, k)) => (c.clone(), k.clone(), false),
        None => {
            let dir = &settings.generated_cert_dir;
            let (c, k) = (dir.join(GENERATED_CERT_FILE), dir.join(GENERATED_KEY_FILE));
            if !c.exists() || !k.exists() {
                generate(&c, &k)?;
            }
            (c, k, true)
        }
    };
    let (chain, key) = read_pem(&cert_path, &key_path)?;
    Ok(Identity {
        fingerprint: fingerprint(&chain[0]),
        chain,
        key,
        cert_path,
        self_signed,
    })
}

fn generate(cert_path: &Path, key_path: &Path) -> Result<(), TlsError> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
    params.subject_alt_names.extend([
        rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
        rcgen::SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
    ]);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "pqdns-server self-signed");
    let cert = params.self_signed(&key)?;
    if let Some(dir) = key_path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let mut file = private_file(key_path).map_err(io_err(key_path))?;
    file.write_all(key.serialize_pem().as_bytes())
        .map_err(io_err(key_path))?;
    std::fs::write(cert_path, cert.pem()).map_err(io_err(cert_path))
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

/// A rustls server configuration for `identity` under `policy`, offering `alpn` protocols.
/// TLS 1.2 is allowed only under the hybrid-preferred policy (hybrid groups need TLS 1.3).
///
/// # Errors
/// [`TlsError::Rustls`] if the key does not fit the certificate.
pub fn server_config(
    policy: KxPolicy,
    identity: &Identity,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let versions: &[&rustls::SupportedProtocolVersion] = match policy {
        KxPolicy::HybridPreferred => &[&rustls::version::TLS13, &rustls::version::TLS12],
        KxPolicy::PqOnly => &[&rustls::version::TLS13],
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(crypto_provider(policy)))
        .with_protocol_versions(versions)?
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    config.ticketer = aws_lc_rs::Ticketer::new()?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_first_and_pq_only_has_no_classical_group() {
        use rustls::NamedGroup;
        let names = |p| kx_groups(p).iter().map(|g| g.name()).collect::<Vec<_>>();
        let hybrid = names(KxPolicy::HybridPreferred);
        assert_eq!(hybrid[0], NamedGroup::X25519MLKEM768);
        assert!(hybrid.contains(&NamedGroup::X25519));
        let pq = names(KxPolicy::PqOnly);
        assert!(pq.iter().all(|g| matches!(
            g,
            NamedGroup::X25519MLKEM768 | NamedGroup::secp256r1MLKEM768
        )));
    }

    #[test]
    fn generated_certificate_is_reused_and_key_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let settings = TlsSettings {
            generated_cert_dir: dir.path().join("keys"),
            ..TlsSettings::default()
        };
        let a = load_or_generate(&settings).unwrap();
        let b = load_or_generate(&settings).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.fingerprint.len(), 32 * 3 - 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("keys").join(GENERATED_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0);
        }
        server_config(KxPolicy::PqOnly, &a, &[ALPN_DOT]).unwrap();
    }
}

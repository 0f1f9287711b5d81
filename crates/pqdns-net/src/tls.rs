//! TLS for the server side of DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484): rustls
//! with the aws-lc-rs provider, hybrid post-quantum key exchange (X25519MLKEM768,
//! draft-ietf-tls-ecdhe-mlkem) preferred or required ([`KxPolicy`]), session resumption
//! (tickets and a session cache), ALPN, and a self-signed certificate when none is configured:
//! ECDSA P-256 by default, or ML-DSA-44/65/87 (FIPS 204 keys and TLS 1.3 signature schemes,
//! draft-ietf-tls-mldsa; certificates per draft-ietf-lamps-dilithium-certificates) or Ed25519
//! ([`CertAlgorithm`]).
//!
//! Policies ([`KxPolicy`]) and what each does to a client that cannot follow:
//! - `hybrid-preferred`: X25519MLKEM768 first; a classical client gets X25519 (a key exchange
//!   downgrade a quantum attacker recording today could later break). The certificate is the
//!   configured one: a client that accepts no ML-DSA signature fails against an ML-DSA
//!   certificate, whatever the policy (there is no classical fallback certificate).
//! - `pq-only`: hybrid ML-KEM groups only; a client offering only classical groups fails the
//!   handshake (no shared group). Any certificate.
//! - `pq-strict`: as `pq-only`, and the certificate must have an ML-DSA key (the generated one
//!   is ML-DSA-44 unless another ML-DSA level is chosen; a configured classical certificate is
//!   an error at start and on reload), so every completed handshake is post-quantum in both
//!   key exchange and server authentication. Refused handshakes are reported with their reason
//!   ([`crate::HandshakeFailure`]).
//!
//! The generated certificate and key are kept in the key directory as `pqdns-server.crt` and
//! `pqdns-server.key` (mode 0600) and reused on the next start, so the fingerprint is stable.
//! Its subject alternative names are `localhost`, 127.0.0.1, ::1, the configured names
//! ([`TlsSettings::names`]) and the addresses the DoT and DoH listeners are bound to (every
//! interface address for a wildcard listener); a stored certificate that does not cover them
//! all is replaced by a new one.
//!
//! The certificate in use can be replaced while serving ([`ServerCertificate::reload`], on
//! SIGHUP): new handshakes get the new certificate; if the files cannot be read or do not fit
//! together, the old certificate stays. Private keys are never logged; files are written
//! atomically ([`pqdns_core::atomic_file`]), and a configured key file that every user may
//! read is warned about (file and mode) each time it is read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use pqdns_core::atomic_file::{warn_if_world_readable, write_atomic, FileMode};
use rustls::crypto::aws_lc_rs::{self, kx_group};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{alg_id, AlgorithmIdentifier, CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tracing::info;

/// File name of the generated certificate in the key directory.
pub const GENERATED_CERT_FILE: &str = "pqdns-server.crt";
/// File name of the generated certificate's private key in the key directory.
pub const GENERATED_KEY_FILE: &str = "pqdns-server.key";
/// TLS sessions remembered for stateful resumption, per listener.
pub const SESSION_CACHE_SIZE: usize = 1024;
/// ALPN protocol id of DNS over TLS (RFC 7858 §3.2, IANA).
pub const ALPN_DOT: &[u8] = b"dot";
/// ALPN protocol id of HTTP/2 (RFC 9113 §3.2), for DoH.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1 (RFC 7301 §6), for DoH.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// TLS policy: the key exchange groups offered and, for [`KxPolicy::PqStrict`], the kind of
/// certificate required (see the module documentation for what each does to older clients).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum KxPolicy {
    /// X25519MLKEM768 first, then the classical X25519, P-256 and P-384 for older clients.
    #[default]
    HybridPreferred,
    /// Only hybrid post-quantum groups (X25519MLKEM768, SECP256R1MLKEM768); TLS 1.3 only.
    PqOnly,
    /// Post-quantum key exchange and post-quantum server authentication: the groups of
    /// [`KxPolicy::PqOnly`] and a certificate with an ML-DSA key.
    PqStrict,
}

impl KxPolicy {
    /// True if the policy requires an ML-DSA certificate.
    pub fn requires_pq_certificate(self) -> bool {
        self == KxPolicy::PqStrict
    }
}

impl std::str::FromStr for KxPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<KxPolicy, String> {
        match s {
            "hybrid-preferred" => Ok(KxPolicy::HybridPreferred),
            "pq-only" => Ok(KxPolicy::PqOnly),
            "pq-strict" => Ok(KxPolicy::PqStrict),
            _ => Err(format!(
                "unknown TLS policy {s:?}: use \"hybrid-preferred\", \"pq-only\" or \"pq-strict\""
            )),
        }
    }
}

/// The key algorithm of a certificate: what the server signs its TLS 1.3 handshakes with
/// (CertificateVerify, RFC 8446 §4.4.3) and, for a generated self-signed certificate, what
/// signs the certificate. Names as in FIPS 204 and RFC 8032 (`ML-DSA-44`, `Ed25519`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum CertAlgorithm {
    /// ECDSA with P-256 and SHA-256 (RFC 8446 `ecdsa_secp256r1_sha256`).
    #[default]
    #[serde(rename = "ECDSA-P256")]
    EcdsaP256,
    /// Ed25519 (RFC 8032).
    #[serde(rename = "Ed25519")]
    Ed25519,
    /// ML-DSA-44 (FIPS 204; TLS scheme 0x0904): 1312-byte public key, 2420-byte signature.
    #[serde(rename = "ML-DSA-44")]
    MlDsa44,
    /// ML-DSA-65 (FIPS 204; TLS scheme 0x0905): 1952-byte public key, 3309-byte signature.
    #[serde(rename = "ML-DSA-65")]
    MlDsa65,
    /// ML-DSA-87 (FIPS 204; TLS scheme 0x0906): 2592-byte public key, 4627-byte signature.
    #[serde(rename = "ML-DSA-87")]
    MlDsa87,
}

/// Certificate key algorithms by SubjectPublicKeyInfo algorithm identifier (RFC 5280
/// §4.1.2.7), for naming a peer's certificate; the first five can be generated.
const KEY_ALGORITHMS: [(&str, AlgorithmIdentifier); 10] = [
    ("ECDSA-P256", alg_id::ECDSA_P256),
    ("Ed25519", alg_id::ED25519),
    ("ML-DSA-44", alg_id::ML_DSA_44),
    ("ML-DSA-65", alg_id::ML_DSA_65),
    ("ML-DSA-87", alg_id::ML_DSA_87),
    ("ECDSA-P384", alg_id::ECDSA_P384),
    ("ECDSA-P521", alg_id::ECDSA_P521),
    ("RSA", alg_id::RSA_ENCRYPTION),
    ("RSA-PSS", alg_id::RSA_PSS_SHA256),
    ("Ed448", alg_id::ED448),
];

impl CertAlgorithm {
    /// Every algorithm a certificate can be generated with.
    pub const ALL: [CertAlgorithm; 5] = [
        CertAlgorithm::EcdsaP256,
        CertAlgorithm::Ed25519,
        CertAlgorithm::MlDsa44,
        CertAlgorithm::MlDsa65,
        CertAlgorithm::MlDsa87,
    ];

    /// The name, e.g. `ML-DSA-44`.
    pub fn name(self) -> &'static str {
        KEY_ALGORITHMS[self as usize].0
    }

    /// True for the ML-DSA algorithms.
    pub fn is_post_quantum(self) -> bool {
        matches!(
            self,
            CertAlgorithm::MlDsa44 | CertAlgorithm::MlDsa65 | CertAlgorithm::MlDsa87
        )
    }

    /// The algorithm of the key in `cert`, if it is one of [`CertAlgorithm::ALL`].
    pub fn of_certificate(cert: &CertificateDer<'_>) -> Option<CertAlgorithm> {
        let name = certificate_key_algorithm(cert);
        CertAlgorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    fn rcgen(self) -> &'static rcgen::SignatureAlgorithm {
        match self {
            CertAlgorithm::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            CertAlgorithm::Ed25519 => &rcgen::PKCS_ED25519,
            CertAlgorithm::MlDsa44 => &rcgen::PKCS_ML_DSA_44,
            CertAlgorithm::MlDsa65 => &rcgen::PKCS_ML_DSA_65,
            CertAlgorithm::MlDsa87 => &rcgen::PKCS_ML_DSA_87,
        }
    }
}

impl std::fmt::Display for CertAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CertAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<CertAlgorithm, String> {
        CertAlgorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = CertAlgorithm::ALL.iter().map(|a| a.name()).collect();
                format!(
                    "unknown certificate algorithm {s:?}: use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// The name of the key algorithm of certificate `cert` (`ML-DSA-44`, `ECDSA-P256`, `RSA`, …;
/// `unknown` for others or an unparsable certificate). In TLS 1.3 the server's handshake
/// signature is made with this key, so this names the signature algorithm a client verified.
pub fn certificate_key_algorithm(cert: &CertificateDer<'_>) -> &'static str {
    let Ok(parsed) = webpki::EndEntityCert::try_from(cert) else {
        return "unknown";
    };
    let spki = parsed.subject_public_key_info();
    // SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier (a SEQUENCE), … }
    let algorithm = der_sequence(spki.as_ref()).and_then(der_sequence);
    KEY_ALGORITHMS
        .iter()
        .find(|(_, id)| algorithm == Some(id.as_ref()))
        .map_or("unknown", |(name, _)| name)
}

/// The contents of the DER SEQUENCE at the start of `der` (X.690 §8.1: tag 0x30, then a short
/// or long-form length).
fn der_sequence(der: &[u8]) -> Option<&[u8]> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    if tag != 0x30 {
        return None;
    }
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let bytes = rest.get(..n)?;
            let len = bytes.iter().fold(0usize, |l, b| (l << 8) | usize::from(*b));
            (len, &rest[n..])
        }
        _ => return None,
    };
    rest.get(..len)
}

/// Server TLS settings.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct TlsSettings {
    /// Key exchange policy.
    pub policy: KxPolicy,
    /// Certificate chain and key files (PEM); `None` means make a self-signed one.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// A certificate chain and signing key built in memory by an embedder (rustls'
    /// `CertifiedKey::from_der`, or any signing key rustls accepts); when set it is served as
    /// is, files are neither read nor written, and a reload keeps it.
    pub certified_key: Option<Arc<CertifiedKey>>,
    /// Where a self-signed certificate (and its key, mode 0600) is kept.
    pub generated_cert_dir: PathBuf,
    /// Key algorithm of the self-signed certificate; `None`: ECDSA-P256, or ML-DSA-44 under
    /// [`KxPolicy::PqStrict`]. A stored one of another algorithm is replaced.
    pub certificate_algorithm: Option<CertAlgorithm>,
    /// DNS names or IP addresses (presentation format) the self-signed certificate must
    /// cover besides `localhost`, the loopback addresses and the listen addresses.
    pub names: Vec<String>,
}

impl TlsSettings {
    /// The defaults, with a self-signed certificate kept in `generated_cert_dir`.
    pub fn generated_in(generated_cert_dir: PathBuf) -> TlsSettings {
        TlsSettings {
            generated_cert_dir,
            ..TlsSettings::default()
        }
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A configured certificate name is neither a DNS name nor an IP address.
    #[error("TLS certificate name {0:?} is neither a DNS name nor an IP address")]
    Name(String),
    /// Certificate generation failed.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The policy requires an ML-DSA certificate and this one has another key.
    #[error(
        "TLS policy pq-strict needs a certificate with an ML-DSA key; {certificate} has a(n) \
         {algorithm} key (use an ML-DSA certificate, or the generated one with \
         certificate_algorithm ML-DSA-44/65/87)"
    )]
    NotPostQuantum {
        /// The certificate file, or "the in-memory certificate".
        certificate: String,
        /// Its key algorithm ([`certificate_key_algorithm`]).
        algorithm: &'static str,
    },
    /// rustls rejected the certificate, key or configuration (e.g. the key does not belong to
    /// the certificate).
    #[error("{context}: {error}")]
    Rustls {
        /// What was being set up (e.g. the certificate file).
        context: String,
        /// rustls' error.
        error: rustls::Error,
    },
}

impl TlsError {
    fn rustls(context: impl Into<String>) -> impl FnOnce(rustls::Error) -> TlsError {
        let context = context.into();
        move |error| TlsError::Rustls { context, error }
    }
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
        KxPolicy::PqOnly | KxPolicy::PqStrict => {
            vec![kx_group::X25519MLKEM768, kx_group::SECP256R1MLKEM768]
        }
    }
}

/// True for the hybrid post-quantum (ML-KEM) named groups of rustls' aws-lc-rs provider.
pub fn is_hybrid(group: rustls::NamedGroup) -> bool {
    matches!(
        group,
        rustls::NamedGroup::X25519MLKEM768
            | rustls::NamedGroup::secp256r1MLKEM768
            | rustls::NamedGroup::MLKEM768
    )
}

/// The aws-lc-rs provider with the key exchange groups of `policy`.
pub fn crypto_provider(policy: KxPolicy) -> CryptoProvider {
    CryptoProvider {
        kx_groups: kx_groups(policy),
        ..aws_lc_rs::default_provider()
    }
}

/// What a certificate is, without key material (for logs and status output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The certificate file (empty for [`TlsSettings::certified_key`]).
    pub cert_path: PathBuf,
    /// Key algorithm of the leaf certificate ([`certificate_key_algorithm`]).
    pub algorithm: &'static str,
    /// SHA-256 fingerprint of the leaf certificate (upper-case hex bytes joined by `:`).
    pub fingerprint: String,
    /// True if the certificate was generated (now or on an earlier start).
    pub self_signed: bool,
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

/// The certificates of a PEM file, or [`TlsError::Pem`] naming the file if it holds none.
///
/// # Errors
/// [`TlsError::Io`] if the file cannot be read or a PEM block is corrupt, [`TlsError::Pem`] if
/// it holds no CERTIFICATE block.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(io_err(path))?;
    let chain = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err(path))?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            what: "no CERTIFICATE block",
        });
    }
    Ok(chain)
}

/// The private key in `path`, with a warning in the log if every user may read the file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    warn_if_world_readable(path);
    let pem = std::fs::read(path).map_err(io_err(path))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(io_err(path))?
        .ok_or_else(|| TlsError::Pem {
            path: path.to_path_buf(),
            what: "no PRIVATE KEY block",
        })
}

/// A name the self-signed certificate covers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SubjectName {
    Dns(String),
    Ip(IpAddr),
}

impl SubjectName {
    fn parse(text: &str) -> Result<SubjectName, TlsError> {
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(SubjectName::Ip(ip));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        match ServerName::try_from(name.as_str()) {
            Ok(ServerName::DnsName(_)) => Ok(SubjectName::Dns(name)),
            _ => Err(TlsError::Name(text.to_string())),
        }
    }

    fn server_name(&self) -> Option<ServerName<'static>> {
        match self {
            SubjectName::Dns(n) => ServerName::try_from(n.clone()).ok(),
            SubjectName::Ip(ip) => Some(ServerName::IpAddress((*ip).into())),
        }
    }

    fn san(&self) -> Result<rcgen::SanType, rcgen::Error> {
        Ok(match self {
            SubjectName::Dns(n) => rcgen::SanType::DnsName(n.clone().try_into()?),
            SubjectName::Ip(ip) => rcgen::SanType::IpAddress(*ip),
        })
    }
}

/// The names a generated certificate must cover: `localhost`, the loopback addresses, the
/// configured names and the listen addresses (for a wildcard address, every address of that
/// family on the machine's interfaces).
fn subject_names(names: &[String], listen: &[SocketAddr]) -> Result<Vec<SubjectName>, TlsError> {
    let mut out = vec![
        SubjectName::Dns("localhost".into()),
        SubjectName::Ip(Ipv4Addr::LOCALHOST.into()),
        SubjectName::Ip(Ipv6Addr::LOCALHOST.into()),
    ];
    for n in names {
        out.push(SubjectName::parse(n)?);
    }
    for addr in listen {
        if addr.ip().is_unspecified() {
            out.extend(
                interface_addresses()
                    .into_iter()
                    .filter(|ip| ip.is_ipv4() == addr.is_ipv4())
                    .map(SubjectName::Ip),
            );
        } else {
            out.push(SubjectName::Ip(addr.ip()));
        }
    }
    let mut unique = Vec::with_capacity(out.len());
    for n in out {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    Ok(unique)
}

/// The IP addresses of the machine's interfaces (empty if they cannot be listed).
fn interface_addresses() -> Vec<IpAddr> {
    let Ok(list) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    list.filter_map(|i| {
        let a = i.address?;
        if let Some(v4) = a.as_sockaddr_in() {
            return Some(IpAddr::V4(v4.ip()));
        }
        // Link-local IPv6 addresses need a scope, which certificates cannot name.
        a.as_sockaddr_in6()
            .map(|v6| v6.ip())
            .filter(|ip| (ip.segments()[0] & 0xffc0) != 0xfe80)
            .map(IpAddr::V6)
    })
    .collect()
}

/// The first of `names` the certificate `der` is not valid for, if any.
fn uncovered<'n>(der: &CertificateDer<'_>, names: &'n [SubjectName]) -> Option<&'n SubjectName> {
    let Ok(cert) = webpki::EndEntityCert::try_from(der) else {
        return names.first();
    };
    names.iter().find(|n| {
        n.server_name()
            .is_none_or(|sn| cert.verify_is_valid_for_subject_name(&sn).is_err())
    })
}

/// The server's certificate chain and key, replaceable while serving (see the module
/// documentation); rustls asks it for the certificate at every handshake.
pub struct ServerCertificate {
    settings: TlsSettings,
    /// The names a generated certificate must cover.
    names: Vec<SubjectName>,
    provider: Arc<CryptoProvider>,
    current: RwLock<(Arc<CertifiedKey>, CertificateInfo)>,
}

impl std::fmt::Debug for ServerCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.info();
        write!(
            f,
            "ServerCertificate({}, sha256 {})",
            info.cert_path.display(),
            info.fingerprint
        )
    }
}

impl ServerCertificate {
    /// Loads the configured certificate and key, or the generated ones from
    /// `settings.generated_cert_dir`, generating them first if they do not exist or do not
    /// cover `localhost`, 127.0.0.1, ::1, `settings.names` and the IP addresses of `listen`
    /// (ECDSA P-256, self-signed).
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read or written or holds no usable PEM, a
    /// key that does not belong to its certificate, or an invalid name.
    pub fn load(
        settings: &TlsSettings,
        listen: &[SocketAddr],
    ) -> Result<Arc<ServerCertificate>, TlsError> {
        let names = subject_names(&settings.names, listen)?;
        let provider = Arc::new(crypto_provider(settings.policy));
        let current = RwLock::new(load_files(settings, &names, &provider)?);
        Ok(Arc::new(ServerCertificate {
            settings: settings.clone(),
            names,
            provider,
            current,
        }))
    }

    /// Reads the certificate and key files again (regenerating a missing or insufficient
    /// self-signed certificate) and serves them from the next handshake on.
    ///
    /// # Errors
    /// As [`ServerCertificate::load`]; the certificate in use stays then.
    pub fn reload(&self) -> Result<CertificateInfo, TlsError> {
        let (key, info) = load_files(&self.settings, &self.names, &self.provider)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = (key, info.clone());
        Ok(info)
    }

    /// The certificate in use.
    pub fn info(&self) -> CertificateInfo {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .0,
        ))
    }
}

impl TlsSettings {
    /// The key algorithm of a generated certificate: [`TlsSettings::certificate_algorithm`],
    /// or by default ML-DSA-44 under [`KxPolicy::PqStrict`] and ECDSA-P256 otherwise.
    pub fn generated_algorithm(&self) -> CertAlgorithm {
        self.certificate_algorithm
            .unwrap_or(if self.policy.requires_pq_certificate() {
                CertAlgorithm::MlDsa44
            } else {
                CertAlgorithm::EcdsaP256
            })
    }
}

/// Checks the configured certificate and key files without serving (`--check`): readable,
/// belonging together, and post-quantum where the policy requires it. `None` when no files
/// are configured (the certificate is generated at start; nothing is written here).
///
/// # Errors
/// [`TlsError`] naming the file.
pub fn check_files(settings: &TlsSettings) -> Result<Option<CertificateInfo>, TlsError> {
    if settings.cert_and_key.is_none() {
        return Ok(None);
    }
    let provider = crypto_provider(settings.policy);
    load_files(settings, &[], &provider).map(|(_, info)| Some(info))
}

fn load_files(
    settings: &TlsSettings,
    names: &[SubjectName],
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, CertificateInfo), TlsError> {
    let (certified, info) = if let Some(certified) = &settings.certified_key {
        let leaf = certified
            .end_entity_cert()
            .map_err(TlsError::rustls("the in-memory certificate"))?;
        let info = CertificateInfo {
            cert_path: PathBuf::new(),
            algorithm: certificate_key_algorithm(leaf),
            fingerprint: fingerprint(leaf),
            self_signed: false,
        };
        (Arc::clone(certified), info)
    } else if let Some((cert, key)) = &settings.cert_and_key {
        load_pair(cert, key, false, provider)?
    } else {
        let algorithm = settings.generated_algorithm();
        load_generated(&settings.generated_cert_dir, names, algorithm, provider)?
    };
    if settings.policy.requires_pq_certificate() && !info.algorithm.starts_with("ML-DSA") {
        return Err(TlsError::NotPostQuantum {
            certificate: match &info.cert_path {
                p if p.as_os_str().is_empty() => "the in-memory certificate".into(),
                p => p.display().to_string(),
            },
            algorithm: info.algorithm,
        });
    }
    Ok((certified, info))
}

/// The self-signed certificate and key in `dir`, generated first if they are missing, do not
/// cover `names`, have another key algorithm than `algorithm`, or are unusable (e.g. a key
/// that belongs to another certificate).
fn load_generated(
    dir: &Path,
    names: &[SubjectName],
    algorithm: CertAlgorithm,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, CertificateInfo), TlsError> {
    let (cert, key) = (dir.join(GENERATED_CERT_FILE), dir.join(GENERATED_KEY_FILE));
    let stale = if !cert.exists() || !key.exists() {
        Some("none yet".to_string())
    } else {
        match read_certificates(&cert) {
            Ok(chain) => match certificate_key_algorithm(&chain[0]) {
                stored if stored != algorithm.name() => Some(format!(
                    "the stored one is {stored}, {algorithm} is configured"
                )),
                _ => uncovered(&chain[0], names)
                    .map(|n| format!("the stored one does not cover {n:?}")),
            },
            Err(e) => Some(format!("the stored one is unusable: {e}")),
        }
    };
    let regenerate = |reason: &str| {
        generate(&cert, &key, names, algorithm)?;
        info!(file = %cert.display(), %algorithm, reason, "generated a self-signed TLS certificate");
        Ok::<_, TlsError>(())
    };
    if let Some(reason) = &stale {
        regenerate(reason)?;
    }
    match load_pair(&cert, &key, true, provider) {
        Err(e) if stale.is_none() => {
            regenerate(&format!("the stored one is unusable: {e}"))?;
            load_pair(&cert, &key, true, provider)
        }
        loaded => loaded,
    }
}

/// The certificate chain in `cert_path` with the private key in `key_path`, checked to belong
/// together.
fn load_pair(
    cert_path: &Path,
    key_path: &Path,
    self_signed: bool,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, CertificateInfo), TlsError> {
    let chain = read_certificates(cert_path)?;
    let key = read_key(key_path)?;
    let info = CertificateInfo {
        algorithm: certificate_key_algorithm(&chain[0]),
        fingerprint: fingerprint(&chain[0]),
        cert_path: cert_path.to_path_buf(),
        self_signed,
    };
    let context = format!("{} with {}", cert_path.display(), key_path.display());
    let certified =
        CertifiedKey::from_der(chain, key, provider).map_err(TlsError::rustls(context))?;
    Ok((Arc::new(certified), info))
}

fn generate(
    cert_path: &Path,
    key_path: &Path,
    names: &[SubjectName],
    algorithm: CertAlgorithm,
) -> Result<(), TlsError> {
    let key = rcgen::KeyPair::generate_for(algorithm.rcgen())?;
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = names
        .iter()
        .map(SubjectName::san)
        .collect::<Result<_, _>>()?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "pqdns-server self-signed");
    let cert = params.self_signed(&key)?;
    if let Some(dir) = key_path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    write_atomic(key_path, key.serialize_pem().as_bytes(), FileMode::Private)
        .map_err(io_err(key_path))?;
    write_atomic(cert_path, cert.pem().as_bytes(), FileMode::Public).map_err(io_err(cert_path))
}

/// A rustls server configuration presenting `certificate` under `policy`, offering `alpn`
/// protocols, with session tickets and a [`SESSION_CACHE_SIZE`]-entry session cache. TLS 1.2
/// is allowed only under the hybrid-preferred policy (hybrid groups need TLS 1.3).
///
/// # Errors
/// [`TlsError::Rustls`] if rustls rejects the protocol versions or cannot make a ticketer.
pub fn server_config(
    policy: KxPolicy,
    certificate: Arc<ServerCertificate>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let versions: &[&rustls::SupportedProtocolVersion] = match policy {
        KxPolicy::HybridPreferred => &[&rustls::version::TLS13, &rustls::version::TLS12],
        KxPolicy::PqOnly | KxPolicy::PqStrict => &[&rustls::version::TLS13],
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(crypto_provider(policy)))
        .with_protocol_versions(versions)
        .map_err(TlsError::rustls("TLS protocol versions"))?
        .with_no_client_auth()
        .with_cert_resolver(certificate);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    config.ticketer = aws_lc_rs::Ticketer::new().map_err(TlsError::rustls("TLS tickets"))?;
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
        assert!(pq.iter().all(|g| is_hybrid(*g)));
        assert!(!is_hybrid(NamedGroup::X25519));
    }

    fn settings(dir: &Path) -> TlsSettings {
        TlsSettings {
            generated_cert_dir: dir.join("keys"),
            ..TlsSettings::default()
        }
    }

    /// Issue 15: every algorithm can be generated and is recognised in the certificate; a
    /// stored certificate of another algorithm is replaced; pq-strict defaults to ML-DSA-44
    /// and refuses a classical certificate.
    #[test]
    fn certificate_algorithms_are_generated_recognised_and_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let listen: [SocketAddr; 1] = ["127.0.0.1:853".parse().unwrap()];
        let mut previous = String::new();
        for algorithm in CertAlgorithm::ALL {
            let s = TlsSettings {
                certificate_algorithm: Some(algorithm),
                ..settings(dir.path())
            };
            let info = ServerCertificate::load(&s, &listen).unwrap().info();
            assert_eq!(info.algorithm, algorithm.name());
            assert_ne!(info.fingerprint, previous, "{algorithm}: a new certificate");
            previous = info.fingerprint;
            let chain = read_certificates(&info.cert_path).unwrap();
            assert_eq!(CertAlgorithm::of_certificate(&chain[0]), Some(algorithm));
            assert_eq!(algorithm.name().parse::<CertAlgorithm>(), Ok(algorithm));
            assert_eq!(
                algorithm.is_post_quantum(),
                algorithm.name().starts_with("ML-DSA")
            );
        }
        let strict = TlsSettings {
            policy: KxPolicy::PqStrict,
            ..settings(dir.path())
        };
        let info = ServerCertificate::load(&strict, &listen).unwrap().info();
        assert_eq!(info.algorithm, "ML-DSA-44");
        let classical = TlsSettings {
            certificate_algorithm: Some(CertAlgorithm::EcdsaP256),
            ..strict
        };
        let err = ServerCertificate::load(&classical, &listen).unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::NotPostQuantum {
                    algorithm: "ECDSA-P256",
                    ..
                }
            ),
            "{err}"
        );
        assert!("ML-DSA-128"
            .parse::<CertAlgorithm>()
            .unwrap_err()
            .contains("ML-DSA-65"));
        assert_eq!(
            certificate_key_algorithm(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])),
            "unknown"
        );
    }

    #[test]
    fn generated_certificate_is_reused_and_key_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path());
        let listen: [SocketAddr; 1] = ["127.0.0.1:853".parse().unwrap()];
        let a = ServerCertificate::load(&s, &listen).unwrap().info();
        let b = ServerCertificate::load(&s, &listen).unwrap().info();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.fingerprint.len(), 32 * 3 - 1);
        assert!(a.self_signed);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("keys").join(GENERATED_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0);
        }
        let cert = ServerCertificate::load(&s, &listen).unwrap();
        server_config(KxPolicy::PqOnly, cert, &[ALPN_DOT]).unwrap();
    }

    /// Issue 11 item 8: the generated certificate names the listen addresses and the
    /// configured names, and a stored one that does not is replaced.
    #[test]
    fn generated_certificate_covers_listen_addresses_and_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path());
        let loopback: [SocketAddr; 1] = ["127.0.0.1:853".parse().unwrap()];
        let first = ServerCertificate::load(&s, &loopback).unwrap().info();
        let chain = read_certificates(&first.cert_path).unwrap();
        let cert = webpki::EndEntityCert::try_from(&chain[0]).unwrap();
        let valid_for = |name: ServerName<'static>| cert.verify_is_valid_for_subject_name(&name);
        assert!(valid_for(ServerName::try_from("localhost").unwrap()).is_ok());
        assert!(valid_for(ServerName::try_from("192.0.2.53").unwrap()).is_err());

        s.names = vec!["dns.example.net.".into(), "2001:db8::53".into()];
        let listen: [SocketAddr; 2] = [
            "192.0.2.53:853".parse().unwrap(),
            "[2001:db8::1]:443".parse().unwrap(),
        ];
        let second = ServerCertificate::load(&s, &listen).unwrap().info();
        assert_ne!(first.fingerprint, second.fingerprint, "regenerated");
        let chain = read_certificates(&second.cert_path).unwrap();
        let cert = webpki::EndEntityCert::try_from(&chain[0]).unwrap();
        for name in [
            "localhost",
            "127.0.0.1",
            "::1",
            "dns.example.net",
            "2001:db8::53",
            "192.0.2.53",
            "2001:db8::1",
        ] {
            let sn = ServerName::try_from(name).unwrap();
            assert!(
                cert.verify_is_valid_for_subject_name(&sn).is_ok(),
                "{name} not covered"
            );
        }
        assert!(cert
            .verify_is_valid_for_subject_name(&ServerName::try_from("other.example").unwrap())
            .is_err());
        let third = ServerCertificate::load(&s, &listen[..1]).unwrap().info();
        assert_eq!(
            second.fingerprint, third.fingerprint,
            "a covering one is kept"
        );

        // A generated key that no longer fits the certificate (e.g. a crash between the two
        // writes) is replaced rather than refused.
        let keys = dir.path().join("keys");
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        std::fs::write(keys.join(GENERATED_KEY_FILE), other.serialize_pem()).unwrap();
        let fourth = ServerCertificate::load(&s, &listen[..1]).unwrap().info();
        assert_ne!(third.fingerprint, fourth.fingerprint);

        s.names = vec!["not a name".into()];
        let err = ServerCertificate::load(&s, &listen)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a name"), "{err}");
    }

    /// A configured key file every user may read is named in a warning (with its mode, never
    /// its content) when it is loaded; a 0600 one is not.
    #[cfg(unix)]
    #[test]
    fn a_key_file_every_user_may_read_is_warned_about() {
        use std::os::unix::fs::PermissionsExt as _;
        use std::sync::Mutex;

        #[derive(Clone, Default)]
        struct Log(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Log {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        std::fs::write(&cert_path, params.self_signed(&key).unwrap().pem()).unwrap();
        let pem = key.serialize_pem();
        std::fs::write(&key_path, &pem).unwrap();
        let s = TlsSettings {
            cert_and_key: Some((cert_path, key_path.clone())),
            ..settings(dir.path())
        };
        let load_logged = |mode: u32| {
            std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(mode)).unwrap();
            let log = Log::default();
            let writer = log.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                ServerCertificate::load(&s, &[]).unwrap();
            });
            let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
            text
        };
        let quiet = load_logged(0o600);
        assert!(!quiet.contains("every user"), "{quiet}");
        let warned = load_logged(0o644);
        assert!(
            warned.contains("every user")
                && warned.contains(&key_path.display().to_string())
                && warned.contains("mode=0644"),
            "{warned}"
        );
        let secret = pem.lines().nth(1).unwrap();
        assert!(!warned.contains(secret), "the key itself is never logged");
    }

    /// Issue 11 item 21: a reload serves new files, and keeps the old certificate when the
    /// new files are unusable.
    #[test]
    fn reload_replaces_the_certificate_and_keeps_it_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let make = || {
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
            let cert = params.self_signed(&key).unwrap();
            std::fs::write(&cert_path, cert.pem()).unwrap();
            std::fs::write(&key_path, key.serialize_pem()).unwrap();
        };
        make();
        let s = TlsSettings {
            cert_and_key: Some((cert_path.clone(), key_path.clone())),
            ..settings(dir.path())
        };
        let store = ServerCertificate::load(&s, &[]).unwrap();
        let first = store.info();
        assert!(!first.self_signed);
        make();
        let second = store.reload().unwrap();
        assert_ne!(first.fingerprint, second.fingerprint);
        assert_eq!(store.info(), second);

        std::fs::write(&cert_path, "no certificate here\n").unwrap();
        let err = store.reload().unwrap_err().to_string();
        assert!(
            err.contains("c.pem") && err.contains("CERTIFICATE"),
            "{err}"
        );
        assert_eq!(store.info(), second, "the old certificate stays");

        // A key that belongs to another certificate.
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&other)
            .unwrap();
        std::fs::write(&cert_path, cert.pem()).unwrap();
        let err = store.reload().unwrap_err().to_string();
        assert!(err.contains("c.pem") && err.contains("k.pem"), "{err}");
        assert_eq!(store.info(), second);
    }

    #[test]
    fn an_in_memory_certificate_is_served_without_touching_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["dns.example".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let provider = crypto_provider(KxPolicy::HybridPreferred);
        let certified =
            Arc::new(CertifiedKey::from_der(vec![cert.der().clone()], der, &provider).unwrap());
        let s = TlsSettings {
            certified_key: Some(Arc::clone(&certified)),
            // Would be read if the in-memory key were ignored: it does not exist.
            cert_and_key: Some((dir.path().join("none.pem"), dir.path().join("none.key"))),
            ..settings(dir.path())
        };
        let store = ServerCertificate::load(&s, &["127.0.0.1:853".parse().unwrap()]).unwrap();
        let info = store.info();
        assert_eq!(info.fingerprint, fingerprint(cert.der()));
        assert!(!info.self_signed && info.cert_path.as_os_str().is_empty());
        assert_eq!(store.reload().unwrap(), info, "a reload keeps it");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no file written"
        );
    }
}

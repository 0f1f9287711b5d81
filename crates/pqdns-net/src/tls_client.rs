//! TLS client configuration for DoT and DoH clients (the resolver's transports, the load
//! generator): rustls with the aws-lc-rs provider, TLS 1.3 only (hybrid key exchange needs
//! it), X25519MLKEM768 offered first, or only hybrid groups ([`ClientOptions::pq_only`]), or one
//! chosen named group (RFC 8446 §4.2.7); only ML-DSA server authentication if asked
//! ([`ClientOptions::pq_certificates_only`]); ALPN; session resumption (RFC 8446 §2.2) with an
//! in-memory cache or none; and the certificates to trust ([`Roots`]): PEM files (CA
//! certificates or a server's self-signed certificate), the system store, or, for test
//! servers only, [`Roots::DangerAcceptAnyCertificate`].

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::crypto::{aws_lc_rs, WebPkiSupportedAlgorithms};
use rustls::{NamedGroup, SignatureScheme};

use crate::tls::{is_hybrid, read_certificates, TlsError};

/// Whom a client trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Roots {
    /// The certificates of PEM files: CA certificates, or servers' self-signed certificates.
    /// A file without any is an error naming it.
    CaFiles(Vec<PathBuf>),
    /// The operating system's certificate store (loaded when the configuration is built:
    /// tens of milliseconds).
    System,
    /// No certificate check at all: any chain is accepted for any name; only the handshake
    /// signature is checked against the certificate's key. For self-signed test servers only:
    /// an active attacker can read and change everything.
    DangerAcceptAnyCertificate,
}

/// TLS client settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Whom to trust.
    pub roots: Roots,
    /// Offer only this named group; `None`: the provider's defaults (X25519MLKEM768, X25519,
    /// secp256r1, secp384r1).
    pub group: Option<NamedGroup>,
    /// Offer only hybrid post-quantum groups, so a classical-only server fails the handshake.
    pub pq_only: bool,
    /// Accept only post-quantum server authentication: offer and accept only the ML-DSA
    /// signature schemes (FIPS 204; draft-ietf-tls-mldsa), for the handshake signature
    /// (CertificateVerify) and for every signature of the certificate chain, so a server with
    /// a classical certificate fails the handshake.
    pub pq_certificates_only: bool,
    /// ALPN protocols to offer, most preferred first (e.g. `dot`, or `h2`).
    pub alpn: Vec<Vec<u8>>,
    /// TLS sessions remembered for resumption; 0 turns resumption off.
    pub session_cache: usize,
}

/// Sessions a client remembers by default.
pub const DEFAULT_SESSION_CACHE: usize = 64;

impl ClientOptions {
    /// Trust `roots`, default groups, no ALPN, [`DEFAULT_SESSION_CACHE`] sessions.
    pub fn new(roots: Roots) -> ClientOptions {
        ClientOptions {
            roots,
            group: None,
            pq_only: false,
            pq_certificates_only: false,
            alpn: Vec::new(),
            session_cache: DEFAULT_SESSION_CACHE,
        }
    }

    /// Offers `alpn` (one protocol).
    pub fn with_alpn(mut self, alpn: &[u8]) -> ClientOptions {
        self.alpn = vec![alpn.to_vec()];
        self
    }
}

/// Why a client configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientTlsError {
    /// A CA file could not be read or holds no certificate (the error names the file).
    #[error("TLS CA file {0}")]
    CaFile(TlsError),
    /// A certificate of a CA file or the system store was rejected.
    #[error("TLS trust anchor: {0}")]
    BadRoot(rustls::Error),
    /// The system certificate store could not be read, or is empty.
    #[error("system certificate store: {0}")]
    SystemRoots(String),
    /// The group choice left nothing to offer (e.g. a classical group with `pq_only`).
    #[error("no key-exchange group left to offer: {0}")]
    NoGroup(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Names of the named groups the aws-lc-rs provider implements, as accepted by
/// [`parse_group`] (case-insensitive).
pub fn group_names() -> Vec<String> {
    aws_lc_rs::ALL_KX_GROUPS
        .iter()
        .map(|g| format!("{:?}", g.name()))
        .collect()
}

/// The named group called `name` (e.g. `X25519`, `secp256r1`, `X25519MLKEM768`,
/// `secp256r1MLKEM768`, `MLKEM768`), if aws-lc-rs implements it.
///
/// # Errors
/// A message listing the known names.
pub fn parse_group(name: &str) -> Result<NamedGroup, String> {
    aws_lc_rs::ALL_KX_GROUPS
        .iter()
        .map(|g| g.name())
        .find(|g| format!("{g:?}").eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            format!(
                "unknown named group {name:?}; known: {}",
                group_names().join(", ")
            )
        })
}

fn root_store(roots: &Roots) -> Result<rustls::RootCertStore, ClientTlsError> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        Roots::CaFiles(paths) => {
            for path in paths {
                for cert in read_certificates(path).map_err(ClientTlsError::CaFile)? {
                    store.add(cert).map_err(ClientTlsError::BadRoot)?;
                }
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "system certificate store");
            }
            let (added, ignored) = store.add_parsable_certificates(found.certs);
            tracing::debug!(added, ignored, "system certificate store loaded");
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or("no certificates found".to_string(), |e| e.to_string());
                return Err(ClientTlsError::SystemRoots(why));
            }
        }
        Roots::DangerAcceptAnyCertificate => {}
    }
    Ok(store)
}

/// A rustls client configuration for `opts` (see the module documentation).
///
/// # Errors
/// [`ClientTlsError`] for an unreadable or empty CA file, an unusable system store, or a group
/// choice that leaves nothing to offer.
pub fn client_config(opts: &ClientOptions) -> Result<Arc<rustls::ClientConfig>, ClientTlsError> {
    let mut provider = aws_lc_rs::default_provider();
    provider.kx_groups = aws_lc_rs::ALL_KX_GROUPS
        .iter()
        .copied()
        .filter(|g| match opts.group {
            Some(want) => g.name() == want,
            None => provider.kx_groups.iter().any(|d| d.name() == g.name()),
        })
        .filter(|g| !opts.pq_only || is_hybrid(g.name()))
        .collect();
    if provider.kx_groups.is_empty() {
        let asked = opts
            .group
            .map_or("the defaults".to_string(), |g| format!("{g:?}"));
        let why = if opts.pq_only { " with pq-only" } else { "" };
        return Err(ClientTlsError::NoGroup(format!("{asked}{why}")));
    }
    if opts.pq_certificates_only {
        provider.signature_verification_algorithms =
            ml_dsa_only(provider.signature_verification_algorithms);
    }
    let algorithms = provider.signature_verification_algorithms;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut config = match &opts.roots {
        Roots::DangerAcceptAnyCertificate => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(danger::AcceptAnyCertificate::with(
                algorithms,
            )))
            .with_no_client_auth(),
        roots => builder
            .with_root_certificates(root_store(roots)?)
            .with_no_client_auth(),
    };
    config.alpn_protocols.clone_from(&opts.alpn);
    config.resumption = match opts.session_cache {
        0 => rustls::client::Resumption::disabled(),
        n => rustls::client::Resumption::in_memory_sessions(n),
    };
    Ok(Arc::new(config))
}

/// `all` restricted to the ML-DSA-44/65/87 signature schemes, for both the TLS 1.3 handshake
/// signature and certificate chains (built once; rustls wants `'static` tables).
fn ml_dsa_only(all: WebPkiSupportedAlgorithms) -> WebPkiSupportedAlgorithms {
    static ONLY: OnceLock<WebPkiSupportedAlgorithms> = OnceLock::new();
    *ONLY.get_or_init(|| {
        let ml_dsa = [
            SignatureScheme::ML_DSA_44,
            SignatureScheme::ML_DSA_65,
            SignatureScheme::ML_DSA_87,
        ];
        let mapping: Vec<_> = all
            .mapping
            .iter()
            .filter(|(scheme, _)| ml_dsa.contains(scheme))
            .copied()
            .collect();
        let chain: Vec<_> = mapping
            .iter()
            .flat_map(|(_, algs)| algs.iter().copied())
            .collect();
        WebPkiSupportedAlgorithms {
            all: Box::leak(chain.into_boxed_slice()),
            mapping: Box::leak(mapping.into_boxed_slice()),
        }
    })
}

/// Certificate verification switched off ([`Roots::DangerAcceptAnyCertificate`]).
pub mod danger {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};

    /// Accepts any certificate chain for any name but still checks the handshake signature
    /// against the certificate's key (aws-lc-rs algorithms). Only for self-signed test servers.
    #[derive(Debug)]
    pub struct AcceptAnyCertificate(rustls::crypto::WebPkiSupportedAlgorithms);

    impl AcceptAnyCertificate {
        /// The verifier with every signature algorithm of the aws-lc-rs provider.
        #[allow(clippy::new_without_default)]
        pub fn new() -> AcceptAnyCertificate {
            Self::with(
                rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms,
            )
        }

        /// The verifier checking handshake signatures with `algorithms` only.
        pub fn with(algorithms: rustls::crypto::WebPkiSupportedAlgorithms) -> AcceptAnyCertificate {
            AcceptAnyCertificate(algorithms)
        }
    }

    impl ServerCertVerifier for AcceptAnyCertificate {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp: &[u8],
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
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            // The handshake signature is still checked: only the certificate chain is not.
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_case_insensitively_and_filters_apply() {
        assert_eq!(
            parse_group("x25519mlkem768").unwrap(),
            NamedGroup::X25519MLKEM768
        );
        assert_eq!(parse_group("secp256r1").unwrap(), NamedGroup::secp256r1);
        assert!(parse_group("ffdhe2048").unwrap_err().contains("X25519"));

        let any = || ClientOptions::new(Roots::DangerAcceptAnyCertificate);
        let groups = |o: &ClientOptions| {
            let c = client_config(o).unwrap();
            c.crypto_provider()
                .kx_groups
                .iter()
                .map(|g| g.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(groups(&any())[0], NamedGroup::X25519MLKEM768);
        let pq = ClientOptions {
            pq_only: true,
            ..any()
        };
        assert!(groups(&pq).iter().all(|g| is_hybrid(*g)));
        let one = ClientOptions {
            group: Some(NamedGroup::X25519),
            ..any()
        };
        assert_eq!(groups(&one), [NamedGroup::X25519]);
        let none = ClientOptions {
            group: Some(NamedGroup::X25519),
            pq_only: true,
            ..any()
        };
        assert!(matches!(
            client_config(&none),
            Err(ClientTlsError::NoGroup(_))
        ));
    }

    /// Issue 11 item 12: a CA file without a certificate is an error naming the file.
    #[test]
    fn ca_file_without_certificates_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty-ca.pem");
        std::fs::write(&empty, "# nothing here\n").unwrap();
        let err = client_config(&ClientOptions::new(Roots::CaFiles(vec![empty]))).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("empty-ca.pem") && text.contains("no CERTIFICATE"),
            "{text}"
        );
        let missing = dir.path().join("missing.pem");
        let err = client_config(&ClientOptions::new(Roots::CaFiles(vec![missing]))).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, cert.pem()).unwrap();
        let opts = ClientOptions::new(Roots::CaFiles(vec![good])).with_alpn(b"dot");
        let config = client_config(&opts).unwrap();
        assert_eq!(config.alpn_protocols, [b"dot".to_vec()]);
    }
}

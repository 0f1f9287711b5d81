//! TLS client configuration for the load generator: rustls with the aws-lc-rs provider,
//! TLS 1.3 only, one chosen key-exchange named group (RFC 8446 §4.2.7) or the provider's
//! defaults, and session resumption (RFC 8446 §2.2) switched on or off.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::aws_lc_rs;
use rustls::NamedGroup;

/// TLS settings of a load run.
#[derive(Clone, Debug, Default)]
pub struct TlsClientOptions {
    /// Offer only this named group (e.g. X25519MLKEM768); `None`: the provider's defaults
    /// (X25519MLKEM768 first, then X25519, secp256r1, secp384r1).
    pub group: Option<NamedGroup>,
    /// Offer only hybrid/post-quantum groups, so a classical-only server fails the handshake.
    pub pq_only: bool,
    /// Accept any certificate (self-signed test servers); the handshake signature is still
    /// checked.
    pub insecure: bool,
    /// PEM file of CA certificates (or the server's self-signed certificate) to trust.
    pub ca_file: Option<PathBuf>,
    /// Server name to send (SNI) and verify; default: the target's IP address.
    pub server_name: Option<String>,
}

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsClientError {
    /// The CA file could not be read or holds no certificate.
    #[error("{0}")]
    CaFile(String),
    /// No certificate source: neither `--ca` nor `--insecure`.
    #[error("DoT/DoH needs --ca FILE or --insecure")]
    NoTrust,
    /// The group filter left nothing to offer (e.g. a classical group with `pq_only`).
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

/// A client configuration offering ALPN `alpn`, with session resumption if `resumption`
/// (an in-memory cache of `cache_size` sessions shared by all connections of the run).
///
/// # Errors
/// [`TlsClientError`] for an unreadable CA file, no trust source, or an empty group list.
pub fn client_config(
    opts: &TlsClientOptions,
    alpn: &[u8],
    resumption: bool,
    cache_size: usize,
) -> Result<Arc<rustls::ClientConfig>, TlsClientError> {
    let mut provider = aws_lc_rs::default_provider();
    provider.kx_groups = aws_lc_rs::ALL_KX_GROUPS
        .iter()
        .copied()
        .filter(|g| match opts.group {
            Some(want) => g.name() == want,
            None => provider.kx_groups.iter().any(|d| d.name() == g.name()),
        })
        .filter(|g| !opts.pq_only || pqdns_resolver::transport::is_hybrid(g.name()))
        .collect();
    if provider.kx_groups.is_empty() {
        let asked = opts
            .group
            .map_or("the defaults".to_string(), |g| format!("{g:?}"));
        let why = if opts.pq_only { " with --pq-only" } else { "" };
        return Err(TlsClientError::NoGroup(format!("{asked}{why}")));
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut config = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(
                pqdns_resolver::transport::insecure::AcceptAnyCert::new(),
            ))
            .with_no_client_auth()
    } else {
        let path = opts.ca_file.as_ref().ok_or(TlsClientError::NoTrust)?;
        let pem = std::fs::read(path)
            .map_err(|e| TlsClientError::CaFile(format!("{}: {e}", path.display())))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert =
                cert.map_err(|e| TlsClientError::CaFile(format!("{}: {e}", path.display())))?;
            roots.add(cert)?;
        }
        if roots.is_empty() {
            return Err(TlsClientError::CaFile(format!(
                "{}: no CERTIFICATE block",
                path.display()
            )));
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    config.resumption = if resumption {
        rustls::client::Resumption::in_memory_sessions(cache_size.max(1))
    } else {
        rustls::client::Resumption::disabled()
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_case_insensitively() {
        assert_eq!(
            parse_group("x25519mlkem768").unwrap(),
            NamedGroup::X25519MLKEM768
        );
        assert_eq!(parse_group("secp256r1").unwrap(), NamedGroup::secp256r1);
        assert_eq!(parse_group("MLKEM768").unwrap(), NamedGroup::MLKEM768);
        assert!(parse_group("ffdhe2048").unwrap_err().contains("X25519"));
    }

    #[test]
    fn pq_only_with_a_classical_group_is_an_error() {
        let opts = TlsClientOptions {
            group: Some(NamedGroup::X25519),
            pq_only: true,
            insecure: true,
            ..TlsClientOptions::default()
        };
        assert!(matches!(
            client_config(&opts, b"dot", false, 1),
            Err(TlsClientError::NoGroup(_))
        ));
        let no_trust = TlsClientOptions::default();
        assert!(matches!(
            client_config(&no_trust, b"dot", false, 1),
            Err(TlsClientError::NoTrust)
        ));
    }
}

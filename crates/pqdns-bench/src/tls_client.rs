//! TLS client settings of the load generator, mapped onto pqdns-net's client configuration
//! ([`pqdns_net::tls_client`]): rustls with the aws-lc-rs provider, TLS 1.3 only, one chosen
//! key-exchange named group (RFC 8446 §4.2.7) or the provider's defaults, and session
//! resumption (RFC 8446 §2.2) switched on or off.

use std::path::PathBuf;
use std::sync::Arc;

use pqdns_net::tls_client::{self, ClientOptions, ClientTlsError, Roots};
use rustls::NamedGroup;

pub use pqdns_net::tls_client::{group_names, parse_group};

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
    pub danger_accept_any_certificate: bool,
    /// PEM file of CA certificates (or the server's self-signed certificate) to trust.
    pub ca_file: Option<PathBuf>,
    /// Server name to send (SNI) and verify; default: the target's IP address.
    pub server_name: Option<String>,
}

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsClientError {
    /// No certificate source: neither `--ca` nor `--insecure`.
    #[error("DoT/DoH needs --ca FILE or --insecure")]
    NoTrust,
    /// pqdns-net could not build the configuration (CA file unreadable or without
    /// certificates, no group left to offer, rustls refused it).
    #[error(transparent)]
    Tls(#[from] ClientTlsError),
}

/// A client configuration offering ALPN `alpn`, with session resumption if `resumption`
/// (an in-memory cache of `cache_size` sessions shared by all connections of the run).
///
/// # Errors
/// [`TlsClientError`] for no trust source, an unreadable CA file or one without certificates,
/// or an empty group list.
pub fn client_config(
    opts: &TlsClientOptions,
    alpn: &[u8],
    resumption: bool,
    cache_size: usize,
) -> Result<Arc<rustls::ClientConfig>, TlsClientError> {
    let roots = match (&opts.ca_file, opts.danger_accept_any_certificate) {
        (_, true) => Roots::DangerAcceptAnyCertificate,
        (Some(path), false) => Roots::CaFiles(vec![path.clone()]),
        (None, false) => return Err(TlsClientError::NoTrust),
    };
    let mut client = ClientOptions::new(roots).with_alpn(alpn);
    client.group = opts.group;
    client.pq_only = opts.pq_only;
    client.session_cache = if resumption { cache_size.max(1) } else { 0 };
    Ok(tls_client::client_config(&client)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pq_only_with_a_classical_group_is_an_error() {
        let opts = TlsClientOptions {
            group: Some(NamedGroup::X25519),
            pq_only: true,
            danger_accept_any_certificate: true,
            ..TlsClientOptions::default()
        };
        assert!(matches!(
            client_config(&opts, b"dot", false, 1),
            Err(TlsClientError::Tls(ClientTlsError::NoGroup(_)))
        ));
        let no_trust = TlsClientOptions::default();
        assert!(matches!(
            client_config(&no_trust, b"dot", false, 1),
            Err(TlsClientError::NoTrust)
        ));
    }
}

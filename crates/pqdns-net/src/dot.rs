//! DNS over TLS (RFC 7858): the TCP stream loop ([`crate::tcp`]) inside TLS, ALPN "dot"
//! (RFC 7858 §3.2 via the IANA registry), after a handshake bounded by its own, short timeout
//! ([`crate::ListenConfig::handshake_timeout`]: a client that connects and never completes
//! the handshake holds a connection slot seconds, not the idle timeout; DoH uses the same
//! handshake). The negotiated key exchange group is logged at debug level and
//! reported as [`Event::Handshake`]; a handshake the TLS policy or certificate refuses is
//! logged at info level (at most once a second) and reported with its reason. Zone transfers over TLS (XoT, RFC 9103) are served like
//! over TCP; the ALPN is "dot" (RFC 9103 §7.1 registers it for XoT too).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

use crate::service::{Event, HandshakeFailure, Service, Transport};
use crate::tcp::StreamLimits;

/// Runs the TLS handshake on `stream`, bounded by the handshake timeout; logs the negotiated TLS
/// version, key exchange group and resumption at debug level and reports the handshake (or its
/// failure) to `service`. `None` if it failed or timed out.
pub(crate) async fn handshake<S: Service>(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    client: SocketAddr,
    transport: Transport,
    service: &S,
    limits: StreamLimits,
) -> Option<TlsStream<TcpStream>> {
    let error = match timeout(limits.handshake, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let conn = tls.get_ref().1;
            let group = conn.negotiated_key_exchange_group().map(|g| g.name());
            service.event(&Event::Handshake {
                transport,
                client,
                group,
            });
            debug!(
                peer = %client,
                version = ?conn.protocol_version(),
                group = ?group,
                resumed = ?conn.handshake_kind(),
                "{} handshake done", transport.name()
            );
            return Some(tls);
        }
        Ok(Err(e)) => (HandshakeFailure::of(&e), e.to_string()),
        Err(_) => (HandshakeFailure::Timeout, "timed out".to_string()),
    };
    let (reason, error) = error;
    service.event(&Event::HandshakeFailed {
        transport,
        client,
        reason,
    });
    let name = transport.name();
    match reason {
        HandshakeFailure::NoSharedGroup | HandshakeFailure::NoSharedSignatureScheme
            if policy_log_due() =>
        {
            let why = if reason == HandshakeFailure::NoSharedGroup {
                "the client offers no key exchange group the TLS policy allows (pq-only and \
                 pq-strict allow only X25519MLKEM768 and SECP256R1MLKEM768)"
            } else {
                "the client accepts no signature algorithm of the server's certificate (a \
                 client without ML-DSA against an ML-DSA certificate, or one accepting only \
                 ML-DSA against a classical certificate)"
            };
            info!(peer = %client, reason = reason.name(), "{name} handshake refused: {why}");
        }
        _ => debug!(peer = %client, reason = reason.name(), %error, "{name} handshake failed"),
    }
    None
}

/// True at most once per second: refused handshakes are logged at info level that often (the
/// rest at debug level, and all are counted), so a flood of them cannot flood the log.
fn policy_log_due() -> bool {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LAST.swap(now, Ordering::Relaxed) != now
}

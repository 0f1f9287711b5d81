//! DNS over TLS (RFC 7858): the TCP stream loop ([`crate::tcp`]) inside TLS, ALPN "dot"
//! (RFC 7858 §3.2 via the IANA registry), after a handshake bounded by the idle timeout (DoH
//! uses the same handshake). The negotiated key exchange group is logged at debug level and
//! reported as [`Event::Handshake`]. Zone transfers over TLS (XoT, RFC 9103) are served like
//! over TCP; the ALPN is "dot" (RFC 9103 §7.1 registers it for XoT too).

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::service::{Event, Service, Transport};
use crate::tcp::StreamLimits;

/// Runs the TLS handshake on `stream`, bounded by the idle timeout; logs the negotiated TLS
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
    let error = match timeout(limits.idle, acceptor.accept(stream)).await {
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
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_string(),
    };
    service.event(&Event::HandshakeFailed { transport, client });
    debug!(peer = %client, %error, "{} handshake failed", transport.name());
    None
}

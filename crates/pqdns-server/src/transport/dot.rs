//! DNS over TLS (RFC 7858): the TCP stream loop inside TLS, ALPN "dot" (RFC 7858 §3.2 via the
//! IANA registry), the handshake bounded by the idle timeout. The negotiated key exchange group
//! is logged at debug level.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use super::tcp::{accept_loop, serve_stream};
use super::{ConnLimiter, Shared};

/// Serves DoT on `listener` with `acceptor`.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    limiter: Arc<ConnLimiter>,
    shutdown: watch::Receiver<bool>,
) {
    let rx = shutdown.clone();
    accept_loop(listener, limiter, shutdown, move |stream, peer, permit| {
        let (shared, acceptor, rx) = (Arc::clone(&shared), acceptor.clone(), rx.clone());
        async move {
            let tls = match timeout(shared.idle_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return debug!(%peer, error = %e, "DoT handshake failed"),
                Err(_) => return debug!(%peer, "DoT handshake timed out"),
            };
            log_handshake("DoT", peer, tls.get_ref().1);
            serve_stream(tls, &shared, rx).await;
            drop(permit);
        }
    })
    .await;
}

/// Logs the negotiated TLS version, key exchange group and resumption at debug level.
pub fn log_handshake(transport: &str, peer: std::net::SocketAddr, conn: &rustls::ServerConnection) {
    let group = conn.negotiated_key_exchange_group().map(|g| g.name());
    debug!(
        %peer,
        version = ?conn.protocol_version(),
        group = ?group,
        resumed = ?conn.handshake_kind(),
        "{transport} handshake done"
    );
}

//! DNS over TLS (RFC 7858): the TCP stream loop inside TLS, ALPN "dot" (RFC 7858 §3.2 via the
//! IANA registry), the handshake bounded by the idle timeout. The negotiated key exchange group
//! is logged at debug level and counted in the metrics. Zone transfers over TLS (XoT, RFC 9103)
//! are served to allowed clients like over TCP; the ALPN is "dot" (RFC 9103 §7.1 registers it
//! for XoT too).

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use super::tcp::{accept_loop, serve_stream};
use super::{ConnLimiter, Shared};
use crate::metrics::Proto;

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
                Ok(Err(e)) => return handshake_failed(&shared, Proto::Dot, peer, Some(&e)),
                Err(_) => return handshake_failed(&shared, Proto::Dot, peer, None),
            };
            log_handshake(&shared, Proto::Dot, peer, tls.get_ref().1);
            serve_stream(tls, peer, Proto::Dot, &shared, rx).await;
            drop(permit);
        }
    })
    .await;
}

/// Logs the negotiated TLS version, key exchange group and resumption at debug level, and
/// counts the handshake by group.
pub fn log_handshake(
    shared: &Shared,
    proto: Proto,
    peer: std::net::SocketAddr,
    conn: &rustls::ServerConnection,
) {
    let group = conn.negotiated_key_exchange_group().map(|g| g.name());
    if let Some(m) = &shared.metrics {
        m.handshake(proto, group);
    }
    debug!(
        %peer,
        version = ?conn.protocol_version(),
        group = ?group,
        resumed = ?conn.handshake_kind(),
        "{proto:?} handshake done"
    );
}

/// Logs and counts a handshake that failed with `error`, or timed out (`None`).
pub fn handshake_failed(
    shared: &Shared,
    proto: Proto,
    peer: std::net::SocketAddr,
    error: Option<&std::io::Error>,
) {
    if let Some(m) = &shared.metrics {
        m.handshake_failure(proto);
    }
    match error {
        Some(e) => debug!(%peer, error = %e, "{proto:?} handshake failed"),
        None => debug!(%peer, "{proto:?} handshake timed out"),
    }
}

//! DNS over TCP (RFC 7766) and the stream loop DNS over TLS reuses: 2-byte length framing
//! (RFC 1035 §4.2.2), pipelined queries answered in order, an idle timeout (RFC 7766 §6.2.3)
//! and caps on connections in total and per client address (§6.2.2).
//!
//! Per connection the memory is one request buffer (at most 65535 bytes, grown to the largest
//! message seen) and one response buffer.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;
use tracing::{debug, warn};

use super::{ConnLimiter, ConnPermit, Shared};
use crate::answer::{respond, Transport};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts connections until `shutdown` changes, admitting them through `limiter` and running
/// `handle` for each in its own task (connections over the cap are closed at once).
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    limiter: Arc<ConnLimiter>,
    mut shutdown: watch::Receiver<bool>,
    handle: F,
) where
    F: Fn(TcpStream, SocketAddr, ConnPermit) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.changed() => return,
            r = listener.accept() => match r {
                Ok(v) => v,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        match limiter.try_acquire(peer.ip()) {
            Some(permit) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(handle(stream, peer, permit));
            }
            None => debug!(%peer, "connection limit reached; closing"),
        }
    }
}

/// Serves length-framed DNS messages on `stream` until the peer closes, the idle timeout
/// passes, a message is unanswerable, or `shutdown` changes.
pub async fn serve_stream<S>(stream: S, shared: &Shared, mut shutdown: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = shared.idle_timeout;
    let (rd, wr) = tokio::io::split(stream);
    let mut rd = BufReader::new(rd);
    let mut wr = BufWriter::new(wr);
    let mut request = Vec::new();
    let mut response = Vec::new();
    loop {
        let len = tokio::select! {
            _ = shutdown.changed() => break,
            r = timeout(idle, rd.read_u16()) => match r {
                Ok(Ok(len)) => usize::from(len),
                _ => break,
            },
        };
        request.resize(len, 0);
        if !matches!(timeout(idle, rd.read_exact(&mut request)).await, Ok(Ok(_))) {
            break;
        }
        response.clear();
        response.extend([0, 0]);
        let outcome = respond(
            &shared.catalog(),
            &request,
            Transport::Stream,
            shared.udp_payload,
            &mut response,
            2,
        );
        if outcome.len == 0 {
            break;
        }
        response[..2].copy_from_slice(&(outcome.len as u16).to_be_bytes());
        if !matches!(timeout(idle, wr.write_all(&response)).await, Ok(Ok(()))) {
            return;
        }
        // Pipelined queries already buffered are answered before flushing (RFC 7766 §6.2.1.1).
        if rd.buffer().is_empty() && !matches!(timeout(idle, wr.flush()).await, Ok(Ok(()))) {
            return;
        }
    }
    let _ = timeout(idle, async {
        let _ = wr.flush().await;
        let _ = wr.shutdown().await;
    })
    .await;
}

/// Serves plain TCP on `listener`.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    limiter: Arc<ConnLimiter>,
    shutdown: watch::Receiver<bool>,
) {
    let rx = shutdown.clone();
    accept_loop(listener, limiter, shutdown, move |stream, _peer, permit| {
        let shared = Arc::clone(&shared);
        let rx = rx.clone();
        async move {
            serve_stream(stream, &shared, rx).await;
            drop(permit);
        }
    })
    .await;
}

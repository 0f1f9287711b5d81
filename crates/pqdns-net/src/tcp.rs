//! DNS over TCP (RFC 7766) and the stream loop DNS over TLS reuses: 2-byte length framing
//! (RFC 1035 §4.2.2), pipelined queries answered in order, an idle timeout (RFC 7766 §6.2.3)
//! and caps on connections in total and per client address (§6.2.2).
//!
//! Zone transfers (RFC 5936 §4.1: AXFR runs over TCP) are streamed here for allowed clients;
//! the messages come from [`crate::axfr`].
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
use tracing::{debug, info, warn};

use super::{ConnLimiter, ConnPermit, Shared};
use crate::answer::{respond, Transport};
use crate::axfr::Transfer;
use crate::metrics::Proto;

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

/// Serves length-framed DNS messages from `peer` on `stream` until the peer closes, the idle
/// timeout passes, a message is unanswerable, or `shutdown` changes. Zone transfer requests
/// from addresses in `shared.axfr_allow` are streamed from [`Transfer`]; `proto` labels
/// metrics.
pub async fn serve_stream<S>(
    stream: S,
    peer: SocketAddr,
    proto: Proto,
    shared: &Shared,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = shared.idle_timeout;
    let may_transfer = shared.axfr_allow.allows(peer.ip());
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
        if let Some(xfr) = may_transfer
            .then(|| Transfer::start(shared.catalog(), &request))
            .flatten()
        {
            if !send_transfer(xfr, peer, proto, shared, &mut wr, &mut response, &shutdown).await {
                return;
            }
            continue;
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
        if let Some(m) = &shared.metrics {
            m.response(
                proto,
                outcome.qtype,
                outcome.rcode,
                outcome.truncated,
                outcome.len,
            );
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

/// Writes every message of a zone transfer (RFC 5936 §2.2) and flushes; each write is bounded
/// by the idle timeout, and a shutdown between messages ends the transfer early. Returns false
/// if the connection is no longer usable.
async fn send_transfer<W: AsyncWrite + Unpin>(
    mut xfr: Transfer,
    peer: SocketAddr,
    proto: Proto,
    shared: &Shared,
    wr: &mut W,
    buf: &mut Vec<u8>,
    shutdown: &watch::Receiver<bool>,
) -> bool {
    let idle = shared.idle_timeout;
    let rcode = xfr.rcode();
    loop {
        buf.clear();
        buf.extend([0, 0]);
        let Some(len) = xfr.next_message(buf, 2) else {
            break;
        };
        if let Some(m) = &shared.metrics {
            if xfr.messages() == 1 {
                m.response(proto, Some(xfr.qtype()), rcode, false, len);
            } else {
                m.message(proto, len);
            }
        }
        buf[..2].copy_from_slice(&(len as u16).to_be_bytes());
        if !matches!(timeout(idle, wr.write_all(buf)).await, Ok(Ok(()))) {
            warn!(%peer, zone = %xfr.zone(), "zone transfer aborted: write timed out or failed");
            return false;
        }
        if !matches!(shutdown.has_changed(), Ok(false)) {
            warn!(%peer, zone = %xfr.zone(), "zone transfer cut short by shutdown");
            return false;
        }
    }
    info!(
        %peer, zone = %xfr.zone(), qtype = %xfr.qtype(), rcode = rcode.name(),
        messages = xfr.messages(), records = xfr.records(), "zone transfer"
    );
    matches!(timeout(idle, wr.flush()).await, Ok(Ok(())))
}

/// Serves plain TCP on `listener`.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    limiter: Arc<ConnLimiter>,
    shutdown: watch::Receiver<bool>,
) {
    let rx = shutdown.clone();
    accept_loop(listener, limiter, shutdown, move |stream, peer, permit| {
        let shared = Arc::clone(&shared);
        let rx = rx.clone();
        async move {
            serve_stream(stream, peer, Proto::Tcp, &shared, rx).await;
            drop(permit);
        }
    })
    .await;
}

//! DNS over TCP (RFC 7766) and the stream loop DNS over TLS reuses: 2-byte length framing
//! (RFC 1035 §4.2.2), pipelined queries, an idle timeout (RFC 7766 §6.2.3) and caps on
//! connections in total and per client address (§6.2.2, [`ConnLimiter`]); when a cap is
//! reached, the connection idle longest is closed to let a new one in (§6.2.3, see
//! [`crate::limit`]). A connection is idle when it has no query in progress.
//!
//! Queries answered at once ([`Reply::Ready`]) are answered in order; all the queries already
//! read are answered before the responses are flushed (§6.2.1.1). Deferred queries
//! ([`Reply::Defer`]) run as tasks of the connection, at most [`MAX_DEFERRED_PER_CONNECTION`] at
//! a time (reading pauses while that many are in flight), and their responses are written as
//! they complete, so they may overtake each other (§7: clients match responses by ID). Zone
//! transfers ([`Reply::Transfer`], RFC 5936 §4.1) are written message by message.
//!
//! Per connection the memory is one read buffer (grown to the largest message seen, at most
//! 65537 bytes), one response buffer, and the deferred queries in flight.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter, ReadHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{timeout, Instant};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::dot::handshake;
use crate::limit::{ConnLimiter, ConnPermit};
use crate::service::{
    Event, Reply, Request, ResponseInfo, Service, Transfer, TransferEnd, Transport,
};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Deferred queries in flight per stream connection; reading pauses at this many.
pub const MAX_DEFERRED_PER_CONNECTION: usize = 64;
/// Initial size of a connection's read buffer, in bytes.
const READ_BUFFER: usize = 4096;
/// Largest framed message: the 2-byte prefix and 65535 bytes.
const MAX_FRAME: usize = 2 + 65535;

/// Limits of one stream connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamLimits {
    /// How long the connection may sit idle, and any single write may take.
    pub idle: Duration,
    /// How long a TLS handshake may take.
    pub handshake: Duration,
    /// How long a deferred query may take before it is given up (no response is sent).
    pub deferred: Duration,
}

/// Accepts connections until `shutdown` changes, admitting them through `limiter` and running
/// `handle` for each in its own task. When a cap is reached, an idle connection is evicted
/// ([`ConnLimiter::admit`]; `handle` should watch [`ConnPermit::evicted`] and hold a
/// [`ConnPermit::busy`] guard while it works); if none is idle, the new connection is closed
/// at once and reported to `refused`.
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    limiter: Arc<ConnLimiter>,
    mut shutdown: watch::Receiver<bool>,
    refused: impl Fn(SocketAddr),
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
        match limiter.admit(peer.ip()) {
            Some(permit) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(handle(stream, peer, permit));
            }
            None => {
                debug!(%peer, "connection limit reached; closing");
                refused(peer);
            }
        }
    }
}

/// A callback reporting [`Event::ConnectionRefused`] for `transport` to `service`.
pub(crate) fn refused_reporter<S: Service>(
    service: &Arc<S>,
    transport: Transport,
) -> impl Fn(SocketAddr) {
    let service = Arc::clone(service);
    move |client| service.event(&Event::ConnectionRefused { transport, client })
}

/// Reads length-framed messages (RFC 1035 §4.2.2) into one buffer. [`Frames::fill`] is
/// cancel-safe (it only awaits one `read`), so the connection loop can wait for input and for
/// deferred answers at once.
struct Frames<R> {
    rd: R,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    start: usize,
    /// End of the bytes read.
    end: usize,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    fn new(rd: R) -> Frames<R> {
        Frames {
            rd,
            buf: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
        }
    }

    /// The next complete message already read, without its length prefix.
    fn next(&mut self) -> Option<&[u8]> {
        let have = &self.buf[self.start..self.end];
        let len = usize::from(u16::from_be_bytes([*have.first()?, *have.get(1)?]));
        if have.len() < 2 + len {
            return None;
        }
        let message = self.start + 2..self.start + 2 + len;
        self.start += 2 + len;
        Some(&self.buf[message])
    }

    /// Reads more bytes; false at end of stream or on error.
    async fn fill(&mut self) -> bool {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // A message longer than the buffer: grow to hold it (at most MAX_FRAME).
            let want = match self.buf[..self.end] {
                [hi, lo, ..] => 2 + usize::from(u16::from_be_bytes([hi, lo])),
                _ => READ_BUFFER,
            };
            self.buf
                .resize(want.clamp(self.buf.len() + 1, MAX_FRAME), 0);
        }
        match self.rd.read(&mut self.buf[self.end..]).await {
            Ok(n) if n > 0 => {
                self.end += n;
                true
            }
            _ => false,
        }
    }
}

/// What the connection loop does next.
enum Step {
    Continue,
    Close,
}

/// Serves length-framed DNS messages from `client` on `stream` until the client closes, the
/// idle timeout passes, a message is unanswerable (a response of length 0), a write fails,
/// `shutdown` changes, or the connection is evicted while idle (`permit`). Deferred queries still in flight when the client closes its side are
/// answered before the connection closes.
pub(crate) async fn serve_stream<S, IO>(
    stream: IO,
    client: SocketAddr,
    transport: Transport,
    service: &Arc<S>,
    limits: StreamLimits,
    permit: &ConnPermit,
    mut shutdown: watch::Receiver<bool>,
) where
    S: Service,
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (rd, wr) = tokio::io::split(stream);
    let mut frames: Frames<ReadHalf<IO>> = Frames::new(rd);
    let mut wr = BufWriter::new(wr);
    let mut out = Vec::new();
    let mut pending: JoinSet<Option<(Vec<u8>, ResponseInfo)>> = JoinSet::new();
    let mut eof = false;
    // The idle timeout runs from the last complete message or response, so a client that
    // trickles bytes without completing a message is closed too.
    let mut progress = Instant::now();
    // Held while a query is in progress (read and not yet answered); without it the
    // connection is idle and may be evicted.
    let Some(mut busy) = permit.busy() else {
        return;
    };
    'connection: loop {
        // Answer every complete message already read, then flush once (RFC 7766 §6.2.1.1).
        let mut written = false;
        while pending.len() < MAX_DEFERRED_PER_CONNECTION {
            let Some(message) = frames.next() else { break };
            progress = Instant::now();
            let request = Request::new(message, client, transport);
            out.clear();
            out.extend([0, 0]);
            let reply = service.respond(&service.snapshot(), &request, &mut out, 2);
            match reply {
                Reply::Ready(info) => {
                    if !write_framed(&mut wr, &mut out, info.len, limits.idle).await {
                        break 'connection;
                    }
                    written = true;
                }
                Reply::Defer(deferred) => {
                    let task = Arc::clone(service).respond_later(
                        request.to_owned(),
                        deferred,
                        vec![0, 0],
                        2,
                    );
                    spawn_deferred(&mut pending, task, limits.deferred, &request);
                }
                Reply::Transfer(xfr) => {
                    if !send_transfer(xfr, &mut wr, &mut out, limits.idle, &shutdown).await {
                        return;
                    }
                }
            }
        }
        if written && !matches!(timeout(limits.idle, wr.flush()).await, Ok(Ok(()))) {
            return;
        }
        if eof && pending.is_empty() {
            break;
        }
        let idle = pending.is_empty();
        if idle {
            drop(busy);
        }
        let step = tokio::select! {
            _ = shutdown.changed() => Step::Close,
            () = permit.evicted(), if idle => {
                debug!(%client, "idle connection evicted for a new one");
                Step::Close
            }
            Some(done) = pending.join_next(), if !pending.is_empty() => match done {
                Ok(Some((mut buf, info))) => {
                    let ok = write_framed(&mut wr, &mut buf, info.len, limits.idle).await
                        && matches!(timeout(limits.idle, wr.flush()).await, Ok(Ok(())));
                    progress = Instant::now();
                    if ok { Step::Continue } else { Step::Close }
                }
                Ok(None) => Step::Continue,
                Err(e) => {
                    debug!(%client, error = %e, "deferred query task failed");
                    Step::Continue
                }
            },
            more = frames.fill(), if !eof && pending.len() < MAX_DEFERRED_PER_CONNECTION => {
                if !more {
                    // The client closed its side (or the read failed): answer what is in
                    // flight, then close.
                    eof = true;
                }
                Step::Continue
            }
            _ = tokio::time::sleep_until(progress + limits.idle), if pending.is_empty() => Step::Close,
        };
        if matches!(step, Step::Close) {
            break;
        }
        busy = match permit.busy() {
            Some(b) => b,
            None => break,
        };
    }
    let _ = timeout(limits.idle, async {
        let _ = wr.flush().await;
        let _ = wr.shutdown().await;
    })
    .await;
}

/// Spawns a deferred query on the connection's task set, bounded by `limit`.
fn spawn_deferred<F>(
    pending: &mut JoinSet<Option<(Vec<u8>, ResponseInfo)>>,
    task: F,
    limit: Duration,
    request: &Request<'_>,
) where
    F: Future<Output = (Vec<u8>, ResponseInfo)> + Send + 'static,
{
    let client = request.client;
    pending.spawn(async move {
        let r = timeout(limit, task).await;
        if r.is_err() {
            debug!(%client, "deferred query timed out; no response");
        }
        r.ok()
    });
}

/// Writes the response at `buf[2..2 + len]` with its length prefix; false if it is empty (the
/// message was unanswerable) or the write failed or timed out.
async fn write_framed<W: AsyncWrite + Unpin>(
    wr: &mut W,
    buf: &mut [u8],
    len: usize,
    idle: Duration,
) -> bool {
    let Ok(prefix) = u16::try_from(len) else {
        return false;
    };
    if len == 0 || buf.len() < 2 + len {
        return false;
    }
    buf[..2].copy_from_slice(&prefix.to_be_bytes());
    matches!(
        timeout(idle, wr.write_all(&buf[..2 + len])).await,
        Ok(Ok(()))
    )
}

/// Writes every message of a zone transfer (RFC 5936 §2.2) and flushes; each write is bounded
/// by the idle timeout, and a shutdown between messages ends the transfer early. Returns false
/// if the connection is no longer usable.
async fn send_transfer<T: Transfer, W: AsyncWrite + Unpin>(
    mut xfr: T,
    wr: &mut W,
    buf: &mut Vec<u8>,
    idle: Duration,
    shutdown: &watch::Receiver<bool>,
) -> bool {
    loop {
        buf.clear();
        buf.extend([0, 0]);
        let Some(len) = xfr.next_message(buf, 2) else {
            break;
        };
        if !write_framed(wr, buf, len, idle).await {
            xfr.end(TransferEnd::WriteFailed);
            return false;
        }
        if !matches!(shutdown.has_changed(), Ok(false)) {
            xfr.end(TransferEnd::Shutdown);
            return false;
        }
    }
    if matches!(timeout(idle, wr.flush()).await, Ok(Ok(()))) {
        xfr.end(TransferEnd::Complete);
        true
    } else {
        xfr.end(TransferEnd::WriteFailed);
        false
    }
}

/// Serves TCP on `listener`, or DoT when `tls` is given (each connection's handshake first,
/// see [`crate::dot`]).
pub(crate) async fn serve<S: Service>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: Arc<S>,
    limiter: Arc<ConnLimiter>,
    limits: StreamLimits,
    shutdown: watch::Receiver<bool>,
) {
    let transport = if tls.is_some() {
        Transport::Dot
    } else {
        Transport::Tcp
    };
    let rx = shutdown.clone();
    let refused = refused_reporter(&service, transport);
    accept_loop(
        listener,
        limiter,
        shutdown,
        refused,
        move |stream, peer, permit| {
            let (service, tls, rx) = (Arc::clone(&service), tls.clone(), rx.clone());
            async move {
                match tls {
                    None => {
                        serve_stream(stream, peer, transport, &service, limits, &permit, rx).await;
                    }
                    Some(acceptor) => {
                        let handshake =
                            handshake(&acceptor, stream, peer, transport, &*service, limits);
                        if let Some(tls) = handshake.await {
                            serve_stream(tls, peer, transport, &service, limits, &permit, rx).await;
                        }
                    }
                }
                drop(permit);
            }
        },
    )
    .await;
}

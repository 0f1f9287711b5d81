//! DNS over HTTPS (RFC 8484) with hyper: HTTP/2 or HTTP/1.1 as negotiated by ALPN (`h2`,
//! `http/1.1`; no ALPN means HTTP/1.1), GET with `?dns=` (base64url without padding, §4.1) and
//! POST with `application/dns-message` (§4.1), responses with Cache-Control max-age from the
//! smallest TTL (§5.1).
//!
//! HEAD is answered like GET without content (RFC 9110 §9.3.2: servers must support it for
//! every resource that answers GET): the same status and headers, Content-Length included, on
//! HTTP/1.1 and HTTP/2. Every response to a HEAD request, errors included, carries no content.
//!
//! Errors: 404 for other paths, 405 for other methods, 400 for a missing or undecodable `dns`
//! parameter or an unparsable DNS message, 408 for a POST body not received within the idle
//! timeout, 413 for bodies over 65535 bytes, 414 for a `dns` parameter too long for one,
//! 415 for another content type, 504 for a deferred answer that did not come in time.
//!
//! **Idle connections** are closed: a connection with no request in progress for the idle
//! timeout gets a graceful shutdown (HTTP/2 GOAWAY; HTTP/1.1 closes after the response in
//! progress) and is dropped [`CLOSE_GRACE`] later if the client has not gone by then. This holds
//! for a client that completes the TLS handshake and sends nothing, and for an HTTP/2 client
//! that answers our keep-alive PINGs but sends no request, so idle clients cannot hold the
//! connection slots ([`crate::ConnLimiter`]) for longer than the idle timeout. When the
//! listener is full, the connection idle longest gets the same graceful shutdown at once and
//! its slot goes to the new client ([`crate::limit`]).
//!
//! **HTTP/2 stream reset floods** ("rapid reset", CVE-2023-44487): h2 closes such a connection
//! with GOAWAY ENHANCE_YOUR_CALM. Each one is reported as [`Event::ResetFlood`] and logged at
//! debug level; a WARN summary with the count is logged at most once per
//! [`ABUSE_LOG_INTERVAL`], so a remote client cannot flood the log. (h2 itself logs a WARN line
//! per such connection; binaries silence it with [`crate::LOG_DIRECTIVES`].)

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{header, Method, Request as HttpRequest, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::dot::handshake;
use crate::limit::{ConnLimiter, ConnPermit};
use crate::service::{respond_once, Event, Request, Service, Transport, Unanswered};
use crate::tcp::{accept_loop, refused_reporter, StreamLimits};
use crate::tls::ALPN_H2;

/// The DoH media type (RFC 8484 §6).
pub const DNS_MESSAGE: &str = "application/dns-message";
/// Largest DNS message accepted in a request, in bytes (in a POST body or decoded from GET).
pub const MAX_REQUEST: usize = 65535;
/// Concurrent HTTP/2 streams per connection.
pub const MAX_H2_STREAMS: u32 = 100;
/// How long a connection being closed (idle, or at shutdown) may take to finish before it is
/// dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Shortest time between two WARN summaries of HTTP/2 stream reset floods.
pub const ABUSE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Serves DoH on `listener` at `path`.
pub(crate) async fn serve<S: Service>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    service: Arc<S>,
    limiter: Arc<ConnLimiter>,
    limits: StreamLimits,
    path: Arc<str>,
    shutdown: watch::Receiver<bool>,
) {
    let floods = Arc::new(AtomicU64::new(0));
    let summary = tokio::spawn(summarize_floods(
        Arc::clone(&floods),
        ABUSE_LOG_INTERVAL,
        shutdown.clone(),
    ));
    let rx = shutdown.clone();
    let refused = refused_reporter(&service, Transport::Doh);
    accept_loop(
        listener,
        limiter,
        shutdown,
        refused,
        move |stream, peer, permit| {
            let (service, acceptor, path, rx, floods) = (
                Arc::clone(&service),
                acceptor.clone(),
                Arc::clone(&path),
                rx.clone(),
                Arc::clone(&floods),
            );
            async move {
                let Some(tls) =
                    handshake(&acceptor, stream, peer, Transport::Doh, &*service, limits).await
                else {
                    return;
                };
                let h2 = tls.get_ref().1.alpn_protocol() == Some(ALPN_H2);
                let activity = Arc::new(Activity::new(permit));
                let (tracker, handler_service) = (Arc::clone(&activity), Arc::clone(&service));
                let handler = service_fn(move |req| {
                    let service = Arc::clone(&handler_service);
                    let (path, busy) = (Arc::clone(&path), Activity::busy(&tracker));
                    async move {
                        let response = handle(req, &service, peer, &path, limits).await;
                        drop(busy);
                        Ok::<_, Infallible>(response)
                    }
                });
                let io = TokioIo::new(tls);
                let result = if h2 {
                    let mut builder =
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    builder
                        .timer(TokioTimer::new())
                        .max_concurrent_streams(MAX_H2_STREAMS)
                        .keep_alive_interval(limits.idle)
                        .keep_alive_timeout(limits.idle);
                    let conn = builder.serve_connection(io, handler);
                    drive(conn, |c| c.graceful_shutdown(), &activity, limits.idle, rx).await
                } else {
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder
                        .timer(TokioTimer::new())
                        .header_read_timeout(limits.idle);
                    let conn = builder.serve_connection(io, handler);
                    drive(conn, |c| c.graceful_shutdown(), &activity, limits.idle, rx).await
                };
                if let Err(e) = result {
                    if is_reset_flood(&e) {
                        floods.fetch_add(1, Ordering::Relaxed);
                        service.event(&Event::ResetFlood { client: peer });
                    }
                    debug!(%peer, error = %e, "DoH connection ended");
                }
            }
        },
    )
    .await;
    summary.abort();
}

/// Logs how many connections were closed for stream reset floods, at most once per `interval`
/// and only when there were some, until `shutdown` changes.
async fn summarize_floods(
    floods: Arc<AtomicU64>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        let n = floods.swap(0, Ordering::Relaxed);
        if n > 0 {
            warn!(
                connections = n,
                seconds = interval.as_secs_f64(),
                "DoH: closed HTTP/2 connections that reset too many streams (rapid reset)"
            );
        }
    }
}

/// True if `e` is h2's answer to a stream reset flood (GOAWAY ENHANCE_YOUR_CALM).
fn is_reset_flood(e: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return h2.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM);
        }
        source = s.source();
    }
    false
}

/// Requests in progress on one connection, and when the last one started or ended.
struct Activity {
    born: Instant,
    busy: AtomicUsize,
    /// Milliseconds from `born` to the last start or end of a request.
    last: AtomicU64,
    /// The connection's slot: busy while a request is in progress, evicted when idle.
    permit: ConnPermit,
}

/// A request in progress; dropping it ends it (and, with its second field, the
/// connection's busy mark in its limiter).
struct Busy(
    Arc<Activity>,
    #[expect(dead_code, reason = "held for its Drop")] Option<crate::limit::ConnBusy>,
);

impl Activity {
    fn new(permit: ConnPermit) -> Activity {
        Activity {
            born: Instant::now(),
            busy: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            permit,
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    /// A request starts. If the connection has just been evicted, it is answered all the
    /// same while the connection closes gracefully.
    fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::Relaxed);
        self.touch();
        Busy(Arc::clone(self), self.permit.busy())
    }

    /// When the connection becomes idle if nothing happens until then (`None`: a request is
    /// in progress).
    fn idle_at(&self, idle: Duration) -> Option<Instant> {
        if self.busy.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(self.born + Duration::from_millis(self.last.load(Ordering::Relaxed)) + idle)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// Runs `conn` until it ends; shuts it down gracefully with `shut_down` (HTTP/2 GOAWAY,
/// HTTP/1.1 close after the response in progress) when it has been idle for `idle`, is
/// evicted, or `shutdown` changes, and drops it [`CLOSE_GRACE`] after that.
async fn drive<C: Future<Output = hyper::Result<()>>>(
    conn: C,
    shut_down: impl Fn(Pin<&mut C>),
    activity: &Activity,
    idle: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> hyper::Result<()> {
    let mut conn = std::pin::pin!(conn);
    let mut closing: Option<Instant> = None;
    loop {
        let wake = match closing {
            Some(deadline) => deadline,
            None => activity
                .idle_at(idle)
                .unwrap_or_else(|| Instant::now() + idle),
        };
        tokio::select! {
            r = conn.as_mut() => return r,
            _ = shutdown.changed(), if closing.is_none() => {
                shut_down(conn.as_mut());
                closing = Some(Instant::now() + CLOSE_GRACE);
            }
            () = activity.permit.evicted(), if closing.is_none() => {
                debug!("idle DoH connection evicted for a new one");
                shut_down(conn.as_mut());
                closing = Some(Instant::now() + CLOSE_GRACE);
            }
            _ = tokio::time::sleep_until(wake) => {
                if closing.is_some() {
                    return Ok(());
                }
                if activity.idle_at(idle).is_some_and(|at| at <= Instant::now()) {
                    shut_down(conn.as_mut());
                    closing = Some(Instant::now() + CLOSE_GRACE);
                }
            }
        }
    }
}

fn status(code: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// What a DoH request carries, decided from its method, URI and Content-Type before any body
/// is read ([`decode_request`]).
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(fuzzing), allow(unreachable_pub))] // `pqdns_net::fuzzing` re-exports it
pub enum Decoded {
    /// GET or HEAD: the DNS message decoded from the `dns` parameter (at most
    /// [`MAX_REQUEST`] bytes).
    Message(Vec<u8>),
    /// POST with `application/dns-message`: the DNS message is the body, to be read with a
    /// limit of [`MAX_REQUEST`] bytes.
    Body,
}

/// Decodes the request line and Content-Type of a DoH request for `path` (RFC 8484 §4.1): a
/// GET or HEAD carries the message in `?dns=` (base64url without padding), a POST in its
/// body with Content-Type `application/dns-message` (parameters such as `; charset` are
/// ignored). On error, the status and text to send: 404 for another path, 405 for another
/// method (the caller adds `Allow`), 400 for a missing or undecodable `dns` parameter, 414 for
/// one too long for [`MAX_REQUEST`] bytes, 415 for another content type.
///
/// Not public API (the module is private); reachable from the fuzz targets under
/// `cfg(fuzzing)` through `pqdns_net::fuzzing`.
#[cfg_attr(not(fuzzing), allow(unreachable_pub))]
pub fn decode_request(
    method: &Method,
    uri: &http::Uri,
    content_type: Option<&header::HeaderValue>,
    path: &str,
) -> Result<Decoded, (StatusCode, &'static str)> {
    if uri.path() != path {
        return Err((StatusCode::NOT_FOUND, "not found\n"));
    }
    match *method {
        Method::GET | Method::HEAD => get_message(uri.query()).map(Decoded::Message),
        Method::POST => {
            let content_type = content_type.and_then(|v| v.to_str().ok());
            if content_type.map(|c| c.split(';').next().unwrap_or("").trim()) != Some(DNS_MESSAGE) {
                return Err((
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "use Content-Type: application/dns-message\n",
                ));
            }
            Ok(Decoded::Body)
        }
        _ => Err((StatusCode::METHOD_NOT_ALLOWED, "use GET or POST\n")),
    }
}

/// The `dns` query parameter of a GET, decoded; on error the status and text to send.
fn get_message(query: Option<&str>) -> Result<Vec<u8>, (StatusCode, &'static str)> {
    let value = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("dns="))
        .ok_or((StatusCode::BAD_REQUEST, "missing dns parameter\n"))?;
    if value.len() > MAX_REQUEST.div_ceil(3) * 4 {
        return Err((StatusCode::URI_TOO_LONG, "dns parameter too long\n"));
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .map_err(|_| {
            (
                StatusCode::BAD_REQUEST,
                "dns parameter is not base64url without padding\n",
            )
        })
}

/// Handles one DoH request from `client`; responses to HEAD carry no content.
async fn handle<S: Service>(
    req: HttpRequest<Incoming>,
    service: &Arc<S>,
    client: SocketAddr,
    path: &str,
    limits: StreamLimits,
) -> Response<Full<Bytes>> {
    let head = req.method() == Method::HEAD;
    let mut response = answer(req, service, client, path, limits).await;
    if head {
        let len = response.body().size_hint().exact().unwrap_or(0);
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
        *response.body_mut() = Full::new(Bytes::new());
    }
    response
}

/// The response to one DoH request, as for GET when it is a HEAD.
async fn answer<S: Service>(
    req: HttpRequest<Incoming>,
    service: &Arc<S>,
    client: SocketAddr,
    path: &str,
    limits: StreamLimits,
) -> Response<Full<Bytes>> {
    let content_type = req.headers().get(header::CONTENT_TYPE);
    let message = match decode_request(req.method(), req.uri(), content_type, path) {
        Ok(Decoded::Message(m)) => m,
        Ok(Decoded::Body) => {
            let body = Limited::new(req.into_body(), MAX_REQUEST).collect();
            match timeout(limits.idle, body).await {
                Ok(Ok(body)) => body.to_bytes().to_vec(),
                Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                    return status(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "DNS message over 65535 bytes\n",
                    )
                }
                Ok(Err(_)) => return status(StatusCode::BAD_REQUEST, "could not read the body\n"),
                Err(_) => return status(StatusCode::REQUEST_TIMEOUT, "body too slow\n"),
            }
        }
        Err((code, text)) => {
            let mut r = status(code, text);
            if code == StatusCode::METHOD_NOT_ALLOWED {
                r.headers_mut().insert(
                    header::ALLOW,
                    header::HeaderValue::from_static("GET, HEAD, POST"),
                );
            }
            return r;
        }
    };
    let request = Request::new(&message, client, Transport::Doh);
    let (mut out, info) =
        match respond_once(service, &request, Vec::new(), 0, limits.deferred).await {
            Ok(answer) => answer,
            Err(Unanswered::Timeout) => {
                return status(StatusCode::GATEWAY_TIMEOUT, "no answer in time\n")
            }
            Err(Unanswered::Transfer) => {
                return status(
                    StatusCode::NOT_IMPLEMENTED,
                    "zone transfers are not carried over DoH: use TCP or DoT\n",
                )
            }
        };
    if info.len == 0 || info.malformed || info.len > out.len() {
        return status(StatusCode::BAD_REQUEST, "not a valid DNS query\n");
    }
    out.truncate(info.len);
    let mut r = Response::new(Full::new(Bytes::from(out)));
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(DNS_MESSAGE),
    );
    if let Some(ttl) = info.cache_ttl {
        if let Ok(v) = header::HeaderValue::from_str(&format!("max-age={ttl}")) {
            headers.insert(header::CACHE_CONTROL, v);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Log lines written through `tracing`, captured for inspection.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn summaries(&self) -> Vec<String> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines()
                .filter(|l| l.contains("WARN") && l.contains("rapid reset"))
                .map(String::from)
                .collect()
        }
    }

    /// Issue 11 item 13: however many reset floods there are, one WARN line per interval
    /// gives their number, and quiet intervals log nothing.
    #[test]
    fn reset_floods_are_summarized_once_per_interval() {
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let interval = Duration::from_millis(100);
        let seen = log.clone();
        let wait_for = move |n: usize| {
            let seen = seen.clone();
            async move {
                for _ in 0..100 {
                    if seen.summaries().len() >= n {
                        return;
                    }
                    tokio::time::sleep(interval / 2).await;
                }
            }
        };
        tracing::subscriber::with_default(subscriber, || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(async {
                let floods = Arc::new(AtomicU64::new(0));
                let (tx, rx) = watch::channel(false);
                let task = tokio::spawn(summarize_floods(Arc::clone(&floods), interval, rx));
                floods.fetch_add(500, Ordering::Relaxed);
                wait_for(1).await;
                tokio::time::sleep(interval * 3).await; // quiet intervals
                floods.fetch_add(3, Ordering::Relaxed);
                wait_for(2).await;
                tx.send(true).unwrap();
                task.await.unwrap();
            });
        });
        let lines = log.summaries();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].contains("connections=500"), "{}", lines[0]);
        assert!(lines[1].contains("connections=3"), "{}", lines[1]);
    }
}

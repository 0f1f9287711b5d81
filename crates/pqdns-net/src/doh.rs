//! DNS over HTTPS (RFC 8484) with hyper: HTTP/1.1 and HTTP/2 chosen by ALPN (`h2`,
//! `http/1.1`), GET with `?dns=` (base64url without padding, §4.1) and POST with
//! `application/dns-message` (§4.1), responses with Cache-Control max-age from the smallest
//! TTL (§5.1).
//!
//! Errors: 404 for other paths, 405 for other methods, 400 for a missing or undecodable `dns`
//! parameter or an unparsable DNS message, 413 for bodies over 65535 bytes, 415 for another
//! content type. Idle HTTP/1.1 connections are closed by the header read timeout (the idle
//! timeout); HTTP/2 connections are bounded by the connection caps and keep-alive pings.

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use super::dot::{handshake_failed, log_handshake};
use super::tcp::accept_loop;
use super::{ConnLimiter, Shared};
use crate::answer::{respond, Transport, MAX_STREAM_MESSAGE};
use crate::metrics::Proto;

/// The DoH media type (RFC 8484 §6).
pub const DNS_MESSAGE: &str = "application/dns-message";
/// Largest DNS message accepted in a request, in bytes (in a POST body or decoded from GET).
pub const MAX_REQUEST: usize = MAX_STREAM_MESSAGE;
/// Concurrent HTTP/2 streams per connection.
pub const MAX_H2_STREAMS: u32 = 100;

/// Serves DoH on `listener` at `path`.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    limiter: Arc<ConnLimiter>,
    path: Arc<str>,
    shutdown: watch::Receiver<bool>,
) {
    let rx = shutdown.clone();
    accept_loop(listener, limiter, shutdown, move |stream, peer, permit| {
        let (shared, acceptor, path, mut rx) = (
            Arc::clone(&shared),
            acceptor.clone(),
            Arc::clone(&path),
            rx.clone(),
        );
        async move {
            let idle = shared.idle_timeout;
            let tls = match timeout(idle, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return handshake_failed(&shared, Proto::Doh, peer, Some(&e)),
                Err(_) => return handshake_failed(&shared, Proto::Doh, peer, None),
            };
            log_handshake(&shared, Proto::Doh, peer, tls.get_ref().1);
            let service = service_fn(move |req| {
                let (shared, path) = (Arc::clone(&shared), Arc::clone(&path));
                async move { Ok::<_, Infallible>(handle(req, &shared, &path).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(idle);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(MAX_H2_STREAMS)
                .keep_alive_interval(idle)
                .keep_alive_timeout(idle);
            let conn = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                r = conn => if let Err(e) = r { debug!(%peer, error = %e, "DoH connection ended") },
                _ = rx.changed() => {}
            }
            drop(permit);
        }
    })
    .await;
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

/// Handles one DoH request.
pub async fn handle(req: Request<Incoming>, shared: &Shared, path: &str) -> Response<Full<Bytes>> {
    if req.uri().path() != path {
        return status(StatusCode::NOT_FOUND, "not found\n");
    }
    let message = match *req.method() {
        Method::GET => match get_message(req.uri().query()) {
            Ok(m) => m,
            Err((code, text)) => return status(code, text),
        },
        Method::POST => {
            let content_type = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            if content_type.map(|c| c.split(';').next().unwrap_or("").trim()) != Some(DNS_MESSAGE) {
                return status(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "use Content-Type: application/dns-message\n",
                );
            }
            match Limited::new(req.into_body(), MAX_REQUEST).collect().await {
                Ok(body) => body.to_bytes().to_vec(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return status(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "DNS message over 65535 bytes\n",
                    )
                }
                Err(_) => return status(StatusCode::BAD_REQUEST, "could not read the body\n"),
            }
        }
        _ => return status(StatusCode::METHOD_NOT_ALLOWED, "use GET or POST\n"),
    };
    let mut out = Vec::new();
    let outcome = respond(
        &shared.catalog(),
        &message,
        Transport::Stream,
        shared.udp_payload,
        &mut out,
        0,
    );
    let malformed = outcome
        .error
        .is_some_and(|e| !matches!(e, crate::query::ParseError::Opcode(_)));
    if outcome.len == 0 || malformed {
        return status(StatusCode::BAD_REQUEST, "not a valid DNS query\n");
    }
    if let Some(m) = &shared.metrics {
        m.response(
            Proto::Doh,
            outcome.qtype,
            outcome.rcode,
            outcome.truncated,
            outcome.len,
        );
    }
    let mut r = Response::new(Full::new(Bytes::from(out)));
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(DNS_MESSAGE),
    );
    if let Some(ttl) = outcome.cache_ttl {
        if let Ok(v) = header::HeaderValue::from_str(&format!("max-age={ttl}")) {
            headers.insert(header::CACHE_CONTROL, v);
        }
    }
    r
}

//! The HTTP side of Prometheus metrics (text exposition format 0.0.4): `GET /metrics` over
//! HTTP/1.1, for pqdns-server and the resolver service alike. The caller renders the text;
//! this module serves it, with bounded connections and header-read time, and holds what both
//! services' counters share: the key exchange group labels and zeroed counter arrays.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::debug;

use crate::{accept_loop, ConnLimiter};

/// The metrics path.
pub const METRICS_PATH: &str = "/metrics";
/// Simultaneous connections to the metrics listener.
pub const MAX_CONNECTIONS: usize = 16;
/// Simultaneous connections to the metrics listener from one address.
pub const MAX_CONNECTIONS_PER_IP: usize = 4;

/// Key exchange groups counted by name (IANA TLS Supported Groups); others count as
/// `other`, the last of [`GROUP_SLOTS`] slots.
pub const GROUPS: [(u16, &str); 5] = [
    (0x11ec, "X25519MLKEM768"),
    (0x11eb, "SecP256r1MLKEM768"),
    (0x001d, "X25519"),
    (0x0017, "secp256r1"),
    (0x0018, "secp384r1"),
];
/// Counter slots per group: [`GROUPS`] and `other`.
pub const GROUP_SLOTS: usize = GROUPS.len() + 1;

/// The counter slot of a negotiated group (`other` for none or an unlisted one).
pub fn group_slot(group: Option<rustls::NamedGroup>) -> usize {
    group
        .and_then(|g| GROUPS.iter().position(|(code, _)| *code == u16::from(g)))
        .unwrap_or(GROUPS.len())
}

/// The label of a group slot.
pub fn group_label(slot: usize) -> &'static str {
    GROUPS.get(slot).map_or("other", |(_, l)| l)
}

/// `N` counters at zero.
pub fn counters<const N: usize>() -> [std::sync::atomic::AtomicU64; N] {
    std::array::from_fn(|_| std::sync::atomic::AtomicU64::new(0))
}

/// Appends the `NAME_bucket` (cumulative, `le` from `bounds`, then `+Inf`), `NAME_sum` and
/// `NAME_count` lines of a histogram whose per-bucket `counts` have one slot more than
/// `bounds`; `labels` (e.g. `transport="udp"`, or empty) go on every line.
pub fn write_histogram<B: std::fmt::Display>(
    out: &mut String,
    name: &str,
    labels: &str,
    bounds: &[B],
    counts: &[std::sync::atomic::AtomicU64],
    sum: impl std::fmt::Display,
) {
    use std::fmt::Write as _;
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (b, c) in counts.iter().enumerate() {
        cumulative += c.load(std::sync::atomic::Ordering::Relaxed);
        let le = bounds.get(b).map_or("+Inf".to_string(), |l| l.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(
        out,
        "{name}_sum{braces} {sum}\n{name}_count{braces} {cumulative}"
    );
}

/// Renders the metrics text; `None` when there are none (404).
pub type Render = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Serves `GET /metrics` on `listener` with what `render` gives until `shutdown` changes;
/// reading a request's headers may take `idle`. Other methods get 405, other paths 404.
pub async fn serve(
    listener: TcpListener,
    render: Render,
    idle: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let limiter = ConnLimiter::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP);
    let rx = shutdown.clone();
    let refused = |peer| debug!(%peer, "metrics connection limit reached");
    accept_loop(listener, limiter, shutdown, refused, move |stream, peer, permit| {
        let (render, mut rx) = (Arc::clone(&render), rx.clone());
        async move {
            let service = service_fn(move |req| {
                let render = Arc::clone(&render);
                async move { Ok::<_, Infallible>(handle(&req, &*render)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                r = conn => if let Err(e) = r { debug!(%peer, error = %e, "metrics connection ended") },
                _ = rx.changed() => {}
                // Full: the oldest connection gives way (a scrape is short; a scraper that
                // keeps its connection open is the one evicted).
                () = permit.evicted() => {}
            }
            drop(permit);
        }
    })
    .await;
}

fn handle(
    req: &Request<Incoming>,
    render: &(dyn Fn() -> Option<String> + Send + Sync),
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, METRICS_PATH) => match render() {
            Some(text) => (
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                text,
            ),
            None => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        },
        (_, METRICS_PATH) => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".into(),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

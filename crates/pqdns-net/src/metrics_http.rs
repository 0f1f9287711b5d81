//! The HTTP side of Prometheus metrics (text exposition format 0.0.4): `GET /metrics` over
//! HTTP/1.1, for pqdns-server and the resolver service alike. The caller renders the text;
//! this module only serves it, with bounded connections and header-read time.

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

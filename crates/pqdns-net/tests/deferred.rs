//! A service built only on pqdns-net's public API, which answers some queries at once and
//! defers others (answering after an `await`), over UDP, TCP, DoT and DoH (HTTP/2 and
//! HTTP/1.1): every query gets its own answer; on TCP and DoT a quick answer overtakes slower
//! deferred ones on the same connection (RFC 7766 §7); a deferred query that outlives the
//! configured timeout gets no answer (DoH: 504). All sockets are on 127.0.0.1, every read has
//! a timeout.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pqdns_net::tls_client::{client_config, ClientOptions, Roots};
use pqdns_net::{
    ListenConfig, Listeners, NoTransfer, OwnedRequest, Reply, Request, ResponseInfo, Service,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Queries with an ID of at least this are deferred, for (ID − DEFER_BASE) milliseconds.
const DEFER_BASE: u16 = 1000;
/// Bound on every read of the test clients.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// Answers a query by echoing it with QR set; IDs from [`DEFER_BASE`] are answered later.
#[derive(Default)]
struct Delayed {
    later: AtomicUsize,
}

fn delay(message: &[u8]) -> Option<Duration> {
    let id = u16::from_be_bytes([*message.first()?, *message.get(1)?]);
    (id >= DEFER_BASE).then(|| Duration::from_millis(u64::from(id - DEFER_BASE)))
}

/// The echo response at `out[base..]`; nothing for messages shorter than a header.
fn echo(message: &[u8], out: &mut Vec<u8>, base: usize) -> ResponseInfo {
    out.truncate(base);
    if message.len() < 12 {
        return ResponseInfo::new(0);
    }
    out.extend_from_slice(message);
    out[base + 2] |= 0x80;
    ResponseInfo::new(message.len()).with_cache_ttl(Some(60))
}

impl Service for Delayed {
    type Snapshot = ();
    type Transfer = NoTransfer;
    type Deferred = Duration;

    fn snapshot(&self) {}

    fn respond(
        &self,
        _: &(),
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<NoTransfer, Duration> {
        match delay(request.message) {
            Some(delay) => Reply::Defer(delay),
            None => Reply::Ready(echo(request.message, out, base)),
        }
    }

    async fn respond_later(
        self: Arc<Self>,
        request: OwnedRequest,
        delay: Duration,
        mut out: Vec<u8>,
        base: usize,
    ) -> (Vec<u8>, ResponseInfo) {
        self.later.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
        let info = echo(&request.message, &mut out, base);
        (out, info)
    }
}

/// A query for `example.` A with `id`.
fn query(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend([1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend(b"\x07example\x00\x00\x01\x00\x01");
    q
}

fn id_of(response: &[u8]) -> u16 {
    assert!(
        response.len() >= 12 && response[2] & 0x80 != 0,
        "not a response"
    );
    u16::from_be_bytes([response[0], response[1]])
}

struct Running {
    rt: tokio::runtime::Runtime,
    listeners: Option<Listeners>,
    service: Arc<Delayed>,
    _dir: tempfile::TempDir,
}

impl Running {
    fn start() -> Running {
        Running::start_with(|_| {})
    }

    /// Listeners with the test's defaults, then `adjust`ed.
    fn start_with(adjust: impl FnOnce(&mut ListenConfig)) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut config = ListenConfig::new(dir.path().join("keys"));
        config.udp = vec![any];
        config.tcp = vec![any];
        config.dot = vec![any];
        config.doh = vec![any];
        config.deferred_timeout = Duration::from_secs(1);
        adjust(&mut config);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let service = Arc::new(Delayed::default());
        let listeners = rt
            .block_on(Listeners::bind(&config, Arc::clone(&service)))
            .unwrap();
        Running {
            rt,
            listeners: Some(listeners),
            service,
            _dir: dir,
        }
    }

    fn addrs(&self) -> &pqdns_net::BoundAddrs {
        &self.listeners.as_ref().unwrap().addrs
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(l) = self.listeners.take() {
            self.rt.block_on(l.shutdown());
        }
    }
}

fn tls_connector(alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let opts = ClientOptions::new(Roots::DangerAcceptAnyCertificate).with_alpn(alpn);
    tokio_rustls::TlsConnector::from(client_config(&opts).unwrap())
}

async fn tls_connect(addr: SocketAddr, alpn: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tls_connector(alpn).connect(name, tcp).await.unwrap()
}

/// Sends `ids` pipelined in one write and returns the IDs of the responses in arrival order.
async fn pipelined<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, ids: &[u16]) -> Vec<u16> {
    let mut batch = Vec::new();
    for &id in ids {
        let q = query(id);
        batch.extend((q.len() as u16).to_be_bytes());
        batch.extend(q);
    }
    s.write_all(&batch).await.unwrap();
    s.flush().await.unwrap();
    let mut got = Vec::new();
    for _ in ids {
        let len = tokio::time::timeout(READ_LIMIT, s.read_u16())
            .await
            .unwrap()
            .unwrap();
        let mut msg = vec![0; usize::from(len)];
        s.read_exact(&mut msg).await.unwrap();
        got.push(id_of(&msg));
    }
    got
}

#[test]
fn udp_answers_ready_and_deferred_queries_and_drops_late_ones() {
    let server = Running::start();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let to = server.addrs().udp[0];
    // A slow deferred query, a quick deferred one, a ready one, and one past the timeout.
    for id in [DEFER_BASE + 300, DEFER_BASE + 20, 7, DEFER_BASE + 3000] {
        sock.send_to(&query(id), to).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok((n, from)) = sock.recv_from(&mut buf) {
        assert_eq!(from, to, "answers come from the address queried");
        got.push(id_of(&buf[..n]));
    }
    assert_eq!(got, [7, DEFER_BASE + 20, DEFER_BASE + 300]);
    assert_eq!(server.service.later.load(Ordering::Relaxed), 3);
}

#[test]
fn tcp_and_dot_write_deferred_answers_as_they_complete() {
    let server = Running::start();
    let (tcp, dot) = (server.addrs().tcp[0], server.addrs().dot[0]);
    let order = [DEFER_BASE + 400, DEFER_BASE + 100, 9];
    server.rt.block_on(async {
        let mut s = TcpStream::connect(tcp).await.unwrap();
        assert_eq!(
            pipelined(&mut s, &order).await,
            [9, DEFER_BASE + 100, DEFER_BASE + 400],
            "TCP"
        );
        // The connection stays usable, and a client that closes its side still gets the
        // answers in flight.
        assert_eq!(pipelined(&mut s, &[11]).await, [11]);
        let q = query(DEFER_BASE + 50);
        s.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
        s.write_all(&q).await.unwrap();
        s.shutdown().await.unwrap();
        let len = s.read_u16().await.unwrap();
        let mut msg = vec![0; usize::from(len)];
        s.read_exact(&mut msg).await.unwrap();
        assert_eq!(id_of(&msg), DEFER_BASE + 50);

        let mut t = tls_connect(dot, b"dot").await;
        assert_eq!(t.get_ref().1.alpn_protocol(), Some(&b"dot"[..]));
        assert_eq!(
            pipelined(&mut t, &order).await,
            [9, DEFER_BASE + 100, DEFER_BASE + 400],
            "DoT"
        );
    });
    assert_eq!(server.service.later.load(Ordering::Relaxed), 5);
}

/// One DoH POST on `sender`: (status, body).
async fn post<B>(sender: &mut B, id: u16) -> (u16, Vec<u8>)
where
    B: DohSender,
{
    let req = http::Request::post("/dns-query")
        .header("content-type", "application/dns-message")
        .header("host", "localhost")
        .body(Full::new(Bytes::from(query(id))))
        .unwrap();
    let resp = tokio::time::timeout(READ_LIMIT, sender.send(req))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

/// HTTP/1.1 and HTTP/2 request senders, for [`post`].
trait DohSender {
    async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
    ) -> http::Response<hyper::body::Incoming>;
}

impl DohSender for hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
    ) -> http::Response<hyper::body::Incoming> {
        self.send_request(req).await.unwrap()
    }
}

impl DohSender for hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
    ) -> http::Response<hyper::body::Incoming> {
        self.send_request(req).await.unwrap()
    }
}

#[test]
fn doh_awaits_deferred_answers_over_http2_and_http1() {
    let server = Running::start();
    let doh = server.addrs().doh[0];
    server.rt.block_on(async {
        let tls = tls_connect(doh, b"h2").await;
        let (mut h2, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let (status, body) = post(&mut h2, 5).await;
        assert_eq!((status, id_of(&body)), (200, 5));
        let (status, body) = post(&mut h2, DEFER_BASE + 50).await;
        assert_eq!((status, id_of(&body)), (200, DEFER_BASE + 50), "deferred");
        let (status, _) = post(&mut h2, DEFER_BASE + 3000).await;
        assert_eq!(status, 504, "deferred past the timeout");

        let tls = tls_connect(doh, b"http/1.1").await;
        let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let (status, body) = post(&mut h1, DEFER_BASE + 10).await;
        assert_eq!((status, id_of(&body)), (200, DEFER_BASE + 10), "HTTP/1.1");
    });
    assert_eq!(server.service.later.load(Ordering::Relaxed), 3);
}

/// A TCP connection to `server` from `source` (any loopback address).
async fn connect_from(source: &str, server: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(server).await.unwrap()
}

/// One query over `stream`: its answer's ID, or `None` if the server closed the connection.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, id: u16) -> Option<u16> {
    let q = query(id);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend(q);
    stream.write_all(&framed).await.ok()?;
    let mut len = [0u8; 2];
    tokio::time::timeout(READ_LIMIT, stream.read_exact(&mut len))
        .await
        .unwrap()
        .ok()?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer).await.ok()?;
    Some(id_of(&answer))
}

/// Issue 31 item 11: a DoT client that connects and never completes its handshake holds its
/// connection slot for the handshake timeout (3 s by default), not the idle timeout (10 s);
/// connection slots count per /24, so one host's many addresses are one client and cannot
/// take every slot of the listener (a new connection of a full /24 takes the slot of that
/// /24's connection idle longest).
#[test]
fn stalled_handshakes_end_early_and_a_prefix_is_one_client() {
    let running = Running::start();
    running.rt.block_on(async {
        let mut stalled = TcpStream::connect(running.addrs().dot[0]).await.unwrap();
        let start = std::time::Instant::now();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(READ_LIMIT, stalled.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(6),
            "closed after {took:?}"
        );

        let tcp = running.addrs().tcp[0];
        let mut held = Vec::new();
        for i in 0..pqdns_net::DEFAULT_MAX_CONNECTIONS_PER_IP {
            let mut s = connect_from(&format!("127.0.0.{}", 2 + i), tcp).await;
            assert_eq!(ask(&mut s, 7).await, Some(7), "connection {i}");
            held.push(s);
        }
        // The /24 keeps its share: its own idle connection gives way.
        let over = connect_from("127.0.0.200", tcp).await;
        oldest_gives_way(held, over, "a full /24").await;
        let mut other = connect_from("127.0.1.1", tcp).await;
        assert_eq!(ask(&mut other, 9).await, Some(9), "another /24 is served");
    });
}

/// Issue 31 item 11: a stream listener at its connection cap, every connection idle, closes
/// the connection idle longest so that a new client (from another /24) is answered, over TCP,
/// DoT and DoH (RFC 7766 §6.2.3); the other connections stay.
#[test]
fn a_full_listener_evicts_its_longest_idle_connection_for_a_new_client() {
    const CAP: u16 = 4;
    let server = Running::start_with(|c| c.max_connections = usize::from(CAP));
    let addrs = server.addrs().clone();
    server.rt.block_on(async {
        let mut tcp = Vec::new();
        let mut dot = Vec::new();
        for i in 0..CAP {
            let mut s = connect_from(&format!("127.0.{}.1", 10 + i), addrs.tcp[0]).await;
            assert_eq!(ask(&mut s, i).await, Some(i));
            tcp.push(s);
            let mut s = tls_connect(addrs.dot[0], b"dot").await;
            assert_eq!(ask(&mut s, i).await, Some(i));
            dot.push(s);
        }
        let new = connect_from("127.0.30.1", addrs.tcp[0]).await;
        oldest_gives_way(tcp, new, "TCP").await;
        let new = tls_connect(addrs.dot[0], b"dot").await;
        oldest_gives_way(dot, new, "DoT").await;

        let mut doh = Vec::new();
        for i in 0..=CAP {
            let tls = tls_connect(addrs.doh[0], b"h2").await;
            let (mut h2, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .unwrap();
            let conn = tokio::spawn(conn);
            let (status, body) = post(&mut h2, 70 + i).await;
            assert_eq!((status, id_of(&body)), (200, 70 + i), "DoH connection {i}");
            doh.push((h2, conn));
        }
        let (_, first) = doh.remove(0);
        let ended = tokio::time::timeout(READ_LIMIT, first).await;
        assert!(
            ended.is_ok(),
            "DoH: the oldest idle connection got GOAWAY and ended"
        );
        let (status, _) = post(&mut doh[0].0, 80).await;
        assert_eq!(status, 200, "DoH: the others stay");
    });
}

/// `new`, connecting to a listener full of the idle connections `held` (oldest first), gets
/// answers; the oldest of `held` is closed, the others are not.
async fn oldest_gives_way<S: AsyncRead + AsyncWrite + Unpin>(
    mut held: Vec<S>,
    mut new: S,
    what: &str,
) {
    assert_eq!(
        ask(&mut new, 50).await,
        Some(50),
        "{what}: the new client is answered"
    );
    assert_eq!(
        ask(&mut held[0], 51).await,
        None,
        "{what}: the oldest idle one closed"
    );
    assert_eq!(
        ask(&mut held[1], 52).await,
        Some(52),
        "{what}: the others stay"
    );
}

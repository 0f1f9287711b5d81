//! `pqdns-bench load`: a DNS load generator that works against any server (pqdns-server, NSD,
//! Knot, BIND…). UDP (RFC 1035 §4.2.1), TCP (RFC 7766), DNS over TLS (RFC 7858), DNS over
//! HTTPS (RFC 8484, GET or POST over HTTP/2) and DNS over QUIC (RFC 9250, quinn: one stream per
//! query, message ID 0); a fresh connection (and TLS handshake) per query,
//! one reused connection per worker, or a fresh connection per query resuming the TLS session
//! (RFC 8446 §2.2); N concurrent workers in a closed loop, or a fixed total rate.
//!
//! Definitions (stated in every report):
//! - latency: from the query's start (closed loop) or its scheduled send time (fixed rate, so
//!   a slow server is not hidden by the client waiting: no coordinated omission) to the
//!   matching answer, including connect and TLS handshake when the connection is new;
//! - wire bytes: payload bytes counted at the socket (UDP payloads; TCP payload including TLS
//!   records and HTTP/2 frames; for DoQ the UDP payloads of each QUIC connection as quinn
//!   counts them, up to its CONNECTION_CLOSE, which is not counted), both directions,
//!   ÷ answered queries;
//! - header bytes: IP/UDP/TCP headers *estimated* by [`HeaderEstimate`];
//! - CPU: client CPU from getrusage, server CPU from `/proc/PID/stat` ([`crate::proc_stat`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full, Limited};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::client::TlsStream;

use crate::proc_stat::{self, ProcessUsage, Sampler};
use crate::query_source::{query_wire, QueryOptions, QuerySpec};
use crate::tls_client::{client_config, TlsClientError, TlsClientOptions};
use crate::wire_count::{CountingStream, HeaderEstimate, WireCounters, WireTotals};

/// Largest DNS message read, bytes (the TCP length field's maximum, RFC 1035 §4.2.2).
pub const MAX_MESSAGE: usize = 65_535;
/// Interval of the `/proc` CPU and memory sampler.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Highest latency the histogram records, microseconds (longer ones are clamped): 10 minutes.
pub const MAX_LATENCY_US: u64 = 600_000_000;
/// Most UDP sockets (QUIC endpoints) of a DoQ run: one per worker up to this many, so that
/// a server spreading clients over `SO_REUSEPORT` sockets by address and port sees many
/// clients, as it would in the field.
pub const QUIC_CLIENT_SOCKETS: usize = 256;
/// Receive buffer asked for each DoQ client socket, bytes (the kernel caps it at
/// `net.core.rmem_max`).
pub const QUIC_RECV_BUFFER: usize = 4 << 20;
/// TCP maximum segment size assumed for the header estimate on loopback, bytes
/// (Linux `lo` MTU 65536 − 40 − 12).
pub const LOOPBACK_MSS: u64 = 65_483;

/// Transport of a load run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LoadTransport {
    /// UDP, one datagram each way; truncated (TC=1) answers are counted, not retried.
    Udp,
    /// TCP with 2-byte length framing.
    Tcp,
    /// DNS over TLS (ALPN "dot").
    Dot,
    /// DNS over HTTPS, POST, HTTP/2.
    DohPost,
    /// DNS over HTTPS, GET with `?dns=` base64url, HTTP/2.
    DohGet,
    /// DNS over QUIC (ALPN "doq"), one bidirectional stream per query; fresh or reused
    /// connections only.
    Doq,
}

impl LoadTransport {
    /// The CLI name (`udp`, `tcp`, `dot`, `doh-post`, `doh-get`, `doq`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Dot => "dot",
            Self::DohPost => "doh-post",
            Self::DohGet => "doh-get",
            Self::Doq => "doq",
        }
    }

    /// True for DoT, DoH and DoQ.
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Dot | Self::DohPost | Self::DohGet | Self::Doq)
    }

    /// True for the transports carried in UDP datagrams (UDP, DoQ).
    pub fn is_datagram(self) -> bool {
        matches!(self, Self::Udp | Self::Doq)
    }
}

/// When a new connection is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// A new connection and full TLS handshake for every query (the study's method; for UDP a
    /// new socket per query).
    Fresh,
    /// One connection per worker, reused for all its queries (reopened after an error).
    Reuse,
    /// A new connection per query that resumes an earlier TLS session (PSK, RFC 8446 §2.2).
    Resumption,
}

impl ConnectionMode {
    /// The CLI name (`fresh`, `reuse`, `resumption`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Fresh => "fresh",
            Self::Reuse => "reuse",
            Self::Resumption => "resumption",
        }
    }
}

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// After this many queries have been sent (and answered or failed).
    Count(u64),
    /// After this long; queries in flight then are still awaited.
    Duration(Duration),
}

/// Everything a load run needs.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Server address.
    pub target: SocketAddr,
    /// Transport.
    pub transport: LoadTransport,
    /// Connection handling.
    pub mode: ConnectionMode,
    /// Concurrent workers (each has at most one query outstanding).
    pub concurrency: usize,
    /// Total queries per second; `None`: closed loop (each worker sends when answered).
    pub rate: Option<f64>,
    /// When to stop.
    pub limit: Limit,
    /// Queries, used round-robin.
    pub queries: Vec<QuerySpec>,
    /// EDNS(0) settings.
    pub edns: QueryOptions,
    /// TLS settings (DoT, DoH).
    pub tls: TlsClientOptions,
    /// DoH URI path.
    pub doh_path: String,
    /// DoQ: UDP payload bytes of the client's QUIC datagrams (at least 1200, QUIC's minimum;
    /// see [`pqdns_net::doq_client_config`]).
    pub doq_datagram_size: u16,
    /// Per-query timeout (connect, handshake and exchange).
    pub timeout: Duration,
    /// Server process to sample for CPU and memory.
    pub server_pid: Option<u32>,
    /// Show a progress bar (only when stderr is a terminal).
    pub progress: bool,
}

/// Latency percentiles, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

/// The result of a load run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    /// Server address.
    pub target: String,
    /// Transport.
    pub transport: LoadTransport,
    /// Connection handling.
    pub mode: ConnectionMode,
    /// Workers.
    pub concurrency: usize,
    /// Asked rate, queries/s (`None`: closed loop).
    pub rate: Option<f64>,
    /// Wall time from the first query to the last answer, seconds.
    pub wall_seconds: f64,
    /// Queries sent.
    pub queries: u64,
    /// Answers received (any RCODE).
    pub answered: u64,
    /// Answers with TC=1.
    pub truncated: u64,
    /// Failed exchanges (connect, TLS, I/O, HTTP, malformed or mismatched answer).
    pub errors: u64,
    /// Exchanges that hit the timeout.
    pub timeouts: u64,
    /// First few distinct error messages.
    pub error_samples: Vec<String>,
    /// Answers per RCODE (number → count).
    pub rcodes: BTreeMap<u16, u64>,
    /// Answered queries per second of wall time.
    pub qps: f64,
    /// Latency of answered queries.
    pub latency: Latency,
    /// Socket totals of the run.
    pub wire: WireTotals,
    /// Socket bytes sent per answered query (incl. TLS/HTTP), bytes.
    pub wire_sent_per_query: f64,
    /// Socket bytes received per answered query, bytes.
    pub wire_received_per_query: f64,
    /// DNS message bytes sent per answered query (no framing), bytes.
    pub dns_sent_per_query: f64,
    /// DNS message bytes received per answered query, bytes.
    pub dns_received_per_query: f64,
    /// Estimated IP/UDP/TCP header bytes (both directions) per answered query, bytes.
    pub est_headers_per_query: f64,
    /// Estimated IP/UDP/TCP header bytes of the run.
    pub est_headers: HeaderEstimate,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// Of those, resumed (PSK) handshakes.
    pub tls_resumed: u64,
    /// Negotiated key-exchange group (of the first full handshake), e.g. `X25519MLKEM768`.
    pub tls_group: Option<String>,
    /// Client (this process) CPU and memory.
    pub client: ProcessUsage,
    /// Server CPU and memory, when `--server-pid` was given.
    pub server: Option<ProcessUsage>,
    /// Server CPU time per answered query, microseconds.
    pub server_cpu_us_per_query: Option<f64>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// TLS configuration failed.
    #[error(transparent)]
    Tls(#[from] TlsClientError),
    /// Bad parameters.
    #[error("{0}")]
    Invalid(String),
}

/// Shared state of one run.
struct Shared {
    cfg: LoadConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The QUIC client endpoints (one UDP socket each) of a DoQ run; worker `w` uses
    /// endpoint `w % len`.
    quic: Vec<quinn::Endpoint>,
    counters: Arc<WireCounters>,
    next: AtomicU64,
    start: Instant,
    deadline: Option<Instant>,
    first_group: Mutex<Option<String>>,
    progress: Option<indicatif::ProgressBar>,
}

/// Per-worker tallies, merged at the end.
struct Tally {
    hist: Histogram<u64>,
    queries: u64,
    truncated: u64,
    errors: u64,
    timeouts: u64,
    error_samples: Vec<String>,
    rcodes: BTreeMap<u16, u64>,
    dns_sent: u64,
    dns_received: u64,
    handshakes: u64,
    resumed: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid bounds"),
            queries: 0,
            truncated: 0,
            errors: 0,
            timeouts: 0,
            error_samples: Vec::new(),
            rcodes: BTreeMap::new(),
            dns_sent: 0,
            dns_received: 0,
            handshakes: 0,
            resumed: 0,
        }
    }

    fn note_error(&mut self, message: String) {
        if self.error_samples.len() < 4 && !self.error_samples.contains(&message) {
            self.error_samples.push(message);
        }
    }

    fn merge(&mut self, other: Tally) {
        self.hist.add(&other.hist).expect("same bounds");
        self.queries += other.queries;
        self.truncated += other.truncated;
        self.errors += other.errors;
        self.timeouts += other.timeouts;
        for m in other.error_samples {
            self.note_error(m);
        }
        for (k, v) in other.rcodes {
            *self.rcodes.entry(k).or_default() += v;
        }
        self.dns_sent += other.dns_sent;
        self.dns_received += other.dns_received;
        self.handshakes += other.handshakes;
        self.resumed += other.resumed;
    }
}

type Tls = TlsStream<CountingStream<TcpStream>>;
pub(crate) type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// A worker's connection.
enum Conn {
    Udp(UdpSocket),
    Tcp(CountingStream<TcpStream>),
    Dot(Box<Tls>),
    Doh(H2Sender),
    Doq(quinn::Connection),
}

/// Outcome of one exchange that produced an answer.
struct Answer {
    wire: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("QUIC: {0}")]
    Quic(String),
    #[error("bad answer: {0}")]
    BadAnswer(&'static str),
}

impl Shared {
    async fn connect(&self, worker: usize, tally: &mut Tally) -> Result<Conn, ExchangeError> {
        let target = self.cfg.target;
        if self.cfg.transport == LoadTransport::Udp {
            let local: SocketAddr = if target.is_ipv4() {
                ([0, 0, 0, 0], 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let socket = UdpSocket::bind(local).await?;
            socket.connect(target).await?;
            return Ok(Conn::Udp(socket));
        }
        if !self.quic.is_empty() {
            let endpoint = &self.quic[worker % self.quic.len()];
            return self.connect_quic(endpoint, tally).await;
        }
        let tcp = TcpStream::connect(target).await?;
        tcp.set_nodelay(true)?;
        self.counters.add_connection();
        let stream = CountingStream::new(tcp, self.counters.clone());
        let Some(config) = &self.tls else {
            return Ok(Conn::Tcp(stream));
        };
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(server_name(&self.cfg.tls, target)?, stream)
            .await?;
        let session = tls.get_ref().1;
        tally.handshakes += 1;
        if session.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            tally.resumed += 1;
        } else if let Some(g) = session.negotiated_key_exchange_group() {
            let mut first = self.first_group.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| format!("{:?}", g.name()));
        }
        if self.cfg.transport == LoadTransport::Dot {
            return Ok(Conn::Dot(Box::new(tls)));
        }
        let (send, _conn) = h2_handshake(tls).await?;
        Ok(Conn::Doh(send))
    }

    /// A new QUIC connection to the target, handshake done.
    async fn connect_quic(
        &self,
        endpoint: &quinn::Endpoint,
        tally: &mut Tally,
    ) -> Result<Conn, ExchangeError> {
        let tls = self.tls.clone().expect("DoQ runs have a TLS configuration");
        let config = pqdns_net::doq_client_config(tls, self.cfg.doq_datagram_size)
            .map_err(ExchangeError::Quic)?;
        let name = self
            .cfg
            .tls
            .server_name
            .clone()
            .unwrap_or_else(|| self.cfg.target.ip().to_string());
        let conn = endpoint
            .connect_with(config, self.cfg.target, &name)
            .map_err(|e| ExchangeError::Quic(e.to_string()))?
            .await
            .map_err(|e| ExchangeError::Quic(e.to_string()))?;
        self.counters.add_connection();
        tally.handshakes += 1;
        if let Some(g) = pqdns_net::negotiated_group(&conn) {
            let mut first = self.first_group.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| format!("{g:?}"));
        }
        Ok(Conn::Doq(conn))
    }

    async fn exchange(&self, conn: &mut Conn, wire: &[u8]) -> Result<Answer, ExchangeError> {
        let answer = match conn {
            Conn::Udp(socket) => {
                socket.send(wire).await?;
                self.counters.add_sent(wire.len());
                let mut buf = vec![0u8; MAX_MESSAGE];
                // Datagrams with another ID (a late answer to a timed-out query) are skipped;
                // the caller's timeout bounds the loop.
                loop {
                    let n = socket.recv(&mut buf).await?;
                    self.counters.add_received(n);
                    if n >= 2 && buf[..2] == wire[..2] {
                        buf.truncate(n);
                        break buf;
                    }
                }
            }
            Conn::Tcp(s) => length_prefixed(s, wire).await?,
            Conn::Dot(s) => length_prefixed(s.as_mut(), wire).await?,
            Conn::Doh(send) => self.doh(send, wire).await?,
            Conn::Doq(conn) => pqdns_net::doq_query(conn, wire)
                .await
                .map_err(|e| ExchangeError::Quic(e.to_string()))?,
        };
        if answer.len() < 12 {
            return Err(ExchangeError::BadAnswer("shorter than a DNS header"));
        }
        if answer[..2] != wire[..2] {
            return Err(ExchangeError::BadAnswer("ID does not match the query"));
        }
        if answer[2] & 0x80 == 0 {
            return Err(ExchangeError::BadAnswer("QR bit not set"));
        }
        Ok(Answer { wire: answer })
    }

    async fn doh(&self, send: &mut H2Sender, wire: &[u8]) -> Result<Vec<u8>, ExchangeError> {
        let http = |e: &dyn std::fmt::Display| ExchangeError::Http(e.to_string());
        let authority = self
            .cfg
            .tls
            .server_name
            .clone()
            .unwrap_or_else(|| self.cfg.target.to_string());
        let uri = format!("https://{authority}{}", self.cfg.doh_path);
        let request = if self.cfg.transport == LoadTransport::DohGet {
            // RFC 8484 §4.1: GET uses ID 0 for cache friendliness; the wire form's ID is kept
            // here so answers can be matched, which servers must accept.
            let dns = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(wire);
            http::Request::get(format!("{uri}?dns={dns}"))
                .header("accept", "application/dns-message")
                .body(Full::new(Bytes::new()))
        } else {
            http::Request::post(uri)
                .header("content-type", "application/dns-message")
                .header("accept", "application/dns-message")
                .body(Full::new(Bytes::copy_from_slice(wire)))
        }
        .map_err(|e| http(&e))?;
        doh_exchange(send, request).await
    }

    /// Index of the next query to send, or `None` when the run is over.
    fn next_query(&self) -> Option<u64> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match self.cfg.limit {
            Limit::Count(n) if i >= n => None,
            _ => Some(i),
        }
    }

    async fn worker(self: Arc<Self>, worker: usize) -> Tally {
        let mut tally = Tally::new();
        let mut conn: Option<Conn> = None;
        let n = self.cfg.queries.len() as u64;
        while let Some(i) = self.next_query() {
            let started = match self.cfg.rate {
                Some(rate) => {
                    let at = self.start + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(at.into()).await;
                    at
                }
                None => Instant::now(),
            };
            // IDs differ between workers and between a worker's consecutive queries.
            // DoQ queries carry ID 0 (RFC 9250 §4.2.1): the stream matches the answer.
            let id = if self.cfg.transport == LoadTransport::Doq {
                0
            } else {
                (i as u16).wrapping_mul(0x9e37) ^ (worker as u16).rotate_left(7)
            };
            let wire = query_wire(&self.cfg.queries[(i % n) as usize], id, self.cfg.edns);
            tally.queries += 1;
            let attempt = async {
                if conn.is_none() {
                    conn = Some(self.connect(worker, &mut tally).await?);
                }
                let c = conn.as_mut().expect("connected above");
                self.exchange(c, &wire).await
            };
            match tokio::time::timeout(self.cfg.timeout, attempt).await {
                Ok(Ok(answer)) => {
                    let us = started.elapsed().as_micros() as u64;
                    tally.hist.saturating_record(us.max(1));
                    let rcode = u16::from(answer.wire[3] & 0x0f);
                    *tally.rcodes.entry(rcode).or_default() += 1;
                    if answer.wire[2] & 0x02 != 0 {
                        tally.truncated += 1;
                    }
                    tally.dns_sent += wire.len() as u64;
                    tally.dns_received += answer.wire.len() as u64;
                    if self.cfg.mode != ConnectionMode::Reuse {
                        self.close(conn.take()).await;
                    }
                }
                Ok(Err(e)) => {
                    tally.errors += 1;
                    tally.note_error(e.to_string());
                    self.close(conn.take()).await;
                }
                Err(_) => {
                    tally.timeouts += 1;
                    self.close(conn.take()).await;
                }
            }
            if let Some(p) = &self.progress {
                p.inc(1);
            }
        }
        self.close(conn.take()).await;
        tally
    }

    /// Closes a connection politely (TLS close_notify, TCP FIN, QUIC CONNECTION_CLOSE with
    /// DOQ_NO_ERROR) so the server sees a normal end; a QUIC connection's datagrams are added
    /// to the counters here.
    async fn close(&self, conn: Option<Conn>) {
        match conn {
            Some(Conn::Tcp(mut s)) => {
                let _ = s.shutdown().await;
            }
            Some(Conn::Dot(mut s)) => {
                let _ = s.shutdown().await;
            }
            Some(Conn::Doq(c)) => {
                c.close(0u32.into(), b"");
                let stats = c.stats();
                self.counters
                    .add_sent_datagrams(stats.udp_tx.bytes, stats.udp_tx.datagrams);
                self.counters
                    .add_received_datagrams(stats.udp_rx.bytes, stats.udp_rx.datagrams);
            }
            Some(Conn::Doh(_)) | Some(Conn::Udp(_)) | None => {}
        }
    }
}

/// A QUIC client endpoint of a DoQ run: one UDP socket for `target`'s address family with a
/// [`QUIC_RECV_BUFFER`]-byte receive buffer (the answers to a batch of handshakes arrive
/// together and could overflow the default one).
fn quic_endpoint(target: SocketAddr) -> std::io::Result<quinn::Endpoint> {
    let local: SocketAddr = if target.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(local),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if let Err(e) = socket.set_recv_buffer_size(QUIC_RECV_BUFFER) {
        tracing::debug!(error = %e, "could not raise the UDP receive buffer");
    }
    socket.bind(&local.into())?;
    let runtime =
        quinn::default_runtime().ok_or_else(|| std::io::Error::other("no tokio runtime"))?;
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket.into(),
        runtime,
    )
}

/// The TLS server name to send and verify: `opts.server_name`, else `target`'s address.
pub(crate) fn server_name(
    opts: &TlsClientOptions,
    target: SocketAddr,
) -> std::io::Result<ServerName<'static>> {
    match &opts.server_name {
        Some(n) => ServerName::try_from(n.clone())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
        None => Ok(ServerName::IpAddress(target.ip().into())),
    }
}

/// An HTTP/2 client connection over `io` (TLS done): its request sender, and the task driving
/// it, which ends when the connection does.
pub(crate) async fn h2_handshake<IO>(
    io: IO,
) -> Result<(H2Sender, tokio::task::JoinHandle<()>), ExchangeError>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(io),
    )
    .await
    .map_err(|e| ExchangeError::Http(e.to_string()))?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((send, task))
}

/// Sends one DoH `request` on `send` and returns the DNS message of a 200 response (at most
/// [`MAX_MESSAGE`] bytes).
pub(crate) async fn doh_exchange(
    send: &mut H2Sender,
    request: http::Request<Full<Bytes>>,
) -> Result<Vec<u8>, ExchangeError> {
    let http = |e: &dyn std::fmt::Display| ExchangeError::Http(e.to_string());
    send.ready().await.map_err(|e| http(&e))?;
    let response = send.send_request(request).await.map_err(|e| http(&e))?;
    if response.status() != http::StatusCode::OK {
        return Err(ExchangeError::Http(format!("status {}", response.status())));
    }
    let body = Limited::new(response.into_body(), MAX_MESSAGE)
        .collect()
        .await
        .map_err(|e| http(&e))?;
    Ok(body.to_bytes().to_vec())
}

/// One query/answer over a stream with the 2-byte length prefix (RFC 1035 §4.2.2), written in
/// one call; answers with other IDs are skipped.
pub(crate) async fn length_prefixed<S>(
    stream: &mut S,
    wire: &[u8],
) -> Result<Vec<u8>, ExchangeError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut out = Vec::with_capacity(wire.len() + 2);
    out.extend_from_slice(&(wire.len() as u16).to_be_bytes());
    out.extend_from_slice(wire);
    stream.write_all(&out).await?;
    stream.flush().await?;
    loop {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut answer).await?;
        if answer.len() < 2 || answer[..2] == wire[..2] {
            return Ok(answer);
        }
    }
}

/// Runs the load described by `cfg` and reports what it measured.
///
/// # Errors
/// [`LoadError`] if the parameters are inconsistent or TLS cannot be configured; failures of
/// individual queries are counted in the report, not returned.
pub async fn run(cfg: LoadConfig) -> Result<LoadReport, LoadError> {
    if cfg.queries.is_empty() {
        return Err(LoadError::Invalid("no queries".into()));
    }
    if cfg.concurrency == 0 {
        return Err(LoadError::Invalid("concurrency must be at least 1".into()));
    }
    if cfg.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(LoadError::Invalid("rate must be a positive number".into()));
    }
    if cfg.transport == LoadTransport::Doq && cfg.mode == ConnectionMode::Resumption {
        return Err(LoadError::Invalid(
            "DoQ is measured with fresh or reused connections, not resumption".into(),
        ));
    }
    let alpn: &[u8] = match cfg.transport {
        LoadTransport::Dot => b"dot",
        LoadTransport::Doq => pqdns_net::ALPN_DOQ,
        _ => b"h2",
    };
    let tls = if cfg.transport.is_tls() {
        let resumption = cfg.mode == ConnectionMode::Resumption;
        Some(client_config(
            &cfg.tls,
            alpn,
            resumption,
            cfg.concurrency * 2 + 16,
        )?)
    } else {
        None
    };
    let quic = if cfg.transport == LoadTransport::Doq {
        (0..cfg.concurrency.min(QUIC_CLIENT_SOCKETS))
            .map(|_| quic_endpoint(cfg.target))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| LoadError::Invalid(format!("QUIC: {e}")))?
    } else {
        Vec::new()
    };
    let progress = progress_bar(&cfg);
    let server_sampler = cfg
        .server_pid
        .and_then(|pid| Sampler::start(pid, SAMPLE_INTERVAL));
    let client_sampler = Sampler::start(std::process::id(), SAMPLE_INTERVAL);
    let client_cpu_start = proc_stat::self_cpu_time();
    let start = Instant::now();
    let shared = Arc::new(Shared {
        deadline: match cfg.limit {
            Limit::Duration(d) => Some(start + d),
            Limit::Count(_) => None,
        },
        cfg,
        tls,
        quic,
        counters: Arc::new(WireCounters::default()),
        next: AtomicU64::new(0),
        start,
        first_group: Mutex::new(None),
        progress,
    });
    let workers: Vec<_> = (0..shared.cfg.concurrency)
        .map(|w| tokio::spawn(shared.clone().worker(w)))
        .collect();
    let mut tally = Tally::new();
    for w in workers {
        match w.await {
            Ok(t) => tally.merge(t),
            Err(e) => tally.note_error(format!("worker failed: {e}")),
        }
    }
    let wall = start.elapsed().as_secs_f64();
    for endpoint in &shared.quic {
        // Let the CONNECTION_CLOSE frames go out before the endpoint is dropped.
        endpoint.close(0u32.into(), b"");
    }
    let client_cpu = (proc_stat::self_cpu_time() - client_cpu_start).as_secs_f64();
    if let Some(p) = &shared.progress {
        p.finish_and_clear();
    }
    let mut client = client_sampler.map(Sampler::finish).unwrap_or_default();
    client.cpu_seconds = client_cpu;
    client.cpu_pct_avg = client_cpu / wall.max(1e-9) / proc_stat::cores() as f64 * 100.0;
    let server = server_sampler.map(Sampler::finish);
    Ok(report(&shared, tally, wall, client, server))
}

fn progress_bar(cfg: &LoadConfig) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if !cfg.progress || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match cfg.limit {
        Limit::Count(n) => indicatif::ProgressBar::new(n),
        Limit::Duration(_) => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {pos}/{len} queries {per_sec} {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}

fn report(
    shared: &Shared,
    tally: Tally,
    wall: f64,
    client: ProcessUsage,
    server: Option<ProcessUsage>,
) -> LoadReport {
    let cfg = &shared.cfg;
    let answered = tally.hist.len();
    let per = |x: u64| {
        if answered > 0 {
            x as f64 / answered as f64
        } else {
            0.0
        }
    };
    let ms = |us: u64| us as f64 / 1000.0;
    let wire = shared.counters.totals();
    let est_headers = HeaderEstimate::estimate(
        &wire,
        cfg.transport.is_datagram(),
        cfg.target.is_ipv6(),
        LOOPBACK_MSS,
    );
    let first_group = shared
        .first_group
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    LoadReport {
        target: cfg.target.to_string(),
        transport: cfg.transport,
        mode: cfg.mode,
        concurrency: cfg.concurrency,
        rate: cfg.rate,
        wall_seconds: wall,
        queries: tally.queries,
        answered,
        truncated: tally.truncated,
        errors: tally.errors,
        timeouts: tally.timeouts,
        error_samples: tally.error_samples,
        rcodes: tally.rcodes,
        qps: answered as f64 / wall.max(1e-9),
        latency: Latency {
            p50_ms: ms(tally.hist.value_at_quantile(0.5)),
            p90_ms: ms(tally.hist.value_at_quantile(0.9)),
            p99_ms: ms(tally.hist.value_at_quantile(0.99)),
            max_ms: ms(tally.hist.max()),
            mean_ms: tally.hist.mean() / 1000.0,
        },
        wire_sent_per_query: per(wire.sent),
        wire_received_per_query: per(wire.received),
        dns_sent_per_query: per(tally.dns_sent),
        dns_received_per_query: per(tally.dns_received),
        est_headers_per_query: per(est_headers.sent + est_headers.received),
        wire,
        est_headers,
        tls_handshakes: tally.handshakes,
        tls_resumed: tally.resumed,
        tls_group: first_group,
        server_cpu_us_per_query: server
            .filter(|_| answered > 0)
            .map(|s| s.cpu_seconds * 1e6 / answered as f64),
        client,
        server,
    }
}

impl LoadReport {
    /// CSV header matching [`LoadReport::csv_row`].
    pub const CSV_HEADER: &'static str = "target,transport,mode,concurrency,rate,tls_group,\
wall_s,queries,answered,errors,timeouts,truncated,qps,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,\
wire_sent_per_q,wire_recv_per_q,dns_sent_per_q,dns_recv_per_q,est_headers_per_q,\
connections,tls_handshakes,tls_resumed,client_cpu_s,client_cpu_pct_avg,client_cpu_pct_peak,\
server_cpu_s,server_cpu_pct_avg,server_cpu_pct_peak,server_rss_peak_kib,server_mem_pct,\
server_cpu_us_per_q";

    /// One CSV line (no newline) with the columns of [`LoadReport::CSV_HEADER`].
    pub fn csv_row(&self) -> String {
        let s = self.server.unwrap_or_default();
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        format!(
            "{},{},{},{},{},{},{:.4},{},{},{},{},{},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},\
             {:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{:.4},{:.2},{:.2},{},{},{},{},{},{}",
            self.target,
            self.transport.name(),
            self.mode.name(),
            self.concurrency,
            opt(self.rate),
            self.tls_group.as_deref().unwrap_or(""),
            self.wall_seconds,
            self.queries,
            self.answered,
            self.errors,
            self.timeouts,
            self.truncated,
            self.qps,
            self.latency.p50_ms,
            self.latency.p90_ms,
            self.latency.p99_ms,
            self.latency.max_ms,
            self.latency.mean_ms,
            self.wire_sent_per_query,
            self.wire_received_per_query,
            self.dns_sent_per_query,
            self.dns_received_per_query,
            self.est_headers_per_query,
            self.wire.connections,
            self.tls_handshakes,
            self.tls_resumed,
            self.client.cpu_seconds,
            self.client.cpu_pct_avg,
            self.client.cpu_pct_peak,
            opt(self.server.map(|_| s.cpu_seconds)),
            opt(self.server.map(|_| s.cpu_pct_avg)),
            opt(self.server.map(|_| s.cpu_pct_peak)),
            self.server
                .map_or(String::new(), |_| s.rss_peak_kib.to_string()),
            opt(self.server.map(|_| s.mem_pct_peak)),
            opt(self.server_cpu_us_per_query),
        )
    }
}

//! Client transports: UDP with EDNS(0) and TC → TCP retry (RFC 7766 §5), TCP with 2-byte
//! framing (RFC 1035 §4.2.2), DNS-over-TLS (RFC 7858, ALPN `dot`) and DNS-over-HTTPS
//! (RFC 8484, POST over HTTP/2). TLS uses rustls with the aws-lc-rs provider, which offers
//! X25519MLKEM768 first; `pq_only` removes every non-hybrid group so a classical handshake
//! fails. TCP, DoT and DoH connections are reused across queries to the same server. Queries
//! over DoT, DoH and DoQ carry EDNS padding to 128-byte blocks ([`crate::padding`], RFC 8467
//! §4.1).
//!
//! Spoofing resistance (RFC 5452): every query gets a random ID from the OS CSPRNG (chosen by
//! the caller, see `crate::random`), every UDP query its own socket bound to a random
//! unprivileged source port and connected to the server, so the kernel drops datagrams from
//! other addresses; an answer must echo the ID and the question.
//!
//! With dnstap on ([`Client::set_dnstap`]), every query is logged as it is sent
//! (RESOLVER_QUERY) and every answer as it arrives (RESOLVER_RESPONSE), with the server's
//! address and port, the transport and the zone the query was sent for
//! ([`pqdns_net::dnstap`]). A UDP query whose answer came truncated logs its query once, as
//! UDP, and the answer that ended the exchange (over TCP, or the whole answer of the retry
//! with a server cookie).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::message::Message;
use pqdns_core::wire::{MessageView, Rcode, FLAG_QR, FLAG_TC, HEADER_LEN, OPTION_COOKIE};
use pqdns_core::Name;
use pqdns_net::dnstap::Dnstap;
use pqdns_net::tls::certificate_key_algorithm;
use pqdns_net::tls_client::{client_config, ClientOptions, Roots};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::client::TlsStream;

use crate::cookies::{ClientCookies, CookieMismatch};
use crate::doq::DoqConnections;
use crate::fragment::{FragConfig, Fragmenting};
use crate::padding;
use crate::random;

/// Largest DNS message accepted from a server, bytes (the TCP length field's maximum).
pub const MAX_MESSAGE: usize = 65_535;

/// Which transport carries queries: [`Transport::Udp`] is retried over TCP when the answer
/// is truncated (RFC 7766 §5); DoH uses POST over HTTP/2.
pub use pqdns_net::Transport;

/// The port pqdns-server listens on for `transport` by default: 5353 for UDP and TCP, 8853
/// for DoT and DoQ, 8443 for DoH.
pub fn default_port(transport: Transport) -> u16 {
    match transport {
        Transport::Udp | Transport::Tcp => 5353,
        Transport::Dot | Transport::Doq => 8853,
        Transport::Doh => 8443,
    }
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Socket or TLS I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No answer in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The answer does not parse, or does not match the query.
    #[error("bad answer: {0}")]
    BadAnswer(#[from] BadAnswer),
    /// HTTP-level failure for DoH.
    #[error("DoH: {0}")]
    Http(#[from] HttpError),
    /// The TLS configuration could not be built (e.g. unreadable CA file).
    #[error("TLS setup: {0}")]
    TlsSetup(String),
}

/// Why a server's response is not accepted as the answer to our query.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadAnswer {
    /// The response is not a DNS message (RFC 1035 §4.1).
    #[error("malformed response (FORMERR): {0}")]
    Malformed(pqdns_core::wire::WireError),
    /// The QR bit is clear (RFC 1035 §4.1.1): a query, not a response.
    #[error("QR bit clear: not a response")]
    NotResponse,
    /// The ID or the question differs from ours (RFC 5452 §9.1).
    #[error("ID or question does not match the query")]
    Mismatch,
    /// The COOKIE option does not echo our client cookie (RFC 7873 §5.3).
    #[error("{0}")]
    Cookie(#[from] CookieMismatch),
    /// The DoQ stream did not carry one length-prefixed message (RFC 9250 §4.2).
    #[error("{0}")]
    Doq(pqdns_net::QueryError),
}

/// Why a DNS-over-HTTPS exchange (RFC 8484) failed. The underlying errors (hyper's, http's)
/// are boxed so that their versions are not part of this API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The HTTP/2 connection could not be set up.
    #[error("{0}")]
    Handshake(BoxError),
    /// The request could not be built (e.g. the TLS server name is no valid authority).
    #[error("{0}")]
    Request(BoxError),
    /// The request could not be sent, or no response came (the connection closed).
    #[error("{0}")]
    Send(BoxError),
    /// The server answered with this HTTP status instead of 200 (RFC 8484 §4.2.1).
    #[error("status {0}")]
    Status(u16),
    /// The response body could not be read, or is over [`MAX_MESSAGE`] bytes.
    #[error("{0}")]
    Body(BoxError),
}

/// An error from a library below, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// TLS settings for DoT and DoH.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct TlsOptions {
    /// Refuse handshakes that do not negotiate a hybrid post-quantum group.
    pub pq_only: bool,
    /// Refuse servers that do not authenticate with ML-DSA: only ML-DSA signature schemes are
    /// offered and accepted, for the handshake and the certificate chain
    /// ([`pqdns_net::tls_client::ClientOptions::pq_certificates_only`]).
    pub pq_certificates_only: bool,
    /// Accept any certificate (self-signed test servers). Never the default.
    pub danger_accept_any_certificate: bool,
    /// PEM files with CA certificates (or a server's self-signed certificate) to trust; empty
    /// means the system's certificate store (`/etc/ssl/certs` via rustls-native-certs), read
    /// at the first TLS connection.
    pub ca_files: Vec<std::path::PathBuf>,
    /// TLS server name to send and verify; default: the server's IP address.
    pub server_name: Option<String>,
    /// DoQ: UDP payload bytes of the client's QUIC datagrams; `None`: 1200, which every path
    /// carries. 1452 lets a server with an ML-DSA-44 certificate answer in one round trip
    /// fewer where the path carries it ([`pqdns_net::doq_client_config`]).
    pub doq_datagram_size: Option<u16>,
}

/// What one exchange cost and carried.
#[derive(Clone, Debug, Default)]
pub struct ExchangeInfo {
    /// Transport that produced the answer (UDP answers retried over TCP report TCP).
    pub transport: Option<Transport>,
    /// DNS message bytes sent (without TCP length prefix, TLS or HTTP framing), every message
    /// counted: fragment requests, and the query again when UDP falls back to TCP.
    pub bytes_sent: usize,
    /// DNS message bytes received, every message counted (truncated answers, fragments).
    pub bytes_received: usize,
    /// Wall time of the exchange.
    pub elapsed: Duration,
    /// The negotiated TLS key-exchange group, for DoT/DoH.
    pub tls_group: Option<String>,
    /// The negotiated TLS cipher suite.
    pub tls_cipher: Option<String>,
    /// The key algorithm of the server's certificate (`ML-DSA-44`, `ECDSA-P256`, …), which in
    /// TLS 1.3 signed the handshake ([`pqdns_net::tls::certificate_key_algorithm`]).
    pub tls_certificate: Option<String>,
    /// True if a new connection (and TLS handshake) was made.
    pub new_connection: bool,
    /// True if the server pushed every fragment of the answer unasked (ARRF/QBF over UDP with
    /// a valid DNS cookie: one round trip; `crate::fragment`).
    pub fragments_pushed: bool,
    /// True if the query asked for full MTL signatures (EDNS option 65050), because a
    /// condensed signature's ladder was not held.
    pub full_signatures: bool,
}

impl ExchangeInfo {
    /// This exchange followed by `next` (a retry of the same query): bytes and time add up,
    /// the rest is `next`'s.
    fn then(self, next: ExchangeInfo) -> ExchangeInfo {
        ExchangeInfo {
            bytes_sent: self.bytes_sent + next.bytes_sent,
            bytes_received: self.bytes_received + next.bytes_received,
            elapsed: self.elapsed + next.elapsed,
            new_connection: self.new_connection || next.new_connection,
            ..next
        }
    }
}

/// An open stream connection.
enum Conn {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// A DoH connection: HTTP/2 multiplexes queries, so one is shared by every task.
#[derive(Clone)]
struct H2 {
    send: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    session: TlsSession,
}

/// What a TLS handshake negotiated, for [`ExchangeInfo`].
#[derive(Clone)]
struct TlsSession {
    group: String,
    cipher: String,
    certificate: String,
}

impl TlsSession {
    fn of(session: &rustls::ClientConnection) -> TlsSession {
        TlsSession {
            group: session
                .negotiated_key_exchange_group()
                .map_or("none".into(), |g| format!("{:?}", g.name())),
            cipher: session
                .negotiated_cipher_suite()
                .map_or("none".into(), |c| format!("{:?}", c.suite())),
            certificate: session
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map_or("none", certificate_key_algorithm)
                .to_string(),
        }
    }

    /// What a DoQ connection negotiated (quinn does not tell the cipher suite).
    fn of_quic(conn: &quinn::Connection) -> TlsSession {
        let chain = conn.peer_identity().and_then(|p| {
            p.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        });
        TlsSession {
            group: pqdns_net::negotiated_group(conn).map_or("none".into(), |g| format!("{g:?}")),
            cipher: "unknown".into(),
            certificate: chain
                .as_deref()
                .and_then(|c| c.first())
                .map_or("none", certificate_key_algorithm)
                .to_string(),
        }
    }

    fn record(self, info: &mut ExchangeInfo) {
        info.tls_group = Some(self.group);
        info.tls_cipher = Some(self.cipher);
        info.tls_certificate = Some(self.certificate);
    }
}

/// Idle TCP/DoT connections kept per server for reuse.
pub const MAX_IDLE_PER_SERVER: usize = 4;

/// Attempts at binding a random source port before letting the kernel choose.
const PORT_ATTEMPTS: usize = 8;

/// Sends queries and keeps connections for reuse. Shared between tasks through `&self`:
/// each exchange takes an idle TCP/DoT connection to the server or opens a new one, and
/// returns it afterwards (at most [`MAX_IDLE_PER_SERVER`] are kept); DoH queries share one
/// HTTP/2 connection per server.
pub struct Client {
    transport: Transport,
    timeout: Duration,
    /// Built at the first TLS connection.
    tls: OnceLock<Arc<rustls::ClientConfig>>,
    tls_options: TlsOptions,
    idle: Mutex<HashMap<SocketAddr, Vec<Conn>>>,
    h2: Mutex<HashMap<SocketAddr, H2>>,
    fragmenting: Option<Fragmenting>,
    /// DNS cookies per server, over UDP and TCP (TLS authenticates the server already).
    cookies: ClientCookies,
    doq: DoqConnections,
    /// Where queries and answers are logged; `None` when off.
    dnstap: Option<Arc<Dnstap>>,
}

impl Client {
    /// A client for `transport` with a per-exchange timeout. CA files are read now, so that
    /// a bad path is reported at once; the system certificate store (no CA file) is read at
    /// the first TLS connection only.
    ///
    /// # Errors
    /// [`TransportError::TlsSetup`] if a CA file cannot be read or parsed.
    pub fn new(
        transport: Transport,
        timeout: Duration,
        tls_options: TlsOptions,
    ) -> Result<Client, TransportError> {
        let client = Client {
            transport,
            timeout,
            tls: OnceLock::new(),
            tls_options,
            idle: Mutex::new(HashMap::new()),
            h2: Mutex::new(HashMap::new()),
            fragmenting: None,
            cookies: ClientCookies::default(),
            doq: DoqConnections::default(),
            dnstap: None,
        };
        if matches!(transport, Transport::Dot | Transport::Doh | Transport::Doq)
            && (client.tls_options.danger_accept_any_certificate
                || !client.tls_options.ca_files.is_empty())
        {
            client.tls_client_config()?;
        }
        Ok(client)
    }

    /// The TLS configuration, built on first use.
    /// The QUIC configuration of DoQ exchanges (the TLS configuration, ALPN "doq").
    fn quic_client_config(&self) -> Result<quinn::ClientConfig, TransportError> {
        let size = self
            .tls_options
            .doq_datagram_size
            .unwrap_or(pqdns_net::DOQ_MIN_DATAGRAM);
        pqdns_net::doq_client_config(self.tls_client_config()?, size)
            .map_err(TransportError::TlsSetup)
    }

    fn tls_client_config(&self) -> Result<Arc<rustls::ClientConfig>, TransportError> {
        if let Some(c) = self.tls.get() {
            return Ok(c.clone());
        }
        let alpn: &[u8] = match self.transport {
            Transport::Doh => b"h2",
            Transport::Doq => pqdns_net::ALPN_DOQ,
            _ => b"dot",
        };
        let config = tls_config(&self.tls_options, alpn)?;
        Ok(self.tls.get_or_init(|| config).clone())
    }

    /// Offers application-layer fragmentation (ARRF or QBF, `crate::fragment`) on UDP
    /// queries that carry EDNS; [`Fragmentation::Off`] (the default) only retries truncated
    /// answers over TCP.
    pub fn set_fragmentation(&mut self, config: FragConfig) {
        self.fragmenting = (config.mode != Fragmentation::Off).then(|| Fragmenting::new(config));
    }

    /// Logs every query as RESOLVER_QUERY and every answer as RESOLVER_RESPONSE to `dnstap`
    /// (see the module documentation); `None` turns logging off.
    pub fn set_dnstap(&mut self, dnstap: Option<Arc<Dnstap>>) {
        self.dnstap = dnstap;
    }

    /// Memory charged to ARRF reassembly now and at its peak, bytes (see
    /// `pqdns_core::frag::arrf::Limits`); `None` without fragmentation.
    pub fn reassembly_memory(&self) -> Option<(usize, usize)> {
        self.fragmenting
            .as_ref()
            .map(Fragmenting::reassembly_memory)
    }

    /// The transport in use.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Sends `query` to `server` and returns the matching answer. Over UDP and TCP, a query
    /// with EDNS carries a DNS cookie ([`crate::cookies`]); a BADCOOKIE answer is retried once
    /// with the server cookie it brought (RFC 7873 §5.3).
    ///
    /// # Errors
    /// [`TransportError`] on I/O failure, timeout, or an answer that is not a response (QR
    /// clear), whose ID or question does not match the query, or whose COOKIE option does not
    /// echo our client cookie.
    pub async fn exchange(
        &self,
        server: SocketAddr,
        query: &Message,
    ) -> Result<(Message, ExchangeInfo), TransportError> {
        self.exchange_in(server, None, query).await
    }

    /// As [`Client::exchange`], for a query sent to a server of `zone`: dnstap logs the zone
    /// as the query's `query_zone`.
    ///
    /// # Errors
    /// As [`Client::exchange`].
    pub async fn exchange_for_zone(
        &self,
        server: SocketAddr,
        zone: &Name,
        query: &Message,
    ) -> Result<(Message, ExchangeInfo), TransportError> {
        self.exchange_in(server, Some(zone), query).await
    }

    async fn exchange_in(
        &self,
        server: SocketAddr,
        zone: Option<&Name>,
        query: &Message,
    ) -> Result<(Message, ExchangeInfo), TransportError> {
        let (message, info) = self.exchange_once(server, zone, query).await?;
        if message.rcode() != Rcode::BADCOOKIE {
            return Ok((message, info));
        }
        let (message, again) = self.exchange_once(server, zone, query).await?;
        Ok((message, info.then(again)))
    }

    /// One query and its answer, with a cookie when the transport takes one; both logged to
    /// dnstap when it is on.
    async fn exchange_once(
        &self,
        server: SocketAddr,
        zone: Option<&Name>,
        query: &Message,
    ) -> Result<(Message, ExchangeInfo), TransportError> {
        let start = Instant::now();
        let cookie = (matches!(self.transport, Transport::Udp | Transport::Tcp)
            && query.edns.is_some())
        .then(|| self.cookies.option_for(server.ip()))
        .flatten();
        let adjusted = (cookie.is_some() || self.transport == Transport::Doq).then(|| {
            let mut q = query.clone();
            if self.transport == Transport::Doq {
                q.id = 0; // RFC 9250 §4.2.1
            }
            if let (Some(data), Some(edns)) = (cookie, q.edns.as_mut()) {
                edns.options.retain(|(code, _)| *code != OPTION_COOKIE);
                edns.options.push((OPTION_COOKIE, data));
            }
            q
        });
        let query = adjusted.as_ref().unwrap_or(query);
        let mut wire = query.to_wire();
        if self.transport.is_encrypted() {
            // RFC 8467 §4.1: queries over encrypted transports padded to 128-byte blocks.
            let len = wire.len();
            padding::pad(&mut wire, 0, len, padding::QUERY_BLOCK, MAX_MESSAGE);
        }
        let mut info = ExchangeInfo {
            bytes_sent: wire.len(),
            ..ExchangeInfo::default()
        };
        let zone = zone.map_or(&[][..], Name::as_wire);
        let sent = SystemTime::now();
        if let Some(tap) = &self.dnstap {
            tap.log_resolver_query(self.transport, server, zone, &wire, sent);
        }
        let result = tokio::time::timeout(
            self.timeout,
            self.exchange_inner(server, query, &wire, &mut info),
        )
        .await;
        // A connection that timed out may hold a half-read answer: it was taken out of the
        // pool by the exchange and is dropped with it.
        let answer = result.map_err(|_| TransportError::Timeout(self.timeout))??;
        info.elapsed = start.elapsed();
        if let Some(tap) = &self.dnstap {
            let transport = info.transport.unwrap_or(self.transport);
            tap.log_resolver_response(transport, server, zone, sent, &answer, SystemTime::now());
        }
        let message = Message::parse(&answer)
            .map_err(|e| TransportError::BadAnswer(BadAnswer::Malformed(e)))?;
        if !message.has_flag(FLAG_QR) {
            return Err(BadAnswer::NotResponse.into());
        }
        if message.id != query.id || message.questions != query.questions {
            return Err(BadAnswer::Mismatch.into());
        }
        if query
            .edns
            .as_ref()
            .is_some_and(|e| e.option(OPTION_COOKIE).is_some())
        {
            let echoed = message.edns.as_ref().and_then(|e| e.option(OPTION_COOKIE));
            self.cookies
                .learn(server.ip(), echoed)
                .map_err(BadAnswer::from)?;
        }
        Ok((message, info))
    }

    async fn exchange_inner(
        &self,
        server: SocketAddr,
        query: &Message,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        match self.transport {
            Transport::Udp => {
                info.transport = Some(Transport::Udp);
                if let Some(answer) = self.udp_answer(server, query, wire, info).await? {
                    return Ok(answer);
                }
                info.transport = Some(Transport::Tcp);
                info.bytes_sent += wire.len();
            }
            Transport::Doq => {
                info.transport = Some(Transport::Doq);
                let (answer, conn) = self
                    .doq
                    .exchange(
                        server,
                        self.server_name(server)?,
                        self.quic_client_config()?,
                        wire,
                        info,
                    )
                    .await?;
                TlsSession::of_quic(&conn).record(info);
                info.bytes_received += answer.len();
                return Ok(answer);
            }
            Transport::Tcp | Transport::Dot | Transport::Doh => {
                info.transport = Some(self.transport);
            }
        }
        let answer = if self.transport == Transport::Doh {
            self.doh_exchange(server, wire, info).await?
        } else {
            self.stream_exchange(server, wire, info).await?
        };
        info.bytes_received += answer.len();
        Ok(answer)
    }

    /// The answer over UDP (with fragmentation when configured), or `None` when it came
    /// truncated and TCP must be tried. A server that truncates because our address is not
    /// proven yet (no server cookie; pqdns-server's amplification limit) hands out its server
    /// cookie with the truncated answer: the query is then asked once more over UDP with it
    /// (RFC 7873 §5.3 learns cookies from any response), which costs one datagram each way
    /// instead of a TCP connection.
    async fn udp_answer(
        &self,
        server: SocketAddr,
        query: &Message,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Option<Vec<u8>>, TransportError> {
        let mut retry: Option<(Message, Vec<u8>)> = None;
        for _ in 0..2 {
            let (query, wire) = match &retry {
                Some((q, w)) => (q, &w[..]),
                None => (query, wire),
            };
            let truncated = match &self.fragmenting {
                Some(f) => f.exchange(server, query, info).await?,
                None => {
                    let a = udp_exchange(server, wire).await?;
                    info.bytes_received += a.len();
                    let tc = a.len() >= 4 && u16::from_be_bytes([a[2], a[3]]) & FLAG_TC != 0;
                    if tc {
                        UdpAnswer::Truncated(a)
                    } else {
                        UdpAnswer::Whole(a)
                    }
                }
            };
            let stub = match truncated {
                UdpAnswer::Whole(a) => return Ok(Some(a)),
                UdpAnswer::Truncated(stub) => stub,
            };
            if retry.is_some() {
                break;
            }
            match self.with_new_server_cookie(server, query, &stub) {
                Some(again) => {
                    let again_wire = again.to_wire();
                    info.bytes_sent += again_wire.len();
                    retry = Some((again, again_wire));
                }
                None => break,
            }
        }
        Ok(None)
    }

    /// `query` with the server cookie that the truncated response `stub` brought, when
    /// `query` carried our client cookie alone; `None` otherwise.
    fn with_new_server_cookie(
        &self,
        server: SocketAddr,
        query: &Message,
        stub: &[u8],
    ) -> Option<Message> {
        let sent = query.edns.as_ref()?.option(OPTION_COOKIE)?;
        if sent.len() != crate::cookies::CLIENT_LEN {
            return None;
        }
        let view = MessageView::parse(stub).ok()?;
        let echoed = view.opt()?.option(OPTION_COOKIE)?;
        if echoed.len() <= crate::cookies::CLIENT_LEN || !answers(stub, &query.to_wire()) {
            return None;
        }
        self.cookies.learn(server.ip(), Some(echoed)).ok()?;
        let mut again = query.clone();
        let edns = again.edns.as_mut()?;
        edns.options.retain(|(code, _)| *code != OPTION_COOKIE);
        edns.options
            .push((OPTION_COOKIE, self.cookies.option_for(server.ip())?));
        Some(again)
    }

    /// Opens a TCP connection to `server`, with TLS for DoT and DoH.
    async fn connect(
        &self,
        server: SocketAddr,
        info: &mut ExchangeInfo,
    ) -> Result<Conn, TransportError> {
        let tcp = TcpStream::connect(server).await?;
        tcp.set_nodelay(true)?;
        info.new_connection = true;
        if self.transport == Transport::Tcp || self.transport == Transport::Udp {
            return Ok(Conn::Tcp(tcp));
        }
        let tls = tokio_rustls::TlsConnector::from(self.tls_client_config()?)
            .connect(self.server_name(server)?, tcp)
            .await?;
        Ok(Conn::Tls(Box::new(tls)))
    }

    /// The TLS server name to send and verify for `server`.
    fn server_name(&self, server: SocketAddr) -> Result<ServerName<'static>, TransportError> {
        match &self.tls_options.server_name {
            Some(n) => {
                ServerName::try_from(n.clone()).map_err(|e| TransportError::TlsSetup(e.to_string()))
            }
            None => Ok(ServerName::IpAddress(server.ip().into())),
        }
    }

    /// An idle connection to `server`, if one is pooled.
    fn take_idle(&self, server: SocketAddr) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get_mut(&server).and_then(Vec::pop)
    }

    /// Returns a connection to the pool (dropped if the pool for `server` is full).
    fn put_idle(&self, server: SocketAddr, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let pool = idle.entry(server).or_default();
        if pool.len() < MAX_IDLE_PER_SERVER {
            pool.push(conn);
        }
    }

    async fn stream_exchange(
        &self,
        server: SocketAddr,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        // One retry on a fresh connection if a reused one was closed by the server.
        for attempt in 0..2 {
            let (mut conn, reused) = match self.take_idle(server) {
                Some(c) => (c, true),
                None => (self.connect(server, info).await?, false),
            };
            let result = match &mut conn {
                Conn::Tcp(s) => framed_exchange(s, wire).await,
                Conn::Tls(s) => {
                    TlsSession::of(s.get_ref().1).record(info);
                    framed_exchange(s.as_mut(), wire).await
                }
            };
            match result {
                Ok(a) => {
                    self.put_idle(server, conn);
                    return Ok(a);
                }
                Err(e) if attempt == 0 && reused => {
                    tracing::debug!(%server, error = %e, "reused connection failed; reconnecting");
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns on the second attempt")
    }

    /// The shared HTTP/2 connection to `server`, opened if there is none or it is closed.
    async fn h2(&self, server: SocketAddr, info: &mut ExchangeInfo) -> Result<H2, TransportError> {
        let existing = {
            let h2 = self.h2.lock().unwrap_or_else(|e| e.into_inner());
            h2.get(&server).filter(|c| !c.send.is_closed()).cloned()
        };
        if let Some(c) = existing {
            return Ok(c);
        }
        let Conn::Tls(tls) = self.connect(server, info).await? else {
            unreachable!("DoH connections use TLS")
        };
        let session = TlsSession::of(tls.get_ref().1);
        let (send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(*tls),
        )
        .await
        .map_err(|e| HttpError::Handshake(e.into()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let c = H2 { send, session };
        self.h2
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(server, c.clone());
        Ok(c)
    }

    async fn doh_exchange(
        &self,
        server: SocketAddr,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        let H2 { mut send, session } = self.h2(server, info).await?;
        session.record(info);
        let authority = self
            .tls_options
            .server_name
            .clone()
            .unwrap_or_else(|| server.to_string());
        let request = http::Request::post(format!("https://{authority}/dns-query"))
            .header("content-type", "application/dns-message")
            .header("accept", "application/dns-message")
            .body(Full::new(Bytes::copy_from_slice(wire)))
            .map_err(|e| HttpError::Request(e.into()))?;
        send.ready().await.map_err(|e| HttpError::Send(e.into()))?;
        let response = send
            .send_request(request)
            .await
            .map_err(|e| HttpError::Send(e.into()))?;
        if response.status() != http::StatusCode::OK {
            return Err(HttpError::Status(response.status().as_u16()).into());
        }
        let body = Limited::new(response.into_body(), MAX_MESSAGE)
            .collect()
            .await
            .map_err(HttpError::Body)?;
        Ok(body.to_bytes().to_vec())
    }
}

/// A UDP socket on a random unprivileged source port (OS CSPRNG; up to [`PORT_ATTEMPTS`] ports
/// are tried when one is in use, then the kernel chooses), connected to `server`: the kernel
/// then drops datagrams from any other address (RFC 5452 §4.5, §9.2).
pub(crate) async fn udp_socket(server: SocketAddr) -> Result<UdpSocket, TransportError> {
    let ip: IpAddr = if server.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let mut socket = None;
    for _ in 0..PORT_ATTEMPTS {
        match UdpSocket::bind((ip, random::source_port()?)).await {
            Ok(s) => {
                socket = Some(s);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let socket = match socket {
        Some(s) => s,
        None => {
            tracing::debug!("{PORT_ATTEMPTS} random source ports in use; the kernel chooses");
            UdpSocket::bind((ip, 0)).await?
        }
    };
    socket.connect(server).await?;
    Ok(socket)
}

async fn udp_exchange(server: SocketAddr, wire: &[u8]) -> Result<Vec<u8>, TransportError> {
    let socket = udp_socket(server).await?;
    socket.send(wire).await?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    // Ignore datagrams whose ID or question does not match (RFC 5452 §9.1: discard them and
    // keep waiting for the right one); the timeout bounds the loop.
    loop {
        let n = socket.recv(&mut buf).await?;
        if answers(&buf[..n], wire) {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

/// What a UDP exchange brought: the whole answer, or a truncated one (TC=1; empty when the
/// fragments of an answer could not be had), after which the caller goes on to TCP.
pub(crate) enum UdpAnswer {
    /// The answer (or a malformed response, for the caller to reject).
    Whole(Vec<u8>),
    /// A truncated response.
    Truncated(Vec<u8>),
}

/// True if `response` could answer `query`: the same ID, and the same question section (the
/// names compared without regard to ASCII case, RFC 4343), as RFC 5452 §9.1 asks of a
/// resolver before it accepts a response.
fn answers(response: &[u8], query: &[u8]) -> bool {
    let Ok(view) = MessageView::parse(query) else {
        return false;
    };
    let question = HEADER_LEN..view.question_end();
    response.get(..2) == query.get(..2)
        && response.get(4..6) == query.get(4..6)
        && response
            .get(question.clone())
            .is_some_and(|r| r.eq_ignore_ascii_case(&query[question]))
}

async fn framed_exchange<S>(stream: &mut S, wire: &[u8]) -> Result<Vec<u8>, TransportError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut framed = Vec::with_capacity(2 + wire.len());
    framed.extend((wire.len() as u16).to_be_bytes());
    framed.extend_from_slice(wire);
    stream.write_all(&framed).await?;
    stream.flush().await?;
    // Skip answers to other IDs (a pipelined earlier query that timed out is dropped with its
    // connection, so this only guards against misbehaving servers); bounded by the timeout.
    loop {
        let len = usize::from(stream.read_u16().await?);
        let mut answer = vec![0u8; len];
        stream.read_exact(&mut answer).await?;
        if len >= 2 && answer[..2] == wire[..2] {
            return Ok(answer);
        }
    }
}

/// Builds the rustls client configuration (pqdns-net's [`pqdns_net::tls_client`]): aws-lc-rs
/// provider (X25519MLKEM768 offered first), or hybrid groups only with `pq_only`; TLS 1.3;
/// ALPN `alpn`; certificates checked against the certificates of `opts.ca_files`, or the
/// system store when there are none, unless `opts.danger_accept_any_certificate`.
///
/// # Errors
/// [`TransportError::TlsSetup`] for an unreadable CA file or one without certificates (naming
/// the file), an unusable system store, or an empty group list.
pub fn tls_config(
    opts: &TlsOptions,
    alpn: &[u8],
) -> Result<Arc<rustls::ClientConfig>, TransportError> {
    let roots = if opts.danger_accept_any_certificate {
        Roots::DangerAcceptAnyCertificate
    } else if opts.ca_files.is_empty() {
        Roots::System
    } else {
        Roots::CaFiles(opts.ca_files.clone())
    };
    let mut client = ClientOptions::new(roots).with_alpn(alpn);
    client.pq_only = opts.pq_only;
    client.pq_certificates_only = opts.pq_certificates_only;
    client_config(&client).map_err(|e| TransportError::TlsSetup(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::message::Question;
    use pqdns_core::{Class, RrType};

    fn query(qname: &str) -> Message {
        let q = Question {
            qname: qname.parse().unwrap(),
            qtype: RrType::A,
            qclass: Class::IN,
        };
        Message::query(0x4242, q, false, None)
    }

    /// Issue 31 item 5: a datagram with the right address, port and ID but another question
    /// is discarded and the exchange keeps waiting for the real answer (RFC 5452 §9.1).
    #[tokio::test]
    async fn a_response_to_another_question_is_discarded() {
        let server = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let asked = query("www.example.");
        let wire = asked.to_wire();
        let serve = tokio::spawn(async move {
            let mut buf = vec![0u8; 512];
            let (n, client) = server.recv_from(&mut buf).await.unwrap();
            let mut wrong = query("evil.example.");
            wrong.flags |= FLAG_QR;
            let mut right = Message::parse(&buf[..n]).unwrap();
            right.flags |= FLAG_QR;
            right.questions[0].qname = "WWW.Example.".parse().unwrap();
            for m in [wrong, right] {
                server.send_to(&m.to_wire(), client).await.unwrap();
            }
        });
        let answer = udp_exchange(addr, &wire).await.unwrap();
        serve.await.unwrap();
        let m = Message::parse(&answer).unwrap();
        assert_eq!(m.questions[0].qname, "www.example.".parse().unwrap());
        assert!(answers(&answer, &wire));
        assert!(!answers(&query("evil.example.").to_wire(), &wire));
        assert!(!answers(&wire[..5], &wire), "cut short");
    }

    /// Issue 11 item 12: `--tls-ca` with a file holding no certificate is an error naming the
    /// file, not an empty trust store that fails every handshake later with UnknownIssuer.
    #[test]
    fn ca_file_without_certificates_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("no-certs.pem");
        std::fs::write(
            &empty,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let opts = TlsOptions {
            ca_files: vec![empty],
            ..TlsOptions::default()
        };
        let err = Client::new(Transport::Dot, Duration::from_secs(1), opts)
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(
            text.contains("no-certs.pem") && text.contains("CERTIFICATE"),
            "{text}"
        );
    }
}

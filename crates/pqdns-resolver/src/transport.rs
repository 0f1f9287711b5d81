//! Client transports: UDP with EDNS(0) and TC → TCP retry (RFC 7766 §5), TCP with 2-byte
//! framing (RFC 1035 §4.2.2), DNS-over-TLS (RFC 7858, ALPN `dot`) and DNS-over-HTTPS
//! (RFC 8484, POST over HTTP/2). TLS uses rustls with the aws-lc-rs provider, which offers
//! X25519MLKEM768 first; `pq_only` removes every non-hybrid group so a classical handshake
//! fails. TCP, DoT and DoH connections are reused across queries to the same server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::message::{Message, FLAG_TC};
use pqdns_net::tls_client::{client_config, ClientOptions, Roots};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::client::TlsStream;

use crate::fragment::{FragConfig, Fragmenting};

/// Largest DNS message accepted from a server, bytes (the TCP length field's maximum).
pub const MAX_MESSAGE: usize = 65_535;

/// Which transport carries queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// UDP, retried over TCP when the answer is truncated.
    Udp,
    /// TCP.
    Tcp,
    /// DNS-over-TLS.
    Dot,
    /// DNS-over-HTTPS (POST, HTTP/2).
    Doh,
}

impl Transport {
    /// The port pqdns-server listens on for this transport by default.
    pub fn default_port(self) -> u16 {
        match self {
            Transport::Udp | Transport::Tcp => 5353,
            Transport::Dot => 8853,
            Transport::Doh => 8443,
        }
    }
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Socket or TLS I/O failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No answer in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The answer does not parse, or does not match the query.
    #[error("bad answer: {0}")]
    BadAnswer(String),
    /// HTTP-level failure for DoH.
    #[error("DoH: {0}")]
    Http(String),
    /// The TLS configuration could not be built (e.g. unreadable CA file).
    #[error("TLS setup: {0}")]
    TlsSetup(String),
}

/// TLS settings for DoT and DoH.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// Refuse handshakes that do not negotiate a hybrid post-quantum group.
    pub pq_only: bool,
    /// Accept any certificate (self-signed test servers). Never the default.
    pub insecure: bool,
    /// PEM file with CA certificates (or the server's self-signed certificate) to trust;
    /// `None` means the system's certificate store.
    pub ca_file: Option<std::path::PathBuf>,
    /// TLS server name to send and verify; default: the server's IP address.
    pub server_name: Option<String>,
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
    /// True if a new connection (and TLS handshake) was made.
    pub new_connection: bool,
}

enum Conn {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    H2(
        hyper::client::conn::http2::SendRequest<Full<Bytes>>,
        String,
        String,
    ),
}

/// Sends queries and keeps connections for reuse. Not shared between tasks.
pub struct Client {
    transport: Transport,
    timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
    tls_options: TlsOptions,
    conns: HashMap<SocketAddr, Conn>,
    fragmenting: Option<Fragmenting>,
}

impl Client {
    /// A client for `transport` with a per-exchange timeout.
    ///
    /// # Errors
    /// [`TransportError::TlsSetup`] if the TLS configuration cannot be built.
    pub fn new(
        transport: Transport,
        timeout: Duration,
        tls_options: TlsOptions,
    ) -> Result<Client, TransportError> {
        let tls = match transport {
            Transport::Dot => Some(tls_config(&tls_options, b"dot")?),
            Transport::Doh => Some(tls_config(&tls_options, b"h2")?),
            _ => None,
        };
        Ok(Client {
            transport,
            timeout,
            tls,
            tls_options,
            conns: HashMap::new(),
            fragmenting: None,
        })
    }

    /// Offers application-layer fragmentation (ARRF or QBF, `crate::fragment`) on UDP
    /// queries that carry EDNS; [`Fragmentation::Off`] (the default) only retries truncated
    /// answers over TCP.
    pub fn set_fragmentation(&mut self, config: FragConfig) {
        self.fragmenting = (config.mode != Fragmentation::Off).then(|| Fragmenting::new(config));
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

    /// Sends `query` to `server` and returns the matching answer.
    ///
    /// # Errors
    /// [`TransportError`] on I/O failure, timeout, or an answer whose ID or question does not
    /// match the query.
    pub async fn exchange(
        &mut self,
        server: SocketAddr,
        query: &Message,
    ) -> Result<(Message, ExchangeInfo), TransportError> {
        let start = Instant::now();
        let wire = query.to_wire();
        let mut info = ExchangeInfo {
            bytes_sent: wire.len(),
            ..ExchangeInfo::default()
        };
        let result = tokio::time::timeout(
            self.timeout,
            self.exchange_inner(server, query, &wire, &mut info),
        )
        .await;
        let answer = match result {
            Ok(r) => r?,
            Err(_) => {
                // A connection that timed out may hold a half-read answer: drop it.
                self.conns.remove(&server);
                return Err(TransportError::Timeout(self.timeout));
            }
        };
        info.elapsed = start.elapsed();
        let message =
            Message::parse(&answer).map_err(|e| TransportError::BadAnswer(e.to_string()))?;
        if message.id != query.id || message.questions != query.questions {
            return Err(TransportError::BadAnswer(
                "ID or question does not match the query".into(),
            ));
        }
        Ok((message, info))
    }

    async fn exchange_inner(
        &mut self,
        server: SocketAddr,
        query: &Message,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        match self.transport {
            Transport::Udp => {
                info.transport = Some(Transport::Udp);
                let answer = match &mut self.fragmenting {
                    Some(f) => f.exchange(server, query, info).await?,
                    None => {
                        let a = udp_exchange(server, wire).await?;
                        info.bytes_received += a.len();
                        let tc = a.len() >= 4 && u16::from_be_bytes([a[2], a[3]]) & FLAG_TC != 0;
                        (!tc).then_some(a)
                    }
                };
                if let Some(answer) = answer {
                    return Ok(answer);
                }
                info.transport = Some(Transport::Tcp);
                info.bytes_sent += wire.len();
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

    async fn connect(
        &self,
        server: SocketAddr,
        info: &mut ExchangeInfo,
    ) -> Result<Conn, TransportError> {
        let tcp = TcpStream::connect(server).await?;
        tcp.set_nodelay(true)?;
        info.new_connection = true;
        let Some(config) = &self.tls else {
            return Ok(Conn::Tcp(tcp));
        };
        let name = match &self.tls_options.server_name {
            Some(n) => ServerName::try_from(n.clone())
                .map_err(|e| TransportError::TlsSetup(e.to_string()))?,
            None => ServerName::IpAddress(server.ip().into()),
        };
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await?;
        if self.transport == Transport::Dot {
            return Ok(Conn::Tls(Box::new(tls)));
        }
        let (_, session) = tls.get_ref();
        let group = group_name(session);
        let cipher = cipher_name(session);
        let (send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        )
        .await
        .map_err(|e| TransportError::Http(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn::H2(send, group, cipher))
    }

    async fn stream_exchange(
        &mut self,
        server: SocketAddr,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        // One retry on a fresh connection if a reused one was closed by the server.
        for attempt in 0..2 {
            if !self.conns.contains_key(&server) {
                let conn = self.connect(server, info).await?;
                self.conns.insert(server, conn);
            }
            let conn = self.conns.get_mut(&server).expect("inserted above");
            let result = match conn {
                Conn::Tcp(s) => framed_exchange(s, wire).await,
                Conn::Tls(s) => {
                    let session = s.get_ref().1;
                    info.tls_group = Some(group_name(session));
                    info.tls_cipher = Some(cipher_name(session));
                    framed_exchange(s.as_mut(), wire).await
                }
                Conn::H2(..) => unreachable!("HTTP/2 connections are used by doh_exchange"),
            };
            match result {
                Ok(a) => return Ok(a),
                Err(e) if attempt == 0 && !info.new_connection => {
                    tracing::debug!(%server, error = %e, "reused connection failed; reconnecting");
                    self.conns.remove(&server);
                }
                Err(e) => {
                    self.conns.remove(&server);
                    return Err(e);
                }
            }
        }
        unreachable!("the loop returns on the second attempt")
    }

    async fn doh_exchange(
        &mut self,
        server: SocketAddr,
        wire: &[u8],
        info: &mut ExchangeInfo,
    ) -> Result<Vec<u8>, TransportError> {
        if !matches!(self.conns.get(&server), Some(Conn::H2(s, ..)) if s.is_ready()) {
            let conn = self.connect(server, info).await?;
            self.conns.insert(server, conn);
        }
        let Some(Conn::H2(send, group, cipher)) = self.conns.get_mut(&server) else {
            unreachable!("inserted above")
        };
        info.tls_group = Some(group.clone());
        info.tls_cipher = Some(cipher.clone());
        let authority = self
            .tls_options
            .server_name
            .clone()
            .unwrap_or_else(|| server.to_string());
        let request = http::Request::post(format!("https://{authority}/dns-query"))
            .header("content-type", "application/dns-message")
            .header("accept", "application/dns-message")
            .body(Full::new(Bytes::copy_from_slice(wire)))
            .map_err(|e| TransportError::Http(e.to_string()))?;
        send.ready()
            .await
            .map_err(|e| TransportError::Http(e.to_string()))?;
        let response = send
            .send_request(request)
            .await
            .map_err(|e| TransportError::Http(e.to_string()))?;
        if response.status() != http::StatusCode::OK {
            return Err(TransportError::Http(format!(
                "status {}",
                response.status()
            )));
        }
        let body = Limited::new(response.into_body(), MAX_MESSAGE)
            .collect()
            .await
            .map_err(|e| TransportError::Http(e.to_string()))?;
        Ok(body.to_bytes().to_vec())
    }
}

fn group_name(session: &rustls::ClientConnection) -> String {
    session
        .negotiated_key_exchange_group()
        .map_or("none".into(), |g| format!("{:?}", g.name()))
}

fn cipher_name(session: &rustls::ClientConnection) -> String {
    session
        .negotiated_cipher_suite()
        .map_or("none".into(), |c| format!("{:?}", c.suite()))
}

/// A UDP socket connected to `server` (the kernel then drops datagrams from other addresses).
pub(crate) async fn udp_socket(server: SocketAddr) -> Result<UdpSocket, TransportError> {
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("valid literal");
    let socket = UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    Ok(socket)
}

async fn udp_exchange(server: SocketAddr, wire: &[u8]) -> Result<Vec<u8>, TransportError> {
    let socket = udp_socket(server).await?;
    socket.send(wire).await?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    // Ignore datagrams whose ID does not match (RFC 5452 §9.1); the timeout bounds the loop.
    loop {
        let n = socket.recv(&mut buf).await?;
        if n >= 2 && buf[..2] == wire[..2] {
            buf.truncate(n);
            return Ok(buf);
        }
    }
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
/// ALPN `alpn`; certificates checked against `opts.ca_file`, else the system store, unless
/// `opts.insecure`.
///
/// # Errors
/// [`TransportError::TlsSetup`] for an unreadable CA file or one without certificates (naming
/// the file), an unusable system store, or an empty group list.
pub fn tls_config(
    opts: &TlsOptions,
    alpn: &[u8],
) -> Result<Arc<rustls::ClientConfig>, TransportError> {
    let roots = match (&opts.ca_file, opts.insecure) {
        (_, true) => Roots::DangerAcceptAnyCertificate,
        (Some(path), false) => Roots::CaFile(path.clone()),
        (None, false) => Roots::System,
    };
    let mut client = ClientOptions::new(roots).with_alpn(alpn);
    client.pq_only = opts.pq_only;
    client_config(&client).map_err(|e| TransportError::TlsSetup(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ca_file: Some(empty),
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

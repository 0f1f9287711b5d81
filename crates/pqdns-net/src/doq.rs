//! DNS over dedicated QUIC connections (RFC 9250) with quinn and the server's rustls
//! configuration (so the same key exchange policy and certificate as DoT and DoH: X25519MLKEM768
//! preferred, ML-DSA certificates possible), ALPN "doq" (RFC 9250 §4.1.1).
//!
//! Each query comes on its own client-initiated bidirectional stream as a 2-byte length and
//! the message (RFC 9250 §4.2), and the response goes back the same way before the stream is
//! finished. A query whose message ID is not 0 (§4.2.1), or a stream that does not hold
//! exactly one length-prefixed message, closes the connection with DOQ_PROTOCOL_ERROR (§4.3).
//! 0-RTT is off (rustls accepts no early data), so a query cannot be replayed (§4.5). Bounds:
//! the connection caps of the TCP listeners (when they are reached, the connection idle
//! longest — no stream in progress — is closed with DOQ_NO_ERROR for the new one, see
//! [`crate::limit`]; if none is idle, a refused connection is reported as
//! [`Event::ConnectionRefused`]), the idle timeout as QUIC's idle timeout and as the limit on
//! reading one stream, [`MAX_STREAMS`] concurrent streams per connection, and no
//! unidirectional streams. Zone transfers over QUIC (RFC 9250 §4.2 XoQ) are not served: the
//! service is asked as for DoH.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::{Connection, Endpoint, Incoming, RecvStream, SendStream, VarInt};
use tokio::sync::watch;
use tokio::time::timeout;
use tracing::debug;

use crate::limit::{ConnLimiter, ConnPermit};
use crate::service::{respond_once, Event, HandshakeFailure, Request, Service, Transport};
use crate::tcp::StreamLimits;

/// ALPN protocol id of DNS over QUIC (RFC 9250 §4.1.1).
pub const ALPN_DOQ: &[u8] = b"doq";
/// Concurrent bidirectional streams (queries) a client may open per connection.
pub const MAX_STREAMS: u32 = 100;
/// RFC 9250 §4.3 error codes.
const DOQ_NO_ERROR: u32 = 0x0;
const DOQ_INTERNAL_ERROR: u32 = 0x1;
const DOQ_PROTOCOL_ERROR: u32 = 0x2;
/// Largest stream one message may take, either way: the length prefix and a 65535-byte
/// message.
const MAX_QUERY_STREAM: usize = 2 + 65_535;

/// `count` QUIC endpoints (at least one) on `addr` serving DoQ with `tls` (a TLS 1.3
/// configuration whose ALPN is [`ALPN_DOQ`]), idle connections closed after `idle`. Their
/// sockets come from [`crate::udp::bind`]: the UDP listeners' receive buffer, so a burst of
/// handshakes is not dropped, and with more than one, `SO_REUSEPORT` on one port. A client's
/// datagrams then always reach the endpoint that knows its connection as long as its address
/// and port stay the same, so connection migration (RFC 9000 §9) is refused when `count` > 1.
///
/// # Errors
/// The operating system's error from binding, or an `InvalidInput` error if `tls` cannot do
/// QUIC (no TLS 1.3 or no TLS_AES_128_GCM_SHA256 cipher suite).
pub(crate) fn bind(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    idle: Duration,
    count: usize,
) -> std::io::Result<Vec<Endpoint>> {
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.migration(count <= 1);
    let transport = Arc::get_mut(&mut config.transport).expect("a fresh transport config");
    transport
        .max_idle_timeout(idle.try_into().ok())
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .mtu_discovery_config(None);
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("DoQ needs a tokio runtime"))?;
    crate::udp::bind(addr, count)?
        .into_iter()
        .map(|socket| {
            // quinn makes the socket non-blocking, so the receive timeout udp::bind sets for
            // its serving threads has no effect here.
            Endpoint::new(
                quinn::EndpointConfig::default(),
                Some(config.clone()),
                socket,
                Arc::clone(&runtime),
            )
        })
        .collect()
}

/// Accepts DoQ connections on `endpoint` until `shutdown` turns true, then closes them all
/// (DOQ_NO_ERROR) and waits for their close to be sent, at most `limits.idle`.
pub(crate) async fn serve<S: Service>(
    endpoint: Endpoint,
    service: Arc<S>,
    limiter: Arc<ConnLimiter>,
    limits: StreamLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(i) => i,
                None => break,
            },
            _ = shutdown.changed() => break,
        };
        let client = incoming.remote_address();
        let Some(permit) = limiter.admit(client.ip()) else {
            incoming.refuse();
            service.event(&Event::ConnectionRefused {
                transport: Transport::Doq,
                client,
            });
            continue;
        };
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            if let Some(conn) = handshake(incoming, client, &*service, limits).await {
                serve_connection(conn, client, service, limits, Arc::new(permit)).await;
            }
        });
    }
    endpoint.close(VarInt::from_u32(DOQ_NO_ERROR), b"shutting down");
    let _ = timeout(limits.idle, endpoint.wait_idle()).await;
}

/// The QUIC handshake of `incoming`, bounded by the idle timeout and reported to `service` as
/// for DoT.
async fn handshake<S: Service>(
    incoming: Incoming,
    client: SocketAddr,
    service: &S,
    limits: StreamLimits,
) -> Option<Connection> {
    let transport = Transport::Doq;
    let (reason, error) = match incoming.accept() {
        Ok(connecting) => match timeout(limits.idle, connecting).await {
            Ok(Ok(conn)) => {
                let group = negotiated_group(&conn);
                service.event(&Event::Handshake {
                    transport,
                    client,
                    group,
                });
                debug!(peer = %client, ?group, "doq handshake done");
                return Some(conn);
            }
            Ok(Err(e)) => (failure_of(&e), e.to_string()),
            Err(_) => (HandshakeFailure::Timeout, "timed out".to_string()),
        },
        // quinn reads the ClientHello when accepting: a refused one fails here.
        Err(e) => (failure_of(&e), e.to_string()),
    };
    service.event(&Event::HandshakeFailed {
        transport,
        client,
        reason,
    });
    debug!(peer = %client, reason = reason.name(), %error, "doq handshake failed");
    None
}

/// The smallest UDP payload of a datagram carrying a client's Initial packet, bytes
/// (RFC 9000 §14.1), and quinn's default datagram size.
pub const MIN_DATAGRAM: u16 = 1200;

/// A DoQ client configuration over `tls` (a TLS 1.3 client configuration whose ALPN is
/// [`ALPN_DOQ`]), for the resolver and the load generator, sending datagrams of
/// `datagram_size` bytes of UDP payload (at least [`MIN_DATAGRAM`]; the path must carry them,
/// since quinn never goes below it).
///
/// Initial datagrams are padded to that size, and before the client's address is validated a
/// server may send only three times the bytes it received (RFC 9000 §8.1). With a hybrid
/// key share the ClientHello fills two Initial datagrams: at 1200 bytes they allow 7.2 kB,
/// less than the first flight of a server with an ML-DSA-44 certificate (about 7.8 kB), which
/// then waits a round trip for the client's ACK; at 1452 bytes (Ethernet's 1500 minus IPv6
/// and UDP headers) they allow 8.7 kB and the flight fits.
///
/// Path-MTU discovery (RFC 9000 §14.3) is off on both sides: DNS messages fit in a datagram
/// or take a few, while the probes cost each short-lived connection about as many bytes again.
///
/// # Errors
/// A message if `tls` cannot do QUIC (no TLS 1.3 or no TLS_AES_128_GCM_SHA256 cipher suite).
pub fn client_config(
    tls: Arc<rustls::ClientConfig>,
    datagram_size: u16,
) -> Result<quinn::ClientConfig, String> {
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| format!("QUIC: {e}"))?;
    let size = datagram_size.max(MIN_DATAGRAM);
    let mut transport = quinn::TransportConfig::default();
    transport
        .mtu_discovery_config(None)
        .initial_mtu(size)
        .min_mtu(size);
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Why a DoQ query on a client connection failed ([`query`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The query is longer than the 2-byte length prefix can say (65535 bytes).
    #[error("query over 65535 bytes")]
    TooLong,
    /// The connection or stream failed (closed, reset, timed out by QUIC).
    #[error("QUIC: {0}")]
    Quic(String),
    /// The server's side of the stream is not one length-prefixed message.
    #[error("DoQ stream is not one length-prefixed message (RFC 9250 §4.2)")]
    NotOneMessage,
}

/// Sends the DNS message `wire` (its ID must be 0, RFC 9250 §4.2.1) on a new bidirectional
/// stream of the client connection `conn`, as a 2-byte length and the message, finishes the
/// stream, and returns the message the server sends before finishing its side (RFC 9250
/// §4.2), at most 65535 bytes.
///
/// # Errors
/// [`QueryError`].
pub async fn query(conn: &Connection, wire: &[u8]) -> Result<Vec<u8>, QueryError> {
    let len = u16::try_from(wire.len()).map_err(|_| QueryError::TooLong)?;
    let quic = |e: &dyn std::fmt::Display| QueryError::Quic(e.to_string());
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| quic(&e))?;
    let mut out = Vec::with_capacity(wire.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(wire);
    send.write_all(&out).await.map_err(|e| quic(&e))?;
    send.finish().map_err(|e| quic(&e))?;
    let stream = recv
        .read_to_end(MAX_QUERY_STREAM)
        .await
        .map_err(|e| quic(&e))?;
    match stream.split_first_chunk::<2>() {
        Some((len, answer)) if usize::from(u16::from_be_bytes(*len)) == answer.len() => {
            Ok(answer.to_vec())
        }
        _ => Err(QueryError::NotOneMessage),
    }
}

/// The key exchange group `conn`'s handshake negotiated.
pub fn negotiated_group(conn: &Connection) -> Option<rustls::NamedGroup> {
    conn.handshake_data()?
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()
        .map(|h| h.negotiated_key_exchange_group)
}

/// The reason of a failed QUIC handshake: quinn carries the rustls error only as text in the
/// CONNECTION_CLOSE reason (a TLS alert code, RFC 9001 §4.8).
fn failure_of(error: &quinn::ConnectionError) -> HandshakeFailure {
    let text = error.to_string();
    if text.contains("NoKxGroupsInCommon") {
        HandshakeFailure::NoSharedGroup
    } else if text.contains("NoSignatureSchemesInCommon") {
        HandshakeFailure::NoSharedSignatureScheme
    } else if matches!(error, quinn::ConnectionError::TimedOut) {
        HandshakeFailure::Timeout
    } else {
        HandshakeFailure::Other
    }
}

/// Answers every stream `conn` opens until it closes (idle timeout, client close, protocol
/// error, or eviction while no stream is in progress: `permit`).
async fn serve_connection<S: Service>(
    conn: Connection,
    client: SocketAddr,
    service: Arc<S>,
    limits: StreamLimits,
    permit: Arc<ConnPermit>,
) {
    loop {
        let (send, recv) = tokio::select! {
            stream = conn.accept_bi() => match stream {
                Ok(s) => s,
                Err(_) => break,
            },
            () = permit.evicted() => {
                debug!(peer = %client, "idle DoQ connection evicted for a new one");
                conn.close(VarInt::from_u32(DOQ_NO_ERROR), b"idle");
                break;
            }
        };
        // A stream that comes as the connection is evicted is still answered, if the
        // close lets it.
        let busy = permit.busy();
        let (conn, service) = (conn.clone(), Arc::clone(&service));
        tokio::spawn(async move {
            if let Err(code) = answer_stream(send, recv, client, &service, limits).await {
                conn.close(VarInt::from_u32(code), b"");
            }
            drop(busy);
        });
    }
}

/// Reads one query from a stream and writes its response; `Err` with the DoQ error code the
/// connection must be closed with.
async fn answer_stream<S: Service>(
    mut send: SendStream,
    mut recv: RecvStream,
    client: SocketAddr,
    service: &Arc<S>,
    limits: StreamLimits,
) -> Result<(), u32> {
    let stream = match timeout(limits.idle, recv.read_to_end(MAX_QUERY_STREAM)).await {
        Ok(Ok(s)) => s,
        // A client that resets its stream or goes away cancelled the query.
        Ok(Err(_)) | Err(_) => return Ok(()),
    };
    let message = match stream.split_first_chunk::<2>() {
        Some((len, m)) if usize::from(u16::from_be_bytes(*len)) == m.len() => m,
        _ => return Err(DOQ_PROTOCOL_ERROR),
    };
    if message.len() < 2 || message[..2] != [0, 0] {
        return Err(DOQ_PROTOCOL_ERROR);
    }
    let request = Request::new(message, client, Transport::Doq);
    // A transfer is refused like a deferred answer that never came: the stream is reset with
    // an error (RFC 9250 §4.2 allows transfers over DoQ; no service here sends one).
    let Ok((mut out, info)) = respond_once(service, &request, vec![0, 0], 2, limits.deferred).await
    else {
        return Err(DOQ_INTERNAL_ERROR);
    };
    let Ok(len) = u16::try_from(info.len) else {
        return Err(DOQ_INTERNAL_ERROR);
    };
    if len == 0 || out.len() < 2 + info.len {
        // Not DNS: nothing sensible to answer on this stream.
        return Err(DOQ_PROTOCOL_ERROR);
    }
    out[..2].copy_from_slice(&len.to_be_bytes());
    out.truncate(2 + info.len);
    let write = async {
        send.write_all(&out).await.ok()?;
        send.finish().ok()
    };
    let _ = timeout(limits.idle, write).await;
    Ok(())
}

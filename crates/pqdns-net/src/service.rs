//! The contract between the listeners and whatever answers queries: the [`Service`] trait.
//!
//! A listener reads a DNS message (a UDP datagram, a length-framed message on TCP or DoT
//! (RFC 1035 §4.2.2), the body or `dns` parameter of a DoH request (RFC 8484 §4.1)), hands it to
//! [`Service::respond`] with the client's address and the [`Transport`], and sends what the
//! service wrote. The service answers in one of three ways ([`Reply`]):
//!
//! - **now** ([`Reply::Ready`]): the response is in the caller's buffer. This is the fast path
//!   of an authoritative server answering from memory and of a resolver's cache hit; on UDP it
//!   runs on the receiving thread between `recvmmsg` and `sendmmsg`, so it must not block and
//!   should not allocate.
//! - **later** ([`Reply::Defer`]): the listener calls [`Service::respond_later`] with an owned
//!   copy of the request and what the service kept of it ([`Service::Deferred`], e.g. the
//!   query as it parsed it, so it is not parsed again), and sends the response when the future
//!   completes (a resolver's cache miss). UDP hands the query to the tokio runtime and sends the answer from the task through
//!   the same socket; TCP and DoT keep reading and answering other queries meanwhile and write
//!   each answer when it is ready, possibly out of order (RFC 7766 §6.2.1.1, §7); DoH awaits it
//!   in the HTTP request's task. The listener bounds how many are in flight and how long each
//!   may take ([`crate::ListenConfig`]).
//! - **as several messages** ([`Reply::Transfer`]): a zone transfer (AXFR, RFC 5936 §2.2; IXFR,
//!   RFC 1995) is written message by message from a [`Transfer`] on TCP and DoT; on UDP each
//!   message is a datagram of its own, paced (pushed fragments of a large answer; see
//!   [`crate::PACE_BURST`]); DoH and DoQ send nothing for it (the service should not return it there).
//!
//! [`Service::snapshot`] is taken once per UDP batch (up to 32 datagrams) and once per stream
//! message, so a service whose data is swapped on reload (e.g. a zone catalog behind a lock)
//! pays for that lock once per batch, and every query of a batch sees one version.
//!
//! Transport events that are not queries (TLS handshakes, refused connections, HTTP/2 stream
//! reset floods) are reported through [`Service::event`], e.g. for metrics.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// The transport a query arrived on, or a client sends on. One enum for the listeners, the
/// server's and the resolver's pipelines, metrics and dnstap; it is exhaustive on purpose, so
/// a new transport makes every `match` over it decide what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// UDP (RFC 1035 §4.2.1): responses are limited by EDNS (RFC 6891) and may be truncated.
    Udp,
    /// TCP (RFC 7766): up to 65535 bytes per message.
    Tcp,
    /// DNS over TLS (RFC 7858).
    Dot,
    /// DNS over HTTPS (RFC 8484).
    Doh,
    /// DNS over dedicated QUIC connections (RFC 9250).
    Doq,
}

impl Transport {
    /// Every transport, in the order of [`Transport::index`].
    pub const ALL: [Transport; 5] = [
        Transport::Udp,
        Transport::Tcp,
        Transport::Dot,
        Transport::Doh,
        Transport::Doq,
    ];

    /// The transport's position in [`Transport::ALL`] (0 to 4), for per-transport counter
    /// arrays such as metrics.
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for the stream transports (TCP, DoT, DoH, DoQ): messages up to 65535 bytes, no
    /// truncation.
    pub fn is_stream(self) -> bool {
        self != Transport::Udp
    }

    /// True if the transport is encrypted and authenticated by TLS (DoT, DoH, DoQ).
    pub fn is_encrypted(self) -> bool {
        matches!(self, Transport::Dot | Transport::Doh | Transport::Doq)
    }

    /// Lower-case name: `udp`, `tcp`, `dot`, `doh`, `doq` (for logs and metric labels).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Dot => "dot",
            Transport::Doh => "doh",
            Transport::Doq => "doq",
        }
    }
}

/// One query as a listener received it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Request<'a> {
    /// The DNS message in wire format, without TCP length prefix or HTTP framing, unchecked:
    /// anything from the network is hostile until parsed.
    pub message: &'a [u8],
    /// The client's address and port (the TCP peer for stream transports).
    pub client: SocketAddr,
    /// What the query came over.
    pub transport: Transport,
}

impl<'a> Request<'a> {
    /// A request of `message` from `client` over `transport` (listeners make these; services
    /// may, in tests).
    pub fn new(message: &'a [u8], client: SocketAddr, transport: Transport) -> Request<'a> {
        Request {
            message,
            client,
            transport,
        }
    }

    /// An owned copy, for [`Service::respond_later`].
    pub fn to_owned(&self) -> OwnedRequest {
        OwnedRequest {
            message: self.message.to_vec(),
            client: self.client,
            transport: self.transport,
        }
    }
}

/// A [`Request`] that owns its message, handed to [`Service::respond_later`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OwnedRequest {
    /// The DNS message in wire format (see [`Request::message`]).
    pub message: Vec<u8>,
    /// The client's address and port.
    pub client: SocketAddr,
    /// What the query came over.
    pub transport: Transport,
}

impl OwnedRequest {
    /// The borrowed view.
    pub fn as_request(&self) -> Request<'_> {
        Request::new(&self.message, self.client, self.transport)
    }
}

/// What a service wrote for one query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseInfo {
    /// Length in bytes of the DNS response written at `out[base..]`. 0 means send nothing: UDP
    /// drops the query, TCP and DoT close the connection (a message that is not DNS leaves the
    /// stream unusable), DoH answers 400.
    pub len: usize,
    /// Seconds the response may be cached by HTTP caches (RFC 8484 §5.1: the smallest TTL in
    /// the answer, or for negative answers in the authority section); DoH only.
    pub cache_ttl: Option<u32>,
    /// True if the request was not an acceptable DNS query (the response, if any, is FORMERR):
    /// DoH answers 400 instead of sending the response (RFC 8484 §4.2.1).
    pub malformed: bool,
}

impl ResponseInfo {
    /// A response of `len` bytes.
    pub fn new(len: usize) -> ResponseInfo {
        ResponseInfo {
            len,
            ..ResponseInfo::default()
        }
    }

    /// Sets [`ResponseInfo::cache_ttl`] (seconds).
    pub fn with_cache_ttl(mut self, ttl: Option<u32>) -> ResponseInfo {
        self.cache_ttl = ttl;
        self
    }

    /// Marks the request malformed ([`ResponseInfo::malformed`]).
    pub fn with_malformed(mut self, malformed: bool) -> ResponseInfo {
        self.malformed = malformed;
        self
    }
}

/// How a service answers a query; see the module documentation. `T` is the service's
/// [`Service::Transfer`], `D` its [`Service::Deferred`] (`()` for services that never defer).
#[derive(Debug)]
#[non_exhaustive]
pub enum Reply<T, D = ()> {
    /// The response is written at `out[base..base + len]`.
    Ready(ResponseInfo),
    /// Not answered yet: the listener calls [`Service::respond_later`] with this state (what
    /// [`Service::respond`] already found out about the request, e.g. the parsed query).
    Defer(D),
    /// Several messages, written one by one: a zone transfer on TCP and DoT, datagrams on
    /// UDP; DoH and DoQ send nothing.
    Transfer(T),
}

/// A response of several messages: a zone transfer (RFC 5936 §2.2), or datagrams sent together
/// over UDP.
pub trait Transfer: Send + 'static {
    /// Writes the next message at `out[base..]` (`out` is truncated to `base` first) and
    /// returns its length in bytes (at most 65535), or `None` when there is none left.
    fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize>;

    /// Called once when the listener stops sending, with the reason.
    fn end(&mut self, end: TransferEnd);
}

/// Why a [`Transfer`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransferEnd {
    /// Every message was written and flushed.
    Complete,
    /// A write failed or timed out: the client does not read, or went away.
    WriteFailed,
    /// The server is shutting down.
    Shutdown,
    /// Not sent: the transport carries one message per request (DoH, DoQ) and answered the
    /// client with an error instead.
    Unsupported,
}

/// The [`Service::Transfer`] of services that never answer with several messages.
#[derive(Debug)]
pub enum NoTransfer {}

impl Transfer for NoTransfer {
    fn next_message(&mut self, _out: &mut Vec<u8>, _base: usize) -> Option<usize> {
        match *self {}
    }
    fn end(&mut self, _end: TransferEnd) {
        match *self {}
    }
}

/// Why a transport that carries one message per request (DoH, DoQ) has no response to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// A deferred answer did not complete within the deadline.
    Timeout,
    /// The service answered with several messages ([`Reply::Transfer`]), which this transport
    /// does not carry: refused with an error, never dropped silently.
    Transfer,
}

/// The response to `request` from `service`, now or, if it defers, when it completes within
/// `deadline`. `out` holds the `base` bytes the caller owns.
///
/// # Errors
/// [`Unanswered`]: the deadline passed, or the answer was a transfer (ended with
/// [`TransferEnd::Unsupported`]).
pub(crate) async fn respond_once<S: Service>(
    service: &Arc<S>,
    request: &Request<'_>,
    mut out: Vec<u8>,
    base: usize,
    deadline: std::time::Duration,
) -> Result<(Vec<u8>, ResponseInfo), Unanswered> {
    // The snapshot is not held across an await (it need not be Send).
    let reply = service.respond(&service.snapshot(), request, &mut out, base);
    match reply {
        Reply::Ready(info) => Ok((out, info)),
        Reply::Defer(deferred) => {
            let later = Arc::clone(service).respond_later(request.to_owned(), deferred, out, base);
            tokio::time::timeout(deadline, later)
                .await
                .map_err(|_| Unanswered::Timeout)
        }
        Reply::Transfer(mut xfr) => {
            xfr.end(TransferEnd::Unsupported);
            Err(Unanswered::Transfer)
        }
    }
}

/// Why a TLS handshake failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// No key exchange group in common: under the `pq-only` and `pq-strict` policies, a client
    /// that offers only classical groups (X25519, P-256, …).
    NoSharedGroup,
    /// The client accepts no signature scheme the server's certificate key can make: e.g. a
    /// client without ML-DSA (Go's crypto/tls, GnuTLS 3.7) against an ML-DSA certificate.
    NoSharedSignatureScheme,
    /// Not completed within the idle timeout.
    Timeout,
    /// Any other failure (protocol version, a closed connection, a malformed ClientHello, …).
    Other,
}

impl HandshakeFailure {
    /// All reasons, in the order of [`HandshakeFailure::name`]'s table.
    pub const ALL: [HandshakeFailure; 4] = [
        HandshakeFailure::NoSharedGroup,
        HandshakeFailure::NoSharedSignatureScheme,
        HandshakeFailure::Timeout,
        HandshakeFailure::Other,
    ];

    /// A short label (`no-shared-group`, `no-shared-signature-scheme`, `timeout`, `other`), as
    /// used in metrics.
    pub fn name(self) -> &'static str {
        [
            "no-shared-group",
            "no-shared-signature-scheme",
            "timeout",
            "other",
        ][self as usize]
    }

    /// The reason behind a TLS error from rustls (wrapped in an I/O error by tokio-rustls).
    pub fn of(error: &std::io::Error) -> HandshakeFailure {
        use rustls::PeerIncompatible as P;
        match error
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
        {
            Some(rustls::Error::PeerIncompatible(P::NoKxGroupsInCommon)) => {
                HandshakeFailure::NoSharedGroup
            }
            Some(rustls::Error::PeerIncompatible(P::NoSignatureSchemesInCommon)) => {
                HandshakeFailure::NoSharedSignatureScheme
            }
            _ => HandshakeFailure::Other,
        }
    }
}

/// Something a listener observed besides queries, for metrics and logs.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event {
    /// A TLS handshake completed.
    #[non_exhaustive]
    Handshake {
        /// DoT, DoH or DoQ.
        transport: Transport,
        /// The client.
        client: SocketAddr,
        /// The negotiated key exchange group (IANA TLS Supported Groups), if any.
        group: Option<rustls::NamedGroup>,
    },
    /// A TLS handshake failed or timed out.
    #[non_exhaustive]
    HandshakeFailed {
        /// DoT, DoH or DoQ.
        transport: Transport,
        /// The client.
        client: SocketAddr,
        /// Why.
        reason: HandshakeFailure,
    },
    /// A connection was closed at once because a connection cap was reached (RFC 7766
    /// §6.2.2).
    #[non_exhaustive]
    ConnectionRefused {
        /// TCP, DoT, DoH or DoQ.
        transport: Transport,
        /// The client.
        client: SocketAddr,
    },
    /// An HTTP/2 connection was closed because the client reset too many streams (the "rapid
    /// reset" attack, CVE-2023-44487; h2 answers GOAWAY ENHANCE_YOUR_CALM).
    #[non_exhaustive]
    ResetFlood {
        /// The client.
        client: SocketAddr,
    },
}

/// What answers queries for the listeners; see the module documentation.
pub trait Service: Send + Sync + 'static {
    /// State taken once per UDP batch and per stream message and passed to
    /// [`Service::respond`] (e.g. the zone catalog in force); `()` if there is none.
    type Snapshot;
    /// The multi-message responses of this service; [`NoTransfer`] if it has none.
    type Transfer: Transfer;
    /// What [`Service::respond`] hands to [`Service::respond_later`] with a deferred request
    /// ([`Reply::Defer`]), so the work done on it (parsing, checks) is not done again; `()`
    /// for services that never defer.
    type Deferred: Send + 'static;

    /// The current snapshot.
    fn snapshot(&self) -> Self::Snapshot;

    /// Answers `request` now, writing the response at `out[base..]` (`out` holds `base` bytes
    /// the listener owns, e.g. the TCP length prefix; leave them alone), or defers it, or starts
    /// a transfer. Called on UDP serving threads and in async tasks: must not block.
    fn respond(
        &self,
        snapshot: &Self::Snapshot,
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<Self::Transfer, Self::Deferred>;

    /// Answers a request [`Service::respond`] deferred, with the `deferred` state it returned
    /// in [`Reply::Defer`]: writes the response at `out[base..]` (`out` holds the `base` bytes
    /// the listener owns) and returns the buffer with what was written. The listener gives up
    /// on it after [`crate::ListenConfig::deferred_timeout`] and sends nothing then. The
    /// default sends nothing, for services that never defer.
    fn respond_later(
        self: Arc<Self>,
        request: OwnedRequest,
        deferred: Self::Deferred,
        out: Vec<u8>,
        base: usize,
    ) -> impl Future<Output = (Vec<u8>, ResponseInfo)> + Send + 'static {
        let _ = (request, deferred, base);
        async move { (out, ResponseInfo::default()) }
    }

    /// Observes a transport event; the default ignores it.
    fn event(&self, event: &Event) {
        let _ = event;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A transfer that records how it ended.
    struct Recorded(Arc<Mutex<Option<TransferEnd>>>);

    impl Transfer for Recorded {
        fn next_message(&mut self, _out: &mut Vec<u8>, _base: usize) -> Option<usize> {
            None
        }
        fn end(&mut self, end: TransferEnd) {
            *self.0.lock().unwrap() = Some(end);
        }
    }

    /// A service that answers every request with a transfer.
    struct Transfers(Arc<Mutex<Option<TransferEnd>>>);

    impl Service for Transfers {
        type Snapshot = ();
        type Transfer = Recorded;
        type Deferred = ();

        fn snapshot(&self) {}

        fn respond(&self, _: &(), _: &Request<'_>, _: &mut Vec<u8>, _: usize) -> Reply<Recorded> {
            Reply::Transfer(Recorded(Arc::clone(&self.0)))
        }
    }

    #[tokio::test]
    async fn a_transfer_on_a_one_message_transport_is_refused_not_dropped() {
        let ended = Arc::new(Mutex::new(None));
        let service = Arc::new(Transfers(Arc::clone(&ended)));
        let request = Request::new(&[0; 12], "127.0.0.1:5300".parse().unwrap(), Transport::Doh);
        let deadline = std::time::Duration::from_secs(1);
        let result = respond_once(&service, &request, Vec::new(), 0, deadline).await;
        assert_eq!(result.err(), Some(Unanswered::Transfer));
        assert_eq!(*ended.lock().unwrap(), Some(TransferEnd::Unsupported));
    }
}

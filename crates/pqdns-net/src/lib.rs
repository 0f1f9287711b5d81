//! pqdns-net: DNS transports shared by the authoritative server (pqdns-server) and the
//! resolver service: UDP, TCP (RFC 7766), DNS over TLS (RFC 7858), DNS over HTTPS (RFC 8484)
//! and DNS over QUIC (RFC 9250, quinn) listeners, and TLS configuration with hybrid X25519MLKEM768 key exchange for
//! servers ([`tls`]) and clients ([`tls_client`]). No zone or resolution logic lives here.
//!
//! # Design
//! Listeners are generic over a [`Service`] (see [`service`] for the contract): the listener
//! owns sockets, framing, TLS, HTTP, connection caps and timeouts; the service turns a request
//! (message bytes, client address, [`Transport`]) into a response written into the listener's
//! buffer. A service can answer
//! - **synchronously** ([`Reply::Ready`]), which is the hot path: UDP runs on blocking threads
//!   that read and send batches with `recvmmsg`/`sendmmsg` and allocate nothing per query, and
//!   the service's [`Service::snapshot`] is taken once per batch;
//! - **later** ([`Reply::Defer`] then [`Service::respond_later`]), for a resolver's cache
//!   misses: UDP hands the query to the runtime and sends the answer from the task; TCP and DoT
//!   keep serving the connection and write answers as they complete (RFC 7766 pipelining with
//!   out-of-order responses); DoH awaits it in the request's task;
//! - **with several messages** ([`Reply::Transfer`]), for zone transfers on TCP and DoT, and
//!   for datagrams pushed together over UDP (all fragments of a large answer, paced by
//!   [`PACE_BURST`] and [`PACE_GAP`], at most [`MAX_REPLY_DATAGRAMS`]).
//!
//! UDP-only post-processing (e.g. fragmenting large answers) and per-client policy belong to
//! the service, which sees the transport and the client address of every request. Transport
//! events (TLS handshakes and their key exchange group, refused connections, HTTP/2 reset
//! floods) reach [`Service::event`].
//!
//! [`Listeners::bind`] starts every listener of a [`ListenConfig`] for one service and returns a
//! handle for TLS certificate reload, changing the listeners while serving
//! ([`listen_change`]: [`Listeners::prepare`], [`Listeners::apply`]) and graceful shutdown; [`ConnLimiter`], [`accept_loop`] and
//! [`listen_tcp`] are public for other TCP endpoints of a program (e.g. a metrics listener).
//!
//! # Running as a daemon
//! [`privilege`] drops root once the listeners are bound, [`systemd`] speaks the `Type=notify`
//! protocol (readiness, reload, stop, watchdog); with the feature `cli`, `logging` writes
//! text lines fit for terminals and the journal, or JSON, and `manual` prints a daemon's man
//! page and shell completions.
//!
//! # Bounds
//! Stream connections are capped per listener in total and per client address
//! ([`ConnLimiter`], RFC 7766 §6.2.2) and closed after the idle timeout (§6.2.3) — DoH included,
//! whatever the HTTP version — or sooner when a listener is full and a new client comes: the
//! connection idle longest gives way; TCP listen backlogs are [`LISTEN_BACKLOG`]; deferred queries are
//! capped per UDP socket ([`ListenConfig::max_deferred`]) and per stream connection
//! ([`MAX_DEFERRED_PER_CONNECTION`]) and time out ([`ListenConfig::deferred_timeout`]).

#![forbid(unsafe_code)]

pub mod acl;
pub mod cookie;
pub mod dnstap;
mod doh;
mod doq;
mod dot;
mod limit;
pub mod listen_change;
mod listeners;
#[cfg(feature = "cli")]
pub mod logging;
#[cfg(feature = "cli")]
pub mod manual;
pub mod metrics_http;
#[cfg(feature = "cli")]
pub mod option_file;
pub mod privilege;
pub mod rrl;
pub mod service;
pub mod systemd;
mod tcp;
pub mod tls;
pub mod tls_client;
mod udp;

pub use doh::{ABUSE_LOG_INTERVAL, CLOSE_GRACE, DNS_MESSAGE, MAX_H2_STREAMS, MAX_REQUEST};
pub use doq::{
    client_config as doq_client_config, negotiated_group, query as doq_query, QueryError, ALPN_DOQ,
    MAX_STREAMS, MIN_DATAGRAM as DOQ_MIN_DATAGRAM,
};
pub use limit::{ConnBusy, ConnLimiter, ConnPermit};
pub use listeners::{
    default_doq_endpoints, listen_tcp, BoundAddrs, ListenConfig, ListenError, Listeners, Prepared,
    Stopping, DEFAULT_CLIENT_PREFIX, DEFAULT_DEFERRED_TIMEOUT_SECS, DEFAULT_DOH_PATH,
    DEFAULT_HANDSHAKE_TIMEOUT_SECS, DEFAULT_IDLE_TIMEOUT_SECS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP, DEFAULT_MAX_DEFERRED, DEFAULT_UDP_THREADS, LISTEN_BACKLOG,
    SHUTDOWN_GRACE,
};
pub use service::{
    Event, HandshakeFailure, NoTransfer, OwnedRequest, Reply, Request, ResponseInfo, Service,
    Transfer, TransferEnd, Transport,
};
pub use tcp::{accept_loop, MAX_DEFERRED_PER_CONNECTION};
pub use udp::{
    BATCH, MAX_DATAGRAM, MAX_REPLY_DATAGRAMS, PACE_BURST, PACE_GAP, POLL_INTERVAL, RECV_BUFFER,
};

/// Internals the fuzz targets drive (`fuzz/`), compiled only under `cfg(fuzzing)`, which
/// cargo-fuzz sets: not part of the public API.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::doh::{decode_request, Decoded};
}

/// `tracing` filter directives programs using pqdns-net should add to their log filter
/// (unless the user's filter names the target): h2 logs a WARN line for every HTTP/2
/// connection it closes for a stream reset flood, so a remote client could fill the log;
/// pqdns-net counts those connections ([`Event::ResetFlood`]) and logs a summary instead.
pub const LOG_DIRECTIVES: &[&str] = &["h2=error"];

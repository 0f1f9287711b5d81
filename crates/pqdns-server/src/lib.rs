//! pqdns-server: an authoritative DNS server for zones signed with classical and post-quantum
//! DNSSEC algorithms, over UDP, TCP (RFC 7766), DNS over TLS (RFC 7858) and DNS over HTTPS
//! (RFC 8484), with hybrid X25519MLKEM768 TLS key exchange.
//!
//! The answer engine ([`answer`]) is synchronous and does no I/O: it turns query bytes into
//! response bytes from an in-memory [`catalog::Catalog`]. The listeners (UDP, TCP, DoT, DoH),
//! TLS and connection limits live in the shared crate `pqdns-net`; [`service::Authoritative`]
//! is the server's side of its `Service` trait.
//!
//! As a primary it serves zone transfers ([`axfr`], RFC 5936) over TCP and DoT to an
//! allow-list ([`acl`]), sends NOTIFY ([`notify`], RFC 1996) to secondaries at start and after
//! each reload, and can expose Prometheus counters ([`metrics`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acl;
pub mod answer;
pub mod answer_cache;
pub mod axfr;
pub mod catalog;
pub mod denial;
pub mod fragment;
pub mod harness;
pub mod identity;
pub mod metrics;
pub mod notify;
pub mod query;
pub mod server;
pub mod service;
pub mod settings;
pub mod zones;

pub use server::{BoundAddrs, Server, ServerConfig, ServerError, ServerHandle};

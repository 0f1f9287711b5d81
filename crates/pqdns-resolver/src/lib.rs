//! pqdns-resolver: a validating DNS client library and the `pqdns-resolve` CLI.
//!
//! It validates the chain of trust (RFC 4035 §5) for every algorithm and profile pqdns-core
//! knows — including post-quantum ones that other validators treat as unknown — over UDP, TCP,
//! DNS-over-TLS and DNS-over-HTTPS with hybrid X25519MLKEM768 key exchange. Over UDP it can
//! fetch large answers as ARRF or QBF fragments ([`fragment`]) instead of retrying over TCP.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod anchors;
pub mod cache;
pub mod fragment;
pub mod resolve;
pub mod transport;

pub use anchors::TrustAnchors;
pub use resolve::{Answer, Config, Mode, Resolver};
pub use transport::{Client, TlsOptions, Transport};

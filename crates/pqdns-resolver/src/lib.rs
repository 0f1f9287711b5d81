//! pqdns-resolver: a validating DNS client library and the `pqdns-resolve` CLI.
//!
//! It validates the chain of trust (RFC 4035 §5) for every algorithm and profile pqdns-core
//! knows — including post-quantum ones that other validators treat as unknown — over UDP, TCP,
//! DNS-over-TLS and DNS-over-HTTPS with hybrid X25519MLKEM768 key exchange. Over UDP it can
//! fetch large answers as ARRF or QBF fragments ([`fragment`]) instead of retrying over TCP.
//!
//! What it returns can be trusted by construction: an [`Answer`] holds only the RRsets on the
//! answer chain and the denial proofs, each Secure one a
//! [`pqdns_core::dnssec::validate::VerifiedRRset`] that only the validator makes; whatever
//! else servers sent is dropped and listed, and the raw responses are reachable only through
//! [`Answer::unvalidated_messages`]. Query IDs and source ports come from the OS CSPRNG, and
//! iterative resolution follows referrals in bailiwick only. A [`Resolver`] is shared by
//! tasks (`&self`, `Send` futures) and verifies signatures off the async executor.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod anchors;
pub mod answer;
pub mod cache;
mod flight;
pub mod fragment;
mod iterate;
mod random;
pub mod resolve;
pub mod transport;
mod trust;
mod ttl_map;
mod validate;

pub use anchors::TrustAnchors;
pub use answer::{Answer, AnswerRRset, Dropped, Referral, Section};
pub use resolve::{Config, Mode, ResolveError, Resolver, WorkLimits};
pub use transport::{Client, TlsOptions, Transport};

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
//!
//! ```no_run
//! use std::time::Duration;
//! use pqdns_core::{Name, RrType};
//! use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Trust anchor: the DS pqdns-server wrote for the default zone.
//! let anchors = TrustAnchors::read("keys/example.com.ds".as_ref())?;
//! let mut tls = TlsOptions::default();
//! tls.ca_files = vec!["keys/pqdns-server.crt".into()];
//! let client = Client::new(Transport::Dot, Duration::from_secs(3), tls)?;
//! let mode = Mode::Forward("127.0.0.1:8853".parse()?);
//! let resolver = Resolver::new(Config::new(mode, anchors), client);
//! let qname = Name::parse("www.example.com.", None)?;
//! let answer = tokio::spawn(resolver.resolve(&qname, RrType::A)).await??;
//! if answer.status().is_secure() {
//!     for rrset in answer.answers() {
//!         for record in rrset.records() {
//!             println!("{record}");
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod anchor_update;
pub mod anchors;
pub mod answer;
pub mod cache;
pub mod cookies;
mod doq;
mod flight;
pub mod fragment;
mod infra;
pub mod nta;
pub mod padding;
pub mod policy;
mod random;
pub mod resolve;
pub mod root_hints;
pub mod service;
pub mod transport;
mod ttl_map;

pub use anchors::TrustAnchors;
pub use answer::{Answer, AnswerRRset, Dropped, Referral, Section};
pub use nta::NegativeTrustAnchors;
pub use resolve::{
    Config, Lame, LimitReached, Mode, ResolveError, Resolver, WorkLimits,
    DEFAULT_AGGRESSIVE_NSEC_BYTES, MAX_MINIMISE_COUNT, MINIMISE_ONE_LAB,
};
pub use transport::{Client, ExchangeInfo, TlsOptions, Transport};

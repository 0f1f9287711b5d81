//! pqdns-server: an authoritative DNS server for zones signed with classical and post-quantum
//! DNSSEC algorithms, over UDP, TCP (RFC 7766), DNS over TLS (RFC 7858) and DNS over HTTPS
//! (RFC 8484), with hybrid X25519MLKEM768 TLS key exchange.
//!
//! The answer engine ([`answer`]) is synchronous and does no I/O: it turns query bytes into
//! response bytes from an in-memory [`catalog::Catalog`], replaying prepared answers for
//! questions asked before. The listeners (UDP, TCP, DoT, DoH), TLS and connection limits live
//! in the shared crate `pqdns-net`; [`Server::bind`] puts the two together.
//!
//! As a primary it serves zone transfers (RFC 5936) over TCP and DoT to an allow-list
//! ([`acl`]) of addresses and TSIG keys (RFC 8945, [`settings::Settings::tsig_keys`]), signs
//! the answers to signed requests, sends NOTIFY (RFC 1996) to secondaries at start and after
//! each reload (signed when a key is configured for the target), and can expose Prometheus
//! counters ([`settings::Settings::metrics`]). As a secondary ([`secondary`]) it transfers
//! zones from their primaries ([`transfer_in`]: IXFR, AXFR, TSIG), keeps them fresh by the
//! SOA timers and NOTIFY, and stores the last copy.
//!
//! Zones are added and removed at run time ([`provisioning`]; [`ServerHandle::add_zone`]),
//! also as the members of a catalog zone (RFC 9432, [`catalog_zone`]) it consumes; it can
//! produce a catalog zone of its own zones for its secondaries.
//!
//! The public modules are what an embedder needs: [`zones`] to read and sign zone
//! descriptions, [`catalog`] to hold them, [`settings`] for listeners and limits, [`identity`]
//! for NSID and CH TXT, [`answer`] for the engine alone, [`control`] for the control channel
//! (`pqdns-ctl`; its operations are methods of [`ServerHandle`]). Test helpers (a signed in-memory
//! catalog, response invariants, peer programs) are in the unpublished crate
//! `pqdns-test-support`.
//!
//! ```no_run
//! use pqdns_server::settings::Settings;
//! use pqdns_server::zones::{load_all, ZoneSource};
//! use pqdns_server::{Server, ServerConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let zones = vec![ZoneSource::File("zones/example.toml".into())];
//! let (catalog, _reports) = load_all(&zones, pqdns_core::time::now())?;
//! let mut settings = Settings::new("keys".into());
//! settings.udp = vec!["127.0.0.1:5353".parse()?];
//! let server = Server::bind(ServerConfig::new(zones, settings), catalog).await?;
//! println!("serving on {:?}", server.addrs.udp);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

/// Address allow-lists (moved to pqdns-net, shared with the resolver service).
pub use pqdns_net::acl;
pub mod answer;
mod answer_cache;
mod axfr;
pub mod catalog;
pub mod catalog_zone;
pub mod config_file;
pub mod control;
mod crash_point;
/// DNS cookies (moved to pqdns-net, shared with the resolver service).
pub use pqdns_net::cookie;
mod denial;
mod finish;
mod fragment;
pub mod identity;
pub mod inline_signing;
pub mod journal;
mod journal_file;
pub mod key_lock;
mod metrics;
mod notify;
pub mod online;
pub mod provisioning;
pub mod reconfigure;
mod request;
mod resign;
/// Response-rate limiting (moved to pqdns-net, shared with the resolver service).
pub use pqdns_net::rrl;
pub mod secondary;
pub mod server;
mod service;
pub mod settings;
pub mod transfer_in;
pub mod update;
pub mod xdp;
pub mod zones;

pub use server::{BoundAddrs, Server, ServerConfig, ServerError, ServerHandle};

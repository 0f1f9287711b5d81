//! pqdns-core: DNS names, records and master files, and DNSSEC signing and validation with
//! classical and post-quantum algorithms. No network I/O: everything works on bytes and files,
//! so servers, resolvers and benchmarks build on it.
//!
//! See `ARCHITECTURE.md` at the repository root for how the crates fit together.
//!
//! Sign a zone in memory and verify every signature and the NSEC chain (a longer version with
//! ML-DSA-44 and NSEC3 is `examples/sign_zone.rs`):
//!
//! ```
//! use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
//! use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
//! use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
//! use pqdns_core::dnssec::{Algorithm, Profile, Provider};
//! use pqdns_core::zonefile::ZoneFileReader;
//! use pqdns_core::{Name, Zone};
//!
//! let origin = Name::parse("example.com.", None)?;
//! let text = "@ 3600 SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns1\nns1 3600 A 192.0.2.53\n";
//! let records = ZoneFileReader::new(Some(origin.clone()), None).read_str(text, "example")?;
//! let mut zone = Zone::from_records(origin.clone(), records)?;
//! let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
//! let csk = ZoneKey::generate(&origin, Algorithm::Ed25519, KeyRole::Csk, &profile, &provider, 3600)?;
//! let now = pqdns_core::time::now();
//! let policy = SigningPolicy {
//!     inception: now - 3600,
//!     expiration: now + 86400,
//!     denial: Denial::Nsec,
//!     published_dnskeys: None,
//! };
//! let stats = sign_zone(&mut zone, &[csk], &policy, &|_, _| {})?;
//! let options = VerifyOptions::at(now);
//! let report = verify_zone(&zone, &profile, &provider, &options);
//! assert!(report.failures.is_empty());
//! assert_eq!(report.signatures_valid, stats.signatures);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]

pub mod atomic_file;
pub mod config;
pub mod difference;
pub mod dnssec;
pub mod frag;
pub mod message;
pub mod name;
pub mod rdata;
pub mod rr;
pub mod serial;
pub mod stdout;
pub mod time;
pub mod tsig_keyfile;
pub mod update;
pub mod wire;
pub mod zone;
pub mod zonefile;
pub mod zonemd;

pub use name::Name;
pub use rr::{Class, Record, RrType};
pub use zone::Zone;

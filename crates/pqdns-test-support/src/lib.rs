//! Test support for the pqdns workspace, in a crate of its own (as hickory-dns keeps its
//! `tests/test-support`) so that no library ships test code or test-only dependencies such as
//! hickory-proto. It is not published.
//!
//! - [`signed_zone`] and [`signed_catalog`]: one zone read from master-file text and signed in
//!   memory with fresh CSKs (validity 2023-11 … 2030-03), for tests, fuzzing and benchmarks of
//!   the answer engine;
//! - [`check_response`] and [`second_opinion`]: the invariants every response must satisfy,
//!   including a second decoding by hickory-proto; [`with_option`] to build queries;
//! - [`hierarchy`]: a delegation hierarchy of zone descriptions and in-process servers for it;
//! - [`peers`]: the peer programs the integration tests run (dig, kdig, unbound, and the Go
//!   TLS and DoQ clients whose sources are this crate's `go/` and `godoq/`);
//! - [`ports`]: ports free for a test server;
//! - [`cpu`]: the test process's CPU time, for side-by-side measurements;
//! - [`secondaries`]: NSD, Knot and BIND as secondaries of a server under test;
//! - [`systemd`]: the shipped unit files checked by `systemd-analyze`, and a notification
//!   socket as systemd binds it.
//!
//! # pqdns-server's own unit tests
//! This crate depends on pqdns-server, and pqdns-server's unit tests (inside its `src/`) use
//! this crate as a dev-dependency. Cargo allows that cycle, but those tests then see two copies
//! of pqdns-server: their own and the one linked here, whose types are different types. They
//! therefore use only the items here that speak pqdns-core and std types: [`signed_zone`],
//! [`second_opinion`], [`with_option`] and [`LOCALHOST`] (pqdns-server wraps [`signed_zone`]
//! in its own `Catalog` for them).

#![forbid(unsafe_code)]

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::message::Message;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Zone};
use pqdns_server::answer::{Outcome, Transport};
use pqdns_server::catalog::{Catalog, ServedZone};

pub mod cpu;
pub mod hierarchy;
pub mod peers;
pub mod ports;
mod second_opinion;
pub mod secondaries;
pub mod systemd;
pub mod verify;
pub use second_opinion::second_opinion;

/// The client address tests and benchmarks answer (127.0.0.1).
pub const LOCALHOST: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// `text` (master-file format relative to `origin`, default TTL 3600) signed with one CSK per
/// algorithm in `algorithms` and with `denial`.
///
/// # Panics
/// If the text does not parse or a key cannot be generated: this is for tests and fuzzing,
/// where the zone text is fixed.
pub fn signed_zone(origin: &Name, text: &str, algorithms: &[Algorithm], denial: Denial) -> Zone {
    let records = ZoneFileReader::new(Some(origin.clone()), Some(3600))
        .read_str(text, "test.zone")
        .expect("the test zone parses");
    let mut zone = Zone::from_records(origin.clone(), records).expect("the test zone is valid");
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let keys: Vec<ZoneKey> = algorithms
        .iter()
        .map(|&a| {
            ZoneKey::generate(origin, a, KeyRole::Csk, &profile, &provider, 3600)
                .expect("the algorithm is available")
        })
        .collect();
    let policy = SigningPolicy {
        inception: 1_700_000_000,
        expiration: 1_900_000_000,
        denial,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &keys, &policy, &|_, _| {}).expect("the test zone signs");
    zone
}

/// A catalog serving [`signed_zone`]`(origin, text, algorithms, denial)` alone.
///
/// # Panics
/// As [`signed_zone`].
pub fn signed_catalog(
    origin: &Name,
    text: &str,
    algorithms: &[Algorithm],
    denial: Denial,
) -> Catalog {
    let zone = signed_zone(origin, text, algorithms, denial);
    Catalog::new([ServedZone::new(zone)]).expect("one zone")
}

/// Checks what the engine wrote for `query` (any bytes) into `out[..outcome.len]`: nothing,
/// or a message that parses, that hickory-proto reads the same way ([`second_opinion`]), that
/// carries the query's ID, and over UDP fits `udp_payload` bytes (the engine's own budget, at
/// least 512).
///
/// # Errors
/// A description of the first broken invariant.
pub fn check_response(
    query: &[u8],
    transport: Transport,
    udp_payload: u16,
    out: &[u8],
    outcome: &Outcome,
) -> Result<(), String> {
    if outcome.len == 0 {
        return Ok(());
    }
    let response = out
        .get(..outcome.len)
        .ok_or_else(|| format!("outcome.len {} > {} bytes written", outcome.len, out.len()))?;
    let parsed = Message::parse(response)
        .map_err(|e| format!("response to {query:02x?} does not parse: {e}"))?;
    second_opinion(response).map_err(|e| format!("response to {query:02x?}: {e}"))?;
    if query.len() < 2 || parsed.id.to_be_bytes() != [query[0], query[1]] {
        return Err(format!("response ID {} does not echo the query", parsed.id));
    }
    let budget = usize::from(udp_payload.max(512));
    if transport == Transport::Udp && outcome.len > budget {
        return Err(format!("UDP response of {} bytes", outcome.len));
    }
    Ok(())
}

/// `query` (a message that ends in its OPT record) with an EDNS option `code` holding `data`
/// appended to that OPT record.
///
/// # Panics
/// If `query` is shorter than an OPT record's RDLENGTH field: this is for tests.
pub fn with_option(mut query: Vec<u8>, code: u16, data: &[u8]) -> Vec<u8> {
    let len = query.len();
    let rdlen = u16::from_be_bytes([query[len - 2], query[len - 1]]) + 4 + data.len() as u16;
    query[len - 2..].copy_from_slice(&rdlen.to_be_bytes());
    query.extend(code.to_be_bytes());
    query.extend((data.len() as u16).to_be_bytes());
    query.extend_from_slice(data);
    query
}

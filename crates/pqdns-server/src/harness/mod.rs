//! Support for tests, fuzzing and benchmarks of the answer engine: a catalog holding one zone
//! read from master-file text and signed in memory with fresh CSKs (validity 2023-11 …
//! 2030-03), the invariants every response must satisfy, and the peer programs ([`peers`]:
//! dig, kdig, the Go TLS clients) that the integration tests of the server and the resolver
//! run.

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::message::Message;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Zone};

use crate::answer::{Outcome, Transport};

pub mod hierarchy;
pub mod peers;
mod second_opinion;
pub use second_opinion::second_opinion;

/// The client address tests and benchmarks answer (127.0.0.1).
pub const LOCALHOST: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A 127.0.0.1 port free for both UDP and TCP right now: for a test server listening on both at
/// one port, and for clients that retry a UDP query over TCP on the same port (delv does for
/// every DNAME answer without a server cookie). A port free for UDP may be taken for TCP (by
/// another test's connection), so both are tried.
///
/// # Panics
/// If no such port turns up in 64 tries.
pub fn free_dual_port() -> u16 {
    for _ in 0..64 {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let port = tcp.local_addr().expect("a bound address").port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP in 64 tries");
}
use crate::catalog::{Catalog, ServedZone};

/// `text` (master-file format relative to `origin`, default TTL 3600) signed with one CSK per
/// algorithm in `algorithms` and with `denial`.
///
/// # Panics
/// If the text does not parse or a key cannot be generated: this is for tests and fuzzing,
/// where the zone text is fixed.
pub fn signed_catalog(
    origin: &Name,
    text: &str,
    algorithms: &[Algorithm],
    denial: Denial,
) -> Catalog {
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

//! Test fixtures shared by the fragmentation tests: a small zone signed once per algorithm
//! (cached for the test binary) and its DNSKEY, A-with-RRSIG and NXDOMAIN-with-NSEC3 answers.

use std::sync::OnceLock;

use crate::dnssec::keyfile::{KeyRole, ZoneKey};
use crate::dnssec::nsec3::Nsec3Params;
use crate::dnssec::profile::Profile;
use crate::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use crate::dnssec::verify::{verify_zone, VerifyOptions};
use crate::dnssec::{Algorithm, Backend, Provider};
use crate::message::{Message, Question};
use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::wire::{Edns, Rcode, FLAG_AA, FLAG_QR};
use crate::zone::Zone;
use crate::zonefile::ZoneFileReader;

/// The usual UDP budget, bytes.
pub(super) const BUDGET: usize = 1232;

pub(super) fn n(s: &str) -> Name {
    s.parse().unwrap()
}

/// The default profile plus numbers for the algorithms it leaves out.
pub(super) fn profile() -> &'static Profile {
    static P: OnceLock<Profile> = OnceLock::new();
    P.get_or_init(|| {
        let numbers = [
            ("SPHINCS+-SHA2-128f".to_string(), 250u8),
            ("MAYO-2".to_string(), 251),
        ]
        .into_iter()
        .collect();
        Profile::custom("t", "default", &numbers).unwrap()
    })
}

/// One algorithm's signed zone and answers.
pub(super) struct Case {
    pub alg: Algorithm,
    pub zone: Zone,
    /// DNSKEY, A with RRSIG, NXDOMAIN with NSEC3.
    pub answers: Vec<Message>,
}

/// Every post-quantum algorithm of the default provider plus ECDSA P-256, signed once — except
/// the FIPS 205 SLH-DSA ones: their signatures have exactly the sizes of SPHINCS+-128s, which
/// is covered, and the pure-Rust signer takes seconds per signature.
pub(super) fn cases() -> &'static [Case] {
    static C: OnceLock<Vec<Case>> = OnceLock::new();
    C.get_or_init(|| {
        let provider = Provider::default_provider();
        provider
            .algorithms()
            .filter(|a| a.is_post_quantum())
            .filter(|a| provider.scheme(*a).map(|s| s.backend()) != Ok(Backend::Fips205))
            .chain([Algorithm::EcdsaP256Sha256])
            .filter(|a| profile().number(*a).is_some())
            .map(|alg| {
                let zone = signed(alg, profile());
                let answers = answers(&zone);
                Case { alg, zone, answers }
            })
            .collect()
    })
}

/// The case for one algorithm.
pub(super) fn case(alg: Algorithm) -> &'static Case {
    cases().iter().find(|c| c.alg == alg).unwrap()
}

fn signed(alg: Algorithm, profile: &Profile) -> Zone {
    let origin = n("example.");
    let text =
        "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";
    let recs = ZoneFileReader::new(Some(origin.clone()), Some(300))
        .read_str(text, "t")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), recs).unwrap();
    let provider = Provider::default_provider();
    let keys: Vec<ZoneKey> = [KeyRole::Ksk, KeyRole::Zsk]
        .iter()
        .map(|r| ZoneKey::generate(&origin, alg, *r, profile, &provider, 300).unwrap())
        .collect();
    let policy = SigningPolicy {
        inception: 1_749_000_000,
        expiration: 1_751_000_000,
        denial: Denial::Nsec3(Nsec3Params::default()),
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &keys, &policy, &|_, _| {}).unwrap();
    zone
}

fn rrset_records(zone: &Zone, owner: &Name, t: RrType) -> Vec<Record> {
    zone.records()
        .into_iter()
        .filter(|r| r.owner == *owner && (r.rtype == t || r.covered_type() == Some(t)))
        .collect()
}

/// A DO query for (qname, qtype) with ID 0x1234 and a 1232-byte payload.
pub(super) fn query(qname: &str, qtype: RrType) -> Message {
    Message::query(
        0x1234,
        Question {
            qname: n(qname),
            qtype,
            qclass: Class::IN,
        },
        false,
        Some(Edns::dnssec_ok(1232)),
    )
}

fn response(
    qname: &str,
    qtype: RrType,
    answers: Vec<Record>,
    authority: Vec<Record>,
    rc: Rcode,
) -> Message {
    let mut m = query(qname, qtype);
    m.flags = FLAG_QR | FLAG_AA | rc.low();
    m.answers = answers;
    m.authority = authority;
    m
}

fn answers(zone: &Zone) -> Vec<Message> {
    let apex = n("example.");
    let nx_auth: Vec<Record> = rrset_records(zone, &apex, RrType::SOA)
        .into_iter()
        .chain(
            zone.records()
                .into_iter()
                .filter(|r| r.rtype == RrType::NSEC3 || r.covered_type() == Some(RrType::NSEC3)),
        )
        .collect();
    vec![
        response(
            "example.",
            RrType::DNSKEY,
            rrset_records(zone, &apex, RrType::DNSKEY),
            vec![],
            Rcode::NOERROR,
        ),
        response(
            "www.example.",
            RrType::A,
            rrset_records(zone, &n("www.example."), RrType::A),
            vec![],
            Rcode::NOERROR,
        ),
        response("nope.example.", RrType::A, vec![], nx_auth, Rcode::NXDOMAIN),
    ]
}

/// True if every RRSIG in `msg` verifies with the zone's DNSKEYs (and there is at least one).
pub(super) fn signatures_verify(msg: &Message, zone: &Zone) -> bool {
    let mut z = Zone {
        origin: zone.origin.clone(),
        nodes: Default::default(),
        nsec3: Default::default(),
    };
    // The apex DNSKEY and SOA RRsets come along: an MTL-mode zone's condensed signatures verify
    // through the ladder in the SOA's full signature.
    let apex: Vec<Record> = [RrType::DNSKEY, RrType::SOA]
        .into_iter()
        .flat_map(|t| rrset_records(zone, &zone.origin, t))
        .collect();
    for r in msg.answers.iter().chain(&msg.authority).chain(apex.iter()) {
        z.insert(r.clone()).unwrap();
    }
    let report = verify_zone(
        &z,
        profile(),
        &Provider::default_provider(),
        &VerifyOptions {
            now: 1_750_000_000,
            signatures_only: true,
        },
    );
    report.is_ok() && report.signatures_valid > 0
}

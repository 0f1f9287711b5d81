//! Mutation fuzzing of the query path, bounded and deterministic (a fixed-seed xorshift PRNG,
//! 30,000 packets): valid queries with bytes flipped, inserted or cut off go through the
//! answer engine for UDP and streams. It must never panic, every response it sends must parse
//! as a DNS message with the query's ID, and UDP responses must fit the 1232-byte budget.
//! The same property is the cargo-fuzz target `fuzz/fuzz_targets/query.rs`; this test keeps it
//! checked on every test run without a fuzzing toolchain.

use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, EDNS_DO};
use pqdns_core::{Class, RrType};
use pqdns_server::answer::{respond, Transport};
use pqdns_server::catalog::Catalog;
use pqdns_test_support::{check_response, signed_catalog, LOCALHOST};

const ZONE: &str = "@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.2\nalias CNAME www\n*.wild TXT \"w\"\nsub NS ns.sub\nns.sub A 192.0.2.3\n";

fn catalog() -> Catalog {
    signed_catalog(
        &"example.".parse().unwrap(),
        ZONE,
        &[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44],
        Denial::Nsec3(Nsec3Params::default()),
    )
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let names = [
        "www.example.",
        "nope.example.",
        "a.wild.example.",
        "alias.example.",
        "x.sub.example.",
        "example.",
    ];
    let types = [
        RrType::A,
        RrType::DNSKEY,
        RrType::TXT,
        RrType::NS,
        RrType::ANY,
        RrType::DS,
    ];
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        for (j, t) in types.iter().enumerate() {
            let edns = (i + j) % 3 != 0;
            let q = Message::query(
                (i * 31 + j) as u16,
                Question {
                    qname: n.parse().unwrap(),
                    qtype: *t,
                    qclass: Class::IN,
                },
                false,
                edns.then(|| Edns {
                    udp_payload: 4096,
                    ext_rcode: 0,
                    version: 0,
                    flags: EDNS_DO,
                    options: vec![],
                }),
            );
            out.push(q.to_wire());
        }
    }
    out
}

#[test]
fn mutated_queries_never_panic_and_answers_are_well_formed() {
    let catalog = catalog();
    let seeds = seeds();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(65_536);
    let mut answered = 0;
    for i in 0..30_000 {
        let mut packet = seeds[i % seeds.len()].clone();
        for _ in 0..=rng.below(4) {
            match rng.below(4) {
                0 => {
                    let p = rng.below(packet.len());
                    packet[p] ^= 1 << rng.below(8);
                }
                1 => {
                    let p = rng.below(packet.len());
                    packet[p] = rng.next() as u8;
                }
                2 => {
                    let p = rng.below(packet.len() + 1);
                    packet.insert(p, rng.next() as u8);
                }
                _ => packet.truncate(rng.below(packet.len() + 1)),
            }
            if packet.is_empty() {
                packet.push(0);
            }
        }
        for transport in [Transport::Udp, Transport::Tcp] {
            let outcome = respond(&catalog, &packet, transport, LOCALHOST, 1232, &mut out, 0);
            if outcome.len == 0 {
                continue;
            }
            answered += 1;
            if let Err(e) = check_response(&packet, transport, 1232, &out, &outcome) {
                panic!("{e}");
            }
        }
    }
    // Most mutations leave a parsable query or at least a header: the engine must answer them.
    assert!(answered > 10_000, "only {answered} responses");
}

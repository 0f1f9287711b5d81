//! MTL mode (algorithms 248/249): pqdns-signed zones verify through ladders and fail with a
//! reason after any change to a signature, a ladder or signed RDATA; Verisign's ldns sample
//! parses with the documented layout.

#![cfg(feature = "liboqs")]

use std::path::Path;

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::mtl::{MtlSignature, N};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::rrsig::Rrsig;
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};

const NOW: u64 = 1_750_000_000;
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mtl-mode-ldns-sha2");

const ZONE: &str = "\
$ORIGIN mtl.test.
$TTL 300
@    SOA  ns1 hostmaster 1 7200 3600 1209600 300
@    NS   ns1
ns1  A    192.0.2.1
www  A    192.0.2.3
www  AAAA 2001:db8::3
mail MX   10 www
sub  NS   ns.sub
sub  DS   12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns.sub A  192.0.2.5
";

fn signed(alg: Algorithm, denial: Denial) -> Zone {
    let origin: Name = "mtl.test.".parse().unwrap();
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(ZONE, "mtl.zone")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let provider = Provider::default_provider();
    let keys: Vec<ZoneKey> = [KeyRole::Ksk, KeyRole::Zsk]
        .iter()
        .map(|r| {
            ZoneKey::generate(
                &origin,
                alg,
                *r,
                &Profile::default_profile(),
                &provider,
                3600,
            )
            .unwrap()
        })
        .collect();
    let policy = SigningPolicy {
        inception: NOW - 3600,
        expiration: NOW + 86_400,
        denial,
    };
    sign_zone(&mut zone, &keys, &policy, &|_, _| {}).unwrap();
    zone
}

fn failures(zone: &Zone) -> Vec<String> {
    let opts = VerifyOptions {
        now: NOW,
        signatures_only: false,
    };
    verify_zone(
        zone,
        &Profile::default_profile(),
        &Provider::default(),
        &opts,
    )
    .failures
    .iter()
    .map(ToString::to_string)
    .collect()
}

fn rrsig_mut<'z>(zone: &'z mut Zone, owner: &str, rtype: RrType) -> &'z mut Vec<u8> {
    let owner: Name = owner.parse().unwrap();
    &mut zone
        .nodes
        .get_mut(&owner)
        .unwrap()
        .get_mut(&rtype)
        .unwrap()
        .rrsigs[0]
}

/// Offset of the signature field in RRSIG RDATA (18 fixed bytes + signer name).
fn sig_offset(rdata: &[u8]) -> usize {
    rdata.len() - Rrsig::parse(rdata).unwrap().signature.len()
}

#[test]
fn mtl_zones_verify_condensed_signatures_through_the_ladder() {
    let nsec3 = Denial::Nsec3(Nsec3Params {
        iterations: 0,
        salt: vec![],
        opt_out: false,
    });
    for alg in [Algorithm::MtlSlhDsaSha2_128s, Algorithm::MtlSlhDsaShake128s] {
        for denial in [Denial::Nsec, nsec3.clone()] {
            let zone = signed(alg, denial.clone());
            assert_eq!(failures(&zone), Vec::<String>::new(), "{alg} {denial:?}");
            // Full signatures on the apex SOA and DNSKEY, condensed everywhere else.
            let apex = &zone.origin;
            for (name, node) in &zone.nodes {
                for (rtype, set) in node {
                    for rdata in &set.rrsigs {
                        let sig =
                            MtlSignature::parse(Rrsig::parse(rdata).unwrap().signature).unwrap();
                        let want_full =
                            name == apex && matches!(*rtype, RrType::SOA | RrType::DNSKEY);
                        assert_eq!(sig.is_full(), want_full, "{name} {rtype}");
                        if !want_full {
                            assert!(
                                Rrsig::parse(rdata).unwrap().signature.len() <= 1 + N + 24 + 4 * N
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn one_changed_byte_anywhere_fails_with_a_reason() {
    let zone = signed(Algorithm::MtlSlhDsaSha2_128s, Denial::Nsec);

    // A sibling hash of a condensed signature.
    let mut z = zone.clone();
    let rdata = rrsig_mut(&mut z, "www.mtl.test.", RrType::A);
    let last = rdata.len() - 1;
    rdata[last] ^= 1;
    let f = failures(&z);
    assert!(
        f.iter()
            .any(|f| f.starts_with("www.mtl.test. A:") && f.contains("does not verify")),
        "{f:?}"
    );

    // A rung hash inside the SOA's signed ladder: the ladder signature breaks, so the SOA
    // fails and every condensed signature of the series loses its ladder.
    let mut z = zone.clone();
    let rdata = rrsig_mut(&mut z, "mtl.test.", RrType::SOA);
    let field = sig_offset(rdata);
    let sig = MtlSignature::parse(&rdata[field..]).unwrap();
    let ladder_at = 1 + N + 24 + sig.path.siblings.len() * N;
    rdata[field + ladder_at + 12 + 8] ^= 0x80; // first rung's hash
    let f = failures(&z);
    assert!(f.iter().any(|f| f.starts_with("mtl.test. SOA:")), "{f:?}");
    assert!(
        f.iter().any(|f| f.starts_with("www.mtl.test. A:")
            && f.contains("no valid full signature of this series")),
        "{f:?}"
    );

    // A byte of signed RDATA.
    let mut z = zone.clone();
    let www: Name = "www.mtl.test.".parse().unwrap();
    z.nodes
        .get_mut(&www)
        .unwrap()
        .get_mut(&RrType::AAAA)
        .unwrap()
        .rdatas[0][15] ^= 1;
    let f = failures(&z);
    assert!(
        f.iter().any(|f| f.starts_with("www.mtl.test. AAAA:")),
        "{f:?}"
    );

    // The SPHINCS+ signature of the DNSKEY RRset (the KSK's own one-leaf series).
    let mut z = zone.clone();
    let rdata = rrsig_mut(&mut z, "mtl.test.", RrType::DNSKEY);
    let mid = rdata.len() - 100;
    rdata[mid] ^= 1;
    let f = failures(&z);
    assert!(
        f.iter().any(|f| f.starts_with("mtl.test. DNSKEY:")),
        "{f:?}"
    );
}

fn sample_records() -> Vec<pqdns_core::Record> {
    ZoneFileReader::new(None, None)
        .read_file(&Path::new(SAMPLE).join("mtl.example.zone.signed"))
        .unwrap()
}

/// The layout of every RRSIG in Verisign's sample: flag byte, n = 16, 8-byte series IDs, one
/// series per key, and each condensed path leading to a rung of its series' full-signature
/// ladder.
#[test]
fn verisign_sample_signatures_parse_and_their_paths_fit_the_ladders() {
    let records = sample_records();
    let mut ladders = std::collections::HashMap::new();
    let mut parsed = Vec::new();
    for r in records.iter().filter(|r| r.rtype == RrType::RRSIG) {
        let rrsig = Rrsig::parse(&r.rdata).unwrap();
        assert_eq!(rrsig.fields.algorithm.0, 248);
        let sig = MtlSignature::parse(rrsig.signature).unwrap();
        if let Some((ladder, _, spx)) = &sig.signed_ladder {
            assert_eq!(spx.len(), 7856);
            ladders.insert(rrsig.fields.key_tag, ladder.clone());
        }
        parsed.push((rrsig.fields.key_tag, sig));
    }
    assert_eq!(parsed.len(), 11);
    assert_eq!(
        ladders.len(),
        2,
        "one full signature per key (SOA for the ZSK, DNSKEY for the KSK)"
    );
    for (tag, sig) in &parsed {
        let ladder = &ladders[tag];
        assert_eq!(sig.path.series, ladder.series);
        assert!(
            ladder.rung_for(&sig.path).is_some(),
            "leaf {}",
            sig.path.leaf
        );
    }
    assert_eq!(ladders[&14797].leaf_count(), 10);
}

/// Cryptographic verification of the Verisign sample (must-show 1). The MTL hash and ladder
/// signing details of the ldns fork that produced it could not be reproduced from the public
/// sources read (see the module doc of `dnssec::mtl::node_set` and the helper notes); this test
/// states the requirement and runs when `cargo test -- --ignored` is asked for.
#[test]
#[ignore = "the ldns fork's MTL hashing/ladder-signing variant is not identified yet: pqdns' own MTL zones verify, Verisign's sample does not"]
fn verisign_sample_verifies_at_a_time_inside_its_window() {
    let records = sample_records();
    let origin: Name = "mtl.example.".parse().unwrap();
    let zone = Zone::from_records(origin, records).unwrap();
    let opts = VerifyOptions {
        now: 1_796_000_000, // inside 20261122081604..20261220081604 (UTC)
        signatures_only: false,
    };
    let report = verify_zone(
        &zone,
        &Profile::named("verisign").unwrap(),
        &Provider::default(),
        &opts,
    );
    assert!(report.is_ok(), "{:?}", report.failures);
}

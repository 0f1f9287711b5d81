//! MTL mode (algorithms 248/249): pqdns-signed zones verify through ladders and fail with a
//! reason after any change to a signature, a ladder or signed RDATA; the zone Verisign's ldns
//! fork signed (`tests/data/mtl-mode-ldns-sha2`) verifies, and fails after any flipped byte.

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
    signed_under(alg, denial, &Profile::default_profile())
}

fn signed_under(alg: Algorithm, denial: Denial, profile: &Profile) -> Zone {
    let origin: Name = "mtl.test.".parse().unwrap();
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(ZONE, "mtl.zone")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let provider = Provider::default_provider();
    let keys: Vec<ZoneKey> = [KeyRole::Ksk, KeyRole::Zsk]
        .iter()
        .map(|r| ZoneKey::generate(&origin, alg, *r, profile, &provider, 3600).unwrap())
        .collect();
    let policy = SigningPolicy {
        inception: NOW - 3600,
        expiration: NOW + 86_400,
        denial,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &keys, &policy, &|_, _| {}).unwrap();
    zone
}

fn failures(zone: &Zone) -> Vec<String> {
    failures_under(zone, &Profile::default_profile())
}

fn failures_under(zone: &Zone, profile: &Profile) -> Vec<String> {
    let opts = VerifyOptions::at(NOW);
    verify_zone(zone, profile, &Provider::default(), &opts)
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
    // Each SPHINCS+ ladder signature costs about a second: one denial method per algorithm
    // (the CLI tests cover the other two combinations).
    for (alg, denial) in [
        (Algorithm::MtlSlhDsaSha2_128s, Denial::Nsec),
        (Algorithm::MtlSlhDsaShake128s, nsec3),
    ] {
        let zone = signed(alg, denial.clone());
        assert_eq!(failures(&zone), Vec::<String>::new(), "{alg} {denial:?}");
        // Full signatures on the apex SOA and DNSKEY, condensed everywhere else.
        let apex = &zone.origin;
        for (name, node) in &zone.nodes {
            for (rtype, set) in node {
                for rdata in &set.rrsigs {
                    let sig = MtlSignature::parse(Rrsig::parse(rdata).unwrap().signature).unwrap();
                    let want_full = name == apex && matches!(*rtype, RrType::SOA | RrType::DNSKEY);
                    assert_eq!(sig.is_full(), want_full, "{name} {rtype}");
                    if !want_full {
                        assert!(Rrsig::parse(rdata).unwrap().signature.len() <= 1 + N + 24 + 4 * N);
                    }
                }
            }
        }
    }
}

/// Every 2026 algorithm (ML-DSA-MTL 129, FL-DSA-MTL 128, SLH-DSA-MTL 130/131 over SPHINCS+,
/// and the FIPS 205 variants numbered by a custom profile) signs zones with NSEC and NSEC3 in
/// the 2026 layout, verifies under `verisign-2026`, and fails after a flipped signature byte.
#[test]
fn every_2026_algorithm_signs_and_verifies_with_nsec_and_nsec3() {
    use pqdns_core::dnssec::mtl::{Format, MtlParams};
    use pqdns_core::dnssec::SecAlg;
    let mut profile = Profile::named("verisign-2026").unwrap();
    profile.assign(SecAlg(253), Algorithm::SlhDsaMtlFips205Sha2_128s);
    profile.assign(SecAlg(254), Algorithm::SlhDsaMtlFips205Shake128s);
    let nsec3 = Denial::Nsec3(Nsec3Params {
        iterations: 0,
        salt: vec![],
        opt_out: false,
    });
    let provider = Provider::default_provider();
    let algs = [
        Algorithm::MlDsaMtl44,
        Algorithm::FlDsaMtl512,
        Algorithm::SlhDsaMtl2026Sha2_128s,
        Algorithm::SlhDsaMtl2026Shake128s,
        Algorithm::SlhDsaMtlFips205Sha2_128s,
        Algorithm::SlhDsaMtlFips205Shake128s,
    ];
    for (i, alg) in algs.into_iter().enumerate() {
        if provider.scheme(alg).is_err() {
            continue;
        }
        // ML-DSA-MTL both ways; the slower SPHINCS+ ladders one denial method each.
        let denials: Vec<Denial> = match (alg, i % 2) {
            (Algorithm::MlDsaMtl44, _) => vec![Denial::Nsec, nsec3.clone()],
            (_, 0) => vec![Denial::Nsec],
            _ => vec![nsec3.clone()],
        };
        for denial in denials {
            let mut zone = signed_under(alg, denial.clone(), &profile);
            assert_eq!(
                failures_under(&zone, &profile),
                Vec::<String>::new(),
                "{alg}"
            );
            let apex = zone.origin.clone();
            for (name, node) in &zone.nodes {
                for (rtype, set) in node {
                    for rdata in &set.rrsigs {
                        let field = Rrsig::parse(rdata).unwrap().signature;
                        let sig = MtlSignature::parse_as(Format::V2026, field).unwrap();
                        let want_full =
                            *name == apex && matches!(*rtype, RrType::SOA | RrType::DNSKEY);
                        assert_eq!(sig.is_full(), want_full, "{alg} {name} {rtype}");
                        assert_eq!(MtlParams::of(alg).unwrap().format, Format::V2026);
                    }
                }
            }
            let rdata = rrsig_mut(&mut zone, "www.mtl.test.", RrType::A);
            let at = sig_offset(rdata) + 60;
            rdata[at] ^= 1;
            assert_eq!(failures_under(&zone, &profile).len(), 1, "{alg} {denial:?}");
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

fn sample_zone() -> Zone {
    Zone::from_records("mtl.example.".parse().unwrap(), sample_records()).unwrap()
}

/// Inside the sample's validity window, 20261122081604..20261220081604 (UTC).
const SAMPLE_NOW: u64 = 1_796_000_000;

fn sample_failures(zone: &Zone) -> Vec<String> {
    let opts = VerifyOptions::at(SAMPLE_NOW);
    let report = verify_zone(
        zone,
        &Profile::named("verisign-2025").unwrap(),
        &Provider::default(),
        &opts,
    );
    report.failures.iter().map(ToString::to_string).collect()
}

/// Must-show 1: every RRSIG of the zone Verisign's ldns fork signed verifies in pqdns — the two
/// full signatures by their SPHINCS+ ladder signatures, the nine condensed ones through the
/// ZSK series' ladder — and so does the NSEC chain.
#[test]
fn verisign_sample_verifies_at_a_time_inside_its_window() {
    let zone = sample_zone();
    let opts = VerifyOptions::at(SAMPLE_NOW);
    let report = verify_zone(
        &zone,
        &Profile::named("verisign-2025").unwrap(),
        &Provider::default(),
        &opts,
    );
    assert!(report.is_ok(), "{:?}", report.failures);
    assert_eq!(
        (report.signatures_checked, report.signatures_valid),
        (11, 11)
    );
    // Outside the window the same signatures are refused.
    let late = VerifyOptions::at(SAMPLE_NOW + 40 * 86_400);
    let report = verify_zone(
        &zone,
        &Profile::named("verisign-2025").unwrap(),
        &Provider::default(),
        &late,
    );
    assert_eq!(report.signatures_valid, 0);
}

/// Every (owner, type) RRset of the sample with its RRSIG RDATA.
fn sample_rrsets(zone: &Zone) -> Vec<(Name, RrType)> {
    zone.nodes
        .iter()
        .flat_map(|(name, node)| node.keys().map(move |t| (name.clone(), *t)))
        .collect()
}

fn expect_failure(zone: &Zone, owner: &Name, rtype: RrType, what: &str) {
    let prefix = format!("{owner} {rtype}:");
    let f = sample_failures(zone);
    assert!(
        f.iter().any(|f| f.starts_with(&prefix)),
        "{what}: no failure for {prefix} in {f:?}"
    );
}

/// Must-show 1, negative half: one flipped byte in any RRSIG signature field of the sample (every
/// byte of the condensed ones; every path and ladder byte of the full ones and every 61st byte of
/// their SPHINCS+ signatures) makes that RRset fail verification with a reason.
#[test]
fn verisign_sample_any_flipped_signature_byte_fails() {
    let zone = sample_zone();
    let mut flips = 0;
    for (owner, rtype) in sample_rrsets(&zone) {
        let rdata = zone.rrset(&owner, rtype).unwrap().rrsigs[0].clone();
        let field = sig_offset(&rdata);
        let sig = MtlSignature::parse(&rdata[field..]).unwrap();
        let clear = match &sig.signed_ladder {
            None => rdata.len() - field,
            Some((_, ladder, _)) => 1 + N + 24 + sig.path.siblings.len() * N + ladder.len() + 4,
        };
        let positions = (0..clear).chain((clear..rdata.len() - field).step_by(61));
        for i in positions {
            let mut z = zone.clone();
            let sigs = &mut z
                .nodes
                .get_mut(&owner)
                .unwrap()
                .get_mut(&rtype)
                .unwrap()
                .rrsigs;
            sigs[0][field + i] ^= 0x01;
            expect_failure(&z, &owner, rtype, &format!("signature byte {i}"));
            flips += 1;
        }
    }
    assert!(flips > 1000, "{flips}");
}

/// Must-show 1, negative half: one flipped bit in any byte of signed RDATA (every record of
/// every RRset, DNSKEYs included) or of the RRSIG fields before the signature makes that RRset
/// fail.
#[test]
fn verisign_sample_any_flipped_signed_byte_fails() {
    let zone = sample_zone();
    for (owner, rtype) in sample_rrsets(&zone) {
        let set = zone.rrset(&owner, rtype).unwrap();
        for (r, rdata) in set.rdatas.iter().enumerate() {
            for i in 0..rdata.len() {
                let mut z = zone.clone();
                z.nodes
                    .get_mut(&owner)
                    .unwrap()
                    .get_mut(&rtype)
                    .unwrap()
                    .rdatas[r][i] ^= 0x01;
                expect_failure(&z, &owner, rtype, &format!("RDATA {r} byte {i}"));
            }
        }
        let rrsig = &set.rrsigs[0];
        for i in 0..sig_offset(rrsig) {
            let mut z = zone.clone();
            z.nodes
                .get_mut(&owner)
                .unwrap()
                .get_mut(&rtype)
                .unwrap()
                .rrsigs[0][i] ^= 0x01;
            expect_failure(&z, &owner, rtype, &format!("RRSIG field byte {i}"));
        }
    }
}

//! Known-answer test: draft-westerbaan-dnssec-mldsa-04 §6 (ML-DSA-44, algorithm 18, key tag
//! 59829, RRSIG over `example.com. 3600 IN MX 10 mail.example.com.`). The files under
//! `tests/data/` are the draft's text verbatim.

use std::path::Path;

use pqdns_core::dnssec::dnskey::{ds_record, key_tag, DigestType, DnskeyRef};
use pqdns_core::dnssec::keyfile::ZoneKey;
use pqdns_core::dnssec::rrsig::{signed_data, Rrsig};
use pqdns_core::dnssec::validate::{danger, Limits, PqPolicy, UnverifiedRRset, Validator};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Class, Record, RrType, Zone};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
/// Between the draft's inception (2015-07-29) and expiration (2015-08-19).
const DURING_VALIDITY: u64 = 1_439_000_000;

fn records() -> Vec<Record> {
    ZoneFileReader::new(None, None)
        .read_file(&Path::new(DATA).join("mldsa44-kat.zone"))
        .unwrap()
}

fn find(records: &[Record], t: RrType) -> Record {
    records.iter().find(|r| r.rtype == t).unwrap().clone()
}

/// Verifies the MX RRSIG with the given pieces under `provider`.
fn verifies(provider: &Provider, dnskey: &[u8], mx: &[u8], rrsig: &[u8]) -> bool {
    let sig = Rrsig::parse(rrsig).unwrap();
    let key = DnskeyRef::parse(dnskey).unwrap();
    let alg = Profile::default_profile().algorithm(key.algorithm).unwrap();
    let data = signed_data(
        &sig.fields,
        &"example.com.".parse().unwrap(),
        Class::IN,
        [mx],
    );
    provider
        .scheme(alg)
        .unwrap()
        .verify(key.public_key, &data, sig.signature)
        .is_ok()
}

#[test]
fn key_tag_and_ds_match_the_draft() {
    let recs = records();
    let dnskey = find(&recs, RrType::DNSKEY);
    assert_eq!(key_tag(&dnskey.rdata), 59829);
    assert_eq!(
        Profile::default_profile().algorithm(DnskeyRef::parse(&dnskey.rdata).unwrap().algorithm),
        Some(Algorithm::MlDsa44)
    );
    let ds = ds_record(&dnskey, DigestType::Sha256).unwrap();
    assert_eq!(ds.rdata, find(&recs, RrType::DS).rdata);
}

#[test]
fn signature_verifies_with_both_implementations_and_fails_on_any_bit_flip() {
    let recs = records();
    let dnskey = find(&recs, RrType::DNSKEY).rdata;
    let mx = find(&recs, RrType::MX).rdata;
    let rrsig = find(&recs, RrType::RRSIG).rdata;
    #[allow(unused_mut)]
    let mut providers = vec![Provider::default_provider()];
    #[cfg(feature = "liboqs")]
    providers.push(Provider::liboqs_first());
    for provider in providers {
        assert!(verifies(&provider, &dnskey, &mx, &rrsig), "{provider:?}");

        let mut bad_sig = rrsig.clone();
        let last = bad_sig.len() - 100;
        bad_sig[last] ^= 0x01;
        assert!(
            !verifies(&provider, &dnskey, &mx, &bad_sig),
            "{provider:?} signature bit"
        );

        let mut bad_key = dnskey.clone();
        bad_key[200] ^= 0x01;
        assert!(
            !verifies(&provider, &bad_key, &mx, &rrsig),
            "{provider:?} key bit"
        );

        let mut bad_mx = mx.clone();
        bad_mx[1] ^= 0x01; // preference 10 → 11
        assert!(
            !verifies(&provider, &dnskey, &bad_mx, &rrsig),
            "{provider:?} MX bit"
        );
    }
}

#[test]
fn whole_file_verifies_as_a_partial_zone_within_its_window_only() {
    let zone = Zone::from_records("example.com.".parse().unwrap(), records());
    // The draft's snippet has no SOA, so it is not a whole zone.
    assert!(zone.is_err());
    let mut zone = Zone {
        origin: "example.com.".parse().unwrap(),
        nodes: Default::default(),
        nsec3: Default::default(),
    };
    for r in records() {
        zone.insert(r).unwrap();
    }
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let opts = |now| VerifyOptions::signatures_only_at(now, true);
    let report = verify_zone(&zone, &profile, &provider, &opts(DURING_VALIDITY));
    assert!(report.is_ok(), "{:?}", report.failures);
    assert_eq!(report.signatures_valid, 1);
    let late = verify_zone(&zone, &profile, &provider, &opts(1_700_000_000));
    assert!(
        late.failures[0].reason.contains("expired"),
        "{:?}",
        late.failures
    );
    // Under OQS-bind's numbering 18 is round-3 Dilithium2: the signature must not verify.
    let oqs = Profile::named("oqs-bind").unwrap();
    let wrong = verify_zone(&zone, &oqs, &provider, &opts(DURING_VALIDITY));
    assert!(!wrong.is_ok());
}

#[test]
fn private_key_file_is_the_seed_and_loads_as_the_draft_key() {
    let key = ZoneKey::read_files(
        &Path::new(DATA).join("Kexample.com.+018+59829.private"),
        &Profile::default_profile(),
        &Provider::default_provider(),
    )
    .unwrap();
    assert_eq!(key.key_tag(), 59829);
    assert_eq!(
        key.key.private_fields().get("PrivateKey").unwrap(),
        (0u8..32).collect::<Vec<_>>()
    );
    // liboqs 0.13 cannot expand a seed: a clear error, not a panic.
    #[cfg(feature = "liboqs")]
    {
        let err = ZoneKey::read_files(
            &Path::new(DATA).join("Kexample.com.+018+59829.key"),
            &Profile::default_profile(),
            &Provider::liboqs_first(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("seed"), "{err}");
    }
}

#[test]
fn validator_api_accepts_the_draft_example_and_rejects_it_outside_its_window() {
    let recs = records();
    let zone: pqdns_core::Name = "example.com.".parse().unwrap();
    let dnskeys = vec![find(&recs, RrType::DNSKEY).rdata];
    let mx_records: Vec<Record> = recs
        .iter()
        .filter(|r| r.rtype == RrType::MX || r.covered_type() == Some(RrType::MX))
        .cloned()
        .collect();
    let mx = UnverifiedRRset::group(&mx_records).remove(0);
    assert_eq!((mx.rtype, mx.rrsigs.len()), (RrType::MX, 1));
    let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
    let mut v = Validator::new(
        &profile,
        &provider,
        DURING_VALIDITY,
        Limits::default(),
        PqPolicy::RequirePq,
    );
    let keys = danger::trust_anchor_dnskeys(&zone, &dnskeys);
    let verified = v.verify_rrset(&keys, &mx).unwrap();
    assert!(!verified.from_wildcard());
    assert!(verified.is_post_quantum());
    let mut late = Validator::new(
        &profile,
        &provider,
        1_700_000_000,
        Limits::default(),
        PqPolicy::AnyAlgorithm,
    );
    assert_eq!(
        late.verify_rrset(&keys, &mx).unwrap_err().ede,
        pqdns_core::wire::Ede::SIGNATURE_EXPIRED
    );
}

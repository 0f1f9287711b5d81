//! Criterion: RRset validations per second per algorithm (`Validator::verify_rrset` on an A
//! RRset with one RRSIG, trusted keys in hand) beside the raw verify primitive on the same
//! signed data, so the overhead of validation is the ratio of the two.
//!
//! Run: `cargo bench -p pqdns-bench --bench validation`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::rrsig::{label_count, signed_data, Rrsig, RrsigFields};
use pqdns_core::dnssec::validate::{danger, Limits, PqPolicy, UnverifiedRRset, Validator};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::{Class, Name, RrType};

const ALGORITHMS: &[Algorithm] = &[
    Algorithm::EcdsaP256Sha256,
    Algorithm::Ed25519,
    Algorithm::RsaSha256,
    Algorithm::MlDsa44,
    Algorithm::MlDsa65,
    Algorithm::Falcon512,
    Algorithm::Mayo1,
    Algorithm::SphincsSha2_128s,
];

const NOW: u64 = 1_750_000_000;

fn validation(c: &mut Criterion) {
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let zone: Name = "example.".parse().unwrap();
    let owner: Name = "www.example.".parse().unwrap();
    let rdatas = vec![vec![192, 0, 2, 1]];
    let mut group = c.benchmark_group("validate_rrset");
    for &alg in ALGORITHMS {
        let key = ZoneKey::generate(&zone, alg, KeyRole::Csk, &profile, &provider, 300).unwrap();
        let sign = |rtype: RrType, owner: &Name, data: &[Vec<u8>]| {
            let fields = RrsigFields {
                type_covered: rtype,
                algorithm: key.number,
                labels: label_count(owner),
                original_ttl: 300,
                expiration: (NOW + 86_400) as u32,
                inception: (NOW - 86_400) as u32,
                key_tag: key.key_tag(),
                signer: zone.clone(),
            };
            let msg = signed_data(&fields, owner, Class::IN, data.iter().map(Vec::as_slice));
            fields.rdata(&key.key.sign(&msg).unwrap())
        };
        let dnskeys = vec![key.dnskey_rdata()];
        let ds = vec![
            ds_record(&key.dnskey_record(), DigestType::Sha256)
                .unwrap()
                .rdata,
        ];
        let key_sig = vec![sign(RrType::DNSKEY, &zone, &dnskeys)];
        let a_sig = vec![sign(RrType::A, &owner, &rdatas)];
        let mut setup = Validator::new(
            &profile,
            &provider,
            NOW,
            Limits::default(),
            PqPolicy::AnyAlgorithm,
        );
        let rrset =
            |owner: &Name, rtype: RrType, rdatas: &[Vec<u8>], rrsigs: &[Vec<u8>]| UnverifiedRRset {
                owner: owner.clone(),
                rtype,
                class: Class::IN,
                ttl: 300,
                rdatas: rdatas.to_vec(),
                rrsigs: rrsigs.to_vec(),
                rrsig_ttl: 300,
            };
        let trusted = setup
            .trust_dnskeys(
                &danger::trust_anchor_ds(&zone, ds),
                &rrset(&zone, RrType::DNSKEY, &dnskeys, &key_sig),
            )
            .unwrap()
            .unwrap();
        let a_rrset = rrset(&owner, RrType::A, &rdatas, &a_sig);

        group.bench_function(BenchmarkId::new("verify_rrset", alg.name()), |b| {
            b.iter(|| {
                let mut v = Validator::new(
                    &profile,
                    &provider,
                    NOW,
                    Limits::default(),
                    PqPolicy::AnyAlgorithm,
                );
                v.verify_rrset(&trusted, &a_rrset).unwrap()
            })
        });
        let parsed = Rrsig::parse(&a_sig[0]).unwrap();
        let msg = signed_data(
            &parsed.fields,
            &owner,
            Class::IN,
            rdatas.iter().map(Vec::as_slice),
        );
        let scheme = provider.scheme(alg).unwrap();
        group.bench_function(BenchmarkId::new("raw_verify", alg.name()), |b| {
            b.iter(|| {
                scheme
                    .verify(key.key.public_key(), &msg, parsed.signature)
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, validation);
criterion_main!(benches);

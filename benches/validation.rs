//! Criterion: RRset validations per second per algorithm (`Validator::verify_rrset` on an A
//! RRset with one RRSIG, trusted keys in hand) beside the raw verify primitive on the same
//! signed data, so the overhead of validation is the ratio of the two; liboqs verification
//! with a new `OQS_SIG` object per call (pqdns before the open provider) beside the provider's
//! cached object; and MTL mode: a condensed signature checked against a cached ladder (hashes
//! only) beside a full signature (SPHINCS+ ladder signature plus path), in a 3000-leaf series.
//!
//! Run: `cargo bench -p pqdns-bench --bench validation`.

// `criterion_group!` defines an undocumented public function in this bench binary.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::rrsig::{label_count, signed_data, Rrsig, RrsigFields};
use pqdns_core::dnssec::validate::{danger, Limits, PqPolicy, UnverifiedRRset, Validator};
use pqdns_core::dnssec::{mtl, Algorithm, Profile, Provider};
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

/// Verification through liboqs: a new `OQS_SIG` per call, as pqdns did before (`oqs::sig::Sig`
/// built for every verify), against the provider's one cached object per scheme.
fn liboqs_object(c: &mut Criterion) {
    let provider = Provider::liboqs_first();
    let msg = [0x5au8; 200];
    let mut group = c.benchmark_group("liboqs_verify");
    for (alg, oqs_alg) in [
        (Algorithm::Falcon512, oqs::sig::Algorithm::Falcon512),
        (Algorithm::MlDsa44, oqs::sig::Algorithm::MlDsa44),
        (Algorithm::Mayo1, oqs::sig::Algorithm::Mayo1),
        (
            Algorithm::SphincsSha2_128f,
            oqs::sig::Algorithm::SphincsSha2128fSimple,
        ),
    ] {
        let scheme = provider.scheme(alg).unwrap();
        let key = scheme.generate().unwrap();
        let sig = key.sign(&msg).unwrap();
        group.bench_function(BenchmarkId::new("new_object_per_call", alg.name()), |b| {
            b.iter(|| {
                let s = oqs::sig::Sig::new(oqs_alg).unwrap();
                let pk = s.public_key_from_bytes(key.public_key()).unwrap();
                let sg = s.signature_from_bytes(&sig).unwrap();
                s.verify(&msg, sg, pk).unwrap()
            })
        });
        group.bench_function(BenchmarkId::new("cached_object", alg.name()), |b| {
            b.iter(|| scheme.verify(key.public_key(), &msg, &sig).unwrap())
        });
    }
    group.finish();
}

/// MTL mode: per-RRset validation cost with the ladder cached (a condensed signature: parse,
/// cache lookup, about 13 hashes) and without (a full signature: SPHINCS+-128s verification of
/// the ladder plus the path), for leaf 1234 of a 3000-leaf series.
fn mtl(c: &mut Criterion) {
    let provider = Provider::default_provider();
    let mut group = c.benchmark_group("mtl_verify");
    for alg in [
        Algorithm::MtlSlhDsaSha2_128s,
        Algorithm::MtlSlhDsaShake128s,
        Algorithm::MlDsaMtl44,
    ] {
        let key = provider.scheme(alg).unwrap().generate().unwrap();
        let mut signer = mtl::MtlSigner::new(&*key).unwrap();
        let messages: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| [&i.to_be_bytes()[..], &[0x5a; 150]].concat())
            .collect();
        for m in &messages {
            signer.append(m).unwrap();
        }
        signer.sign_ladder().unwrap();
        let leaf = 1234;
        let msg = &messages[leaf as usize];
        let condensed = signer.signature(leaf, false).unwrap();
        let full = signer.signature(leaf, true).unwrap();
        let mut ladders = mtl::LadderCache::new(16);
        let pk = key.public_key();
        ladders.insert(mtl::verify_full(alg, pk, msg, &full).unwrap());
        group.bench_function(
            BenchmarkId::new("condensed_cached_ladder", alg.name()),
            |b| {
                b.iter(|| {
                    mtl::verify_signature(alg, pk, msg, &condensed, &ladders)
                        .unwrap()
                        .is_none()
                })
            },
        );
        group.bench_function(BenchmarkId::new("full_signature", alg.name()), |b| {
            b.iter(|| mtl::verify_full(alg, pk, msg, &full).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, validation, liboqs_object, mtl);
criterion_main!(benches);

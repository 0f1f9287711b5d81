//! Criterion: DNSSEC sign and verify per algorithm (one RRset's signed data, 200 bytes), and
//! signing a generated 1500-delegation zone on one thread and on all cores.
//!
//! Run: `cargo bench -p pqdns-bench --bench signing`.

// `criterion_group!` defines an undocumented public function in this bench binary.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pqdns_bench::genzone::delegations_zone;
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Zone};

const PRIMITIVES: &[Algorithm] = &[
    Algorithm::EcdsaP256Sha256,
    Algorithm::Ed25519,
    Algorithm::RsaSha256,
    Algorithm::MlDsa44,
    Algorithm::MlDsa65,
    Algorithm::MlDsa87,
    Algorithm::Falcon512,
    Algorithm::FalconPadded512,
    Algorithm::Mayo1,
    Algorithm::SphincsSha2_128s,
];

/// Fast enough to sign a 1500-delegation zone many times per sample.
const ZONE_ALGORITHMS: &[Algorithm] = &[
    Algorithm::EcdsaP256Sha256,
    Algorithm::Ed25519,
    Algorithm::MlDsa44,
    Algorithm::Falcon512,
];

fn key(alg: Algorithm) -> ZoneKey {
    let origin: Name = "tld.".parse().unwrap();
    let profile = Profile::default_profile();
    ZoneKey::generate(
        &origin,
        alg,
        KeyRole::Csk,
        &profile,
        &Provider::default(),
        3600,
    )
    .unwrap()
}

fn primitives(c: &mut Criterion) {
    let provider = Provider::default();
    let message = [0x5au8; 200];
    let mut sign = c.benchmark_group("sign");
    for &alg in PRIMITIVES {
        let k = key(alg);
        sign.bench_function(BenchmarkId::from_parameter(alg.name()), |b| {
            b.iter(|| k.key.sign(&message).unwrap())
        });
    }
    sign.finish();
    let mut verify = c.benchmark_group("verify");
    for &alg in PRIMITIVES {
        let k = key(alg);
        let sig = k.key.sign(&message).unwrap();
        let scheme = provider.scheme(alg).unwrap();
        verify.bench_function(BenchmarkId::from_parameter(alg.name()), |b| {
            b.iter(|| scheme.verify(k.key.public_key(), &message, &sig).unwrap())
        });
    }
    verify.finish();
}

fn zone_signing(c: &mut Criterion) {
    let origin: Name = "tld.".parse().unwrap();
    let text = delegations_zone("tld.", 1500, 0);
    let records = ZoneFileReader::new(None, None)
        .read_str(&text, "gen")
        .unwrap();
    let zone = Zone::from_records(origin, records).unwrap();
    let policy = SigningPolicy {
        inception: 1_750_000_000,
        expiration: 1_760_000_000,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("sign_zone_1500_delegations");
    group.sample_size(10);
    for &alg in ZONE_ALGORITHMS {
        let k = [key(alg)];
        for threads in [1, cores] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let id = BenchmarkId::new(alg.name(), format!("{threads}-threads"));
            group.bench_function(id, |b| {
                b.iter(|| {
                    let mut z = zone.clone();
                    pool.install(|| sign_zone(&mut z, &k, &policy, &|_, _| {}).unwrap())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, primitives, zone_signing);
criterion_main!(benches);

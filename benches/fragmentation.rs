//! Criterion: the CPU cost of application-layer fragmentation of an ML-DSA-44-sized DNSKEY
//! answer (two 1312-byte keys, one 2420-byte RRSIG) within 1232 bytes — server side (ARRF
//! first response and every fragment response; QBF every fragment) and client side
//! (reassembly from wire bytes). Key and signature bytes are synthetic: fragmentation never
//! looks inside them.
//!
//! Run: `cargo bench -p pqdns-bench --bench fragmentation`.

// `criterion_group!` defines an undocumented public function in this bench binary.
#![allow(missing_docs)]

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use pqdns_core::dnssec::Profile;
use pqdns_core::frag::arrf::{self, Key, Limits, Progress, Reassembler, DEFAULT_RRFRAG_TYPE};
use pqdns_core::frag::edns::DEFAULT_CODE;
use pqdns_core::frag::qbf;
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, FLAG_AA, FLAG_QR};
use pqdns_core::{Class, Name, Record, RrType};

const BUDGET: usize = 1232;
const T: RrType = DEFAULT_RRFRAG_TYPE;

fn answer() -> Message {
    let apex: Name = "bench.".parse().unwrap();
    let dnskey = |flags: u8| {
        let mut rdata = vec![1, flags, 3, 18];
        rdata.extend((0..1312u32).map(|i| i as u8));
        Record {
            owner: apex.clone(),
            rtype: RrType::DNSKEY,
            class: Class::IN,
            ttl: 300,
            rdata,
        }
    };
    let mut sig = vec![
        0, 48, 18, 1, 0, 0, 1, 44, 0x68, 0, 0, 0, 0x67, 0, 0, 0, 0x12, 0x34,
    ];
    sig.extend_from_slice(apex.as_wire());
    sig.extend((0..2420u32).map(|i| (i * 7) as u8));
    let rrsig = Record {
        owner: apex.clone(),
        rtype: RrType::RRSIG,
        class: Class::IN,
        ttl: 300,
        rdata: sig,
    };
    let mut m = Message::query(
        7,
        Question {
            qname: apex.clone(),
            qtype: RrType::DNSKEY,
            qclass: Class::IN,
        },
        false,
        Some(Edns::dnssec_ok(1232)),
    );
    m.flags = FLAG_QR | FLAG_AA;
    m.answers = vec![dnskey(1), dnskey(0), rrsig];
    m
}

fn fragmentation(c: &mut Criterion) {
    let full = answer();
    let question = full.questions[0].clone();
    let edns = full.edns.clone().unwrap();
    let first = arrf::first_response(&full, BUDGET, T).unwrap();
    let first_wire = first.to_wire_with(Some(T));
    let mut r = Reassembler::new(Limits::default(), T);
    let key = Key {
        server: "127.0.0.1:53".parse().unwrap(),
        id: 7,
        question: question.clone(),
    };
    let Progress::Missing(wanted) = r.start(key.clone(), first.clone(), Instant::now()).unwrap()
    else {
        panic!("the answer needs fragments")
    };
    let requests: Vec<Message> = arrf::plan_requests(&wanted, BUDGET)
        .iter()
        .map(|g| arrf::fragment_request(7, &question, g, edns.clone(), T, DEFAULT_CODE))
        .collect();
    let responses: Vec<Vec<u8>> = requests
        .iter()
        .map(|q| {
            arrf::answer_request(&full, q, BUDGET, T)
                .unwrap()
                .to_wire_with(Some(T))
        })
        .collect();
    r.abandon(&key);

    let mut g = c.benchmark_group("fragmentation");
    g.bench_function("arrf server: first + all fragment responses", |b| {
        b.iter(|| {
            let mut n = arrf::first_response(&full, BUDGET, T)
                .unwrap()
                .to_wire_with(Some(T))
                .len();
            for q in &requests {
                n += arrf::answer_request(&full, q, BUDGET, T)
                    .unwrap()
                    .to_wire_with(Some(T))
                    .len();
            }
            n
        })
    });
    g.bench_function("arrf client: reassemble from wire", |b| {
        b.iter(|| {
            let now = Instant::now();
            let first = Message::parse_with(&first_wire, Some(T)).unwrap();
            let mut p = r.start(key.clone(), first, now).unwrap();
            for w in &responses {
                p = r
                    .add(&key, &Message::parse_with(w, Some(T)).unwrap(), now)
                    .unwrap();
            }
            assert!(matches!(p, Progress::Complete(_)));
        })
    });
    let profile = Profile::default_profile();
    let count = qbf::fragment_count(&full, BUDGET, &profile).unwrap();
    let frags: Vec<Vec<u8>> = (1..=count)
        .map(|k| qbf::fragment(&full, k, BUDGET, &profile).unwrap().to_wire())
        .collect();
    g.bench_function("qbf server: all fragments", |b| {
        b.iter(|| {
            (1..=count)
                .map(|k| {
                    qbf::fragment(&full, k, BUDGET, &profile)
                        .unwrap()
                        .to_wire()
                        .len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("qbf client: reassemble from wire", |b| {
        b.iter(|| {
            let parsed: Vec<Message> = frags.iter().map(|f| Message::parse(f).unwrap()).collect();
            qbf::reassemble(&parsed).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, fragmentation);
criterion_main!(benches);

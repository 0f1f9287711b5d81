//! Criterion: pqdns-server's answer engine (`answer::respond`: parse the query, look up the
//! zone, write the response with RRSIGs and NSEC3 denial) per DNSSEC algorithm, for a positive
//! answer and an NXDOMAIN, without and with the DO bit, over UDP (EDNS 1232) and a stream.
//!
//! Run: `cargo bench -p pqdns-bench --bench response`.

// `criterion_group!` defines an undocumented public function in this bench binary.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pqdns_bench::query_source::{parse_query, query_wire, QueryOptions};
use pqdns_server::answer::{respond, Transport};
use pqdns_server::zones::{load_all, ZoneSource};
use std::net::{IpAddr, Ipv4Addr};

const ALGORITHMS: &[&str] = &["ECDSAP256SHA256", "ED25519", "ML-DSA-44", "Falcon-512"];

/// The client address the engine answers.
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn response(c: &mut Criterion) {
    let mut group = c.benchmark_group("respond");
    group.throughput(Throughput::Elements(1));
    for alg in ALGORITHMS {
        let dir = tempfile::tempdir().unwrap();
        let zone = dir.path().join("zone.toml");
        std::fs::write(
            dir.path().join("zone.db"),
            pqdns_bench::server_process::zone_text(),
        )
        .unwrap();
        std::fs::write(
            &zone,
            format!(
                "origin = \"bench.test.\"\ndefault_ttl = 3600\nfile = \"zone.db\"\n[signing]\n\
                 algorithms = [\"{alg}\"]\nkeys = \"csk\"\ndenial = \"nsec3\"\nkey_directory = \"keys\"\n"
            ),
        )
        .unwrap();
        let (catalog, _) = load_all(&[ZoneSource::File(zone)], pqdns_core::time::now()).unwrap();
        let mut out = Vec::with_capacity(65_535);
        for (label, qname, dnssec_ok) in [
            ("www-A", "www.bench.test.", false),
            ("www-A-DO", "www.bench.test.", true),
            ("nxdomain-DO", "nothere.bench.test.", true),
        ] {
            let edns = QueryOptions {
                udp_payload: Some(1232),
                dnssec_ok,
                recursion_desired: false,
            };
            let wire = query_wire(&parse_query(qname, Some("A")).unwrap(), 0x4242, edns);
            for (t, transport) in [("udp", Transport::Udp), ("stream", Transport::Tcp)] {
                let id = BenchmarkId::new(format!("{label}/{t}"), alg);
                group.bench_with_input(id, &wire, |b, wire| {
                    b.iter(|| respond(&catalog, wire, transport, LOCALHOST, 1232, &mut out, 0).len)
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, response);
criterion_main!(benches);

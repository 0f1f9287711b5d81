//! Issue 27, must-show 2: pqdns as the bump-in-the-wire signer of an operator's fleet, every
//! hop over TCP with TSIG (RFC 8945):
//!
//! BIND 9.18 `named` (hidden primary, unsigned zone, changed by `nsupdate`)
//!   → pqdns-server (secondary with `[signing]`: inline signing, ECDSA P-256 + ML-DSA-44)
//!   → NSD 4.6 and Knot 3.2 (secondaries of pqdns, by its NOTIFY and IXFR).
//!
//! A record added at named by UPDATE is served by NSD within 5 s (signed: the checks below); the pqdns resolver,
//! forwarding to NSD with the DS of pqdns's keys as its trust anchor, gets Secure for it;
//! delv (BIND's validator, from the ECDSA DS alone) fully validates it; the zone as NSD
//! transfers it (AXFR) passes `ldns-verify-zone` (the ECDSA signatures and the NSEC chain;
//! ldns passes over the algorithm-18 RRSIGs it does not know); Knot serves the same serial.
//!
//! Every wait is a bounded polling loop; every peer is killed on drop.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{delv, name, runtime, sep_ds_records, serve_toml, udp_client};
use pqdns_core::wire::tsig::{Algorithm, Key, KeyRing};
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver, TrustAnchors};
use pqdns_test_support::ports::free_dual_port;
use pqdns_test_support::secondaries::{
    query_wire, soa_serial, udp_query, Knot, NamedPrimary, Nsd, ORIGIN,
};

const KEY_NAME: &str = "transfer-key.";
const NEW: &str = "new.pqdns.test.";

/// Polls `server` until it answers `new.pqdns.test. A` (over UDP without DO: with its two
/// signatures the answer does not fit 1232 bytes), up to 10 s; the time it took. Only the
/// signed zone reaches the secondaries, and the validations below check the signatures.
fn wait_for_new(server: SocketAddr) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let answer = udp_query(server, &query_wire(NEW, RrType::A, false));
        if answer.is_some_and(|m| m.answers.iter().any(|r| r.rtype == RrType::A)) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{server}: no {NEW} A within 10 s");
}

#[test]
fn an_unsigned_primary_reaches_nsd_and_knot_signed_through_pqdns() {
    let key = Key::generate(&KEY_NAME.parse().unwrap(), Algorithm::HmacSha256).unwrap();
    let port = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let (named_port, pqdns, nsd_port, knot_port) = (
        free_dual_port(),
        port(free_dual_port()),
        free_dual_port(),
        free_dual_port(),
    );
    let zone = format!(
        "$ORIGIN {ORIGIN}\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\n\
         ns1 A 127.0.0.1\nwww A 192.0.2.80\n"
    );
    let named = NamedPrimary::start(ORIGIN, &zone, named_port, pqdns, &key);

    // pqdns: a secondary of named that signs what it transfers.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.toml");
    std::fs::write(
        &file,
        format!(
            "origin = \"{ORIGIN}\"\n[secondary]\nprimaries = [\"127.0.0.1:{named_port} key {KEY_NAME}\"]\n\
             transfer_timeout = \"10s\"\n[signing]\nalgorithms = [\"ECDSAP256SHA256\", \"ML-DSA-44\"]\n\
             keys = \"csk\"\nserial = \"unixtime\"\nkey_directory = \"keys\"\n"
        ),
    )
    .unwrap();
    let (nsd_addr, knot_addr) = (port(nsd_port), port(knot_port));
    let mut ring = KeyRing::new();
    ring.insert(key.clone());
    let served = serve_toml(dir, file, false, |s| {
        (s.udp, s.tcp) = (vec![pqdns], vec![pqdns]);
        s.tsig_keys = Arc::new(ring);
        s.axfr_keys = vec![key.name().clone()];
        s.notify = vec![nsd_addr, knot_addr];
        s.notify_keys = vec![
            (nsd_addr, key.name().clone()),
            (knot_addr, key.name().clone()),
        ];
    });
    let signed = |m: &pqdns_core::message::Message| soa_serial(m).filter(|&s| s > 1_000_000_000);
    let start = Instant::now();
    let serial1 = loop {
        let soa = udp_query(pqdns, &query_wire(ORIGIN, RrType::SOA, false));
        if let Some(serial) = soa.as_ref().and_then(signed) {
            break serial;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "pqdns serves no signed copy: {soa:?}\n{}",
            named.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut nsd = Nsd::start(pqdns, nsd_port, Some(&key));
    let mut knot = Knot::start(pqdns, knot_port, Some(&key));
    nsd.wait_for_serial(serial1);
    knot.wait_for_serial(serial1);

    // A change at the hidden primary, by UPDATE: signed at NSD within 5 s.
    let changed = Instant::now();
    named.nsupdate(&key, &[&format!("update add {NEW} 300 A 192.0.2.99")]);
    wait_for_new(nsd.addr);
    let took = changed.elapsed();
    eprintln!("{NEW} served signed by NSD {took:?} after nsupdate started");
    assert!(took < Duration::from_secs(5), "{took:?}\n{}", nsd.log());
    wait_for_new(knot.addr);
    let serial2 =
        soa_serial(&udp_query(pqdns, &query_wire(ORIGIN, RrType::SOA, false)).unwrap()).unwrap();
    assert!(serial2 > serial1, "{serial2} after {serial1}");
    nsd.wait_for_serial(serial2);
    knot.wait_for_serial(serial2);

    // The trust anchors: the DS of pqdns's keys (both algorithms; the ECDSA one for delv).
    let catalog = served.catalog();
    let ds = sep_ds_records(&catalog.zones().next().unwrap().zone);
    let mut anchors = TrustAnchors::default();
    for r in &ds {
        anchors.add_ds(r.owner.clone(), r.rdata.clone());
    }
    let resolver = Resolver::new(
        Config::new(Mode::Forward(nsd.addr), anchors),
        udp_client(Duration::from_secs(3)),
    );
    let answer = runtime()
        .block_on(resolver.resolve(&name(NEW), RrType::A))
        .unwrap();
    assert!(
        answer.status().is_secure(),
        "pqdns resolver via NSD: {answer:?}"
    );

    let ecdsa = ds
        .iter()
        .find(|r| r.rdata.get(2) == Some(&13))
        .expect("an ECDSA P-256 DS");
    let out = delv(nsd.dir.path(), nsd.addr, ecdsa, NEW, "A");
    assert!(out.contains("fully validated"), "delv via NSD:\n{out}");

    // The zone as NSD transfers it, verified by ldns from the ECDSA DS.
    let key_file = nsd.dir.path().join("transfer.key");
    std::fs::write(&key_file, pqdns_core::tsig_keyfile::format(&key).as_bytes()).unwrap();
    let axfr = std::process::Command::new("timeout")
        .args(["30", "dig", "+onesoa", "+nocmd", "+nostats", "-k"])
        .arg(&key_file)
        .arg(format!("@{}", nsd.addr.ip()))
        .args(["-p", &nsd_port.to_string(), ORIGIN, "AXFR"])
        .output()
        .expect("dig (bind9-dnsutils)");
    let text = String::from_utf8_lossy(&axfr.stdout);
    let records: String = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty() && !l.contains("\tTSIG\t"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(records.contains(NEW) && records.contains("RRSIG"), "{text}");
    let zone_file = nsd.dir.path().join("from-nsd.zone");
    std::fs::write(&zone_file, records).unwrap();
    let anchor = nsd.dir.path().join("ecdsa.ds");
    std::fs::write(&anchor, format!("{ecdsa}\n")).unwrap();
    let out = std::process::Command::new("ldns-verify-zone")
        .arg("-k")
        .arg(&anchor)
        .arg(&zone_file)
        .output()
        .expect("ldns-verify-zone (ldnsutils)");
    assert!(
        out.status.success(),
        "ldns-verify-zone on NSD's AXFR:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

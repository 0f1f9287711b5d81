//! Online signing and compact denial of existence (issue 30, RFC 9824) over the wire: an
//! online zone's answers carry RRSIGs made when first asked for, one per algorithm; a name
//! that does not exist is NODATA with an NSEC at QNAME listing NXNAME (NXDOMAIN, with CO
//! echoed, for a query that sets CO; plain NXDOMAIN without DO); a query for NXNAME itself is
//! FORMERR (RFC 9824 §3.4); a cached signature is the same bytes on the next answer (ECDSA
//! signatures are randomised: a new one would differ); with no signing task free, a query
//! needing a new signature is SERVFAIL at once while cached and pre-signed answers go on; a
//! flood of new names does not stop answers to a cached name; a zone transfer carries the
//! unsigned zone, as Knot's onlinesign transfers it. Validation by pqdns's
//! validator, delv and unbound: pqdns-resolver's tests/online.rs.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use common::secondary::{query_wire, start_knotd, udp_query};
use common::{dig, http_get, parse_response, require, KillOnDrop, TestServer, ORIGIN, RECORDS};
use pqdns_core::message::Message;
use pqdns_core::rdata::read_type_bitmap;
use pqdns_core::wire::{Rcode, EDNS_CO};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType};
use pqdns_server::acl::AllowList;
use pqdns_server::settings::Settings;
use pqdns_test_support::ports::free_dual_port;

/// The test zone's records and one under an empty non-terminal (`ent`).
fn records() -> String {
    format!("{RECORDS}\nb.ent TXT \"x\"\n")
}

/// Serves the test zone signed online with `algorithms` (a CSK each).
fn online(algorithms: &[&str], adjust: impl FnOnce(&mut Settings)) -> TestServer {
    online_with(algorithms, "", adjust)
}

/// As [`online`], with `signing` (TOML lines) added to the `[signing]` table.
fn online_with(
    algorithms: &[&str],
    signing: &str,
    adjust: impl FnOnce(&mut Settings),
) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
    let toml = format!(
        "origin = \"{ORIGIN}\"\ndefault_ttl = 3600\nrecords = '''{}'''\n\
         [signing]\nalgorithms = [{}]\nkeys = \"csk\"\nmode = \"online\"\nkey_directory = \"keys\"\n\
         {signing}",
        records(),
        algs.join(", ")
    );
    std::fs::write(dir.path().join("zone.toml"), toml).unwrap();
    TestServer::start_in(dir, |s| {
        // UDP answers whole: no response-rate limit, no amplification limit (3x the query).
        s.rrl.rate = 0;
        s.amplification_limit = 0;
        s.metrics = Some("127.0.0.1:0".parse().unwrap());
        adjust(s);
    })
}

fn ask(server: &TestServer, qname: &str, qtype: RrType, dnssec: bool) -> Message {
    let wire = query_wire(&format!("{qname}{ORIGIN}"), qtype, dnssec);
    udp_query(server.udp(), &wire).expect("an answer within 2 s")
}

/// One query over TCP (2-byte length prefix, RFC 1035 §4.2.2).
fn ask_tcp(server: &TestServer, qname: &str, qtype: RrType) -> Message {
    let wire = query_wire(&format!("{qname}{ORIGIN}"), qtype, true);
    let mut s = TcpStream::connect(server.tcp()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&(wire.len() as u16).to_be_bytes()).unwrap();
    s.write_all(&wire).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf).unwrap();
    parse_response(&buf)
}

fn rrsigs(records: &[pqdns_core::Record], covered: RrType) -> Vec<Vec<u8>> {
    records
        .iter()
        .filter(|r| r.rtype == RrType::RRSIG && r.rdata[..2] == covered.0.to_be_bytes())
        .map(|r| r.rdata.clone())
        .collect()
}

/// The NSEC of a compact denial: owner, next name, types.
fn nsec(m: &Message) -> (Name, Name, Vec<RrType>) {
    let r = m
        .authority
        .iter()
        .find(|r| r.rtype == RrType::NSEC)
        .expect("an NSEC in the authority section");
    let (next, used) = Name::read_uncompressed(&r.rdata).unwrap();
    (
        r.owner.clone(),
        next,
        read_type_bitmap(&r.rdata[used..]).unwrap(),
    )
}

fn metric(server: &TestServer, name: &str) -> u64 {
    let addr = server.handle().addrs.metrics.unwrap();
    let text = http_get(addr, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

#[test]
fn online_answers_and_compact_denials() {
    for (algorithms, sigs) in [
        (&["ECDSAP256SHA256"][..], 1),
        (&["ML-DSA-44"][..], 1),
        (&["ECDSAP256SHA256", "ML-DSA-44"][..], 2),
    ] {
        let server = online(algorithms, |_| {});
        let ctx = format!("{algorithms:?}");
        // Over TCP: ML-DSA-44 answers exceed 1232 bytes.
        let www = ask_tcp(&server, "www.", RrType::A);
        assert_eq!(www.rcode(), Rcode::NOERROR, "{ctx}");
        assert_eq!(rrsigs(&www.answers, RrType::A).len(), sigs, "{ctx}");
        // A name that does not exist: NODATA, SOA and the NSEC at QNAME, each signed.
        let nope = ask_tcp(&server, "nope.", RrType::A);
        assert_eq!(nope.rcode(), Rcode::NOERROR, "{ctx}");
        assert!(nope.answers.is_empty(), "{ctx}");
        let (owner, next, types) = nsec(&nope);
        assert_eq!(owner.to_string(), format!("nope.{ORIGIN}"), "{ctx}");
        assert_eq!(next.as_wire()[..2], [1, 0], "next name \\000.nope: {next}");
        assert_eq!(&next.as_wire()[2..], owner.as_wire(), "{ctx}");
        assert_eq!(types, [RrType::RRSIG, RrType::NSEC, RrType::NXNAME]);
        assert_eq!(rrsigs(&nope.authority, RrType::NSEC).len(), sigs, "{ctx}");
        assert_eq!(rrsigs(&nope.authority, RrType::SOA).len(), sigs, "{ctx}");
        assert_eq!(
            nope.authority.len(),
            2 + 2 * sigs,
            "SOA, NSEC and RRSIGs only"
        );
        // NODATA at a name that exists: its types; at an empty non-terminal: none.
        let (_, _, types) = nsec(&ask_tcp(&server, "www.", RrType::TXT));
        let www_types = [RrType::A, RrType::AAAA, RrType::RRSIG, RrType::NSEC];
        assert_eq!(types, www_types, "{ctx}");
        let (owner, _, types) = nsec(&ask_tcp(&server, "ent.", RrType::A));
        assert_eq!(owner.to_string(), format!("ent.{ORIGIN}"));
        assert_eq!(types, [RrType::RRSIG, RrType::NSEC], "{ctx}");
        // A wildcard answer is signed as QNAME's own: labels = QNAME's (4), no NSEC.
        let wild = ask_tcp(&server, "q.apps.", RrType::TXT);
        let sig = &rrsigs(&wild.answers, RrType::TXT)[0];
        assert_eq!(sig[3], 4, "{ctx}: RRSIG labels");
        assert!(wild.authority.iter().all(|r| r.rtype != RrType::NSEC));
        // A wildcard NODATA: the NSEC at QNAME with the wildcard's types.
        let (owner, _, types) = nsec(&ask_tcp(&server, "q.apps.", RrType::A));
        assert_eq!(owner.to_string(), format!("q.apps.{ORIGIN}"));
        assert_eq!(types, [RrType::TXT, RrType::RRSIG, RrType::NSEC], "{ctx}");
        // An insecure delegation: the NSEC at the cut lists NS, not DS.
        let referral = ask_tcp(&server, "x.legacy.", RrType::A);
        let (owner, _, types) = nsec(&referral);
        assert_eq!(owner.to_string(), format!("legacy.{ORIGIN}"));
        assert_eq!(types, [RrType::NS, RrType::RRSIG, RrType::NSEC], "{ctx}");
        assert!(referral.answers.is_empty() && rrsigs(&referral.authority, RrType::NS).is_empty());
    }
}

#[test]
fn co_restores_nxdomain_and_plain_queries_get_nxdomain() {
    let server = online(&["ECDSAP256SHA256"], |_| {});
    let mut query =
        Message::parse(&query_wire(&format!("nope.{ORIGIN}"), RrType::A, true)).unwrap();
    query.edns.as_mut().unwrap().flags |= EDNS_CO;
    let m = udp_query(server.udp(), &query.to_wire()).unwrap();
    assert_eq!(m.rcode(), Rcode::NXDOMAIN, "RFC 9824 §5: restored for CO");
    assert_ne!(m.edns.as_ref().unwrap().flags & EDNS_CO, 0, "CO echoed");
    assert!(nsec(&m).2.contains(&RrType::NXNAME));
    let plain = ask(&server, "nope.", RrType::A, false);
    assert_eq!(plain.rcode(), Rcode::NXDOMAIN, "no DO: nothing to sign");
    assert!(plain.authority.iter().all(|r| r.rtype == RrType::SOA));
    let with_do = ask(&server, "nope.", RrType::A, true);
    assert_eq!(with_do.rcode(), Rcode::NOERROR);
    assert_eq!(with_do.edns.as_ref().unwrap().flags & EDNS_CO, 0);
    // RFC 9824 §3.4: a query for the NXNAME meta-type itself is FORMERR.
    let nxname = ask(&server, "www.", RrType::NXNAME, true);
    assert_eq!(nxname.rcode(), Rcode::FORMERR);
}

/// The second answer (over TCP: not a replay of the UDP one) carries the same RRSIG bytes,
/// counted as a cache hit; ECDSA signing is randomised, so new ones would differ.
#[test]
fn a_cached_signature_is_the_same_bytes() {
    let server = online(&["ECDSAP256SHA256"], |_| {});
    let udp = ask(&server, "www.", RrType::A, true);
    let hits = metric(&server, "pqdns_online_signature_cache_hits_total");
    let tcp = ask_tcp(&server, "www.", RrType::A);
    assert_eq!(
        rrsigs(&udp.answers, RrType::A),
        rrsigs(&tcp.answers, RrType::A)
    );
    assert!(metric(&server, "pqdns_online_signature_cache_hits_total") > hits);
    assert_eq!(
        metric(&server, "pqdns_online_signatures_total"),
        1,
        "signed once"
    );
}

/// No signing task at all (an injected pool of 0): a query needing a new signature is
/// SERVFAIL at once and counted; queries without DO and the pre-signed DNSKEY RRset are
/// answered.
#[test]
fn a_saturated_signing_pool_gives_servfail_not_a_stall() {
    let server = online(&["ECDSAP256SHA256"], |s| {
        s.online_signing.signing_tasks = 0;
    });
    let started = std::time::Instant::now();
    for qname in ["www.", "nope.", "ftp."] {
        assert_eq!(
            ask(&server, qname, RrType::A, true).rcode(),
            Rcode::SERVFAIL
        );
    }
    assert!(started.elapsed() < Duration::from_secs(2), "at once");
    assert_eq!(metric(&server, "pqdns_online_signing_saturated_total"), 3);
    assert_eq!(
        ask(&server, "www.", RrType::A, false).rcode(),
        Rcode::NOERROR
    );
    let dnskey = ask(&server, "", RrType::DNSKEY, true);
    assert_eq!(dnskey.rcode(), Rcode::NOERROR);
    assert_eq!(rrsigs(&dnskey.answers, RrType::DNSKEY).len(), 1);
}

/// A random-subdomain flood (every query a new name, so a new NSEC signature) with one
/// signing task and no prepared answers: every query for a cached name in between is
/// answered NOERROR with its RRSIG.
#[test]
fn a_random_subdomain_flood_does_not_stop_cached_answers() {
    let server = online(&["ECDSAP256SHA256"], |s| {
        s.answer_cache_bytes = 0;
        s.online_signing.signing_tasks = 1;
    });
    assert_eq!(
        ask(&server, "www.", RrType::A, true).rcode(),
        Rcode::NOERROR
    );
    let flood = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cached = 0;
    for round in 0..20 {
        for i in 0..25 {
            let q = query_wire(&format!("r{round}x{i}.{ORIGIN}"), RrType::A, true);
            flood.send_to(&q, server.udp()).unwrap();
        }
        let m = ask(&server, "www.", RrType::A, true);
        assert_eq!(m.rcode(), Rcode::NOERROR, "round {round}");
        cached += rrsigs(&m.answers, RrType::A).len();
    }
    assert_eq!(cached, 20);
    // The flood got answers too (signed, or SERVFAIL when the task was busy).
    flood
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let answered = (0..500)
        .take_while(|_| flood.recv_from(&mut buf).is_ok())
        .count();
    assert!(answered > 0);
}

/// The records of an AXFR of `zone` from `server` as dig prints them, read back by pqdns
/// (the closing SOA left out), sorted.
fn axfr(server: std::net::SocketAddr, zone: &str) -> Vec<pqdns_core::Record> {
    let out = dig(server, &["+tcp", zone, "AXFR"]);
    let text: String = out
        .text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let mut records = ZoneFileReader::new(None, None)
        .read_str(&text, "dig AXFR")
        .unwrap_or_else(|e| panic!("{e}: {}", out.text));
    assert_eq!(
        records.last().map(|r| r.rtype),
        Some(RrType::SOA),
        "{}",
        out.text
    );
    records.pop();
    records.sort_by(|a, b| (&a.owner, a.rtype, &a.rdata).cmp(&(&b.owner, b.rtype, &b.rdata)));
    records
}

/// A zone transfer of an online zone carries the zone's unsigned data: the records Knot's
/// online signing (knotd 3.2 with `mod-onlinesign`, Debian `knot`) transfers for the same
/// zone, record for record. No DNSKEY, RRSIG or NSEC: a secondary signs online itself, and
/// no secondary is handed a zone signed in part (before, the apex DNSKEY RRset went signed
/// with the rest unsigned).
#[test]
fn a_transfer_carries_the_unsigned_zone_as_knots_onlinesign_does() {
    let server = online_with(&["ECDSAP256SHA256"], "serial = \"keep\"\n", |s| {
        s.axfr_allow = AllowList::new(vec!["127.0.0.1".parse().unwrap()]);
    });
    // Queries get the DNSKEY RRset signed.
    let dnskey = ask_tcp(&server, "", RrType::DNSKEY);
    assert_eq!(rrsigs(&dnskey.answers, RrType::DNSKEY).len(), 1);
    let ours = axfr(server.tcp(), ORIGIN);

    let knotd = require("knotd", "knot");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(
        dir.path().join("online.zone"),
        format!("$ORIGIN {ORIGIN}\n$TTL 3600\n{}", records()),
    )
    .unwrap();
    let port = free_dual_port();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n\
         control:\n  listen: \"{d}/knot.sock\"\n\
         database:\n  storage: \"{d}\"\n\
         log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
         acl:\n  - id: transfer\n    address: 127.0.0.1\n    action: transfer\n\
         mod-onlinesign:\n  - id: default\n\
         template:\n  - id: default\n    storage: \"{d}\"\n\
         zone:\n  - domain: {ORIGIN}\n    file: \"{d}/online.zone\"\n    \
         module: mod-onlinesign/default\n    acl: transfer\n"
    );
    let mut knot = KillOnDrop(start_knotd(&knotd, dir.path(), &conf));
    let knot_addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Up when it answers DNSKEY signed (online signing working, keys made).
    let mut up = None;
    for _ in 0..80 {
        if let Some(status) = knot.0.try_wait().unwrap() {
            panic!("knotd exited ({status})");
        }
        let q = query_wire(ORIGIN, RrType::DNSKEY, true);
        if let Some(m) = udp_query(knot_addr, &q).filter(|m| m.rcode() == Rcode::NOERROR) {
            up = Some(m);
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let log = std::fs::read_to_string(dir.path().join("knot.log")).unwrap_or_default();
    let up = up.unwrap_or_else(|| panic!("knotd does not serve the zone:\n{log}"));
    assert_eq!(rrsigs(&up.answers, RrType::DNSKEY).len(), 1, "{log}");
    let theirs = axfr(knot_addr, ORIGIN);

    assert_eq!(ours, theirs, "pqdns-server's transfer, then knotd's");
    assert!(ours.len() >= 15, "{} records", ours.len());
    let signer_types = [RrType::DNSKEY, RrType::RRSIG, RrType::NSEC, RrType::CDS];
    assert!(ours.iter().all(|r| !signer_types.contains(&r.rtype)));
}

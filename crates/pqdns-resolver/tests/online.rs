//! A zone pqdns-server signs online, with compact denial of existence (issue 30 must-show 3,
//! RFC 9824), validates: in pqdns's validator for ECDSA P-256 and ML-DSA-44 (positive,
//! wildcard and CNAME answers Secure; a name that does not exist a Secure NODATA whose proof
//! says the name does not exist, NXNAME; NODATA at a name and at an empty non-terminal
//! Secure, without it), in BIND's delv and in unbound 1.17 (ECDSA; neither knows NXNAME: the
//! compact NXDOMAIN is a validated NODATA to them). delv and unbound exit 0 or answer even
//! when validation fails: their outputs are checked for "fully validated" and the AD bit.
//! And the pqdns-resolver service in front of the zone answers each client the RCODE RFC
//! 9824 §5 gives it: NXDOMAIN without DO, NXDOMAIN with CO echoed for DO and CO, NOERROR
//! with the NXNAME proof for DO alone.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::service::Service;
use common::{delv, name, serve_toml, udp_client, Served};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, Rcode, EDNS_CO, EDNS_DO, FLAG_AD};
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver};
use pqdns_test_support::peers::{dig, start_unbound_stub, KillOnDrop};
use pqdns_test_support::ports::free_dual_port;

const ORIGIN: &str = "online.pqdns.";

const RECORDS: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                       www A 192.0.2.2\nalias CNAME www\n*.w TXT \"wild\"\nb.ent TXT \"b\"\n";

/// Serves the zone signed online with `algorithms` (a CSK each).
fn online(algorithms: &[&str]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.toml");
    let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &file,
        format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 300\nrecords = '''\n{RECORDS}'''\n[signing]\n\
             algorithms = [{}]\nkeys = \"csk\"\nmode = \"online\"\nkey_directory = \"keys\"\n",
            algs.join(", ")
        ),
    )
    .unwrap();
    serve_toml(dir, file, false, |_| {})
}

#[test]
fn pqdns_validates_online_answers_and_compact_denials() {
    for algorithm in ["ECDSAP256SHA256", "ML-DSA-44"] {
        let served = online(&[algorithm]);
        let resolver = Resolver::new(
            Config::new(Mode::Forward(served.addr), served.anchors.clone()),
            udp_client(Duration::from_secs(3)),
        );
        // (label, type, answered, the proof says the name does not exist)
        for (label, t, answered, nonexistent) in [
            ("www", RrType::A, true, false),
            ("alias", RrType::A, true, false),
            ("x.w", RrType::TXT, true, false),
            ("nope", RrType::A, false, true),
            ("www", RrType::TXT, false, false),
            ("ent", RrType::A, false, false),
            ("x.w", RrType::A, false, false),
        ] {
            let qname = name(&format!("{label}.{ORIGIN}"));
            let a = served.rt.block_on(resolver.resolve(&qname, t)).unwrap();
            let ctx = format!("{algorithm} {qname} {t}");
            assert!(a.status().is_secure(), "{ctx}: {:?}", a.status());
            // The resolver sends CO (RFC 9824 §5.1): the server restores NXDOMAIN.
            let rcode = if nonexistent {
                Rcode::NXDOMAIN
            } else {
                Rcode::NOERROR
            };
            assert_eq!(a.rcode(), rcode, "{ctx}");
            assert_eq!(!a.answers().is_empty(), answered, "{ctx}");
            let says = a.denials().iter().any(|d| d.nonexistent());
            assert_eq!(says, nonexistent, "{ctx}: {:?}", a.denials());
            let compact = a.denials().iter().any(|d| d.compact());
            assert_eq!(compact, nonexistent, "{ctx}: {:?}", a.denials());
        }
    }
}

#[test]
fn delv_validates_an_online_zone() {
    let served = online(&["ECDSAP256SHA256"]);
    let ds = pqdns_core::Record {
        owner: name(ORIGIN),
        rtype: RrType::DS,
        class: pqdns_core::Class::IN,
        ttl: 3600,
        rdata: served.anchors.ds_for(&name(ORIGIN)).unwrap()[0].clone(),
    };
    let d = served.dir.path();
    for (label, t, negative) in [
        ("www", "A", false),
        ("x.w", "TXT", false),
        ("nope", "A", true),
        ("www", "TXT", true),
        ("ent", "A", true),
    ] {
        let out = delv(d, served.addr, &ds, &format!("{label}.{ORIGIN}"), t);
        let expected = if negative {
            "; negative response, fully validated"
        } else {
            "; fully validated"
        };
        assert!(out.contains(expected), "{label} {t}: {out}");
    }
}

#[test]
fn unbound_validates_an_online_zone() {
    let served = online(&["ECDSAP256SHA256"]);
    let d = served.dir.path();
    let anchor = d.join("keys").join(format!("{ORIGIN}ds"));
    let addr = SocketAddr::from(([127, 0, 0, 1], free_dual_port()));
    let _unbound = KillOnDrop(start_unbound_stub(d, addr, ORIGIN, served.addr, &anchor));
    for (label, t, answered) in [
        ("www", "A", true),
        ("x.w", "TXT", true),
        ("nope", "A", false),
        ("www", "TXT", false),
        ("ent", "A", false),
    ] {
        let out = dig(
            addr,
            &["+recurse", "+dnssec", &format!("{label}.{ORIGIN}"), t],
        );
        let ctx = format!("{label} {t}: {}", out.text);
        assert_eq!(out.status(), "NOERROR", "{ctx}");
        assert!(out.has_flag("ad"), "{ctx}");
        assert_eq!(!out.section("ANSWER").is_empty(), answered, "{ctx}");
    }
}

/// One query for `qname`/`qtype` with RD and EDNS flags `flags` (none: no EDNS) to
/// `server` over TCP (over UDP, answers with DNSSEC records exceed the amplification limit
/// for a client without a server cookie and come back truncated), within 20 s.
fn ask(server: SocketAddr, qname: &str, qtype: RrType, flags: Option<u16>) -> Message {
    use std::io::{Read, Write};
    let edns = flags.map(|flags| Edns {
        udp_payload: 4096,
        ext_rcode: 0,
        version: 0,
        flags,
        options: Vec::new(),
    });
    let question = Question {
        qname: name(qname),
        qtype,
        qclass: pqdns_core::Class::IN,
    };
    let query = Message::query(0x3131, question, true, edns).to_wire();
    let mut s = std::net::TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut framed = u16::try_from(query.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf).unwrap();
    Message::parse(&buf).unwrap()
}

/// The pqdns-resolver service forwarding to the online zone (its DS the trust anchor):
/// each client gets the RCODE RFC 9824 §5 says for a validated compact denial, each kind of
/// client twice (the second a cache hit), and names that exist or lack only the type are
/// not touched.
#[test]
fn the_resolver_service_restores_nxdomain_as_rfc_9824_says() {
    let served = online(&["ECDSAP256SHA256"]);
    let d = served.dir.path();
    let anchor = d.join("keys").join(format!("{ORIGIN}ds"));
    let forward = served.addr.to_string();
    let service = Service::start(
        d,
        "compact",
        &[
            "--forward",
            &forward,
            "--trust-anchor",
            anchor.to_str().unwrap(),
        ],
    );
    let nope = format!("nope.{ORIGIN}");
    // (EDNS flags, RCODE, CO in the response, the NXNAME proof in the response)
    let kinds = [
        (None, Rcode::NXDOMAIN, false, false),
        (Some(0), Rcode::NXDOMAIN, false, false),
        (Some(EDNS_DO | EDNS_CO), Rcode::NXDOMAIN, true, true),
        (Some(EDNS_DO), Rcode::NOERROR, false, true),
        (Some(EDNS_CO), Rcode::NXDOMAIN, false, false),
    ];
    for round in 0..2 {
        for (flags, rcode, co, proof) in kinds {
            let m = ask(service.tcp, &nope, RrType::A, flags);
            let ctx = format!("round {round}, EDNS flags {flags:?}: {m:?}");
            assert_eq!(m.rcode(), rcode, "{ctx}");
            assert!(m.answers.is_empty(), "{ctx}");
            assert!(
                m.flags & FLAG_AD != 0 || flags.is_none_or(|f| f & EDNS_DO == 0),
                "{ctx}"
            );
            let edns_flags = m.edns.as_ref().map_or(0, |e| e.flags);
            assert_eq!(edns_flags & EDNS_CO != 0, co, "{ctx}");
            let nxname = m.authority.iter().any(|r| {
                r.rtype == RrType::NSEC
                    && r.owner == name(&nope)
                    && pqdns_core::rdata::to_presentation(r.rtype, &r.rdata).contains("NXNAME")
            });
            assert_eq!(nxname, proof, "{ctx}");
        }
    }
    // A name that exists and a type it lacks: as before, whatever the flags.
    for flags in [None, Some(EDNS_DO), Some(EDNS_DO | EDNS_CO)] {
        let m = ask(service.tcp, &format!("www.{ORIGIN}"), RrType::A, flags);
        assert_eq!((m.rcode(), m.answers.is_empty()), (Rcode::NOERROR, false));
        let m = ask(service.tcp, &format!("www.{ORIGIN}"), RrType::TXT, flags);
        assert_eq!((m.rcode(), m.answers.is_empty()), (Rcode::NOERROR, true));
    }
    // dig (BIND 9.18, which knows no CO) with DO: the NODATA form, validated.
    let out = service.dig(&["+dnssec", &nope, "A"]);
    assert_eq!(out.status(), "NOERROR", "{}", out.text);
    // dig 9.18 prints NXNAME by number.
    let nxname = out.text.contains("TYPE128") || out.text.contains("NXNAME");
    assert!(out.has_flag("ad") && nxname, "{}", out.text);
    let out = service.dig(&["+nodnssec", &nope, "A"]);
    assert_eq!(out.status(), "NXDOMAIN", "{}", out.text);
}

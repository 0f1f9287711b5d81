//! A zone pqdns-server signs online, with compact denial of existence (issue 30 must-show 3,
//! RFC 9824), validates: in pqdns's validator for ECDSA P-256 and ML-DSA-44 (positive,
//! wildcard and CNAME answers Secure; a name that does not exist a Secure NODATA whose proof
//! says the name does not exist, NXNAME; NODATA at a name and at an empty non-terminal
//! Secure, without it), in BIND's delv and in unbound 1.17 (ECDSA; neither knows NXNAME: the
//! compact NXDOMAIN is a validated NODATA to them). delv and unbound exit 0 or answer even
//! when validation fails: their outputs are checked for "fully validated" and the AD bit.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{delv, name, serve_toml, udp_client, Served};
use pqdns_core::wire::Rcode;
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
            assert_eq!(a.rcode(), Rcode::NOERROR, "{ctx}");
            assert_eq!(!a.answers().is_empty(), answered, "{ctx}");
            let says = a.denials().iter().any(|d| d.nonexistent());
            assert_eq!(says, nonexistent, "{ctx}: {:?}", a.denials());
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

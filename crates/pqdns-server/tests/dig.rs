//! The server answers real clients (dig from bind9-dnsutils, kdig from knot-dnsutils) over UDP
//! and TCP, IPv4 and IPv6: authoritative answers, RRSIGs only with DO, NXDOMAIN and NODATA
//! with NSEC3 proofs, referrals with glue and DS (or the no-DS proof), wildcards, CNAMEs,
//! REFUSED outside the zone, NSID and CH TXT identity when configured, and truncation of a post-quantum DNSKEY RRset over UDP.

use crate::common;

use common::{dig, kdig, TestServer, ORIGIN};
use pqdns_server::settings::KxPolicy;
use pqdns_test_support::ports::free_dual_port;

fn name(label: &str) -> String {
    format!("{label}.{ORIGIN}")
}

/// A server whose UDP answers are not cut for clients without a server cookie (dig's first
/// query carries a client cookie only; kdig's none): these tests check the answers.
fn without_amplification_limit() -> TestServer {
    TestServer::start_with(&["ECDSAP256SHA256"], |s| s.amplification_limit = 0)
}

#[test]
fn answers_over_udp_and_tcp() {
    let server = without_amplification_limit();
    let targets = [
        (server.udp(), "+notcp"),
        (server.tcp(), "+tcp"),
        (server.udp6(), "+notcp"),
        (server.tcp6(), "+tcp"),
    ];
    for (addr, transport) in targets {
        let ctx = format!("{transport} {addr}");
        let www = name("www");

        let r = dig(addr, &[transport, "+dnssec", &www, "A"]);
        assert_eq!(r.status(), "NOERROR", "{ctx}");
        assert!(
            r.has_flag("aa") && !r.has_flag("tc"),
            "{ctx}: {:?}",
            r.flags()
        );
        let answer = r.section("ANSWER");
        assert!(
            answer
                .iter()
                .any(|a| a.rtype == "A" && a.rdata == "192.0.2.80"),
            "{ctx}\n{}",
            r.text
        );
        assert!(
            r.has_rrsig("ANSWER", "A"),
            "{ctx}: RRSIG with DO\n{}",
            r.text
        );

        let r = dig(addr, &[transport, "+nodnssec", &www, "A"]);
        assert!(r.section("ANSWER").iter().any(|a| a.rdata == "192.0.2.80"));
        assert!(!r.any_rrsig(), "{ctx}: no RRSIG without DO\n{}", r.text);

        let r = dig(addr, &[transport, "+dnssec", &name("nope"), "A"]);
        assert_eq!(r.status(), "NXDOMAIN", "{ctx}");
        assert!(r.has_flag("aa"));
        let soa = r
            .section("AUTHORITY")
            .into_iter()
            .find(|x| x.rtype == "SOA")
            .expect("SOA");
        assert_eq!(soa.ttl, 300, "{ctx}: negative TTL = min(SOA TTL, MINIMUM)");
        let nsec3 = r
            .section("AUTHORITY")
            .iter()
            .filter(|x| x.rtype == "NSEC3")
            .count();
        assert!(
            nsec3 >= 2,
            "{ctx}: closest encloser proof needs ≥2 NSEC3\n{}",
            r.text
        );
        assert!(
            r.has_rrsig("AUTHORITY", "NSEC3") && r.has_rrsig("AUTHORITY", "SOA"),
            "{ctx}"
        );

        let r = dig(addr, &[transport, "+dnssec", &www, "TXT"]);
        assert_eq!(r.status(), "NOERROR", "{ctx}");
        assert!(r.section("ANSWER").is_empty(), "{ctx}: NODATA");
        assert!(r.has("AUTHORITY", ORIGIN, "SOA"), "{ctx}");
        let nsec3 = r
            .section("AUTHORITY")
            .into_iter()
            .find(|x| x.rtype == "NSEC3")
            .expect("NSEC3");
        assert!(
            nsec3.rdata.contains(" A ") && !nsec3.rdata.contains("TXT"),
            "{ctx}: {}",
            nsec3.rdata
        );

        let r = dig(addr, &[transport, "+dnssec", &name("host.child"), "A"]);
        assert_eq!(r.status(), "NOERROR");
        assert!(!r.has_flag("aa"), "{ctx}: a referral is not authoritative");
        assert!(r.section("ANSWER").is_empty());
        assert!(
            r.has("AUTHORITY", &name("child"), "NS") && r.has("AUTHORITY", &name("child"), "DS"),
            "{ctx}"
        );
        assert!(r.has_rrsig("AUTHORITY", "DS"), "{ctx}");
        let glue = r.section("ADDITIONAL");
        assert!(
            glue.iter()
                .any(|g| g.owner == name("ns1.child") && g.rdata == "192.0.2.53"),
            "{ctx}"
        );

        let r = dig(addr, &[transport, "+dnssec", &name("host.legacy"), "A"]);
        assert!(r.has("AUTHORITY", &name("legacy"), "NS"));
        assert!(!r.has("AUTHORITY", &name("legacy"), "DS"));
        let proof = r
            .section("AUTHORITY")
            .into_iter()
            .find(|x| x.rtype == "NSEC3")
            .expect("no-DS proof");
        assert!(
            proof.rdata.contains("NS") && !proof.rdata.contains("DS"),
            "{ctx}: {}",
            proof.rdata
        );

        let r = dig(addr, &[transport, "+dnssec", &name("x.y.apps"), "TXT"]);
        assert_eq!(r.status(), "NOERROR");
        let txt = r.section("ANSWER");
        assert!(
            txt.iter()
                .any(|t| t.owner == name("x.y.apps") && t.rdata == "\"served by the wildcard\""),
            "{ctx}"
        );
        assert!(r.has_rrsig("ANSWER", "TXT"), "{ctx}");
        assert!(
            r.section("AUTHORITY").iter().any(|x| x.rtype == "NSEC3"),
            "{ctx}: no closer match proof"
        );

        let r = dig(addr, &[transport, &name("ftp"), "A"]);
        let answer = r.section("ANSWER");
        assert_eq!(answer[0].rtype, "CNAME");
        assert_eq!(answer[0].rdata, www);
        assert!(
            answer
                .iter()
                .any(|a| a.owner == www && a.rdata == "192.0.2.80"),
            "{ctx}"
        );

        let r = dig(addr, &[transport, "www.example.org.", "A"]);
        assert_eq!(r.status(), "REFUSED", "{ctx}");
    }
}

#[test]
fn kdig_agrees() {
    let server = without_amplification_limit();
    for (addr, transport) in [(server.udp(), "+notcp"), (server.tcp(), "+tcp")] {
        let r = kdig(addr, &[transport, "+dnssec", &name("www"), "AAAA"]);
        assert_eq!(r.status(), "NOERROR");
        assert!(r.has_flag("aa"));
        assert!(
            r.section("ANSWER")
                .iter()
                .any(|a| a.rdata == "2001:db8::80"),
            "{}",
            r.text
        );
        assert!(r.has_rrsig("ANSWER", "AAAA"), "{}", r.text);
        let r = kdig(addr, &[transport, "+dnssec", &name("a.b.nope"), "A"]);
        assert_eq!(r.status(), "NXDOMAIN", "{}", r.text);
    }
}

#[test]
fn nsid_and_chaos_identity_for_dig_and_kdig() {
    let hidden = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let shown = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.identity.nsid = Some(b"ns1.fra".to_vec());
        s.identity.id = Some("ns1.fra".into());
        s.identity.version = Some("pqdns test".into());
    });
    let nsid_line = |text: &str| {
        text.lines()
            .find(|l| l.to_ascii_uppercase().contains("NSID:"))
            .map(str::to_owned)
    };
    for client in [dig, kdig] {
        let r = client(shown.udp(), &["+nsid", &name("www"), "A"]);
        assert_eq!(r.status(), "NOERROR");
        let line = nsid_line(&r.text).unwrap_or_else(|| panic!("no NSID:\n{}", r.text));
        assert!(line.contains("ns1.fra"), "{line}");
        let r = client(hidden.udp(), &["+nsid", &name("www"), "A"]);
        assert_eq!(nsid_line(&r.text), None, "off by default:\n{}", r.text);

        for (qname, text) in [("id.server.", "ns1.fra"), ("version.bind.", "pqdns test")] {
            let r = client(shown.udp(), &["-c", "CH", "-t", "TXT", qname]);
            assert_eq!(r.status(), "NOERROR", "{}", r.text);
            assert!(
                r.section("ANSWER")
                    .iter()
                    .any(|a| a.rtype == "TXT" && a.rdata.contains(text)),
                "{qname}: {}",
                r.text
            );
            let r = client(hidden.udp(), &["-c", "CH", "-t", "TXT", qname]);
            assert_eq!(r.status(), "REFUSED", "{}", r.text);
        }
    }
}

#[test]
fn large_dnskey_truncates_over_udp_and_is_complete_over_tcp() {
    // UDP and TCP on one port, so dig's own retry over TCP reaches the server.
    let same = std::net::SocketAddr::from(([127, 0, 0, 1], free_dual_port()));
    let server = TestServer::start_with(&["ECDSAP256SHA256", "ML-DSA-44"], |s| {
        s.udp = vec![same];
        s.tcp = vec![same];
    });
    let r = dig(
        server.udp(),
        &[
            "+notcp",
            "+ignore",
            "+dnssec",
            "+bufsize=1232",
            ORIGIN,
            "DNSKEY",
        ],
    );
    assert!(
        r.has_flag("tc"),
        "ML-DSA-44 DNSKEYs exceed 1232 bytes: {:?}\n{}",
        r.flags(),
        r.text
    );
    assert!(
        !r.section("ANSWER").iter().any(|a| a.rtype == "DNSKEY"),
        "no partial RRset:\n{}",
        r.text
    );

    // The server fragments (ARRF by default) only for clients that send the fragmentation
    // option: dig offering the other scheme (QBF, bit 0x02) still gets plain truncation.
    let r = dig(
        server.udp(),
        &[
            "+notcp",
            "+ignore",
            "+dnssec",
            "+ednsopt=65108:02",
            ORIGIN,
            "DNSKEY",
        ],
    );
    assert!(
        r.has_flag("tc") && r.section("ANSWER").is_empty(),
        "{}",
        r.text
    );

    // Unmodified dig over UDP: TC=1, then it retries over TCP and gets everything.
    let udp_then_tcp = dig(server.udp(), &["+dnssec", ORIGIN, "DNSKEY"]);
    assert!(
        udp_then_tcp
            .text
            .contains("Truncated, retrying in TCP mode"),
        "{}",
        udp_then_tcp.text
    );
    let r = dig(server.tcp(), &["+tcp", "+dnssec", ORIGIN, "DNSKEY"]);
    assert!(!r.has_flag("tc"));
    assert_eq!(udp_then_tcp.section("ANSWER"), r.section("ANSWER"));
    let answer = r.section("ANSWER");
    assert_eq!(
        answer.iter().filter(|a| a.rtype == "DNSKEY").count(),
        4,
        "KSK+ZSK per algorithm"
    );
    let sig_algs: Vec<&str> = answer
        .iter()
        .filter(|a| a.rtype == "RRSIG")
        .filter_map(|a| a.rdata.split_whitespace().nth(1))
        .collect();
    assert!(
        sig_algs.contains(&"13") && sig_algs.contains(&"18"),
        "{sig_algs:?}"
    );
}

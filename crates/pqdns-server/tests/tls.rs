//! DNS over TLS and DNS over HTTPS against real clients: dig +tls / +https (bind9-dnsutils),
//! kdig +tls (knot-dnsutils), and a Go crypto/tls client (tests/go, stdlib only) that reports
//! the negotiated key exchange group: X25519MLKEM768 by default, X25519 for a classical-only
//! client, and a refused handshake for that client under the pq-only policy. Also the DoH
//! status codes and Cache-Control of RFC 8484.

mod common;

use common::{dig, go, kdig, TestServer, ORIGIN};
use pqdns_server::settings::KxPolicy;

fn www() -> String {
    format!("www.{ORIGIN}")
}

#[test]
fn dig_and_kdig_over_tls_and_https() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let cases = [
        (server.dot(), "+tls"),
        (server.doh(), "+https"),
        (server.doh(), "+https-get"),
    ];
    for (addr, mode) in cases {
        let r = dig(addr, &[mode, "+dnssec", &www(), "A"]);
        assert_eq!(r.status(), "NOERROR", "{mode}\n{}", r.text);
        assert!(r.has_flag("aa"), "{mode}");
        assert!(
            r.section("ANSWER").iter().any(|a| a.rdata == "192.0.2.80"),
            "{mode}\n{}",
            r.text
        );
        assert!(r.has_rrsig("ANSWER", "A"), "{mode}");
    }
    let ca = format!("+tls-ca={}", server.cert_path().display());
    let r = dig(
        server.dot(),
        &["+tls", &ca, "+tls-hostname=localhost", &www(), "AAAA"],
    );
    assert!(
        r.section("ANSWER")
            .iter()
            .any(|a| a.rdata == "2001:db8::80"),
        "verified DoT\n{}",
        r.text
    );

    let r = kdig(server.dot(), &["+tls", &format!("nope.{ORIGIN}"), "A"]);
    assert_eq!(r.status(), "NXDOMAIN", "{}", r.text);
    let r = kdig(server.dot(), &["+tls", &www(), "A"]);
    assert!(
        r.section("ANSWER").iter().any(|a| a.rdata == "192.0.2.80"),
        "{}",
        r.text
    );
}

#[test]
fn hybrid_group_by_default_and_x25519_for_classical_clients() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let dot = server.dot().to_string();
    let doh = server.doh().to_string();
    for (addr, mode) in [(&dot, "dot"), (&doh, "doh-post")] {
        let (ok, kv, text) = go(&["-addr", addr, "-mode", mode, "-name", &www()]);
        assert!(ok, "{mode}: {text}");
        assert_eq!(kv["curve"], "X25519MLKEM768", "{mode}: {text}");
        assert_eq!(kv["version"], "TLS 1.3");
        assert_eq!(kv["rcode"], "0");
        assert_eq!(kv["answers"], "1");

        let (ok, kv, text) = go(&["-addr", addr, "-mode", mode, "-classical", "-name", &www()]);
        assert!(ok, "{mode} classical: {text}");
        assert_eq!(kv["curve"], "X25519", "{mode}: {text}");
        assert_eq!(kv["answers"], "1");
    }
    let (_, kv, text) = go(&["-addr", &dot, "-mode", "dot"]);
    assert_eq!(kv["alpn"], "dot", "{text}");
}

#[test]
fn pq_only_policy_refuses_classical_clients() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::PqOnly);
    let dot = server.dot().to_string();
    let (ok, kv, text) = go(&["-addr", &dot, "-mode", "dot", "-name", &www()]);
    assert!(ok, "{text}");
    assert_eq!(kv["curve"], "X25519MLKEM768");
    assert_eq!(kv["answers"], "1");
    let (ok, _, text) = go(&["-addr", &dot, "-mode", "dot", "-classical"]);
    assert!(
        !ok,
        "an X25519-only client must not connect under pq-only: {text}"
    );
    assert!(text.contains("handshake"), "{text}");
    let (ok, _, text) = go(&[
        "-addr",
        &server.doh().to_string(),
        "-mode",
        "doh-post",
        "-classical",
    ]);
    assert!(!ok, "{text}");
}

#[test]
fn doh_status_codes_and_cache_control() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let doh = server.doh().to_string();
    let ask = |mode: &str, name: &str| {
        let (ok, kv, text) = go(&["-addr", &doh, "-mode", mode, "-name", name]);
        assert!(ok, "{mode}: {text}");
        (kv, text)
    };
    let (kv, text) = ask("doh-post", &www());
    assert_eq!(kv["status"], "200", "{text}");
    assert_eq!(kv["proto"], "HTTP/2.0", "ALPN h2");
    assert_eq!(kv["content-type"], "application/dns-message");
    assert_eq!(kv["cache-control"], "max-age=3600", "TTL of www A");
    let (kv, text) = ask("doh-get", &www());
    assert_eq!(
        (kv["status"].as_str(), kv["answers"].as_str()),
        ("200", "1"),
        "{text}"
    );
    let (kv, _) = ask("doh-post", &format!("nope.{ORIGIN}"));
    assert_eq!(kv["rcode"], "3");
    assert_eq!(kv["cache-control"], "max-age=300", "negative TTL");
    assert_eq!(ask("doh-badtype", &www()).0["status"], "415");
    assert_eq!(ask("doh-big", &www()).0["status"], "413");
    assert_eq!(ask("doh-badbase64", &www()).0["status"], "400");
}

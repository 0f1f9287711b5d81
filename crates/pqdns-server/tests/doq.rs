//! DNS over QUIC (RFC 9250, issue 15) against independent clients: kdig +quic (Knot 3.2,
//! GnuTLS and ngtcp2) and aioquic (tests/py/doq_client.py), both classical-only TLS stacks,
//! and quic-go (pqdns-test-support's `godoq/`, Go's crypto/tls), which negotiates X25519MLKEM768.
//! Several queries share one connection, each on its own stream; a query whose message ID is
//! not 0 closes the connection (§4.2.1); under `pq-only` both clients are refused and counted
//! with reason no-shared-group.

use crate::common;

use common::{go_doq, http_get, kdig, python_client, TestServer, ORIGIN};
use pqdns_server::settings::KxPolicy;

fn www() -> String {
    format!("www.{ORIGIN}")
}

#[test]
fn kdig_and_aioquic_query_over_quic() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let r = kdig(server.doq(), &["+quic", "+dnssec", &www(), "A"]);
    assert!(r.text.contains(";; QUIC session"), "{}", r.text);
    assert_eq!(r.status(), "NOERROR", "{}", r.text);
    assert!(
        r.section("ANSWER").iter().any(|a| a.rdata == "192.0.2.80"),
        "{}",
        r.text
    );
    assert!(r.has_rrsig("ANSWER", "A"), "{}", r.text);

    let doq = server.doq().to_string();
    let ca = server.cert_path();
    let ca = ca.to_str().unwrap();
    let (ok, kv, text) = python_client(
        "doq_client.py",
        &[&doq, &www(), "--ca", ca, "--queries", "3"],
    );
    assert!(ok, "{text}");
    assert_eq!(kv["alpn"], "doq", "{text}");
    assert_eq!(
        kv["queries_answered"], "3",
        "three streams on one connection: {text}"
    );
    assert_eq!((kv["rcode"].as_str(), kv["answers"].as_str()), ("0", "1"));

    let (ok, _, text) = python_client("doq_client.py", &[&doq, &www(), "--id", "4711"]);
    assert!(!ok, "a message ID other than 0 is a protocol error: {text}");
}

#[test]
fn pq_only_refuses_classical_quic_clients() {
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.tls.policy = KxPolicy::PqOnly;
        s.metrics = Some("127.0.0.1:0".parse().unwrap());
    });
    let doq = server.doq().to_string();
    let (ok, _, text) = python_client("doq_client.py", &[&doq, &www()]);
    assert!(!ok, "aioquic offers no hybrid group: {text}");
    let out = std::process::Command::new("kdig")
        .args([
            "@127.0.0.1",
            "-p",
            &server.doq().port().to_string(),
            "+quic",
            "+retry=0",
            "+time=3",
            &www(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("NOERROR"), "{text}");
    let metrics = http_get(server.handle().addrs.metrics.unwrap(), "/metrics");
    let refused =
        "pqdns_tls_handshake_failures_total{transport=\"doq\",reason=\"no-shared-group\"} 2";
    assert!(metrics.lines().any(|l| l == refused), "{metrics}");
}

#[test]
fn quic_go_negotiates_the_hybrid_group_over_quic() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let doq = server.doq().to_string();
    let ca = server.cert_path();
    let ca = ca.to_str().unwrap();
    let name = www();
    let (ok, kv, text) = go_doq(&["-addr", &doq, "-ca", ca, "-name", &name, "-queries", "3"]);
    assert!(ok, "{text}");
    assert_eq!(kv["curve"], "X25519MLKEM768", "{text}");
    assert_eq!(kv["alpn"], "doq", "{text}");
    assert_eq!(kv["queries_answered"], "3", "{text}");
    assert_eq!(
        (kv["rcode"].as_str(), kv["answers"].as_str()),
        ("0", "1"),
        "{text}"
    );

    let (ok, kv, text) = go_doq(&["-addr", &doq, "-ca", ca, "-name", &name, "-classical"]);
    assert!(
        ok,
        "hybrid-preferred still serves classical clients: {text}"
    );
    assert_eq!(kv["curve"], "X25519", "{text}");

    let strict = TestServer::start_with(&["ECDSAP256SHA256"], |s| s.tls.policy = KxPolicy::PqOnly);
    let doq = strict.doq().to_string();
    let (ok, kv, text) = go_doq(&["-addr", &doq, "-name", &name]);
    assert!(ok, "{text}");
    assert_eq!(kv["curve"], "X25519MLKEM768", "{text}");
    let (ok, _, text) = go_doq(&["-addr", &doq, "-name", &name, "-classical"]);
    assert!(!ok, "pq-only refuses an X25519-only QUIC client: {text}");
}

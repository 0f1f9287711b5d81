//! DNS over TLS and DNS over HTTPS against real clients: dig +tls / +https (bind9-dnsutils),
//! kdig +tls (knot-dnsutils), and a Go crypto/tls client (pqdns-test-support's `go/`, stdlib
//! only) that reports the negotiated key exchange group: X25519MLKEM768 by default, X25519 for
//! a classical-only client, and a refused handshake for that client under the pq-only policy.
//! Also the DoH status codes and Cache-Control of RFC 8484.

use crate::common;

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

/// The Go client over `mode` to `addr`, verifying the server's certificate against the PEM
/// file `ca` for `name` (empty: the address): (success, key=value map, output).
fn go_verified(
    addr: &str,
    mode: &str,
    ca: &str,
    name: &str,
) -> (bool, std::collections::HashMap<String, String>, String) {
    let query = www();
    go(&[
        "-addr",
        addr,
        "-mode",
        mode,
        "-ca",
        ca,
        "-servername",
        name,
        "-name",
        &query,
    ])
}

/// Issue 11 item 8: the generated certificate names the DoT/DoH listen addresses and the
/// configured names, so a verifying client (Go crypto/tls with the certificate as its root)
/// accepts it for them, and still refuses other names.
#[test]
fn self_signed_certificate_covers_listen_addresses_and_configured_names() {
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.dot = vec!["127.0.0.2:0".parse().unwrap()];
        s.doh = vec!["127.0.0.3:0".parse().unwrap()];
        s.tls.names = vec!["dns.pqdns.test".into()];
    });
    let ca = server.cert_path().display().to_string();
    let (dot, doh) = (server.dot().to_string(), server.doh().to_string());
    for (addr, mode, name) in [
        (&dot, "dot", ""),
        (&doh, "doh-post", ""),
        (&dot, "dot", "dns.pqdns.test"),
        (&dot, "dot", "localhost"),
    ] {
        let (ok, kv, text) = go_verified(addr, mode, &ca, name);
        assert!(ok, "{mode} at {addr} verified as {name:?}: {text}");
        assert_eq!(kv["answers"], "1", "{text}");
    }
    let (ok, _, text) = go_verified(&dot, "dot", &ca, "other.example");
    assert!(!ok && text.contains("certificate"), "{text}");
}

/// Issue 11 item 9: HEAD is answered like GET without content, over HTTP/2 and HTTP/1.1
/// (curl with nghttp2 treats content on a HEAD response as a protocol error), errors included.
#[test]
fn head_is_answered_like_get_without_content() {
    use base64::Engine as _;
    let curl = common::require("curl", "curl");
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let name: pqdns_core::Name = www().parse().unwrap();
    let mut query = vec![0, 42, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend_from_slice(name.as_wire());
    query.extend([0, 1, 0, 1]);
    let dns = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&query);
    let base = format!("https://{}", server.doh());
    let curl_run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        common::run(&curl, &args)
    };
    for proto in ["--http2", "--http1.1"] {
        let url = format!("{base}/dns-query?dns={dns}");
        let format = "%{http_code} %{size_download}";
        let (ok, get) = curl_run(&["-sS", "-k", proto, "-o", "/dev/null", "-w", format, &url]);
        assert!(ok, "{proto} GET: {get}");
        let (status, size) = get.trim().split_once(' ').unwrap();
        assert_eq!(status, "200", "{proto} GET: {get}");
        let (ok, head) = curl_run(&["-sS", "-k", proto, "--head", &url]);
        assert!(ok, "{proto} HEAD must not be a protocol error: {head}");
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/") && head.contains(" 200"), "{head}");
        assert!(
            head.contains("content-type: application/dns-message"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {size}")),
            "GET had {size} bytes: {head}"
        );
        for (path, code) in [("/nope", "404"), ("/dns-query", "400")] {
            let (ok, head) = curl_run(&["-sS", "-k", proto, "--head", &format!("{base}{path}")]);
            assert!(ok && head.contains(code), "{proto} HEAD {path}: {head}");
        }
    }
}

/// Issue 11 item 21: a reload (SIGHUP in the binary) serves a new certificate and key from the
/// configured files, and keeps the old ones, with an error naming the file, when the new files
/// are unusable. The Go client verifies against one certificate at a time.
#[test]
fn reload_replaces_the_tls_certificate_and_keeps_it_on_error() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let make = |copy: &std::path::Path| {
        let k = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let c = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&k)
            .unwrap();
        std::fs::write(&cert, c.pem()).unwrap();
        std::fs::write(&key, k.serialize_pem()).unwrap();
        std::fs::write(copy, c.pem()).unwrap();
    };
    let (first, second) = (dir.path().join("first.pem"), dir.path().join("second.pem"));
    make(&first);
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.tls.cert_and_key = Some((cert.clone(), key.clone()));
    });
    let dot = server.dot().to_string();
    let verifies = |ca: &std::path::Path| {
        let ca = ca.display().to_string();
        let (ok, _, text) = go_verified(&dot, "dot", &ca, "localhost");
        (ok, text)
    };
    assert!(verifies(&first).0, "{}", verifies(&first).1);
    assert!(!verifies(&second).0);

    make(&second);
    server.block_on(server.handle().reload()).unwrap();
    assert!(
        verifies(&second).0,
        "new certificate after reload: {}",
        verifies(&second).1
    );
    assert!(!verifies(&first).0, "old certificate gone");

    std::fs::write(&cert, "not a certificate\n").unwrap();
    server.block_on(server.handle().reload()).unwrap();
    let err = server.handle().reload_tls().unwrap_err().to_string();
    assert!(err.contains("tls.crt"), "{err}");
    assert!(verifies(&second).0, "kept after a failed reload");
}

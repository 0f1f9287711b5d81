//! ML-DSA server certificates (FIPS 204, issue 15) against independent clients: pyOpenSSL over
//! the OpenSSL 4 that the `cryptography` wheel bundles verifies the ML-DSA-44 chain and
//! handshake signature and negotiates X25519MLKEM768; Go's crypto/tls has no ML-DSA and is
//! the classical-certificate client. Under `hybrid-preferred` a classical key exchange is still
//! accepted (the documented downgrade); `pq-strict` refuses it and the client that accepts only
//! classical certificates, each with an info log line and a reason in
//! `pqdns_tls_handshake_failures_total`.

use crate::common;

use std::net::SocketAddr;
use std::process::Child;
use std::sync::mpsc;
use std::time::Duration;

use common::{go, http_get, python_client, spawn_server};

/// Every listener on a free loopback port.
const LISTENERS: [&str; 8] = [
    "--udp",
    "127.0.0.1:0",
    "--tcp",
    "127.0.0.1:0",
    "--dot",
    "127.0.0.1:0",
    "--doh",
    "127.0.0.1:0",
];

/// The pqdns-server binary on the embedded default zone with `args`, all listeners on free
/// loopback ports: (child, DoT address, metrics address).
fn start(dir: &std::path::Path, args: &[&str]) -> (Child, SocketAddr, SocketAddr) {
    let mut all = LISTENERS.to_vec();
    all.extend_from_slice(&["--metrics", "127.0.0.1:0"]);
    all.extend_from_slice(args);
    let (child, rx) = spawn_server(&all, dir, &dir.join("server.log"));
    let (mut dot, mut metrics) = (None, None);
    while dot.is_none() || metrics.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("server printed its listeners ({e:?})"));
        if let Some(a) = line.strip_prefix("listening dot ") {
            dot = Some(a.parse().unwrap());
        }
        if let Some(a) = line.strip_prefix("listening metrics http://") {
            metrics = Some(a.trim_end_matches("/metrics").parse().unwrap());
        }
    }
    drain(rx);
    (child, dot.unwrap(), metrics.unwrap())
}

/// Keeps reading the server's stdout so that it never blocks on a full pipe.
fn drain(rx: mpsc::Receiver<String>) {
    std::thread::spawn(move || while rx.recv().is_ok() {});
}

fn failures(metrics: SocketAddr, reason: &str) -> u64 {
    let text = http_get(metrics, "/metrics");
    let series =
        format!("pqdns_tls_handshake_failures_total{{transport=\"dot\",reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

/// A classical-only client, as OpenSSL names the algorithms.
const CLASSICAL_SIGALGS: &str = "ECDSA+SHA256:ECDSA+SHA384:ed25519:rsa_pss_rsae_sha256";

#[test]
fn ml_dsa_certificate_verified_by_openssl_and_hybrid_preferred_allows_classical_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, dot, _) = start(dir.path(), &["--tls-cert-algorithm", "ML-DSA-44"]);
    let (addr, ca) = (dot.to_string(), dir.path().join("keys/pqdns-server.crt"));
    let ca = ca.to_str().unwrap();

    let (ok, kv, text) = python_client("dot_client.py", &[&addr, "www.example.com.", "--ca", ca]);
    assert!(ok, "{text}");
    assert_eq!(kv["group"], "X25519MLKEM768", "{text}");
    assert_eq!(kv["cert_key"], "MLDSA44PublicKey", "{text}");
    assert_eq!((kv["rcode"].as_str(), kv["answers"].as_str()), ("0", "1"));

    let (ok, kv, text) =
        python_client("dot_client.py", &[&addr, "www.example.com.", "--p256-only"]);
    assert!(
        ok,
        "hybrid-preferred accepts a classical key exchange: {text}"
    );
    assert_eq!(kv["group"], "secp256r1", "{text}");

    // No classical fallback certificate: a client without ML-DSA cannot connect.
    let (ok, _, text) = go(&["-addr", &addr, "-mode", "dot"]);
    assert!(!ok, "Go's crypto/tls has no ML-DSA: {text}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn pq_strict_refuses_classical_groups_and_classical_certificates_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, dot, metrics) = start(dir.path(), &["--tls-policy", "pq-strict"]);
    let addr = dot.to_string();
    let log = || std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(
        log().contains("algorithm=ML-DSA-44"),
        "pq-strict generates an ML-DSA-44 certificate by default:\n{}",
        log()
    );

    let (ok, kv, text) = python_client("dot_client.py", &[&addr, "www.example.com."]);
    assert!(ok, "{text}");
    assert_eq!(kv["group"], "X25519MLKEM768", "{text}");
    assert_eq!(kv["cert_key"], "MLDSA44PublicKey", "{text}");

    assert_eq!(failures(metrics, "no-shared-group"), 0);
    let (ok, _, text) = python_client("dot_client.py", &[&addr, "www.example.com.", "--p256-only"]);
    assert!(!ok, "a P-256-only client must be refused: {text}");
    assert_eq!(failures(metrics, "no-shared-group"), 1);
    assert!(
        log().contains("dot handshake refused: the client offers no key exchange group"),
        "{}",
        log()
    );

    // Refused handshakes are logged at most once a second.
    std::thread::sleep(Duration::from_millis(1100));
    let (ok, _, text) = python_client(
        "dot_client.py",
        &[&addr, "www.example.com.", "--sigalgs", CLASSICAL_SIGALGS],
    );
    assert!(
        !ok,
        "a classical-certificate client must be refused: {text}"
    );
    let (ok, _, text) = go(&["-addr", &addr, "-mode", "dot"]);
    assert!(!ok, "{text}");
    assert_eq!(failures(metrics, "no-shared-signature-scheme"), 2);
    assert!(
        log().contains("dot handshake refused: the client accepts no signature algorithm"),
        "{}",
        log()
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn pq_strict_rejects_a_classical_certificate_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pqdns-server"))
        .args([
            "--tls-policy",
            "pq-strict",
            "--tls-cert-algorithm",
            "ECDSA-P256",
        ])
        .args(LISTENERS)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("pq-strict needs a certificate with an ML-DSA key")
            && err.contains("ECDSA-P256"),
        "{err}"
    );
}

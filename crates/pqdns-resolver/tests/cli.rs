//! The `pqdns-resolve` binary against an in-process pqdns-server and small hostile
//! responders: referrals are reported with their real status instead of Bogus (issue 11 item
//! 5), error RCODEs and failures exit non-zero, `--json` errors are JSON, an OPT record in the
//! answer section is rejected (item 15), and the keys and certificate of a pqdns-server run
//! without `--zone` (in `./keys`) are found by default (item 23).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};

use pqdns_core::message::Message;
use pqdns_core::wire::{Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::RrType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use crate::common;
use common::{serve_toml, Served};
use pqdns_server::settings::{CertAlgorithm, Settings};

/// Runs `pqdns-resolve` with `args` in `cwd`; gives up after 30 s.
fn resolve(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_pqdns-resolve"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The default zone (zones/example.toml: dual ECDSA + ML-DSA-44, KSK/ZSK, NSEC3, with the
/// `child` (DS) and `legacy` (no DS) delegations), served from a copy in a temporary
/// directory, with DoT and DoH; `configure` may change the server's settings.
fn default_zone_with(configure: impl FnOnce(&mut Settings)) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let zones = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../zones");
    for f in ["example.toml", "example.com.zone"] {
        std::fs::copy(zones.join(f), dir.path().join(f)).unwrap();
    }
    let file = dir.path().join("example.toml");
    serve_toml(dir, file, true, configure)
}

fn default_zone() -> Served {
    default_zone_with(|_| {})
}

fn server_arg(addr: SocketAddr) -> String {
    format!("@{addr}")
}

#[test]
fn referrals_are_reported_not_bogus() {
    let served = default_zone();
    let cwd = served.dir.path();
    let at = server_arg(served.addr);
    let anchor = "keys/example.com.ds";
    for (args, status) in [
        (vec!["x.legacy.example.com"], "Insecure"),
        (vec!["legacy.example.com", "NS"], "Insecure"),
        (vec!["x.child.example.com"], "Indeterminate"),
    ] {
        let mut a = vec![at.as_str(), "--trust-anchor", anchor];
        a.extend(&args);
        let (code, out, err) = resolve(cwd, &a);
        let what = format!("{args:?}: {out}{err}");
        assert_eq!(code, 3, "a referral is not an answer: {what}");
        assert!(out.contains(&format!(";; status: {status} (")), "{what}");
        assert!(!out.contains("Bogus"), "{what}");
        assert!(out.contains(";; referral to "), "{what}");
    }
    let (_, out, _) = resolve(cwd, &[&at, "--trust-anchor", anchor, "x.child.example.com"]);
    assert!(out.contains("signed delegation (DS verified"), "{out}");
    let (_, out, _) = resolve(
        cwd,
        &[&at, "--trust-anchor", anchor, "x.legacy.example.com"],
    );
    assert!(out.contains("unsigned delegation (no DS, proven"), "{out}");
    // Ordinary answers are unchanged: Secure, exit 0.
    for q in ["www.example.com", "nope.example.com"] {
        let (code, out, err) = resolve(cwd, &[&at, "--trust-anchor", anchor, q]);
        assert_eq!(code, 0, "{q}: {out}{err}");
        assert!(out.contains(";; status: Secure"), "{q}: {out}");
    }
}

#[test]
fn names_below_a_dname_validate_through_the_signed_dname() {
    let served = default_zone();
    let cwd = served.dir.path();
    let at = server_arg(served.addr);
    let anchor = "keys/example.com.ds";
    // old-apps DNAME apps: x.old-apps -> x.apps, answered by the *.apps wildcard, NODATA for A.
    // Wildcard NODATA (RFC 5155 §8.7), the end of the DNAME's A chain, on its own first.
    let (code, out, err) = resolve(
        cwd,
        &[&at, "--trust-anchor", anchor, "x.apps.example.com", "A"],
    );
    assert!(
        code == 0 && out.contains(";; status: Secure"),
        "wildcard NODATA: {out}{err}"
    );
    for (q, qtype, data) in [
        (
            "x.old-apps.example.com",
            "TXT",
            Some("served by the wildcard"),
        ),
        ("x.old-apps.example.com", "CNAME", None),
        ("x.old-apps.example.com", "A", None),
    ] {
        let (code, out, err) = resolve(cwd, &[&at, "--trust-anchor", anchor, q, qtype]);
        let what = format!("{q} {qtype}: {out}{err}");
        assert_eq!(code, 0, "{what}");
        assert!(out.contains(";; status: Secure"), "{what}");
        assert!(
            out.contains("old-apps.example.com.") && out.contains("DNAME"),
            "{what}"
        );
        if let Some(data) = data {
            assert!(out.contains(data), "{what}");
        }
        // The synthesized CNAME is unsigned, but it agrees with the DNAME: nothing dropped.
        assert!(!out.contains("dropped"), "{what}");
    }
    // A name that is not below the DNAME is not redirected.
    let (_, out, _) = resolve(
        cwd,
        &[&at, "--trust-anchor", anchor, "old-apps.example.com", "TXT"],
    );
    assert!(
        out.contains(";; status: Secure") && !out.contains("wildcard"),
        "{out}"
    );
}

#[test]
fn keys_and_certificate_in_dot_keys_are_found_by_default() {
    // pqdns-server without --zone keeps keys, DS file and certificate in ./keys.
    let served = default_zone();
    let cwd = served.dir.path();
    assert!(cwd.join("keys/pqdns-server.crt").exists());
    assert!(cwd.join("keys/example.com.ds").exists());
    for (flag, addr) in [("--doh", served.doh), ("--dot", served.dot)] {
        let at = server_arg(addr.unwrap());
        let (code, out, err) = resolve(cwd, &[flag, &at, "www.example.com"]);
        assert_eq!(code, 0, "{flag}: {out}{err}");
        assert!(out.contains(";; status: Secure"), "{flag}: {out}");
        assert!(out.contains("TLS: group X25519MLKEM768"), "{flag}: {out}");
        assert!(out.contains("certificate ECDSA-P256"), "{flag}: {out}");
    }
}

/// Issue 15: an ML-DSA-44 server certificate is verified (the generated self-signed one, as
/// the CA) and named beside the negotiated group, over DoT, DoH and DoQ (RFC 9250).
#[test]
fn ml_dsa_certificate_is_verified_and_named() {
    let served = default_zone_with(|s| s.tls.certificate_algorithm = Some(CertAlgorithm::MlDsa44));
    let cwd = served.dir.path();
    for (flag, addr) in [
        ("--doh", served.doh),
        ("--dot", served.dot),
        ("--doq", served.doq),
    ] {
        let at = server_arg(addr.unwrap());
        let ca = "keys/pqdns-server.crt";
        let (code, out, err) = resolve(cwd, &[flag, "--tls-ca", ca, &at, "www.example.com"]);
        assert_eq!(code, 0, "{flag}: {out}{err}");
        assert!(out.contains(";; status: Secure"), "{flag}: {out}");
        assert!(
            out.contains(";; TLS: group X25519MLKEM768, cipher ")
                && out.contains(", certificate ML-DSA-44"),
            "{flag}: {out}"
        );
    }
    // Larger QUIC datagrams (the server's first flight then fits its anti-amplification
    // allowance) work the same; QUIC's minimum is the floor.
    let at = server_arg(served.doq.unwrap());
    let ca = ["--tls-ca", "keys/pqdns-server.crt"];
    let (code, out, err) = resolve(
        cwd,
        &[
            &ca[..],
            &[
                "--doq",
                "--doq-datagram-size",
                "1452",
                &at,
                "www.example.com",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(";; status: Secure"), "{out}");
    let (code, _, err) = resolve(cwd, &["--doq", "--doq-datagram-size", "1199", &at, "x."]);
    assert_eq!(code, 2, "below QUIC's minimum: {err}");
    // --pq-certificates-only accepts it, and refuses the classical certificate of another
    // server over each transport.
    let at = server_arg(served.dot.unwrap());
    let strict = [
        "--pq-certificates-only",
        "--tls-ca",
        "keys/pqdns-server.crt",
    ];
    let (code, out, err) = resolve(
        cwd,
        &[&strict[..], &["--dot", &at, "www.example.com"]].concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let classical =
        default_zone_with(|s| s.tls.certificate_algorithm = Some(CertAlgorithm::EcdsaP256));
    for (flag, addr) in [
        ("--doh", classical.doh),
        ("--dot", classical.dot),
        ("--doq", classical.doq),
    ] {
        let at = server_arg(addr.unwrap());
        let args = [&strict[..], &[flag, &at, "www.example.com"]].concat();
        let (code, out, err) = resolve(classical.dir.path(), &args);
        assert_ne!(
            code, 0,
            "{flag}: a classical certificate is refused: {out}{err}"
        );
        let (code, out, err) = resolve(classical.dir.path(), &args[1..]);
        assert_eq!(code, 0, "{flag}: accepted without the flag: {out}{err}");
    }
    // The same server's certificate does not verify against another CA.
    let other = tempfile::tempdir().unwrap();
    let other_ca = other.path().join("ca.pem");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ML_DSA_44).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(&other_ca, cert.pem()).unwrap();
    let at = server_arg(served.dot.unwrap());
    let (code, out, err) = resolve(
        cwd,
        &[
            "--dot",
            "--tls-ca",
            other_ca.to_str().unwrap(),
            &at,
            "www.example.com",
        ],
    );
    assert_ne!(code, 0, "{out}{err}");
}

/// A UDP and TCP responder on one 127.0.0.1 port: UDP answers with `udp(query)`, TCP with a
/// plain NOERROR answer.
async fn responder(udp: fn(&Message) -> Vec<u8>) -> SocketAddr {
    let (socket, listener) = loop {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = socket.local_addr().unwrap().port();
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)).await {
            break (socket, l);
        }
    };
    let addr = socket.local_addr().unwrap();
    common::spawn_udp(socket, move |wire, _| {
        Message::parse(wire).ok().map(|q| udp(&q))
    });
    tokio::spawn(async move {
        for _ in 0..100 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Ok(len) = s.read_u16().await else { return };
                let mut q = vec![0u8; usize::from(len)];
                if s.read_exact(&mut q).await.is_err() {
                    return;
                }
                let Ok(q) = Message::parse(&q) else { return };
                let a = answer(&q, Rcode::NOERROR).to_wire();
                let _ = s.write_all(&(a.len() as u16).to_be_bytes()).await;
                let _ = s.write_all(&a).await;
            });
        }
    });
    addr
}

fn answer(q: &Message, code: Rcode) -> Message {
    let mut m = q.clone();
    m.flags = FLAG_QR | FLAG_AA | code.low();
    m.edns = None;
    if code == Rcode::NOERROR {
        let owner = q.questions[0].qname.to_string();
        m.answers
            .push(common::record(&owner, RrType::A, 60, vec![192, 0, 2, 1]));
    }
    m
}

fn servfail(q: &Message) -> Vec<u8> {
    answer(q, Rcode::SERVFAIL).to_wire()
}

/// A NOERROR answer whose ANSWER section also holds an OPT record (RFC 6891 §6.1.1 allows
/// OPT only in ADDITIONAL).
fn opt_in_answer(q: &Message) -> Vec<u8> {
    let mut wire = answer(q, Rcode::NOERROR).to_wire();
    // One more ANSWER record: root, OPT, payload 1232, no flags, no options.
    wire[7] += 1;
    let at = wire.len();
    wire.splice(at..at, [0u8, 0, 41, 4, 208, 0, 0, 0, 0, 0, 0]);
    assert!(
        Message::parse(&wire).is_err(),
        "the test message is malformed"
    );
    wire
}

#[test]
fn errors_exit_non_zero_and_are_json_with_json() {
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let (failing, malformed) =
        rt.block_on(async { (responder(servfail).await, responder(opt_in_answer).await) });

    // SERVFAIL: a response, but no answer.
    let (code, out, _) = resolve(cwd, &[&server_arg(failing), "www.example."]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("SERVFAIL"), "{out}");
    let (code, out, _) = resolve(cwd, &["--json", &server_arg(failing), "www.example."]);
    assert_eq!(code, 3);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["rcode_name"], "SERVFAIL");
    assert_eq!(j["exit_code"], 3);

    // An OPT record in the answer section is a malformed response (FORMERR), not something
    // to retry over TCP (which would answer) and accept.
    let (code, out, err) = resolve(cwd, &[&server_arg(malformed), "www.example."]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("FORMERR") && err.contains("OPT"), "{err}");

    // Errors under --json are JSON on stdout.
    let (code, out, err) = resolve(cwd, &["--json", &server_arg(malformed), "www.example."]);
    assert_eq!(code, 3, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(j["error"].as_str().unwrap().contains("FORMERR"), "{j}");
    assert_eq!(j["exit_code"], 3);
    let (code, out, _) = resolve(cwd, &["--json", "bad..name"]);
    assert_eq!(code, 2);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(j["error"].as_str().unwrap().contains("bad name"), "{j}");
    let (code, out, _) = resolve(cwd, &["--json", "--no-such-flag", "x."]);
    assert_eq!(code, 2);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        j["error"].as_str().unwrap().contains("--no-such-flag"),
        "{j}"
    );
    // Exit codes are documented.
    let (code, out, _) = resolve(cwd, &["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Exit status") && out.contains("3  no answer"),
        "{out}"
    );
    drop(rt);
}

//! The resolver service (the `pqdns-resolver` binary, issue 12) in front of a three-level
//! hierarchy served by pqdns-server on their own loopback addresses — ECDSA root, ML-DSA-44
//! `tld.`, Falcon-512 / SPHINCS+ / dual-signed / unsigned leaves, NSEC and NSEC3 — resolving
//! iteratively from a root hints file and validating from the root's DS:
//!
//! - dig over UDP, TCP, DoT (`+tls`) and DoH (`+https`), kdig over DoT, Go's crypto/tls over
//!   DoT and DoH (which reports the negotiated X25519MLKEM768), and pqdns-resolve over DoT and
//!   DoQ;
//! - AD on Secure answers, NXDOMAIN/NODATA with their NSEC/NSEC3 proofs under DO, Insecure
//!   data without AD, ANY answered with one validated RRset (RFC 8482), SERVFAIL with EDE 7 and a reason for a leaf with expired signatures and
//!   its data with CD=1;
//! - a second resolver forwarding over DoT to the first with a hybrid-only TLS client;
//! - hostile authorities (a referral loop, 100 NS names without glue, a silent server, one
//!   answering garbage) end in SERVFAIL within bounds while other clients are answered.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hierarchy::{build_at, serve_with_expired_last, Leaf, Running, Tiers, LEAVES};
use common::runtime;
use common::service::{unused_anchor, Service};
use pqdns_test_support::hierarchy::write_root_hints;
use pqdns_test_support::peers::{dig, go, kdig, run, DigOutput};
use pqdns_test_support::ports::free_dual_port_on;

/// The leaf whose signatures expired (signed 30 days ago, valid 14 days), on its own server.
/// This file's servers sit on 127.0.2.x, apart from the other test files' (hierarchy.rs uses
/// 127.0.0.2-4 with ports probed free there), so test binaries running at once cannot collide.
const TIERS: Tiers = Tiers {
    root: "127.0.2.2",
    tld: "127.0.2.3",
};
/// The leaves' name server.
const LEAF_IP: &str = "127.0.2.4";
const EXPIRED_IP: &str = "127.0.2.5";
/// A name server that never answers.
const SILENT_IP: &str = "127.0.2.6";
/// A name server that answers garbage.
const GARBAGE_IP: &str = "127.0.2.7";

/// Delegations from `tld.` to hostile or broken name servers (all unsigned).
fn hostile_delegations() -> String {
    // The loop's name server is tld.'s own: it refers back to itself.
    let mut text = format!(
        "loop NS ns.loop\nns.loop A {}\nsilent NS ns.silent\nns.silent A {SILENT_IP}\n\
         garbage NS ns.garbage\nns.garbage A {GARBAGE_IP}\n",
        TIERS.tld
    );
    for i in 0..100 {
        text.push_str(&format!("fanout NS ns{i}.nowhere.tld.\n"));
    }
    text
}

/// Answers every datagram on `socket` with 40 bytes of junk until `stop`.
fn answer_garbage(socket: UdpSocket, stop: Arc<AtomicBool>) {
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((_, peer)) = socket.recv_from(&mut buf) {
                let _ = socket.send_to(&[0x5a; 40], peer);
            }
        }
    });
}

struct World {
    _running: Running,
    dir: tempfile::TempDir,
    service: Service,
    anchor_file: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    _silent: UdpSocket,
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The hierarchy, its servers, the hostile ones, and a resolver service iterating over them.
fn world() -> World {
    let mut leaves: Vec<Leaf> = LEAVES.iter().map(|l| Leaf { ip: LEAF_IP, ..*l }).collect();
    leaves.push(Leaf {
        name: "expired",
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec",
        ip: EXPIRED_IP,
        extra: "",
    });
    let h = build_at(
        TIERS,
        &leaves,
        "ECDSAP256SHA256",
        "ML-DSA-44",
        &hostile_delegations(),
    );
    let rt = runtime();
    let port = free_dual_port_on(TIERS.root.parse().unwrap());
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);
    let d = h.dir.path();
    let handles = serve_with_expired_last(&rt, &h, TIERS, LEAF_IP, EXPIRED_IP, port);
    let stop = Arc::new(AtomicBool::new(false));
    let silent = UdpSocket::bind(at(SILENT_IP)).unwrap();
    answer_garbage(UdpSocket::bind(at(GARBAGE_IP)).unwrap(), Arc::clone(&stop));

    let hints = write_root_hints(d, TIERS.root);
    let anchor_file = d.join("root.ds");
    std::fs::write(&anchor_file, format!("{}\n", h.root_ds_text)).unwrap();
    let port_text = port.to_string();
    let service = Service::start(
        d,
        "resolver",
        &[
            "--root-hints",
            hints.to_str().unwrap(),
            "--authority-port",
            &port_text,
            "--trust-anchor",
            anchor_file.to_str().unwrap(),
            "--timeout",
            "2",
        ],
    );
    World {
        _running: Running { rt, handles },
        dir: h.dir,
        service,
        anchor_file,
        stop,
        _silent: silent,
    }
}

/// The COOKIE option dig printed (client and server cookie, hex), which it found good: its
/// client cookie echoed with a server cookie.
fn server_cookie(out: &DigOutput) -> String {
    let line = out
        .text
        .lines()
        .find_map(|l| l.strip_prefix("; COOKIE: "))
        .unwrap_or_else(|| panic!("no cookie in:\n{}", out.text));
    assert!(line.ends_with("(good)"), "{line}");
    let hex = line.split_whitespace().next().unwrap().to_string();
    assert_eq!(hex.len(), 48, "8 + 16 bytes: {line}");
    hex
}

fn assert_secure_answer(out: &DigOutput, what: &str) {
    assert_eq!(out.status(), "NOERROR", "{what}:\n{}", out.text);
    assert!(out.has_flag("ad"), "{what}: no AD:\n{}", out.text);
}

#[test]
fn stubs_get_validated_answers_over_every_transport() {
    let w = world();
    let s = &w.service;

    // dig over UDP with DO: Secure data with AD and the RRSIGs, for each signed leaf.
    for leaf in ["falcon", "sphincs", "dual"] {
        let name = format!("www.{leaf}.tld.");
        let out = s.dig(&["+dnssec", &name, "A"]);
        assert_secure_answer(&out, &name);
        assert!(out.has("ANSWER", &name, "A"), "{}", out.text);
        assert!(
            out.has_rrsig("ANSWER", "A"),
            "{name}: no RRSIG:\n{}",
            out.text
        );
        // Without DO or AD in the query, no AD and no RRSIG (RFC 6840 §5.8).
        let plain = s.dig(&["+noadflag", &name, "A"]);
        assert_eq!(plain.status(), "NOERROR", "{}", plain.text);
        assert!(
            !plain.has_flag("ad") && !plain.any_rrsig(),
            "{}",
            plain.text
        );
    }
    // DNS cookies and the UDP limits against reflection. dig sends a client cookie and gets a
    // server cookie back ("good": its client cookie echoed); the signed answers above are
    // more than 3 × their query, so over UDP they came back TC (dig sent only its client
    // cookie) and dig took them over TCP. Without following TC: the cut answer, with TC.
    let falcon = s.dig(&["+dnssec", "www.falcon.tld.", "A"]);
    let cookie = server_cookie(&falcon);
    let cut = s.dig(&["+dnssec", "+ignore", "+nocookie", "www.falcon.tld.", "A"]);
    assert!(cut.has_flag("tc"), "{}", cut.text);
    assert!(cut.section("ANSWER").is_empty(), "{}", cut.text);
    // Back with the server cookie, the whole answer over UDP.
    let with_cookie = format!("+cookie={cookie}");
    let whole = s.dig(&["+dnssec", "+ignore", &with_cookie, "www.falcon.tld.", "A"]);
    assert_secure_answer(&whole, "with the server cookie");
    assert!(!whole.has_flag("tc"), "{}", whole.text);
    assert!(whole.has_rrsig("ANSWER", "A"), "{}", whole.text);

    // NXDOMAIN and NODATA, proven: NSEC for falcon, NSEC3 for sphincs.
    let nx = s.dig(&["+dnssec", "nope.falcon.tld.", "A"]);
    assert_eq!(nx.status(), "NXDOMAIN", "{}", nx.text);
    assert!(nx.has_flag("ad"), "{}", nx.text);
    assert!(nx.has("AUTHORITY", "falcon.tld.", "SOA"), "{}", nx.text);
    assert!(nx.has_rrsig("AUTHORITY", "NSEC"), "{}", nx.text);
    let nodata = s.dig(&["+dnssec", "www.sphincs.tld.", "TXT"]);
    assert_secure_answer(&nodata, "NODATA");
    assert!(nodata.section("ANSWER").is_empty(), "{}", nodata.text);
    assert!(nodata.has_rrsig("AUTHORITY", "NSEC3"), "{}", nodata.text);
    // A CNAME and a wildcard.
    let cname = s.dig(&["+dnssec", "alias.dual.tld.", "A"]);
    assert_secure_answer(&cname, "CNAME");
    assert!(
        cname.has("ANSWER", "alias.dual.tld.", "CNAME"),
        "{}",
        cname.text
    );
    assert!(cname.has("ANSWER", "www.dual.tld.", "A"), "{}", cname.text);
    let wild = s.dig(&["+dnssec", "x.wild.sphincs.tld.", "TXT"]);
    assert_secure_answer(&wild, "wildcard");
    assert!(wild.has_rrsig("AUTHORITY", "NSEC3"), "{}", wild.text);
    // An unsigned delegation: the data, Insecure, no AD.
    let insecure = s.dig(&["+dnssec", "www.unsigned.tld.", "A"]);
    assert_eq!(insecure.status(), "NOERROR", "{}", insecure.text);
    assert!(
        insecure.has("ANSWER", "www.unsigned.tld.", "A"),
        "{}",
        insecure.text
    );
    assert!(!insecure.has_flag("ad"), "{}", insecure.text);
    // ANY (RFC 8482 §4.1): one RRset of the name (pqdns-server gives the lowest type, A),
    // validated: AD when Secure, none when Insecure. Other meta-QTYPEs: NOTIMP.
    for (name, secure) in [("www.falcon.tld.", true), ("www.unsigned.tld.", false)] {
        let any = s.dig(&["+dnssec", name, "ANY"]);
        assert_eq!(any.status(), "NOERROR", "ANY {name}:\n{}", any.text);
        assert_eq!(any.has_flag("ad"), secure, "ANY {name}:\n{}", any.text);
        let types: Vec<String> = any
            .section("ANSWER")
            .into_iter()
            .filter(|r| r.rtype != "RRSIG")
            .map(|r| format!("{} {}", r.owner, r.rtype))
            .collect();
        assert_eq!(types, [format!("{name} A")], "ANY {name}:\n{}", any.text);
    }
    let mailb = s.dig(&["www.falcon.tld.", "TYPE253"]);
    assert_eq!(mailb.status(), "NOTIMP", "{}", mailb.text);

    // TCP, DoT and DoH with dig; DoT with kdig (the answers now come from the cache or not,
    // each must be validated data).
    let tcp = dig(
        s.tcp,
        &["+recurse", "+tcp", "+dnssec", "a.b.ent.dual.tld.", "A"],
    );
    assert_secure_answer(&tcp, "TCP");
    let dot = dig(
        s.dot,
        &["+recurse", "+tls", "+dnssec", "www.falcon.tld.", "A"],
    );
    assert_secure_answer(&dot, "DoT");
    let doh = dig(
        s.doh,
        &["+recurse", "+https", "+dnssec", "www.sphincs.tld.", "A"],
    );
    assert_secure_answer(&doh, "DoH");
    let k = kdig(
        s.dot,
        &["+recurse", "+tls", "+dnssec", "www.dual.tld.", "A"],
    );
    assert_secure_answer(&k, "kdig DoT");

    // Go's crypto/tls, verifying the service's certificate: X25519MLKEM768.
    let cert = s.cert.to_str().unwrap();
    for (mode, addr) in [("dot", s.dot), ("doh-post", s.doh), ("doh-get", s.doh)] {
        let addr = addr.to_string();
        let args = [
            "-addr",
            &addr,
            "-mode",
            mode,
            "-name",
            "www.dual.tld.",
            "-ca",
            cert,
        ];
        let (ok, kv, text) = go(&args);
        assert!(ok, "Go {mode}: {text}");
        assert_eq!(kv["curve"], "X25519MLKEM768", "{text}");
        assert_eq!(
            (kv["rcode"].as_str(), kv["answers"].as_str()),
            ("0", "1"),
            "{text}"
        );
    }

    // pqdns-resolve over DoT: it asks with CD and validates the chain itself.
    let resolve = Path::new(env!("CARGO_BIN_EXE_pqdns-resolve"));
    let args: Vec<String> = [
        "--dot",
        &format!("@{}", s.dot),
        "--trust-anchor",
        w.anchor_file.to_str().unwrap(),
        "--tls-ca",
        cert,
        "www.falcon.tld.",
        "A",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let (ok, text) = run(resolve, &args);
    assert!(ok && text.contains("Secure"), "pqdns-resolve:\n{text}");
    // And over DNS over QUIC.
    let doq = format!("@{}", s.doq);
    let mut args = args;
    args[0] = "--doq".into();
    args[1] = doq;
    let (ok, text) = run(resolve, &args);
    assert!(
        ok && text.contains("Secure") && text.contains("X25519MLKEM768"),
        "pqdns-resolve --doq:\n{text}"
    );

    // The counters saw all that: UDP answers, cache hits (the Go clients asked one name three
    // times), Secure answers verified by ML-DSA-44 (number 18 in the default profile), the
    // Insecure one, upstream exchanges, the hybrid handshakes.
    let udp_ok = s.metric("pqdns_resolver_queries_total{transport=\"udp\",rcode=\"NOERROR\"}");
    assert!(udp_ok >= 10, "{udp_ok}");
    assert!(s.metric("pqdns_resolver_cache_total{result=\"hit\"}") >= 1);
    assert!(s.metric("pqdns_resolver_validations_total{status=\"secure\",algorithm=\"18\"}") >= 1);
    assert!(
        s.metric("pqdns_resolver_validations_total{status=\"insecure\",algorithm=\"none\"}") >= 1
    );
    assert!(s.metric("pqdns_resolver_upstream_rtt_seconds_count") >= 5);
    assert!(s.metric("pqdns_resolver_tls_handshakes_total{group=\"X25519MLKEM768\"}") >= 3);
}

#[test]
fn bogus_is_servfail_with_the_reason_and_cd_gets_the_data() {
    let w = world();
    let s = &w.service;
    let out = s.dig(&["+dnssec", "www.expired.tld.", "A"]);
    assert_eq!(out.status(), "SERVFAIL", "{}", out.text);
    // dig: "; EDE: 7 (Signature Expired): (<reason>)".
    assert!(
        out.text.contains("EDE: 7 (Signature Expired)") && out.text.contains("expired"),
        "{}",
        out.text
    );
    assert!(out.section("ANSWER").is_empty(), "{}", out.text);
    // CD=1: the data as the authority sent it, without AD.
    let cd = s.dig(&["+dnssec", "+cd", "www.expired.tld.", "A"]);
    assert_eq!(cd.status(), "NOERROR", "{}", cd.text);
    assert!(cd.has("ANSWER", "www.expired.tld.", "A"), "{}", cd.text);
    assert!(
        cd.has_rrsig("ANSWER", "A") && !cd.has_flag("ad"),
        "{}",
        cd.text
    );
    // And SERVFAIL again without CD (the CD answer is cached apart).
    let again = s.dig(&["www.expired.tld.", "A"]);
    assert_eq!(again.status(), "SERVFAIL", "{}", again.text);
    // A client outside the allow-list is refused: allow only 127.0.0.2.
    let refused = Service::start(
        w.dir.path(),
        "refusing",
        &[
            "--forward",
            &s.udp.to_string(),
            "--trust-anchor",
            w.anchor_file.to_str().unwrap(),
            "--allow",
            "127.0.0.2",
        ],
    );
    let r = refused.dig(&["www.dual.tld.", "A"]);
    assert_eq!(r.status(), "REFUSED", "{}", r.text);
    assert!(r.text.contains("EDE: 18 (Prohibited)"), "{}", r.text);
    // Recursion is not available to this client: no RA (issue 31 item 6).
    assert!(!r.has_flag("ra"), "{}", r.text);

    // --require-pq: the chain from the root's ECDSA anchor has a classical first link, so
    // even the dual-signed leaf is Bogus, and the reason names the policy.
    let strict = Service::start(
        w.dir.path(),
        "require-pq",
        &[
            "--forward",
            &s.udp.to_string(),
            "--trust-anchor",
            w.anchor_file.to_str().unwrap(),
            "--require-pq",
        ],
    );
    let pq = strict.dig(&["+dnssec", "www.dual.tld.", "A"]);
    assert_eq!(pq.status(), "SERVFAIL", "{}", pq.text);
    assert!(pq.text.contains("require-pq"), "{}", pq.text);
    // The same question through the first resolver (no policy) is Secure.
    assert_secure_answer(
        &s.dig(&["+dnssec", "www.dual.tld.", "A"]),
        "without require-pq",
    );
}

#[test]
fn forwarding_over_dot_with_hybrid_tls_validates_end_to_end() {
    let w = world();
    let upstream = &w.service;
    let forward = format!("tls://{}", upstream.dot);
    let downstream = Service::start(
        w.dir.path(),
        "forwarder",
        &[
            "--forward",
            &forward,
            "--forward-ca",
            upstream.cert.to_str().unwrap(),
            "--forward-pq-only",
            "--trust-anchor",
            w.anchor_file.to_str().unwrap(),
        ],
    );
    for name in ["www.falcon.tld.", "www.sphincs.tld.", "alias.dual.tld."] {
        let out = downstream.dig(&["+dnssec", name, "A"]);
        assert_secure_answer(&out, name);
    }
    let nx = downstream.dig(&["+dnssec", "nope.dual.tld.", "A"]);
    assert_eq!(nx.status(), "NXDOMAIN", "{}", nx.text);
    assert!(nx.has_flag("ad"), "{}", nx.text);
    // The first hop: Go's client to the forwarder negotiates the hybrid group; the second:
    // the forwarder's client offers only hybrid groups (--forward-pq-only), so its answers
    // above prove the upstream handshake was X25519MLKEM768.
    let addr = downstream.dot.to_string();
    let cert = downstream.cert.to_str().unwrap();
    let (ok, kv, text) = go(&[
        "-addr",
        &addr,
        "-mode",
        "dot",
        "-name",
        "www.dual.tld.",
        "-ca",
        cert,
    ]);
    assert!(
        ok && kv["curve"] == "X25519MLKEM768" && kv["rcode"] == "0",
        "{text}"
    );
    // An upstream expired leaf stays Bogus through the forwarder.
    let bogus = downstream.dig(&["www.expired.tld.", "A"]);
    assert_eq!(bogus.status(), "SERVFAIL", "{}", bogus.text);
    assert!(bogus.text.contains("EDE: 7"), "{}", bogus.text);
}

#[test]
fn hostile_authorities_end_in_servfail_while_others_are_answered() {
    let w = world();
    let s = &w.service;
    // Warm the trust in tld. so that the check below is about serving, not cold start.
    assert_secure_answer(&s.dig(&["+dnssec", "www.dual.tld.", "A"]), "warm-up");
    let udp = s.udp;
    let hostile: Vec<_> = [
        "www.loop.tld.",
        "www.fanout.tld.",
        "www.silent.tld.",
        "www.garbage.tld.",
    ]
    .into_iter()
    .map(|name| {
        std::thread::spawn(move || {
            let started = Instant::now();
            let out = dig(udp, &["+recurse", "+tries=1", "+time=30", name, "A"]);
            (name, out, started.elapsed())
        })
    })
    .collect();
    std::thread::sleep(Duration::from_millis(300));
    // Meanwhile: a fresh name in a known zone and a cached one are answered.
    let fresh = s.dig(&["+dnssec", "x.wild.dual.tld.", "TXT"]);
    assert_secure_answer(&fresh, "fresh name during the hostile resolutions");
    let cached = s.dig(&["+dnssec", "www.dual.tld.", "A"]);
    assert_secure_answer(&cached, "cached name during the hostile resolutions");
    let silent_in_flight = !hostile[2].is_finished();
    for h in hostile {
        let (name, out, took) = h.join().unwrap();
        assert_eq!(
            out.status(),
            "SERVFAIL",
            "{name}:\n{}\n{}",
            out.text,
            s.log()
        );
        // Work limits and timeouts end each one well before dig's 30 s.
        assert!(took < Duration::from_secs(25), "{name} took {took:?}");
    }
    assert!(
        silent_in_flight,
        "the silent server's resolution ended before the other answers (2 s timeouts)"
    );
}

/// Issue 31 item 3: 200 client addresses of one /24 flood uncached names under a silent
/// authority (each resolution waits for its timeouts), some 5,000 queries a second; a client
/// on another /24 keeps being answered: the median latency of its queries for a working zone
/// (cached names and new ones) stays under 50 ms, and every new name is resolved (NXDOMAIN,
/// proven), not refused a slot. Resolutions in flight count per /24 (64 by default) and in
/// all (256): the flood's /24 holds 64, leaving room for others. Counted per address, the
/// 200 addresses would take all 256 slots and the new names would get SERVFAIL at once
/// (checked by mutation), fast enough to pass the latency bound alone.
#[test]
fn a_flood_from_many_addresses_does_not_starve_other_clients() {
    use pqdns_core::message::{Message, Question};
    use pqdns_core::{Class, RrType};

    let w = world();
    let s = &w.service;
    assert_secure_answer(&s.dig(&["+dnssec", "www.dual.tld.", "A"]), "warm-up");
    let query = |id: u16, qname: &str| {
        let q = Question {
            qname: qname.parse().unwrap(),
            qtype: RrType::A,
            qclass: Class::IN,
        };
        Message::query(id, q, true, None).to_wire()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let sockets: Vec<UdpSocket> = (1..=200)
        .map(|i| UdpSocket::bind(format!("127.0.3.{i}:0")).unwrap())
        .collect();
    let (target, flooding) = (s.udp, Arc::clone(&stop));
    // About 5,000 queries a second, every one a new name under the silent delegation;
    // bounded to 60,000 queries and stopped by the test.
    let flood = std::thread::spawn(move || {
        let mut n: u32 = 0;
        while !flooding.load(Ordering::Relaxed) && n < 60_000 {
            for socket in &sockets {
                let _ = socket.send_to(&query(n as u16, &format!("f{n}.silent.tld.")), target);
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        n
    });
    std::thread::sleep(Duration::from_secs(2));
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut rcodes = Vec::new();
    let mut latencies: Vec<Duration> = (0..30u16)
        .map(|i| {
            // Cached data and new names (NXDOMAIN, proven) of a working zone, alternately.
            let name = if i % 2 == 0 {
                "www.dual.tld.".to_string()
            } else {
                format!("new{i}.dual.tld.")
            };
            let start = Instant::now();
            client.send_to(&query(30_000 + i, &name), s.udp).unwrap();
            let mut buf = [0u8; 4096];
            loop {
                match client.recv_from(&mut buf) {
                    Ok((n, _)) if n >= 12 && buf[..2] == (30_000 + i).to_be_bytes() => {
                        rcodes.push((name, buf[3] & 0x0f));
                        break start.elapsed();
                    }
                    Ok(_) => continue,
                    Err(_) => break Duration::from_secs(2),
                }
            }
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    assert!(sent >= 2_000, "the flood ran: {sent} queries");
    // RCODE 0 NOERROR for the cached name, 3 NXDOMAIN for new ones; 2 is SERVFAIL.
    let wrong: Vec<_> = rcodes
        .iter()
        .filter(|(name, rcode)| *rcode != if name.starts_with("new") { 3 } else { 0 })
        .collect();
    assert!(
        wrong.is_empty() && rcodes.len() == 30,
        "answers with the wrong RCODE (2 = SERVFAIL: no slot): {wrong:?} of {}",
        rcodes.len()
    );
    assert!(
        median < Duration::from_millis(50),
        "median {median:?}, all {latencies:?}"
    );
}

/// `--max-connections` and `--tcp-idle-timeout` reach the stream listeners (issue 31
/// must-show 3 needs both for its soak): with a cap of 2, a third TCP client makes the
/// longest-idle connection give way, and with a 1 s idle timeout an idle connection is
/// closed within a few seconds (the default, 10 s, would keep it).
#[test]
fn connection_cap_and_idle_timeout_flags_take_effect() {
    use std::io::Read;
    use std::net::TcpStream;

    let dir = tempfile::tempdir().unwrap();
    let anchor = unused_anchor(dir.path());
    let start = |name: &str, cap: &str, idle: &str| {
        Service::start(
            dir.path(),
            name,
            &[
                "--forward",
                "127.0.0.1:9",
                "--trust-anchor",
                anchor.to_str().unwrap(),
                "--max-connections",
                cap,
                "--tcp-idle-timeout",
                idle,
            ],
        )
    };
    // Whether the server closed `conn` within `within` (end of stream or reset).
    let closed_within = |conn: &mut TcpStream, within: Duration| {
        conn.set_read_timeout(Some(within)).unwrap();
        let mut byte = [0u8; 1];
        match conn.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => panic!("the server sent bytes unasked"),
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    };

    let capped = start("capped", "2", "60");
    let mut first = TcpStream::connect(capped.tcp).unwrap();
    // The second connects a moment later, so the first has been idle longest.
    assert!(!closed_within(&mut first, Duration::from_millis(300)));
    let mut second = TcpStream::connect(capped.tcp).unwrap();
    let _third = TcpStream::connect(capped.tcp).unwrap();
    assert!(
        closed_within(&mut first, Duration::from_secs(5)),
        "a third client at a cap of 2 did not evict the longest-idle connection"
    );
    assert!(!closed_within(&mut second, Duration::from_millis(300)));

    let quick = start("quick-idle", "16", "1");
    let mut idle = TcpStream::connect(quick.tcp).unwrap();
    let opened = Instant::now();
    assert!(
        closed_within(&mut idle, Duration::from_secs(6)),
        "an idle connection outlived a 1 s idle timeout by 5 s"
    );
    assert!(opened.elapsed() >= Duration::from_millis(900));
}

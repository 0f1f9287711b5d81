//! TSIG (RFC 8945) against real peers, over the wire only.
//!
//! - Requests signed by dig (`-y`, and `-k` with a BIND key file we wrote) and kdig (`-y`)
//!   verify with our code (pqdns-core's `wire::tsig`), and fail with the wrong secret.
//! - pqdns-server with a key and `axfr_allow = ["key:…"]` only: dig and kdig get SOA over
//!   UDP, AXFR and IXFR (after a reload, from the journal) over TCP, and verify every signed
//!   response themselves (dig prints "Couldn't verify signature" or "tsig verify failure" when
//!   one does not; kdig a TSIG error); a wrong key name gets NOTAUTH/BADKEY, a wrong secret
//!   NOTAUTH/BADSIG, an unsigned transfer REFUSED; a request we sign with a clock 1000 s
//!   behind gets a signed NOTAUTH/BADTIME carrying the server's time. The failures are
//!   counted in `pqdns_tsig_failures_total`.
//! - Answers signed by NSD and Knot (SOA) and Knot's multi-message AXFR verify with our code
//!   (the chain of §5.3.1); a flipped byte fails.
//! - NSD, Knot and BIND's named as secondaries transfer the zone from pqdns with TSIG (AXFR,
//!   then IXFR after a reload announced by our signed NOTIFY, which they accept only with the
//!   key).
//!
//! Every client runs under `timeout`; the UDP socket reads are bounded.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use common::{http_get, require, run, TestServer, ORIGIN};
use pqdns_core::message::{Message, Question};
use pqdns_core::tsig_keyfile;
use pqdns_core::wire::tsig::{self, Algorithm, Digest, Fields, Key, KeyRing, Rejection, BADSIG};
use pqdns_core::wire::{MessageView, Rcode};
use pqdns_core::{Class, Name, RrType};

const KEY_NAME: &str = "transfer-key.";
const SERIAL: u32 = 2026010101;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn transfer_key(algorithm: Algorithm) -> Key {
    Key::generate(&KEY_NAME.parse().unwrap(), algorithm).unwrap()
}

/// `-y` argument for `key`, optionally with another name or secret.
fn y_arg(key: &Key, name: &str, secret: &[u8]) -> String {
    format!("{}:{name}:{}", key.algorithm(), b64(secret))
}

/// Runs `program` (dig or kdig) with `args` in a thread against a UDP socket of ours; returns
/// the first request it sends (the client then times out: nothing answers).
fn capture_request(program: &str, package: &str, args: Vec<String>) -> Vec<u8> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    let path = require(program, package);
    let mut all = vec!["@127.0.0.1".to_string(), "-p".into(), port];
    all.extend(args);
    let client = std::thread::spawn(move || run(&path, &all));
    let mut buf = vec![0u8; 65535];
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("the client sends a request");
    let _ = client.join();
    buf.truncate(n);
    buf
}

/// Verifies `request` with `key`; the TSIG error, or NOERROR.
fn verify_request(request: &[u8], key: &Key) -> Rcode {
    let view = MessageView::parse(request).unwrap();
    let signed = tsig::find(&view).unwrap().expect("a TSIG record");
    match signed.verify(Some(key), Digest::Request, pqdns_core::time::now()) {
        Ok(_) => Rcode::NOERROR,
        Err(r) => r.error(),
    }
}

#[test]
fn requests_signed_by_dig_and_kdig_verify_and_a_wrong_secret_fails() {
    let dir = tempfile::tempdir().unwrap();
    for algorithm in [Algorithm::HmacSha256, Algorithm::HmacSha512] {
        let key = transfer_key(algorithm);
        let other = Key::new(key.name(), algorithm, b"not the secret").unwrap();
        let key_file = dir.path().join("k.conf");
        std::fs::write(&key_file, tsig_keyfile::format(&key).as_bytes()).unwrap();
        let y = y_arg(&key, KEY_NAME, key.secret());
        let requests = [
            (
                "dig",
                "bind9-dnsutils",
                vec!["+tries=1", "+time=1", "-y", &y, ORIGIN, "SOA"],
            ),
            (
                "dig",
                "bind9-dnsutils",
                vec![
                    "+tries=1",
                    "+time=1",
                    "-k",
                    key_file.to_str().unwrap(),
                    ORIGIN,
                    "SOA",
                ],
            ),
            (
                "kdig",
                "knot-dnsutils",
                vec!["+retry=0", "+time=1", "-y", &y, ORIGIN, "SOA"],
            ),
        ];
        for (program, package, args) in requests {
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            let request = capture_request(program, package, args.clone());
            assert_eq!(
                verify_request(&request, &key),
                Rcode::NOERROR,
                "{program} {args:?}"
            );
            assert_eq!(verify_request(&request, &other), BADSIG, "{program}");
            // Every flipped byte after the ID fails (the ID is replaced by the original ID).
            for at in 2..request.len() {
                let mut m = request.clone();
                m[at] ^= 0x40;
                let ok = MessageView::parse(&m)
                    .ok()
                    .and_then(|v| tsig::find(&v).ok().flatten())
                    .is_some_and(|s| {
                        s.verify(Some(&key), Digest::Request, pqdns_core::time::now())
                            .is_ok()
                    });
                assert!(!ok, "{program}: flipped byte {at} verified");
            }
        }
    }
}

/// `axfr_allow = ["PREFIX key:NAME"]`: a transfer needs both the key and an address in the
/// prefix; dig's signed AXFR from 127.0.0.1 is REFUSED when the prefix is elsewhere.
#[test]
fn a_key_bound_to_a_prefix_transfers_only_from_it() {
    let key = transfer_key(Algorithm::HmacSha256);
    let y = y_arg(&key, KEY_NAME, key.secret());
    for (prefix, allowed) in [("127.0.0.0/8", true), ("192.0.2.0/24", false)] {
        let mut ring = KeyRing::new();
        ring.insert(key.clone());
        let rule = (prefix.parse().unwrap(), key.name().clone());
        let server = TestServer::start_with(&["ECDSAP256SHA256"], move |s| {
            s.tsig_keys = Arc::new(ring);
            s.axfr_prefixed_keys = vec![rule];
        });
        let text = dig_text(
            "dig",
            "bind9-dnsutils",
            server.tcp(),
            &["-y", &y, ORIGIN, "AXFR"],
        );
        let soas = text.lines().filter(|l| l.contains("\tSOA\t")).count();
        if allowed {
            assert!(!tsig_complaint(&text) && soas == 2, "{prefix}: {text}");
        } else {
            assert!(
                soas == 0 && text.contains("Transfer failed"),
                "{prefix}: {text}"
            );
        }
    }
}

/// A server whose only transfer rule is the key (`axfr_allow = ["key:transfer-key"]`), with
/// metrics on, signing with `algorithms`.
fn signed_server(key: &Key, algorithms: &[&str]) -> TestServer {
    let mut ring = KeyRing::new();
    ring.insert(key.clone());
    let name = key.name().clone();
    TestServer::start_with(algorithms, move |s| {
        s.tsig_keys = Arc::new(ring);
        s.axfr_keys = vec![name];
        s.metrics = Some("127.0.0.1:0".parse().unwrap());
    })
}

fn dig_text(program: &str, package: &str, server: SocketAddr, args: &[&str]) -> String {
    let path = require(program, package);
    let mut all = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+norecurse".into(),
        "+time=5".into(),
    ];
    all.push(
        if program == "dig" {
            "+tries=1"
        } else {
            "+retry=0"
        }
        .into(),
    );
    all.extend(args.iter().map(|s| s.to_string()));
    run(&path, &all).1
}

/// dig's and kdig's ways of saying a TSIG did not verify or was missing (as seen from dig
/// 9.18 and kdig 3.2 against wrong keys: "Couldn't verify signature: …", "Some TSIG could not
/// be validated", "failed to verify TSIG", "; Transfer failed.").
fn tsig_complaint(text: &str) -> bool {
    [
        "Couldn't verify",
        "could not be validated",
        "failed to verify",
        "tsig verify failure",
        "Transfer failed",
    ]
    .iter()
    .any(|s| text.contains(s))
}

#[test]
fn dig_and_kdig_transfer_with_tsig_and_bad_keys_are_refused() {
    let key = transfer_key(Algorithm::HmacSha256);
    // ML-DSA-87 and ML-DSA-44 signatures: the AXFR takes several 64 KiB messages, each
    // signed after the prior one's MAC (RFC 8945 §5.3.1).
    let server = signed_server(&key, &["ML-DSA-87", "ML-DSA-44"]);
    let y = y_arg(&key, KEY_NAME, key.secret());

    // SOA over UDP, signed both ways.
    for program in [("dig", "bind9-dnsutils"), ("kdig", "knot-dnsutils")] {
        let text = dig_text(
            program.0,
            program.1,
            server.udp(),
            &["-y", &y, ORIGIN, "SOA"],
        );
        assert!(text.contains("status: NOERROR"), "{}: {text}", program.0);
        assert!(text.contains(&format!("{SERIAL}")), "{text}");
        assert!(!tsig_complaint(&text), "{}: {text}", program.0);
        let tsig_line = text.lines().find(|l| l.contains("\tTSIG\t"));
        assert!(
            tsig_line.is_some_and(|l| l.trim_end().ends_with("NOERROR 0")),
            "{}: a TSIG without error: {text}",
            program.0
        );
    }

    // AXFR over TCP: the whole zone, every message verified by the client.
    for program in [("dig", "bind9-dnsutils"), ("kdig", "knot-dnsutils")] {
        let text = dig_text(
            program.0,
            program.1,
            server.tcp(),
            &["-y", &y, ORIGIN, "AXFR"],
        );
        assert!(!tsig_complaint(&text), "{}: {text}", program.0);
        let soas = text.lines().filter(|l| l.contains("\tSOA\t")).count();
        assert_eq!(soas, 2, "{}: SOA first and last:\n{text}", program.0);
        assert!(text.contains("DNSKEY") && text.contains("RRSIG"), "{text}");
        let tsigs = text.lines().filter(|l| l.contains("\tTSIG\t")).count();
        assert!(tsigs > 1, "{}: {tsigs} signed messages:\n{text}", program.0);
    }

    // Unsigned: REFUSED (the allow-list holds only the key).
    let text = dig_text("dig", "bind9-dnsutils", server.tcp(), &[ORIGIN, "AXFR"]);
    assert!(
        text.contains("Transfer failed") || text.contains("REFUSED"),
        "{text}"
    );
    assert!(
        !text.contains("\tDNSKEY\t"),
        "an unsigned request got the zone: {text}"
    );

    // Wrong key name: BADKEY; wrong secret: BADSIG. Both NOTAUTH, no data.
    let wrong_name = y_arg(&key, "other-key.", key.secret());
    let wrong_secret = y_arg(&key, KEY_NAME, b"wrong secret");
    for (y, error) in [(&wrong_name, "BADKEY"), (&wrong_secret, "BADSIG")] {
        let text = dig_text(
            "dig",
            "bind9-dnsutils",
            server.udp(),
            &["-y", y, ORIGIN, "SOA"],
        );
        assert!(text.contains("status: NOTAUTH"), "{error}: {text}");
        let text = dig_text(
            "kdig",
            "knot-dnsutils",
            server.udp(),
            &["-y", y, ORIGIN, "SOA"],
        );
        assert!(text.contains(error), "kdig shows {error}: {text}");
        let text = dig_text(
            "dig",
            "bind9-dnsutils",
            server.tcp(),
            &["-y", y, ORIGIN, "AXFR"],
        );
        assert!(!text.contains("\tDNSKEY\t"), "{error}: {text}");
    }

    // IXFR after a reload: the journal's difference, signed.
    let path = server.dir.path().join("zone.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(&SERIAL.to_string(), &(SERIAL + 1).to_string()),
    )
    .unwrap();
    server.block_on(server.handle().reload()).unwrap();
    let ixfr = format!("IXFR={SERIAL}");
    for program in [("dig", "bind9-dnsutils"), ("kdig", "knot-dnsutils")] {
        let text = dig_text(
            program.0,
            program.1,
            server.tcp(),
            &["-y", &y, ORIGIN, &ixfr],
        );
        assert!(!tsig_complaint(&text), "{}: {text}", program.0);
        let soas = text.lines().filter(|l| l.contains("\tSOA\t")).count();
        assert_eq!(
            soas, 4,
            "{}: IXFR form (new, old, new, new SOA):\n{text}",
            program.0
        );
        assert!(
            !text.contains("\tDNSKEY\t"),
            "an incremental transfer: {text}"
        );
    }

    let metrics = http_get(server.handle().addrs.metrics.unwrap(), "/metrics");
    for (label, at_least) in [("badkey", 2), ("badsig", 2)] {
        let line = format!("pqdns_tsig_failures_total{{error=\"{label}\"}}");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line} in {metrics}"));
        assert!(n >= at_least, "{line} {n}");
    }
}

#[test]
fn a_request_signed_with_a_skewed_clock_gets_a_signed_badtime() {
    let key = transfer_key(Algorithm::HmacSha512);
    let server = signed_server(&key, &["ECDSAP256SHA256"]);
    let q = Question {
        qname: ORIGIN.parse::<Name>().unwrap(),
        qtype: RrType::SOA,
        qclass: Class::IN,
    };
    let mut wire = Message::query(0x7777, q, false, None).to_wire();
    let skewed = pqdns_core::time::now() - 1000;
    let mac = tsig::sign(&key, Digest::Request, &mut wire, 0, &Fields::at(skewed)).unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.send_to(&wire, server.udp()).unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = sock.recv_from(&mut buf).expect("an answer");
    let view = MessageView::parse(&buf[..n]).unwrap();
    assert_eq!(view.rcode(), Rcode::NOTAUTH);
    assert_eq!(view.counts()[1], 0, "no data");
    let signed = tsig::find(&view).unwrap().expect("a TSIG record");
    assert_eq!(signed.rdata.error, Rcode::BADTIME);
    assert_eq!(
        signed.rdata.time_signed, skewed,
        "the request's time signed"
    );
    let server_time = signed
        .rdata
        .other
        .iter()
        .fold(0u64, |t, &b| t << 8 | u64::from(b));
    assert!(
        server_time.abs_diff(pqdns_core::time::now()) < 5,
        "{server_time}"
    );
    // Signed after the request's MAC; at the request's time it is within the fudge.
    let v = signed
        .verify(Some(&key), Digest::Response(mac.as_bytes()), skewed)
        .unwrap();
    assert_eq!(v.error, Rcode::BADTIME);
    assert!(matches!(
        signed.verify(Some(&key), Digest::Request, skewed),
        Err(Rejection::BadSig)
    ));
}

/// NSD and Knot as secondaries pull the zone over TSIG-signed transfers (the server's allow-list
/// holds only the key), then the difference by IXFR after a reload and our signed NOTIFY (both
/// accept NOTIFY only with the key; their refresh timers, 7200 s, cannot explain the update).
/// Knot logs the transfer kind; NSD logs the NOTIFY it accepted.
#[test]
fn nsd_and_knot_secondaries_transfer_over_tsig() {
    use common::secondary::{Knot, Nsd};
    let key = transfer_key(Algorithm::HmacSha256);
    let nsd_port = pqdns_test_support::ports::free_dual_port();
    let knot_port = pqdns_test_support::ports::free_dual_port();
    let mut ring = KeyRing::new();
    ring.insert(key.clone());
    let name = key.name().clone();
    let server = TestServer::start_with(&["ECDSAP256SHA256", "ML-DSA-44"], move |s| {
        s.tsig_keys = Arc::new(ring);
        s.axfr_keys = vec![name];
        let targets: Vec<SocketAddr> = vec![
            ([127, 0, 0, 1], nsd_port).into(),
            ([127, 0, 0, 1], knot_port).into(),
        ];
        s.notify_keys = targets
            .iter()
            .map(|&t| (t, s.axfr_keys[0].clone()))
            .collect();
        s.notify = targets;
    });
    let mut nsd = Nsd::start(server.tcp(), nsd_port, Some(&key));
    let mut knot = Knot::start(server.tcp(), knot_port, Some(&key));
    nsd.wait_for_serial(SERIAL);
    knot.wait_for_serial(SERIAL);
    // Each serves the signed zone it got: the DNSKEY RRset with its ECDSA and ML-DSA-44
    // (algorithm 18) signatures, over TCP (too large for UDP).
    for secondary in [&nsd, &knot] {
        let out = common::dig(secondary.addr, &["+tcp", "+dnssec", ORIGIN, "DNSKEY"]);
        assert!(out.has_rrsig("ANSWER", "DNSKEY"), "{}", out.text);
        let algorithms: Vec<String> = out
            .section("ANSWER")
            .iter()
            .filter(|r| r.rtype == "RRSIG")
            .filter_map(|r| r.rdata.split_whitespace().nth(1).map(String::from))
            .collect();
        assert!(
            algorithms.iter().any(|a| a == "13") && algorithms.iter().any(|a| a == "18"),
            "{algorithms:?}"
        );
    }

    // Their signed answers verify with our code: SOA over UDP from both, and Knot's AXFR (as
    // a primary now) message by message in a chain; a flipped byte fails.
    for secondary in [&nsd, &knot] {
        let replies = signed_exchange(secondary.addr, &key, RrType::SOA);
        assert_eq!(replies.len(), 1);
    }
    let replies = signed_exchange(knot.addr, &key, RrType::AXFR);
    assert!(
        replies.len() >= 2,
        "Knot's AXFR of ~60 KB: several messages to chain"
    );

    let path = server.dir.path().join("zone.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(&SERIAL.to_string(), &(SERIAL + 1).to_string()),
    )
    .unwrap();
    server.block_on(server.handle().reload()).unwrap();
    nsd.wait_for_serial(SERIAL + 1);
    knot.wait_for_serial(SERIAL + 1);
    let log = knot.log();
    assert!(
        log.contains("AXFR, incoming") && log.contains("IXFR, incoming"),
        "knot: AXFR first, then IXFR:\n{log}"
    );
    assert!(!log.contains("TSIG"), "no TSIG complaint:\n{log}");
    let log = nsd.log();
    assert!(
        log.contains(&format!(
            "notify for {ORIGIN} from 127.0.0.1 serial {}",
            SERIAL + 1
        )),
        "nsd accepted the signed NOTIFY:\n{log}"
    );
}

/// BIND's named (9.18) as a secondary, its key included from a key file we wrote
/// (`tsig_keyfile::format`, BIND's syntax): it transfers the zone with TSIG (its log names the
/// key), then the difference (IXFR) after a reload, told by our signed NOTIFY (it accepts
/// NOTIFY only with the key).
#[test]
fn named_secondary_transfers_over_tsig() {
    use common::secondary::Named;
    let key = transfer_key(Algorithm::HmacSha256);
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("transfer.key");
    std::fs::write(&key_file, tsig_keyfile::format(&key).as_bytes()).unwrap();
    let port = pqdns_test_support::ports::free_dual_port();
    let mut ring = KeyRing::new();
    ring.insert(key.clone());
    let name = key.name().clone();
    let server = TestServer::start_with(&["ECDSAP256SHA256", "ML-DSA-44"], move |s| {
        s.tsig_keys = Arc::new(ring);
        let target: SocketAddr = ([127, 0, 0, 1], port).into();
        s.notify = vec![target];
        s.notify_keys = vec![(target, name.clone())];
        s.axfr_keys = vec![name];
    });
    let mut named = Named::start(server.tcp(), port, Some((&key_file, "transfer-key")));
    named.wait_for_serial(SERIAL);
    let out = common::dig(named.addr, &["+tcp", "+dnssec", ORIGIN, "DNSKEY"]);
    assert!(out.has_rrsig("ANSWER", "DNSKEY"), "{}", out.text);

    let path = server.dir.path().join("zone.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(&SERIAL.to_string(), &(SERIAL + 1).to_string()),
    )
    .unwrap();
    server.block_on(server.handle().reload()).unwrap();
    named.wait_for_serial(SERIAL + 1);
    let log = named.log();
    for serial in [SERIAL, SERIAL + 1] {
        assert!(
            log.contains(&format!("transferred serial {serial}: TSIG 'transfer-key'")),
            "named transferred {serial} with the key:\n{log}"
        );
    }
    assert!(
        log.contains("received notify for zone 'pqdns.test': TSIG 'transfer-key'")
            && log.contains(&format!(": serial {}", SERIAL + 1)),
        "named took our signed NOTIFY:\n{log}"
    );
    // The second transfer is the journal's difference (IXFR), not the zone again: BIND logs
    // "Transfer completed: 1 messages, N records" for each.
    let records: Vec<usize> = log
        .lines()
        .filter_map(|l| {
            l.split("messages, ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(records.len(), 2, "{log}");
    assert!(
        records[1] * 4 < records[0],
        "IXFR {} vs AXFR {} records",
        records[1],
        records[0]
    );
}

/// Sends `qtype` for the zone, signed with `key` by our code, to `server` (SOA over UDP, AXFR
/// over TCP) and verifies every reply's TSIG with our code: the first after our MAC, each
/// later one after the prior MAC (RFC 8945 §5.3.1); a flipped byte in each fails. Returns the
/// replies. Bounded: 10 s per read, 1000 messages.
fn signed_exchange(server: SocketAddr, key: &Key, qtype: RrType) -> Vec<Vec<u8>> {
    use std::io::{Read, Write};
    let q = Question {
        qname: ORIGIN.parse::<Name>().unwrap(),
        qtype,
        qclass: Class::IN,
    };
    let mut wire = Message::query(0x2b2b, q, false, None).to_wire();
    let now = pqdns_core::time::now();
    let mut prior = tsig::sign(key, Digest::Request, &mut wire, 0, &Fields::at(now)).unwrap();
    let mut replies = Vec::new();
    if qtype == RrType::SOA {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        sock.send_to(&wire, server).unwrap();
        let mut buf = vec![0u8; 65535];
        let (n, _) = sock.recv_from(&mut buf).expect("an answer");
        replies.push(buf[..n].to_vec());
    } else {
        let mut s = std::net::TcpStream::connect_timeout(&server, Duration::from_secs(10)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut framed = (wire.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&wire);
        s.write_all(&framed).unwrap();
        let mut soas = 0;
        while soas < 2 && replies.len() < 1000 {
            let mut len = [0u8; 2];
            s.read_exact(&mut len).unwrap();
            let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut msg).unwrap();
            let m = Message::parse(&msg).unwrap();
            assert_eq!(m.rcode(), Rcode::NOERROR);
            soas += m.answers.iter().filter(|r| r.rtype == RrType::SOA).count();
            replies.push(msg);
        }
    }
    for (i, reply) in replies.iter().enumerate() {
        let mac = prior;
        let digest = if i == 0 {
            Digest::Response(mac.as_bytes())
        } else {
            Digest::Subsequent(mac.as_bytes())
        };
        let view = MessageView::parse(reply).unwrap();
        let signed = tsig::find(&view).unwrap().expect("a signed reply");
        let v = signed
            .verify(Some(key), digest, now)
            .unwrap_or_else(|r| panic!("{server} {qtype} message {i}: {r:?}"));
        // The message proper (the TSIG's error and other data of a later message are outside
        // its digest, §4.3.1: only the timers are).
        for at in (2..signed.unsigned_len()).step_by(7) {
            let mut m = reply.clone();
            m[at] ^= 0x40;
            let ok = MessageView::parse(&m)
                .ok()
                .and_then(|v| tsig::find(&v).ok().flatten())
                .is_some_and(|s| s.verify(Some(key), digest, now).is_ok());
            assert!(!ok, "{server}: flipped byte {at} of message {i} verified");
        }
        prior = v.mac;
    }
    replies
}

/// A signed answer over UDP is sized with room for its TSIG record (HMAC-SHA512: 64-byte MAC):
/// for every client payload size from 512 to 1232 bytes (4-byte steps), the SOA answer with
/// its RSA and ECDSA RRSIGs comes within the payload, whole or truncated (TC), and always
/// signed; both outcomes occur.
#[test]
fn signed_udp_answers_leave_room_for_the_tsig_record() {
    let key = transfer_key(Algorithm::HmacSha512);
    let server = signed_server(&key, &["RSASHA256", "ECDSAP256SHA256"]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let exchange = |payload: u16| {
        let edns = pqdns_core::wire::Edns {
            udp_payload: payload,
            ext_rcode: 0,
            version: 0,
            flags: pqdns_core::wire::EDNS_DO,
            options: Vec::new(),
        };
        let q = Question {
            qname: ORIGIN.parse::<Name>().unwrap(),
            qtype: RrType::SOA,
            qclass: Class::IN,
        };
        let mut wire = Message::query(0x3c3c, q, false, Some(edns)).to_wire();
        let now = pqdns_core::time::now();
        let mac = tsig::sign(&key, Digest::Request, &mut wire, 0, &Fields::at(now)).unwrap();
        sock.send_to(&wire, server.udp()).unwrap();
        let mut buf = vec![0u8; 65535];
        let (n, _) = sock.recv_from(&mut buf).expect("an answer");
        buf.truncate(n);
        let view = MessageView::parse(&buf).unwrap();
        let signed = tsig::find(&view).unwrap().expect("signed");
        signed
            .verify(Some(&key), Digest::Response(mac.as_bytes()), now)
            .unwrap();
        (n, view.header().has(pqdns_core::wire::FLAG_TC))
    };
    let mut outcomes = std::collections::BTreeSet::new();
    for payload in (512..=1232).step_by(4) {
        let (n, tc) = exchange(payload);
        assert!(
            n <= usize::from(payload),
            "{n} bytes for a payload of {payload}"
        );
        outcomes.insert((tc, n));
    }
    let kinds: std::collections::BTreeSet<bool> = outcomes.iter().map(|o| o.0).collect();
    assert_eq!(
        kinds.len(),
        2,
        "whole and truncated answers both seen: {outcomes:?}"
    );
}

/// A request whose TSIG has no MAC (the form only error responses take, RFC 8945 §5.3.2) or
/// sits before the OPT record is FORMERR (§5.2.2.1, §5.1), without a TSIG in the answer.
#[test]
fn malformed_request_tsig_is_formerr() {
    let key = transfer_key(Algorithm::HmacSha256);
    let server = signed_server(&key, &["ECDSAP256SHA256"]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = || Question {
        qname: ORIGIN.parse::<Name>().unwrap(),
        qtype: RrType::SOA,
        qclass: Class::IN,
    };
    let now = pqdns_core::time::now();
    // An unsigned error-style TSIG, built by signing and then replacing the record.
    let mut signed = Message::query(0x4d4d, q(), false, None).to_wire();
    tsig::sign(&key, Digest::Request, &mut signed, 0, &Fields::at(now)).unwrap();
    let view = MessageView::parse(&signed).unwrap();
    let request = tsig::find(&view).unwrap().unwrap();
    let mut empty_mac = Message::query(0x4d4d, q(), false, None).to_wire();
    tsig::append_unsigned(&mut empty_mac, 0, &request, BADSIG, now).unwrap();
    // A TSIG followed by an OPT record.
    let edns = pqdns_core::wire::Edns::dnssec_ok(1232);
    let mut misplaced = Message::query(0x4d4d, q(), false, None).to_wire();
    tsig::sign(&key, Digest::Request, &mut misplaced, 0, &Fields::at(now)).unwrap();
    let mut opt = Message::query(0, q(), false, Some(edns)).to_wire();
    let opt_record = opt.split_off(Message::query(0, q(), false, None).to_wire().len());
    misplaced.extend_from_slice(&opt_record);
    misplaced[11] += 1;
    for (what, wire) in [("empty MAC", empty_mac), ("TSIG before OPT", misplaced)] {
        sock.send_to(&wire, server.udp()).unwrap();
        let mut buf = vec![0u8; 65535];
        let (n, _) = sock.recv_from(&mut buf).expect("an answer");
        let view = MessageView::parse(&buf[..n]).unwrap();
        assert_eq!(view.rcode(), Rcode::FORMERR, "{what}");
        assert!(tsig::find(&view).unwrap().is_none(), "{what}: no TSIG");
    }
}

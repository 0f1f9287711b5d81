//! Zone transfer and NOTIFY against real peers, over the wire only.
//!
//! - NSD 4.6 (Debian `nsd`) as a secondary pulls the dual-signed (ECDSA P-256 + ML-DSA-44,
//!   NSEC3) zone by AXFR and then serves byte-identical DNSKEY, RRSIG and NSEC3 RDATA; after a
//!   reload with a bumped serial our NOTIFY makes it transfer again.
//! - The allow-list: a client outside it gets REFUSED over TCP, everyone over UDP; dig +tls
//!   transfers over DoT (XoT) from an allowed address.
//! - NOTIFY reaches a plain UDP listener at start and after a reload, well formed, and is
//!   retried when unanswered.
//! - The metrics endpoint counts UDP and DoT queries with the right labels, including the TLS
//!   group negotiated by an independent client (Go crypto/tls).
//!
//! Every wait is bounded; NSD runs as a child process killed on drop.

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::secondary::{query_wire, soa_serial, udp_query, Nsd};
use common::{dig, go, http_get, TestServer, ORIGIN};
use pqdns_core::message::Message;
use pqdns_core::wire::{Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Class, Name, RrType};
use pqdns_server::acl::AllowList;

/// Fixed port of the NSD secondary (the server must know it before NSD starts).
const NSD_PORT: u16 = 31531;
/// Upper bound on any single socket read here.
const IO_LIMIT: Duration = Duration::from_secs(10);

const SERIAL: u32 = 2026010101;

fn name(s: &str) -> Name {
    s.parse().unwrap()
}

/// One query over TCP; the first response message.
fn tcp_query(server: SocketAddr, qname: &str, qtype: RrType) -> Message {
    tcp_exchange(server, &query_wire(qname, qtype, true)).remove(0)
}

/// Sends `query` over TCP and reads responses until one ends a transfer (or, for a plain
/// query, the first one). Bounded by `IO_LIMIT` per read and 10 000 messages.
fn tcp_exchange(server: SocketAddr, query: &[u8]) -> Vec<Message> {
    let mut s = TcpStream::connect_timeout(&server, IO_LIMIT).unwrap();
    s.set_read_timeout(Some(IO_LIMIT)).unwrap();
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    s.write_all(&framed).unwrap();
    let is_xfr = Message::parse(query).unwrap().questions[0].qtype == RrType::AXFR;
    let mut out = Vec::new();
    let mut soas = 0;
    for _ in 0..10_000 {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).unwrap();
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut msg).unwrap();
        let m = common::parse_response(&msg);
        soas += m.answers.iter().filter(|r| r.rtype == RrType::SOA).count();
        let error = m.rcode() != Rcode::NOERROR;
        out.push(m);
        if !is_xfr || error || soas >= 2 {
            return out;
        }
    }
    panic!("transfer did not end within 10000 messages");
}

/// The records of a section as a set of (owner lowercased, type, RDATA bytes).
fn rdata_set(records: &[pqdns_core::Record]) -> BTreeSet<(String, u16, Vec<u8>)> {
    records
        .iter()
        .map(|r| {
            (
                r.owner.to_string().to_ascii_lowercase(),
                r.rtype.0,
                r.rdata.clone(),
            )
        })
        .collect()
}

/// Bumps the SOA serial in the test server's zone description (for a reload).
fn bump_serial(server: &TestServer, to: u32) {
    let path = server.dir.path().join("zone.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&SERIAL.to_string()));
    std::fs::write(&path, text.replace(&SERIAL.to_string(), &to.to_string())).unwrap();
}

#[test]
fn nsd_transfers_pqc_signed_zone_and_serves_identical_signatures() {
    let nsd_addr: SocketAddr = ([127, 0, 0, 1], NSD_PORT).into();
    let server = TestServer::start_with(&["ECDSAP256SHA256", "ML-DSA-44"], |s| {
        s.axfr_allow = AllowList::new(vec!["127.0.0.1".parse().unwrap()]);
        s.notify = vec![nsd_addr];
    });
    let ours = server.tcp();
    let mut nsd = Nsd::start(ours, NSD_PORT, None);
    nsd.wait_for_serial(SERIAL);

    let cases = [
        (ORIGIN.to_string(), RrType::DNSKEY, Rcode::NOERROR),
        (format!("www.{ORIGIN}"), RrType::A, Rcode::NOERROR),
        (format!("nope.{ORIGIN}"), RrType::A, Rcode::NXDOMAIN),
    ];
    for (qname, qtype, expected) in &cases {
        let a = tcp_query(ours, qname, *qtype);
        let b = tcp_query(nsd.addr, qname, *qtype);
        assert_eq!(a.rcode(), *expected, "pqdns {qname} {qtype}");
        assert_eq!(b.rcode(), *expected, "nsd {qname} {qtype}\n{}", nsd.log());
        let (ours_set, theirs_set) = if *expected == Rcode::NXDOMAIN {
            // SOA, NSEC3 records and their RRSIGs.
            (rdata_set(&a.authority), rdata_set(&b.authority))
        } else {
            (rdata_set(&a.answers), rdata_set(&b.answers))
        };
        let sigs = ours_set.iter().filter(|r| r.1 == RrType::RRSIG.0).count();
        assert!(
            sigs >= 2,
            "{qname}: ECDSA and ML-DSA-44 RRSIGs expected, got {sigs}"
        );
        let mldsa = ours_set
            .iter()
            .filter(|r| r.1 == RrType::RRSIG.0 && r.2[2] == 18)
            .count();
        assert!(mldsa >= 1, "{qname}: an ML-DSA-44 (algorithm 18) RRSIG");
        if *qtype == RrType::DNSKEY {
            assert!(
                ours_set.iter().any(|r| r.1 == 48 && r.2[3] == 18),
                "ML-DSA-44 DNSKEY"
            );
        }
        if *expected == Rcode::NXDOMAIN {
            assert!(
                ours_set.iter().any(|r| r.1 == RrType::NSEC3.0),
                "NSEC3 proof"
            );
        }
        assert!(
            ours_set == theirs_set,
            "{qname} {qtype}: pqdns and NSD differ\npqdns: {ours_set:?}\nnsd: {theirs_set:?}"
        );
    }

    // A reload with a bumped serial: NOTIFY makes NSD transfer the new version (NSD asks by
    // IXFR; the journal answers with the difference: the new SOA's RRSIGs).
    bump_serial(&server, SERIAL + 1);
    server.block_on(server.handle().reload()).unwrap();
    nsd.wait_for_serial(SERIAL + 1);
    let a = tcp_query(ours, &format!("www.{ORIGIN}"), RrType::A);
    let b = tcp_query(nsd.addr, &format!("www.{ORIGIN}"), RrType::A);
    assert!(
        rdata_set(&a.answers) == rdata_set(&b.answers),
        "re-signed RRSIGs transferred"
    );
    // NSD logs the NOTIFY it accepted; its refresh timer (7200 s) cannot explain the update.
    let log = nsd.log();
    assert!(
        log.contains(&format!(
            "notify for {ORIGIN} from 127.0.0.1 serial {}",
            SERIAL + 1
        )),
        "{log}"
    );
}

#[test]
fn allow_list_refuses_others_and_dig_transfers_over_tls() {
    // Dual ML-DSA-87 (4627-byte signatures) and ML-DSA-44: more than one 64 KiB message.
    let server = TestServer::start_with(&["ML-DSA-87", "ML-DSA-44"], |s| {
        s.axfr_allow = AllowList::new(vec!["127.0.0.0/8".parse().unwrap()]);
    });
    let axfr = query_wire(ORIGIN, RrType::AXFR, false);
    // An allowed client over TCP gets the whole zone.
    let messages = tcp_exchange(server.tcp(), &axfr);
    assert!(messages.len() > 1, "{} messages", messages.len());
    let records: usize = messages.iter().map(|m| m.answers.len()).sum();
    let zone_records = server
        .handle()
        .catalog()
        .zones()
        .next()
        .unwrap()
        .zone
        .record_count();
    assert_eq!(
        records,
        zone_records + 1,
        "every record once, the SOA twice"
    );
    assert!(messages
        .iter()
        .all(|m| m.id == 0x5151 && m.has_flag(FLAG_AA)));

    // ::1 is not in the list: REFUSED over TCP.
    let refused = tcp_exchange(server.tcp6(), &query_wire(ORIGIN, RrType::AXFR, false));
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].rcode(), Rcode::REFUSED);
    assert!(refused[0].answers.is_empty());
    // UDP: REFUSED even from an allowed address (RFC 5936 §4.2).
    let udp = udp_query(server.udp(), &axfr).expect("a UDP answer");
    assert_eq!(udp.rcode(), Rcode::REFUSED);
    // dig over DoT (XoT) from 127.0.0.1.
    let out = dig(server.dot(), &["+tls", "AXFR", ORIGIN]);
    let summary = out
        .text
        .lines()
        .find(|l| l.starts_with(";; XFR size:"))
        .unwrap_or_else(|| panic!("no XFR summary:\n{}", out.text));
    assert!(
        summary.contains(&format!("{} records", zone_records + 1)),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("(messages {},", messages.len())),
        "{summary}"
    );
    // Not a zone apex we serve: NOTAUTH (RFC 5936 §2.2.1), with the question.
    let www = query_wire(&format!("www.{ORIGIN}"), RrType::AXFR, false);
    let notauth = tcp_exchange(server.tcp(), &www);
    assert_eq!((notauth.len(), notauth[0].rcode()), (1, Rcode::NOTAUTH));
    assert_eq!(notauth[0].questions.len(), 1);
}

/// Reads one NOTIFY from `socket`; panics on timeout or a malformed one.
fn read_notify(socket: &UdpSocket) -> (Vec<u8>, SocketAddr, Message) {
    let mut buf = vec![0u8; 4096];
    let (n, from) = socket
        .recv_from(&mut buf)
        .expect("a NOTIFY before the timeout");
    let m = Message::parse(&buf[..n]).expect("NOTIFY parses");
    assert_eq!((m.flags >> 11) & 0xf, 4, "opcode NOTIFY");
    assert!(!m.has_flag(FLAG_QR) && m.has_flag(FLAG_AA));
    assert_eq!(m.questions.len(), 1);
    assert_eq!(m.questions[0].qname, name(ORIGIN));
    assert_eq!(m.questions[0].qtype, RrType::SOA);
    assert_eq!(m.questions[0].qclass, Class::IN);
    (buf[..n].to_vec(), from, m)
}

fn ack(socket: &UdpSocket, request: &[u8], to: SocketAddr) {
    let mut response = request[..12].to_vec();
    response[2] |= 0x80; // QR
    response[6..12].fill(0);
    response[5] = 0; // no question echoed: the ID, QR and opcode are what count
    socket.send_to(&response, to).unwrap();
}

#[test]
fn notify_at_start_and_after_reload_is_retried_until_acknowledged() {
    let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let target = listener.local_addr().unwrap();
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| s.notify = vec![target]);

    let (wire, from, m) = read_notify(&listener);
    assert_eq!(
        soa_serial(&m),
        Some(SERIAL),
        "the SOA rides in the answer section"
    );
    ack(&listener, &wire, from);

    bump_serial(&server, SERIAL + 7);
    server.block_on(server.handle().reload()).unwrap();
    let (first, _, m) = read_notify(&listener);
    assert_eq!(soa_serial(&m), Some(SERIAL + 7));
    // Unanswered: the same request comes again about 2 s later.
    let sent = Instant::now();
    let (second, from, _) = read_notify(&listener);
    let gap = sent.elapsed();
    assert!(
        gap >= Duration::from_millis(1500),
        "retry after the timeout, not {gap:?}"
    );
    assert_eq!(first, second, "a retry resends the same message (same ID)");
    ack(&listener, &second, from);
    // Acknowledged: no third send.
    listener
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 512];
    assert!(
        listener.recv_from(&mut buf).is_err(),
        "no retry after the ack"
    );
}

#[test]
fn metrics_count_queries_and_tls_groups() {
    let server = TestServer::start_with(&["ML-DSA-44"], |s| {
        s.metrics = Some("127.0.0.1:0".parse().unwrap());
    });
    let metrics = server.handle().addrs.metrics.unwrap();
    let www = format!("www.{ORIGIN}");
    for _ in 0..2 {
        let m = udp_query(server.udp(), &query_wire(&www, RrType::A, false)).unwrap();
        assert_eq!(m.rcode(), Rcode::NOERROR);
    }
    // DNSKEY with ML-DSA-44 signatures does not fit in 1232 bytes: TC.
    let tc = udp_query(server.udp(), &query_wire(ORIGIN, RrType::DNSKEY, true)).unwrap();
    assert!(tc.has_flag(pqdns_core::wire::FLAG_TC));
    let dot = server.dot().to_string();
    let (ok, kv, text) = go(&["-addr", &dot, "-mode", "dot", "-name", &www]);
    assert!(ok && kv["curve"] == "X25519MLKEM768", "{text}");
    let (ok, kv, text) = go(&["-addr", &dot, "-mode", "dot", "-classical", "-name", &www]);
    assert!(ok && kv["curve"] == "X25519", "{text}");

    let page = http_get(metrics, "/metrics");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("text/plain; version=0.0.4"), "{page}");
    for line in [
        "pqdns_queries_total{transport=\"udp\",qtype=\"A\",rcode=\"NOERROR\"} 2",
        "pqdns_queries_total{transport=\"udp\",qtype=\"DNSKEY\",rcode=\"NOERROR\"} 1",
        "pqdns_queries_total{transport=\"dot\",qtype=\"A\",rcode=\"NOERROR\"} 2",
        "pqdns_truncated_responses_total{transport=\"udp\"} 1",
        "pqdns_response_bytes_count{transport=\"udp\"} 3",
        "pqdns_tls_handshakes_total{transport=\"dot\",group=\"X25519MLKEM768\"} 1",
        "pqdns_tls_handshakes_total{transport=\"dot\",group=\"X25519\"} 1",
        "pqdns_tls_handshake_failures_total{transport=\"dot\",reason=\"no-shared-group\"} 0",
    ] {
        assert!(page.lines().any(|l| l == line), "missing {line}:\n{page}");
    }
    assert!(http_get(metrics, "/other").starts_with("HTTP/1.1 404"));
}

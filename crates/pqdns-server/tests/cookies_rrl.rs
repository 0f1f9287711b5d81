//! DNS cookies (RFC 7873, RFC 9018) and response-rate limiting over UDP (issue 16): dig and
//! kdig get server cookies that verify; a burst of queries from one address is limited to the
//! rate (the rest dropped or sent as truncated stubs), while the same burst with a valid server
//! cookie, or over TCP, is answered in full; `cookies = "require"` answers BADCOOKIE.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::{dig, kdig, TestServer, ORIGIN};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, Rcode, FLAG_TC, OPTION_COOKIE};
use pqdns_core::{Class, RrType};
use pqdns_server::cookie::CookieMode;

const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

fn query(id: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut edns = Edns::dnssec_ok(1232);
    if let Some(c) = cookie {
        edns.options.push((OPTION_COOKIE, c.to_vec()));
    }
    let q = Question {
        qname: format!("www.{ORIGIN}").parse().unwrap(),
        qtype: RrType::A,
        qclass: Class::IN,
    };
    Message::query(id, q, false, Some(edns)).to_wire()
}

/// Sends `n` queries (made by `make`) as fast as possible and collects the responses that
/// arrive within half a second of the last one.
fn burst(server: SocketAddr, n: u16, make: impl Fn(u16) -> Vec<u8>) -> Vec<Message> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    for id in 0..n {
        socket.send_to(&make(id), server).unwrap();
    }
    let mut buf = [0u8; 65535];
    let mut out = Vec::new();
    while let Ok((len, _)) = socket.recv_from(&mut buf) {
        out.push(common::parse_response(&buf[..len]));
    }
    out
}

fn cookie_of(m: &Message) -> Vec<u8> {
    m.edns
        .as_ref()
        .and_then(|e| e.option(OPTION_COOKIE))
        .expect("a COOKIE option")
        .to_vec()
}

#[test]
fn a_burst_is_limited_unless_the_client_holds_a_valid_server_cookie() {
    let rate = 5;
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.rrl.rate = rate;
        s.rrl.slip = 2;
        // RRL alone: the amplification limit would truncate every cookie-less answer.
        s.amplification_limit = 0;
    });
    let n = 40;
    let plain = burst(server.udp(), n, |id| query(id, None));
    let full = plain.iter().filter(|m| !m.answers.is_empty()).count();
    let stubs = plain
        .iter()
        .filter(|m| m.has_flag(FLAG_TC) && m.answers.is_empty() && m.edns.is_some())
        .count();
    // One second's budget (two if the burst straddles a second), then half as stubs.
    assert!(
        full >= rate as usize && full <= 2 * rate as usize,
        "{full} full answers"
    );
    assert!(stubs >= 10, "{stubs} truncated stubs of {n}");
    assert!(
        plain.len() < usize::from(n),
        "some responses dropped: {}",
        plain.len()
    );

    // Learn a server cookie (a client cookie alone is a first contact: limited like others,
    // so wait for the next second's budget).
    std::thread::sleep(Duration::from_millis(1100));
    let first = burst(server.udp(), 1, |id| query(id, Some(&CLIENT_COOKIE)));
    let cookie = cookie_of(&first[0]);
    assert_eq!(cookie.len(), 24);
    assert_eq!(&cookie[..8], &CLIENT_COOKIE, "the client cookie echoed");
    assert_eq!(
        &cookie[8..12],
        &[1, 0, 0, 0],
        "RFC 9018 version 1, reserved 0"
    );
    // With it, the whole burst is answered, and every answer carries a fresh cookie.
    let proven = burst(server.udp(), n, |id| query(id, Some(&cookie)));
    assert_eq!(proven.len(), usize::from(n));
    assert!(proven
        .iter()
        .all(|m| m.answers.len() == 2 && cookie_of(m)[..8] == CLIENT_COOKIE));
    // A server cookie with one bit changed is not valid: limited again.
    let mut forged = cookie.clone();
    forged[23] ^= 1;
    let limited = burst(server.udp(), n, |id| query(id, Some(&forged)));
    assert!(limited.iter().filter(|m| !m.answers.is_empty()).count() <= 2 * rate as usize);
}

/// Issue 31: at any rate, a UDP client without a valid server cookie gets at most 3× its
/// query's bytes: dig's signed DNSKEY query is answered TC=1 with the server cookie (dig says
/// the cookie is good); over TCP dig gets the whole answer; a query carrying the server cookie
/// gets it over UDP.
#[test]
fn cookieless_udp_answers_are_cut_to_three_times_the_query() {
    let server = TestServer::start(&["ECDSAP256SHA256"], Default::default());
    let r = dig(
        server.udp(),
        &["+notcp", "+ignore", "+dnssec", ORIGIN, "DNSKEY"],
    );
    assert!(
        r.has_flag("tc") && r.section("ANSWER").is_empty(),
        "{}",
        r.text
    );
    assert!(
        r.text.contains("(good)"),
        "the server cookie came with it\n{}",
        r.text
    );
    let size: usize = r
        .text
        .lines()
        .find_map(|l| l.strip_prefix(";; MSG SIZE  rcvd: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no size\n{}", r.text));
    assert!(size <= 3 * 60, "{size} bytes for a query of under 60");
    // (The test server's TCP port differs from its UDP port, so dig cannot fall back by
    // itself: ask there.)
    let r = dig(server.tcp(), &["+tcp", "+dnssec", ORIGIN, "DNSKEY"]);
    assert_eq!(r.status(), "NOERROR", "{}", r.text);
    assert!(r.has_rrsig("ANSWER", "DNSKEY"), "{}", r.text);
    // Over UDP with the cookie: the whole answer.
    let first = burst(server.udp(), 1, |id| dnskey_query(id, Some(&CLIENT_COOKIE))).remove(0);
    assert!(first.has_flag(FLAG_TC) && first.answers.is_empty());
    let cookie = cookie_of(&first);
    let proven = burst(server.udp(), 1, |id| dnskey_query(id, Some(&cookie))).remove(0);
    assert!(!proven.has_flag(FLAG_TC));
    assert!(
        proven.answers.len() >= 3,
        "DNSKEYs and RRSIG: {:?}",
        proven.answers
    );
}

fn dnskey_query(id: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut m = Message::parse(&query(id, cookie)).unwrap();
    m.questions[0].qname = ORIGIN.parse().unwrap();
    m.questions[0].qtype = RrType::DNSKEY;
    m.to_wire()
}

#[test]
fn dig_and_kdig_get_server_cookies_and_send_them_back() {
    let server = TestServer::start(&["ECDSAP256SHA256"], Default::default());
    // Under "require", an answer after BADCOOKIE proves the client sent our cookie back and we
    // accepted it: dig and kdig retry with the server cookie they got.
    let strict = TestServer::start_with(&["ECDSAP256SHA256"], |s| s.cookies = CookieMode::Require);
    let www = format!("www.{ORIGIN}");
    for (client, name) in [(dig as fn(_, &[&str]) -> _, "dig"), (kdig, "kdig")] {
        let r = client(server.udp(), &["+cookie", &www, "A"]);
        assert_eq!(r.status(), "NOERROR", "{}", r.text);
        let line = r
            .text
            .lines()
            .find(|l| l.to_ascii_uppercase().contains("COOKIE:"))
            .unwrap_or_else(|| panic!("no COOKIE line:\n{}", r.text))
            .to_owned();
        let hex: String = line
            .split_whitespace()
            .find(|w| w.len() == 48 && w.chars().all(|c| c.is_ascii_hexdigit()))
            .unwrap_or_else(|| panic!("no 24-byte cookie in {line:?}"))
            .to_ascii_lowercase();
        assert_eq!(&hex[16..24], "01000000", "RFC 9018 server cookie: {line}");
        // dig checks that its client cookie came back and says so (kdig prints no verdict).
        assert!(name != "dig" || line.contains("good"), "{line}");

        // (kdig retries BADCOOKIE only when retries are allowed.)
        let retry = if name == "kdig" {
            "+retry=1"
        } else {
            "+cookie"
        };
        let r = client(strict.udp(), &["+cookie", retry, &www, "A"]);
        assert!(
            r.text.contains("BADCOOKIE"),
            "{name}: first contact\n{}",
            r.text
        );
        assert!(
            r.text.contains("status: NOERROR"),
            "{name}: the retry\n{}",
            r.text
        );
        assert!(r.text.contains("192.0.2.80"), "{name}\n{}", r.text);
    }
}

#[test]
fn require_mode_answers_badcookie_or_tc_until_the_cookie_is_valid() {
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.cookies = CookieMode::Require;
    });
    let ask = |cookie: Option<&[u8]>| burst(server.udp(), 1, |id| query(id, cookie)).remove(0);
    let none = ask(None);
    assert!(
        none.has_flag(FLAG_TC) && none.answers.is_empty(),
        "no cookie: TC, go to TCP"
    );
    let first = ask(Some(&CLIENT_COOKIE));
    assert_eq!(first.rcode(), Rcode::BADCOOKIE);
    assert!(first.answers.is_empty());
    let cookie = cookie_of(&first);
    let answered = ask(Some(&cookie));
    assert_eq!(answered.rcode(), Rcode::NOERROR);
    assert_eq!(answered.answers.len(), 2, "A and RRSIG");
    // A malformed COOKIE option (9 bytes) is FORMERR (RFC 7873 §5.2.2).
    assert_eq!(ask(Some(&[0; 9])).rcode(), Rcode::FORMERR);
    // TCP needs no cookie.
    let r = dig(
        server.tcp(),
        &["+tcp", "+nocookie", &format!("www.{ORIGIN}"), "A"],
    );
    assert!(r.text.contains("192.0.2.80"), "{}", r.text);
}

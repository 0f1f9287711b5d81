//! The service's DNS cookies and UDP limits, against a forwarder on 127.0.0.1 that answers
//! every A query (40 records for names starting with `big`, else one).

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, MessageView, Section, FLAG_QR, FLAG_RA, FLAG_RD, FLAG_TC};
use pqdns_core::{Class, Record, RrType};

use super::*;
use crate::{Client, Config, Mode, TlsOptions, TrustAnchors};

const CLIENT_COOKIE: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const CLIENT: &str = "127.0.0.1:5300";

/// A forwarder on 127.0.0.1 (its thread ends after 30 s without queries).
fn forwarder() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65_535];
        while let Ok((n, peer)) = socket.recv_from(&mut buf) {
            let Ok(q) = Message::parse(&buf[..n]) else {
                continue;
            };
            let mut r = q.clone();
            r.flags = FLAG_QR | FLAG_RA | (q.flags & FLAG_RD);
            r.edns = q.edns.as_ref().map(|_| Edns::dnssec_ok(1232));
            if let Some(question) = q.questions.first().filter(|q| q.qtype == RrType::A) {
                let many = question.qname.to_string().starts_with("big");
                for i in 0..if many { 40 } else { 1 } {
                    r.answers.push(Record {
                        owner: question.qname.clone(),
                        rtype: RrType::A,
                        class: Class::IN,
                        ttl: 300,
                        rdata: vec![192, 0, 2, i],
                    });
                }
            }
            let _ = socket.send_to(&r.to_wire(), peer);
        }
    });
    addr
}

fn service(config: ServiceConfig) -> Arc<RecursiveService> {
    let upstream = crate::Transport::Udp;
    let client = Client::new(upstream, Duration::from_secs(2), TlsOptions::default()).unwrap();
    let config_r = Config::new(Mode::Forward(forwarder()), TrustAnchors::default());
    Arc::new(RecursiveService::new(
        Resolver::new(config_r, client),
        config,
    ))
}

/// An A query with EDNS (no DO) and `cookie` as its COOKIE option data.
pub(super) fn query(name: &str, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut edns = Edns::dnssec_ok(4096);
    edns.flags = 0;
    if let Some(c) = cookie {
        edns.set_option(OPTION_COOKIE, c.to_vec());
    }
    let q = Question {
        qname: name.parse().unwrap(),
        qtype: RrType::A,
        qclass: Class::IN,
    };
    Message::query(7, q, true, Some(edns)).to_wire()
}

/// The response of `service` to `packet` from `client` over `transport`, and whether it was
/// answered at once (a cache hit, an error) rather than resolved.
pub(super) async fn ask(
    service: &Arc<RecursiveService>,
    packet: &[u8],
    client: &str,
    transport: Transport,
) -> (Vec<u8>, bool) {
    let request = Request::new(packet, client.parse().unwrap(), transport);
    let mut out = Vec::new();
    match service.respond(&(), &request, &mut out, 0) {
        Reply::Ready(info) => {
            out.truncate(info.len);
            (out, true)
        }
        Reply::Defer(deferred) => {
            let later = Arc::clone(service).respond_later(request.to_owned(), deferred, out, 0);
            let (mut out, info) = later.await;
            out.truncate(info.len);
            (out, false)
        }
        _ => panic!("no transfers"),
    }
}

fn rcode(response: &[u8]) -> Rcode {
    MessageView::parse(response).unwrap().rcode()
}

fn tc(response: &[u8]) -> bool {
    MessageView::parse(response).unwrap().header().has(FLAG_TC)
}

fn answers(response: &[u8]) -> usize {
    let view = MessageView::parse(response).unwrap();
    view.records(Section::Answer).count()
}

/// The response's COOKIE option data.
fn cookie_of(response: &[u8]) -> Option<Vec<u8>> {
    let view = MessageView::parse(response).unwrap();
    view.opt()?.option(OPTION_COOKIE).map(<[u8]>::to_vec)
}

/// Whether `service` takes `cookie` from `client` as a valid server cookie now.
fn valid(service: &RecursiveService, cookie: &[u8], client: &str) -> bool {
    let ip = client.parse::<SocketAddr>().unwrap().ip();
    let cookies = service.cookies.as_ref().unwrap();
    cookies.check(cookie, ip, pqdns_core::time::now()) == CookieCheck::Valid
}

#[tokio::test]
async fn a_cookie_option_of_a_bad_length_is_formerr() {
    let s = service(ServiceConfig::default());
    for len in [0, 7, 9, 15, 41] {
        let (r, now) = ask(
            &s,
            &query("small.test.", Some(&[7; 41][..len])),
            CLIENT,
            Transport::Udp,
        )
        .await;
        assert!(now, "{len} bytes");
        assert_eq!(rcode(&r), Rcode::FORMERR, "{len} bytes");
    }
    // 8 bytes is a client cookie: answered.
    let (r, _) = ask(
        &s,
        &query("small.test.", Some(&[7; 8])),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert_eq!((rcode(&r), answers(&r)), (Rcode::NOERROR, 1));
    // With cookies off the option is ignored.
    let off = service(ServiceConfig {
        cookies: CookieMode::Off,
        ..ServiceConfig::default()
    });
    let (r, _) = ask(
        &off,
        &query("small.test.", Some(&[7; 9])),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert_eq!(rcode(&r), Rcode::NOERROR);
    assert_eq!(cookie_of(&r), None);
}

#[tokio::test]
async fn every_response_carries_a_server_cookie_valid_on_the_next_query() {
    let s = service(ServiceConfig::default());
    let (miss, at_once) = ask(
        &s,
        &query("small.test.", Some(&CLIENT_COOKIE)),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert!(!at_once, "resolved");
    assert_eq!(answers(&miss), 1);
    let cookie = cookie_of(&miss).expect("a cookie on the miss");
    assert_eq!((cookie.len(), &cookie[..8]), (24, &CLIENT_COOKIE[..]));
    assert!(valid(&s, &cookie, CLIENT));
    assert!(
        !valid(&s, &cookie, "127.0.0.2:5300"),
        "bound to the address"
    );
    // Back with it: a cache hit, with the cookie (still valid).
    let (hit, at_once) = ask(
        &s,
        &query("small.test.", Some(&cookie)),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert!(at_once, "a hit");
    assert_eq!(answers(&hit), 1);
    let again = cookie_of(&hit).expect("a cookie on the hit");
    assert!(valid(&s, &again, CLIENT) && again[..8] == CLIENT_COOKIE);
    // Another client's hit gets its own cookie, over TCP too: never one stored with the answer.
    let other = [9u8; 8];
    let (hit, at_once) = ask(
        &s,
        &query("small.test.", Some(&other)),
        "127.0.0.3:53",
        Transport::Tcp,
    )
    .await;
    assert!(at_once);
    let theirs = cookie_of(&hit).unwrap();
    assert_eq!(theirs[..8], other);
    assert!(valid(&s, &theirs, "127.0.0.3:1") && !valid(&s, &theirs, CLIENT));
    // No client cookie, no cookie.
    let (hit, _) = ask(&s, &query("small.test.", None), CLIENT, Transport::Udp).await;
    assert_eq!((answers(&hit), cookie_of(&hit)), (1, None));
}

#[tokio::test]
async fn large_udp_answers_to_unproven_clients_are_cut_to_three_times_the_query() {
    let s = service(ServiceConfig::default());
    for (cookie, at_once) in [
        (None, false),
        (None, true),
        (Some(&CLIENT_COOKIE[..]), true),
    ] {
        let q = query("big.test.", cookie);
        let (r, now) = ask(&s, &q, CLIENT, Transport::Udp).await;
        assert_eq!(now, at_once, "miss, then hits");
        assert!(r.len() <= 3 * q.len(), "{} > 3 × {}", r.len(), q.len());
        assert!(tc(&r));
        assert_eq!(answers(&r), 0);
        // The cut answer keeps OPT and the cookie to come back with.
        assert_eq!(cookie_of(&r).map(|c| c.len()), cookie.map(|_| 24));
    }
    // Over TCP the whole answer; over UDP too with the server cookie.
    let (r, _) = ask(&s, &query("big.test.", None), CLIENT, Transport::Tcp).await;
    assert_eq!((tc(&r), answers(&r)), (false, 40));
    let (first, _) = ask(
        &s,
        &query("big.test.", Some(&CLIENT_COOKIE)),
        CLIENT,
        Transport::Udp,
    )
    .await;
    let q = query("big.test.", Some(&cookie_of(&first).unwrap()));
    let (r, _) = ask(&s, &q, CLIENT, Transport::Udp).await;
    assert_eq!((tc(&r), answers(&r)), (false, 40));
    assert!(r.len() > 3 * q.len());
    // A forged server cookie proves nothing.
    let mut forged = cookie_of(&first).unwrap();
    forged[20] ^= 1;
    let (r, _) = ask(
        &s,
        &query("big.test.", Some(&forged)),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert!(tc(&r));
    // The limit can be turned off.
    let unlimited = service(ServiceConfig {
        amplification_limit: 0,
        ..ServiceConfig::default()
    });
    let (r, _) = ask(
        &unlimited,
        &query("big.test.", None),
        CLIENT,
        Transport::Udp,
    )
    .await;
    assert_eq!((tc(&r), answers(&r)), (false, 40));
}

#[tokio::test]
async fn bursts_over_the_rate_are_limited_unless_the_cookie_is_valid() {
    let s = service(ServiceConfig {
        rrl: {
            let mut v = RrlSettings::default();
            v.rate = 5;
            v
        },
        ..ServiceConfig::default()
    });
    // Into the cache over TCP, with the server cookie for this address.
    let (r, _) = ask(
        &s,
        &query("small.test.", Some(&CLIENT_COOKIE)),
        CLIENT,
        Transport::Tcp,
    )
    .await;
    let cookie = cookie_of(&r).unwrap();
    let (mut full, mut limited) = (0, 0);
    for _ in 0..30 {
        let (r, _) = ask(&s, &query("small.test.", None), CLIENT, Transport::Udp).await;
        if r.is_empty() || tc(&r) {
            limited += 1;
        } else {
            full += 1;
        }
    }
    // 5 a second (10 if the burst straddles a second), the rest dropped or sent with TC.
    assert!(
        full <= 10 && limited >= 20,
        "{full} answered, {limited} limited"
    );
    // The same network with a valid cookie, and TCP, are not limited.
    for _ in 0..30 {
        let (r, _) = ask(
            &s,
            &query("small.test.", Some(&cookie)),
            CLIENT,
            Transport::Udp,
        )
        .await;
        assert_eq!((tc(&r), answers(&r)), (false, 1));
        let (r, _) = ask(&s, &query("small.test.", None), CLIENT, Transport::Tcp).await;
        assert_eq!((tc(&r), answers(&r)), (false, 1));
    }
}

/// Issue 26, must-show 2: the authoritative server and the resolver service run one
/// acceptability check (`pqdns_core::wire::query`), so they answer the same malformed or
/// non-QUERY message with the same RCODE, or both send nothing (UPDATE apart: the server
/// handles it).
#[tokio::test]
async fn server_and_resolver_service_reject_alike() {
    let good = query("www.example.", None);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut m = good.clone();
        edit(&mut m);
        m
    };
    let opcode = |op: u8| move |m: &mut Vec<u8>| m[2] = (m[2] & 0x87) | (op << 3);
    // The OPT record is the last 11 bytes of `good` (no options).
    let opt_at = good.len() - 11;
    let table: Vec<(&str, Vec<u8>, Option<Rcode>)> = vec![
        ("shorter than a header", good[..11].to_vec(), None),
        ("a response", with(&|m| m[2] |= 0x80), None),
        (
            "cut in the OPT record",
            good[..good.len() - 3].to_vec(),
            Some(Rcode::FORMERR),
        ),
        ("IQUERY", with(&opcode(1)), Some(Rcode::NOTIMP)),
        ("STATUS", with(&opcode(2)), Some(Rcode::NOTIMP)),
        ("NOTIFY", with(&opcode(4)), Some(Rcode::NOTIMP)),
        (
            "a malformed NOTIFY",
            with(&|m| {
                opcode(4)(m);
                m.push(0);
            }),
            Some(Rcode::FORMERR),
        ),
        ("QDCOUNT 0", with(&|m| m[5] = 0), Some(Rcode::FORMERR)),
        (
            "QDCOUNT 2",
            with(&|m| {
                let question = m[12..opt_at].to_vec();
                m.splice(opt_at..opt_at, question);
                m[5] = 2;
            }),
            Some(Rcode::FORMERR),
        ),
        (
            "two OPT records",
            with(&|m| {
                let opt = m[opt_at..].to_vec();
                m.extend(opt);
                m[11] = 2;
            }),
            Some(Rcode::FORMERR),
        ),
        (
            "EDNS version 1",
            with(&|m| m[opt_at + 6] = 1),
            Some(Rcode::BADVERS),
        ),
        (
            "QTYPE OPT",
            with(&|m| m[opt_at - 4..opt_at - 2].copy_from_slice(&[0, 41])),
            Some(Rcode::FORMERR),
        ),
        (
            "a QNAME pointing at itself",
            with(&|m| {
                m.splice(12..opt_at - 4, [0xc0, 12]);
            }),
            Some(Rcode::FORMERR),
        ),
        (
            "trailing bytes",
            with(&|m| m.extend([0, 0])),
            Some(Rcode::FORMERR),
        ),
    ];
    let catalog = pqdns_server::catalog::Catalog::new([]).unwrap();
    let resolver = service(ServiceConfig::default());
    let rcode_of = |response: &[u8]| {
        (!response.is_empty()).then(|| MessageView::parse(response).expect("a response").rcode())
    };
    for (what, message, want) in table {
        let mut out = Vec::new();
        let client = CLIENT.parse::<SocketAddr>().unwrap().ip();
        let udp = pqdns_server::answer::Transport::Udp;
        let o = pqdns_server::answer::respond(&catalog, &message, udp, client, 1232, &mut out, 0);
        let server = rcode_of(&out[..o.len]);
        let (response, at_once) = ask(&resolver, &message, CLIENT, Transport::Udp).await;
        assert!(at_once, "{what}: resolved");
        assert_eq!((server, rcode_of(&response)), (want, want), "{what}");
    }
    // UPDATE (RFC 2136) is an opcode the server handles now (`pqdns_server::update`); the
    // resolver service still answers it NOTIMP.
    let (response, at_once) = ask(&resolver, &with(&opcode(5)), CLIENT, Transport::Udp).await;
    assert!(at_once);
    assert_eq!(rcode_of(&response), Some(Rcode::NOTIMP), "UPDATE");
}

/// Issue 26: a deferred query is parsed once, by `respond`; `respond_later` takes the parsed
/// query from it. Everything runs on this thread (a current-thread runtime); the resolution
/// itself parses queries too (those it sends), counted apart by resolving another name alike.
#[tokio::test]
async fn a_deferred_query_is_parsed_once() {
    use pqdns_core::wire::parse_log::take_query_parses;
    let s = service(ServiceConfig::default());
    take_query_parses();
    let name = "twin.test.".parse().unwrap();
    s.resolver.resolve(&name, RrType::A).await.unwrap();
    let resolution = take_query_parses();
    let q = query("once.test.", None);
    let (r, now) = ask(&s, &q, CLIENT, Transport::Udp).await;
    assert!(!now, "a miss, resolved");
    assert_eq!(answers(&r), 1);
    assert_eq!(take_query_parses(), resolution + 1, "the miss");
    let (_, now) = ask(&s, &q, CLIENT, Transport::Tcp).await;
    assert!(now, "a hit");
    assert_eq!(take_query_parses(), 1, "the hit");
}

use std::time::Instant;

use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::frag::arrf::{Key, Limits, Progress, Reassembler};
use pqdns_core::frag::edns::{ARRF, PUSH, QBF};
use pqdns_core::message::Question;
use pqdns_core::wire::{Edns, FLAG_TC};
use pqdns_test_support::LOCALHOST;

use std::path::PathBuf;

use pqdns_net::{Reply, Request, Service, Transfer, Transport};

use super::*;
use crate::answer::respond;
use crate::cookie::{CookieMode, Cookies, DEFAULT_ROTATION, SECRET_LEN};
use crate::service::Authoritative;
use crate::settings::Settings;

const ZONE: &str =
    "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";
const PAYLOAD: u16 = 1232;

fn catalog() -> Arc<Catalog> {
    Arc::new(crate::catalog::signed_for_tests(
        &"example.".parse().unwrap(),
        ZONE,
        &[Algorithm::MlDsa44],
        Denial::Nsec3(Nsec3Params::default()),
    ))
}

fn query(qname: &str, qtype: RrType, schemes: Option<u8>) -> Message {
    let mut edns = Edns::dnssec_ok(PAYLOAD);
    if let Some(s) = schemes {
        FragOption::schemes(s).put(&mut edns, DEFAULT_CODE);
    }
    let q = Question {
        qname: qname.parse().unwrap(),
        qtype,
        qclass: Class::IN,
    };
    Message::query(7, q, false, Some(edns))
}

/// Our DNS cookie secret in the tests that need a valid server cookie.
const SECRET: [u8; SECRET_LEN] = [0x5e; SECRET_LEN];

/// A server for `catalog` fragmenting with `mode`, without the amplification limit (these
/// tests are about fragments; the service's own tests cover the limit), with DNS cookies when
/// `cookies` says so.
fn server(mode: Fragmentation, cookies: bool) -> Authoritative {
    let mut settings = Settings::new(PathBuf::from("/nonexistent"));
    settings.fragmentation = self::settings(mode);
    settings.amplification_limit = 0;
    settings.cookies = if cookies {
        CookieMode::On
    } else {
        CookieMode::Off
    };
    settings.cookie_secret = Some(SECRET);
    Authoritative::new(
        Arc::into_inner(catalog()).expect("a fresh catalog"),
        &settings,
    )
}

/// Everything the server's request pipeline sends over UDP for `packet` from 127.0.0.1: the
/// response and the fragments pushed after it.
fn pushing_wire(s: &Authoritative, packet: &[u8]) -> Vec<Vec<u8>> {
    let client = std::net::SocketAddr::new(LOCALHOST, 5300);
    let mut out = Vec::new();
    match s.respond(
        &s.snapshot(),
        &Request::new(packet, client, Transport::Udp),
        &mut out,
        0,
    ) {
        Reply::Ready(info) => {
            out.truncate(info.len);
            vec![out]
        }
        Reply::Transfer(mut messages) => {
            let mut sent = Vec::new();
            while let Some(len) = messages.next_message(&mut out, 0) {
                sent.push(out[..len].to_vec());
            }
            sent
        }
        _ => panic!("a UDP answer is ready or pushed"),
    }
}

/// What the server sends over UDP for `packet`, which must be a single datagram.
fn udp(s: &Authoritative, packet: &[u8]) -> Vec<u8> {
    let mut sent = pushing_wire(s, packet);
    assert_eq!(sent.len(), 1, "pushed to a client without a valid cookie");
    sent.remove(0)
}

/// The complete answer as TCP gives it, with the option the fragmenter adds.
fn over_tcp(catalog: &Catalog, q: &Message, scheme: u8) -> Message {
    let mut out = Vec::new();
    let o = respond(
        catalog,
        &q.to_wire(),
        Transport::Tcp,
        LOCALHOST,
        PAYLOAD,
        &mut out,
        0,
    );
    let mut m = Message::parse(&out[..o.len]).unwrap();
    FragOption::schemes(scheme).put(m.edns.as_mut().unwrap(), DEFAULT_CODE);
    m
}

const QUESTIONS: [(&str, RrType); 3] = [
    ("example.", RrType::DNSKEY),
    ("www.example.", RrType::A),
    ("nope.example.", RrType::A),
];

/// The client's reassembly key for the answer to `q` from 127.0.0.1:53.
fn reassembly_key(q: &Message) -> Key {
    Key {
        server: "127.0.0.1:53".parse().unwrap(),
        id: q.id,
        question: q.questions[0].clone(),
    }
}

fn settings(mode: Fragmentation) -> FragSettings {
    FragSettings {
        mode,
        ..FragSettings::default()
    }
}

#[test]
fn qbf_client_gets_all_fragments_and_the_same_answer_as_tcp() {
    let f = server(Fragmentation::Qbf, false);
    let catalog = f.catalog();
    let profile = Profile::default_profile();
    for (name, qtype) in QUESTIONS {
        let q = query(name, qtype, Some(ARRF | QBF));
        let first = Message::parse(&udp(&f, &q.to_wire())).unwrap();
        assert!(first.has_flag(FLAG_TC));
        assert_eq!(
            FragOption::find(first.edns.as_ref(), DEFAULT_CODE),
            Some(FragOption::schemes(QBF))
        );
        let count = qbf::fragment_count(&first, usize::from(PAYLOAD), &profile).unwrap();
        let mut frags = vec![first];
        for n in 2..=count {
            let mut req = q.clone();
            req.questions[0].qname = qbf::fragment_qname(n, &q.questions[0].qname).unwrap();
            let wire = udp(&f, &req.to_wire());
            assert!(wire.len() <= usize::from(PAYLOAD));
            frags.push(Message::parse(&wire).unwrap());
        }
        let back = qbf::reassemble(&frags).unwrap();
        assert_eq!(back, over_tcp(&catalog, &q, QBF), "{name} {qtype:?}");
        // A fragment beyond the count: FORMERR.
        let mut req = q.clone();
        req.questions[0].qname = qbf::fragment_qname(count + 1, &q.questions[0].qname).unwrap();
        let m = Message::parse(&udp(&f, &req.to_wire())).unwrap();
        assert_eq!(m.rcode(), Rcode::FORMERR);
    }
}

#[test]
fn arrf_client_gets_all_ranges_and_the_same_answer_as_tcp() {
    let s = settings(Fragmentation::Arrf);
    let f = server(Fragmentation::Arrf, false);
    let catalog = f.catalog();
    let t = Some(s.rrfrag_type);
    for (name, qtype) in QUESTIONS {
        let q = query(name, qtype, Some(ARRF));
        let wire = udp(&f, &q.to_wire());
        assert!(wire.len() <= usize::from(PAYLOAD));
        let first = Message::parse_with(&wire, t).unwrap();
        assert!(!first.has_flag(FLAG_TC));
        let mut r = Reassembler::new(Limits::default(), s.rrfrag_type);
        let key = reassembly_key(&q);
        let now = Instant::now();
        let mut progress = r.start(key.clone(), first, now).unwrap();
        let Progress::Missing(wanted) = &progress else {
            panic!("nothing to fetch for {name}")
        };
        for group in arrf::plan_requests(wanted, usize::from(PAYLOAD)) {
            let edns = q.edns.clone().unwrap();
            let req = arrf::fragment_request(
                q.id,
                &q.questions[0],
                &group,
                edns,
                s.rrfrag_type,
                DEFAULT_CODE,
            );
            let req_wire = req.to_wire_with(t);
            let resp = udp(&f, &req_wire);
            // Amplification bound: no more than a full-size answer to the original query.
            assert!(
                resp.len().saturating_sub(req_wire.len())
                    <= usize::from(PAYLOAD) - q.to_wire().len()
            );
            progress = r
                .add(&key, &Message::parse_with(&resp, t).unwrap(), now)
                .unwrap();
        }
        assert_eq!(
            progress,
            Progress::Complete(over_tcp(&catalog, &q, ARRF)),
            "{name}"
        );
        // A range that does not exist: FORMERR.
        let bad = arrf::Wanted {
            rr_id: 999,
            rr_size: 100,
            start: 0,
            len: 10,
        };
        let req = arrf::fragment_request(
            q.id,
            &q.questions[0],
            &[bad],
            q.edns.clone().unwrap(),
            s.rrfrag_type,
            DEFAULT_CODE,
        );
        let m = Message::parse_with(&udp(&f, &req.to_wire_with(t)), t).unwrap();
        assert_eq!(m.rcode(), Rcode::FORMERR);
    }
}

/// `q` with COOKIE option `data`.
fn with_cookie_option(q: &Message, data: &[u8]) -> Message {
    let mut q = q.clone();
    q.edns
        .as_mut()
        .unwrap()
        .set_option(OPTION_COOKIE, data.to_vec());
    q
}

#[test]
fn fragments_are_pushed_only_to_proven_clients_that_ask() {
    let cookies = Cookies::new(CookieMode::On, Some(SECRET), DEFAULT_ROTATION).unwrap();
    let client_cookie = [7u8; 8];
    let mut valid = [0u8; RESPONSE_COOKIE_LEN];
    cookies.write(
        &client_cookie,
        LOCALHOST,
        pqdns_core::time::now(),
        &mut valid,
    );
    let mut forged = valid;
    forged[RESPONSE_COOKIE_LEN - 1] ^= 1;
    for mode in [Fragmentation::Arrf, Fragmentation::Qbf] {
        let s = settings(mode);
        let f = server(mode, true);
        let catalog = f.catalog();
        let t = f.fragmenter.as_ref().unwrap().compact();
        for (name, qtype) in QUESTIONS {
            let asking = query(name, qtype, Some(mode.bit() | PUSH));
            let not_asking = query(name, qtype, Some(mode.bit()));
            // No cookie, only a client cookie, a forged server cookie, or a valid one without
            // the flag: the first fragment only, without the flag, with our cookie if the
            // query had one.
            for (q, cookie) in [
                (&asking, None),
                (&asking, Some(&client_cookie[..])),
                (&asking, Some(&forged[..])),
                (&not_asking, Some(&valid[..])),
            ] {
                let q = cookie.map_or(q.clone(), |c| with_cookie_option(q, c));
                let sent = pushing_wire(&f, &q.to_wire());
                assert_eq!(sent.len(), 1, "{mode} {name} {cookie:?}: pushed");
                let first = Message::parse_with(&sent[0], t).unwrap();
                let option = FragOption::find(first.edns.as_ref(), DEFAULT_CODE).unwrap();
                assert_eq!(option.schemes, mode.bit());
                let echoed = first.edns.as_ref().unwrap().option(OPTION_COOKIE);
                assert_eq!(
                    echoed.map(|c| c[..8].to_vec()),
                    cookie.map(|c| c[..8].to_vec())
                );
                assert!(echoed.is_none_or(|c| c.len() == RESPONSE_COOKIE_LEN));
            }
            // Proven and asked: every fragment at once, each within the budget; they make
            // the complete answer without a single request.
            let asking = with_cookie_option(&asking, &valid);
            let sent = pushing_wire(&f, &asking.to_wire());
            assert!(sent.len() > 1, "{mode} {name}: nothing pushed");
            assert!(sent.iter().all(|d| d.len() <= usize::from(PAYLOAD)));
            let messages: Vec<Message> = sent
                .iter()
                .map(|d| Message::parse_with(d, t).unwrap())
                .collect();
            let option = FragOption::find(messages[0].edns.as_ref(), DEFAULT_CODE).unwrap();
            assert!(option.push() && option.scheme_bits() == mode.bit());
            let back = match mode {
                Fragmentation::Qbf => qbf::reassemble(&messages).unwrap(),
                _ => {
                    let mut r = Reassembler::new(Limits::default(), s.rrfrag_type);
                    let key = reassembly_key(&asking);
                    let now = Instant::now();
                    let mut progress = r.start(key.clone(), messages[0].clone(), now).unwrap();
                    for m in &messages[1..] {
                        progress = r.add(&key, m, now).unwrap();
                    }
                    let Progress::Complete(m) = progress else {
                        panic!("{name}: incomplete after the pushed fragments: {progress:?}")
                    };
                    m
                }
            };
            let echoed = back.edns.as_ref().unwrap().option(OPTION_COOKIE);
            assert_eq!(echoed, Some(&valid[..]), "a fresh valid cookie is echoed");
            let tcp = over_tcp(&catalog, &asking, mode.bit());
            assert_eq!(
                (&back.answers, &back.authority, &back.additional),
                (&tcp.answers, &tcp.authority, &tcp.additional),
                "{mode} {name} {qtype:?}"
            );
        }
    }
}

#[test]
fn clients_without_the_option_get_tc_and_fragment_names_are_ordinary_names() {
    for mode in [Fragmentation::Arrf, Fragmentation::Qbf] {
        let f = server(mode, false);
        // No option, or an option offering only the other scheme: standard truncation.
        let other = if mode == Fragmentation::Arrf {
            QBF
        } else {
            ARRF
        };
        for schemes in [None, Some(other)] {
            let q = query("example.", RrType::DNSKEY, schemes);
            let m = Message::parse(&udp(&f, &q.to_wire())).unwrap();
            assert!(
                m.has_flag(FLAG_TC) && m.answers.is_empty(),
                "{mode} {schemes:?}"
            );
            assert_eq!(FragOption::find(m.edns.as_ref(), DEFAULT_CODE), None);
        }
    }
    // Without the option a `?2?` name is just a name (NXDOMAIN here).
    let f = server(Fragmentation::Qbf, false);
    let q = query("?2?www.example.", RrType::A, None);
    let m = Message::parse(&udp(&f, &q.to_wire())).unwrap();
    assert_eq!(
        (m.rcode(), m.questions[0].qname.clone()),
        (Rcode::NXDOMAIN, q.questions[0].qname.clone())
    );
    // Off: no fragmenter at all.
    assert!(Fragmenter::new(settings(Fragmentation::Off)).is_none());
}

#[test]
fn answer_cache_is_bounded_and_follows_the_catalog() {
    let f = Fragmenter::new(settings(Fragmentation::Arrf)).unwrap();
    // Two catalogs of the same zone with different keys (a reload).
    let (a, b) = (catalog(), catalog());
    let wire = query("example.", RrType::DNSKEY, Some(ARRF)).to_wire();
    let q = crate::request::parse(&wire, None).unwrap();
    let from_a = f.full_answer(&a, &q, PAYLOAD).unwrap();
    let from_b = f.full_answer(&b, &q, PAYLOAD).unwrap();
    assert_ne!(
        from_a.answers, from_b.answers,
        "a new catalog is not served from the old"
    );
    let mut again = q;
    again.header.id = 99;
    let hit = f.full_answer(&a, &again, PAYLOAD).unwrap();
    assert_eq!((hit.id, &hit.answers), (99, &from_a.answers));
    for i in 0..40 {
        let wire = query(&format!("n{i}.example."), RrType::A, Some(ARRF)).to_wire();
        let q = crate::request::parse(&wire, None).unwrap();
        f.full_answer(&a, &q, PAYLOAD).unwrap();
    }
    assert_eq!(f.cache.lock().unwrap().len(), ANSWER_CACHE_ENTRIES);
}

/// Deterministic mutations of fragment requests and of a fragmenting query: every answer is
/// within the UDP limit (or nothing is sent), and nothing panics.
#[test]
fn mutated_fragment_requests_never_panic_or_exceed_the_limit() {
    let q = query("www.example.", RrType::A, Some(ARRF | QBF));
    let t = FragSettings::default().rrfrag_type;
    let wanted = arrf::Wanted {
        rr_id: 1,
        rr_size: 2600,
        start: 0,
        len: 900,
    };
    let arrf_req = arrf::fragment_request(
        q.id,
        &q.questions[0],
        &[wanted],
        q.edns.clone().unwrap(),
        t,
        DEFAULT_CODE,
    )
    .to_wire_with(Some(t));
    let mut qbf_req = q.clone();
    qbf_req.questions[0].qname = qbf::fragment_qname(2, &q.questions[0].qname).unwrap();
    let seeds = [
        (Fragmentation::Arrf, arrf_req),
        (Fragmentation::Qbf, qbf_req.to_wire()),
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (mode, seed) in seeds {
        let f = server(mode, false);
        for base in [seed, q.to_wire()] {
            for _ in 0..2000 {
                let mut p = base.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % p.len();
                    p[i] = next() as u8;
                }
                if next() % 8 == 0 {
                    p.truncate((next() as usize) % p.len());
                }
                let out = udp(&f, &p);
                assert!(
                    out.len() <= usize::from(PAYLOAD),
                    "{mode}: {} bytes",
                    out.len()
                );
            }
        }
    }
}

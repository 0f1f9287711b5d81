//! Only validated data reaches the caller as Secure (issue 10 item 1): an in-process proxy
//! between the resolver and an in-process pqdns-server injects unsigned records into every
//! section of signed responses; the injected data never appears in the answer, is listed as
//! dropped, and tampering with the signed RRset itself makes the answer Bogus with no data.
//! Also: a thousand concurrent resolutions through one shared resolver (`tokio::spawn` on its
//! `Send + 'static` futures), forged answers from another source address ignored, and query
//! IDs and source ports that differ between fresh resolvers.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pqdns_core::dnssec::validate::Status;
use pqdns_core::message::Message;
use pqdns_core::wire::{Ede, Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Record, RrType};
use pqdns_resolver::{AnswerRRset, Config, Mode, Resolver, Section, TrustAnchors};
use tokio::net::UdpSocket;

use crate::common;
use common::{name, serve, udp_client, Served, ZoneSpec};

const RECORDS: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                       www A 192.0.2.2\nalias CNAME www\n*.w TXT \"wild\"\n";

const EVIL: [u8; 4] = [203, 0, 113, 66];

fn example() -> Served {
    let zone = ZoneSpec {
        origin: "example.",
        records: RECORDS,
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec3",
    };
    serve(zone, false, |_| {})
}

fn rec(owner: &str, rtype: RrType, rdata: Vec<u8>) -> Record {
    common::record(owner, rtype, 86_400, rdata)
}

type Mutation = Arc<dyn Fn(&mut Message) + Send + Sync>;

/// A UDP proxy in front of `server` that applies `mutate` to every response.
async fn proxy(server: SocketAddr, mutate: Mutation) -> SocketAddr {
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = front.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        // Bounded: the test ends the runtime; at most 10 000 queries.
        for _ in 0..10_000 {
            let Ok((n, client)) = front.recv_from(&mut buf).await else {
                return;
            };
            let query = buf[..n].to_vec();
            let (front, mutate) = (front.clone(), mutate.clone());
            tokio::spawn(async move {
                let back = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                back.connect(server).await.unwrap();
                back.send(&query).await.unwrap();
                let mut b = vec![0u8; 65_535];
                let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_secs(2), back.recv(&mut b)).await
                else {
                    return;
                };
                let Ok(mut m) = Message::parse(&b[..n]) else {
                    return;
                };
                mutate(&mut m);
                let _ = front.send_to(&m.to_wire(), client).await;
            });
        }
    });
    addr
}

fn resolver(addr: SocketAddr, anchors: TrustAnchors) -> Resolver {
    Resolver::new(
        Config::new(Mode::Forward(addr), anchors),
        udp_client(Duration::from_secs(3)),
    )
}

/// Every record of the answer's data (answer and authority RRsets, RRSIGs, referral).
fn all_data(a: &pqdns_resolver::Answer) -> Vec<Record> {
    let mut out = Vec::new();
    for s in a.answers().iter().chain(a.authority()) {
        out.extend(s.records());
        out.extend(s.rrsig_records());
    }
    out
}

fn resolve_through(
    served: &Served,
    mutate: Mutation,
    qname: &str,
    qtype: RrType,
) -> pqdns_resolver::Answer {
    served.rt.block_on(async {
        let front = proxy(served.addr, mutate).await;
        resolver(front, served.anchors.clone())
            .resolve(&name(qname), qtype)
            .await
            .unwrap()
    })
}

#[test]
fn injected_records_never_reach_the_caller() {
    let served = example();
    // (where, record) injected into every response the resolver gets.
    let cases: Vec<(Section, Record)> = vec![
        // The attack: one unsigned record appended to a signed answer.
        (
            Section::Answer,
            rec("login.bank.example.", RrType::A, EVIL.to_vec()),
        ),
        (
            Section::Authority,
            rec("example.", RrType::NS, name("ns.evil.").as_wire().to_vec()),
        ),
        (
            Section::Authority,
            rec("evil.example.", RrType::A, EVIL.to_vec()),
        ),
        // Same owner and type as the answer, but in ADDITIONAL: a separate, unsigned RRset.
        (
            Section::Additional,
            rec("www.example.", RrType::A, EVIL.to_vec()),
        ),
        (
            Section::Additional,
            rec("ns.example.", RrType::A, EVIL.to_vec()),
        ),
    ];
    for (section, injected) in cases {
        let r = injected.clone();
        let mutate: Mutation = Arc::new(move |m: &mut Message| match section {
            Section::Answer => m.answers.push(r.clone()),
            Section::Authority => m.authority.push(r.clone()),
            _ => m.additional.push(r.clone()),
        });
        let what = format!("{injected} in {section:?}");
        for (qname, qtype, negative) in [
            ("www.example.", RrType::A, false),
            ("alias.example.", RrType::A, false),
            ("x.w.example.", RrType::TXT, false),
            ("nope.example.", RrType::A, true),
            ("www.example.", RrType::TXT, true),
        ] {
            let a = resolve_through(&served, mutate.clone(), qname, qtype);
            let ctx = format!("{qname} {qtype} with {what}");
            assert!(a.status().is_secure(), "{ctx}: {:?}", a.status());
            let data = all_data(&a);
            assert!(!data.is_empty(), "{ctx}");
            assert!(
                !data.contains(&injected) && !data.iter().any(|d| d.rdata == EVIL),
                "{ctx}: injected data returned: {data:?}"
            );
            assert!(
                a.answers()
                    .iter()
                    .chain(a.authority())
                    .all(AnswerRRset::is_secure),
                "{ctx}"
            );
            assert!(
                a.dropped().iter().any(|d| d.section == section
                    && d.owner == injected.owner
                    && d.rtype == injected.rtype),
                "{ctx}: not reported as dropped: {:?}",
                a.dropped()
            );
            if negative {
                assert!(a.answers().is_empty(), "{ctx}");
                assert!(!a.denials().is_empty(), "{ctx}");
            } else {
                let last = a.answers().last().unwrap();
                assert_eq!(last.rtype(), qtype, "{ctx}");
                assert_eq!(a.answers()[0].owner(), a.qname(), "{ctx}");
            }
            // The raw response is still there, under its explicit name.
            assert!(a.unvalidated_messages().iter().any(|m| {
                m.answers
                    .iter()
                    .chain(&m.authority)
                    .chain(&m.additional)
                    .any(|r| *r == injected)
            }));
        }
    }
}

#[test]
fn tampering_with_the_signed_rrset_is_bogus_and_returns_nothing() {
    let served = example();
    let joined: Mutation = Arc::new(|m: &mut Message| {
        // An extra record in the signed www A RRset itself: the signature no longer covers it.
        if m.questions[0].qname == name("www.example.") {
            m.answers
                .push(rec("www.example.", RrType::A, EVIL.to_vec()));
        }
    });
    let replaced: Mutation = Arc::new(|m: &mut Message| {
        // The answer replaced by an unsigned one (RRSIGs stripped).
        if m.questions[0].qname == name("www.example.") {
            m.answers = vec![rec("www.example.", RrType::A, EVIL.to_vec())];
        }
    });
    let denied: Mutation = Arc::new(|m: &mut Message| {
        // A forged NXDOMAIN: the signed answer dropped, an unsigned SOA kept.
        if m.questions[0].qname == name("www.example.") && m.questions[0].qtype == RrType::A {
            m.answers.clear();
            m.flags = (m.flags & !0xf) | Rcode::NXDOMAIN.low();
            m.authority = vec![rec("example.", RrType::SOA, {
                let mut soa = name("ns.example.").as_wire().to_vec();
                soa.extend_from_slice(name("h.example.").as_wire());
                soa.extend([0; 20]);
                soa
            })];
        }
    });
    for (what, mutate, ede) in [
        ("joined", joined, Ede::DNSSEC_BOGUS),
        ("replaced", replaced, Ede::RRSIGS_MISSING),
        ("denied", denied, Ede::RRSIGS_MISSING),
    ] {
        let a = resolve_through(&served, mutate, "www.example.", RrType::A);
        assert!(
            matches!(a.status(), Status::Bogus(r) if r.ede == ede),
            "{what}: {:?}",
            a.status()
        );
        assert!(a.answers().is_empty() && a.authority().is_empty(), "{what}");
        assert!(a.denials().is_empty() && a.referral().is_none(), "{what}");
    }
}

/// One forged answer, with a TTL of a day, must not pin Bogus (RFC 4035 §4.7): once the
/// forgery stops, the genuine answer is Secure within seconds, from the same resolver.
#[test]
fn a_forged_answer_is_forgotten_within_seconds() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let served = example();
    let forging = Arc::new(AtomicBool::new(true));
    let on = forging.clone();
    let forge: Mutation = Arc::new(move |m: &mut Message| {
        if on.load(Relaxed) && m.questions[0].qname == name("www.example.") {
            for r in &mut m.answers {
                r.ttl = 86_400;
                if r.rtype == RrType::A {
                    r.rdata = EVIL.to_vec();
                }
            }
        }
    });
    served.rt.block_on(async {
        let front = proxy(served.addr, forge).await;
        let r = resolver(front, served.anchors.clone());
        let www = name("www.example.");
        let a = r.resolve(&www, RrType::A).await.unwrap();
        assert!(a.status().is_bogus(), "{:?}", a.status());
        forging.store(false, Relaxed);
        // The genuine answer, from the same resolver, within UNCONFIRMED_TTL (5 s) + 1 s.
        let start = Instant::now();
        let mut status = a.status().clone();
        while start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            status = r.resolve(&www, RrType::A).await.unwrap().status().clone();
            if matches!(status, Status::Secure(_)) {
                break;
            }
        }
        assert!(matches!(status, Status::Secure(_)), "{status:?}");
        assert!(
            start.elapsed() <= Duration::from_secs(7),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn a_thousand_concurrent_resolutions_share_one_resolver() {
    let served = example();
    let resolver = Arc::new(resolver(served.addr, served.anchors.clone()));
    let start = Instant::now();
    let results = served.rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..1000 {
            let (qname, qtype) = match i % 4 {
                0 => (format!("q{i}.w.example."), RrType::TXT),
                1 => (format!("q{i}.example."), RrType::A),
                2 => ("alias.example.".to_string(), RrType::A),
                _ => ("www.example.".to_string(), RrType::AAAA),
            };
            // The future owns what it needs: spawn it directly.
            tasks.push(tokio::spawn(resolver.resolve(&name(&qname), qtype)));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let elapsed = start.elapsed();
    let mut rcodes = [0usize; 4];
    for (i, a) in results.into_iter().enumerate() {
        let a = a.unwrap_or_else(|e| panic!("resolution {i}: {e}"));
        assert!(
            a.status().is_secure(),
            "{i} {}: {:?}",
            a.qname(),
            a.status()
        );
        rcodes[i % 4] += usize::from(match i % 4 {
            1 => a.rcode() == Rcode::NXDOMAIN,
            3 => a.rcode() == Rcode::NOERROR && a.answers().is_empty(),
            _ => !a.answers().is_empty(),
        });
    }
    assert_eq!(rcodes, [250; 4]);
    eprintln!("1000 concurrent resolutions in {elapsed:?}");
}

/// A UDP responder answering each query with `www.example. A 192.0.2.2`, after a forged
/// answer with the right ID and question sent from another socket (another source address).
/// Records the query IDs and source ports it sees.
async fn spoofed_responder(seen: Arc<Mutex<Vec<(u16, u16)>>>) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let spoofer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        for _ in 0..1000 {
            let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let Ok(q) = Message::parse(&buf[..n]) else {
                continue;
            };
            seen.lock().unwrap().push((q.id, peer.port()));
            let answer = |rdata: [u8; 4]| {
                let mut m = q.clone();
                m.flags |= FLAG_QR | FLAG_AA;
                m.edns = None;
                m.answers
                    .push(rec("www.example.", RrType::A, rdata.to_vec()));
                m.to_wire()
            };
            let _ = spoofer.send_to(&answer(EVIL), peer).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = socket.send_to(&answer([192, 0, 2, 2]), peer).await;
        }
    });
    addr
}

#[test]
fn answers_from_another_address_are_ignored_and_ids_and_ports_are_random() {
    let rt = common::runtime();
    let seen = Arc::new(Mutex::new(Vec::new()));
    rt.block_on(async {
        let addr = spoofed_responder(seen.clone()).await;
        for _ in 0..50 {
            // A fresh resolver each time: no state carried between them (an ID sequence
            // seeded from the process ID would repeat here).
            let a = resolver(addr, TrustAnchors::default())
                .resolve(&name("www.example."), RrType::A)
                .await
                .unwrap();
            assert!(matches!(a.status(), Status::Indeterminate(_)));
            let data: Vec<Record> = a.answers().iter().flat_map(AnswerRRset::records).collect();
            assert_eq!(data.len(), 1);
            assert_eq!(
                data[0].rdata,
                vec![192, 0, 2, 2],
                "the forged answer was taken"
            );
        }
    });
    let seen = seen.lock().unwrap();
    let ids: HashSet<u16> = seen.iter().map(|(id, _)| *id).collect();
    let ports: HashSet<u16> = seen.iter().map(|(_, p)| *p).collect();
    assert_eq!(seen.len(), 50);
    assert!(ids.len() >= 48, "{} distinct IDs in 50 queries", ids.len());
    assert!(
        ports.len() >= 48,
        "{} distinct ports in 50 queries",
        ports.len()
    );
    assert!(ports.iter().all(|p| *p >= 1024));
}

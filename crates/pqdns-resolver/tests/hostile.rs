//! A hostile UDP "server" on loopback: answers with the wrong ID, a compression loop, a
//! mismatched question, garbage, or a ~50 KB answer of bogus RRSIGs. Each exchange ends in an
//! error or Bogus within the timeout, never a panic. (The per-query verification limit itself
//! is tested in pqdns-core's validator tests, where a valid chain exists.)

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pqdns_core::dnssec::validate::Status;
use pqdns_core::message::Message;
use pqdns_core::wire::{FLAG_AA, FLAG_QR};
use pqdns_core::{Class, Name, Record, RrType};
use pqdns_resolver::transport::TransportError;
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use tokio::net::UdpSocket;

use crate::common;

/// Starts a UDP responder that turns each query into `reply(query)` (or stays silent).
async fn responder(reply: fn(&[u8]) -> Option<Vec<u8>>) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    common::spawn_udp(socket, move |q, _| reply(q));
    addr
}

fn resolver(addr: SocketAddr, anchored: bool) -> Resolver {
    let mut anchors = TrustAnchors::default();
    if anchored {
        anchors.add_ds("example.".parse().unwrap(), vec![0, 1, 13, 2, 0xaa]);
    }
    let config = Config::new(Mode::Forward(addr), anchors);
    let client = Client::new(
        Transport::Udp,
        Duration::from_millis(500),
        TlsOptions::default(),
    )
    .unwrap();
    Resolver::new(config, client)
}

fn answer_to(query: &[u8]) -> Message {
    let mut m = Message::parse(query).unwrap();
    m.flags |= FLAG_QR | FLAG_AA;
    m.edns = None;
    m
}

/// The answer to `query` with one A record (192.0.2.1, TTL 60) for its QNAME.
fn answer_a(query: &[u8]) -> Message {
    let mut m = answer_to(query);
    m.answers.push(Record {
        owner: m.questions[0].qname.clone(),
        rtype: RrType::A,
        class: Class::IN,
        ttl: 60,
        rdata: vec![192, 0, 2, 1],
    });
    m
}

/// A resolver forwarding over UDP to any of `servers` (no trust anchor), each exchange given
/// `timeout`.
fn forward_any(servers: Vec<SocketAddr>, timeout: Duration) -> Resolver {
    let config = Config::new(Mode::ForwardAny(servers), TrustAnchors::default());
    let client = Client::new(Transport::Udp, timeout, TlsOptions::default()).unwrap();
    Resolver::new(config, client)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn wrong_id_is_ignored_until_timeout() {
    let rt = rt();
    let err = rt.block_on(async {
        let addr = responder(|q| {
            let mut a = answer_to(q).to_wire();
            a[0] ^= 0xff;
            Some(a)
        })
        .await;
        let start = Instant::now();
        let e = resolver(addr, false)
            .resolve(&"www.example.".parse().unwrap(), RrType::A)
            .await
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        e
    });
    assert!(
        matches!(
            err,
            pqdns_resolver::resolve::ResolveError::Transport(TransportError::Timeout(_))
        ),
        "{err:?}"
    );
}

#[test]
fn compression_loop_mismatched_question_and_garbage_are_discarded() {
    let rt = rt();
    rt.block_on(async {
        let looped = responder(|q| {
            let mut a = q[..12].to_vec();
            a[2] |= 0x80;
            a.extend([0xc0, 12, 0, 1, 0, 1]);
            Some(a)
        })
        .await;
        let other_question = responder(|q| {
            let mut m = answer_to(q);
            m.questions[0].qname = "evil.example.".parse().unwrap();
            Some(m.to_wire())
        })
        .await;
        // QR set, TC clear, then counts and records that run past the end.
        let garbage = responder(|q| Some([&q[..2], &[0x80, 0x00], &[0xff; 40][..]].concat())).await;
        for addr in [looped, other_question, garbage] {
            let e = resolver(addr, false)
                .resolve(&"www.example.".parse().unwrap(), RrType::A)
                .await
                .unwrap_err();
            // Discarded as not answering the query (RFC 5452 §9.1): the resolver keeps
            // waiting for the real answer until its timeout.
            assert!(
                matches!(
                    e,
                    pqdns_resolver::resolve::ResolveError::Transport(TransportError::Timeout(_))
                ),
                "{e:?}"
            );
        }
    });
}

#[test]
fn a_flood_of_rrsigs_ends_bogus_quickly() {
    let rt = rt();
    let status = rt.block_on(async {
        let addr = responder(|q| {
            let mut m = answer_to(q);
            let q0 = m.questions[0].clone();
            m.answers.push(Record {
                owner: q0.qname.clone(),
                rtype: RrType::A,
                class: Class::IN,
                ttl: 60,
                rdata: vec![192, 0, 2, 1],
            });
            // 150 RRSIGs of ~330 bytes (~50 KB: loopback UDP carries it; TC is not set).
            let signer: Name = "example.".parse().unwrap();
            for i in 0..150u16 {
                let mut rdata = vec![0, 1, 13, 2, 0, 0, 0, 60, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
                rdata.extend(i.to_be_bytes());
                rdata.extend_from_slice(signer.as_wire());
                rdata.extend([7u8; 300]);
                m.answers.push(Record {
                    owner: q0.qname.clone(),
                    rtype: RrType::RRSIG,
                    class: Class::IN,
                    ttl: 60,
                    rdata,
                });
            }
            if q0.qtype == RrType::DNSKEY {
                m.answers.retain(|r| r.rtype == RrType::RRSIG);
            }
            Some(m.to_wire())
        })
        .await;
        let start = Instant::now();
        let answer = resolver(addr, true)
            .resolve(&"www.example.".parse().unwrap(), RrType::A)
            .await
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        answer.status().clone()
    });
    assert!(matches!(status, Status::Bogus(_)), "{status:?}");
}

/// Issue 31 item 4: one silent server of two costs a timeout once, not once per name: the
/// resolver remembers that it did not answer and asks the other first for a while.
#[test]
fn a_silent_server_costs_one_timeout_not_one_per_name() {
    let rt = rt();
    rt.block_on(async {
        let silent = responder(|_| None).await;
        let good = responder(|q| Some(answer_a(q).to_wire())).await;
        let r = forward_any(vec![silent, good], Duration::from_millis(500));
        let mut slow = 0;
        for i in 0..10 {
            let name: Name = format!("n{i}.example.").parse().unwrap();
            let start = Instant::now();
            let a = r.resolve(&name, RrType::A).await.unwrap();
            assert_eq!(a.answers().len(), 1, "{name}");
            if start.elapsed() >= Duration::from_millis(500) {
                slow += 1;
            }
        }
        assert_eq!(slow, 1, "only the first name waited for the silent server");
    });
}

/// An authority on 127.0.0.1 that answers every query with an A record after `delay_ms`
/// (none while `silent`), counting the queries it gets.
struct Scripted {
    addr: SocketAddr,
    queries: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    silent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Scripted {
    async fn start(delay: Duration) -> Scripted {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = socket.local_addr().unwrap();
        let queries = Arc::new(AtomicUsize::new(0));
        let silent = Arc::new(AtomicBool::new(false));
        let (count, quiet) = (Arc::clone(&queries), Arc::clone(&silent));
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((len, from)) = socket.recv_from(&mut buf).await {
                count.fetch_add(1, Ordering::Relaxed);
                if quiet.load(Ordering::Relaxed) {
                    continue;
                }
                let m = answer_a(&buf[..len]);
                let socket = Arc::clone(&socket);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = socket.send_to(&m.to_wire(), from).await;
                });
            }
        });
        Scripted {
            addr,
            queries,
            silent,
        }
    }

    fn queries(&self) -> usize {
        self.queries.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Issue 31 item 4, round-trip times (RFC 1035 §7.2): of two servers the faster is asked once
/// both are known, and when it stops answering the resolver moves on after its retransmission
/// timeout (about 100 ms here), not after the full 3 s exchange timeout.
#[test]
fn servers_are_asked_fastest_first_and_a_stalled_one_costs_its_rto() {
    let rt = rt();
    rt.block_on(async {
        let slow = Scripted::start(Duration::from_millis(300)).await;
        let fast = Scripted::start(Duration::ZERO).await;
        let r = forward_any(vec![slow.addr, fast.addr], Duration::from_secs(3));
        for i in 0..10 {
            let name: Name = format!("n{i}.example.").parse().unwrap();
            let a = r.resolve(&name, RrType::A).await.unwrap();
            assert_eq!(a.answers().len(), 1, "{name}");
        }
        // The first name went to the slow server (both unknown, the given order), the second
        // to the fast one (still unknown), the rest to the faster.
        assert_eq!((slow.queries(), fast.queries()), (1, 9));

        fast.silent
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let start = Instant::now();
        let a = r
            .resolve(&"m.example.".parse().unwrap(), RrType::A)
            .await
            .unwrap();
        assert_eq!(a.answers().len(), 1);
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(1500),
            "the stalled server cost {took:?}: the full timeout, not its RTO"
        );
        assert_eq!((slow.queries(), fast.queries()), (2, 10));
    });
}

//! ARRF and QBF end to end over 127.0.0.1 against pqdns-server: answers fetched as fragments
//! validate (and stay on UDP); once the client holds a server cookie the fragments are pushed
//! in one round trip, and never to a client that does not ask; a deterministic lossy,
//! reordering and duplicating UDP proxy still gives validated answers (from fragments, pushed
//! or requested, or after a clean TCP fallback); a client that does not offer fragmentation
//! gets TC=1 and TCP.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::RrType;
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::{Client, Config, ExchangeInfo, Mode, Resolver, TlsOptions, Transport};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::common;
use common::{serve as serve_zone, Served, ZoneSpec};

const RECORDS: &str =
    "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";

/// example. signed with ML-DSA-44 (NSEC3), served on one port for UDP and TCP.
fn serve(mode: Fragmentation) -> (Served, SocketAddr) {
    let zone = ZoneSpec {
        origin: "example.",
        records: RECORDS,
        algorithms: &["ML-DSA-44"],
        denial: "nsec3",
    };
    let served = serve_zone(zone, false, |s| s.fragmentation.mode = mode);
    let addr = served.addr;
    (served, addr)
}

fn resolver(served: &Served, addr: SocketAddr, mode: Fragmentation) -> Resolver {
    resolver_with(served, addr, FragConfig::new(mode))
}

fn resolver_with(served: &Served, addr: SocketAddr, mut frag: FragConfig) -> Resolver {
    let mut client = Client::new(
        Transport::Udp,
        Duration::from_secs(5),
        TlsOptions::default(),
    )
    .unwrap();
    frag.round_timeout = Duration::from_millis(300);
    client.set_fragmentation(frag);
    Resolver::new(
        Config::new(Mode::Forward(addr), served.anchors.clone()),
        client,
    )
}

const QUESTIONS: [(&str, RrType); 3] = [
    ("example.", RrType::DNSKEY),
    ("www.example.", RrType::A),
    ("nope.example.", RrType::A),
];

/// Resolves every question; returns the transports the exchanges used.
fn resolve_all(served: &Served, r: &Resolver) -> Vec<Option<Transport>> {
    exchanges(served, r).iter().map(|e| e.transport).collect()
}

/// Resolves every question (Secure); returns every exchange made.
fn exchanges(served: &Served, r: &Resolver) -> Vec<ExchangeInfo> {
    let mut all = Vec::new();
    for (name, qtype) in QUESTIONS {
        let answer = served
            .rt
            .block_on(r.resolve(&name.parse().unwrap(), qtype))
            .unwrap();
        assert!(answer.status().is_secure(), "{name} {qtype:?}");
        all.extend_from_slice(answer.exchanges());
    }
    all
}

#[test]
fn fragments_are_pushed_once_the_client_holds_a_server_cookie() {
    for mode in [Fragmentation::Arrf, Fragmentation::Qbf] {
        let (served, addr) = serve(mode);
        let r = resolver(&served, addr, mode);
        let first = exchanges(&served, &r);
        // The very first query has no server cookie yet: the server sends TC=1 with its
        // cookie (amplification limit; pqdns-server's own tests show nothing more goes to an
        // unproven address), and the same question asked again over UDP with the cookie is
        // answered in fragments, pushed.
        assert_eq!(first[0].transport, Some(Transport::Udp), "{mode}");
        assert!(first[0].fragments_pushed, "{mode}: {:?}", first[0]);
        let again = exchanges(&served, &r);
        let pushed: Vec<&ExchangeInfo> = first[1..]
            .iter()
            .chain(&again)
            .filter(|e| e.fragments_pushed)
            .collect();
        // The resolver cache answers some of the second round, but not all were asked once.
        assert!(!pushed.is_empty(), "{mode}: nothing pushed");
        for e in &pushed {
            assert_eq!(e.transport, Some(Transport::Udp));
        }
        // A client that does not ask is never pushed to, cookie or not.
        let mut quiet = FragConfig::new(mode);
        quiet.push = false;
        let r = resolver_with(&served, addr, quiet);
        let all: Vec<ExchangeInfo> = [exchanges(&served, &r), exchanges(&served, &r)].concat();
        assert!(all.iter().all(|e| !e.fragments_pushed), "{mode}");
        assert!(all.iter().all(|e| e.transport == Some(Transport::Udp)));
    }
}

#[test]
fn fragmented_answers_validate_and_stay_on_udp() {
    for mode in [Fragmentation::Arrf, Fragmentation::Qbf] {
        let (served, addr) = serve(mode);
        let r = resolver(&served, addr, mode);
        let used = resolve_all(&served, &r);
        assert!(!used.is_empty());
        assert!(
            used.iter().all(|t| *t == Some(Transport::Udp)),
            "{mode}: {used:?}"
        );
        // A client offering nothing (or the other scheme) gets TC=1 and uses TCP.
        let other = if mode == Fragmentation::Arrf {
            Fragmentation::Qbf
        } else {
            Fragmentation::Arrf
        };
        for client_mode in [Fragmentation::Off, other] {
            let r = resolver(&served, addr, client_mode);
            let used = resolve_all(&served, &r);
            assert!(
                used.contains(&Some(Transport::Tcp)),
                "{mode} server, {client_mode} client: {used:?}"
            );
        }
    }
}

/// What the proxy did to server → client datagrams.
#[derive(Default)]
struct Mangled {
    dropped: AtomicUsize,
    duplicated: AtomicUsize,
    reordered: AtomicUsize,
}

/// True for fragment responses (ARRF: question `.`; QBF: a `?n?` QNAME), as opposed to first
/// responses, whose loss would be an ordinary UDP timeout.
fn is_fragment(d: &[u8]) -> bool {
    d.get(12) == Some(&0) || d.get(13) == Some(&b'?')
}

/// A UDP (and TCP pass-through) proxy in front of `server`. Fragment response number k (from
/// 0) is dropped if `drop(k)`, else sent twice if k % 4 == 1, and held back until the next
/// datagram if k % 4 == 3 (reordering). At most 10 000 datagrams each way.
async fn proxy(server: SocketAddr, drop: fn(usize) -> bool) -> (SocketAddr, Arc<Mangled>) {
    // UDP and TCP on one port (the fallback goes to the same address).
    let port = pqdns_test_support::ports::free_dual_port();
    let front = Arc::new(UdpSocket::bind(("127.0.0.1", port)).await.unwrap());
    let addr = front.local_addr().unwrap();
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    back.connect(server).await.unwrap();
    let client = Arc::new(tokio::sync::Mutex::new(None::<SocketAddr>));
    let stats = Arc::new(Mangled::default());
    let (f, b, c) = (front.clone(), back.clone(), client.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        for _ in 0..10_000 {
            let Ok((n, peer)) = f.recv_from(&mut buf).await else {
                return;
            };
            *c.lock().await = Some(peer);
            let _ = b.send(&buf[..n]).await;
        }
    });
    let s = stats.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        let mut held: Option<Vec<u8>> = None;
        let mut k = 0;
        for _ in 0..10_000 {
            let Ok(n) = back.recv(&mut buf).await else {
                return;
            };
            let Some(peer) = *client.lock().await else {
                continue;
            };
            if !is_fragment(&buf[..n]) {
                let _ = front.send_to(&buf[..n], peer).await;
                continue;
            }
            k += 1;
            if drop(k) {
                s.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let copies = if k % 4 == 1 {
                s.duplicated.fetch_add(1, Ordering::Relaxed);
                2
            } else {
                1
            };
            if k % 4 == 3 && held.is_none() {
                s.reordered.fetch_add(1, Ordering::Relaxed);
                held = Some(buf[..n].to_vec());
                continue;
            }
            for _ in 0..copies {
                let _ = front.send_to(&buf[..n], peer).await;
            }
            if let Some(h) = held.take() {
                let _ = front.send_to(&h, peer).await;
            }
        }
    });
    // TCP: plain pass-through on the same port, for the fallback.
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        for _ in 0..100 {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(server).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, stats)
}

#[test]
fn lossy_reordering_duplicating_path_gives_validated_answers_or_tcp_fallback() {
    for mode in [Fragmentation::Arrf, Fragmentation::Qbf] {
        let (served, addr) = serve(mode);
        // Every fifth fragment lost: asked again, answers mostly stay on UDP; pushed
        // fragments (after the first exchange learnt a server cookie) are recovered the same
        // way.
        let (front, stats) = served.rt.block_on(proxy(addr, |k| k % 5 == 2));
        let r = resolver(&served, front, mode);
        let all = exchanges(&served, &r);
        let used: Vec<_> = all.iter().map(|e| e.transport).collect();
        assert!(used.contains(&Some(Transport::Udp)), "{mode}: {used:?}");
        assert!(
            all.iter()
                .any(|e| e.fragments_pushed && e.transport == Some(Transport::Udp)),
            "{mode}: no pushed answer through the lossy path"
        );
        assert!(stats.dropped.load(Ordering::Relaxed) > 0);
        assert!(stats.duplicated.load(Ordering::Relaxed) > 0);
        assert!(stats.reordered.load(Ordering::Relaxed) > 0);
        // Every fragment lost: clean fallback to TCP.
        let (front, _) = served.rt.block_on(proxy(addr, |_| true));
        let r = resolver(&served, front, mode);
        let used = resolve_all(&served, &r);
        assert!(
            used.iter().all(|t| *t == Some(Transport::Tcp)),
            "{mode}: {used:?}"
        );
    }
}

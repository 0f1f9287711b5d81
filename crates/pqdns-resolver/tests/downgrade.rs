//! Downgrade protection by DS (issue 29, must-show 1; the rule: `pqdns_core::dnssec::downgrade`).
//!
//! The hierarchy of the other tests (root ECDSA, `tld.` ML-DSA-44) with two leaves, each signed
//! with ECDSAP256SHA256 and ML-DSA-44: `dual.tld.`, whose DS RRset in `tld.` names both keys,
//! and `classic.tld.`, whose DS RRset names only the ECDSA key. The leaves' server sits behind
//! an in-process proxy (UDP and TCP, at the leaves' glue address) that strips ML-DSA-44 RRSIGs
//! from its answers, on the way as an attacker would: all of them, or all but those over the
//! DNSKEY RRset (so that the data itself, not only the keys, is shown to be held to the rule).
//! Iterative resolution from the root's DS:
//! - nothing stripped: both leaves Secure, `dual.tld.` through ML-DSA-44;
//! - stripped, protection on: `dual.tld.` Bogus with EDE 10 (RRSIGs Missing) naming the DS,
//!   positive and NXDOMAIN answers alike; `classic.tld.` Secure through ECDSA;
//! - stripped, protection off: `dual.tld.` Secure through ECDSA (RFC 6840 §5.11);
//! - the daemon: SERVFAIL with EDE 10 for dig, and NOERROR with AD under
//!   `--no-ds-downgrade-protection`;
//! - for the record, unbound 1.17 (which does not know algorithm 18) beside it, on a hierarchy
//!   whose `tld.` is ECDSA: it accepts the stripped answer as Secure.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::hierarchy::{anchors, build_at, serve, Leaf, Running, Tiers, LEAF_IP, TIERS};
use common::service::Service;
use common::{name, runtime, udp_client};
use pqdns_core::dnssec::validate::Status;
use pqdns_core::dnssec::SecAlg;
use pqdns_core::message::Message;
use pqdns_core::wire::{Ede, FLAG_TC};
use pqdns_core::RrType;
use pqdns_resolver::{Answer, AnswerRRset, Config, Mode, Resolver};
use pqdns_test_support::hierarchy::write_root_hints;
use pqdns_test_support::peers::{dig, start_unbound, KillOnDrop};
use pqdns_test_support::ports::{free_dual_port, free_dual_port_on};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Where the leaves' server really listens (the proxy has their glue address, [`LEAF_IP`]).
const BACKEND_IP: &str = "127.0.0.6";

/// What the proxy strips.
const STRIP_NONE: u8 = 0;
const STRIP_ALL: u8 = 1;
const STRIP_DATA: u8 = 2;

/// Where the hierarchy's servers, the proxy and its backend listen.
#[derive(Clone, Copy)]
struct Site {
    tiers: Tiers,
    /// The leaves' glue address: the proxy.
    leaf_ip: &'static str,
    /// The leaves' server.
    backend_ip: &'static str,
    /// All on this port (`None`: a free one).
    port: Option<u16>,
    /// `tld.`'s algorithm.
    tld_alg: &'static str,
}

/// The resolver tests' loopback addresses, a free port, `tld.` signed with ML-DSA-44.
const DEFAULT_SITE: Site = Site {
    tiers: TIERS,
    leaf_ip: LEAF_IP,
    backend_ip: BACKEND_IP,
    port: None,
    tld_alg: "ML-DSA-44",
};

/// `dual.tld.` and `classic.tld.`, both signed with ECDSA and ML-DSA-44, served at `ip`.
fn leaves(ip: &'static str) -> [Leaf; 2] {
    [
        Leaf {
            name: "dual",
            algorithms: &["ECDSAP256SHA256", "ML-DSA-44"],
            denial: "nsec",
            ip,
            extra: "",
        },
        Leaf {
            name: "classic",
            algorithms: &["ECDSAP256SHA256", "ML-DSA-44"],
            denial: "nsec",
            ip,
            extra: "",
        },
    ]
}

/// Removes the RRSIGs of algorithm ML-DSA-44 from every section (with `STRIP_DATA`, not those
/// covering DNSKEY).
fn strip(m: &mut Message, how: u8) {
    let keep = |r: &pqdns_core::Record| {
        if r.rtype != RrType::RRSIG || r.rdata.len() < 3 || r.rdata[2] != SecAlg::MLDSA44.0 {
            return true;
        }
        let covered = RrType(u16::from_be_bytes([r.rdata[0], r.rdata[1]]));
        how == STRIP_NONE || (how == STRIP_DATA && covered == RrType::DNSKEY)
    };
    m.answers.retain(keep);
    m.authority.retain(keep);
    m.additional.retain(keep);
}

/// `query` asked of `backend` over TCP, its answer stripped as `how` says now.
async fn relay(backend: SocketAddr, query: &[u8], how: &AtomicU8) -> Option<Vec<u8>> {
    let exchange = async {
        let mut s = TcpStream::connect(backend).await.ok()?;
        let len = u16::try_from(query.len()).ok()?;
        s.write_all(&len.to_be_bytes()).await.ok()?;
        s.write_all(query).await.ok()?;
        let mut l = [0u8; 2];
        s.read_exact(&mut l).await.ok()?;
        let mut b = vec![0u8; usize::from(u16::from_be_bytes(l))];
        s.read_exact(&mut b).await.ok()?;
        Some(b)
    };
    let b = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()??;
    let mut m = Message::parse(&b).ok()?;
    strip(&mut m, how.load(Ordering::SeqCst));
    Some(m.to_wire())
}

/// The proxy at `front` (UDP and TCP) for the server at `backend`. Over UDP an answer longer
/// than 1232 bytes (the resolver's EDNS payload) goes back as header and question with TC,
/// and the resolver asks again over TCP. Bounded: 2000 datagrams, 500 connections of at most
/// 50 queries each; the tasks end with the runtime.
async fn proxy(front: SocketAddr, backend: SocketAddr, how: Arc<AtomicU8>) {
    let udp = Arc::new(UdpSocket::bind(front).await.unwrap());
    let tcp = TcpListener::bind(front).await.unwrap();
    let h = how.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        for _ in 0..2000 {
            let Ok((n, client)) = udp.recv_from(&mut buf).await else {
                return;
            };
            let (udp, how, query) = (udp.clone(), h.clone(), buf[..n].to_vec());
            tokio::spawn(async move {
                let Some(mut answer) = relay(backend, &query, &how).await else {
                    return;
                };
                if answer.len() > 1232 {
                    let mut m = Message::parse(&answer).unwrap();
                    m.flags |= FLAG_TC;
                    m.answers.clear();
                    m.authority.clear();
                    m.additional.clear();
                    answer = m.to_wire();
                }
                let _ = udp.send_to(&answer, client).await;
            });
        }
    });
    tokio::spawn(async move {
        for _ in 0..500 {
            let Ok((mut s, _)) = tcp.accept().await else {
                return;
            };
            let how = how.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    let mut l = [0u8; 2];
                    if s.read_exact(&mut l).await.is_err() {
                        return;
                    }
                    let mut q = vec![0u8; usize::from(u16::from_be_bytes(l))];
                    if s.read_exact(&mut q).await.is_err() {
                        return;
                    }
                    let Some(a) = relay(backend, &q, &how).await else {
                        return;
                    };
                    let len = u16::try_from(a.len()).unwrap().to_be_bytes();
                    if s.write_all(&len).await.is_err() || s.write_all(&a).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

struct World {
    running: Running,
    h: common::hierarchy::Hierarchy,
    tiers: Tiers,
    port: u16,
    how: Arc<AtomicU8>,
}

/// The hierarchy served at `site`, `classic.tld.`'s ML-DSA-44 DS removed from `tld.`, the
/// leaves behind the stripping proxy (stripping nothing yet).
fn world(site: Site) -> World {
    let h = build_at(
        site.tiers,
        &leaves(site.leaf_ip),
        "ECDSAP256SHA256",
        site.tld_alg,
        "",
    );
    let tld = std::fs::read_to_string(&h.tld).unwrap();
    let kept: Vec<&str> = tld
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ds = f.iter().position(|t| *t == "DS");
            !(f.first() == Some(&"classic.tld.") && ds.is_some_and(|i| f.get(i + 2) == Some(&"18")))
        })
        .collect();
    assert_eq!(
        kept.len() + 1,
        tld.lines().count(),
        "one DS removed:\n{tld}"
    );
    std::fs::write(&h.tld, kept.join("\n") + "\n").unwrap();

    let rt = runtime();
    let port = site
        .port
        .unwrap_or_else(|| free_dual_port_on(site.tiers.root.parse().unwrap()));
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);
    let d = h.dir.path();
    let handles = vec![
        serve(&rt, d, vec![h.root.clone()], at(site.tiers.root), false),
        serve(&rt, d, vec![h.tld.clone()], at(site.tiers.tld), false),
        serve(&rt, d, h.leaves.clone(), at(site.backend_ip), false),
    ];
    let how = Arc::new(AtomicU8::new(STRIP_NONE));
    rt.block_on(proxy(at(site.leaf_ip), at(site.backend_ip), how.clone()));
    World {
        running: Running { rt, handles },
        h,
        tiers: site.tiers,
        port,
        how,
    }
}

impl World {
    /// A fresh resolver (empty caches) iterating from the root.
    fn resolver(&self, protection: bool) -> Resolver {
        let roots = vec![SocketAddr::new(self.tiers.root.parse().unwrap(), self.port)];
        let config = {
            let mut v = Config::new(
                Mode::Iterative {
                    roots,
                    port: self.port,
                },
                anchors(&self.h),
            );
            v.ds_downgrade_protection = protection;
            v
        };
        Resolver::new(config, udp_client(Duration::from_secs(5)))
    }

    /// pqdns-resolver's arguments for this hierarchy (root hints and anchor written in its
    /// directory).
    fn daemon_args(&self) -> Vec<String> {
        let d = self.h.dir.path();
        let hints = write_root_hints(d, self.tiers.root);
        let anchor_file = d.join("root.ds");
        std::fs::write(&anchor_file, format!("{}\n", self.h.root_ds_text)).unwrap();
        vec![
            "--root-hints".into(),
            hints.display().to_string(),
            "--authority-port".into(),
            self.port.to_string(),
            "--trust-anchor".into(),
            anchor_file.display().to_string(),
        ]
    }

    fn resolve(&self, r: &Resolver, qname: &str, qtype: RrType) -> Answer {
        self.running
            .rt
            .block_on(r.resolve(&name(qname), qtype))
            .unwrap()
    }
}

/// The algorithms that verified the answer's RRsets (all Secure).
fn answer_algorithms(a: &Answer) -> Vec<SecAlg> {
    assert!(a.status().is_secure(), "{:?}", a.status());
    let mut out = Vec::new();
    for s in a.answers() {
        let AnswerRRset::Secure(v) = s else {
            panic!("not Secure: {s:?}");
        };
        out.extend_from_slice(v.algorithms());
    }
    out.dedup();
    out
}

fn assert_downgrade_bogus(a: &Answer, what: &str) {
    let Status::Bogus(reason) = a.status() else {
        panic!("{what}: not Bogus: {:?}", a.status());
    };
    assert_eq!(reason.ede, Ede::RRSIGS_MISSING, "{what}: {reason}");
    assert!(
        reason.text.contains("DS downgrade protection") && reason.text.contains("ML-DSA-44 (18)"),
        "{what}: {reason}"
    );
    assert!(a.answers().is_empty(), "{what}: Bogus data returned");
}

#[test]
fn stripped_ml_dsa_signatures_are_bogus_when_the_ds_names_ml_dsa() {
    let w = world(DEFAULT_SITE);

    // Nothing stripped: Secure, the dual zone through ML-DSA-44 (the rule), the classic one
    // through whichever RRSIG comes first (no rule).
    let on = w.resolver(true);
    let a = w.resolve(&on, "www.dual.tld.", RrType::A);
    assert_eq!(answer_algorithms(&a), [SecAlg::MLDSA44]);
    assert!(w
        .resolve(&on, "www.classic.tld.", RrType::A)
        .status()
        .is_secure());

    // Every ML-DSA-44 RRSIG stripped on the way.
    w.how.store(STRIP_ALL, Ordering::SeqCst);
    let on = w.resolver(true);
    for qname in ["www.dual.tld.", "nope.dual.tld."] {
        assert_downgrade_bogus(&w.resolve(&on, qname, RrType::A), qname);
    }
    let a = w.resolve(&on, "www.classic.tld.", RrType::A);
    assert_eq!(answer_algorithms(&a), [SecAlg::ECDSAP256SHA256]);
    let off = w.resolver(false);
    let a = w.resolve(&off, "www.dual.tld.", RrType::A);
    assert_eq!(answer_algorithms(&a), [SecAlg::ECDSAP256SHA256]);
    assert!(w
        .resolve(&off, "nope.dual.tld.", RrType::A)
        .status()
        .is_secure());

    // The DNSKEY RRset keeps its ML-DSA-44 RRSIG (the zone's keys are trusted through it);
    // the data's are stripped: still Bogus, on the data itself.
    w.how.store(STRIP_DATA, Ordering::SeqCst);
    let on = w.resolver(true);
    let a = w.resolve(&on, "www.dual.tld.", RrType::A);
    assert_downgrade_bogus(&a, "data stripped");
    let text = &a.status().reason().unwrap().text;
    assert!(text.contains("www.dual.tld. A"), "{text}");
    let a = w.resolve(&on, "www.classic.tld.", RrType::A);
    assert_eq!(answer_algorithms(&a), [SecAlg::ECDSAP256SHA256]);
}

#[test]
fn the_daemon_answers_servfail_with_ede_10_unless_protection_is_off() {
    let w = world(DEFAULT_SITE);
    w.how.store(STRIP_ALL, Ordering::SeqCst);
    let (args, d) = (w.daemon_args(), w.h.dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let on = Service::start(d, "protected", &args);
    let out = on.dig(&["+dnssec", "www.dual.tld.", "A"]);
    assert_eq!(out.status(), "SERVFAIL", "{}", out.text);
    assert!(
        out.text.contains("EDE: 10 (RRSIGs Missing)") && out.text.contains("downgrade"),
        "{}",
        out.text
    );
    let out = on.dig(&["+dnssec", "www.classic.tld.", "A"]);
    assert_eq!(out.status(), "NOERROR", "{}", out.text);
    assert!(out.has_flag("ad"), "{}", out.text);

    let mut unprotected = args.to_vec();
    unprotected.push("--no-ds-downgrade-protection");
    let off = Service::start(d, "unprotected", &unprotected);
    let out = off.dig(&["+dnssec", "www.dual.tld.", "A"]);
    assert_eq!(out.status(), "NOERROR", "{}", out.text);
    assert!(out.has_flag("ad"), "{}", out.text);
}

/// For the record, beside a real peer: unbound 1.17 does not know algorithm 18, so it takes
/// a DS RRset naming ECDSA and ML-DSA-44 as ECDSA's and accepts the stripped answer as Secure
/// (RFC 6840 §5.11), where pqdns-resolver answers SERVFAIL with EDE 10. Here `tld.` is ECDSA,
/// so that unbound can validate down to the leaf; unbound asks port 53 of the addresses it
/// learns, so this hierarchy listens on port 53 of 127.0.2.x (the test binds privileged
/// ports, as the unbound comparison does).
#[test]
fn unbound_accepts_the_downgrade_that_pqdns_refuses() {
    let site = Site {
        tiers: Tiers {
            root: "127.0.2.2",
            tld: "127.0.2.3",
        },
        leaf_ip: "127.0.2.4",
        backend_ip: "127.0.2.6",
        port: Some(53),
        tld_alg: "ECDSAP256SHA256",
    };
    let w = world(site);
    w.how.store(STRIP_ALL, Ordering::SeqCst);
    let (args, d) = (w.daemon_args(), w.h.dir.path());
    let unbound_addr = SocketAddr::new("127.0.2.9".parse().unwrap(), free_dual_port());
    let hints = std::path::PathBuf::from(&args[1]);
    let anchor = std::path::PathBuf::from(&args[5]);
    let _unbound = KillOnDrop(start_unbound(
        d,
        unbound_addr,
        None,
        &hints,
        &anchor,
        "tld.",
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ours = Service::start(d, "protected", &args);
    let theirs = dig(
        unbound_addr,
        &["+recurse", "+time=10", "+dnssec", "www.dual.tld.", "A"],
    );
    assert_eq!(theirs.status(), "NOERROR", "{}", theirs.text);
    assert!(
        theirs.has_flag("ad"),
        "unbound: Secure through ECDSA\n{}",
        theirs.text
    );
    let mine = ours.dig(&["+dnssec", "www.dual.tld.", "A"]);
    assert_eq!(mine.status(), "SERVFAIL", "{}", mine.text);
    assert!(
        mine.text.contains("EDE: 10 (RRSIGs Missing)"),
        "{}",
        mine.text
    );
    // Both validate the zone whose DS names only ECDSA.
    for server in [unbound_addr, ours.udp] {
        let out = dig(
            server,
            &["+recurse", "+time=10", "+dnssec", "www.classic.tld.", "A"],
        );
        assert_eq!(out.status(), "NOERROR", "{}", out.text);
        assert!(out.has_flag("ad"), "{}", out.text);
    }
}

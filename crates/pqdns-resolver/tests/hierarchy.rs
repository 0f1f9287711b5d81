//! End to end over the wire: a three-level hierarchy served by pqdns-server — root signed with
//! ECDSAP256SHA256, `tld.` with ML-DSA-44, leaves with Falcon-512 (NSEC), SPHINCS+-SHA2-128s
//! (NSEC3), ECDSAP256SHA256 + ML-DSA-44 (dual) and one unsigned — validated from the root's
//! DS alone, over UDP, TCP, DoT and DoH, in forwarding and iterative mode; plus Bogus cases
//! (wrong anchor, expired signatures, require-pq) and agreement with BIND's delv.

use crate::common;

use common::hierarchy::{
    anchors, build, build_with, local, serve, Leaf, Running, LEAF_IP, LEAVES, ROOT_IP, TLD_IP,
};
use common::runtime;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::validate::{PqPolicy, Status};
use pqdns_core::{Name, RrType};
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use pqdns_test_support::ports::free_dual_port_on;

fn config(mode: Mode, anchors: TrustAnchors, policy: PqPolicy, now: Option<u64>) -> Config {
    let mut config = Config::new(mode, anchors);
    config.pq_policy = policy;
    config.now = now;
    config
}

fn resolve(rt: &tokio::runtime::Runtime, resolver: &Resolver, name: &str, t: RrType) -> Status {
    let answer = rt
        .block_on(resolver.resolve(&name.parse().unwrap(), t))
        .unwrap();
    answer.status().clone()
}

fn client(t: Transport) -> Client {
    let mut tls = TlsOptions::default();
    tls.danger_accept_any_certificate = true;
    Client::new(t, Duration::from_secs(5), tls).unwrap()
}

fn assert_secure(s: &Status, what: &str) {
    assert!(s.is_secure(), "{what}: {s:?}");
}

#[test]
fn forwarding_validates_every_leaf_over_every_transport() {
    let h = build();
    let rt = runtime();
    let mut zones = vec![h.root.clone(), h.tld.clone()];
    zones.extend(h.leaves.iter().cloned());
    let handle = serve(&rt, h.dir.path(), zones, local(), true);
    let server = [
        (Transport::Udp, handle.addrs.udp[0]),
        (Transport::Tcp, handle.addrs.tcp[0]),
        (Transport::Dot, handle.addrs.dot[0]),
        (Transport::Doh, handle.addrs.doh[0]),
    ];
    let running = Running {
        rt,
        handles: vec![handle],
    };
    for (transport, addr) in server {
        let r = Resolver::new(
            config(
                Mode::Forward(addr),
                anchors(&h),
                PqPolicy::AnyAlgorithm,
                None,
            ),
            client(transport),
        );
        for leaf in LEAVES.iter().filter(|l| !l.algorithms.is_empty()) {
            let z = format!("{}.tld.", leaf.name);
            let ctx = |what: &str| format!("{transport:?} {z} {what}");
            assert_secure(
                &resolve(&running.rt, &r, &format!("www.{z}"), RrType::A),
                &ctx("positive"),
            );
            assert_secure(
                &resolve(&running.rt, &r, &format!("nope.{z}"), RrType::A),
                &ctx("NXDOMAIN"),
            );
            assert_secure(
                &resolve(&running.rt, &r, &format!("www.{z}"), RrType::TXT),
                &ctx("NODATA"),
            );
            assert_secure(
                &resolve(&running.rt, &r, &format!("x.wild.{z}"), RrType::TXT),
                &ctx("wildcard"),
            );
            assert_secure(
                &resolve(&running.rt, &r, &format!("alias.{z}"), RrType::A),
                &ctx("CNAME"),
            );
        }
        let insecure = resolve(&running.rt, &r, "www.unsigned.tld.", RrType::A);
        assert!(
            matches!(insecure, Status::Insecure(_)),
            "{transport:?}: {insecure:?}"
        );
    }
}

#[test]
fn iterative_resolution_walks_referrals_from_the_root() {
    let h = build();
    let rt = runtime();
    // Bind the three tiers on their own loopback addresses with one shared port.
    let port = free_dual_port_on(ROOT_IP.parse().unwrap());
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);
    let handles = vec![
        serve(&rt, h.dir.path(), vec![h.root.clone()], at(ROOT_IP), false),
        serve(&rt, h.dir.path(), vec![h.tld.clone()], at(TLD_IP), false),
        serve(&rt, h.dir.path(), h.leaves.clone(), at(LEAF_IP), false),
    ];
    let running = Running { rt, handles };
    let mode = Mode::Iterative {
        roots: vec![at(ROOT_IP)],
        port,
    };
    let r = Resolver::new(
        config(mode, anchors(&h), PqPolicy::AnyAlgorithm, None),
        client(Transport::Udp),
    );
    assert_secure(
        &resolve(&running.rt, &r, "www.falcon.tld.", RrType::A),
        "falcon",
    );
    assert_secure(
        &resolve(&running.rt, &r, "nope.sphincs.tld.", RrType::A),
        "sphincs NXDOMAIN",
    );
    assert_secure(
        &resolve(&running.rt, &r, "www.dual.tld.", RrType::A),
        "dual",
    );
    assert_secure(
        &resolve(&running.rt, &r, "nope.tld.", RrType::A),
        "tld NXDOMAIN",
    );
    let insecure = resolve(&running.rt, &r, "www.unsigned.tld.", RrType::A);
    assert!(matches!(insecure, Status::Insecure(_)), "{insecure:?}");
}

/// Issue 31 item 6: once a zone is known to be an unsigned delegation (its trust remembered
/// from an earlier resolution), each name in it costs one query — its own — and no SOA query
/// to find the zone it is in. Positive answers, a CNAME, a wildcard, NODATA and NXDOMAIN.
#[test]
fn names_in_a_known_unsigned_zone_cost_one_query_each() {
    let leaves: Vec<Leaf> = LEAVES
        .iter()
        .filter(|l| l.algorithms.is_empty())
        .copied()
        .collect();
    let h = build_with(&leaves, "ECDSAP256SHA256", "ECDSAP256SHA256", "");
    let rt = runtime();
    let mut zones = vec![h.root.clone(), h.tld.clone()];
    zones.extend(h.leaves.iter().cloned());
    let handle = serve(&rt, h.dir.path(), zones, local(), false);
    let addr = handle.addrs.udp[0];
    let running = Running {
        rt,
        handles: vec![handle],
    };
    let r = Resolver::new(
        config(
            Mode::Forward(addr),
            anchors(&h),
            PqPolicy::AnyAlgorithm,
            None,
        ),
        client(Transport::Udp),
    );
    let ask = |name: &str, t: RrType| {
        running
            .rt
            .block_on(r.resolve(&name.parse().unwrap(), t))
            .unwrap()
    };
    // The first name finds the zone and proves the delegation unsigned (DS, DNSKEYs, SOA).
    let first = ask("www.unsigned.tld.", RrType::A);
    assert!(
        matches!(first.status(), Status::Insecure(_)),
        "{:?}",
        first.status()
    );
    assert!(first.exchanges().len() > 2, "{:?}", first.chain());
    for (name, t, rcode, answers) in [
        ("ns.unsigned.tld.", RrType::A, "NOERROR", 1),
        ("a.b.ent.unsigned.tld.", RrType::A, "NOERROR", 1),
        ("alias.unsigned.tld.", RrType::A, "NOERROR", 2),
        ("x.wild.unsigned.tld.", RrType::TXT, "NOERROR", 1),
        ("www.unsigned.tld.", RrType::AAAA, "NOERROR", 0),
        ("nope.unsigned.tld.", RrType::A, "NXDOMAIN", 0),
    ] {
        let a = ask(name, t);
        let what = format!("{name} {t}: {:?} {:?}", a.status(), a.chain());
        assert!(matches!(a.status(), Status::Insecure(_)), "{what}");
        assert_eq!(
            (a.rcode_name().as_str(), a.answers().len()),
            (rcode, answers),
            "{what}"
        );
        assert_eq!(a.exchanges().len(), 1, "{what}");
    }
}

#[test]
fn bogus_for_wrong_anchor_expired_signatures_and_classical_only_under_require_pq() {
    let h = build();
    let rt = runtime();
    let mut zones = vec![h.root.clone(), h.tld.clone()];
    zones.extend(h.leaves.iter().cloned());
    let handle = serve(&rt, h.dir.path(), zones, local(), false);
    let addr = handle.addrs.udp[0];
    let running = Running {
        rt,
        handles: vec![handle],
    };

    let mut wrong = h.root_ds.clone();
    let last = wrong.len() - 1;
    wrong[last] ^= 1;
    let mut bad_anchor = TrustAnchors::default();
    bad_anchor.add_ds(Name::root(), wrong);
    let r = Resolver::new(
        config(
            Mode::Forward(addr),
            bad_anchor,
            PqPolicy::AnyAlgorithm,
            None,
        ),
        client(Transport::Udp),
    );
    let s = resolve(&running.rt, &r, "www.dual.tld.", RrType::A);
    assert!(
        matches!(&s, Status::Bogus(reason) if reason.text.contains("matches its DS")),
        "{s:?}"
    );

    // Signatures are valid for 14 days: a month later they have expired.
    let later = pqdns_core::time::now() + 30 * 86_400;
    let r = Resolver::new(
        config(
            Mode::Forward(addr),
            anchors(&h),
            PqPolicy::AnyAlgorithm,
            Some(later),
        ),
        client(Transport::Udp),
    );
    let s = resolve(&running.rt, &r, "www.dual.tld.", RrType::A);
    assert!(
        matches!(&s, Status::Bogus(reason) if reason.ede == pqdns_core::wire::Ede::SIGNATURE_EXPIRED),
        "{s:?}"
    );

    // Under require-pq every link from the anchor down must be post-quantum. The root is
    // ECDSA-only, so a chain from the root's DS has a classical first link: Bogus, naming it.
    let r = Resolver::new(
        config(Mode::Forward(addr), anchors(&h), PqPolicy::RequirePq, None),
        client(Transport::Udp),
    );
    let s = resolve(&running.rt, &r, "www.dual.tld.", RrType::A);
    assert!(
        matches!(&s, Status::Bogus(reason) if reason.text.contains("require-pq")
            && reason.text.contains("link to .'s DNSKEY") && reason.text.contains("classical")),
        "{s:?}"
    );
    // Anchored at tld. (ML-DSA-44), the chain tld. → dual.tld. is post-quantum at every link:
    // the server sends both signatures and the ML-DSA ones verify.
    let tld_ds = dual_or_tld_ds(&h.tld, "ML-DSA-44");
    let r = Resolver::new(
        config(Mode::Forward(addr), tld_ds, PqPolicy::RequirePq, None),
        client(Transport::Udp),
    );
    assert_secure(
        &resolve(&running.rt, &r, "www.dual.tld.", RrType::A),
        "require-pq dual from a post-quantum anchor",
    );
    assert_secure(
        &resolve(&running.rt, &r, "nope.dual.tld.", RrType::A),
        "require-pq NXDOMAIN from a post-quantum anchor",
    );
    // Issue 11 item 18: the only anchor is the ECDSA DS of the dual ECDSA + ML-DSA zone, so
    // its DNSKEY RRset is authenticated classically. Secure without require-pq; under it,
    // Bogus, and the reason names the classical link.
    let ecdsa = dual_or_tld_ds(&h.leaves[2], "ECDSAP256SHA256");
    for (policy, secure) in [(PqPolicy::AnyAlgorithm, true), (PqPolicy::RequirePq, false)] {
        let r = Resolver::new(
            config(Mode::Forward(addr), ecdsa.clone(), policy, None),
            client(Transport::Udp),
        );
        let s = resolve(&running.rt, &r, "www.dual.tld.", RrType::A);
        assert_eq!(s.is_secure(), secure, "{policy:?}: {s:?}");
        if !secure {
            assert!(
                matches!(&s, Status::Bogus(reason) if reason.text.contains("dual.tld.'s DNSKEY")
                    && reason.text.contains("classical")
                    && reason.text.contains("trust anchor")),
                "{s:?}"
            );
        }
    }
}

/// A trust anchor holding the DS of the key with algorithm `alg` of a zone description.
fn dual_or_tld_ds(file: &Path, alg: &str) -> TrustAnchors {
    let cfg = LoadedConfig::read(file).unwrap();
    let (keys, _) = cfg.keys(false).unwrap();
    let key = keys
        .iter()
        .find(|k| k.key.algorithm().name() == alg)
        .unwrap_or_else(|| panic!("{} has no {alg} key", file.display()));
    let ds = ds_record(&key.dnskey_record(), DigestType::Sha256).unwrap();
    let mut a = TrustAnchors::default();
    a.add_ds(ds.owner.clone(), ds.rdata.clone());
    a
}

/// BIND's delv and pqdns-resolve agree on a classical (ECDSA) zone: both validate with the right
/// anchor and both refuse with a wrong one.
#[test]
fn verdicts_agree_with_delv_on_a_classical_zone() {
    let h = build();
    let rt = runtime();
    let handle = serve(&rt, h.dir.path(), vec![h.leaves[2].clone()], local(), false);
    let addr = handle.addrs.udp[0];
    let running = Running {
        rt,
        handles: vec![handle],
    };
    // Anchor the dual zone at its ECDSA key only (delv 9.18 knows no algorithm 18).
    let cfg = LoadedConfig::read(&h.leaves[2]).unwrap();
    let (keys, _) = cfg.keys(false).unwrap();
    let ecdsa = keys.iter().find(|k| k.number.0 == 13).unwrap();
    let ds = ds_record(&ecdsa.dnskey_record(), DigestType::Sha256).unwrap();
    let mut wrong = ds.clone();
    let last = wrong.rdata.len() - 1;
    wrong.rdata[last] ^= 1;
    for (record, expect_secure) in [(ds, true), (wrong, false)] {
        let mut a = TrustAnchors::default();
        a.add_ds(record.owner.clone(), record.rdata.clone());
        let r = Resolver::new(
            config(Mode::Forward(addr), a, PqPolicy::AnyAlgorithm, None),
            client(Transport::Udp),
        );
        for (name, t) in [("www.dual.tld.", "A"), ("nope.dual.tld.", "A")] {
            let ours = resolve(&running.rt, &r, name, RrType::from_mnemonic(t).unwrap());
            let delv = common::delv(h.dir.path(), addr, &record, name, t);
            // "; fully validated" or "; negative response, fully validated".
            let delv_secure = delv.contains("fully validated");
            assert_eq!(ours.is_secure(), expect_secure, "{name}: {ours:?}");
            assert_eq!(delv_secure, expect_secure, "{name}: delv said:\n{delv}");
        }
    }
}

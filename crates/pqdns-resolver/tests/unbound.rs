//! pqdns-resolver and unbound (issue 12 must-show 3): for a classical hierarchy (ECDSA and
//! Ed25519, which unbound validates), both resolvers iterate from the same root hints with the
//! same trust anchor and must give the same RCODE, AD bit and answer section for every name
//! of a list: positive answers, NXDOMAIN, NODATA, empty non-terminals, wildcards, CNAME chains
//! inside a zone and across zones, an unsigned zone and one with expired signatures, and ANY
//! (RFC 8482: the one RRset the authority gives, validated). Both minimise QNAMEs (RFC 9156:
//! unbound with `qname-minimisation: yes`, pqdns-resolver by default; issue 29 must-show 4).
//!
//! unbound sends its queries to port 53 of the addresses it learns, so the hierarchy's servers
//! listen on port 53 of their own loopback addresses (127.0.1.x): the test needs to bind
//! privileged ports (root, as on CI).

use crate::common;

use std::net::SocketAddr;

use common::hierarchy::{build_at, serve_with_expired_last, Leaf, Running, Tiers};
use common::runtime;
use common::service::Service;
use pqdns_test_support::hierarchy::write_root_hints;
use pqdns_test_support::peers::{dig, start_unbound, DigOutput, KillOnDrop};
use pqdns_test_support::ports::free_dual_port;

const TIERS: Tiers = Tiers {
    root: "127.0.1.2",
    tld: "127.0.1.3",
};
const LEAF_IP: &str = "127.0.1.4";
const EXPIRED_IP: &str = "127.0.1.5";
const UNBOUND_IP: &str = "127.0.1.9";

const LEAVES: &[Leaf] = &[
    Leaf {
        name: "ecdsa",
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec",
        ip: LEAF_IP,
        extra: "chain CNAME alias\nout CNAME www.ed.tld.\nmx MX 10 www\n",
    },
    Leaf {
        name: "nsec3",
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec3",
        ip: LEAF_IP,
        extra: "chain CNAME alias\nout CNAME nope.ecdsa.tld.\n",
    },
    Leaf {
        name: "ed",
        algorithms: &["ED25519"],
        denial: "nsec",
        ip: LEAF_IP,
        extra: "",
    },
    Leaf {
        name: "plain",
        algorithms: &[],
        denial: "nsec",
        ip: LEAF_IP,
        extra: "out CNAME www.ecdsa.tld.\n",
    },
    Leaf {
        name: "expired",
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec",
        ip: EXPIRED_IP,
        extra: "",
    },
];

/// The questions both resolvers answer (name, type).
fn questions() -> Vec<(String, &'static str)> {
    let mut q = Vec::new();
    for zone in ["ecdsa", "nsec3", "ed", "plain"] {
        for (label, t) in [
            ("www", "A"),
            ("www", "AAAA"),
            ("nope", "A"),
            ("alias", "A"),
            ("x.wild", "TXT"),
            ("x.wild", "A"),
            ("a.b.ent", "A"),
            ("b.ent", "A"),
        ] {
            q.push((format!("{label}.{zone}.tld."), t));
        }
    }
    for (name, t) in [
        ("chain.ecdsa.tld.", "A"),
        ("out.ecdsa.tld.", "A"),
        ("chain.nsec3.tld.", "A"),
        ("out.nsec3.tld.", "A"),
        ("out.plain.tld.", "A"),
        ("mx.ecdsa.tld.", "MX"),
        ("www.expired.tld.", "A"),
        ("nope.tld.", "A"),
        ("tld.", "SOA"),
        ("ecdsa.tld.", "DS"),
        ("ecdsa.tld.", "DNSKEY"),
        // RFC 8482: what the authority gives for ANY (one RRset), validated.
        ("www.ecdsa.tld.", "ANY"),
        ("www.nsec3.tld.", "ANY"),
        ("www.plain.tld.", "ANY"),
        ("alias.ecdsa.tld.", "ANY"),
        ("mx.ecdsa.tld.", "ANY"),
        ("nope.ecdsa.tld.", "ANY"),
        ("www.expired.tld.", "ANY"),
        // pqdns-server answers QTYPE RRSIG with NODATA: both validate that negative answer
        // (its NSEC lists RRSIG at the name: SERVFAIL; unsigned: NODATA without AD).
        ("www.ecdsa.tld.", "RRSIG"),
        ("www.plain.tld.", "RRSIG"),
    ] {
        q.push((name.to_string(), t));
    }
    q
}

/// What both must agree on: RCODE, AD, and the answer section without RRSIGs and TTLs
/// (owners lowercased, sorted).
fn verdict(out: &DigOutput) -> (String, bool, Vec<String>) {
    let mut answer: Vec<String> = out
        .section("ANSWER")
        .into_iter()
        .filter(|r| r.rtype != "RRSIG")
        .map(|r| format!("{} {} {}", r.owner.to_lowercase(), r.rtype, r.rdata))
        .collect();
    answer.sort();
    (out.status(), out.has_flag("ad"), answer)
}

#[test]
fn same_answers_as_unbound_for_a_classical_hierarchy() {
    let h = build_at(TIERS, LEAVES, "ECDSAP256SHA256", "ECDSAP256SHA256", "");
    let d = h.dir.path();
    let rt = runtime();
    let handles = serve_with_expired_last(&rt, &h, TIERS, LEAF_IP, EXPIRED_IP, 53);
    let _running = Running { rt, handles };
    let hints = write_root_hints(d, TIERS.root);
    let anchor = d.join("root.ds");
    std::fs::write(&anchor, format!("{}\n", h.root_ds_text)).unwrap();

    let unbound_addr = SocketAddr::new(UNBOUND_IP.parse().unwrap(), free_dual_port());
    let _unbound = KillOnDrop(start_unbound(
        d,
        unbound_addr,
        None,
        &hints,
        &anchor,
        "tld.",
    ));
    let service = Service::start(
        d,
        "resolver",
        &[
            "--root-hints",
            hints.to_str().unwrap(),
            "--authority-port",
            "53",
            "--trust-anchor",
            anchor.to_str().unwrap(),
        ],
    );
    let ours = service.udp;
    let list = questions();
    assert!(list.len() >= 30);
    let mut secure = 0;
    for (name, t) in &list {
        let ask = |server| dig(server, &["+recurse", "+time=10", name, t]);
        let (theirs, mine) = (ask(unbound_addr), ask(ours));
        let (v_theirs, v_mine) = (verdict(&theirs), verdict(&mine));
        assert_eq!(
            v_mine, v_theirs,
            "{name} {t}: pqdns-resolver (left) vs unbound (right):\n{}\n{}",
            mine.text, theirs.text
        );
        secure += usize::from(v_mine.1);
    }
    // The list exercises both verdicts: most names Secure, the plain zone not.
    assert!(
        secure >= 20 && secure < list.len(),
        "{secure} of {} Secure",
        list.len()
    );
}

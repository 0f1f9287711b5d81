//! QNAME minimisation (RFC 9156, issue 29 must-show 4) against scripted authorities that log
//! every question: a root, a `com.` server and an `example.com.` server holding
//! `x.y.z.example.com.` (so `z.` and `y.z.` are empty non-terminals). With minimisation each
//! server sees only the next label below its zone, with QTYPE A, and the zone holding the
//! name then the question itself; without it every server gets the whole question. The
//! answers are the same either way; a server that answers NXDOMAIN for an empty non-terminal
//! gets the full question next (relaxed mode), and the answer is still found.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::wire::Rcode;
use pqdns_core::{Name, RrType};
use pqdns_resolver::{Answer, Config, Mode, Resolver, TrustAnchors};

use common::name;
use common::scripted::{a, ns, reply, servers_at, Behaviour, Log};

const ROOT: &str = "127.0.0.41";
const COM: &str = "127.0.0.42";
const EXAMPLE: &str = "127.0.0.43";

/// Refers every name below `cut` to its server `ns` at `ip`; NXDOMAIN for anything else.
fn referrer(cut: &'static str, ns_name: &'static str, ip: &'static str) -> Behaviour {
    Arc::new(move |q| {
        if !q.questions[0].qname.is_subdomain_of(&name(cut)) {
            return reply(q, true, Rcode::NXDOMAIN);
        }
        let mut m = reply(q, false, Rcode::NOERROR);
        m.authority.push(ns(cut, ns_name));
        m.additional.push(a(ns_name, ip));
        m
    })
}

/// example.com.: `x.y.z.example.com. A 192.0.2.7` and `www.example.com. A 192.0.2.8`; the
/// empty non-terminals get NODATA, or NXDOMAIN when `broken`; other names NXDOMAIN.
fn example(broken: bool) -> Behaviour {
    Arc::new(move |q| {
        let (qname, qtype) = (&q.questions[0].qname, q.questions[0].qtype);
        let data = [
            ("x.y.z.example.com.", "192.0.2.7"),
            ("www.example.com.", "192.0.2.8"),
        ];
        if let Some((owner, ip)) = data.iter().find(|(o, _)| *qname == name(o)) {
            let mut m = reply(q, true, Rcode::NOERROR);
            if qtype == RrType::A {
                m.answers.push(a(owner, ip));
            }
            return m;
        }
        let ent = ["z.example.com.", "y.z.example.com.", "example.com."]
            .iter()
            .any(|e| *qname == name(e));
        reply(
            q,
            true,
            if ent && !broken {
                Rcode::NOERROR
            } else {
                Rcode::NXDOMAIN
            },
        )
    })
}

/// Resolves each of `questions` iteratively (minimising or not) against fresh servers; the
/// answers and the logs of the root, com. and example.com. servers.
fn run(
    minimise: bool,
    broken: bool,
    questions: &[(&str, RrType)],
) -> (Vec<Answer>, [Vec<(Name, RrType)>; 3]) {
    let rt = common::runtime();
    let (answers, logs) = rt.block_on(async {
        let list = [
            (ROOT, referrer("com.", "ns.com.", COM)),
            (COM, referrer("example.com.", "ns.example.com.", EXAMPLE)),
            (EXAMPLE, example(broken)),
        ];
        let (logs, port) = servers_at(&list).await;
        let mode = Mode::Iterative {
            roots: vec![SocketAddr::new(ROOT.parse().unwrap(), port)],
            port,
        };
        let mut config = Config::new(mode, TrustAnchors::default());
        config.qname_minimisation = minimise;
        let r = Resolver::new(config, common::udp_client(Duration::from_secs(2)));
        let mut answers = Vec::new();
        for (q, t) in questions {
            answers.push(r.resolve(&name(q), *t).await.unwrap());
        }
        (answers, logs)
    });
    let logs: Vec<Vec<(Name, RrType)>> = logs
        .iter()
        .map(|l: &Log| l.lock().unwrap().clone())
        .collect();
    (answers, logs.try_into().unwrap())
}

/// What a client would be told: RCODE and the answer records.
fn outcome(a: &Answer) -> (Rcode, Vec<(Name, RrType, Vec<u8>)>) {
    let records = a
        .answers()
        .iter()
        .flat_map(|s| s.records())
        .map(|r| (r.owner, r.rtype, r.rdata))
        .collect();
    (a.rcode(), records)
}

fn q(n: &str, t: RrType) -> (Name, RrType) {
    (name(n), t)
}

#[test]
fn each_server_sees_only_the_next_label() {
    let questions = [
        ("x.y.z.example.com.", RrType::TXT),
        ("x.y.z.example.com.", RrType::A),
        ("www.example.com.", RrType::A),
        ("nope.example.com.", RrType::A),
    ];
    let (min, [root, com, example]) = run(true, false, &questions);
    // One referral each from the root and com. (remembered for the rest); the example.com.
    // server is asked z., then y.z. (both exist: NODATA), then the question.
    assert_eq!(root, vec![q("com.", RrType::A)]);
    assert_eq!(com, vec![q("example.com.", RrType::A)]);
    assert_eq!(
        example,
        vec![
            q("z.example.com.", RrType::A),
            q("y.z.example.com.", RrType::A),
            q("x.y.z.example.com.", RrType::TXT),
            // The next questions start at the known delegation example.com.
            q("z.example.com.", RrType::A),
            q("y.z.example.com.", RrType::A),
            q("x.y.z.example.com.", RrType::A),
            q("www.example.com.", RrType::A),
            q("nope.example.com.", RrType::A),
        ]
    );
    // Without minimisation: the whole question everywhere, and the same answers.
    let (full, [root, com, example]) = run(false, false, &questions);
    assert_eq!(root, vec![q("x.y.z.example.com.", RrType::TXT)]);
    assert_eq!(com, vec![q("x.y.z.example.com.", RrType::TXT)]);
    assert_eq!(example.len(), 4);
    assert!(example
        .iter()
        .zip(&questions)
        .all(|(l, (n, t))| *l == q(n, *t)));
    let min: Vec<_> = min.iter().map(outcome).collect();
    let full: Vec<_> = full.iter().map(outcome).collect();
    assert_eq!(min, full);
    assert_eq!(min[1].1.len(), 1, "x.y.z.example.com. A found");
    assert_eq!(min[3].0, Rcode::NXDOMAIN);
}

#[test]
fn nxdomain_for_an_empty_non_terminal_falls_back_to_the_full_question() {
    let (answers, [_, _, example]) = run(true, true, &[("x.y.z.example.com.", RrType::A)]);
    assert_eq!(
        example,
        vec![
            q("z.example.com.", RrType::A),
            q("x.y.z.example.com.", RrType::A),
        ]
    );
    let (rcode, records) = outcome(&answers[0]);
    assert_eq!(rcode, Rcode::NOERROR);
    assert_eq!(records.len(), 1);
}

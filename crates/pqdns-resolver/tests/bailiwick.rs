//! Iterative resolution against hostile and careless servers on loopback (each on its own
//! 127.0.0.x address, one shared port): referrals to unrelated zones are not followed,
//! out-of-bailiwick glue is ignored (the NS name is resolved separately instead), sibling glue
//! from the referring server's zone is used (RFC 9471), NS names
//! without glue are resolved within a budget (NXNSAttack), and records outside the zone of the
//! answering server are dropped from its responses (RFC 2181 §5.4.1).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::message::Message;
use pqdns_core::wire::Rcode;
use pqdns_core::RrType;
use pqdns_resolver::{Config, Lame, Mode, ResolveError, Resolver, TrustAnchors};

use crate::common;
use common::name;
use common::scripted::{a, ns, rec, reply, servers_at, Behaviour, Log};

const ROOT: &str = "127.0.0.21";
const EVIL: &str = "127.0.0.22";
const GOOD: &str = "127.0.0.23";
/// A server for a zone between the root and the answer (example., or com.).
const MID: &str = "127.0.0.24";

/// Root, evil and good servers on one port; returns their logs and the port.
async fn servers(root: Behaviour, evil: Behaviour, good: Behaviour) -> (Log, Log, Log, u16) {
    let (logs, port) = servers_at(&[(ROOT, root), (EVIL, evil), (GOOD, good)]).await;
    let [r, e, g]: [Log; 3] = logs.try_into().unwrap();
    (r, e, g, port)
}

/// The example. server: `www.example. A 192.0.2.80`, plus records outside its zone that it
/// has no business sending.
fn good() -> Behaviour {
    Arc::new(|q| {
        let mut m = reply(q, true, Rcode::NOERROR);
        if q.questions[0].qname == name("www.example.") && q.questions[0].qtype == RrType::A {
            m.answers.push(a("www.example.", "192.0.2.80"));
            m.answers.push(a("login.bank.", "203.0.113.66"));
            m.additional.push(a("www.other.", "203.0.113.66"));
        }
        m
    })
}

/// Answers everything with 203.0.113.66: it must never be asked.
fn evil() -> Behaviour {
    Arc::new(|q| {
        let mut m = reply(q, true, Rcode::NOERROR);
        let qname = q.questions[0].qname.to_string();
        m.answers.push(a(&qname, "203.0.113.66"));
        m
    })
}

/// A root that answers names under `nowhere.` with NXDOMAIN, `ns.other.` with the good
/// server's address, and refers example. with `referral`.
fn root(referral: fn(&mut Message)) -> Behaviour {
    Arc::new(move |q| {
        let qname = &q.questions[0].qname;
        if qname.is_subdomain_of(&name("nowhere.")) {
            return reply(q, true, Rcode::NXDOMAIN);
        }
        if *qname == name("ns.other.") {
            let mut m = reply(q, true, Rcode::NOERROR);
            if q.questions[0].qtype == RrType::A {
                m.answers.push(a("ns.other.", GOOD));
            }
            return m;
        }
        let mut m = reply(q, false, Rcode::NOERROR);
        referral(&mut m);
        m
    })
}

fn resolver(port: u16) -> Resolver {
    let mode = Mode::Iterative {
        roots: vec![SocketAddr::new(ROOT.parse().unwrap(), port)],
        port,
    };
    Resolver::new(
        Config::new(mode, TrustAnchors::default()),
        common::udp_client(Duration::from_secs(2)),
    )
}

/// Resolves www.example. A iteratively with `referral` at the root.
fn run(
    referral: fn(&mut Message),
) -> (Result<pqdns_resolver::Answer, ResolveError>, Log, Log, Log) {
    let rt = common::runtime();
    rt.block_on(async {
        let (r, e, g, port) = servers(root(referral), evil(), good()).await;
        let answer = resolver(port)
            .resolve(&name("www.example."), RrType::A)
            .await;
        (answer, r, e, g)
    })
}

fn addresses(a: &pqdns_resolver::Answer) -> Vec<Vec<u8>> {
    a.answers()
        .iter()
        .flat_map(|s| s.records())
        .map(|r| r.rdata)
        .collect()
}

#[test]
fn a_referral_to_an_unrelated_zone_is_not_followed() {
    let (answer, _, evil, good) = run(|m| {
        m.authority.push(ns("evil.", "ns.evil."));
        m.additional.push(a("ns.evil.", EVIL));
    });
    let err = answer.unwrap_err();
    assert!(
        matches!(&err, ResolveError::Lame(Lame::OutOfBailiwick { .. })),
        "{err}"
    );
    assert!(evil.lock().unwrap().is_empty() && good.lock().unwrap().is_empty());
}

#[test]
fn out_of_bailiwick_glue_is_ignored_and_the_ns_name_resolved() {
    // The root refers example. to MID (in-domain glue); MID refers www.example. to
    // ns.other. and "helpfully" adds glue for ns.other. pointing at the evil server. That
    // glue is outside example., the zone of the server that gave it, so the resolver must look
    // up ns.other. itself (the root answers it: the good server).
    let rt = common::runtime();
    let (answer, logs) = rt.block_on(async {
        let root = root(|m| {
            m.authority.push(ns("example.", "ns.example."));
            m.additional.push(a("ns.example.", MID));
        });
        let mid: Behaviour = Arc::new(|q| {
            let mut m = reply(q, false, Rcode::NOERROR);
            m.authority.push(ns("www.example.", "ns.other."));
            m.additional.push(a("ns.other.", EVIL));
            m
        });
        let list = [(ROOT, root), (EVIL, evil()), (GOOD, good()), (MID, mid)];
        let (logs, port) = servers_at(&list).await;
        let answer = resolver(port)
            .resolve(&name("www.example."), RrType::A)
            .await;
        (answer, logs)
    });
    let [root, evil, good, mid]: [Log; 4] = logs.try_into().unwrap();
    let answer = answer.unwrap();
    assert_eq!(addresses(&answer), vec![vec![192, 0, 2, 80]]);
    assert!(evil.lock().unwrap().is_empty(), "the evil glue was used");
    assert_eq!(good.lock().unwrap().len(), 1);
    assert_eq!(mid.lock().unwrap().len(), 1);
    assert!(root
        .lock()
        .unwrap()
        .contains(&(name("ns.other."), RrType::A)));
    // The good server's records outside www.example. were dropped on arrival.
    let m = &answer.unvalidated_messages()[0];
    assert_eq!(m.answers.len(), 1);
    assert!(m.additional.is_empty());
    assert!(answer
        .chain()
        .iter()
        .any(|l| l.contains("2 record(s) outside www.example.")));
}

#[test]
fn sibling_glue_from_the_referring_zone_is_used() {
    // Issue 29: a root referral to com. with glue for a.gtld-servers.net., a name outside
    // com. but inside the root's zone (RFC 9471 §2.2 sibling glue). The resolver goes to the
    // glue's address at once: one query at the root (QNAME-minimised, RFC 9156: com. A),
    // none for the NS name. (On issue 29's code the glue was dropped and the root asked for
    // a.gtld-servers.net. A as well.)
    let rt = common::runtime();
    let (answer, logs) = rt.block_on(async {
        let root: Behaviour = Arc::new(|q| {
            let qname = &q.questions[0].qname;
            if qname.is_subdomain_of(&name("gtld-servers.net.")) {
                let mut m = reply(q, true, Rcode::NOERROR);
                if q.questions[0].qtype == RrType::A {
                    m.answers.push(a("a.gtld-servers.net.", MID));
                }
                return m;
            }
            let mut m = reply(q, false, Rcode::NOERROR);
            m.authority.push(ns("com.", "a.gtld-servers.net."));
            m.additional.push(a("a.gtld-servers.net.", MID));
            m
        });
        let com: Behaviour = Arc::new(|q| {
            let mut m = reply(q, true, Rcode::NOERROR);
            if q.questions[0].qname == name("www.example.com.") {
                m.answers.push(a("www.example.com.", "192.0.2.80"));
            }
            m
        });
        let (logs, port) = servers_at(&[(ROOT, root), (MID, com)]).await;
        let answer = resolver(port)
            .resolve(&name("www.example.com."), RrType::A)
            .await;
        (answer, logs)
    });
    let [root, com]: [Log; 2] = logs.try_into().unwrap();
    assert_eq!(addresses(&answer.unwrap()), vec![vec![192, 0, 2, 80]]);
    assert_eq!(
        *root.lock().unwrap(),
        vec![(name("com."), RrType::A)],
        "the root was asked more than the question"
    );
    // Minimised (example.com. A: NODATA, no cut), then the question.
    assert_eq!(com.lock().unwrap().len(), 2);
}

#[test]
fn in_bailiwick_glue_is_used_directly() {
    let (answer, root, evil, good) = run(|m| {
        m.authority.push(ns("example.", "ns.example."));
        m.additional.push(a("ns.example.", GOOD));
        // Glue for a name that is not one of the NS names: ignored.
        m.additional.push(a("mail.example.", EVIL));
    });
    assert_eq!(addresses(&answer.unwrap()), vec![vec![192, 0, 2, 80]]);
    assert!(evil.lock().unwrap().is_empty());
    assert_eq!(good.lock().unwrap().len(), 1);
    assert_eq!(root.lock().unwrap().len(), 1, "no extra lookups");
}

#[test]
fn ns_names_without_glue_are_resolved_within_a_budget() {
    // Ten NS names without glue, none of which exists (NXNSAttack): at most three are looked
    // up, each for A and then AAAA, each lookup a minimised query (nowhere. A: NXDOMAIN) and
    // the full one after it (RFC 9156 relaxed mode).
    let (answer, root, evil, good) = run(|m| {
        for i in 0..10 {
            m.authority
                .push(ns("example.", &format!("ns{i}.victim.nowhere.")));
        }
    });
    let err = answer.unwrap_err();
    assert!(matches!(&err, ResolveError::Lame(_)), "{err}");
    let lookups = root
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n.is_subdomain_of(&name("nowhere.")))
        .count();
    assert!(
        (1..=12).contains(&lookups),
        "{lookups} lookups for NS names without glue"
    );
    assert!(evil.lock().unwrap().is_empty() && good.lock().unwrap().is_empty());
}

/// MID, the server of example.: refers sub.example. to ns.sub.example. (glue: the good
/// server) with the AA flag wrongly set, and answers `alias.example. CNAME www.sub.example.`.
fn aa_referrer() -> Behaviour {
    Arc::new(|q| {
        let qname = &q.questions[0].qname;
        let mut m = reply(q, true, Rcode::NOERROR);
        if *qname == name("alias.example.") {
            let target = name("www.sub.example.").as_wire().to_vec();
            m.answers.push(rec("alias.example.", RrType::CNAME, target));
        } else {
            m.authority.push(ns("sub.example.", "ns.sub.example."));
            m.additional.push(a("ns.sub.example.", GOOD));
        }
        m
    })
}

/// The server of sub.example.: `www.sub.example. A 192.0.2.81`.
fn sub_server() -> Behaviour {
    Arc::new(|q| {
        let mut m = reply(q, true, Rcode::NOERROR);
        if q.questions[0].qname == name("www.sub.example.") && q.questions[0].qtype == RrType::A {
            m.answers.push(a("www.sub.example.", "192.0.2.81"));
        }
        m
    })
}

/// Resolves `qname` A with the root referring example. to MID ([`aa_referrer`]) and the good
/// address serving sub.example.; the answer and the logs of MID and the sub.example. server.
fn run_aa_referral(qname: &str) -> (pqdns_resolver::Answer, Log, Log) {
    let rt = common::runtime();
    let (answer, logs) = rt.block_on(async {
        let root = root(|m| {
            m.authority.push(ns("example.", "ns.example."));
            m.additional.push(a("ns.example.", MID));
        });
        let list = [(ROOT, root), (MID, aa_referrer()), (GOOD, sub_server())];
        let (logs, port) = servers_at(&list).await;
        let answer = resolver(port).resolve(&name(qname), RrType::A).await;
        (answer, logs)
    });
    let [_, mid, sub]: [Log; 3] = logs.try_into().unwrap();
    (answer.unwrap(), mid, sub)
}

#[test]
fn a_referral_wrongly_flagged_aa_is_followed() {
    // Issue 29: on its code the AA referral ended resolution as an empty NOERROR.
    let (answer, mid, sub) = run_aa_referral("www.sub.example.");
    assert_eq!(answer.rcode(), Rcode::NOERROR);
    assert_eq!(addresses(&answer), vec![vec![192, 0, 2, 81]]);
    assert_eq!(mid.lock().unwrap().len(), 1);
    assert_eq!(sub.lock().unwrap().len(), 1);
}

#[test]
fn a_cname_into_a_referral_wrongly_flagged_aa_is_followed() {
    // The CNAME's target is below a cut whose referral has the same fault.
    let (answer, _, sub) = run_aa_referral("alias.example.");
    let types: Vec<RrType> = answer.answers().iter().map(|s| s.rtype()).collect();
    assert_eq!(types, vec![RrType::CNAME, RrType::A]);
    assert_eq!(addresses(&answer)[1], vec![192, 0, 2, 81]);
    assert_eq!(
        *sub.lock().unwrap(),
        vec![(name("www.sub.example."), RrType::A)]
    );
}

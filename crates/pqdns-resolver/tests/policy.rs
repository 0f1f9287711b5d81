//! Resolver policy from the configuration file (issue 29, must-show 5): per-domain forwarding
//! to a DoT upstream and a stub zone beside iteration in one instance, counted at the
//! authorities; local zones of each type answered with zero upstream queries; access control
//! per client prefix; and a SIGHUP reload of `pqdns-resolver` while 1,000 queries/s run.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, MessageView, Rcode, Section, FLAG_AD};
use pqdns_core::{Class, Name, RrType};
use pqdns_net::acl::AllowList;
use pqdns_net::service::{Reply, Request, Service, Transport};
use pqdns_resolver::policy::PolicySource;
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{Config, Mode, Resolver, TrustAnchors};

use common::scripted::{a, ns, reply, servers_at, Behaviour, Log};
use common::{name, udp_client, ZoneSpec};

const ROOT: &str = "127.0.0.41";
const EXAMPLE: &str = "127.0.0.42";
const LAB: &str = "127.0.0.43";

/// The response to `qname`/`qtype` (DO=1, RD as given) from `client`, answered at once or
/// after resolution; `None` when the service sends nothing.
async fn ask(
    service: &Arc<RecursiveService>,
    client: &str,
    qname: &str,
    qtype: RrType,
    rd: bool,
) -> Option<Vec<u8>> {
    let question = Question {
        qname: name(qname),
        qtype,
        qclass: Class::IN,
    };
    let packet = Message::query(7, question, rd, Some(Edns::dnssec_ok(1232))).to_wire();
    let client: SocketAddr = client.parse().unwrap();
    let request = Request::new(&packet, client, Transport::Udp);
    let mut out = Vec::new();
    let (mut out, info) = match service.respond(&(), &request, &mut out, 0) {
        Reply::Ready(info) => (out, info),
        Reply::Defer(deferred) => {
            Arc::clone(service)
                .respond_later(request.to_owned(), deferred, out, 0)
                .await
        }
        _ => panic!("{qname}: neither answered nor deferred"),
    };
    out.truncate(info.len);
    (info.len > 0).then_some(out)
}

/// RCODE, AD, and the addresses in the answer section.
fn read(wire: &[u8]) -> (Rcode, bool, Vec<String>) {
    let v = MessageView::parse(wire).unwrap();
    let addrs = v
        .records(Section::Answer)
        .filter(|r| r.rtype() == RrType::A)
        .map(|r| {
            let d = r.rdata();
            format!("{}.{}.{}.{}", d[0], d[1], d[2], d[3])
        })
        .collect();
    (v.rcode(), v.header().has(FLAG_AD), addrs)
}

/// The names a scripted server was asked.
fn asked(log: &Log) -> Vec<Name> {
    log.lock().unwrap().iter().map(|(n, _)| n.clone()).collect()
}

/// A root referring `example.` to the example. server (with glue).
fn root() -> Behaviour {
    Arc::new(|q| {
        let mut m = reply(q, false, Rcode::NOERROR);
        m.authority.push(ns("example.", "ns.example."));
        m.additional.push(a("ns.example.", EXAMPLE));
        m
    })
}

/// An authority answering every name with `addr`.
fn answers_with(addr: &'static str) -> Behaviour {
    Arc::new(move |q| {
        let mut m = reply(q, true, Rcode::NOERROR);
        if q.questions[0].qtype == RrType::A {
            m.answers.push(a(&q.questions[0].qname.to_string(), addr));
        }
        m
    })
}

/// A policy file in `dir` with `text`, loaded for a service without `--allow`.
fn load(
    dir: &std::path::Path,
    text: &str,
    ca: Vec<std::path::PathBuf>,
) -> pqdns_resolver::policy::Policy {
    let path = dir.join("resolver.toml");
    std::fs::write(&path, text).unwrap();
    PolicySource::new(path, ServiceConfig::default().allow, false)
        .with_upstreams(Duration::from_secs(3), ca, None)
        .load()
        .unwrap()
}

#[test]
fn forward_zone_over_dot_and_stub_zone_beside_iteration() {
    // corp.example. is served only by this pqdns-server, reached over DoT (q.corp.example.
    // over DoQ, h.corp.example. over DoH: the longest suffix decides); it counts what it
    // answers per transport.
    let corp = common::serve(
        ZoneSpec {
            origin: "corp.example.",
            records: "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                      www A 192.0.2.80\nq A 192.0.2.81\nh A 192.0.2.82\n",
            algorithms: &[],
            denial: "nsec",
        },
        true,
        |s| s.metrics = Some("127.0.0.1:0".parse().unwrap()),
    );
    let (dot, doq, doh) = (corp.dot.unwrap(), corp.doq.unwrap(), corp.doh.unwrap());
    let cert = corp.dir.path().join("keys/pqdns-server.crt");
    let rt = common::runtime();
    let (logs, port) = rt.block_on(servers_at(&[
        (ROOT, root()),
        (EXAMPLE, answers_with("198.51.100.1")),
        (LAB, answers_with("203.0.113.5")),
    ]));
    let mode = Mode::Iterative {
        roots: vec![SocketAddr::new(ROOT.parse().unwrap(), port)],
        port,
    };
    let resolver = Resolver::new(
        Config::new(mode, TrustAnchors::default()),
        udp_client(Duration::from_secs(3)),
    );
    let service = Arc::new(RecursiveService::new(resolver, ServiceConfig::default()));
    let dir = tempfile::tempdir().unwrap();
    let policy = load(
        dir.path(),
        &format!(
            "[[forward-zone]]\nname = \"corp.example.\"\n\
             upstreams = [\"tls://{dot}#localhost\"]\npq-only = true\n\
             [[forward-zone]]\nname = \"q.corp.example.\"\n\
             upstreams = [\"quic://{doq}#localhost\"]\n\
             [[forward-zone]]\nname = \"h.corp.example.\"\n\
             upstreams = [\"https://{doh}/dns-query#localhost\"]\n\
             [[stub-zone]]\nname = \"lab.example.\"\nservers = [\"{LAB}:{port}\"]\n"
        ),
        vec![cert],
    );
    service.install_policy(policy);
    let get = |qname: &str| {
        let wire = rt
            .block_on(ask(&service, "127.0.0.1:5301", qname, RrType::A, true))
            .unwrap();
        read(&wire)
    };
    // Through the DoT upstream: the only server with this address.
    assert_eq!(
        get("www.corp.example."),
        (Rcode::NOERROR, false, vec!["192.0.2.80".into()])
    );
    assert_eq!(
        get("q.corp.example."),
        (Rcode::NOERROR, false, vec!["192.0.2.81".into()])
    );
    assert_eq!(
        get("h.corp.example."),
        (Rcode::NOERROR, false, vec!["192.0.2.82".into()])
    );
    let by_transport = |t: &str| -> f64 {
        let label = format!("pqdns_queries_total{{transport=\"{t}\"");
        corp.stats()
            .iter()
            .filter(|(n, _)| n.starts_with(&label))
            .map(|(_, v)| v)
            .sum()
    };
    let counts: Vec<f64> = ["dot", "doq", "doh", "udp", "tcp"]
        .iter()
        .map(|t| by_transport(t))
        .collect();
    assert!(
        counts[0] >= 1.0 && counts[1] >= 1.0 && counts[2] >= 1.0 && counts[3] + counts[4] == 0.0,
        "corp.example.'s server answered dot, doq, doh, udp, tcp: {counts:?}"
    );
    eprintln!("corp.example.'s server answered dot, doq, doh, udp, tcp: {counts:?}");
    // Iteration from the stub zone's server, not from the root.
    assert_eq!(
        get("www.lab.example."),
        (Rcode::NOERROR, false, vec!["203.0.113.5".into()])
    );
    // Everything else: iteration from the root.
    assert_eq!(
        get("www.other.example."),
        (Rcode::NOERROR, false, vec!["198.51.100.1".into()])
    );
    let [root_log, example_log, lab_log]: [Log; 3] = logs.try_into().unwrap();
    let (corp_name, lab_name) = (name("corp.example."), name("lab.example."));
    for (who, log) in [("root", &root_log), ("example.", &example_log)] {
        let names = asked(log);
        assert!(
            !names
                .iter()
                .any(|n| n.is_subdomain_of(&corp_name) || n.is_subdomain_of(&lab_name)),
            "{who} was asked for a name of a forward or stub zone: {names:?}"
        );
    }
    assert!(
        !asked(&root_log).is_empty() && asked(&example_log).contains(&name("www.other.example."))
    );
    let lab_names = asked(&lab_log);
    assert!(
        lab_names.contains(&name("www.lab.example.")),
        "{lab_names:?}"
    );
    assert!(
        lab_names.iter().all(|n| n.is_subdomain_of(&lab_name)),
        "{lab_names:?}"
    );
}

/// The local zones of the tests: one of each type.
const LOCAL: &str = "\
[[local-zone]]
name = \"home.arpa.\"
type = \"static\"
records = [\"@ 3600 IN SOA ns hostmaster 1 3600 600 86400 60\", \"nas.home.arpa. 300 IN A 192.0.2.7\"]

[[local-zone]]
name = \"ads.example.\"
type = \"refuse\"

[[local-zone]]
name = \"gone.example.\"
type = \"nxdomain\"

[[local-zone]]
name = \"portal.example.\"
type = \"redirect\"
records = [\"portal.example. 60 IN A 192.0.2.10\"]
";

/// A service forwarding to a counting relay in front of an authority that answers every
/// name; returns it and the relay's count.
fn counted_service(
    rt: &tokio::runtime::Runtime,
) -> (Arc<RecursiveService>, Arc<std::sync::atomic::AtomicUsize>) {
    let (logs, port) = rt.block_on(servers_at(&[(EXAMPLE, answers_with("198.51.100.1"))]));
    drop(logs);
    let (relay, count) =
        common::counting_relay(rt, SocketAddr::new(EXAMPLE.parse().unwrap(), port));
    let resolver = Resolver::new(
        Config::new(Mode::Forward(relay), TrustAnchors::default()),
        udp_client(Duration::from_secs(3)),
    );
    (
        Arc::new(RecursiveService::new(resolver, ServiceConfig::default())),
        count,
    )
}

#[test]
fn local_zones_answer_without_upstream_queries() {
    let rt = common::runtime();
    let (service, upstream) = counted_service(&rt);
    let dir = tempfile::tempdir().unwrap();
    service.install_policy(load(dir.path(), LOCAL, Vec::new()));
    let get = |qname: &str, qtype: RrType| {
        let wire = rt
            .block_on(ask(&service, "127.0.0.1:5301", qname, qtype, true))
            .unwrap();
        let soa = MessageView::parse(&wire)
            .unwrap()
            .records(Section::Authority)
            .any(|r| r.rtype() == RrType::SOA);
        (read(&wire), soa)
    };
    let cases = [
        (
            "nas.home.arpa.",
            RrType::A,
            Rcode::NOERROR,
            vec!["192.0.2.7"],
            false,
        ),
        ("nas.home.arpa.", RrType::AAAA, Rcode::NOERROR, vec![], true),
        (
            "printer.home.arpa.",
            RrType::A,
            Rcode::NXDOMAIN,
            vec![],
            true,
        ),
        (
            "tracker.ads.example.",
            RrType::A,
            Rcode::REFUSED,
            vec![],
            false,
        ),
        (
            "a.b.gone.example.",
            RrType::A,
            Rcode::NXDOMAIN,
            vec![],
            false,
        ),
        (
            "deep.er.portal.example.",
            RrType::A,
            Rcode::NOERROR,
            vec!["192.0.2.10"],
            false,
        ),
        (
            "portal.example.",
            RrType::A,
            Rcode::NOERROR,
            vec!["192.0.2.10"],
            false,
        ),
    ];
    for (qname, qtype, rcode, addrs, soa) in cases {
        let addrs: Vec<String> = addrs.into_iter().map(String::from).collect();
        // Never AD: local data is not validated.
        assert_eq!(
            get(qname, qtype),
            ((rcode, false, addrs), soa),
            "{qname} {qtype}"
        );
    }
    assert_eq!(
        upstream.load(Ordering::SeqCst),
        0,
        "a local zone asked upstream"
    );
    // A name outside the local zones goes upstream: the count is not blind.
    assert_eq!(
        get("www.example.", RrType::A).0 .2,
        vec!["198.51.100.1".to_string()]
    );
    assert!(upstream.load(Ordering::SeqCst) > 0);
    assert!(service
        .render_metrics()
        .contains("pqdns_resolver_local_answers_total 7"));
}

#[test]
fn access_control_per_prefix() {
    let rt = common::runtime();
    let (service, upstream) = counted_service(&rt);
    let dir = tempfile::tempdir().unwrap();
    service.install_policy(load(
        dir.path(),
        "[[access-control]]\nprefix = \"127.0.0.0/8\"\naction = \"allow\"\n\
         [[access-control]]\nprefix = \"127.0.0.2\"\naction = \"refuse\"\n\
         [[access-control]]\nprefix = \"127.0.0.3/32\"\naction = \"deny\"\n\
         [[access-control]]\nprefix = \"::1\"\naction = \"allow-snoop\"\n",
        Vec::new(),
    ));
    let get = |client: &str, qname: &str, rd: bool| {
        rt.block_on(ask(&service, client, qname, RrType::A, rd))
            .map(|w| read(&w))
    };
    let refused = Some((Rcode::REFUSED, false, vec![]));
    // allow-snoop, RD=0, not cached: SERVFAIL without a query upstream.
    assert_eq!(
        get("[::1]:5301", "www.example.", false).unwrap().0,
        Rcode::SERVFAIL
    );
    assert_eq!(upstream.load(Ordering::SeqCst), 0);
    // allow, RD=1: resolved; RD=0: refused.
    let answer = Some((Rcode::NOERROR, false, vec!["198.51.100.1".to_string()]));
    assert_eq!(get("127.0.0.1:5301", "www.example.", true), answer);
    assert_eq!(upstream.load(Ordering::SeqCst), 1);
    assert_eq!(get("127.0.0.1:5301", "www.example.", false), refused);
    // allow-snoop, RD=0, cached now: answered from the cache.
    assert_eq!(get("[::1]:5301", "www.example.", false), answer);
    // The longer prefixes: refuse and deny (nothing sent); outside every prefix: refused.
    assert_eq!(get("127.0.0.2:5301", "www.example.", true), refused);
    assert_eq!(get("127.0.0.3:5301", "www.example.", true), None);
    assert_eq!(get("192.0.2.1:5301", "www.example.", true), refused);
    assert_eq!(upstream.load(Ordering::SeqCst), 1);
    // Without access-control tables: the allow-list (loopback), whatever RD, as before.
    service.install_policy(load(dir.path(), "", Vec::new()));
    assert_eq!(get("127.0.0.3:5301", "www.example.", false), answer);
    assert_eq!(get("192.0.2.1:5301", "www.example.", true), refused);
    let allow_list =
        PolicySource::new(dir.path().join("resolver.toml"), AllowList::default(), true);
    let err = allow_list
        .parse("[[access-control]]\nprefix = \"::1\"\naction = \"allow\"\n")
        .err()
        .unwrap();
    assert!(err.to_string().contains("resolver.toml:2:"), "{err}");
}

/// The policy files of the reload test: `nas.home.arpa.` at `addr`.
fn home(addr: &str) -> String {
    format!(
        "[[local-zone]]\nname = \"home.arpa.\"\ntype = \"static\"\n\
         records = [\"nas.home.arpa. 300 IN A {addr}\"]\n"
    )
}

/// Replaces `path` by `text` in one step (rename), as an operator's editor or configuration
/// management would: the resolver never reads half a file.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn sighup_reload_under_a_thousand_queries_per_second_loses_none() {
    use common::service::{unused_anchor, Service};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("resolver.toml");
    replace(&config, &home("192.0.2.1"));
    let anchor = unused_anchor(dir.path());
    let service = Service::start(
        dir.path(),
        "reload",
        &[
            "--config",
            config.to_str().unwrap(),
            "--forward",
            "127.0.0.1:9",
            "--trust-anchor",
            anchor.to_str().unwrap(),
            "--rrl-rate",
            "0",
        ],
    );
    const QUERIES: u16 = 3000;
    let rt = common::runtime();
    let answers = rt.block_on(async {
        let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        socket.connect(service.udp).await.unwrap();
        let answers = Arc::new(std::sync::Mutex::new(vec![
            None::<String>;
            usize::from(QUERIES)
        ]));
        let seen_new = Arc::new(tokio::sync::Notify::new());
        let receiver = {
            let (socket, answers, seen_new) = (socket.clone(), answers.clone(), seen_new.clone());
            tokio::spawn(async move {
                let mut buf = vec![0; 4096];
                for _ in 0..QUERIES {
                    let n = socket.recv(&mut buf).await.unwrap();
                    let v = MessageView::parse(&buf[..n]).unwrap();
                    let (_, _, addrs) = read(&buf[..n]);
                    let addr = addrs.first().cloned().unwrap_or_default();
                    if addr == "192.0.2.2" {
                        seen_new.notify_one();
                    }
                    answers.lock().unwrap()[usize::from(v.header().id)] = Some(addr);
                }
            })
        };
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        for id in 0..QUERIES {
            tick.tick().await;
            let question = Question {
                qname: name("nas.home.arpa."),
                qtype: RrType::A,
                qclass: Class::IN,
            };
            let query = Message::query(id, question, true, None).to_wire();
            socket.send(&query).await.unwrap();
            if id == 1000 {
                replace(&config, &home("192.0.2.2"));
                service.signal("HUP");
            }
            if id == 2000 {
                // A bad file (line 3) once the good one is in use: refused, the policy stays.
                tokio::time::timeout(Duration::from_secs(10), seen_new.notified())
                    .await
                    .expect("the reloaded policy never answered");
                replace(
                    &config,
                    "[[local-zone]]\nname = \"home.arpa.\"\ntype = \"open\"\n",
                );
                service.signal("HUP");
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), receiver).await;
        let collected = answers.lock().unwrap().clone();
        drop(answers);
        collected
    });
    let lost = answers.iter().filter(|a| a.is_none()).count();
    assert_eq!(lost, 0, "queries without a response");
    let old = answers
        .iter()
        .filter(|a| a.as_deref() == Some("192.0.2.1"))
        .count();
    let new = answers
        .iter()
        .filter(|a| a.as_deref() == Some("192.0.2.2"))
        .count();
    assert_eq!(
        old + new,
        usize::from(QUERIES),
        "every answer is one of the two policies"
    );
    assert!(old >= 1000 && new >= 1000, "old {old}, new {new}");
    // Once the new policy answered, the old one never came back (not even after the bad file).
    let first_new = answers
        .iter()
        .position(|a| a.as_deref() == Some("192.0.2.2"))
        .unwrap();
    assert!(answers[first_new..]
        .iter()
        .all(|a| a.as_deref() == Some("192.0.2.2")));
    // For the report: queries (≈ ms at this rate) from the SIGHUP to the first new answer.
    eprintln!(
        "{QUERIES} queries, 0 lost; old policy {old}, new {new}; the new one answered from \
         query {first_new} (SIGHUP sent after query 1000)"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !service.log().contains("keeping the policy in use") {
        assert!(std::time::Instant::now() < deadline, "{}", service.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = service.log();
    assert!(log.contains("resolver.toml:3:"), "{log}");
    let dig = service.dig(&["nas.home.arpa.", "A", "+short"]);
    assert_eq!(dig.text.trim(), "192.0.2.2", "{}", dig.text);
}

#[test]
fn check_reads_the_policy_tables() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("resolver.toml");
    let anchor = common::service::unused_anchor(dir.path());
    let check = |text: &str| {
        replace(&config, text);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pqdns-resolver"))
            .args(["--check", "--forward", "127.0.0.1:9", "--trust-anchor"])
            .arg(&anchor)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    // Options and tables side by side.
    let (code, text) = check(&format!("cache-size = 8\n{LOCAL}"));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("configuration ok"), "{text}");
    let (code, text) =
        check("cache-size = 8\n[[access-control]]\nprefix = \"::1\"\naction = \"open\"\n");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("resolver.toml:4:") && text.contains("open"),
        "{text}"
    );
}

/// The tiers of [`iterating_with_a_bogus_leaf`]'s hierarchy, apart from the other test
/// files' addresses.
const BOGUS_TIERS: common::hierarchy::Tiers = common::hierarchy::Tiers {
    root: "127.0.4.2",
    tld: "127.0.4.3",
};
const BOGUS_LEAF_IP: &str = "127.0.4.4";
const BOGUS_EXPIRED_IP: &str = "127.0.4.5";

/// A `pqdns-resolver` process iterating from the root of a hierarchy whose leaf `secure.tld.`
/// is Secure and whose leaf `expired.tld.` is Bogus (its signatures expired), with the policy
/// file `config` (holding [`LOCAL`]); the servers, the process and the port of the
/// authorities.
fn iterating_with_a_bogus_leaf(
    dir: &std::path::Path,
    config: &std::path::Path,
) -> (common::hierarchy::Running, common::service::Service, u16) {
    use common::hierarchy::{build_at, serve_with_expired_last, Leaf, Running};
    let leaves = [
        Leaf {
            name: "secure",
            algorithms: &["ECDSAP256SHA256"],
            denial: "nsec",
            ip: BOGUS_LEAF_IP,
            extra: "",
        },
        Leaf {
            name: "expired",
            algorithms: &["ECDSAP256SHA256"],
            denial: "nsec",
            ip: BOGUS_EXPIRED_IP,
            extra: "",
        },
    ];
    let h = build_at(BOGUS_TIERS, &leaves, "ECDSAP256SHA256", "ML-DSA-44", "");
    let rt = common::runtime();
    let port = pqdns_test_support::ports::free_dual_port_on(BOGUS_TIERS.root.parse().unwrap());
    let handles =
        serve_with_expired_last(&rt, &h, BOGUS_TIERS, BOGUS_LEAF_IP, BOGUS_EXPIRED_IP, port);
    let hints = pqdns_test_support::hierarchy::write_root_hints(dir, BOGUS_TIERS.root);
    let anchor = dir.join("root.ds");
    std::fs::write(&anchor, format!("{}\n", h.root_ds_text)).unwrap();
    replace(config, LOCAL);
    let port_text = port.to_string();
    let service = common::service::Service::start(
        dir,
        "iterating",
        &[
            "--config",
            config.to_str().unwrap(),
            "--root-hints",
            hints.to_str().unwrap(),
            "--authority-port",
            &port_text,
            "--trust-anchor",
            anchor.to_str().unwrap(),
            "--timeout",
            "2",
        ],
    );
    (Running { rt, handles }, service, port)
}

/// Replaces the policy file by `text`, sends SIGHUP and waits (at most 10 s) for the
/// `reloads`-th "policy reloaded" in the log.
fn reload_with(
    service: &common::service::Service,
    config: &std::path::Path,
    text: &str,
    reloads: usize,
) {
    replace(config, text);
    service.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while service.log().matches("SIGHUP: policy reloaded").count() < reloads {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload {reloads}:\n{}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 29 through the binary, with dig as the client: local answers of every type have AA
/// and never AD, with and without RD, while an iterated Secure answer has AD and not AA; a
/// Bogus leaf answers SERVFAIL until an insecure domain (a `[[domain-insecure]]` table, then
/// `insecure = true` on a stub zone) or a negative trust anchor from the file covers it —
/// NOERROR without AD, the Secure sibling still AD — and SERVFAIL again once the table is
/// gone, each on SIGHUP (the answer cache emptied with the change); a negative trust anchor
/// whose time has passed is removed by the binary and logged as expired.
#[test]
fn local_answers_are_authoritative_and_insecure_domains_and_ntas_follow_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("resolver.toml");
    let (_running, service, port) = iterating_with_a_bogus_leaf(dir.path(), &config);

    // 1. AA on local answers, +rec and +norec; never AD (dig sets AD in its queries).
    for rd in ["+rec", "+norec"] {
        for (qname, status) in [
            ("nas.home.arpa.", "NOERROR"),
            ("nope.home.arpa.", "NXDOMAIN"),
            ("x.ads.example.", "REFUSED"),
            ("a.gone.example.", "NXDOMAIN"),
            ("deep.portal.example.", "NOERROR"),
        ] {
            let out = service.dig(&[rd, "+dnssec", qname, "A"]);
            assert_eq!(out.status(), status, "{qname} {rd}:\n{}", out.text);
            assert!(
                out.has_flag("aa") && !out.has_flag("ad"),
                "{qname} {rd}: AA, no AD:\n{}",
                out.text
            );
        }
    }
    let secure = |what: &str| {
        let out = service.dig(&["+dnssec", "www.secure.tld.", "A"]);
        assert_eq!(out.status(), "NOERROR", "{what}:\n{}", out.text);
        assert!(
            out.has_flag("ad") && !out.has_flag("aa"),
            "{what}: iterated, Secure: AD, no AA:\n{}",
            out.text
        );
    };
    secure("iterated");
    let bogus = |what: &str| {
        let out = service.dig(&["+dnssec", "www.expired.tld.", "A"]);
        assert_eq!(out.status(), "SERVFAIL", "{what}:\n{}", out.text);
    };
    let insecure = |what: &str| {
        let out = service.dig(&["+dnssec", "www.expired.tld.", "A"]);
        assert_eq!(out.status(), "NOERROR", "{what}:\n{}", out.text);
        assert!(
            !out.has_flag("ad") && out.has("ANSWER", "www.expired.tld.", "A"),
            "{what}: the data, without AD:\n{}",
            out.text
        );
        secure(what);
    };
    bogus("validated");

    // 2. Insecure domains: a table, removed, then the stub-zone flag.
    let table = format!("{LOCAL}\n[[domain-insecure]]\nname = \"Expired.TLD.\"\n");
    reload_with(&service, &config, &table, 1);
    insecure("[[domain-insecure]]");
    reload_with(&service, &config, LOCAL, 2);
    bogus("[[domain-insecure]] removed");
    let stub = format!(
        "{LOCAL}\n[[stub-zone]]\nname = \"expired.tld.\"\nservers = [\"{BOGUS_EXPIRED_IP}:{port}\"]\n\
         insecure = true\n"
    );
    reload_with(&service, &config, &stub, 3);
    insecure("stub zone, insecure = true");
    reload_with(&service, &config, LOCAL, 4);
    bogus("stub zone removed");
    assert_eq!(
        service.metric("pqdns_resolver_nta_hits_total"),
        0,
        "insecure domains are not negative trust anchors"
    );

    // 3. A negative trust anchor from the file, for an hour (RFC 3339 UTC), then removed.
    let nta_until = |secs: u64| {
        // "YYYY-MM-DD HH:MM:SS UTC" as RFC 3339: "YYYY-MM-DDTHH:MM:SSZ".
        let t = pqdns_core::time::to_display(secs)
            .replace(" UTC", "Z")
            .replacen(' ', "T", 1);
        format!("{LOCAL}\n[[negative-trust-anchor]]\nname = \"expired.tld.\"\nuntil = {t}\n")
    };
    let nta = nta_until(pqdns_core::time::now() + 3600);
    reload_with(&service, &config, &nta, 5);
    insecure("[[negative-trust-anchor]]");
    assert!(service.metric("pqdns_resolver_nta_hits_total") >= 1);
    reload_with(&service, &config, LOCAL, 6);
    bogus("[[negative-trust-anchor]] removed");
    let log = service.log();
    assert!(
        log.contains("negative trust anchor added (RFC 7646)")
            && log.contains("negative trust anchor removed (RFC 7646)"),
        "{log}"
    );

    // 4. One whose time has come: the binary's expiry task, woken by the reload, removes it
    // and logs it; it never applied.
    assert!(!log.contains("expired (RFC 7646)"), "{log}");
    let ended = nta_until(pqdns_core::time::now() - 1);
    reload_with(&service, &config, &ended, 7);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !service
        .log()
        .contains("negative trust anchor expired (RFC 7646)")
    {
        assert!(std::time::Instant::now() < deadline, "{}", service.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    bogus("[[negative-trust-anchor]] past its time");
}

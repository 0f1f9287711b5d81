//! Regressions for the conformance defects of issue 29, each against an authority that gives
//! the scenario's answers: a zone signed in the test (NSEC3 opt-out, which a zone description
//! cannot ask for) served by an in-process pqdns-server, or scripted UDP responders.

use std::time::Duration;

use pqdns_core::dnssec::validate::Status;
use pqdns_core::wire::Rcode;
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver};

use crate::common;
use common::{name, opt_out_zone, udp_client, Served};

fn forwarder(served: &Served) -> Resolver {
    Resolver::new(
        Config::new(Mode::Forward(served.addr), served.anchors.clone()),
        udp_client(Duration::from_secs(3)),
    )
}

#[test]
fn a_denial_through_an_nsec3_opt_out_span_is_insecure_not_secure() {
    // RFC 5155 §9.2: the NSEC3 covering the next closer name has Opt-Out, so an unsigned
    // delegation could be there: no AD. On issue 29's code NXDOMAIN and the wildcard answer
    // came back Secure.
    let served = opt_out_zone();
    let resolver = forwarder(&served);
    let run = |q: &str, t: RrType| served.rt.block_on(resolver.resolve(&name(q), t)).unwrap();
    let nx = run("nope.example.", RrType::A);
    assert_eq!(nx.rcode(), Rcode::NXDOMAIN);
    assert!(
        matches!(nx.status(), Status::Insecure(_)),
        "{}",
        nx.status()
    );
    let reason = &nx.status().reason().unwrap().text;
    assert!(
        reason.contains("opt-out") && reason.contains("nope.example."),
        "{reason}"
    );
    // The proof itself verified: it is kept, marked as resting on the span.
    assert!(nx.denials().iter().any(|d| d.opt_out().is_some()));
    // A wildcard expansion proven through the span.
    let wild = run("x.w.example.", RrType::TXT);
    assert!(
        matches!(wild.status(), Status::Insecure(_)),
        "{}",
        wild.status()
    );
    assert_eq!(wild.answers().len(), 1);
    // What the chain does list is still Secure: data, and NODATA at a name with its own NSEC3.
    assert!(run("www.example.", RrType::A).status().is_secure());
    let nodata = run("www.example.", RrType::TXT);
    assert!(nodata.status().is_secure(), "{}", nodata.status());
}

/// Runs a BIND tool in `dir`; its standard output.
fn bind_tool(dir: &std::path::Path, program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): apt-get install bind9-utils"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// example. signed by BIND's dnssec-signzone with a KSK and a ZSK of `algorithm` (RSA 2048
/// bits), NSEC3 (no salt, no extra iterations) if `nsec3`, served as it is by pqdns-server;
/// the trust anchor is the KSK's DS (SHA-256) from dnssec-dsfromkey.
fn bind_signed(algorithm: &str, nsec3: bool) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let mut zone = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\n\
                    ns A 192.0.2.1\nwww A 192.0.2.2\n"
        .to_string();
    let keygen = |ksk: bool| {
        let mut args = vec!["-q", "-a", algorithm, "-b", "2048", "-n", "ZONE"];
        if ksk {
            args.extend(["-f", "KSK"]);
        }
        args.push("example.");
        bind_tool(dir.path(), "dnssec-keygen", &args)
            .trim()
            .to_string()
    };
    let (ksk, zsk) = (keygen(true), keygen(false));
    for key in [&ksk, &zsk] {
        zone.push_str(&std::fs::read_to_string(dir.path().join(format!("{key}.key"))).unwrap());
    }
    std::fs::write(dir.path().join("example.zone"), zone).unwrap();
    let mut args = vec!["-o", "example.", "-K", ".", "-e", "+8640000", "-O", "full"];
    if nsec3 {
        args.extend(["-3", "-"]);
    }
    args.push("example.zone");
    bind_tool(dir.path(), "dnssec-signzone", &args);
    let signed = std::fs::read_to_string(dir.path().join("example.zone.signed")).unwrap();
    let ds = bind_tool(
        dir.path(),
        "dnssec-dsfromkey",
        &["-2", &format!("{ksk}.key")],
    );
    std::fs::write(dir.path().join("anchor.ds"), &ds).unwrap();
    let anchors = pqdns_resolver::TrustAnchors::read(&dir.path().join("anchor.ds")).unwrap();
    let spec = common::ZoneSpec {
        origin: "example.",
        records: &signed,
        algorithms: &[],
        denial: "nsec",
    };
    let mut served = common::serve(spec, false, |_| {});
    served.anchors = anchors;
    served
}

#[test]
fn rsasha1_zones_validate_by_default_and_can_be_disabled() {
    // RFC 8624 §3.1: validators MUST validate RSASHA1 (5) and RSASHA1-NSEC3-SHA1 (7); unbound,
    // BIND and Knot Resolver do. On issue 29's code both zones were Insecure ("no DS for
    // example. uses a supported algorithm"). With the algorithm disabled they are Insecure.
    for (algorithm, number, nsec3) in [("RSASHA1", 5, false), ("NSEC3RSASHA1", 7, true)] {
        let served = bind_signed(algorithm, nsec3);
        let resolve = |profile: pqdns_core::dnssec::Profile, q: &str| {
            let mut config = Config::new(Mode::Forward(served.addr), served.anchors.clone());
            config.profile = profile;
            let r = Resolver::new(config, udp_client(Duration::from_secs(3)));
            served.rt.block_on(r.resolve(&name(q), RrType::A)).unwrap()
        };
        let default = pqdns_core::dnssec::Profile::default_profile;
        let www = resolve(default(), "www.example.");
        assert!(www.status().is_secure(), "{algorithm}: {}", www.status());
        assert_eq!(www.answers().len(), 1);
        let nope = resolve(default(), "nope.example.");
        assert_eq!(nope.rcode(), Rcode::NXDOMAIN);
        assert!(nope.status().is_secure(), "{algorithm}: {}", nope.status());
        let disabled = default().without(pqdns_core::dnssec::SecAlg(number));
        let www = resolve(disabled, "www.example.");
        assert!(
            matches!(www.status(), Status::Insecure(r) if r.text.contains("supported algorithm")),
            "{algorithm} disabled: {}",
            www.status()
        );
    }
}

#[test]
fn an_empty_answer_to_qtype_rrsig_is_passed_through_not_servfail() {
    // Issue 29: an authority answering QTYPE RRSIG with an empty NOERROR (no RRSIGs, no SOA)
    // made the answer Bogus ("negative answer for www.example. without SOA"), so SERVFAIL.
    // Like positive RRSIG answers it is now passed through unvalidated: no AD, no SERVFAIL.
    use pqdns_core::message::Message;
    use pqdns_core::wire::{FLAG_AA, FLAG_QR};
    let rt = common::runtime();
    let (answer, asked) = rt.block_on(async {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        common::spawn_udp(socket, move |wire, _| {
            let q = Message::parse(wire).ok()?;
            log.lock().unwrap().push(q.questions[0].qtype);
            let mut m = q.clone();
            m.flags = FLAG_QR | FLAG_AA;
            m.edns = None;
            Some(m.to_wire())
        });
        let mut anchors = pqdns_resolver::TrustAnchors::default();
        anchors.add_ds(name("example."), vec![0, 1, 13, 2, 0]);
        let r = Resolver::new(
            Config::new(Mode::Forward(addr), anchors),
            udp_client(Duration::from_secs(3)),
        );
        let answer = r.resolve(&name("www.example."), RrType::RRSIG).await;
        (answer, asked)
    });
    let answer = answer.unwrap();
    assert_eq!(answer.rcode(), Rcode::NOERROR);
    assert!(
        matches!(answer.status(), Status::Indeterminate(r) if r.text.contains("passed through")),
        "{}",
        answer.status()
    );
    assert!(answer.answers().is_empty());
    // Nothing else was asked to judge it (no SOA, DS or DNSKEY queries).
    assert_eq!(*asked.lock().unwrap(), vec![RrType::RRSIG]);
}

#[test]
fn an_unsigned_delegation_left_out_of_an_opt_out_chain_is_insecure() {
    // RFC 5155 §7.2.7 / §8.6: insecure. has no NSEC3; the referral and the NODATA for its DS
    // carry the closest encloser proof whose next closer NSEC3 has Opt-Out. Without that
    // proof from the server the answers were Bogus.
    let served = opt_out_zone();
    let resolver = forwarder(&served);
    let run = |q: &str, t: RrType| served.rt.block_on(resolver.resolve(&name(q), t)).unwrap();
    let referral = run("www.insecure.example.", RrType::A);
    assert!(
        matches!(referral.status(), Status::Insecure(r) if r.text.contains("unsigned delegation")),
        "{}",
        referral.status()
    );
    let no_ds = referral.referral().and_then(|r| r.no_ds.as_ref()).unwrap();
    assert_eq!(no_ds.opt_out(), Some(&name("insecure.example.")));
    let ds = run("insecure.example.", RrType::DS);
    assert!(
        matches!(ds.status(), Status::Insecure(r) if r.text.contains("opt-out")),
        "{}",
        ds.status()
    );
}

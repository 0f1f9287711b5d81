//! Aggressive use of DNSSEC-validated cache (RFC 8198, issue 29 must-show 3), counted at the
//! authority: a UDP relay in front of an in-process pqdns-server counts every query that
//! reaches it. After one validated NXDOMAIN, 1,000 other names in the span its NSEC (or
//! NSEC3, without opt-out) records prove absent are answered NXDOMAIN, Secure, with no query
//! at all; a name outside the span still goes to the authority; an NSEC3 opt-out span is
//! never used (each name there is asked for, and stays Insecure).

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::dnssec::nsec3::{owner_hash, Nsec3Params};
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::validate::Status;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::message::Message;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::wire::{MessageView, Rcode, Section, FLAG_AD, FLAG_TC};
use pqdns_core::{Name, Record, RrType};
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{Answer, Config, Mode, Resolver, TrustAnchors};
use pqdns_test_support::signed_zone;

use common::{
    ask_service, ask_service_over, counting_relay, name, opt_out_zone, serve_signed, udp_client,
};

/// Names under test, and SOA MINIMUM 60 below the records' TTL of 300: synthesised answers
/// live min(NSEC TTL, SOA TTL, SOA MINIMUM) = 60 s (RFC 9077 §3).
const ZONE: &str = "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ NS ns\nns A 192.0.2.1\n\
                    a A 192.0.2.2\nm A 192.0.2.3\nz A 192.0.2.4\n";

/// A pseudo-random generator (xorshift64*) for names: reproducible, and spread over the span.
struct Names(u64);

impl Names {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn resolver(upstream: std::net::SocketAddr, anchors: TrustAnchors) -> Resolver {
    Resolver::new(
        Config::new(Mode::Forward(upstream), anchors),
        udp_client(Duration::from_secs(3)),
    )
}

fn resolve(rt: &tokio::runtime::Runtime, r: &Resolver, qname: &str, t: RrType) -> Answer {
    rt.block_on(r.resolve(&name(qname), t)).unwrap()
}

/// Owner (lowercase), type and RDATA of each record, in a set.
fn record_set<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> BTreeSet<(String, RrType, Vec<u8>)> {
    records
        .into_iter()
        .map(|r| (r.owner.to_string().to_lowercase(), r.rtype, r.rdata.clone()))
        .collect()
}

/// Checks `out`, the service's response to `qname` `qtype` answered at once, against the
/// answer the resolver synthesises for it: the question as the client spelled it, the RCODE,
/// and the authority records with their RRSIGs. Most such responses are a response kept for
/// another name of the same denial proof, with this question spliced in.
fn assert_synthesised_response(service: &RecursiveService, out: &[u8], qname: &str, t: RrType) {
    let m = Message::parse(out).unwrap_or_else(|e| panic!("{qname}: {e}"));
    assert_eq!(m.questions.len(), 1, "{qname}");
    assert_eq!(
        m.questions[0].qname.as_wire(),
        name(qname).as_wire(),
        "{qname}"
    );
    assert_eq!(m.questions[0].qtype, t, "{qname}");
    let a = service.resolver().synthesise(&name(qname), t).unwrap();
    assert_eq!(m.rcode(), a.rcode(), "{qname}");
    let expected: Vec<Record> = a
        .authority()
        .iter()
        .flat_map(|s| [s.records(), s.rrsig_records()])
        .flatten()
        .collect();
    assert_eq!(record_set(&m.authority), record_set(&expected), "{qname}");
    assert!(m.answers.is_empty(), "{qname}");
}

#[test]
fn nsec_span_answers_a_thousand_names_without_a_query() {
    let served = serve_signed(signed_zone(
        &name("example."),
        ZONE,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec,
    ));
    let rt = common::runtime();
    let (relay, asked) = counting_relay(&rt, served.addr);
    let service = Arc::new(RecursiveService::new(
        resolver(relay, served.anchors.clone()),
        ServiceConfig::default(),
    ));
    // The response's RCODE, AD and authority TTLs, and whether the service answered at once
    // on its serving thread (a synthesised answer) rather than through a resolution task.
    let ask_at_once = |qname: &str, t: RrType| {
        let (out, at_once) = rt.block_on(ask_service(&service, qname, t));
        if at_once {
            assert_synthesised_response(&service, &out, qname, t);
        }
        let v = MessageView::parse(&out).unwrap();
        let ttls: Vec<u32> = v.records(Section::Authority).map(|r| r.ttl()).collect();
        (v.rcode(), v.header().has(FLAG_AD), ttls, at_once)
    };
    let ask = |qname: &str, t: RrType| {
        let (rcode, ad, ttls, at_once) = ask_at_once(qname, t);
        assert!(
            !at_once,
            "{qname}: answered at once, but it needs a resolution"
        );
        (rcode, ad, ttls)
    };
    // One validated NXDOMAIN: the NSEC a.example. → m.example. covers it, the apex's NSEC
    // (example. → a.example.) covers the wildcard *.example.
    let (rcode, ad, _) = ask("b.example.", RrType::A);
    assert_eq!((rcode, ad), (Rcode::NXDOMAIN, true));
    let warm = asked.load(Ordering::SeqCst);
    assert!(
        warm >= 2,
        "the NXDOMAIN and the zone's DNSKEY were asked for"
    );
    // 1,000 names in the same span (between a. and m., and below a.), none in the service's
    // response cache: NXDOMAIN with AD, no query, each answered at once where cache hits are
    // (no resolution task). Asked twice: synthesised answers are not cached, the second
    // round is synthesised again.
    let mut gen = Names(0x9e37_79b9_7f4a_7c15);
    // Some in capitals: the response is the same but for the question, spelled as asked.
    let names: Vec<String> = (0..1000)
        .map(|i| match i % 4 {
            0 => format!("b{:x}.example.", gen.next()),
            1 => format!("l{:x}.example.", gen.next()),
            2 => format!("x{:x}.a.example.", gen.next()),
            _ => format!("X{:X}.A.Example.", gen.next()),
        })
        .collect();
    for qname in names.iter().chain(&names) {
        let (rcode, ad, ttls, at_once) = ask_at_once(qname, RrType::A);
        assert_eq!(
            (rcode, ad, at_once),
            (Rcode::NXDOMAIN, true, true),
            "{qname}"
        );
        assert!(ttls.iter().all(|t| *t <= 60), "{qname}: TTLs {ttls:?}");
    }
    assert_eq!(asked.load(Ordering::SeqCst), warm, "no query for the span");
    // NODATA at a name the cache holds an NSEC for.
    let (rcode, ad, _, at_once) = ask_at_once("a.example.", RrType::TXT);
    assert_eq!((rcode, ad, at_once), (Rcode::NOERROR, true, true));
    assert_eq!(
        asked.load(Ordering::SeqCst),
        warm,
        "NODATA from a.example.'s NSEC"
    );
    assert!(service
        .metrics()
        .render()
        .contains("pqdns_resolver_synthesised_answers_total 2001\n"));
    // Outside the span (between m. and z.): asked for, and then its span is known too.
    let (rcode, _, _) = ask("n.example.", RrType::A);
    assert_eq!(rcode, Rcode::NXDOMAIN);
    assert_eq!(asked.load(Ordering::SeqCst), warm + 1);
    // Existing data is never denied: a.example. A is asked for and found.
    let (rcode, ad, _) = ask("a.example.", RrType::A);
    assert_eq!((rcode, ad), (Rcode::NOERROR, true));
    assert_eq!(asked.load(Ordering::SeqCst), warm + 2);
    // A negative trust anchor over the zone (RFC 7646): the records validated before it make
    // no Secure answer any more; the next name is asked for, and is Insecure (no AD).
    let resolver = service.resolver();
    resolver.add_negative_trust_anchor(name("example."), u64::from(u32::MAX));
    assert!(resolver.synthesise(&name(&names[0]), RrType::A).is_none());
    let (rcode, ad, _) = ask("b1.example.", RrType::A);
    assert_eq!((rcode, ad), (Rcode::NXDOMAIN, false));
    assert_eq!(asked.load(Ordering::SeqCst), warm + 3);
}

/// A zone whose names are long enough that a synthesised NXDOMAIN fits a 1232-byte UDP
/// response only with name compression: over UDP it is written compressed and never
/// truncated, whether or not a response kept for its proof (uncompressed, made for a TCP
/// query) exists; over TCP the kept one is served.
#[test]
fn a_synthesised_answer_that_fits_udp_only_compressed_is_not_truncated() {
    let zone = format!("{}.example.", "z".repeat(50));
    let served = serve_signed(signed_zone(
        &name(&zone),
        ZONE,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec,
    ));
    let rt = common::runtime();
    // No amplification limit: it would cut every such UDP answer to a client without a
    // cookie (RFC 7873 §5.2.3 aside), whatever its size.
    let mut config = ServiceConfig::default();
    config.amplification_limit = 0;
    let service = Arc::new(RecursiveService::new(
        resolver(served.addr, served.anchors.clone()),
        config,
    ));
    let ask = |label: &str, transport| {
        let qname = format!("{label}.{zone}");
        let (out, at_once) = rt.block_on(ask_service_over(&service, &qname, RrType::A, transport));
        let v = MessageView::parse(&out).unwrap();
        assert_eq!(v.rcode(), Rcode::NXDOMAIN, "{qname}");
        assert!(
            !v.header().has(FLAG_TC),
            "{qname}: truncated ({} bytes)",
            out.len()
        );
        if at_once {
            assert_synthesised_response(&service, &out, &qname, RrType::A);
        }
        (out.len(), at_once)
    };
    let (udp, tcp) = (pqdns_net::Transport::Udp, pqdns_net::Transport::Tcp);
    // The first NXDOMAIN is resolved; then names of the same span are synthesised.
    assert!(!ask("b", udp).1);
    let (compressed, at_once) = ask("c", udp);
    assert!(at_once && compressed <= 1232, "{compressed} bytes");
    let (uncompressed, at_once) = ask("d", tcp);
    assert!(
        at_once && uncompressed > 1232,
        "{uncompressed} bytes: the test needs more"
    );
    // The response kept for the proof does not fit UDP: written compressed again.
    let (again, at_once) = ask("e", udp);
    assert!(at_once && again <= 1232, "{again} bytes");
    assert_eq!(ask("f", tcp), (uncompressed, true));
}

/// The NSEC3 record of `denial` (hashed owner, next hashed owner) covering `hash`.
fn covering_span(answer: &Answer, hash: &[u8]) -> (Vec<u8>, Vec<u8>) {
    answer.denials()[0]
        .rrsets()
        .iter()
        .filter_map(|set| {
            let owner = owner_hash(set.owner())?;
            let (_, _, rest) = Nsec3Params::parse(&set.rdatas()[0])?;
            let next = rest[1..1 + usize::from(rest[0])].to_vec();
            let covers = if owner < next {
                owner.as_slice() < hash && hash < next.as_slice()
            } else {
                owner.as_slice() < hash || hash < next.as_slice()
            };
            covers.then_some((owner, next))
        })
        .next()
        .expect("an NSEC3 record covers the next closer name")
}

#[test]
fn nsec3_span_without_opt_out_answers_a_thousand_names_without_a_query() {
    let served = serve_signed(signed_zone(
        &name("example."),
        ZONE,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec3(Nsec3Params::default()),
    ));
    let rt = common::runtime();
    let (relay, asked) = counting_relay(&rt, served.addr);
    let r = resolver(relay, served.anchors.clone());
    let first = resolve(&rt, &r, "nope.example.", RrType::A);
    assert_eq!(first.rcode(), Rcode::NXDOMAIN);
    assert!(first.status().is_secure(), "{}", first.status());
    assert!(!first.synthesised());
    let warm = asked.load(Ordering::SeqCst);
    // Names whose hash falls in the span of the NSEC3 covering hash(nope.example.).
    let params = Nsec3Params::default();
    let (lo, hi) = covering_span(&first, &params.hash(&name("nope.example.")));
    let mut gen = Names(0x2545_f491_4f6c_dd1d);
    let mut names: Vec<Name> = Vec::new();
    for _ in 0..200_000 {
        if names.len() == 1000 {
            break;
        }
        let n = name(&format!("n{:x}.example.", gen.next()));
        let h = params.hash(&n);
        let inside = if lo < hi {
            lo.as_slice() < h.as_slice() && h.as_slice() < hi.as_slice()
        } else {
            lo.as_slice() < h.as_slice() || h.as_slice() < hi.as_slice()
        };
        if inside {
            names.push(n);
        }
    }
    assert_eq!(names.len(), 1000);
    for n in &names {
        let a = rt.block_on(r.resolve(n, RrType::A)).unwrap();
        assert_eq!(a.rcode(), Rcode::NXDOMAIN, "{n}");
        assert!(a.status().is_secure(), "{n}: {}", a.status());
        assert!(a.synthesised() && a.exchanges().is_empty(), "{n}");
        // The SOA of the synthesised answer: TTL at most the SOA MINIMUM (RFC 9077 §3).
        let soa = a.authority()[0].records();
        let minimum = Soa::parse(&soa[0].rdata).unwrap().minimum;
        assert!(soa[0].ttl <= minimum, "{n}");
    }
    assert_eq!(asked.load(Ordering::SeqCst), warm, "no query for the span");
    // The same through a service: warmed by one resolution, then each name answered at once
    // (most from the response kept for the proof) and as the resolver synthesises it.
    let service = Arc::new(RecursiveService::new(
        resolver(relay, served.anchors.clone()),
        ServiceConfig::default(),
    ));
    let (_, at_once) = rt.block_on(ask_service(&service, "nope.example.", RrType::A));
    assert!(!at_once);
    let warm = asked.load(Ordering::SeqCst);
    for n in &names {
        let qname = n.to_string();
        let (out, at_once) = rt.block_on(ask_service(&service, &qname, RrType::A));
        assert!(at_once, "{qname}");
        assert_synthesised_response(&service, &out, &qname, RrType::A);
    }
    assert_eq!(asked.load(Ordering::SeqCst), warm, "no query for the span");
}

#[test]
fn an_nsec3_opt_out_span_is_never_used() {
    let served = opt_out_zone();
    let rt = common::runtime();
    let (relay, asked) = counting_relay(&rt, served.addr);
    let r = resolver(relay, served.anchors.clone());
    let first = resolve(&rt, &r, "nope.example.", RrType::A);
    assert!(
        matches!(first.status(), Status::Insecure(_)),
        "{}",
        first.status()
    );
    // The same opt-out span covers the next closer name of these: each is asked for.
    let before = asked.load(Ordering::SeqCst);
    let mut gen = Names(0x1234_5678_9abc_def1);
    for i in 0..20 {
        let qname = format!("o{:x}.example.", gen.next());
        let a = resolve(&rt, &r, &qname, RrType::A);
        assert_eq!(a.rcode(), Rcode::NXDOMAIN, "{qname}");
        assert!(!a.synthesised(), "{qname}");
        assert!(!a.status().is_secure(), "{qname}: {}", a.status());
        assert_eq!(asked.load(Ordering::SeqCst), before + i + 1, "{qname}");
    }
}

#[test]
fn zero_bytes_turns_synthesis_off() {
    let served = serve_signed(signed_zone(
        &name("example."),
        ZONE,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec,
    ));
    let rt = common::runtime();
    let (relay, asked) = counting_relay(&rt, served.addr);
    let r = Resolver::new(
        {
            let mut v = Config::new(Mode::Forward(relay), served.anchors.clone());
            v.aggressive_nsec_bytes = 0;
            v
        },
        udp_client(Duration::from_secs(3)),
    );
    assert!(resolve(&rt, &r, "b.example.", RrType::A)
        .status()
        .is_secure());
    let before = asked.load(Ordering::SeqCst);
    let a = resolve(&rt, &r, "c.example.", RrType::A);
    assert!(a.status().is_secure() && !a.synthesised());
    assert_eq!(asked.load(Ordering::SeqCst), before + 1);
}

/// A zone with a wildcard TXT below `w.example.` beside one existing name there.
const WILDCARD_ZONE: &str = "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ NS ns\n\
                             ns A 192.0.2.1\n*.w TXT \"wild\"\nreal.w A 192.0.2.9\n\
                             z A 192.0.2.4\n";

/// RFC 8198 §5.3, for an NSEC and an NSEC3 zone: after one validated wildcard answer, other
/// names the cached proof shows absent get the wildcard's TXT expanded to them, Secure, with
/// no query; the name that exists (`real.w.example.`), a type the wildcard was not seen with,
/// and names outside the cached span still go to the authority.
#[test]
fn wildcard_answers_are_expanded_from_the_cache_without_a_query() {
    for denial in [Denial::Nsec, Denial::Nsec3(Nsec3Params::default())] {
        let nsec3 = matches!(denial, Denial::Nsec3(_));
        let served = serve_signed(signed_zone(
            &name("example."),
            WILDCARD_ZONE,
            &[Algorithm::EcdsaP256Sha256],
            denial,
        ));
        let rt = common::runtime();
        let (relay, asked) = counting_relay(&rt, served.addr);
        let r = resolver(relay, served.anchors.clone());
        let first = resolve(&rt, &r, "x.w.example.", RrType::TXT);
        assert_eq!(first.rcode(), Rcode::NOERROR);
        assert!(first.status().is_secure(), "{}", first.status());
        assert!(!first.synthesised());
        let warm = asked.load(Ordering::SeqCst);
        // Names in the span the expansion proof covers: after real.w. in canonical order
        // (NSEC real.w. → z.), or hashing into the NSEC3 span covering hash(x.w.example.).
        let params = Nsec3Params::default();
        let span = nsec3.then(|| covering_span(&first, &params.hash(&name("x.w.example."))));
        let mut gen = Names(0x853c_49e6_748f_ea9b);
        let mut names: Vec<Name> = Vec::new();
        for _ in 0..200_000 {
            if names.len() == 200 {
                break;
            }
            let n = name(&format!("x{:x}.w.example.", gen.next()));
            let inside = match &span {
                None => true,
                Some((lo, hi)) => {
                    let h = params.hash(&n);
                    if lo < hi {
                        lo.as_slice() < h.as_slice() && h.as_slice() < hi.as_slice()
                    } else {
                        lo.as_slice() < h.as_slice() || h.as_slice() < hi.as_slice()
                    }
                }
            };
            if inside {
                names.push(n);
            }
        }
        assert_eq!(names.len(), 200);
        for n in &names {
            let a = rt.block_on(r.resolve(n, RrType::TXT)).unwrap();
            assert_eq!(a.rcode(), Rcode::NOERROR, "{n}");
            assert!(a.status().is_secure(), "{n}: {}", a.status());
            assert!(a.synthesised() && a.exchanges().is_empty(), "{n}");
            let records = a.answers()[0].records();
            assert_eq!(records.len(), 1, "{n}");
            assert_eq!(records[0].owner, *n, "the wildcard expanded to {n}");
            assert_eq!(records[0].rdata, b"\x04wild", "{n}");
            assert!(records[0].ttl <= 300, "{n}");
            // The RRSIG is the wildcard's: its Labels field counts w.example. (RFC 4034 §3.1.3).
            let sigs = a.answers()[0].rrsig_records();
            assert_eq!(sigs[0].rdata[3], 2, "{n}");
        }
        assert_eq!(asked.load(Ordering::SeqCst), warm, "no query for the span");
        // The existing name is never answered from the wildcard.
        let real = resolve(&rt, &r, "real.w.example.", RrType::A);
        assert_eq!(real.rcode(), Rcode::NOERROR);
        assert!(!real.synthesised(), "real.w.example. exists");
        assert!(asked.load(Ordering::SeqCst) > warm);
        // A type the wildcard was not seen with is asked for.
        let before = asked.load(Ordering::SeqCst);
        let other = rt.block_on(r.resolve(&names[0], RrType::A)).unwrap();
        assert!(!other.synthesised(), "{}", names[0]);
        assert!(asked.load(Ordering::SeqCst) > before);
    }
}

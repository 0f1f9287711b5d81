//! Regressions for the conformance defects of issue 29, each against an authority that gives
//! the scenario's answers: a zone signed in the test (NSEC3 opt-out, which a zone description
//! cannot ask for) served by an in-process pqdns-server, or scripted UDP responders.

use std::time::Duration;

use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::validate::Status;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::wire::Rcode;
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver};
use pqdns_test_support::signed_zone;

mod common;
use common::{name, serve_signed, udp_client, Served};

/// example. signed with ECDSA P-256 and NSEC3 with Opt-Out (RFC 5155 §6): the unsigned
/// delegation `insecure.` is left out of the chain, the signed delegation `secure.` (it has a
/// DS) stays in it.
fn opt_out_zone() -> Served {
    let text = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                www A 192.0.2.2\n*.w TXT \"wild\"\n\
                insecure NS ns.insecure\nns.insecure A 192.0.2.3\n\
                secure NS ns.secure\nns.secure A 192.0.2.4\n\
                secure DS 1 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";
    let params = Nsec3Params {
        opt_out: true,
        ..Nsec3Params::default()
    };
    let zone = signed_zone(
        &name("example."),
        text,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec3(params),
    );
    serve_signed(zone)
}

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

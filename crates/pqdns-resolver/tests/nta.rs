//! Negative trust anchors (RFC 7646): a zone made Bogus for the resolver (its trust anchor's
//! digest no longer matches the zone's key, as after a botched key rollover) answers SERVFAIL
//! through the service; with a negative trust anchor at the zone (or above it) its data comes
//! back Insecure (NOERROR, no AD); once the anchor has expired the zone is validated, and
//! Bogus, again; an anchor elsewhere changes nothing. Added and removed at run time, an anchor
//! takes effect on the next resolution of the same resolver.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use pqdns_core::dnssec::validate::Status;
use pqdns_core::wire::{MessageView, Rcode, FLAG_AD};
use pqdns_core::RrType;
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{Config, Mode, NegativeTrustAnchors, Resolver, TrustAnchors};

use common::{name, resolve_in_service, serve_www_example, udp_client};

#[test]
fn a_negative_trust_anchor_makes_a_bogus_zone_insecure_until_it_expires() {
    let served = serve_www_example();
    let zone = name("example.");
    let mut wrong = TrustAnchors::default();
    for ds in served.anchors.ds_for(&zone).unwrap() {
        let mut ds = ds.clone();
        *ds.last_mut().unwrap() ^= 1;
        wrong.add_ds(zone.clone(), ds);
    }
    let now = pqdns_core::time::now();
    let resolver = |nta: &[(&str, u64)]| {
        let mut negative = NegativeTrustAnchors::new();
        for (domain, until) in nta {
            negative.add(name(domain), *until);
        }
        let mut config = Config::new(Mode::Forward(served.addr), wrong.clone());
        config.negative_trust_anchors = negative;
        config.now = Some(now);
        Resolver::new(config, udp_client(Duration::from_secs(3)))
    };
    let status = |r: &Resolver, qname: &str| {
        let a = served
            .rt
            .block_on(r.resolve(&name(qname), RrType::A))
            .unwrap();
        a.status().clone()
    };
    // Without: Bogus.
    assert!(status(&resolver(&[]), "www.example.").is_bogus());
    // An anchor in force at the zone, or at the root above it: Insecure, the data returned.
    for at in ["example.", "."] {
        let r = resolver(&[(at, now + 60)]);
        let a = served
            .rt
            .block_on(r.resolve(&name("www.example."), RrType::A))
            .unwrap();
        assert!(
            matches!(a.status(), Status::Insecure(_)),
            "{at}: {}",
            a.status()
        );
        assert!(
            a.status()
                .reason()
                .unwrap()
                .text
                .contains("negative trust anchor"),
            "{}",
            a.status()
        );
        assert_eq!(a.answers().len(), 1);
        assert!(r.nta_hits() >= 1);
        // A negative answer too.
        let nx = served
            .rt
            .block_on(r.resolve(&name("nope.example."), RrType::A))
            .unwrap();
        assert_eq!(nx.rcode(), Rcode::NXDOMAIN);
        assert!(
            matches!(nx.status(), Status::Insecure(_)),
            "{}",
            nx.status()
        );
    }
    // Expired (its end is now): validated again, Bogus.
    assert!(status(&resolver(&[("example.", now)]), "www.example.").is_bogus());
    // Elsewhere: no effect.
    assert!(status(&resolver(&[("example.com.", now + 60)]), "www.example.").is_bogus());

    // Through the service: NOERROR without AD (not SERVFAIL), counted.
    let service = Arc::new(RecursiveService::new(
        resolver(&[("example.", now + 60)]),
        ServiceConfig::default(),
    ));
    let out = served
        .rt
        .block_on(resolve_in_service(&service, "www.example.", RrType::A));
    let v = MessageView::parse(&out).unwrap();
    assert_eq!(
        (v.rcode(), v.header().has(FLAG_AD)),
        (Rcode::NOERROR, false)
    );
    assert!(service
        .render_metrics()
        .contains("pqdns_resolver_nta_hits_total 1\n"));

    // At run time, on one resolver: Bogus; with an anchor added, Insecure; removed, Bogus.
    let r = resolver(&[]);
    assert!(status(&r, "www.example.").is_bogus());
    r.add_negative_trust_anchor(name("example."), now + 60);
    assert_eq!(
        r.negative_trust_anchors(),
        vec![(name("example."), now + 60)]
    );
    let insecure = status(&r, "www.example.");
    assert!(matches!(insecure, Status::Insecure(_)), "{insecure}");
    assert!(r.remove_negative_trust_anchor(&name("example.")));
    assert!(!r.remove_negative_trust_anchor(&name("example.")));
    assert!(status(&r, "www.example.").is_bogus());
}

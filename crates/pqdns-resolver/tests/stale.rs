//! Serve-stale (RFC 8767, issue 29 must-show 2) end to end, without waiting for a TTL: the
//! service caches answers for 0 s (`max_ttl` 0, in the resolver's raw-response cache too), so
//! an answer is stale as soon as it is stored. Warm up against an in-process pqdns-server
//! (ECDSA-signed zone, validated from its DS: Secure), stop the server, ask again: the Secure
//! answer comes back stale (TTL 30, EDE 3, AD) at once, the resolution having failed; a
//! name never answered gets SERVFAIL; a Bogus answer (a service with a wrong trust anchor) is
//! never kept for serving stale.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::wire::{MessageView, Rcode, Section, FLAG_AD, OPTION_EDE};
use pqdns_core::RrType;
use pqdns_resolver::cache;
use pqdns_resolver::service::stale::STALE_ANSWER_TTL;
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{Config, Mode, Resolver, TrustAnchors};

use common::{resolve_in_service, runtime, serve, udp_client, ZoneSpec};

const RECORDS: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                       www A 192.0.2.2\n";

/// A validating service forwarding to `upstream`, caching nothing past its TTL-0 lifetime
/// except for serve-stale, giving up on an exchange after 200 ms.
fn service(upstream: SocketAddr, anchors: TrustAnchors) -> Arc<RecursiveService> {
    let mut config = Config::new(Mode::Forward(upstream), anchors);
    config.cache = cache::Limits::new(1 << 20, 0);
    let resolver = Resolver::new(config, udp_client(Duration::from_millis(200)));
    let mut service = ServiceConfig::default();
    service.cache.max_ttl = 0;
    Arc::new(RecursiveService::new(resolver, service))
}

/// `name` A with DO, over TCP from 127.0.0.1: the response (RCODE, answer TTLs, EDE
/// INFO-CODE, AD).
async fn ask(s: &Arc<RecursiveService>, name: &str) -> (Rcode, Vec<u32>, Option<u16>, bool) {
    let out = resolve_in_service(s, name, RrType::A).await;
    let v = MessageView::parse(&out).unwrap();
    let ttls = v.records(Section::Answer).map(|r| r.ttl()).collect();
    let ede = v
        .opt()
        .and_then(|o| o.option(OPTION_EDE))
        .map(|d| u16::from_be_bytes([d[0], d[1]]));
    (v.rcode(), ttls, ede, v.header().has(FLAG_AD))
}

#[test]
fn a_validated_answer_is_served_stale_once_the_authority_is_gone() {
    let served = serve(
        ZoneSpec {
            origin: "example.",
            records: RECORDS,
            algorithms: &["ECDSAP256SHA256"],
            denial: "nsec",
        },
        false,
        |_| {},
    );
    let rt = runtime();
    let s = service(served.addr, served.anchors.clone());
    // A second service whose trust anchor for the zone is wrong (its digest's last byte
    // flipped): every answer it gets is Bogus.
    let zone = "example.".parse().unwrap();
    let mut wrong = TrustAnchors::default();
    for ds in served.anchors.ds_for(&zone).unwrap() {
        let mut ds = ds.clone();
        *ds.last_mut().unwrap() ^= 1;
        wrong.add_ds(zone.clone(), ds);
    }
    let bogus = service(served.addr, wrong);

    let warm = rt.block_on(ask(&s, "www.example."));
    assert_eq!(
        warm,
        (Rcode::NOERROR, vec![0, 0], None, true),
        "Secure: A and RRSIG, TTL 0"
    );
    let (rcode, _, ede, _) = rt.block_on(ask(&bogus, "www.example."));
    assert_eq!(
        (rcode, ede),
        (Rcode::SERVFAIL, Some(6)),
        "Bogus: no DNSKEY matches the DS"
    );

    drop(served);
    for _ in 0..3 {
        let stale = rt.block_on(ask(&s, "www.example."));
        assert_eq!(
            stale,
            (Rcode::NOERROR, vec![STALE_ANSWER_TTL; 2], Some(3), true),
            "stale, with AD: the data was Secure"
        );
    }
    assert!(s
        .metrics()
        .render()
        .contains("pqdns_resolver_stale_answers_total 3\n"));
    let (rcode, _, ede, _) = rt.block_on(ask(&s, "never.example."));
    assert_eq!(
        (rcode, ede),
        (Rcode::SERVFAIL, Some(22)),
        "nothing to serve"
    );
    let (rcode, _, ede, _) = rt.block_on(ask(&bogus, "www.example."));
    assert_eq!(
        (rcode, ede),
        (Rcode::SERVFAIL, Some(22)),
        "the Bogus answer was not kept"
    );
}

//! MTL mode end to end (issues 14 and 34; draft-fregly-dnsop-slh-dsa-mtl-dnssec,
//! draft-kaizer-dnsop-ml-dsa-mtl-dnssec): pqdns-server serves zones signed with SLH-DSA-MTL 2025
//! (248 SHA2 with NSEC3, 249 SHAKE with NSEC) and every 2026 MTL mode (ML-DSA-MTL 129,
//! FL-DSA-MTL 128, SLH-DSA-MTL 130/131) over UDP, TCP, DoT, DoH and DoQ, and the resolver
//! validates them. The DNSKEY RRset carries a full signature, so
//! the ladder is learnt while the zone's keys are trusted and every other RRset validates from
//! its condensed signature with hashes only: no query asks for full signatures. After the zone is
//! re-signed (a new ladder), answers already held still validate, and the first condensed
//! signature of the new ladder makes the resolver ask once with EDNS option 65050.

use crate::common;

use std::time::Duration;

use common::{name, serve, ZoneSpec};
use pqdns_core::RrType;
use pqdns_resolver::{Answer, Client, Config, Mode, Resolver, TlsOptions, Transport};

const RECORDS: &str = "\
@    SOA  ns1 hostmaster 1 7200 3600 1209600 300
@    NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.80
mail A    192.0.2.25
ftp  CNAME www
";

fn full_fetches(answer: &Answer) -> usize {
    answer
        .exchanges()
        .iter()
        .filter(|e| e.full_signatures)
        .count()
}

#[test]
fn mtl_zones_validate_from_condensed_signatures_and_fetch_a_new_ladder_once() {
    for (alg, denial) in [
        ("SLH-DSA-MTL-SHA2-128s", "nsec3"),
        ("SLH-DSA-MTL-SHAKE-128s", "nsec"),
        // 2026 (draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02): the re-fetch carries the SigTags
        // of the ladders held, and the server sends full signatures only where they miss.
        ("ML-DSA-MTL-44", "nsec3"),
        ("ML-DSA-MTL-44", "nsec"),
        ("FL-DSA-MTL-512", "nsec3"),
        ("SLH-DSA-MTL-SHAKE-128s-2026", "nsec"),
        ("SLH-DSA-MTL-SHA2-128s-2026", "nsec3"),
    ] {
        let zone = ZoneSpec {
            origin: "mtl.test.",
            records: RECORDS,
            algorithms: &[alg],
            denial,
        };
        let served = serve(zone, true, |_| {});
        let ca = served.dir.path().join("keys/pqdns-server.crt");
        let resolver_for = |transport: Transport| {
            let addr = match transport {
                Transport::Dot => served.dot.unwrap(),
                Transport::Doh => served.doh.unwrap(),
                Transport::Doq => served.doq.unwrap(),
                _ => served.addr,
            };
            let mut tls = TlsOptions::default();
            tls.ca_files = vec![ca.clone()];
            let client = Client::new(transport, Duration::from_secs(5), tls).unwrap();
            Resolver::new(
                Config::new(Mode::Forward(addr), served.anchors.clone()),
                client,
            )
        };
        let resolve = |r: &Resolver, qname: &str, qtype: RrType| {
            let answer = served.rt.block_on(r.resolve(&name(qname), qtype)).unwrap();
            let what = format!("{alg} {qname} {qtype}: {}", answer.status());
            assert!(answer.status().is_secure(), "{what}");
            (answer, what)
        };
        for transport in [
            Transport::Udp,
            Transport::Tcp,
            Transport::Dot,
            Transport::Doh,
            Transport::Doq,
        ] {
            let r = resolver_for(transport);
            for (qname, qtype) in [
                ("www.mtl.test.", RrType::A),
                ("ftp.mtl.test.", RrType::A),
                ("nope.mtl.test.", RrType::A),
                ("www.mtl.test.", RrType::TXT),
            ] {
                let (answer, what) = resolve(&r, qname, qtype);
                assert_eq!(
                    full_fetches(&answer),
                    0,
                    "ladder from the DNSKEY RRSIG: {what}"
                );
            }
        }

        // Re-sign with one more record: a new ladder, served with the new condensed signatures.
        let r = resolver_for(Transport::Tcp);
        let (before, _) = resolve(&r, "www.mtl.test.", RrType::A);
        let file = served.dir.path().join("zone.toml");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(
            &file,
            text.replace("ftp  CNAME www\n", "ftp  CNAME www\nnew  A 192.0.2.99\n"),
        )
        .unwrap();
        served.reload();
        // Held (cached) answers keep validating against the old ladder.
        let (again, what) = resolve(&r, "www.mtl.test.", RrType::A);
        assert_eq!(full_fetches(&again), 0, "{what}");
        assert_eq!(again.answers(), before.answers(), "{what}");
        // The new record's condensed signature needs the new ladder: one round with 65050.
        let (fresh, what) = resolve(&r, "new.mtl.test.", RrType::A);
        assert!(full_fetches(&fresh) >= 1, "{what}");
        assert!(
            fresh.exchanges().iter().any(|e| !e.full_signatures),
            "the condensed try came first: {what}"
        );
        // Then the new ladder is held: condensed signatures suffice again.
        let (next, what) = resolve(&r, "mail.mtl.test.", RrType::A);
        assert_eq!(full_fetches(&next), 0, "{what}");
    }
}

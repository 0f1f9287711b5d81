//! QTYPEs that are not one RRset (issue 31 item 6): ANY is answered by one RRset of the name,
//! validated as any other (RFC 8482 §4.1), against an in-process signed pqdns-server zone and
//! a scripted authority that sends several RRsets; RRSIG by the RRSIG records the authority
//! sends, unvalidated (nothing signs a signature, RFC 4035 §2.2), without the validation
//! queries that would make it Bogus.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use pqdns_core::dnssec::validate::Status;
use pqdns_core::message::Message;
use pqdns_core::wire::{Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Record, RrType};
use pqdns_resolver::{Config, Mode, Resolver, Section, TrustAnchors};
use tokio::net::UdpSocket;

use common::{name, record, serve, udp_client, ZoneSpec};

const RECORDS: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                       www A 192.0.2.2\nwww TXT \"text\"\nwww MX 10 ns\nalias CNAME www\n";

fn resolver(addr: SocketAddr, anchors: TrustAnchors) -> Resolver {
    Resolver::new(
        Config::new(Mode::Forward(addr), anchors),
        udp_client(Duration::from_secs(3)),
    )
}

/// A UDP authority answering each query (AA) with `records(question)` in the answer section.
async fn scripted(records: fn(&Message) -> Vec<Record>) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    common::spawn_udp(socket, move |q, _| {
        let mut m = Message::parse(q).ok()?;
        m.flags |= FLAG_QR | FLAG_AA;
        m.edns = None;
        m.answers = records(&m);
        Some(m.to_wire())
    });
    addr
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// RRSIG RDATA covering `covered`, signed by `example.` (RFC 4034 §3.1), with a made-up
/// signature.
fn rrsig(covered: RrType) -> Vec<u8> {
    let mut rdata = covered.0.to_be_bytes().to_vec();
    rdata.extend([
        13, 2, 0, 0, 0, 60, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x12, 0x34,
    ]);
    rdata.extend_from_slice(name("example.").as_wire());
    rdata.extend([7u8; 64]);
    rdata
}

#[test]
fn any_is_answered_by_one_validated_rrset() {
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
    let r = resolver(served.addr, served.anchors.clone());
    let ask = |n: &str| {
        served
            .rt
            .block_on(r.resolve(&name(n), RrType::ANY))
            .unwrap()
    };
    // www has A, MX, TXT and NSEC: the server sends one RRset (the lowest type, A).
    // A CNAME is the name's own RRset: not followed.
    for (qname, rtype) in [
        ("www.example.", RrType::A),
        ("alias.example.", RrType::CNAME),
    ] {
        let a = ask(qname);
        assert!(a.status().is_secure(), "{qname}: {:?}", a.status());
        assert_eq!(a.rcode(), Rcode::NOERROR, "{qname}");
        let sets: Vec<_> = a
            .answers()
            .iter()
            .map(|s| (s.owner().clone(), s.rtype()))
            .collect();
        assert_eq!(sets, [(name(qname), rtype)], "{qname}");
        assert!(a.answers()[0].is_secure(), "{qname}");
    }
    // A name that does not exist: NXDOMAIN, proven.
    let nope = ask("nope.example.");
    assert!(nope.status().is_secure(), "{:?}", nope.status());
    assert_eq!(nope.rcode(), Rcode::NXDOMAIN);
    assert!(nope.answers().is_empty() && !nope.denials().is_empty());
}

#[test]
fn any_keeps_the_first_of_several_rrsets() {
    let rt = rt();
    let a = rt.block_on(async {
        // As BIND answers ANY: every RRset of the name.
        let addr = scripted(|m| {
            let owner = m.questions[0].qname.to_string();
            vec![
                record(&owner, RrType::A, 60, vec![192, 0, 2, 1]),
                record(&owner, RrType::TXT, 60, b"\x04text".to_vec()),
                record(&owner, RrType::A, 60, vec![192, 0, 2, 2]),
            ]
        })
        .await;
        resolver(addr, TrustAnchors::default())
            .resolve(&name("www.example."), RrType::ANY)
            .await
            .unwrap()
    });
    assert!(
        matches!(a.status(), Status::Indeterminate(_)),
        "{:?}",
        a.status()
    );
    assert_eq!(a.answers().len(), 1, "{:?}", a.answers());
    assert_eq!(a.answers()[0].rtype(), RrType::A);
    assert_eq!(a.answers()[0].records().len(), 2);
    assert!(
        a.dropped()
            .iter()
            .any(|d| d.section == Section::Answer && d.rtype == RrType::TXT),
        "{:?}",
        a.dropped()
    );
}

#[test]
fn rrsig_records_are_answered_unvalidated() {
    let rt = rt();
    let a = rt.block_on(async {
        let addr = scripted(|m| {
            let q = &m.questions[0];
            let owner = q.qname.to_string();
            if q.qtype != RrType::RRSIG {
                return Vec::new();
            }
            vec![
                record(&owner, RrType::RRSIG, 60, rrsig(RrType::A)),
                record(&owner, RrType::RRSIG, 30, rrsig(RrType::TXT)),
            ]
        })
        .await;
        // The zone is under a trust anchor: validating the signatures (or the absence of an
        // answer) would need its DNSKEYs, which this authority does not have (Bogus).
        let mut anchors = TrustAnchors::default();
        anchors.add_ds(name("example."), vec![0, 1, 13, 2, 0xaa]);
        resolver(addr, anchors)
            .resolve(&name("www.example."), RrType::RRSIG)
            .await
            .unwrap()
    });
    assert!(
        matches!(a.status(), Status::Indeterminate(_)),
        "{:?}",
        a.status()
    );
    assert_eq!(a.rcode(), Rcode::NOERROR);
    assert_eq!(a.answers().len(), 1, "{:?}", a.answers());
    let set = &a.answers()[0];
    assert_eq!(
        (set.owner(), set.rtype()),
        (&name("www.example."), RrType::RRSIG)
    );
    let records = set.records();
    assert_eq!(
        records.iter().map(|r| r.rdata.clone()).collect::<Vec<_>>(),
        [rrsig(RrType::A), rrsig(RrType::TXT)]
    );
    assert!(records.iter().all(|r| r.ttl == 30));
    // Nothing was looked up to validate them, and nothing was dropped.
    assert_eq!(a.exchanges().len(), 1);
    assert!(a.dropped().is_empty(), "{:?}", a.dropped());
}

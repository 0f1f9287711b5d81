//! Answer-engine tests on a zone signed in memory (ECDSA P-256, NSEC3 and NSEC). Responses are
//! decoded by a small independent decoder and checked record by record; the NSEC3 proofs are
//! checked against hashes computed here with the zone's parameters.

use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial as SignDenial;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::wire::rdata::Nsec3;
use pqdns_core::wire::{MessageView, OPTION_NSID};
use pqdns_core::{Name, RrType};
use pqdns_test_support::{with_option, LOCALHOST};

use super::*;
use crate::request::tests::build;

const ZONE: &str = "\
$ORIGIN example.
$TTL 3600
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
@        NS    ns2
@        MX    10 mail
ns1      A     192.0.2.1
ns1      AAAA  2001:db8::1
ns2      A     192.0.2.2
mail     A     192.0.2.3
www      A     192.0.2.4
alias    CNAME www
chain    CNAME alias
out      CNAME www.example.org.
dangling CNAME nothere
loop1    CNAME loop2
loop2    CNAME loop1
*.wild   TXT   \"wildcard\"
a.b.ent  A     192.0.2.5
redir    1800  DNAME target
host.target A  192.0.2.8
ext      DNAME example.org.
far      DNAME yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy.yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy.yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy.org.
sub      NS    ns.sub
ns.sub   A     192.0.2.6
sub      DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
insecure NS    ns.insecure
ns.insecure A  192.0.2.7
big      TXT   \"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
big      TXT   \"1123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
big      TXT   \"2123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
big      TXT   \"3123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
big      TXT   \"4123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
big      TXT   \"5123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"
";

fn n(s: &str) -> Name {
    s.parse().unwrap()
}

fn signed(denial: SignDenial) -> Catalog {
    crate::catalog::signed_for_tests(&n("example."), ZONE, &[Algorithm::EcdsaP256Sha256], denial)
}

fn nsec3_catalog() -> Catalog {
    signed(SignDenial::Nsec3(Nsec3Params::default()))
}

#[derive(Debug, Clone)]
struct Rr {
    owner: Name,
    rtype: RrType,
    ttl: u32,
    /// RDATA with embedded names decompressed.
    rdata: Vec<u8>,
}

#[derive(Debug)]
struct Msg {
    id: u16,
    flags: u16,
    rcode: Rcode,
    sections: [Vec<Rr>; 3],
    opt: Option<(u16, bool)>,
}

impl Msg {
    fn aa(&self) -> bool {
        self.flags & FLAG_AA != 0
    }
    fn tc(&self) -> bool {
        self.flags & FLAG_TC != 0
    }
    fn types(&self, section: usize) -> Vec<RrType> {
        self.sections[section].iter().map(|r| r.rtype).collect()
    }
    fn has(&self, section: usize, owner: &str, rtype: RrType) -> bool {
        self.sections[section]
            .iter()
            .any(|r| r.owner == n(owner) && r.rtype == rtype)
    }
    fn rrsig_covering(&self, section: usize, owner: &str, covered: RrType) -> bool {
        self.sections[section].iter().any(|r| {
            r.owner == n(owner)
                && r.rtype == RrType::RRSIG
                && r.rdata[..2] == covered.0.to_be_bytes()
        })
    }
}

/// Decodes a response with the message reader (independent of the writer), after checking
/// that hickory-proto reads it the same way.
fn decode(p: &[u8]) -> Msg {
    if let Err(e) = pqdns_test_support::second_opinion(p) {
        panic!("second opinion: {e}");
    }
    let view = MessageView::parse(p).expect("the response parses");
    let sections = [Section::Answer, Section::Authority, Section::Additional].map(|s| {
        view.records(s)
            .map(|r| {
                let r = r.to_record();
                Rr {
                    owner: r.owner,
                    rtype: r.rtype,
                    ttl: r.ttl,
                    rdata: r.rdata,
                }
            })
            .collect()
    });
    Msg {
        id: view.header().id,
        flags: view.header().flags,
        rcode: view.rcode(),
        sections,
        opt: view.opt().map(|o| (o.udp_payload(), o.dnssec_ok())),
    }
}

fn ask_with(
    cat: &Catalog,
    qname: &str,
    qtype: RrType,
    edns: Option<(u16, bool)>,
    transport: Transport,
) -> Msg {
    let mut out = Vec::new();
    let outcome = respond(
        cat,
        &build(qname, qtype, edns),
        transport,
        LOCALHOST,
        DEFAULT_UDP_PAYLOAD,
        &mut out,
        0,
    );
    assert_eq!(outcome.len, out.len());
    let msg = decode(&out);
    assert_eq!(msg.id, 0x1234);
    assert_eq!(msg.rcode, outcome.rcode);
    msg
}

fn ask(cat: &Catalog, qname: &str, qtype: RrType, dnssec: bool) -> Msg {
    ask_with(cat, qname, qtype, Some((4096, dnssec)), Transport::Udp)
}

/// Owner name of the NSEC3 for `name` (computed here, not by the server).
fn hashed(name: &str) -> Name {
    let h = Nsec3Params::default().hash(&n(name));
    let label = data_encoding::BASE32HEX_NOPAD
        .encode(&h)
        .to_ascii_lowercase();
    n(&format!("{label}.example."))
}

/// True if some NSEC3 in the authority section covers (strictly) the hash of `name`.
fn nsec3_covers(msg: &Msg, name: &str) -> bool {
    let target = Nsec3Params::default().hash(&n(name)).to_vec();
    msg.sections[1]
        .iter()
        .filter(|r| r.rtype == RrType::NSEC3)
        .any(|r| {
            let own = pqdns_core::dnssec::nsec3::owner_hash(&r.owner).unwrap();
            let next = Nsec3::parse(&r.rdata).unwrap().next_hashed.to_vec();
            if own < next {
                own < target && target < next
            } else {
                target > own || target < next
            }
        })
}

fn nsec3_bitmap(msg: &Msg, owner: &Name) -> Vec<RrType> {
    let r = msg.sections[1]
        .iter()
        .find(|r| r.rtype == RrType::NSEC3 && r.owner == *owner)
        .unwrap_or_else(|| panic!("no NSEC3 at {owner}"));
    Nsec3::parse(&r.rdata).unwrap().types.iter().collect()
}

#[test]
fn positive_answer_with_and_without_dnssec() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "WWW.example.", RrType::A, true);
    assert!(m.aa());
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert_eq!(m.types(0), [RrType::A, RrType::RRSIG]);
    assert_eq!(m.sections[0][0].owner.to_string(), "WWW.example.");
    assert_eq!(m.sections[0][0].rdata, [192, 0, 2, 4]);
    assert_eq!(m.opt, Some((DEFAULT_UDP_PAYLOAD, true)));

    let m = ask(&cat, "www.example.", RrType::A, false);
    assert_eq!(m.types(0), [RrType::A]);
    assert_eq!(m.opt, Some((DEFAULT_UDP_PAYLOAD, false)));
    let m = ask_with(&cat, "www.example.", RrType::A, None, Transport::Udp);
    assert_eq!(m.types(0), [RrType::A]);
    assert_eq!(m.opt, None);
}

#[test]
fn names_below_a_dname_are_redirected_with_a_synthesized_cname() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "HOST.redir.example.", RrType::A, true);
    assert!(m.aa());
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert_eq!(
        m.types(0),
        [
            RrType::DNAME,
            RrType::RRSIG,
            RrType::CNAME,
            RrType::A,
            RrType::RRSIG
        ]
    );
    let [dname, _, cname, a, _] = &m.sections[0][..] else {
        unreachable!()
    };
    assert_eq!(dname.owner, n("redir.example."));
    assert_eq!(Name::from_wire(&dname.rdata).unwrap(), n("target.example."));
    // RFC 6672 §3.1: the synthesized CNAME has the query's owner, the DNAME's TTL and no RRSIG.
    assert_eq!(cname.owner.to_string(), "HOST.redir.example.");
    assert_eq!(cname.ttl, 1800);
    assert_eq!(
        Name::from_wire(&cname.rdata).unwrap().to_string(),
        "HOST.target.example."
    );
    assert!(!m.rrsig_covering(0, "host.redir.example.", RrType::CNAME));
    assert_eq!(
        (a.owner.to_string().as_str(), &a.rdata[..]),
        ("HOST.target.example.", &[192, 0, 2, 8][..])
    );

    let m = ask(&cat, "host.redir.example.", RrType::A, false);
    assert_eq!(m.types(0), [RrType::DNAME, RrType::CNAME, RrType::A]);
    // QTYPE CNAME is answered by the synthesized CNAME itself.
    let m = ask(&cat, "host.redir.example.", RrType::CNAME, false);
    assert_eq!(m.types(0), [RrType::DNAME, RrType::CNAME]);
    // The DNAME owner itself is an ordinary name.
    let m = ask(&cat, "redir.example.", RrType::DNAME, false);
    assert_eq!(m.types(0), [RrType::DNAME]);
    let m = ask(&cat, "redir.example.", RrType::A, true);
    assert!(m.sections[0].is_empty() && m.rcode == Rcode::NOERROR);
    assert!(nsec3_bitmap(&m, &hashed("redir.example.")).contains(&RrType::DNAME));
    // A target outside the zone ends the answer at the CNAME.
    let m = ask(&cat, "a.b.ext.example.", RrType::A, false);
    assert_eq!(m.types(0), [RrType::DNAME, RrType::CNAME]);
    assert_eq!(
        Name::from_wire(&m.sections[0][1].rdata).unwrap(),
        n("a.b.example.org.")
    );
    // A target inside the zone that does not exist: NXDOMAIN for it, with the proof.
    let m = ask(&cat, "nope.redir.example.", RrType::A, true);
    assert_eq!(m.rcode, Rcode::NXDOMAIN);
    assert!(
        m.has(0, "redir.example.", RrType::DNAME) && m.has(0, "nope.redir.example.", RrType::CNAME)
    );
    assert!(nsec3_covers(&m, "nope.target.example."));
    // RFC 6672 §2.2: a substituted name longer than 255 bytes is YXDOMAIN.
    let x = "x".repeat(60);
    let m = ask(&cat, &format!("{x}.{x}.far.example."), RrType::A, false);
    assert_eq!(m.rcode, Rcode::YXDOMAIN);
    assert_eq!(m.types(0), [RrType::DNAME]);
}

#[test]
fn mx_answer_carries_target_addresses() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "example.", RrType::MX, false);
    assert_eq!(m.types(0), [RrType::MX]);
    assert!(m.has(2, "mail.example.", RrType::A));
    let m = ask(&cat, "example.", RrType::NS, false);
    assert_eq!(m.sections[0].len(), 2);
    assert!(m.has(2, "ns1.example.", RrType::AAAA) && m.has(2, "ns2.example.", RrType::A));
}

#[test]
fn nxdomain_with_nsec3_closest_encloser_proof() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "nope.b.ent.example.", RrType::A, true);
    assert_eq!(m.rcode, Rcode::NXDOMAIN);
    assert!(m.aa());
    assert!(m.sections[0].is_empty());
    let soa = m.sections[1]
        .iter()
        .find(|r| r.rtype == RrType::SOA)
        .unwrap();
    assert_eq!(soa.ttl, 300, "min(SOA TTL 3600, MINIMUM 300)");
    assert!(m.rrsig_covering(1, "example.", RrType::SOA));
    // Closest encloser is the empty non-terminal b.ent.example.: matched; next closer covered;
    // the wildcard at the closest encloser covered.
    let ce = hashed("b.ent.example.");
    assert!(
        m.has(1, &ce.to_string(), RrType::NSEC3),
        "closest encloser match"
    );
    assert!(nsec3_covers(&m, "nope.b.ent.example."));
    assert!(nsec3_covers(&m, "*.b.ent.example."));
    for r in m.sections[1].iter().filter(|r| r.rtype == RrType::NSEC3) {
        assert!(m.rrsig_covering(1, &r.owner.to_string(), RrType::NSEC3));
    }
    // Without DO: SOA only.
    let m = ask(&cat, "nope.b.ent.example.", RrType::A, false);
    assert_eq!(m.types(1), [RrType::SOA]);
}

#[test]
fn nodata_and_empty_non_terminal() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "www.example.", RrType::AAAA, true);
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert!(m.sections[0].is_empty());
    let bitmap = nsec3_bitmap(&m, &hashed("www.example."));
    assert!(bitmap.contains(&RrType::A) && !bitmap.contains(&RrType::AAAA));

    let m = ask(&cat, "ent.example.", RrType::A, true);
    assert_eq!(m.rcode, Rcode::NOERROR, "an empty non-terminal exists");
    assert!(nsec3_bitmap(&m, &hashed("ent.example.")).is_empty());
}

#[test]
fn wildcard_expansion_and_proof() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "x.y.wild.example.", RrType::TXT, true);
    assert!(m.aa());
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert_eq!(m.types(0), [RrType::TXT, RrType::RRSIG]);
    assert!(m.sections[0]
        .iter()
        .all(|r| r.owner == n("x.y.wild.example.")));
    // RRSIG labels field (byte 3) is the wildcard's label count minus the `*`: 2.
    assert_eq!(m.sections[0][1].rdata[3], 2);
    assert!(
        nsec3_covers(&m, "y.wild.example."),
        "no closer match than the wildcard"
    );

    let m = ask(&cat, "x.wild.example.", RrType::A, true);
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert!(m.sections[0].is_empty());
    assert!(m.has(1, &hashed("wild.example.").to_string(), RrType::NSEC3));
    assert!(m.has(1, &hashed("*.wild.example.").to_string(), RrType::NSEC3));
    assert!(nsec3_covers(&m, "x.wild.example."));
}

#[test]
fn cname_chains() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "chain.example.", RrType::A, false);
    assert_eq!(m.types(0), [RrType::CNAME, RrType::CNAME, RrType::A]);
    assert_eq!(m.sections[0][2].owner, n("www.example."));
    let m = ask(&cat, "chain.example.", RrType::CNAME, false);
    assert_eq!(m.types(0), [RrType::CNAME]);
    let m = ask(&cat, "out.example.", RrType::A, false);
    assert_eq!(m.types(0), [RrType::CNAME]);
    assert_eq!(m.rcode, Rcode::NOERROR);
    let m = ask(&cat, "dangling.example.", RrType::A, true);
    assert_eq!(m.types(0), [RrType::CNAME, RrType::RRSIG]);
    assert_eq!(
        m.rcode,
        Rcode::NXDOMAIN,
        "RFC 6604: the rcode is that of the last name"
    );
    let m = ask(&cat, "loop1.example.", RrType::A, false);
    assert_eq!(
        m.sections[0].len(),
        MAX_CNAME_HOPS + 1,
        "a loop stops after the hop limit"
    );
}

#[test]
fn referrals_with_glue_and_ds_or_proof() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "www.sub.example.", RrType::A, true);
    assert!(!m.aa());
    assert_eq!(m.rcode, Rcode::NOERROR);
    assert!(m.sections[0].is_empty());
    assert!(m.has(1, "sub.example.", RrType::NS));
    assert!(m.has(1, "sub.example.", RrType::DS));
    assert!(m.rrsig_covering(1, "sub.example.", RrType::DS));
    assert!(
        !m.rrsig_covering(1, "sub.example.", RrType::NS),
        "delegation NS is unsigned"
    );
    assert!(m.has(2, "ns.sub.example.", RrType::A));

    let m = ask(&cat, "sub.example.", RrType::A, false);
    assert_eq!(m.types(1), [RrType::NS], "no DS without DO");

    let m = ask(&cat, "insecure.example.", RrType::A, true);
    assert!(m.has(1, "insecure.example.", RrType::NS));
    let bitmap = nsec3_bitmap(&m, &hashed("insecure.example."));
    assert!(bitmap.contains(&RrType::NS) && !bitmap.contains(&RrType::DS));
    assert!(m.has(2, "ns.insecure.example.", RrType::A));

    // DS at the cut is answered authoritatively by the parent.
    let m = ask(&cat, "sub.example.", RrType::DS, true);
    assert!(m.aa());
    assert_eq!(m.types(0), [RrType::DS, RrType::RRSIG]);
    let m = ask(&cat, "insecure.example.", RrType::DS, true);
    assert!(m.aa() && m.sections[0].is_empty() && m.has(1, "example.", RrType::SOA));
}

#[test]
fn nsec_proofs() {
    let cat = signed(SignDenial::Nsec);
    let m = ask(&cat, "nope.example.", RrType::A, true);
    assert_eq!(m.rcode, Rcode::NXDOMAIN);
    // "mail" < "nope" < "ns1": mail.example. covers the name; example. covers *.example.
    assert!(m.has(1, "mail.example.", RrType::NSEC));
    assert!(m.has(1, "example.", RrType::NSEC));
    let m = ask(&cat, "www.example.", RrType::TXT, true);
    assert_eq!(
        m.types(1),
        [RrType::SOA, RrType::RRSIG, RrType::NSEC, RrType::RRSIG]
    );
    assert!(m.has(1, "www.example.", RrType::NSEC));
    let m = ask(&cat, "q.wild.example.", RrType::TXT, true);
    // "*" sorts before "q": the wildcard's own NSEC covers q.wild.example. (no closer match).
    assert_eq!(m.types(0), [RrType::TXT, RrType::RRSIG]);
    assert_eq!(m.types(1), [RrType::NSEC, RrType::RRSIG]);
    assert!(m.has(1, "*.wild.example.", RrType::NSEC));
    let m = ask(&cat, "insecure.example.", RrType::A, true);
    assert!(m.has(1, "insecure.example.", RrType::NSEC));
}

#[test]
fn refused_notimp_formerr_badvers() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "www.example.org.", RrType::A, false);
    assert_eq!(m.rcode, Rcode::REFUSED);
    assert!(!m.aa());
    let mut out = Vec::new();
    // STATUS, and NOTIFY and UPDATE too: `respond` has only the QUERY handler, so it must not
    // answer an UPDATE (or a NOTIFY) as if it were a query.
    for opcode in [2, 4, 5] {
        let mut packet = build("www.example.", RrType::A, Some((1232, false)));
        packet[2] = opcode << 3;
        let outcome = respond(&cat, &packet, Transport::Udp, LOCALHOST, 1232, &mut out, 0);
        assert_eq!(outcome.rcode, Rcode::NOTIMP, "opcode {opcode}");
        assert_eq!(decode(&out).rcode, Rcode::NOTIMP, "opcode {opcode}");
    }
    let mut packet = build("www.example.", RrType::A, Some((1232, false)));
    packet[5] = 0;
    let outcome = respond(&cat, &packet, Transport::Udp, LOCALHOST, 1232, &mut out, 0);
    assert_eq!(
        (outcome.rcode, decode(&out).rcode),
        (Rcode::FORMERR, Rcode::FORMERR)
    );
    let outcome = respond(
        &cat,
        &packet[..5],
        Transport::Udp,
        LOCALHOST,
        1232,
        &mut out,
        0,
    );
    assert_eq!(outcome.len, 0, "no header, no answer");
    let mut packet = build("www.example.", RrType::A, Some((1232, false)));
    let version_at = packet.len() - 5;
    packet[version_at] = 1;
    let outcome = respond(&cat, &packet, Transport::Udp, LOCALHOST, 1232, &mut out, 0);
    let m = decode(&out);
    assert_eq!((outcome.rcode, m.rcode), (Rcode::BADVERS, Rcode::BADVERS));
    assert!(m.opt.is_some() && m.sections[0].is_empty());
}

#[test]
fn truncation_drops_whole_rrsets() {
    let cat = nsec3_catalog();
    let m = ask_with(&cat, "big.example.", RrType::TXT, None, Transport::Udp);
    assert!(m.tc());
    assert!(
        m.sections[0].is_empty(),
        "the 6×101-byte TXT RRset does not fit 512 bytes"
    );
    let m = ask_with(
        &cat,
        "big.example.",
        RrType::TXT,
        Some((512, true)),
        Transport::Udp,
    );
    assert!(m.tc() && m.sections[0].is_empty());
    let m = ask_with(
        &cat,
        "big.example.",
        RrType::TXT,
        Some((1232, true)),
        Transport::Udp,
    );
    assert!(!m.tc());
    assert_eq!(m.sections[0].len(), 7);
    let m = ask_with(&cat, "big.example.", RrType::TXT, None, Transport::Tcp);
    assert!(!m.tc());
    assert_eq!(m.sections[0].len(), 6);
}

#[test]
fn any_gets_one_rrset() {
    let cat = nsec3_catalog();
    let m = ask(&cat, "example.", RrType::ANY, false);
    assert_eq!(m.types(0), [RrType::NS, RrType::NS]);
}

/// `packet` with its QCLASS set to `class`.
fn with_class(mut packet: Vec<u8>, qname: &str, class: Class) -> Vec<u8> {
    let at = 12 + n(qname).wire_len() + 2;
    packet[at..at + 2].copy_from_slice(&class.0.to_be_bytes());
    packet
}

/// The response to `packet` and the NSID option in it, if any.
fn respond_nsid(cat: &Catalog, packet: &[u8]) -> (Msg, Option<Vec<u8>>) {
    let mut out = Vec::new();
    respond(
        cat,
        packet,
        Transport::Udp,
        LOCALHOST,
        DEFAULT_UDP_PAYLOAD,
        &mut out,
        0,
    );
    let nsid = MessageView::parse(&out)
        .unwrap()
        .opt()
        .and_then(|o| o.option(OPTION_NSID).map(<[u8]>::to_vec));
    (decode(&out), nsid)
}

#[test]
fn nsid_and_chaos_identity_only_when_configured() {
    let plain = nsec3_catalog();
    let named = nsec3_catalog().with_identity(crate::identity::Identity {
        nsid: Some(b"ns1.fra".to_vec()),
        id: Some("ns1.fra".into()),
        version: Some("pqdns test".into()),
    });
    let www = build("www.example.", RrType::A, Some((1232, false)));
    let asking = with_option(www.clone(), OPTION_NSID, &[]);
    // Twice each: the second answer is a replay from the prepared answers, which must not
    // mix up queries with and without the option.
    for _ in 0..2 {
        assert_eq!(
            respond_nsid(&named, &asking).1.as_deref(),
            Some(&b"ns1.fra"[..])
        );
        assert_eq!(respond_nsid(&named, &www).1, None, "not asked");
        assert_eq!(respond_nsid(&plain, &asking).1, None, "not configured");
        assert_eq!(respond_nsid(&named, &asking).0.types(0), [RrType::A]);
    }
    for (qname, text) in [
        ("id.server.", "ns1.fra"),
        ("HOSTNAME.bind.", "ns1.fra"),
        ("version.bind.", "pqdns test"),
        ("version.server.", "pqdns test"),
    ] {
        let q = with_class(build(qname, RrType::TXT, None), qname, Class::CH);
        let (m, _) = respond_nsid(&named, &q);
        assert_eq!(m.rcode, Rcode::NOERROR, "{qname}");
        assert!(m.aa());
        assert_eq!(m.sections[0].len(), 1);
        let txt = &m.sections[0][0];
        assert_eq!(txt.rdata[0] as usize, text.len());
        assert_eq!(&txt.rdata[1..], text.as_bytes(), "{qname}");
        let (m, _) = respond_nsid(&plain, &q);
        assert_eq!(m.rcode, Rcode::REFUSED, "hidden by default: {qname}");
    }
    let q = with_class(
        build("authors.bind.", RrType::TXT, None),
        "authors.bind.",
        Class::CH,
    );
    assert_eq!(respond_nsid(&named, &q).0.rcode, Rcode::REFUSED);
    // Other classes than IN, ANY and CH are refused; ANY is answered from IN.
    let q = with_class(
        build("www.example.", RrType::A, None),
        "www.example.",
        Class(4),
    );
    assert_eq!(respond_nsid(&plain, &q).0.rcode, Rcode::REFUSED);
    let q = with_class(
        build("www.example.", RrType::A, None),
        "www.example.",
        Class::ANY,
    );
    let (m, _) = respond_nsid(&plain, &q);
    assert_eq!((m.rcode, m.types(0)), (Rcode::NOERROR, vec![RrType::A]));
}

/// The response to `packet` over a stream (no UDP size limit).
fn ask_stream(cat: &Catalog, packet: &[u8]) -> Msg {
    let mut out = Vec::new();
    respond(
        cat,
        packet,
        Transport::Tcp,
        LOCALHOST,
        DEFAULT_UDP_PAYLOAD,
        &mut out,
        0,
    );
    decode(&out)
}

#[test]
fn mtl_signatures_are_condensed_unless_option_65050_asks_for_full_ones() {
    use pqdns_core::dnssec::mtl::{MtlSignature, EDNS_FULL_SIGNATURES};
    use pqdns_core::dnssec::rrsig::Rrsig;
    let cat = crate::catalog::signed_for_tests(
        &n("example."),
        ZONE,
        &[Algorithm::MtlSlhDsaSha2_128s],
        SignDenial::Nsec,
    );
    // Full signatures are about 8 KB: over a stream, as a resolver gets them after TC.
    let ask = |packet: &[u8]| ask_stream(&cat, packet);
    let signature = |m: &Msg| {
        let sig = m.sections[0]
            .iter()
            .find(|r| r.rtype == RrType::RRSIG)
            .expect("an RRSIG");
        let field = Rrsig::parse(&sig.rdata).unwrap().signature.to_vec();
        MtlSignature::parse(&field).unwrap()
    };
    let plain = build("www.example.", RrType::A, Some((65535, true)));
    let asking = with_option(plain.clone(), EDNS_FULL_SIGNATURES, &[]);
    for _ in 0..2 {
        let condensed = signature(&ask(&plain));
        let full = signature(&ask(&asking));
        assert!(!condensed.is_full(), "condensed by default");
        assert!(full.is_full(), "full with option 65050");
        assert_eq!(
            full.path, condensed.path,
            "the same leaf, with the zone's signed ladder"
        );
        let ladder = &full.signed_ladder.as_ref().unwrap().0;
        assert!(ladder.rung_for(&full.path).is_some());
    }
    // The apex SOA and DNSKEY signatures are full anyway.
    let dnskey = build("example.", RrType::DNSKEY, Some((65535, true)));
    assert!(signature(&ask(&dnskey)).is_full());
}

/// 2026 (ML-DSA-MTL): option 65050 lists the SigTags of the ladders the validator holds; a
/// condensed signature goes out full unless its ladder is named, and a malformed option is
/// FORMERR (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
#[test]
fn ml_dsa_mtl_signatures_are_full_only_when_the_sigtag_misses() {
    use pqdns_core::dnssec::mtl::{full_signature_tag, Format, MtlSignature, SigTags, EDNS_SIGTAG};
    use pqdns_core::dnssec::rrsig::Rrsig;
    let cat = crate::catalog::signed_for_tests(
        &n("example."),
        ZONE,
        &[Algorithm::MlDsaMtl44],
        SignDenial::Nsec,
    );
    let ask = |packet: &[u8]| ask_stream(&cat, packet);
    let field = |m: &Msg| {
        let sig = m.sections[0]
            .iter()
            .find(|r| r.rtype == RrType::RRSIG)
            .expect("an RRSIG");
        Rrsig::parse(&sig.rdata).unwrap().signature.to_vec()
    };
    let is_full = |f: &[u8]| MtlSignature::parse_as(Format::V2026, f).unwrap().is_full();
    let dnskey = build("example.", RrType::DNSKEY, Some((65535, true)));
    let apex_full = field(&ask(&dnskey));
    assert!(is_full(&apex_full));
    let tag = full_signature_tag(&apex_full).unwrap();
    let plain = build("www.example.", RrType::A, Some((65535, true)));
    assert!(
        !is_full(&field(&ask(&plain))),
        "condensed without the option"
    );
    let no_tags = with_option(plain.clone(), EDNS_SIGTAG, &[]);
    assert!(is_full(&field(&ask(&no_tags))), "full: no ladder held");
    let other = SigTags::new([pqdns_core::dnssec::mtl::SigTag([7; 32])]).to_bytes();
    let miss = with_option(plain.clone(), EDNS_SIGTAG, &other);
    assert!(is_full(&field(&ask(&miss))), "full: another ladder held");
    let held = SigTags::new([pqdns_core::dnssec::mtl::SigTag([7; 32]), tag]).to_bytes();
    let hit = with_option(plain.clone(), EDNS_SIGTAG, &held);
    assert!(
        !is_full(&field(&ask(&hit))),
        "condensed: the ladder is held"
    );
    // The apex SOA and DNSKEY signatures are stored full; a validator that holds their ladder
    // gets them condensed (the same path), in answers and in a negative answer's authority.
    let path = |f: &[u8]| MtlSignature::parse_as(Format::V2026, f).unwrap().path;
    for qtype in [RrType::SOA, RrType::DNSKEY] {
        let q = build("example.", qtype, Some((65535, true)));
        let stored = field(&ask(&q));
        assert!(is_full(&stored), "{qtype}");
        let missed = field(&ask(&with_option(q.clone(), EDNS_SIGTAG, &other)));
        assert_eq!(missed, stored, "{qtype}: full while the ladder is not held");
        let condensed = field(&ask(&with_option(q, EDNS_SIGTAG, &held)));
        assert!(!is_full(&condensed), "{qtype}");
        assert_eq!(path(&condensed), path(&stored), "{qtype}");
    }
    let nx = build("nx.example.", RrType::A, Some((65535, true)));
    let soa_signature = |m: &Msg| {
        let sig = m.sections[1]
            .iter()
            .find(|r| {
                r.rtype == RrType::RRSIG
                    && Rrsig::parse(&r.rdata).unwrap().fields.type_covered == RrType::SOA
            })
            .expect("the SOA's RRSIG");
        Rrsig::parse(&sig.rdata).unwrap().signature.to_vec()
    };
    let (stored, held_nx) = (ask(&nx), ask(&with_option(nx, EDNS_SIGTAG, &held)));
    assert_eq!(held_nx.rcode, Rcode::NXDOMAIN);
    let (full_soa, condensed_soa) = (soa_signature(&stored), soa_signature(&held_nx));
    assert!(is_full(&full_soa) && !is_full(&condensed_soa));
    assert_eq!(path(&condensed_soa), path(&full_soa));
    assert!(
        condensed_soa.len() * 4 < full_soa.len(),
        "ML-DSA-44 ladder signature gone"
    );
    for bad in [1usize, 31, 33, 9 * 32] {
        let q = with_option(plain.clone(), EDNS_SIGTAG, &vec![0; bad]);
        assert_eq!(ask(&q).rcode, Rcode::FORMERR, "{bad} bytes");
    }
}

/// QTYPE RRSIG is answered with every RRSIG at the name (RFC 4035 §3.2.1 leaves it to the
/// server; BIND and NSD do this), with or without DO, and not as NODATA.
#[test]
fn rrsig_queries_get_the_signatures_at_the_name() {
    let cat = signed(SignDenial::Nsec);
    for dnssec in [false, true] {
        let m = ask(&cat, "www.example.", RrType::RRSIG, dnssec);
        assert_eq!(m.rcode, Rcode::NOERROR);
        let answer = &m.sections[0];
        assert!(answer
            .iter()
            .all(|r| r.rtype == RrType::RRSIG && r.owner == n("www.example.")));
        // The A RRset's and the NSEC RRset's signatures: what each covers is the first field.
        let mut covered: Vec<u16> = answer
            .iter()
            .map(|r| u16::from_be_bytes([r.rdata[0], r.rdata[1]]))
            .collect();
        covered.sort_unstable();
        assert_eq!(covered, [RrType::A.0, RrType::NSEC.0], "dnssec {dnssec}");
    }
    // A name that does not exist: NXDOMAIN, as for any type.
    let m = ask(&cat, "nothere.example.", RrType::RRSIG, true);
    assert_eq!(m.rcode, Rcode::NXDOMAIN);
}

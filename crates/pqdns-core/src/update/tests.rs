//! Known cases of RFC 2136 §2.4, §3.2, §3.4.

use super::*;
use crate::zonefile::ZoneFileReader;

const ZONE: &str = "@ 3600 SOA ns hm 10 7200 3600 1209600 300\n@ NS ns\n@ NS ns2\n\
                    ns A 192.0.2.1\nns2 A 192.0.2.2\nwww A 192.0.2.10\nwww A 192.0.2.11\n\
                    www TXT hello\nalias CNAME www\nsub NS ns.sub\nns.sub A 192.0.2.53\n";

fn origin() -> Name {
    "example.com.".parse().unwrap()
}

fn zone() -> Zone {
    let records = ZoneFileReader::new(Some(origin()), Some(300))
        .read_str(ZONE, "t")
        .unwrap();
    Zone::from_records(origin(), records).unwrap()
}

/// One record from presentation text (owner relative to example.com.), with `class` and `ttl`
/// set as an UPDATE carries them; `None` RDATA text: empty RDATA.
fn rr(owner: &str, rtype: RrType, class: Class, ttl: u32, rdata: Option<&str>) -> Record {
    let owner = Name::parse(owner, Some(&origin())).unwrap();
    let rdata = rdata.map_or_else(Vec::new, |text| {
        let line = format!("{owner} 0 IN {} {text}\n", rtype.mnemonic().unwrap());
        ZoneFileReader::new(Some(origin()), None)
            .read_str(&line, "rr")
            .unwrap()
            .remove(0)
            .rdata
    });
    Record {
        owner,
        rtype,
        class,
        ttl,
        rdata,
    }
}

fn update(prerequisites: Vec<Record>, updates: Vec<Record>) -> Update {
    Update {
        zone: origin(),
        prerequisites,
        updates,
    }
}

fn prereq(r: Record) -> Result<(), Rcode> {
    update(vec![r], Vec::new()).check_prerequisites(&zone())
}

/// A message with the given header count and sections, names uncompressed.
fn message(zones: &[(&str, RrType)], answer: &[Record], authority: &[Record]) -> Vec<u8> {
    let mut m = vec![
        0x12,
        0x34,
        0x28,
        0,
        0,
        zones.len() as u8,
        0,
        answer.len() as u8,
    ];
    m.extend([0, authority.len() as u8, 0, 0]);
    for (name, t) in zones {
        m.extend(name.parse::<Name>().unwrap().as_wire());
        m.extend(t.0.to_be_bytes());
        m.extend(1u16.to_be_bytes());
    }
    for r in answer.iter().chain(authority) {
        r.write_wire(&mut m);
    }
    m
}

#[test]
fn sections_are_read_with_empty_rdata() {
    // "NS RRset exists" (class ANY, RDLENGTH 0): a type whose RDATA is a name, empty.
    let prerequisites = vec![rr("sub", RrType::NS, Class::ANY, 0, None)];
    let updates = vec![
        rr("www", RrType::MX, Class::ANY, 0, None),
        rr("new", RrType::A, Class::IN, 300, Some("192.0.2.99")),
    ];
    let m = message(&[("example.com.", RrType::SOA)], &prerequisites, &updates);
    let view = MessageView::parse(&m).unwrap();
    let parsed = Update::from_view(&view).unwrap();
    assert_eq!(parsed, update(prerequisites, updates));
    // §3.1.1: exactly one zone, of type SOA.
    let two = message(
        &[("example.com.", RrType::SOA), ("example.org.", RrType::SOA)],
        &[],
        &[],
    );
    let not_soa = message(&[("example.com.", RrType::A)], &[], &[]);
    for m in [two, not_soa] {
        let view = MessageView::parse(&m).unwrap();
        assert_eq!(Update::from_view(&view), Err(Rcode::FORMERR));
    }
}

#[test]
fn prerequisites_give_the_rcodes_of_section_3_2() {
    let none = CLASS_NONE;
    // §2.4.1 RRset exists (value independent).
    assert_eq!(prereq(rr("www", RrType::A, Class::ANY, 0, None)), Ok(()));
    assert_eq!(
        prereq(rr("www", RrType::MX, Class::ANY, 0, None)),
        Err(Rcode::NXRRSET)
    );
    // §2.4.2 RRset exists (value dependent): the whole RRset, in any order.
    let www = |a| rr("www", RrType::A, Class::IN, 0, Some(a));
    let both = update(vec![www("192.0.2.11"), www("192.0.2.10")], Vec::new());
    assert_eq!(both.check_prerequisites(&zone()), Ok(()));
    assert_eq!(
        prereq(www("192.0.2.10")),
        Err(Rcode::NXRRSET),
        "a subset is not the RRset"
    );
    let more = update(
        vec![www("192.0.2.10"), www("192.0.2.11"), www("192.0.2.12")],
        Vec::new(),
    );
    assert_eq!(more.check_prerequisites(&zone()), Err(Rcode::NXRRSET));
    // §2.4.3 RRset does not exist.
    assert_eq!(prereq(rr("www", RrType::MX, none, 0, None)), Ok(()));
    assert_eq!(
        prereq(rr("www", RrType::TXT, none, 0, None)),
        Err(Rcode::YXRRSET)
    );
    // §2.4.4 name is in use; §2.4.5 name is not in use (an empty non-terminal is not).
    assert_eq!(
        prereq(rr("alias", RrType::ANY, Class::ANY, 0, None)),
        Ok(())
    );
    assert_eq!(
        prereq(rr("nope", RrType::ANY, Class::ANY, 0, None)),
        Err(Rcode::NXDOMAIN)
    );
    assert_eq!(prereq(rr("nope", RrType::ANY, none, 0, None)), Ok(()));
    assert_eq!(
        prereq(rr("www", RrType::ANY, none, 0, None)),
        Err(Rcode::YXDOMAIN)
    );
    // §3.2.1–§3.2.2: TTL not 0, RDATA with class ANY/NONE, another class: FORMERR; a name
    // outside the zone: NOTZONE.
    assert_eq!(
        prereq(rr("www", RrType::A, Class::ANY, 5, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        prereq(rr("www", RrType::A, Class::ANY, 0, Some("192.0.2.10"))),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        prereq(rr("www", RrType::A, Class::CH, 0, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        prereq(rr("www.example.org.", RrType::A, Class::ANY, 0, None)),
        Err(Rcode::NOTZONE)
    );
}

#[test]
fn prescan_gives_notzone_formerr_and_refuses_signer_records() {
    let scan = |r: Record| update(Vec::new(), vec![r]).prescan(&origin());
    assert_eq!(
        scan(rr(
            "a.example.org.",
            RrType::A,
            Class::IN,
            60,
            Some("192.0.2.1")
        )),
        Err(Rcode::NOTZONE)
    );
    // Adding a meta type, or malformed RDATA.
    assert_eq!(
        scan(rr("a", RrType::ANY, Class::IN, 60, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::A, Class::IN, 60, None)),
        Err(Rcode::FORMERR)
    );
    // Delete forms with a TTL or (class ANY) RDATA; AXFR as a type; another class.
    assert_eq!(
        scan(rr("a", RrType::A, Class::ANY, 60, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::A, Class::ANY, 0, Some("192.0.2.1"))),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::AXFR, Class::ANY, 0, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::A, CLASS_NONE, 60, Some("192.0.2.1"))),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::ANY, CLASS_NONE, 0, None)),
        Err(Rcode::FORMERR)
    );
    assert_eq!(
        scan(rr("a", RrType::A, Class::CH, 0, None)),
        Err(Rcode::FORMERR)
    );
    // Well-formed forms pass; records the signer manages are refused in any form.
    assert_eq!(
        scan(rr("a", RrType::A, Class::IN, 60, Some("192.0.2.1"))),
        Ok(())
    );
    assert_eq!(scan(rr("a", RrType::ANY, Class::ANY, 0, None)), Ok(()));
    assert_eq!(
        scan(rr("@", RrType::DNSKEY, Class::ANY, 0, None)),
        Err(Rcode::REFUSED)
    );
    assert_eq!(
        scan(rr("a", RrType::NSEC, Class::ANY, 0, None)),
        Err(Rcode::REFUSED)
    );
}

/// The zone's records as text lines, sorted.
fn lines(zone: &Zone) -> Vec<String> {
    zone.records().iter().map(|r| r.to_string()).collect()
}

fn applied(updates: Vec<Record>) -> (Zone, Applied) {
    let mut z = zone();
    let u = update(Vec::new(), updates);
    assert_eq!(u.prescan(&origin()), Ok(()));
    let a = u.apply(&mut z);
    (z, a)
}

#[test]
fn additions_and_the_rules_they_meet() {
    // A new name; a record already there changes nothing.
    let (z, a) = applied(vec![
        rr(
            "_acme-challenge",
            RrType::TXT,
            Class::IN,
            60,
            Some("\"token\""),
        ),
        rr("www", RrType::A, Class::IN, 300, Some("192.0.2.10")),
    ]);
    assert_eq!(
        a,
        Applied {
            changed: 1,
            ignored: 1
        }
    );
    // The same record with another TTL sets the RRset's TTL (RFC 2181 §5.2).
    let (z2, a2) = applied(vec![rr(
        "www",
        RrType::A,
        Class::IN,
        60,
        Some("192.0.2.10"),
    )]);
    let www: Name = "www.example.com.".parse().unwrap();
    assert_eq!(
        (
            a2.changed,
            z2.rrset(&www, RrType::A).map(|s| (s.ttl, s.rdatas.len()))
        ),
        (1, Some((60, 2)))
    );
    let acme = Name::parse("_acme-challenge", Some(&origin())).unwrap();
    assert_eq!(z.rrset(&acme, RrType::TXT).unwrap().ttl, 60);
    assert_eq!(
        z.rrset(&"www.example.com.".parse().unwrap(), RrType::A),
        zone().rrset(&"www.example.com.".parse().unwrap(), RrType::A)
    );
    // §3.4.2.2: CNAME beside other data is ignored, both ways; a CNAME replaces the CNAME.
    let (z, a) = applied(vec![
        rr("www", RrType::CNAME, Class::IN, 60, Some("ns")),
        rr("alias", RrType::A, Class::IN, 60, Some("192.0.2.7")),
        rr("alias", RrType::CNAME, Class::IN, 60, Some("ns2")),
    ]);
    assert_eq!(
        a,
        Applied {
            changed: 1,
            ignored: 2
        }
    );
    let alias = z
        .rrset(&"alias.example.com.".parse().unwrap(), RrType::CNAME)
        .unwrap();
    assert_eq!(
        alias.rdatas,
        vec![b"\x03ns2\x07example\x03com\x00".to_vec()]
    );
    // SOA: an older or equal serial is ignored, a newer one replaces the SOA; never below the
    // apex.
    let soa = |s: u32| format!("ns hm {s} 7200 3600 1209600 300");
    let (z, a) = applied(vec![
        rr("@", RrType::SOA, Class::IN, 3600, Some(&soa(10))),
        rr("@", RrType::SOA, Class::IN, 3600, Some(&soa(9))),
        rr("www", RrType::SOA, Class::IN, 3600, Some(&soa(99))),
    ]);
    assert_eq!((a.changed, z.soa_serial()), (0, 10));
    let (z, a) = applied(vec![rr("@", RrType::SOA, Class::IN, 3600, Some(&soa(11)))]);
    assert_eq!((a.changed, z.soa_serial()), (1, 11));
    assert_eq!(z.check_apex(), Ok(()));
}

#[test]
fn deletions_keep_the_apex_soa_and_ns() {
    // §3.4.2.3: an RRset; every RRset of a name; at the apex not SOA or NS.
    let (z, a) = applied(vec![
        rr("www", RrType::TXT, Class::ANY, 0, None),
        rr("alias", RrType::ANY, Class::ANY, 0, None),
        rr("@", RrType::ANY, Class::ANY, 0, None),
        rr("@", RrType::NS, Class::ANY, 0, None),
        rr("@", RrType::SOA, Class::ANY, 0, None),
        rr("nothing", RrType::A, Class::ANY, 0, None),
    ]);
    assert_eq!(
        a,
        Applied {
            changed: 2,
            ignored: 4
        }
    );
    let text = lines(&z).join("\n");
    assert!(!text.contains("TXT") && !text.contains("alias"), "{text}");
    assert_eq!(z.rrset(&origin(), RrType::NS).unwrap().rdatas.len(), 2);
    assert_eq!(z.check_apex(), Ok(()));
    assert!(
        !z.nodes
            .contains_key(&"alias.example.com.".parse::<Name>().unwrap()),
        "no empty node"
    );
    // §3.4.2.4: one RR, compared without case in names; never the SOA or the last apex NS.
    let (z, a) = applied(vec![
        rr("www", RrType::A, CLASS_NONE, 0, Some("192.0.2.10")),
        rr("www", RrType::A, CLASS_NONE, 0, Some("192.0.2.99")),
        rr("@", RrType::NS, CLASS_NONE, 0, Some("NS2.EXAMPLE.COM.")),
        rr("@", RrType::NS, CLASS_NONE, 0, Some("ns")),
        rr(
            "@",
            RrType::SOA,
            CLASS_NONE,
            0,
            Some("ns hm 10 7200 3600 1209600 300"),
        ),
    ]);
    assert_eq!(
        a,
        Applied {
            changed: 2,
            ignored: 3
        }
    );
    let www = z
        .rrset(&"www.example.com.".parse().unwrap(), RrType::A)
        .unwrap();
    assert_eq!(www.rdatas, vec![vec![192, 0, 2, 11]]);
    assert_eq!(z.rrset(&origin(), RrType::NS).unwrap().rdatas.len(), 1);
    assert_eq!(z.check_apex(), Ok(()));
    // Deleting the last record of an RRset removes it, and the empty node.
    let (z, _) = applied(vec![
        rr("www", RrType::A, CLASS_NONE, 0, Some("192.0.2.10")),
        rr("www", RrType::A, CLASS_NONE, 0, Some("192.0.2.11")),
        rr("www", RrType::TXT, CLASS_NONE, 0, Some("hello")),
    ]);
    assert!(!z
        .nodes
        .contains_key(&"www.example.com.".parse::<Name>().unwrap()));
}

#[test]
fn an_update_applied_in_order_adds_then_deletes() {
    // §3.4.2: records in order; adding then deleting the same record leaves the zone as it was.
    let txt = |class, ttl, data| rr("_acme-challenge", RrType::TXT, class, ttl, data);
    let (z, a) = applied(vec![
        txt(Class::IN, 60, Some("\"t\"")),
        txt(CLASS_NONE, 0, Some("\"t\"")),
    ]);
    assert_eq!(a.changed, 2);
    assert_eq!(z, zone());
}

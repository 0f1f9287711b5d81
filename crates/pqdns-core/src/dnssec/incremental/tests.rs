//! Known-answer style tests: after every change, the incrementally signed zone holds the same
//! records as a whole signing of the changed unsigned data (signature bytes aside), every
//! signature verifies, and the returned difference turns the zone before into the zone after.

use std::collections::BTreeMap;

use super::*;
use crate::dnssec::algorithm::Algorithm;
use crate::dnssec::keyfile::KeyRole;
use crate::dnssec::profile::Profile;
use crate::dnssec::provider::Provider;
use crate::dnssec::sign::sign_zone;
use crate::dnssec::verify::{verify_zone, VerifyOptions};
use crate::zonefile::ZoneFileReader;

const NOW: u64 = 1_800_000_000;
const TEXT: &str = "@ SOA ns hm 1 2 3 4 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n\
                    sub NS ns.sub\nns.sub A 192.0.2.3\nb.ent A 192.0.2.4\nz TXT last\n\
                    sec NS ns.sub\nsec DS 12345 13 2 \
                    0102030405060708091011121314151617181920212223242526272829303132\n";

fn origin() -> Name {
    "example.".parse().unwrap()
}

fn name(label: &str) -> Name {
    if label == "@" {
        return origin();
    }
    format!("{label}.example.").parse().unwrap()
}

fn unsigned(extra: &str) -> Zone {
    let records = ZoneFileReader::new(Some(origin()), Some(60))
        .read_str(&format!("{TEXT}{extra}"), "t")
        .unwrap();
    Zone::from_records(origin(), records).unwrap()
}

fn keys() -> Vec<ZoneKey> {
    [KeyRole::Ksk, KeyRole::Zsk]
        .into_iter()
        .map(|role| {
            ZoneKey::generate(
                &origin(),
                Algorithm::EcdsaP256Sha256,
                role,
                &Profile::default_profile(),
                &Provider::default_provider(),
                60,
            )
            .unwrap()
        })
        .collect()
}

fn policy(denial: Denial) -> SigningPolicy {
    SigningPolicy {
        inception: NOW - 3600,
        expiration: NOW + 14 * 86_400,
        denial,
        published_dnskeys: None,
    }
}

fn nsec3(opt_out: bool) -> Denial {
    Denial::Nsec3(Nsec3Params {
        iterations: 0,
        salt: Vec::new(),
        opt_out,
    })
}

/// Every RRset (NSEC3 ones flagged) with its TTL, its RDATAs and its RRSIGs without the
/// signature field, all sorted: what two signings of the same data agree on.
type Shape = BTreeMap<(bool, Name, RrType), (u32, Vec<Vec<u8>>, Vec<Vec<u8>>)>;

fn shape(zone: &Zone, with_signatures: bool) -> Shape {
    let header = 18 + zone.origin.as_wire().len();
    let one = |set: &RRset| {
        let mut data = set.rdatas.clone();
        data.sort();
        let mut sigs: Vec<Vec<u8>> = set
            .rrsigs
            .iter()
            .map(|s| {
                if with_signatures {
                    s.clone()
                } else {
                    s[..header].to_vec()
                }
            })
            .collect();
        sigs.sort();
        (set.ttl, data, sigs)
    };
    let mut out = Shape::new();
    for (n, node) in &zone.nodes {
        for (t, set) in node {
            out.insert((false, n.clone(), *t), one(set));
        }
    }
    for (n, set) in &zone.nsec3 {
        out.insert((true, n.clone(), RrType::NSEC3), one(set));
    }
    out
}

fn assert_verifies(zone: &Zone) {
    let report = verify_zone(
        zone,
        &Profile::default_profile(),
        &Provider::default_provider(),
        &VerifyOptions::at(NOW),
    );
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// Signs `unsigned` whole, applies `changes` incrementally to the result and to `unsigned`,
/// and checks the incremental result against a whole signing of the changed data, its
/// signatures, and its difference; returns the new signed zone and the change.
fn step(
    signed: &mut Zone,
    unsigned: &mut Zone,
    changes: &[RrsetChange],
    keys: &[ZoneKey],
    policy: &SigningPolicy,
) -> SignedChange {
    let before = signed.clone();
    let serial = unsigned.soa_serial() + 1;
    apply_to_unsigned(unsigned, changes);
    unsigned.set_soa_serial(serial);
    let mut expected = unsigned.clone();
    sign_zone(&mut expected, keys, policy, &|_, _| {}).unwrap();
    let change = resign_changes(signed, changes, serial, keys, policy, 0).unwrap();
    assert_eq!(
        shape(signed, false),
        shape(&expected, false),
        "after {changes:?}"
    );
    assert_verifies(signed);
    // The difference, applied to the zone before, is the zone after.
    let mut replayed = before;
    for r in std::iter::once(&change.old_soa).chain(&change.deleted) {
        assert!(replayed.remove(r), "deleted but absent: {r}");
    }
    for r in std::iter::once(&change.new_soa).chain(&change.added) {
        replayed.insert(r.clone()).unwrap();
    }
    assert_eq!(shape(&replayed, true), shape(signed, true), "{changes:?}");
    change
}

fn set(owner: &str, text: &str) -> RrsetChange {
    let records = ZoneFileReader::new(Some(origin()), Some(60))
        .read_str(text, "t")
        .unwrap();
    RrsetChange {
        owner: name(owner),
        rtype: records[0].rtype,
        new: Some((
            records[0].ttl,
            records.into_iter().map(|r| r.rdata).collect(),
        )),
    }
}

fn delete(owner: &str, rtype: RrType) -> RrsetChange {
    RrsetChange {
        owner: name(owner),
        rtype,
        new: None,
    }
}

/// The named cases, for NSEC, NSEC3 and NSEC3 with Opt-Out: a new name, a deleted name, a
/// record added to an RRset, an RRset deleted at a name that keeps others, a name three labels
/// deep (two new empty non-terminals) and its deletion, a new delegation with glue, a DS
/// added to and deleted from a delegation, a delegation removed (its glue becomes
/// authoritative), and a change at the apex.
#[test]
fn named_changes_equal_a_whole_signing() {
    let keys = keys();
    for denial in [Denial::Nsec, nsec3(false), nsec3(true)] {
        let policy = policy(denial.clone());
        let mut data = unsigned("mail A 192.0.2.9\nmail TXT \"x\"\n");
        let mut signed = data.clone();
        sign_zone(&mut signed, &keys, &policy, &|_, _| {}).unwrap();
        let cases: Vec<Vec<RrsetChange>> = vec![
            vec![set("new", "new 60 TXT \"added\"")],
            vec![delete("www", RrType::A)],
            vec![set("z", "z 60 TXT last\nz 60 TXT more")],
            vec![delete("mail", RrType::TXT)],
            vec![set("a.b.c", "a.b.c 60 A 192.0.2.10")],
            vec![set("x.b.ent", "x.b.ent 60 A 192.0.2.11")],
            vec![delete("b.ent", RrType::A)],
            vec![delete("a.b.c", RrType::A)],
            vec![
                set("dlg", "dlg 60 NS ns.dlg"),
                set("ns.dlg", "ns.dlg 60 A 192.0.2.12"),
            ],
            vec![set(
                "dlg",
                "dlg 60 DS 1 13 2 0102030405060708091011121314151617181920212223242526272829303132",
            )],
            vec![delete("dlg", RrType::DS)],
            vec![delete("sub", RrType::NS)],
            vec![
                set("@", "@ 60 TXT \"apex\""),
                set("www", "www 60 A 192.0.2.2"),
            ],
            vec![set("www", "www 120 A 192.0.2.2")],
            vec![delete("new", RrType::TXT), delete("z", RrType::TXT)],
        ];
        for changes in &cases {
            step(&mut signed, &mut data, changes, &keys, &policy);
        }
    }
}

/// A one-record change in a zone of 50 hosts makes four signatures: the new RRset, the SOA,
/// the new name's NSEC (NSEC3) record and the one before it; the rest is kept byte for byte.
#[test]
fn a_new_name_costs_four_signatures() {
    let keys = keys();
    let hosts: String = (0..50).map(|i| format!("h{i} A 192.0.2.{i}\n")).collect();
    for denial in [Denial::Nsec, nsec3(false)] {
        let policy = policy(denial);
        let mut data = unsigned(&hosts);
        let mut signed = data.clone();
        sign_zone(&mut signed, &keys, &policy, &|_, _| {}).unwrap();
        let old = shape(&signed, true);
        let change = step(
            &mut signed,
            &mut data,
            &[set("new", "new 60 TXT \"added\"")],
            &keys,
            &policy,
        );
        assert_eq!((change.signatures, change.denial_records), (4, 2));
        let new = shape(&signed, true);
        let changed = new.iter().filter(|(k, v)| old.get(k) != Some(v)).count();
        assert_eq!(changed, 4, "new TXT, SOA, two denial records");
    }
}

/// Changes it cannot make incrementally are refused before the zone changes: the DNSKEY RRset
/// of other keys, another denial kind, a new negative TTL, a signer record.
#[test]
fn what_needs_a_whole_signing_is_refused_untouched() {
    let keys = keys();
    let policy = policy(Denial::Nsec);
    let mut signed = unsigned("");
    sign_zone(&mut signed, &keys, &policy, &|_, _| {}).unwrap();
    let before = signed.clone();
    let www = [set("www", "www 60 A 192.0.2.99")];
    let other_keys = self::keys();
    let refusals = [
        resign_changes(&mut signed, &www, 2, &other_keys, &policy, 0),
        resign_changes(&mut signed, &www, 2, &keys, &self::policy(nsec3(false)), 0),
        resign_changes(
            &mut signed,
            &[set("@", "@ 60 SOA ns hm 1 2 3 4 30")],
            2,
            &keys,
            &policy,
            0,
        ),
        resign_changes(
            &mut signed,
            &[set("@", "@ 60 NSEC3PARAM 1 0 0 -")],
            2,
            &keys,
            &policy,
            0,
        ),
    ];
    for r in refusals {
        assert!(
            matches!(r, Err(IncrementalError::NotIncremental(_))),
            "{r:?}"
        );
    }
    assert_eq!(signed, before);
}

/// A property over random changes (seeded, so a failure repeats): 60 steps of one to three
/// RRset changes each, drawn from names at several depths (new empty non-terminals), with
/// delegations coming and going (glue turning authoritative and back) and DS records, for NSEC,
/// NSEC3 and NSEC3 with Opt-Out.
#[test]
fn random_changes_equal_a_whole_signing() {
    let keys = keys();
    let owners = [
        "@",
        "www",
        "new",
        "a.b.c",
        "b.c",
        "c",
        "ent",
        "b.ent",
        "x.b.ent",
        "sub",
        "ns.sub",
        "deep.ns.sub",
        "sec",
        "z",
        "m.n.o.p",
        "o.p",
        "*.w",
        "w",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for denial in [Denial::Nsec, nsec3(false), nsec3(true)] {
        let policy = policy(denial);
        let mut data = unsigned("");
        let mut signed = data.clone();
        sign_zone(&mut signed, &keys, &policy, &|_, _| {}).unwrap();
        for _ in 0..60 {
            let changes: Vec<RrsetChange> = (0..1 + next(3))
                .map(|_| {
                    let owner = owners[next(owners.len())];
                    let apex = owner == "@";
                    let kind = next(if apex { 2 } else { 4 });
                    let rtype = [RrType::A, RrType::TXT, RrType::NS, RrType::DS][kind];
                    if next(3) == 0 {
                        return delete(owner, rtype);
                    }
                    let rdata = match kind {
                        0 => format!("A 192.0.2.{}", next(4)),
                        1 => format!("TXT \"t{}\"", next(4)),
                        2 => "NS ns.sub.example.".to_string(),
                        _ => format!(
                            "DS {} 13 2 0102030405060708091011121314151617181920212223242526272829303132",
                            next(4)
                        ),
                    };
                    set(owner, &format!("{owner} {} {rdata}", 60 + 60 * next(2)))
                })
                .collect();
            step(&mut signed, &mut data, &changes, &keys, &policy);
        }
    }
}

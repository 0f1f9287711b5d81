//! Choosing the NSEC (RFC 4035 §3.1.3) or NSEC3 (RFC 5155 §7.2) records that prove a negative
//! or wildcard answer. Pure lookups in a signed zone; an unsigned zone yields no records.
//!
//! NSEC records are found as the name itself or its canonical predecessor (a `BTreeMap` range
//! query over the zone's names); NSEC3 records as the hashed name itself or the hashed
//! predecessor in the hash-ordered NSEC3 map, wrapping around to the last one.

use std::collections::BTreeMap;
use std::ops::Bound;

use pqdns_core::dnssec::nsec3::{next_closer, Nsec3Params};
use pqdns_core::zone::RRset;
use pqdns_core::{Name, RrType};

use crate::catalog::ServedZone;

/// One NSEC or NSEC3 RRset of a proof.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProofRecord<'z> {
    /// Owner name (as stored in the zone).
    pub owner: &'z Name,
    /// NSEC or NSEC3.
    pub rtype: RrType,
    /// The RRset with its RRSIGs.
    pub set: &'z RRset,
}

/// Up to three records proving a denial (RFC 5155 §7.2.2 needs three).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Proof<'z> {
    records: [Option<ProofRecord<'z>>; 3],
}

impl<'z> Proof<'z> {
    fn push(&mut self, record: Option<ProofRecord<'z>>) {
        let Some(record) = record else { return };
        let duplicate = self.iter().any(|r| std::ptr::eq(r.set, record.set));
        if let (false, Some(slot)) = (duplicate, self.records.iter_mut().find(|r| r.is_none())) {
            *slot = Some(record);
        }
    }

    /// The records, without duplicates.
    pub(crate) fn iter(&self) -> impl Iterator<Item = ProofRecord<'z>> + '_ {
        self.records.iter().flatten().copied()
    }
}

/// The situations that need a proof.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Denial<'a> {
    /// The name does not exist; `closest_encloser` is its longest existing ancestor.
    NxDomain {
        /// The query name (or the last name of a CNAME chain).
        qname: &'a Name,
        /// Closest encloser.
        closest_encloser: &'a Name,
    },
    /// The name exists (possibly as an empty non-terminal) but not the type; also DS at a
    /// delegation, and the "no DS" proof of an insecure referral (RFC 4035 §3.1.4, RFC 5155
    /// §7.2.3, §7.2.4, §7.2.7; with opt-out, by the closest encloser proof).
    NoData {
        /// The name.
        name: &'a Name,
    },
    /// The name matched a wildcard that lacks the type (RFC 5155 §7.2.5, RFC 4035 §3.1.3.4).
    WildcardNoData {
        /// The query name.
        qname: &'a Name,
        /// Closest encloser (the wildcard's parent).
        closest_encloser: &'a Name,
    },
    /// An answer synthesised from a wildcard: prove no closer match exists (RFC 5155 §7.2.6,
    /// RFC 4035 §3.1.3.3).
    WildcardAnswer {
        /// The query name.
        qname: &'a Name,
        /// Closest encloser.
        closest_encloser: &'a Name,
    },
}

/// The records that prove `denial` in `zone` (empty for an unsigned zone).
pub(crate) fn prove<'z>(zone: &'z ServedZone, denial: Denial<'_>) -> Proof<'z> {
    let mut proof = Proof::default();
    let wildcard = |ce: &Name| ce.prepend_label(b"*").ok();
    if let Some(params) = &zone.nsec3 {
        let matching = |n: &Name| nsec3_matching(zone, params, n);
        let covering = |n: &Name| nsec3_covering(zone, params, n);
        // RFC 5155 §7.2.1 closest encloser proof: the encloser matched, the next closer covered.
        let closest_encloser_proof = |proof: &mut Proof<'z>, qname: &Name, ce: &Name| {
            proof.push(matching(ce));
            proof.push(next_closer(qname, ce).and_then(|nc| covering(&nc)));
        };
        match denial {
            Denial::NxDomain {
                qname,
                closest_encloser,
            } => {
                closest_encloser_proof(&mut proof, qname, closest_encloser);
                proof.push(wildcard(closest_encloser).and_then(|w| covering(&w)));
            }
            Denial::NoData { name } => match matching(name) {
                Some(record) => proof.push(Some(record)),
                // RFC 5155 §7.2.4, §7.2.7: an unsigned delegation left out of an opt-out chain
                // has no NSEC3 of its own; the closest encloser proof stands for it (the NSEC3
                // covering the next closer name has Opt-Out).
                None => {
                    let mut ancestor = name.parent();
                    while let Some(a) = ancestor.filter(|a| a.is_subdomain_of(&zone.zone.origin)) {
                        if matching(&a).is_some() {
                            closest_encloser_proof(&mut proof, name, &a);
                            break;
                        }
                        ancestor = a.parent();
                    }
                }
            },
            Denial::WildcardNoData {
                qname,
                closest_encloser,
            } => {
                closest_encloser_proof(&mut proof, qname, closest_encloser);
                proof.push(wildcard(closest_encloser).and_then(|w| matching(&w)));
            }
            Denial::WildcardAnswer {
                qname,
                closest_encloser,
            } => proof.push(next_closer(qname, closest_encloser).and_then(|nc| covering(&nc))),
        }
    } else {
        let at_or_before = |n: &Name| nsec_at_or_before(zone, n);
        match denial {
            Denial::NxDomain {
                qname,
                closest_encloser,
            } => {
                proof.push(at_or_before(qname));
                proof.push(wildcard(closest_encloser).and_then(|w| at_or_before(&w)));
            }
            // For an empty non-terminal the NSEC before it proves that nothing owns it.
            Denial::NoData { name } => proof.push(at_or_before(name)),
            Denial::WildcardNoData {
                qname,
                closest_encloser,
            } => {
                proof.push(at_or_before(qname));
                proof.push(wildcard(closest_encloser).and_then(|w| at_or_before(&w)));
            }
            Denial::WildcardAnswer { qname, .. } => proof.push(at_or_before(qname)),
        }
    }
    proof
}

/// The NSEC owned by `name`, or by the closest name before it in canonical order.
fn nsec_at_or_before<'z>(zone: &'z ServedZone, name: &Name) -> Option<ProofRecord<'z>> {
    zone.zone
        .nodes
        .range::<Name, _>((Bound::Unbounded, Bound::Included(name)))
        .rev()
        .find_map(|(owner, node)| {
            let set = node.get(&RrType::NSEC).filter(|s| !s.rdatas.is_empty())?;
            Some(ProofRecord {
                owner,
                rtype: RrType::NSEC,
                set,
            })
        })
}

fn nsec3_record<'z>((owner, set): (&'z Name, &'z RRset)) -> ProofRecord<'z> {
    ProofRecord {
        owner,
        rtype: RrType::NSEC3,
        set,
    }
}

/// The NSEC3 whose owner is the hash of `name`.
fn nsec3_matching<'z>(
    zone: &'z ServedZone,
    params: &Nsec3Params,
    name: &Name,
) -> Option<ProofRecord<'z>> {
    let hashed = params.hashed_owner(name, &zone.zone.origin)?;
    zone.zone.nsec3.get_key_value(&hashed).map(nsec3_record)
}

/// The NSEC3 whose interval covers the hash of `name` (the last one covers the wrap-around).
fn nsec3_covering<'z>(
    zone: &'z ServedZone,
    params: &Nsec3Params,
    name: &Name,
) -> Option<ProofRecord<'z>> {
    let hashed = params.hashed_owner(name, &zone.zone.origin)?;
    let map: &BTreeMap<Name, RRset> = &zone.zone.nsec3;
    map.range::<Name, _>((Bound::Unbounded, Bound::Excluded(&hashed)))
        .next_back()
        .or_else(|| map.iter().next_back())
        .map(nsec3_record)
}

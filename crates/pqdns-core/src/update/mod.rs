//! Dynamic updates (RFC 2136): an UPDATE message's sections, the prerequisite check (§2.4,
//! §3.2), the prescan of the update section (§3.4.1) and its application to a zone's data
//! (§3.4.2). Pure: no I/O, no signing; the server authenticates the request (RFC 3007, TSIG
//! and [`policy`]), applies the update to the zone's unsigned data and re-signs.
//!
//! Choices within the RFC:
//! - Records the DNSSEC signer manages (DNSKEY, RRSIG, NSEC, NSEC3, NSEC3PARAM) in the update
//!   section make the whole update REFUSED: the signer makes them from its keys and policy.
//! - An addition the zone's content rules forbid (CNAME beside other data, RFC 2136
//!   §3.4.2.2; likewise two DNAMEs, data below a DNAME, an SOA below the apex) is ignored,
//!   as the RFC ignores a CNAME conflict; the outcome counts it.
//! - Adding a record to an existing RRset sets the RRset's TTL to the record's (RFC 2181 §5.2:
//!   one TTL per RRset).

pub mod policy;

use std::collections::BTreeMap;

use crate::name::Name;
use crate::rdata::{canonical_rdata, is_well_formed};
use crate::rr::{Class, Record, RrType};
use crate::serial::Serial;
use crate::wire::{MessageView, Rcode, Section};
use crate::zone::Zone;

/// CLASS NONE (RFC 2136 §1.2): "RRset does not exist" prerequisites and "delete an RR".
pub const CLASS_NONE: Class = Class(254);

/// The RR types the DNSSEC signer manages; an update may not touch them.
pub const SIGNER_TYPES: [RrType; 5] = [
    RrType::DNSKEY,
    RrType::RRSIG,
    RrType::NSEC,
    RrType::NSEC3,
    RrType::NSEC3PARAM,
];

/// An UPDATE message's sections (RFC 2136 §2): the zone, the prerequisites and the updates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The zone section's ZNAME.
    pub zone: Name,
    /// The prerequisite section (the message's answer section), in message order.
    pub prerequisites: Vec<Record>,
    /// The update section (the message's authority section), in message order.
    pub updates: Vec<Record>,
}

impl Update {
    /// Reads the sections of a parsed UPDATE message. The additional section (EDNS, TSIG) is
    /// not part of the update.
    ///
    /// # Errors
    /// FORMERR unless the zone section holds exactly one entry of type SOA (RFC 2136 §3.1.1);
    /// NOTAUTH for a class other than IN, the only class pqdns serves (§3.1.2).
    pub fn from_view(view: &MessageView<'_>) -> Result<Update, Rcode> {
        if view.counts()[0] != 1 {
            return Err(Rcode::FORMERR);
        }
        let zone = view.question().ok_or(Rcode::FORMERR)?;
        if zone.qtype != RrType::SOA {
            return Err(Rcode::FORMERR);
        }
        if zone.qclass != Class::IN {
            return Err(Rcode::NOTAUTH);
        }
        let section = |s| view.records(s).map(|r| r.to_record()).collect();
        Ok(Update {
            zone: zone.qname.to_name(),
            prerequisites: section(Section::Answer),
            updates: section(Section::Authority),
        })
    }

    /// Checks the prerequisites against `zone` (RFC 2136 §3.2.5), in order; the first that
    /// fails gives the RCODE.
    ///
    /// # Errors
    /// FORMERR (a TTL other than 0, RDATA where none belongs, another class), NOTZONE (a name
    /// outside the zone), NXDOMAIN, YXDOMAIN, NXRRSET or YXRRSET (§3.2.1–§3.2.4).
    pub fn check_prerequisites(&self, zone: &Zone) -> Result<(), Rcode> {
        // Value-dependent prerequisites, gathered into RRsets and compared whole (§3.2.3).
        let mut temp: BTreeMap<(Name, RrType), Vec<Vec<u8>>> = BTreeMap::new();
        for rr in &self.prerequisites {
            if rr.ttl != 0 {
                return Err(Rcode::FORMERR);
            }
            if !rr.owner.is_subdomain_of(&zone.origin) {
                return Err(Rcode::NOTZONE);
            }
            let node = zone.nodes.get(&rr.owner);
            let in_use = node.is_some_and(|n| n.values().any(|s| !s.rdatas.is_empty()));
            match rr.class {
                Class::ANY | CLASS_NONE if !rr.rdata.is_empty() => return Err(Rcode::FORMERR),
                Class::ANY if rr.rtype == RrType::ANY && !in_use => return Err(Rcode::NXDOMAIN),
                Class::ANY
                    if rr.rtype != RrType::ANY && zone.rrset(&rr.owner, rr.rtype).is_none() =>
                {
                    return Err(Rcode::NXRRSET)
                }
                CLASS_NONE if rr.rtype == RrType::ANY && in_use => return Err(Rcode::YXDOMAIN),
                CLASS_NONE
                    if rr.rtype != RrType::ANY && zone.rrset(&rr.owner, rr.rtype).is_some() =>
                {
                    return Err(Rcode::YXRRSET)
                }
                Class::ANY | CLASS_NONE => {}
                Class::IN => temp
                    .entry((rr.owner.clone(), rr.rtype))
                    .or_default()
                    .push(canonical_rdata(rr.rtype, &rr.rdata)),
                _ => return Err(Rcode::FORMERR),
            }
        }
        for ((owner, rtype), mut wanted) in temp {
            let mut have: Vec<Vec<u8>> = zone
                .rrset(&owner, rtype)
                .map(|s| s.rdatas.iter().map(|d| canonical_rdata(rtype, d)).collect())
                .unwrap_or_default();
            wanted.sort();
            wanted.dedup();
            have.sort();
            if have != wanted {
                return Err(Rcode::NXRRSET);
            }
        }
        Ok(())
    }

    /// The prescan of the update section (RFC 2136 §3.4.1.3), then pqdns' refusal of records
    /// the signer manages ([`SIGNER_TYPES`]).
    ///
    /// # Errors
    /// NOTZONE for a name outside `origin`, FORMERR for a record no update form allows (a meta
    /// type or malformed RDATA added, a TTL or RDATA where none belongs, another class), REFUSED for a DNSSEC
    /// record the signer manages.
    pub fn prescan(&self, origin: &Name) -> Result<(), Rcode> {
        for rr in &self.updates {
            if !rr.owner.is_subdomain_of(origin) {
                return Err(Rcode::NOTZONE);
            }
            let meta = is_meta(rr.rtype);
            let ok = match rr.class {
                Class::IN => !meta && is_well_formed(rr.rtype, &rr.rdata),
                Class::ANY => {
                    rr.ttl == 0 && rr.rdata.is_empty() && (rr.rtype == RrType::ANY || !meta)
                }
                CLASS_NONE => rr.ttl == 0 && !meta,
                _ => false,
            };
            if !ok {
                return Err(Rcode::FORMERR);
            }
        }
        if self
            .updates
            .iter()
            .any(|rr| SIGNER_TYPES.contains(&rr.rtype))
        {
            return Err(Rcode::REFUSED);
        }
        Ok(())
    }

    /// Applies the update section to `zone` (the zone's unsigned data) in order (RFC 2136
    /// §3.4.2). Call [`Update::prescan`] first: records it refuses are skipped here.
    pub fn apply(&self, zone: &mut Zone) -> Applied {
        let mut applied = Applied::default();
        for rr in &self.updates {
            let changed = match rr.class {
                Class::IN => add(zone, rr),
                Class::ANY if rr.rtype == RrType::ANY => delete_name(zone, &rr.owner),
                Class::ANY => delete_rrset(zone, &rr.owner, rr.rtype),
                CLASS_NONE => delete_rr(zone, rr),
                _ => false,
            };
            if changed {
                applied.changed += 1;
            } else {
                applied.ignored += 1;
            }
        }
        zone.nodes.retain(|_, node| {
            node.retain(|_, set| !set.rdatas.is_empty());
            !node.is_empty()
        });
        applied
    }
}

/// What [`Update::apply`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Update records that changed the zone.
    pub changed: usize,
    /// Update records that changed nothing: already so, or ignored by RFC 2136 §3.4.2 (an SOA
    /// with an older serial, a CNAME conflict, deleting the apex SOA or its last NS, ...).
    pub ignored: usize,
}

/// QTYPE-only and other meta types that are never data (RFC 6895 §3.1: 128–255), and OPT.
fn is_meta(rtype: RrType) -> bool {
    (128..=255).contains(&rtype.0) || rtype == RrType::OPT
}

/// §3.4.2.2: adds `rr`; an SOA only at the apex with a newer serial, replacing the SOA; a
/// CNAME replaces the CNAME.
fn add(zone: &mut Zone, rr: &Record) -> bool {
    let apex = rr.owner == zone.origin;
    if rr.rtype == RrType::SOA {
        let newer = crate::wire::rdata::Soa::parse(&rr.rdata)
            .is_some_and(|s| Serial(s.serial).is_newer_than(Serial(zone.soa_serial())));
        if !apex || !newer {
            return false;
        }
    }
    // Only this node can change: kept to restore when the zone's rules refuse the record.
    let before = zone.nodes.get(&rr.owner).cloned();
    if let Some(node) = zone.nodes.get_mut(&rr.owner) {
        if matches!(rr.rtype, RrType::SOA | RrType::CNAME) {
            node.remove(&rr.rtype);
        }
        if let Some(set) = node.get_mut(&rr.rtype) {
            let canonical = canonical_rdata(rr.rtype, &rr.rdata);
            set.rdatas
                .retain(|d| canonical_rdata(rr.rtype, d) != canonical);
        }
    }
    let mut record = rr.clone();
    record.class = Class::IN;
    if zone.insert_checked(record).is_err() {
        restore(zone, &rr.owner, before);
        return false;
    }
    if let Some(set) = zone
        .nodes
        .get_mut(&rr.owner)
        .and_then(|n| n.get_mut(&rr.rtype))
    {
        set.ttl = rr.ttl;
        // Same order as before for an RDATA that was there: re-adding changes nothing.
        if let Some(old) = before.as_ref().and_then(|n| n.get(&rr.rtype)) {
            if old.rdatas.len() == set.rdatas.len() && old.ttl == set.ttl {
                let same = old.rdatas.iter().all(|d| set.rdatas.contains(d));
                if same {
                    set.rdatas.clone_from(&old.rdatas);
                }
            }
        }
    }
    zone.nodes.get(&rr.owner) != before.as_ref()
}

/// Puts back the node `owner` had (none: removes it).
fn restore(zone: &mut Zone, owner: &Name, node: Option<crate::zone::Node>) {
    match node {
        Some(node) => {
            zone.nodes.insert(owner.clone(), node);
        }
        None => {
            zone.nodes.remove(owner);
        }
    }
}

/// §3.4.2.3 with type ANY: every RRset at `owner`; at the apex all but SOA and NS.
fn delete_name(zone: &mut Zone, owner: &Name) -> bool {
    let apex = *owner == zone.origin;
    let Some(node) = zone.nodes.get_mut(owner) else {
        return false;
    };
    let before = node.len();
    node.retain(|t, s| s.rdatas.is_empty() || (apex && matches!(*t, RrType::SOA | RrType::NS)));
    node.len() != before
}

/// §3.4.2.3: the RRset (`owner`, `rtype`), never the apex SOA or NS.
fn delete_rrset(zone: &mut Zone, owner: &Name, rtype: RrType) -> bool {
    if *owner == zone.origin && matches!(rtype, RrType::SOA | RrType::NS) {
        return false;
    }
    zone.nodes
        .get_mut(owner)
        .and_then(|n| n.remove(&rtype))
        .is_some_and(|s| !s.rdatas.is_empty())
}

/// §3.4.2.4: the record `rr` (RDATA compared in canonical form), never an SOA nor the apex's
/// last NS.
fn delete_rr(zone: &mut Zone, rr: &Record) -> bool {
    let apex = rr.owner == zone.origin;
    if rr.rtype == RrType::SOA {
        return false;
    }
    let Some(set) = zone
        .nodes
        .get_mut(&rr.owner)
        .and_then(|n| n.get_mut(&rr.rtype))
    else {
        return false;
    };
    let canonical = canonical_rdata(rr.rtype, &rr.rdata);
    let Some(at) = set
        .rdatas
        .iter()
        .position(|d| canonical_rdata(rr.rtype, d) == canonical)
    else {
        return false;
    };
    if apex && rr.rtype == RrType::NS && set.rdatas.len() == 1 {
        return false;
    }
    set.rdatas.remove(at);
    true
}

#[cfg(test)]
mod tests;

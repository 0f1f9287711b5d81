//! An in-memory zone: RRsets grouped by owner name in canonical order, with their RRSIGs, and
//! the authority of each name (apex, authoritative, delegation point, glue) per RFC 1034 §4.2.1
//! and RFC 4035 §2.2.
//!
//! NSEC3 records (RFC 5155) live in their own map, because their hashed owner names are not
//! part of the name tree that lookups and denial proofs walk.

use std::collections::BTreeMap;

use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::wire::rdata::Soa;

/// One RRset: the records of one (owner, type), and the RRSIGs covering it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RRset {
    /// TTL in seconds (the lowest given, RFC 2181 §5.2).
    pub ttl: u32,
    /// RDATA of each record, uncompressed wire format, duplicates removed.
    pub rdatas: Vec<Vec<u8>>,
    /// RDATA of the RRSIG records covering this RRset.
    pub rrsigs: Vec<Vec<u8>>,
    /// TTL of the RRSIG records, in seconds.
    pub rrsig_ttl: u32,
}

impl RRset {
    /// For a SOA RRset, the TTL of negative answers and NSEC/NSEC3 records: min(SOA TTL, SOA
    /// MINIMUM) in seconds (RFC 2308 §5, RFC 9077 §3); 0 without a well-formed SOA record.
    /// [`Zone::negative_ttl`] for a zone's own, for a caller that holds its SOA RRset already.
    pub fn negative_ttl(&self) -> u32 {
        let minimum = self.rdatas.first().and_then(|r| Soa::parse(r));
        self.ttl.min(minimum.map_or(0, |s| s.minimum))
    }
}

/// All RRsets at one owner name, by type. RRSIG is never a key: signatures sit in their RRset.
pub type Node = BTreeMap<RrType, RRset>;

/// True if `node` has an RRset of `rtype` with data.
fn owns(node: &Node, rtype: RrType) -> bool {
    node.get(&rtype).is_some_and(|s| !s.rdatas.is_empty())
}

/// Where a name stands in the zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authority {
    /// The zone apex.
    Apex,
    /// Authoritative data inside the zone.
    Authoritative,
    /// A delegation point: NS (and DS) below the apex; only DS and NSEC here are authoritative.
    Delegation,
    /// Below a delegation point: glue or occluded data, never signed (RFC 4035 §2.2).
    Glue,
}

/// Why records could not form a zone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZoneError {
    /// A record owner lies outside the zone.
    #[error("{owner} {rtype} is outside zone {origin}")]
    OutOfZone {
        /// The zone origin.
        origin: Name,
        /// The record owner.
        owner: Name,
        /// Its type.
        rtype: RrType,
    },
    /// No SOA, or more than one, at the apex.
    #[error("zone {0} needs exactly one SOA record at its apex")]
    Soa(Name),
    /// A class other than IN.
    #[error("{owner}: class {class} is not supported (only IN)")]
    Class {
        /// The record owner.
        owner: Name,
        /// Its class.
        class: Class,
    },
    /// CNAME beside other data (RFC 1034 §3.6.2, RFC 2181 §10.1; RFC 4035 §2.5 allows RRSIG,
    /// NSEC and NSEC3 beside it).
    #[error("{0}: CNAME and other data at the same name (RFC 1034 §3.6.2)")]
    CnameAndOtherData(Name),
    /// More than one CNAME record at one name (RFC 2181 §10.1).
    #[error("{0}: more than one CNAME record at the same name (RFC 2181 §10.1)")]
    MultipleCname(Name),
    /// An SOA record below the apex (RFC 1035 §5.2: exactly one SOA, at the top of the zone).
    #[error("{owner}: SOA record below the apex of zone {origin}")]
    SoaNotAtApex {
        /// The zone origin.
        origin: Name,
        /// The SOA owner.
        owner: Name,
    },
    /// More than one DNAME record at one name (RFC 6672 §2.4).
    #[error("{0}: more than one DNAME record at the same name (RFC 6672 §2.4)")]
    MultipleDname(Name),
    /// Data below a DNAME (RFC 6672 §2.4: such names would be occluded; pqdns refuses the
    /// zone, which the RFC allows, rather than silently hiding the data).
    #[error("{owner} {rtype} is below the DNAME at {dname} (RFC 6672 §2.4: occluded)")]
    BelowDname {
        /// Owner of the DNAME.
        dname: Name,
        /// The occluded record's owner.
        owner: Name,
        /// The occluded record's type.
        rtype: RrType,
    },
}

/// A zone: origin, nodes in canonical order, and NSEC3 nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// The apex name.
    pub origin: Name,
    /// RRsets by owner, canonical order.
    pub nodes: BTreeMap<Name, Node>,
    /// NSEC3 RRsets (with their RRSIGs) by hashed owner name.
    pub nsec3: BTreeMap<Name, RRset>,
}

impl Zone {
    /// An empty zone rooted at `origin`; fill it with [`Zone::insert_checked`] and finish with
    /// [`Zone::check_apex`].
    pub fn new(origin: Name) -> Zone {
        Zone {
            origin,
            nodes: BTreeMap::new(),
            nsec3: BTreeMap::new(),
        }
    }

    /// Groups records into a zone rooted at `origin`, with the checks of
    /// [`Zone::insert_checked`] and [`Zone::check_apex`].
    ///
    /// # Errors
    /// The first [`ZoneError`], in record order.
    pub fn from_records(origin: Name, records: Vec<Record>) -> Result<Zone, ZoneError> {
        let mut zone = Zone::new(origin);
        for r in records {
            zone.insert_checked(r)?;
        }
        zone.check_apex()?;
        Ok(zone)
    }

    /// Adds one record of a zone being loaded, refusing what a zone must not hold: an SOA
    /// other than at the apex or a second SOA, CNAME beside other data or two CNAMEs (RRSIG,
    /// NSEC and NSEC3 may sit beside a CNAME, RFC 4035 §2.5), two DNAMEs at one name, and any
    /// data below a DNAME (RFC 6672 §2.4). Each rule is checked against the records already
    /// added, so the error names the record that broke it (for a file: the later line).
    ///
    /// # Errors
    /// [`ZoneError`] for the rule broken, or as [`Zone::insert`].
    pub fn insert_checked(&mut self, r: Record) -> Result<(), ZoneError> {
        self.check_record(&r)?;
        self.insert(r)
    }

    fn check_record(&self, r: &Record) -> Result<(), ZoneError> {
        if !r.owner.is_subdomain_of(&self.origin) {
            // `insert` reports it.
            return Ok(());
        }
        let rtype = r.rtype;
        // NSEC3 owners are hashes, not names in the tree a DNAME redirects (RFC 5155 §7.1).
        let hashed = rtype == RrType::NSEC3 || r.covered_type() == Some(RrType::NSEC3);
        if let Some(dname) = self.dname_above(&r.owner).filter(|_| !hashed) {
            return Err(ZoneError::BelowDname {
                dname,
                owner: r.owner.clone(),
                rtype,
            });
        }
        let node = self.nodes.get(&r.owner);
        let set = |t: RrType| {
            node.and_then(|n| n.get(&t))
                .filter(|s| !s.rdatas.is_empty())
        };
        // A second, different record of a singleton type.
        let other_than = |t: RrType| set(t).is_some_and(|s| s.rdatas.iter().any(|d| *d != r.rdata));
        match rtype {
            RrType::SOA if r.owner != self.origin => {
                return Err(ZoneError::SoaNotAtApex {
                    origin: self.origin.clone(),
                    owner: r.owner.clone(),
                })
            }
            RrType::SOA if other_than(RrType::SOA) => {
                return Err(ZoneError::Soa(self.origin.clone()))
            }
            RrType::CNAME if other_than(RrType::CNAME) => {
                return Err(ZoneError::MultipleCname(r.owner.clone()))
            }
            RrType::DNAME if other_than(RrType::DNAME) => {
                return Err(ZoneError::MultipleDname(r.owner.clone()))
            }
            RrType::DNAME => {
                if let Some((below, node)) = self.first_node_below(&r.owner) {
                    let rtype = node.keys().next().copied().unwrap_or(RrType::DNAME);
                    return Err(ZoneError::BelowDname {
                        dname: r.owner.clone(),
                        owner: below.clone(),
                        rtype,
                    });
                }
            }
            _ => {}
        }
        let beside_cname = |t: RrType| !matches!(t, RrType::CNAME | RrType::RRSIG | RrType::NSEC);
        let conflict = if rtype == RrType::CNAME {
            node.is_some_and(|n| {
                n.iter()
                    .any(|(t, s)| !s.rdatas.is_empty() && beside_cname(*t))
            })
        } else {
            beside_cname(rtype) && rtype != RrType::NSEC3 && set(RrType::CNAME).is_some()
        };
        if conflict {
            return Err(ZoneError::CnameAndOtherData(r.owner.clone()));
        }
        Ok(())
    }

    /// The owner of a DNAME strictly above `name` (up to and including the apex), if any.
    fn dname_above(&self, name: &Name) -> Option<Name> {
        let mut cur = name.parent();
        while let Some(n) = cur {
            if !n.is_subdomain_of(&self.origin) {
                break;
            }
            if self.rrset(&n, RrType::DNAME).is_some() {
                return Some(n);
            }
            if n == self.origin {
                break;
            }
            cur = n.parent();
        }
        None
    }

    /// The first name strictly below `name` that has a node (canonical order puts a name's
    /// descendants right after it, RFC 4034 §6.1).
    fn first_node_below(&self, name: &Name) -> Option<(&Name, &Node)> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.nodes
            .range((Excluded(name), Unbounded))
            .next()
            .filter(|(n, _)| n.is_subdomain_of(name))
    }

    /// Adds one record (RRSIGs attach to the RRset they cover), without the content rules of
    /// [`Zone::insert_checked`]: for partial data such as `dig` output.
    ///
    /// # Errors
    /// [`ZoneError::OutOfZone`] or [`ZoneError::Class`].
    pub fn insert(&mut self, r: Record) -> Result<(), ZoneError> {
        if !r.owner.is_subdomain_of(&self.origin) {
            return Err(ZoneError::OutOfZone {
                origin: self.origin.clone(),
                owner: r.owner,
                rtype: r.rtype,
            });
        }
        if r.class != Class::IN {
            return Err(ZoneError::Class {
                owner: r.owner,
                class: r.class,
            });
        }
        let (key, is_sig) = match r.covered_type() {
            Some(t) => (t, true),
            None => (r.rtype, false),
        };
        let set = if key == RrType::NSEC3 {
            self.nsec3.entry(r.owner).or_default()
        } else {
            self.nodes
                .entry(r.owner)
                .or_default()
                .entry(key)
                .or_default()
        };
        let (list, ttl) = if is_sig {
            (&mut set.rrsigs, &mut set.rrsig_ttl)
        } else {
            (&mut set.rdatas, &mut set.ttl)
        };
        if list.is_empty() || r.ttl < *ttl {
            *ttl = r.ttl;
        }
        if !list.contains(&r.rdata) {
            list.push(r.rdata);
        }
        Ok(())
    }

    /// Removes the record `r` (owner, type and RDATA; the TTL is not compared, as an IXFR
    /// deletion names a record, RFC 1995 §4); RRSIGs are removed from the RRset they cover.
    /// Sets and nodes left empty go too. Returns false, changing nothing, if the zone lacks it.
    pub fn remove(&mut self, r: &Record) -> bool {
        let (key, is_sig) = match r.covered_type() {
            Some(t) => (t, true),
            None => (r.rtype, false),
        };
        let set = if key == RrType::NSEC3 {
            self.nsec3.get_mut(&r.owner)
        } else {
            self.nodes.get_mut(&r.owner).and_then(|n| n.get_mut(&key))
        };
        let Some(set) = set else {
            return false;
        };
        let list = if is_sig {
            &mut set.rrsigs
        } else {
            &mut set.rdatas
        };
        let Some(at) = list.iter().position(|d| *d == r.rdata) else {
            return false;
        };
        list.remove(at);
        if set.rdatas.is_empty() && set.rrsigs.is_empty() {
            if key == RrType::NSEC3 {
                self.nsec3.remove(&r.owner);
            } else if let Some(node) = self.nodes.get_mut(&r.owner) {
                node.remove(&key);
                if node.is_empty() {
                    self.nodes.remove(&r.owner);
                }
            }
        }
        true
    }

    /// Checks that the zone has exactly one SOA record, at its apex (RFC 1035 §5.2).
    ///
    /// # Errors
    /// [`ZoneError::Soa`].
    pub fn check_apex(&self) -> Result<(), ZoneError> {
        let soa_count = self
            .nodes
            .get(&self.origin)
            .and_then(|n| n.get(&RrType::SOA))
            .map_or(0, |s| s.rdatas.len());
        if soa_count != 1 {
            return Err(ZoneError::Soa(self.origin.clone()));
        }
        Ok(())
    }

    /// The SOA RDATA (wire format).
    pub fn soa(&self) -> &[u8] {
        self.nodes
            .get(&self.origin)
            .and_then(|n| n.get(&RrType::SOA))
            .and_then(|s| s.rdatas.first())
            .map_or(&[], Vec::as_slice)
    }

    /// The SOA TTL, in seconds.
    pub fn soa_ttl(&self) -> u32 {
        self.rrset(&self.origin, RrType::SOA).map_or(0, |s| s.ttl)
    }

    /// The SOA RDATA through its typed view; `None` if the apex has no well-formed SOA.
    pub fn soa_fields(&self) -> Option<Soa<'_>> {
        Soa::parse(self.soa())
    }

    /// The SOA MINIMUM field, in seconds (0 without a well-formed SOA).
    pub fn soa_minimum(&self) -> u32 {
        self.soa_fields().map_or(0, |s| s.minimum)
    }

    /// The SOA SERIAL field (0 without a well-formed SOA).
    pub fn soa_serial(&self) -> u32 {
        self.soa_fields().map_or(0, |s| s.serial)
    }

    /// Sets the SOA SERIAL field (RFC 1035 §3.3.13: the 32 bits before the last 16 bytes of
    /// the RDATA). Returns false, changing nothing, without a well-formed SOA.
    pub fn set_soa_serial(&mut self, serial: u32) -> bool {
        if self.soa_fields().is_none() {
            return false;
        }
        let Some(rdata) = self
            .nodes
            .get_mut(&self.origin)
            .and_then(|n| n.get_mut(&RrType::SOA))
            .and_then(|s| s.rdatas.first_mut())
        else {
            return false;
        };
        let at = rdata.len() - 20;
        rdata[at..at + 4].copy_from_slice(&serial.to_be_bytes());
        true
    }

    /// TTL for negative answers and NSEC/NSEC3 records: min(SOA TTL, SOA MINIMUM)
    /// (RFC 2308 §5, RFC 9077 §3).
    pub fn negative_ttl(&self) -> u32 {
        // One lookup of the apex (every negative answer asks).
        self.rrset(&self.origin, RrType::SOA)
            .map_or(0, RRset::negative_ttl)
    }

    /// The RRset of (`name`, `rtype`), if it has data.
    pub fn rrset(&self, name: &Name, rtype: RrType) -> Option<&RRset> {
        self.nodes
            .get(name)
            .and_then(|n| n.get(&rtype))
            .filter(|s| !s.rdatas.is_empty())
    }

    /// Where `name` stands: apex, authoritative, delegation point or glue.
    pub fn authority(&self, name: &Name) -> Authority {
        if *name == self.origin {
            return Authority::Apex;
        }
        // Any NS (or DNAME) cut strictly above makes this glue or occluded data.
        let cut = |node: &Node| owns(node, RrType::NS) || owns(node, RrType::DNAME);
        if self.topmost_below_apex(name, false, cut).is_some() {
            Authority::Glue
        } else if self.rrset(name, RrType::NS).is_some() {
            Authority::Delegation
        } else {
            Authority::Authoritative
        }
    }

    /// The zone cut that makes a query for `name` a referral (RFC 1034 §4.3.2 step 3b): among
    /// `name` and its ancestors below the apex, the delegation point (owner of an NS RRset)
    /// closest to the apex, with its node.
    pub fn delegation(&self, name: &Name) -> Option<(&Name, &Node)> {
        self.topmost_below_apex(name, true, |node| owns(node, RrType::NS))
    }

    /// As [`Zone::delegation`], among the names strictly between the apex and `name` only:
    /// for a caller that has looked `name` up already (one lookup fewer).
    pub fn delegation_above(&self, name: &Name) -> Option<(&Name, &Node)> {
        self.topmost_below_apex(name, false, |node| owns(node, RrType::NS))
    }

    /// Among the names strictly between the apex and `name` (and `name` itself if
    /// `inclusive`), the one closest to the apex whose node satisfies `pred`.
    fn topmost_below_apex(
        &self,
        name: &Name,
        inclusive: bool,
        pred: impl Fn(&Node) -> bool,
    ) -> Option<(&Name, &Node)> {
        let mut found = None;
        let mut cur = if inclusive {
            Some(name.clone())
        } else {
            name.parent()
        };
        while let Some(n) = cur.filter(|n| *n != self.origin && n.is_subdomain_of(&self.origin)) {
            if let Some(hit) = self.nodes.get_key_value(&n).filter(|(_, node)| pred(node)) {
                found = Some(hit);
            }
            cur = n.parent();
        }
        found
    }

    /// Names with no RRsets that lie between the apex and a name that has some: empty
    /// non-terminals (RFC 5155 §7.1 gives them NSEC3 records), excluding those below cuts.
    pub fn empty_non_terminals(&self) -> Vec<Name> {
        let mut out = std::collections::BTreeSet::new();
        for name in self.nodes.keys() {
            if self.authority(name) == Authority::Glue {
                continue;
            }
            let mut cur = name.parent();
            while let Some(n) = cur {
                if !n.is_subdomain_of(&self.origin) || n == self.origin {
                    break;
                }
                if !self.nodes.contains_key(&n) {
                    out.insert(n.clone());
                }
                cur = n.parent();
            }
        }
        out.into_iter().collect()
    }

    /// All records, in canonical order, RRSIGs after the RRset they cover, NSEC3 last.
    pub fn records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        self.for_each_record(|r| out.push(r));
        out
    }

    /// Writes the zone as a master file, one record per line in the order of
    /// [`Zone::records`], without building the whole list in memory.
    ///
    /// # Errors
    /// The first I/O error of `out`.
    pub fn write_master_file(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut result = Ok(());
        self.for_each_record(|r| {
            if result.is_ok() {
                result = writeln!(out, "{r}");
            }
        });
        result
    }

    fn for_each_record(&self, mut f: impl FnMut(Record)) {
        for (name, node) in &self.nodes {
            // SOA first at the apex, as master files customarily start.
            let mut types: Vec<&RrType> = node.keys().collect();
            types.sort_by_key(|t| (**t != RrType::SOA, t.0));
            for t in types {
                rrset_records(name, *t, &node[t], &mut f);
            }
        }
        for (name, set) in &self.nsec3 {
            rrset_records(name, RrType::NSEC3, set, &mut f);
        }
    }

    /// Number of records including signatures.
    pub fn record_count(&self) -> usize {
        self.all_rrsets()
            .map(|s| s.rdatas.len() + s.rrsigs.len())
            .sum()
    }

    /// The largest TTL of any RRset, in seconds (0 for an empty zone): how long a resolver
    /// may hold any of its data.
    pub fn max_ttl(&self) -> u32 {
        self.all_rrsets().map(|s| s.ttl).max().unwrap_or(0)
    }

    /// Every RRset, NSEC3 included.
    fn all_rrsets(&self) -> impl Iterator<Item = &RRset> {
        self.nodes
            .values()
            .flat_map(|n| n.values())
            .chain(self.nsec3.values())
    }
}

fn rrset_records(name: &Name, rtype: RrType, set: &RRset, f: &mut impl FnMut(Record)) {
    for rdata in &set.rdatas {
        f(Record {
            owner: name.clone(),
            rtype,
            class: Class::IN,
            ttl: set.ttl,
            rdata: rdata.clone(),
        });
    }
    for sig in &set.rrsigs {
        f(Record {
            owner: name.clone(),
            rtype: RrType::RRSIG,
            class: Class::IN,
            ttl: set.rrsig_ttl,
            rdata: sig.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zonefile::ZoneFileReader;

    pub(crate) fn zone(text: &str) -> Zone {
        let records = ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300))
            .read_str(text, "t")
            .unwrap();
        Zone::from_records("example.".parse().unwrap(), records).unwrap()
    }

    #[test]
    fn authority_and_empty_non_terminals() {
        let z = zone(
            "@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nsub NS ns.sub\nns.sub A 192.0.2.2\n\
             a.b.c A 192.0.2.3\n",
        );
        let n = |s: &str| -> Name { s.parse().unwrap() };
        assert_eq!(z.authority(&n("example.")), Authority::Apex);
        assert_eq!(z.authority(&n("ns.example.")), Authority::Authoritative);
        assert_eq!(z.authority(&n("sub.example.")), Authority::Delegation);
        assert_eq!(z.authority(&n("ns.sub.example.")), Authority::Glue);
        assert_eq!(
            z.empty_non_terminals(),
            vec![n("c.example."), n("b.c.example.")]
        );
        assert_eq!(z.negative_ttl(), 5);
        assert_eq!((z.soa_serial(), z.soa_minimum()), (1, 5));
    }

    /// `remove` takes one record (any TTL), an RRSIG from its RRset, and empty sets and
    /// nodes with the last record; a record the zone lacks changes nothing.
    #[test]
    fn remove_takes_one_record_and_empty_nodes() {
        let mut z = zone("@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nns A 192.0.2.2\n");
        let full = z.clone();
        let rec = |text: &str| {
            ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300))
                .read_str(text, "t")
                .unwrap()
                .remove(0)
        };
        assert!(!z.remove(&rec("ns A 192.0.2.3")));
        assert!(!z.remove(&rec("www A 192.0.2.1")));
        assert_eq!(z, full);
        assert!(z.remove(&rec("ns 1 A 192.0.2.1")));
        assert_eq!(
            z.rrset(&"ns.example.".parse().unwrap(), RrType::A)
                .unwrap()
                .rdatas
                .len(),
            1
        );
        assert!(z.remove(&rec("ns A 192.0.2.2")));
        assert!(!z
            .nodes
            .contains_key(&"ns.example.".parse::<Name>().unwrap()));
        z.insert(rec(
            "@ RRSIG NS 13 1 300 20300101000000 20200101000000 1 example. AAAA",
        ))
        .unwrap();
        assert!(z.remove(&rec(
            "@ RRSIG NS 13 1 300 20300101000000 20200101000000 1 example. AAAA"
        )));
        assert!(z
            .rrset(&"example.".parse().unwrap(), RrType::NS)
            .unwrap()
            .rrsigs
            .is_empty());
    }

    #[test]
    fn delegation_is_the_topmost_cut() {
        let z = zone(
            "@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nsub NS ns.sub\n\
             deep.sub NS ns.deep.sub\nwww A 192.0.2.4\n",
        );
        let n = |s: &str| -> Name { s.parse().unwrap() };
        let cut = |s: &str| z.delegation(&n(s)).map(|(c, _)| c.clone());
        assert_eq!(cut("sub.example."), Some(n("sub.example.")));
        assert_eq!(cut("x.deep.sub.example."), Some(n("sub.example.")));
        assert_eq!(cut("deep.sub.example."), Some(n("sub.example.")));
        assert_eq!(cut("www.example."), None);
        assert_eq!(cut("example."), None, "the apex NS is no cut");
        assert_eq!(z.authority(&n("deep.sub.example.")), Authority::Glue);
        // Strictly above the name: the name's own cut does not count.
        let above = |s: &str| z.delegation_above(&n(s)).map(|(c, _)| c.clone());
        assert_eq!(above("sub.example."), None);
        assert_eq!(above("x.sub.example."), Some(n("sub.example.")));
        assert_eq!(above("deep.sub.example."), Some(n("sub.example.")));
        assert_eq!(above("x.deep.sub.example."), Some(n("sub.example.")));
        assert_eq!(above("www.example."), None);
    }

    #[test]
    fn bad_zones_are_rejected() {
        let reader = ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300));
        let origin: Name = "example.".parse().unwrap();
        let recs = reader.read_str("www A 192.0.2.1\n", "t").unwrap();
        assert_eq!(
            Zone::from_records(origin.clone(), recs),
            Err(ZoneError::Soa(origin.clone()))
        );
        let recs = reader
            .read_str("@ SOA ns hm 1 2 3 4 5\nwww.other. A 192.0.2.1\n", "t")
            .unwrap();
        assert!(matches!(
            Zone::from_records(origin.clone(), recs),
            Err(ZoneError::OutOfZone { .. })
        ));
        let recs = reader
            .read_str("@ SOA ns hm 1 2 3 4 5\nw CNAME x\nw A 192.0.2.1\n", "t")
            .unwrap();
        assert!(matches!(
            Zone::from_records(origin, recs),
            Err(ZoneError::CnameAndOtherData(_))
        ));
    }
}

//! Incremental re-signing (RFC 4035 §2, RFC 4034 §4, RFC 5155 §7): a change of a few RRsets of
//! a signed zone, applied to the signed zone in place at a cost in proportion to the change,
//! not to the zone. A dynamic update (RFC 2136) or an incoming IXFR at an inline signer makes
//! such changes; [`super::sign::resign_zone`] would walk the whole zone for them.
//!
//! [`resign_changes`] takes the signed zone (its maps are in canonical order, RFC 4034 §6.1,
//! so neighbours in the denial chain are range look-ups) and the new content of each changed
//! RRset, and:
//!
//! 1. replaces the changed RRsets and signs them (RRSIGs by the same keys and rules as a full
//!    signing: KSKs for DNSKEY/CDS/CDNSKEY, nothing at glue, only DS and NSEC at a delegation);
//! 2. when an NS or DNAME RRset changes below the apex (a zone cut comes or goes), signs or
//!    unsigns the names below it that became authoritative or glue;
//! 3. updates the denial chain around the changed names: an NSEC (RFC 4034 §4.1) or NSEC3
//!    (RFC 5155 §7.1: empty non-terminals, Opt-Out leaving unsigned delegations out) record is
//!    inserted, removed or relinked only where the chain's content changed, and only those
//!    records are signed anew;
//! 4. sets the new SOA serial and signs the SOA;
//! 5. returns the signed difference (records deleted and added, RFC 1995 §4 order with the
//!    SOAs framing it), which is the IXFR journal entry of the change.
//!
//! The result holds the same records as [`super::sign::sign_zone`] of the changed unsigned
//! data would (the tests compare them, signatures aside), with the signatures of everything
//! else kept. What a change cannot do incrementally is refused with
//! [`IncrementalError::NotIncremental`] before anything is touched, so the caller signs the
//! whole zone instead: a DNSKEY RRset or denial kind other than the zone's (a key rollover
//! step, a policy change), a changed negative TTL (every NSEC/NSEC3 record's TTL changes,
//! RFC 9077), MTL keys (a new ladder re-signs every condensed signature) and ZONEMD (its
//! digest covers the whole zone, RFC 8976).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

use rayon::prelude::*;

use super::algorithm::SecAlg;
use super::keyfile::ZoneKey;
use super::mtl::MtlParams;
use super::nsec3::{owner_hash, Nsec3Params, MAX_ITERATIONS};
use super::sign::{jitter, sign_rrset, signers, Denial, Job, SignError, SigningPolicy};
use crate::difference;
use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::wire::rdata::Soa;
use crate::zone::{Authority, Node, RRset, Zone};

/// Signed RRsets of a number of jobs at or above which signing runs on all cores.
const PARALLEL_JOBS: usize = 16;

/// The new content of one RRset of a zone's unsigned data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrsetChange {
    /// The owner name.
    pub owner: Name,
    /// The type (not RRSIG, NSEC, NSEC3, NSEC3PARAM or DNSKEY: the signer makes those).
    pub rtype: RrType,
    /// The new TTL (seconds) and RDATAs (uncompressed wire format); `None` or no RDATA: the
    /// RRset is deleted.
    pub new: Option<(u32, Vec<Vec<u8>>)>,
}

/// Why [`resign_changes`] did not apply a change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IncrementalError {
    /// The change needs a signing of the whole zone (the reason says why); the zone was not
    /// touched.
    #[error("the change needs the whole zone signed: {0}")]
    NotIncremental(&'static str),
    /// Signing failed; the zone may be half changed and must be dropped.
    #[error(transparent)]
    Sign(#[from] SignError),
}

/// A change applied and signed: the IXFR difference (RFC 1995 §4) from the zone before to the
/// zone after, and counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedChange {
    /// The SOA record before.
    pub old_soa: Record,
    /// Records deleted (data and RRSIGs; the apex SOA record itself is `old_soa`).
    pub deleted: Vec<Record>,
    /// The SOA record after.
    pub new_soa: Record,
    /// Records added (data and RRSIGs; the apex SOA record itself is `new_soa`).
    pub added: Vec<Record>,
    /// RRSIG records made.
    pub signatures: usize,
    /// NSEC or NSEC3 records inserted, changed or removed.
    pub denial_records: usize,
}

impl SignedChange {
    /// The records in IXFR order: old SOA, deletions, new SOA, additions.
    pub fn ixfr_records(self) -> Vec<Record> {
        let mut records = Vec::with_capacity(self.deleted.len() + self.added.len() + 2);
        records.push(self.old_soa);
        records.extend(self.deleted);
        records.push(self.new_soa);
        records.extend(self.added);
        records
    }
}

/// Applies `changes` to the signed `zone` (signed by `keys` under `policy`, as
/// [`super::sign::sign_zone`] or an earlier call left it), sets its SOA serial to `serial` and
/// signs what changed (new expirations spread by up to `jitter` seconds, as
/// [`super::sign::Incremental::jitter`]); see the module documentation.
///
/// # Errors
/// [`IncrementalError::NotIncremental`] (nothing changed) when the change needs a whole
/// signing; [`IncrementalError::Sign`] as [`super::sign::sign_zone`] for the keys, the library
/// and NSEC3 hash collisions.
pub fn resign_changes(
    zone: &mut Zone,
    changes: &[RrsetChange],
    serial: u32,
    keys: &[ZoneKey],
    policy: &SigningPolicy,
    jitter: u64,
) -> Result<SignedChange, IncrementalError> {
    check(zone, changes, keys, policy)?;
    let apex = zone.origin.clone();
    let params = match &policy.denial {
        Denial::Nsec3(p) => Some(p),
        // `check` refused compact denial: an online zone has no chain to relink.
        Denial::Nsec | Denial::Compact => None,
    };
    // The names whose signatures or place in the denial chain may change: the changed owners
    // and, below a zone cut that comes or goes, every name under it.
    let mut scope: BTreeSet<Name> = BTreeSet::new();
    for c in changes {
        scope.insert(c.owner.clone());
        if c.owner != apex && matches!(c.rtype, RrType::NS | RrType::DNAME) {
            scope.extend(below(zone, &c.owner).cloned());
        }
    }
    // NSEC3 also covers empty non-terminals: the ancestors of those names may become or stop
    // being one.
    let hashed_before: Vec<(Name, Option<Vec<RrType>>)> = match params {
        None => Vec::new(),
        Some(p) => {
            let mut names = scope.clone();
            for n in &scope {
                let mut cur = n.parent();
                while let Some(a) = cur.filter(|a| *a != apex && a.is_subdomain_of(&apex)) {
                    cur = a.parent();
                    names.insert(a);
                }
            }
            names
                .into_iter()
                .map(|n| {
                    let types = nsec3_types(zone, &n, p);
                    (n, types)
                })
                .collect()
        }
    };

    let mut touched = Touched::default();
    touched.node(zone, &apex);
    for n in &scope {
        touched.node(zone, n);
    }
    let mut to_sign: BTreeSet<(Name, RrType)> = BTreeSet::new();
    // 1. The data.
    for c in changes {
        let node = zone.nodes.entry(c.owner.clone()).or_default();
        let unchanged = match (node.get(&c.rtype), &c.new) {
            (Some(set), Some((ttl, rdatas))) => set.ttl == *ttl && same_set(&set.rdatas, rdatas),
            (None, None) => true,
            (None, Some((_, rdatas))) => rdatas.is_empty(),
            (Some(_), None) => false,
        };
        if unchanged {
            if node.is_empty() {
                zone.nodes.remove(&c.owner);
            }
            continue;
        }
        match &c.new {
            Some((ttl, rdatas)) if !rdatas.is_empty() => {
                node.insert(
                    c.rtype,
                    RRset {
                        ttl: *ttl,
                        rdatas: rdatas.clone(),
                        rrsigs: Vec::new(),
                        rrsig_ttl: *ttl,
                    },
                );
                to_sign.insert((c.owner.clone(), c.rtype));
            }
            _ => {
                node.remove(&c.rtype);
            }
        }
        let has_data = node
            .iter()
            .any(|(t, s)| *t != RrType::NSEC && !s.rdatas.is_empty());
        if !has_data {
            zone.nodes.remove(&c.owner);
        }
    }
    // 4 (before the chain, whose TTL reads the SOA). The serial.
    zone.set_soa_serial(serial);
    if let Some(set) = apex_set(zone, RrType::SOA) {
        set.rrsigs.clear();
    }
    to_sign.insert((apex.clone(), RrType::SOA));
    // 2. Signatures that appear or go with a zone cut.
    for n in &scope {
        let Some(node) = zone.nodes.get(n) else {
            continue;
        };
        let authority = zone.authority(n);
        let mut unsign = Vec::new();
        for (rtype, set) in node {
            if *rtype == RrType::NSEC {
                continue;
            }
            if signed_at(authority, *rtype) {
                if set.rrsigs.is_empty() {
                    to_sign.insert((n.clone(), *rtype));
                }
            } else if !set.rrsigs.is_empty() {
                unsign.push(*rtype);
            }
        }
        if let Some(node) = zone.nodes.get_mut(n) {
            for rtype in unsign {
                if let Some(set) = node.get_mut(&rtype) {
                    set.rrsigs.clear();
                }
            }
        }
    }
    // 3. The denial chain.
    let mut hashed_to_sign = BTreeSet::new();
    let denial_records = match params {
        None => nsec_chain(zone, &scope, &mut touched, &mut to_sign),
        Some(p) => nsec3_chain(zone, p, hashed_before, &mut touched, &mut hashed_to_sign)?,
    };
    // Signing.
    let jobs: Vec<Job> = to_sign
        .into_iter()
        .filter(|(owner, rtype)| {
            zone.rrset(owner, *rtype).is_some() && signed_at(zone.authority(owner), *rtype)
        })
        .map(|(owner, rtype)| Job {
            owner,
            rtype,
            nsec3: false,
        })
        .chain(hashed_to_sign.into_iter().map(|owner| Job {
            owner,
            rtype: RrType::NSEC3,
            nsec3: true,
        }))
        .collect();
    let sigs = sign_jobs(zone, &jobs, keys, policy, jitter)?;
    let mut signatures = 0;
    for (job, sigs) in jobs.iter().zip(sigs) {
        let set = if job.nsec3 {
            zone.nsec3.get_mut(&job.owner)
        } else {
            zone.nodes
                .get_mut(&job.owner)
                .and_then(|n| n.get_mut(&job.rtype))
        };
        if let Some(set) = set {
            signatures += sigs.len();
            set.rrsig_ttl = set.ttl;
            set.rrsigs = sigs;
        }
    }
    // 5. The difference.
    let (old_soa, deleted, new_soa, added) = touched.difference(zone);
    Ok(SignedChange {
        old_soa,
        deleted,
        new_soa,
        added,
        signatures,
        denial_records,
    })
}

/// Applies `changes` to a zone's unsigned data (each RRset replaced or deleted; names left
/// without data go): what [`resign_changes`] does to the data of a signed zone.
pub fn apply_to_unsigned(zone: &mut Zone, changes: &[RrsetChange]) {
    for c in changes {
        let node = zone.nodes.entry(c.owner.clone()).or_default();
        match &c.new {
            Some((ttl, rdatas)) if !rdatas.is_empty() => {
                node.insert(
                    c.rtype,
                    RRset {
                        ttl: *ttl,
                        rdatas: rdatas.clone(),
                        rrsigs: Vec::new(),
                        rrsig_ttl: *ttl,
                    },
                );
            }
            _ => {
                node.remove(&c.rtype);
            }
        }
        if node.is_empty() {
            zone.nodes.remove(&c.owner);
        }
    }
}

/// Refuses what [`resign_changes`] cannot do, before anything changes.
fn check(
    zone: &Zone,
    changes: &[RrsetChange],
    keys: &[ZoneKey],
    policy: &SigningPolicy,
) -> Result<(), IncrementalError> {
    let not = |reason| Err(IncrementalError::NotIncremental(reason));
    if keys.is_empty() {
        return Err(SignError::NoKeys(zone.origin.clone()).into());
    }
    if let Some(k) = keys.iter().find(|k| k.owner != zone.origin) {
        return Err(SignError::WrongZone {
            key: format!("{k:?}"),
            owner: k.owner.clone(),
            zone: zone.origin.clone(),
        }
        .into());
    }
    if keys
        .iter()
        .any(|k| MtlParams::of(k.key.algorithm()).is_some())
    {
        return not("MTL keys sign every RRset of the zone as one series");
    }
    let apex = zone.nodes.get(&zone.origin);
    let rdatas = |rtype| {
        let mut r: Vec<&Vec<u8>> = apex
            .and_then(|n| n.get(&rtype))
            .map(|s| s.rdatas.iter().collect())
            .unwrap_or_default();
        r.sort();
        r
    };
    let wanted: Vec<Vec<u8>> = match &policy.published_dnskeys {
        Some(published) => published.clone(),
        None => keys.iter().map(ZoneKey::dnskey_rdata).collect(),
    };
    let mut wanted: Vec<&Vec<u8>> = wanted.iter().collect();
    wanted.sort();
    wanted.dedup();
    if rdatas(RrType::DNSKEY) != wanted {
        return not("the DNSKEY RRset changes (keys or a rollover step)");
    }
    if !rdatas(RrType::ZONEMD).is_empty() {
        return not("ZONEMD digests the whole zone");
    }
    let nsec3param = rdatas(RrType::NSEC3PARAM);
    match &policy.denial {
        Denial::Nsec => {
            if !nsec3param.is_empty() || rdatas(RrType::NSEC).is_empty() {
                return not("the zone is not signed with NSEC");
            }
        }
        Denial::Nsec3(params) => {
            if params.iterations > MAX_ITERATIONS {
                return Err(SignError::Nsec3Iterations(params.iterations).into());
            }
            if nsec3param != [&params.nsec3param_rdata()] {
                return not("the zone is not signed with these NSEC3 parameters");
            }
        }
        Denial::Compact => {
            return not(
                "an online zone (compact denial) signs its answers when they are asked for",
            );
        }
    }
    for c in changes {
        if !c.owner.is_subdomain_of(&zone.origin) {
            return not("a change outside the zone");
        }
        if matches!(
            c.rtype,
            RrType::RRSIG | RrType::NSEC | RrType::NSEC3 | RrType::NSEC3PARAM | RrType::DNSKEY
        ) {
            return not("a change of records the signer makes");
        }
        if c.owner == zone.origin && c.rtype == RrType::SOA {
            let negative = c.new.as_ref().and_then(|(ttl, rdatas)| {
                let soa = Soa::parse(rdatas.first()?)?;
                Some((*ttl).min(soa.minimum))
            });
            if negative != Some(zone.negative_ttl()) {
                return not("the SOA's negative TTL changes (every NSEC/NSEC3 TTL with it)");
            }
        }
    }
    Ok(())
}

/// Whether two RDATA lists hold the same records, in any order.
fn same_set(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    a.len() == b.len() && a.iter().all(|r| b.contains(r))
}

/// The names strictly below `name` with a node (they follow it in canonical order).
fn below<'z>(zone: &'z Zone, name: &'z Name) -> impl Iterator<Item = &'z Name> + 'z {
    zone.nodes
        .range((Excluded(name), Unbounded))
        .map(|(n, _)| n)
        .take_while(move |n| n.is_subdomain_of(name))
}

/// The apex RRset of `rtype`, to change.
fn apex_set(zone: &mut Zone, rtype: RrType) -> Option<&mut RRset> {
    let apex = zone.origin.clone();
    zone.nodes.get_mut(&apex).and_then(|n| n.get_mut(&rtype))
}

/// Whether an RRset of `rtype` at a name of `authority` is signed (RFC 4035 §2.2: not glue,
/// only DS and NSEC at a delegation point).
fn signed_at(authority: Authority, rtype: RrType) -> bool {
    match authority {
        Authority::Apex | Authority::Authoritative => true,
        Authority::Delegation => matches!(rtype, RrType::DS | RrType::NSEC),
        Authority::Glue => false,
    }
}

/// Whether `name` is in the NSEC chain: it has data and is not glue.
fn in_nsec_chain(zone: &Zone, name: &Name) -> bool {
    zone.nodes.contains_key(name) && zone.authority(name) != Authority::Glue
}

/// Relinks the NSEC chain (RFC 4034 §4.1) around the names of `scope`: their own NSEC
/// records and those of the names before them; returns how many records changed.
fn nsec_chain(
    zone: &mut Zone,
    scope: &BTreeSet<Name>,
    touched: &mut Touched,
    to_sign: &mut BTreeSet<(Name, RrType)>,
) -> usize {
    let ttl = zone.negative_ttl();
    let mut changed = 0;
    let mut redo: BTreeSet<Name> = BTreeSet::new();
    for n in scope {
        if in_nsec_chain(zone, n) {
            redo.insert(n.clone());
        } else if let Some(node) = zone.nodes.get_mut(n) {
            if node.remove(&RrType::NSEC).is_some() {
                changed += 1;
            }
        }
        let before = zone
            .nodes
            .range(..n)
            .rev()
            .map(|(m, _)| m)
            .find(|m| zone.authority(m) != Authority::Glue);
        redo.extend(before.cloned());
    }
    for r in redo {
        let next = zone
            .nodes
            .range((Excluded(&r), Unbounded))
            .map(|(m, _)| m)
            .find(|m| zone.authority(m) != Authority::Glue)
            .unwrap_or(&zone.origin);
        let mut types: Vec<RrType> = zone.nodes[&r].keys().copied().collect();
        types.extend([RrType::RRSIG, RrType::NSEC]);
        let mut rdata = next.as_wire().to_vec();
        crate::rdata::write_type_bitmap(&mut rdata, &types);
        let same = zone.nodes[&r]
            .get(&RrType::NSEC)
            .is_some_and(|s| s.ttl == ttl && s.rdatas == [rdata.as_slice()]);
        if same {
            continue;
        }
        touched.node(zone, &r);
        changed += 1;
        zone.nodes.entry(r.clone()).or_default().insert(
            RrType::NSEC,
            RRset {
                ttl,
                rdatas: vec![rdata],
                rrsigs: Vec::new(),
                rrsig_ttl: ttl,
            },
        );
        to_sign.insert((r, RrType::NSEC));
    }
    changed
}

/// The types an NSEC3 record of `name` lists (empty for an empty non-terminal), or `None` when
/// `name` has none: glue, a name without data or data below it, and with Opt-Out an unsigned
/// delegation (RFC 5155 §7.1; as [`super::sign::sign_zone`] builds the chain).
fn nsec3_types(zone: &Zone, name: &Name, params: &Nsec3Params) -> Option<Vec<RrType>> {
    let Some(node) = zone.nodes.get(name) else {
        let ent = *name != zone.origin
            && name.is_subdomain_of(&zone.origin)
            && below(zone, name).any(|b| zone.authority(b) != Authority::Glue);
        return ent.then(Vec::new);
    };
    let authority = zone.authority(name);
    if authority == Authority::Glue {
        return None;
    }
    let signed = authority != Authority::Delegation || node.contains_key(&RrType::DS);
    if !signed && params.opt_out {
        return None;
    }
    let mut types: Vec<RrType> = node.keys().copied().collect();
    if signed {
        types.push(RrType::RRSIG);
    }
    Some(types)
}

/// Inserts, removes and relinks the NSEC3 records (RFC 5155 §7.1) of the names of `before`
/// (each with the types its NSEC3 record listed before the change) and of the hashes before
/// those that came or went; returns how many records changed.
fn nsec3_chain(
    zone: &mut Zone,
    params: &Nsec3Params,
    before: Vec<(Name, Option<Vec<RrType>>)>,
    touched: &mut Touched,
    to_sign: &mut BTreeSet<Name>,
) -> Result<usize, SignError> {
    let ttl = zone.negative_ttl();
    let origin = zone.origin.clone();
    let collision = || SignError::Nsec3Collision(origin.clone());
    // Hashed owner → its new types (`None`: unchanged, only the next hash may change).
    let mut redo: BTreeMap<Name, Option<Vec<RrType>>> = BTreeMap::new();
    let mut moved: Vec<Name> = Vec::new();
    let mut changed = 0;
    for (name, was) in before {
        let now = nsec3_types(zone, &name, params);
        if was.is_none() && now.is_none() {
            continue;
        }
        let owner = params
            .hashed_owner(&name, &zone.origin)
            .ok_or_else(collision)?;
        match (was, now) {
            (Some(_), None) => {
                touched.hashed(zone, &owner);
                zone.nsec3.remove(&owner);
                changed += 1;
                moved.push(owner);
            }
            (None, Some(types)) => {
                if zone.nsec3.contains_key(&owner) {
                    return Err(collision());
                }
                touched.hashed(zone, &owner);
                zone.nsec3.insert(owner.clone(), RRset::default());
                moved.push(owner.clone());
                redo.insert(owner, Some(types));
            }
            (Some(a), Some(b)) if a != b => {
                redo.insert(owner, Some(b));
            }
            _ => {}
        }
    }
    for m in &moved {
        let before = zone
            .nsec3
            .range(..m)
            .next_back()
            .or_else(|| zone.nsec3.iter().next_back())
            .map(|(p, _)| p.clone());
        if let Some(p) = before {
            redo.entry(p).or_insert(None);
        }
    }
    for (owner, types) in redo {
        let Some(set) = zone.nsec3.get(&owner) else {
            continue;
        };
        let next_owner = zone
            .nsec3
            .range((Excluded(&owner), Unbounded))
            .next()
            .or_else(|| zone.nsec3.iter().next())
            .map(|(n, _)| n)
            .ok_or_else(collision)?;
        let next = owner_hash(next_owner).ok_or_else(collision)?;
        let rdata = match types {
            Some(types) => params.nsec3_rdata(&next, &types),
            None => set
                .rdatas
                .first()
                .and_then(|old| with_next_hash(old, &next))
                .ok_or_else(collision)?,
        };
        if set.ttl == ttl && set.rdatas == [rdata.as_slice()] {
            continue;
        }
        touched.hashed(zone, &owner);
        changed += 1;
        zone.nsec3.insert(
            owner.clone(),
            RRset {
                ttl,
                rdatas: vec![rdata],
                rrsigs: Vec::new(),
                rrsig_ttl: ttl,
            },
        );
        to_sign.insert(owner);
    }
    Ok(changed)
}

/// NSEC3 RDATA `rdata` with its Next Hashed Owner Name replaced by `next` (RFC 5155 §3.2:
/// algorithm, flags, iterations, salt length and salt, hash length and hash, type bitmaps).
fn with_next_hash(rdata: &[u8], next: &[u8]) -> Option<Vec<u8>> {
    let at = 5 + usize::from(*rdata.get(4)?);
    let len = usize::from(*rdata.get(at)?);
    let mut out = rdata.get(..at)?.to_vec();
    out.push(u8::try_from(next.len()).ok()?);
    out.extend_from_slice(next);
    out.extend_from_slice(rdata.get(at + 1 + len..)?);
    Some(out)
}

/// New RRSIGs of each job's RRset (per algorithm, per key as [`super::sign`] chooses them).
fn sign_jobs(
    zone: &Zone,
    jobs: &[Job],
    keys: &[ZoneKey],
    policy: &SigningPolicy,
    jitter_window: u64,
) -> Result<Vec<Vec<Vec<u8>>>, SignError> {
    let tags: Vec<u16> = keys.iter().map(ZoneKey::key_tag).collect();
    let mut algorithms: Vec<SecAlg> = keys.iter().map(|k| k.number).collect();
    algorithms.sort();
    algorithms.dedup();
    let sign = |job: &Job| -> Result<Vec<Vec<u8>>, SignError> {
        let set = if job.nsec3 {
            zone.nsec3.get(&job.owner)
        } else {
            zone.rrset(&job.owner, job.rtype)
        };
        let Some(set) = set else {
            return Ok(Vec::new());
        };
        let expiration = policy.expiration - jitter(job, policy, jitter_window);
        let mut sigs = Vec::new();
        for &alg in &algorithms {
            for (key, &tag) in signers(keys, &tags, alg, job.rtype) {
                sigs.push(sign_rrset(zone, job, set, key, tag, policy, expiration)?);
            }
        }
        Ok(sigs)
    };
    if jobs.len() >= PARALLEL_JOBS {
        jobs.par_iter().map(sign).collect()
    } else {
        jobs.iter().map(sign).collect()
    }
}

/// The nodes and NSEC3 RRsets a change touched, as they were before it.
#[derive(Default)]
struct Touched {
    nodes: BTreeMap<Name, Option<Node>>,
    hashed: BTreeMap<Name, Option<RRset>>,
}

impl Touched {
    /// Remembers `name`'s node as it is now, unless already remembered: call before changing it.
    fn node(&mut self, zone: &Zone, name: &Name) {
        if !self.nodes.contains_key(name) {
            self.nodes
                .insert(name.clone(), zone.nodes.get(name).cloned());
        }
    }

    /// Remembers the NSEC3 RRset at `owner` as it is now, unless already remembered.
    fn hashed(&mut self, zone: &Zone, owner: &Name) {
        if !self.hashed.contains_key(owner) {
            self.hashed
                .insert(owner.clone(), zone.nsec3.get(owner).cloned());
        }
    }

    /// (old SOA, deleted, new SOA, added) from the remembered state to `zone`.
    fn difference(&self, zone: &Zone) -> (Record, Vec<Record>, Record, Vec<Record>) {
        let (mut deleted, mut added) = (Vec::new(), Vec::new());
        let empty = Node::new();
        for (name, before) in &self.nodes {
            let before = before.as_ref().unwrap_or(&empty);
            let after = zone.nodes.get(name).unwrap_or(&empty);
            let types: BTreeSet<RrType> = before.keys().chain(after.keys()).copied().collect();
            for rtype in types {
                let soa = *name == zone.origin && rtype == RrType::SOA;
                difference::rrset(
                    name,
                    rtype,
                    before.get(&rtype),
                    after.get(&rtype),
                    soa,
                    &mut deleted,
                    &mut added,
                );
            }
        }
        for (owner, before) in &self.hashed {
            difference::rrset(
                owner,
                RrType::NSEC3,
                before.as_ref(),
                zone.nsec3.get(owner),
                false,
                &mut deleted,
                &mut added,
            );
        }
        let soa = |node: Option<&Node>| {
            let set = node.and_then(|n| n.get(&RrType::SOA));
            Record {
                owner: zone.origin.clone(),
                rtype: RrType::SOA,
                class: Class::IN,
                ttl: set.map_or(0, |s| s.ttl),
                rdata: set
                    .and_then(|s| s.rdatas.first())
                    .cloned()
                    .unwrap_or_default(),
            }
        };
        let old = soa(self.nodes.get(&zone.origin).and_then(Option::as_ref));
        let new = soa(zone.nodes.get(&zone.origin));
        (old, deleted, new, added)
    }
}

#[cfg(test)]
mod tests;

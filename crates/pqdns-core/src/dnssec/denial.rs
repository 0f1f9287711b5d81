//! Checking authenticated denial of existence: NSEC proofs (RFC 4035 §5.4) and NSEC3 proofs
//! (RFC 5155 §8) for NXDOMAIN, NODATA, wildcard expansions and delegations without DS.
//!
//! [`prove`] takes NSEC/NSEC3 RRsets that are already verified
//! ([`super::validate::Validator::verify_rrset`]) and returns a [`VerifiedDenial`] if they
//! prove the claim; [`check_nsec`] and [`check_nsec3`] are the checks themselves, on RDATA.
//!
//! An NSEC3 proof whose next closer name falls in an opt-out span (RFC 5155 §6) says only that
//! no *signed* name is there: an unsigned delegation may be, unlisted. Such a proof carries
//! [`Coverage::OptOut`], and [`super::validate::conclude`] makes an answer resting on it
//! Insecure, never Secure (RFC 5155 §9.2: "The AD bit ... MUST NOT be set when returning a
//! response containing a closest (provable) encloser proof in which the NSEC3 RR that covers
//! the 'next closer' name has the Opt-Out bit set").

use super::nsec3::{next_closer, owner_hash, Nsec3Params, FLAG_OPT_OUT, HASH_SHA1, MAX_ITERATIONS};
use super::validate::{Reason, VerifiedRRset};
use crate::name::Name;
use crate::rdata::read_type_bitmap;
use crate::rr::RrType;
use crate::wire::Ede;

/// What a denial is supposed to prove.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// The name does not exist (and no wildcard could have matched).
    NxDomain,
    /// The name exists but has no RRset of this type.
    NoData(RrType),
    /// The name is a delegation without DS: the child is unsigned (insecure).
    NoDs,
    /// The answer was synthesised from the wildcard `*.<source>` (RFC 4035 §5.3.4): no name
    /// closer to QNAME exists.
    Expanded {
        /// The wildcard's parent: the closest encloser.
        source: Name,
    },
}

/// How much of the namespace a denial proof speaks for (RFC 5155 §6, §9.2).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Coverage {
    /// Every name in the proven range is accounted for: an NSEC proof, an NSEC3 record matching
    /// the name, or an NSEC3 covering the next closer name without the Opt-Out flag.
    Complete,
    /// The NSEC3 record covering `next_closer` has the Opt-Out flag (RFC 5155 §3.1.2.1): an
    /// unsigned delegation may exist in its span without being listed, so the proof makes an
    /// answer Insecure, not Secure (RFC 5155 §9.2).
    OptOut {
        /// The next closer name the opt-out span covers (RFC 5155 §1.3).
        next_closer: Name,
    },
}

/// An authenticated denial of existence: NSEC or NSEC3 RRsets of one zone, each verified with
/// the zone's trusted keys, that prove a [`Claim`] about a name. Only [`prove`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedDenial {
    zone: Name,
    name: Name,
    claim: Claim,
    coverage: Coverage,
    rrsets: Vec<VerifiedRRset>,
}

impl VerifiedDenial {
    /// The zone whose NSEC/NSEC3 chain gives the proof.
    pub fn zone(&self) -> &Name {
        &self.zone
    }
    /// The name the claim is about.
    pub fn name(&self) -> &Name {
        &self.name
    }
    /// What is proven.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }
    /// Whether the proof rests on an NSEC3 opt-out span (then an answer built on it is
    /// Insecure, RFC 5155 §9.2).
    pub fn coverage(&self) -> &Coverage {
        &self.coverage
    }
    /// The next closer name an opt-out span covers, if the proof rests on one.
    pub fn opt_out(&self) -> Option<&Name> {
        match &self.coverage {
            Coverage::OptOut { next_closer } => Some(next_closer),
            Coverage::Complete => None,
        }
    }
    /// True if the proof shows that the name does not exist: an NXDOMAIN proof, or a compact
    /// denial of existence (RFC 9824 §2): a NODATA proof by an NSEC at the name whose type
    /// bitmap lists NXNAME, which a resolver may answer as NXDOMAIN (RFC 9824 §5).
    pub fn nonexistent(&self) -> bool {
        matches!(self.claim, Claim::NxDomain) || self.compact()
    }
    /// True if the proof is a compact denial of existence (RFC 9824 §2) that the name does
    /// not exist: an NSEC at the name whose type bitmap lists NXNAME, proving NODATA (the
    /// RCODE NOERROR a querier without the CO flag gets) or NXDOMAIN (the RCODE a CO querier
    /// gets, RFC 9824 §5.1). A resolver sets its clients' RCODE from this, not from the one
    /// it received.
    pub fn compact(&self) -> bool {
        matches!(self.claim, Claim::NxDomain | Claim::NoData(_))
            && self.rrsets.iter().any(|set| {
                set.rtype() == RrType::NSEC
                    && *set.owner() == self.name
                    && set.rdatas().iter().any(|rdata| {
                        parse_nsec(set.owner(), rdata)
                            .is_some_and(|n| n.types.contains(&RrType::NXNAME))
                    })
            })
    }

    /// The verified NSEC or NSEC3 RRsets of the proof (to return with a DO=1 answer,
    /// RFC 4035 §3.1.3).
    pub fn rrsets(&self) -> &[VerifiedRRset] {
        &self.rrsets
    }
}

/// Checks that verified NSEC/NSEC3 RRsets prove `claim` for `name` in `zone`: only RRsets of
/// those types whose signer is `zone` are used (NSEC3 if any are present, else NSEC), and
/// they become the proof's records.
///
/// # Errors
/// A Bogus [`Reason`] (EDE 12, NSEC missing) saying which part of the proof is missing; EDE
/// 27 for NSEC3 iterations above the limit.
pub fn prove(
    zone: &Name,
    name: &Name,
    claim: Claim,
    rrsets: &[VerifiedRRset],
) -> Result<VerifiedDenial, Reason> {
    let of_type = |t: RrType| -> Vec<VerifiedRRset> {
        rrsets
            .iter()
            .filter(|r| r.rtype() == t && r.signer() == Some(zone))
            .cloned()
            .collect()
    };
    let flatten = |sets: &[VerifiedRRset]| -> Vec<(Name, Vec<u8>)> {
        sets.iter()
            .flat_map(|s| s.rdatas().iter().map(|r| (s.owner().clone(), r.clone())))
            .collect()
    };
    let nsec3 = of_type(RrType::NSEC3);
    let (used, coverage) = if !nsec3.is_empty() {
        let coverage = check_nsec3(zone, name, claim.clone(), &flatten(&nsec3))?;
        (nsec3, coverage)
    } else {
        let nsec = of_type(RrType::NSEC);
        if nsec.is_empty() {
            return Err(bogus(format!(
                "no verified NSEC or NSEC3 records of {zone} for {name}"
            )));
        }
        check_nsec(zone, name, claim.clone(), &flatten(&nsec))?;
        (nsec, Coverage::Complete)
    };
    Ok(VerifiedDenial {
        zone: zone.clone(),
        name: name.clone(),
        claim,
        coverage,
        rrsets: used,
    })
}

fn bogus(text: String) -> Reason {
    Reason::new(Ede::NSEC_MISSING, text)
}

/// An NSEC record: owner, next owner name, types.
struct Nsec {
    owner: Name,
    next: Name,
    types: Vec<RrType>,
}

fn parse_nsec(owner: &Name, rdata: &[u8]) -> Option<Nsec> {
    let (next, used) = Name::read_uncompressed(rdata).ok()?;
    Some(Nsec {
        owner: owner.clone(),
        next,
        types: read_type_bitmap(&rdata[used..])?,
    })
}

impl Nsec {
    /// True if `name` falls strictly between owner and next (RFC 4034 §4.1.1), with the last
    /// NSEC of the chain wrapping to the apex.
    fn covers(&self, name: &Name) -> bool {
        if self.owner < self.next {
            self.owner < *name && *name < self.next
        } else {
            self.owner < *name || *name < self.next
        }
    }

    /// True if `name` is below this NSEC's owner and the owner is a delegation point (NS
    /// without SOA) or owns a DNAME: the NSEC then says nothing about `name`, which belongs
    /// to another zone or is redirected (RFC 6840 §4.1, "ancestor delegation" NSEC).
    fn is_cut_above(&self, name: &Name) -> bool {
        let delegation = self.types.contains(&RrType::NS) && !self.types.contains(&RrType::SOA);
        *name != self.owner
            && name.is_subdomain_of(&self.owner)
            && (delegation || self.types.contains(&RrType::DNAME))
    }
}

/// Checks an NSEC proof of `claim` for `qname` in `zone`. `nsecs` are (owner, RDATA).
///
/// # Errors
/// A Bogus [`Reason`] saying which part of the proof is missing.
pub fn check_nsec(
    zone: &Name,
    qname: &Name,
    claim: Claim,
    nsecs: &[(Name, Vec<u8>)],
) -> Result<(), Reason> {
    let parsed: Vec<Nsec> = nsecs
        .iter()
        .filter(|(o, _)| o.is_subdomain_of(zone))
        .filter_map(|(o, r)| parse_nsec(o, r))
        .collect();
    let matching = parsed.iter().find(|n| n.owner == *qname);
    // An NSEC proves a name absent only if it covers it and its next name is not below it: if
    // it is, the name is an empty non-terminal, which exists (RFC 4035 §3.1.3.2, RFC 7129 §4);
    // and never from a delegation point or DNAME above the name (RFC 6840 §4.1).
    let covering = |name: &Name| {
        parsed
            .iter()
            .find(|n| n.covers(name) && !n.next.is_subdomain_of(name) && !n.is_cut_above(name))
    };
    match claim {
        Claim::NoData(qtype) => {
            // QNAME an empty non-terminal: an NSEC covering it whose next name is below it
            // shows that it exists and owns no RRset (RFC 7129 §4).
            let empty_non_terminal = parsed
                .iter()
                .any(|n| n.covers(qname) && n.next.is_subdomain_of(qname));
            if matching.is_none() && empty_non_terminal {
                return Ok(());
            }
            // Either an NSEC at QNAME, or (RFC 4035 §3.1.3.4, wildcard NODATA) one covering
            // QNAME and one at the wildcard of its closest encloser; neither lists QTYPE.
            let wildcard = || {
                let ce = nsec_closest_encloser(qname, covering(qname)?)?;
                let wildcard = ce.prepend_label(b"*").ok()?;
                parsed.iter().find(|n| n.owner == wildcard)
            };
            let n = matching.or_else(wildcard).ok_or_else(|| {
                bogus(format!(
                    "no NSEC at {qname} (or at a wildcard covering it) for the NODATA proof"
                ))
            })?;
            if n.types.contains(&qtype) || n.types.contains(&RrType::CNAME) {
                return Err(bogus(format!("NSEC at {} lists {qtype} or CNAME", n.owner)));
            }
            Ok(())
        }
        Claim::NoDs => {
            let n = matching
                .ok_or_else(|| bogus(format!("no NSEC at {qname} proving the absence of DS")))?;
            if !n.types.contains(&RrType::NS)
                || n.types.contains(&RrType::DS)
                || n.types.contains(&RrType::SOA)
            {
                return Err(bogus(format!(
                    "NSEC at {qname} does not show an unsigned delegation"
                )));
            }
            Ok(())
        }
        Claim::Expanded { .. } => {
            if covering(qname).is_some() {
                Ok(())
            } else {
                Err(bogus(format!(
                    "no NSEC proves that {qname} itself does not exist"
                )))
            }
        }
        Claim::NxDomain => {
            // RFC 9824 §2, §5: compact denial of existence. An NSEC at QNAME listing NXNAME
            // says QNAME does not exist (the NXDOMAIN a CO querier gets, or one restored).
            if matching.is_some_and(|n| n.types.contains(&RrType::NXNAME)) {
                return Ok(());
            }
            let cover = covering(qname).ok_or_else(|| bogus(format!("no NSEC covers {qname}")))?;
            let ce = nsec_closest_encloser(qname, cover)
                .ok_or_else(|| bogus("no closest encloser".into()))?;
            let wildcard = ce
                .prepend_label(b"*")
                .map_err(|_| bogus("wildcard name too long".into()))?;
            if covering(&wildcard).is_none() {
                return Err(bogus(format!("no NSEC proves the absence of {wildcard}")));
            }
            Ok(())
        }
    }
}

/// The closest encloser of `qname` given the NSEC that covers it: the longest ancestor of
/// `qname` that is an ancestor of the NSEC's owner or next name (RFC 4035 §5.4).
fn nsec_closest_encloser(qname: &Name, cover: &Nsec) -> Option<Name> {
    let mut ce = qname.parent();
    while let Some(c) = &ce {
        if cover.owner.is_subdomain_of(c) || cover.next.is_subdomain_of(c) {
            break;
        }
        ce = c.parent();
    }
    ce
}

/// An NSEC3 record: hash of the owner, next hash, flags, types.
struct Nsec3 {
    hash: Vec<u8>,
    next: Vec<u8>,
    opt_out: bool,
    types: Vec<RrType>,
}

impl Nsec3 {
    fn covers(&self, h: &[u8]) -> bool {
        if self.hash < self.next {
            self.hash.as_slice() < h && h < self.next.as_slice()
        } else {
            self.hash.as_slice() < h || h < self.next.as_slice()
        }
    }
}

/// Checks an NSEC3 proof of `claim` for `qname` in `zone` (RFC 5155 §8.4–§8.8).
/// `nsec3s` are (owner, RDATA). NSEC3 with unknown hash algorithms are ignored; more than
/// [`MAX_ITERATIONS`] iterations make the answer insecure (RFC 9276 §3.2), reported as an error
/// with EDE 27 (unsupported NSEC3 iterations value). Returns [`Coverage::OptOut`] when the
/// NSEC3 covering the next closer name has the Opt-Out flag (RFC 5155 §9.2); that is also how
/// a NODATA for DS at an unsigned delegation left out of the chain is proven (§8.6).
///
/// # Errors
/// A [`Reason`] saying which part of the proof is missing.
pub fn check_nsec3(
    zone: &Name,
    qname: &Name,
    claim: Claim,
    nsec3s: &[(Name, Vec<u8>)],
) -> Result<Coverage, Reason> {
    let mut params: Option<Nsec3Params> = None;
    let mut recs = Vec::new();
    for (owner, rdata) in nsec3s {
        if owner.parent().as_ref() != Some(zone) {
            continue;
        }
        let Some((p, alg, rest)) = Nsec3Params::parse(rdata) else {
            continue;
        };
        if alg != HASH_SHA1 {
            continue;
        }
        if p.iterations > MAX_ITERATIONS {
            return Err(Reason::new(
                Ede::UNSUPPORTED_NSEC3_ITERATIONS,
                format!("NSEC3 iterations {} exceed {MAX_ITERATIONS}", p.iterations),
            ));
        }
        let next_len = usize::from(*rest.first().unwrap_or(&0));
        let (Some(next), Some(hash)) = (rest.get(1..1 + next_len), owner_hash(owner)) else {
            continue;
        };
        let types = read_type_bitmap(&rest[1 + next_len..]).unwrap_or_default();
        recs.push(Nsec3 {
            hash,
            next: next.to_vec(),
            opt_out: rdata[1] & FLAG_OPT_OUT != 0,
            types,
        });
        params.get_or_insert(p);
    }
    let params = params.ok_or_else(|| bogus(format!("no usable NSEC3 records for {qname}")))?;
    let matching = |n: &Name| {
        let h = params.hash(n);
        recs.iter().find(|r| r.hash == h)
    };
    let covering = |n: &Name| {
        let h = params.hash(n);
        recs.iter().find(|r| r.covers(&h))
    };
    // The coverage of a proof whose next closer name `nc` is covered by `r`.
    let span = |r: &Nsec3, nc: &Name| {
        if r.opt_out {
            Coverage::OptOut {
                next_closer: nc.clone(),
            }
        } else {
            Coverage::Complete
        }
    };
    match claim {
        Claim::NoData(qtype) => {
            if let Some(r) = matching(qname) {
                if r.types.contains(&qtype) || r.types.contains(&RrType::CNAME) {
                    return Err(bogus(format!("NSEC3 for {qname} lists {qtype} or CNAME")));
                }
                return Ok(Coverage::Complete);
            }
            let (ce, nc) = closest_encloser(zone, qname, &matching).map_err(|_| {
                bogus(format!(
                    "no NSEC3 matches {qname} (nor proves a wildcard NODATA for it)"
                ))
            })?;
            let cover = covering(&nc).ok_or_else(|| {
                bogus(format!(
                    "no NSEC3 matches {qname} nor covers its next closer name {nc}"
                ))
            })?;
            // RFC 5155 §8.6: NODATA for DS at an unsigned delegation left out of an opt-out
            // chain is a closest encloser proof whose next closer NSEC3 has Opt-Out.
            if qtype == RrType::DS && cover.opt_out {
                return Ok(span(cover, &nc));
            }
            // RFC 5155 §8.7, wildcard NODATA: a closest encloser proof and an NSEC3 matching
            // the wildcard at the closest encloser, which lists neither QTYPE nor CNAME.
            let wildcard = ce
                .prepend_label(b"*")
                .map_err(|_| bogus("wildcard name too long".into()))?;
            let r = matching(&wildcard).ok_or_else(|| {
                bogus(format!(
                    "no NSEC3 matches {qname} (nor proves a wildcard NODATA for it)"
                ))
            })?;
            if r.types.contains(&qtype) || r.types.contains(&RrType::CNAME) {
                return Err(bogus(format!(
                    "NSEC3 for {wildcard} lists {qtype} or CNAME"
                )));
            }
            Ok(span(cover, &nc))
        }
        Claim::NoDs => {
            if let Some(r) = matching(qname) {
                if r.types.contains(&RrType::NS)
                    && !r.types.contains(&RrType::DS)
                    && !r.types.contains(&RrType::SOA)
                {
                    return Ok(Coverage::Complete);
                }
                return Err(bogus(format!(
                    "NSEC3 for {qname} does not show an unsigned delegation"
                )));
            }
            // Opt-out: the next closer name is covered by an opt-out NSEC3 (RFC 5155 §8.6).
            let (_, nc) = closest_encloser(zone, qname, &matching)?;
            match covering(&nc) {
                Some(r) if r.opt_out => Ok(span(r, &nc)),
                _ => Err(bogus(format!("no NSEC3 proves {qname} has no DS"))),
            }
        }
        Claim::Expanded { source } => {
            let nc = next_closer(qname, &source)
                .ok_or_else(|| bogus(format!("{qname} is not below {source}")))?;
            let r = covering(&nc).ok_or_else(|| bogus(format!("no NSEC3 covers {nc}")))?;
            Ok(span(r, &nc))
        }
        Claim::NxDomain => {
            let (ce, nc) = closest_encloser(zone, qname, &matching)?;
            let r = covering(&nc)
                .ok_or_else(|| bogus(format!("no NSEC3 covers the next closer name {nc}")))?;
            let wildcard = ce
                .prepend_label(b"*")
                .map_err(|_| bogus("wildcard name too long".into()))?;
            covering(&wildcard)
                .ok_or_else(|| bogus(format!("no NSEC3 proves the absence of {wildcard}")))?;
            Ok(span(r, &nc))
        }
    }
}

/// Finds the closest encloser of `qname` with a matching NSEC3 and the next closer name
/// (RFC 5155 §8.3).
fn closest_encloser<'r, F>(zone: &Name, qname: &Name, matching: &F) -> Result<(Name, Name), Reason>
where
    F: Fn(&Name) -> Option<&'r Nsec3>,
{
    let mut child = qname.clone();
    let mut cur = qname.parent();
    while let Some(c) = cur {
        if !c.is_subdomain_of(zone) {
            break;
        }
        if matching(&c).is_some() {
            return Ok((c, child));
        }
        child = c.clone();
        cur = c.parent();
    }
    Err(bogus(format!("no closest encloser proof for {qname}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::keyfile::{KeyRole, ZoneKey};
    use crate::dnssec::sign::{sign_zone, Denial, SigningPolicy};
    use crate::dnssec::{Algorithm, Profile, Provider};
    use crate::zone::Zone;
    use crate::zonefile::ZoneFileReader;

    fn signed(denial: Denial) -> Zone {
        signed_with(denial, "")
    }

    fn signed_with(denial: Denial, extra: &str) -> Zone {
        let origin: Name = "example.".parse().unwrap();
        let text = "@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n\
                    sub NS ns.sub\nns.sub A 192.0.2.3\nb.ent A 192.0.2.4\n*.w TXT x\n";
        let recs = ZoneFileReader::new(Some(origin.clone()), Some(60))
            .read_str(&format!("{text}{extra}"), "t")
            .unwrap();
        let mut z = Zone::from_records(origin.clone(), recs).unwrap();
        let key = ZoneKey::generate(
            &origin,
            Algorithm::Ed25519,
            KeyRole::Csk,
            &Profile::default_profile(),
            &Provider::default_provider(),
            60,
        )
        .unwrap();
        let policy = SigningPolicy {
            inception: 0,
            expiration: 1 << 31,
            denial,
            published_dnskeys: None,
        };
        sign_zone(&mut z, &[key], &policy, &|_, _| {}).unwrap();
        z
    }

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    /// An NSEC RDATA as a compact denial makes it (RFC 9824 §3): next name `\000.<owner>`.
    fn compact(owner: &str, types: &[RrType]) -> (Name, Vec<u8>) {
        let owner = n(owner);
        let mut rdata = owner.prepend_label(&[0]).unwrap().as_wire().to_vec();
        crate::rdata::write_type_bitmap(&mut rdata, types);
        (owner, rdata)
    }

    /// RFC 9824: an NSEC at QNAME listing NXNAME proves NXDOMAIN (restored RCODE) and, for a
    /// validator that ignores NXNAME, NODATA; without NXNAME it proves NODATA only, and a
    /// listed QTYPE is no proof of NODATA.
    #[test]
    fn compact_denial_proofs() {
        let zone = n("example.");
        let q = n("nope.example.");
        let nx = [compact(
            "nope.example.",
            &[RrType::RRSIG, RrType::NSEC, RrType::NXNAME],
        )];
        assert!(check_nsec(&zone, &q, Claim::NxDomain, &nx).is_ok());
        assert!(check_nsec(&zone, &q, Claim::NoData(RrType::A), &nx).is_ok());
        let plain = [compact("nope.example.", &[RrType::RRSIG, RrType::NSEC])];
        assert!(check_nsec(&zone, &q, Claim::NxDomain, &plain).is_err());
        assert!(check_nsec(&zone, &q, Claim::NoData(RrType::A), &plain).is_ok());
        let www = [compact(
            "www.example.",
            &[RrType::A, RrType::RRSIG, RrType::NSEC],
        )];
        let w = n("www.example.");
        assert!(check_nsec(&zone, &w, Claim::NoData(RrType::AAAA), &www).is_ok());
        assert!(check_nsec(&zone, &w, Claim::NoData(RrType::A), &www).is_err());
        assert!(check_nsec(&zone, &w, Claim::NxDomain, &www).is_err());
        // Another name's NXNAME proves nothing about QNAME.
        assert!(check_nsec(&zone, &w, Claim::NxDomain, &nx).is_err());
    }

    #[test]
    fn nsec_proofs() {
        let z = signed(Denial::Nsec);
        let all: Vec<(Name, Vec<u8>)> = z
            .nodes
            .iter()
            .filter_map(|(o, node)| {
                node.get(&RrType::NSEC)
                    .map(|s| (o.clone(), s.rdatas[0].clone()))
            })
            .collect();
        let zone = n("example.");
        assert!(check_nsec(&zone, &n("nope.example."), Claim::NxDomain, &all).is_ok());
        assert!(check_nsec(&zone, &n("www.example."), Claim::NoData(RrType::AAAA), &all).is_ok());
        assert!(check_nsec(&zone, &n("sub.example."), Claim::NoDs, &all).is_ok());
        // An empty non-terminal (ent above b.ent): NODATA for any type, never NXDOMAIN.
        let ent = n("ent.example.");
        assert!(check_nsec(&zone, &ent, Claim::NoData(RrType::A), &all).is_ok());
        assert!(check_nsec(&zone, &ent, Claim::NxDomain, &all).is_err());
        let expanded = Claim::Expanded {
            source: n("example."),
        };
        assert!(check_nsec(&zone, &ent, expanded, &all).is_err());
        // Wildcard NODATA (RFC 4035 §3.1.3.4): q.w does not exist, *.w has no A.
        assert!(check_nsec(&zone, &n("q.w.example."), Claim::NoData(RrType::A), &all).is_ok());
        assert!(check_nsec(&zone, &n("q.w.example."), Claim::NoData(RrType::TXT), &all).is_err());
        assert!(check_nsec(&zone, &n("q.example."), Claim::NoData(RrType::A), &all).is_err());
        let no_wildcard: Vec<_> = all
            .iter()
            .filter(|(o, _)| *o != n("*.w.example."))
            .cloned()
            .collect();
        assert!(check_nsec(
            &zone,
            &n("q.w.example."),
            Claim::NoData(RrType::A),
            &no_wildcard
        )
        .is_err());
        // Wrong claims fail.
        assert!(check_nsec(&zone, &n("www.example."), Claim::NoData(RrType::A), &all).is_err());
        assert!(check_nsec(&zone, &n("www.example."), Claim::NoDs, &all).is_err());
        // RFC 6840 §4.1: the NSEC at the delegation point sub.example. spans a.sub.example.
        // and *.sub.example. in canonical order, but those names are in the child zone.
        assert!(check_nsec(&zone, &n("a.sub.example."), Claim::NxDomain, &all).is_err());
        // A proof that does not cover the name: only the NSEC at the apex.
        let apex_only: Vec<_> = all.iter().filter(|(o, _)| *o == zone).cloned().collect();
        assert!(check_nsec(&zone, &n("x.www.example."), Claim::NxDomain, &apex_only).is_err());
    }

    #[test]
    fn nsec3_proofs() {
        let z = signed(Denial::Nsec3(Nsec3Params::default()));
        let all: Vec<(Name, Vec<u8>)> = z
            .nsec3
            .iter()
            .map(|(o, s)| (o.clone(), s.rdatas[0].clone()))
            .collect();
        let zone = n("example.");
        assert!(check_nsec3(&zone, &n("nope.example."), Claim::NxDomain, &all).is_ok());
        assert!(check_nsec3(&zone, &n("a.b.ent.example."), Claim::NxDomain, &all).is_ok());
        assert!(check_nsec3(&zone, &n("www.example."), Claim::NoData(RrType::TXT), &all).is_ok());
        assert!(check_nsec3(&zone, &n("ent.example."), Claim::NoData(RrType::A), &all).is_ok());
        assert!(check_nsec3(&zone, &n("sub.example."), Claim::NoDs, &all).is_ok());
        assert!(check_nsec3(&zone, &n("www.example."), Claim::NoData(RrType::A), &all).is_err());
        // Wildcard NODATA (RFC 5155 §8.7): q.w does not exist, *.w has no A.
        assert!(check_nsec3(&zone, &n("q.w.example."), Claim::NoData(RrType::A), &all).is_ok());
        assert!(check_nsec3(&zone, &n("q.w.example."), Claim::NoData(RrType::TXT), &all).is_err());
        assert!(check_nsec3(&zone, &n("q.example."), Claim::NoData(RrType::A), &all).is_err());
        let wildcard_hash = Nsec3Params::default().hash(&n("*.w.example."));
        let no_wildcard: Vec<_> = all
            .iter()
            .filter(|(o, _)| owner_hash(o).unwrap() != wildcard_hash)
            .cloned()
            .collect();
        assert!(check_nsec3(
            &zone,
            &n("q.w.example."),
            Claim::NoData(RrType::A),
            &no_wildcard
        )
        .is_err());
        assert!(check_nsec3(&zone, &n("www.example."), Claim::NxDomain, &all).is_err());
        // Drop the record covering the wildcard: NXDOMAIN must fail.
        let params = Nsec3Params::default();
        let wild = params.hash(&n("*.example."));
        let pruned: Vec<_> = all
            .iter()
            .filter(|(o, r)| {
                let rec_hash = owner_hash(o).unwrap();
                let (_, _, rest) = Nsec3Params::parse(r).unwrap();
                let next = &rest[1..1 + usize::from(rest[0])];
                let covers = if rec_hash.as_slice() < next {
                    rec_hash.as_slice() < wild.as_slice() && wild.as_slice() < next
                } else {
                    rec_hash.as_slice() < wild.as_slice() || wild.as_slice() < next
                };
                !covers
            })
            .cloned()
            .collect();
        assert!(check_nsec3(&zone, &n("nope.example."), Claim::NxDomain, &pruned).is_err());
    }

    /// Every NSEC3 of `z` as (owner, RDATA).
    fn nsec3_records(z: &Zone) -> Vec<(Name, Vec<u8>)> {
        z.nsec3
            .iter()
            .map(|(o, s)| (o.clone(), s.rdatas[0].clone()))
            .collect()
    }

    #[test]
    fn nsec3_opt_out_spans_are_reported() {
        // RFC 5155 §9.2: a proof whose next closer NSEC3 has Opt-Out is not complete. A signed
        // delegation (DS) stays in the chain, the unsigned sub. is left out.
        let ds = "signed NS ns.signed\nsigned DS 1 8 2 \
                  0000000000000000000000000000000000000000000000000000000000000000\n";
        let opt_out = Nsec3Params {
            opt_out: true,
            ..Nsec3Params::default()
        };
        let all = nsec3_records(&signed_with(Denial::Nsec3(opt_out), ds));
        let zone = n("example.");
        let optout_of = |r: Result<Coverage, Reason>| match r.unwrap() {
            Coverage::OptOut { next_closer } => Some(next_closer),
            Coverage::Complete => None,
        };
        let nope = check_nsec3(&zone, &n("nope.example."), Claim::NxDomain, &all);
        assert_eq!(optout_of(nope), Some(n("nope.example.")));
        let deep = check_nsec3(&zone, &n("a.b.nope.example."), Claim::NxDomain, &all);
        assert_eq!(optout_of(deep), Some(n("nope.example.")));
        // A name with an NSEC3 of its own is proven completely.
        let www = check_nsec3(&zone, &n("www.example."), Claim::NoData(RrType::TXT), &all);
        assert_eq!(optout_of(www), None);
        let signed_ds = check_nsec3(&zone, &n("signed.example."), Claim::NoDs, &all);
        assert!(signed_ds.is_err(), "signed. has a DS");
        // The unsigned delegation: no DS (§8.6), through the opt-out span only.
        let sub = check_nsec3(&zone, &n("sub.example."), Claim::NoDs, &all);
        assert_eq!(optout_of(sub), Some(n("sub.example.")));
        let sub_ds = check_nsec3(&zone, &n("sub.example."), Claim::NoData(RrType::DS), &all);
        assert_eq!(optout_of(sub_ds), Some(n("sub.example.")));
        // Wildcard expansion and wildcard NODATA through the span.
        let expanded = Claim::Expanded {
            source: n("w.example."),
        };
        let q = n("q.w.example.");
        assert_eq!(
            optout_of(check_nsec3(&zone, &q, expanded, &all)),
            Some(q.clone())
        );
        let nodata = check_nsec3(&zone, &q, Claim::NoData(RrType::A), &all);
        assert_eq!(optout_of(nodata), Some(q));
        // Without opt-out the same proofs are complete.
        let plain = nsec3_records(&signed_with(Denial::Nsec3(Nsec3Params::default()), ds));
        let nope = check_nsec3(&zone, &n("nope.example."), Claim::NxDomain, &plain);
        assert_eq!(optout_of(nope), None);
        let nodata = check_nsec3(&zone, &n("q.w.example."), Claim::NoData(RrType::A), &plain);
        assert_eq!(optout_of(nodata), None);
        // NODATA for another type at the unsigned delegation is not proven by the span.
        let sub_a = check_nsec3(&zone, &n("sub.example."), Claim::NoData(RrType::A), &all);
        assert!(sub_a.is_err());
    }
}

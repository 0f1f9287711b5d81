//! Whole-zone verification, as `ldns-verify-zone` and BIND's `dnssec-verify` do: every RRSIG
//! checked against the DNSKEYs in the zone (key tag, algorithm via the profile, validity
//! window, signature), every authoritative RRset signed by each algorithm of the DNSKEY RRset
//! (RFC 4035 §2.2), and the NSEC (RFC 4034 §4) or NSEC3 (RFC 5155 §7–8) chain complete.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::algorithm::Algorithm;
use super::algorithm::SecAlg;
use super::dnskey::{key_tag, DnskeyRef};
use super::mtl::LadderCache;
use super::nsec3::{owner_hash, Nsec3Params, MAX_ITERATIONS};
use super::profile::Profile;
use super::provider::Provider;
use super::rrsig::{signed_data, signing_owner, Rrsig};
use crate::name::Name;
use crate::rr::{Class, RrType};
use crate::time::serial_le;
use crate::wire::rdata::{Nsec, Nsec3, Nsec3Param};
use crate::zone::{Authority, RRset, Zone};

/// What to check.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// The time at which validity windows are evaluated, UNIX seconds.
    pub now: u64,
    /// Only check the RRSIGs present (for partial data such as `dig` output): no completeness
    /// of signatures, no NSEC/NSEC3 chain.
    pub signatures_only: bool,
}

impl VerifyOptions {
    /// Check everything (signatures, their completeness, the NSEC/NSEC3 chain) at `now`, UNIX
    /// seconds.
    pub fn at(now: u64) -> VerifyOptions {
        VerifyOptions {
            now,
            signatures_only: false,
        }
    }

    /// Check only the RRSIGs present at `now`, UNIX seconds, when `signatures_only` is true
    /// (see [`VerifyOptions::signatures_only`]); otherwise as [`VerifyOptions::at`].
    pub fn signatures_only_at(now: u64, signatures_only: bool) -> VerifyOptions {
        VerifyOptions {
            now,
            signatures_only,
        }
    }
}

/// One problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Owner name of the RRset (or NSEC3 record).
    pub owner: Name,
    /// Type of the RRset.
    pub rtype: RrType,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.owner, self.rtype, self.reason)
    }
}

/// The outcome of [`verify_zone`].
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct VerifyReport {
    /// Every problem found; empty means the zone verifies.
    pub failures: Vec<Failure>,
    /// RRSIG records examined.
    pub signatures_checked: usize,
    /// RRSIG records that verified and are within their validity window.
    pub signatures_valid: usize,
}

impl VerifyReport {
    /// True if nothing failed.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }
}

struct Checker<'a> {
    zone: &'a Zone,
    profile: &'a Profile,
    provider: &'a Provider,
    opts: &'a VerifyOptions,
    /// DNSKEY RDATA by owner name (any owner, so partial dumps of several zones work).
    keys: BTreeMap<&'a Name, Vec<&'a [u8]>>,
    /// MTL ladders from the zone's valid full signatures, for its condensed signatures.
    ladders: LadderCache,
    report: VerifyReport,
}

/// Most MTL ladders kept while verifying one zone (one per key and series in practice).
const MAX_LADDERS: usize = 64;

/// An RRSIG made ready to verify: its algorithm, the data it covers and the candidate keys.
struct Prepared<'k> {
    alg: Algorithm,
    tag: u16,
    data: Vec<u8>,
    candidates: Vec<&'k [u8]>,
}

/// Verifies a signed zone. See the module doc for what is checked.
pub fn verify_zone(
    zone: &Zone,
    profile: &Profile,
    provider: &Provider,
    opts: &VerifyOptions,
) -> VerifyReport {
    verify_zone_with(zone, &[], profile, provider, opts)
}

/// [`verify_zone`] for a zone whose apex also has signing keys that are not published:
/// `unpublished` holds their DNSKEY RDATA (wire format), used as if it were in the apex
/// DNSKEY RRset, so their signatures are checked and every RRset must carry one of their
/// algorithms too (the first step of an algorithm rollover, RFC 6781 §4.1.4).
pub fn verify_zone_with(
    zone: &Zone,
    unpublished: &[Vec<u8>],
    profile: &Profile,
    provider: &Provider,
    opts: &VerifyOptions,
) -> VerifyReport {
    let mut keys: BTreeMap<&Name, Vec<&[u8]>> = zone
        .nodes
        .iter()
        .filter_map(|(name, node)| {
            node.get(&RrType::DNSKEY)
                .map(|s| (name, s.rdatas.iter().map(Vec::as_slice).collect()))
        })
        .collect();
    if !unpublished.is_empty() {
        keys.entry(&zone.origin)
            .or_default()
            .extend(unpublished.iter().map(Vec::as_slice));
    }
    let mut checker = Checker {
        zone,
        profile,
        provider,
        opts,
        keys,
        ladders: LadderCache::new(MAX_LADDERS),
        report: VerifyReport::default(),
    };
    checker.collect_ladders();
    checker.run();
    checker.report
}

impl Checker<'_> {
    fn fail(&mut self, owner: &Name, rtype: RrType, reason: impl Into<String>) {
        self.report.failures.push(Failure {
            owner: owner.clone(),
            rtype,
            reason: reason.into(),
        });
    }

    fn run(&mut self) {
        let zone = self.zone;
        if !self.opts.signatures_only && !self.keys.contains_key(&zone.origin) {
            self.fail(&zone.origin, RrType::DNSKEY, "no DNSKEY RRset at the apex");
        }
        let apex_algs: BTreeSet<SecAlg> = self
            .keys
            .get(&zone.origin)
            .into_iter()
            .flatten()
            .filter_map(|k| DnskeyRef::parse(k))
            .map(|k| k.algorithm)
            .collect();
        for (name, node) in &zone.nodes {
            let authority = zone.authority(name);
            for (rtype, set) in node {
                let needs_sig = match authority {
                    Authority::Apex | Authority::Authoritative => true,
                    Authority::Delegation => matches!(*rtype, RrType::DS | RrType::NSEC),
                    Authority::Glue => false,
                };
                self.check_rrset(name, *rtype, set, needs_sig, &apex_algs);
            }
        }
        for (name, set) in &zone.nsec3 {
            self.check_rrset(name, RrType::NSEC3, set, true, &apex_algs);
        }
        if !self.opts.signatures_only {
            let nsec3param = zone.rrset(&zone.origin, RrType::NSEC3PARAM).cloned();
            match nsec3param {
                Some(p) => self.check_nsec3_chain(&p),
                None => self.check_nsec_chain(),
            }
        }
    }

    fn check_rrset(
        &mut self,
        owner: &Name,
        rtype: RrType,
        set: &RRset,
        needs_sig: bool,
        apex_algs: &BTreeSet<SecAlg>,
    ) {
        if set.rdatas.is_empty() {
            if !set.rrsigs.is_empty() {
                self.fail(owner, rtype, "RRSIG covers a type with no records here");
            }
            return;
        }
        // Algorithms with an RRSIG here: a bad one is reported once, as itself, not again as
        // a missing algorithm.
        let mut signed_algs = BTreeSet::new();
        for sig in &set.rrsigs {
            self.report.signatures_checked += 1;
            if let Some(parsed) = Rrsig::parse(sig) {
                signed_algs.insert(parsed.fields.algorithm);
            }
            match self.check_signature(owner, set, sig) {
                Ok(()) => self.report.signatures_valid += 1,
                Err(reason) => self.fail(owner, rtype, reason),
            }
        }
        if needs_sig && !self.opts.signatures_only {
            for alg in apex_algs.difference(&signed_algs) {
                self.fail(
                    owner,
                    rtype,
                    format!("no valid RRSIG with algorithm {alg} (RFC 4035 §2.2)"),
                );
            }
        }
    }

    /// Verifies every MTL full signature in the zone and keeps the ladders, so condensed
    /// signatures can be checked against them (draft-fregly-dnsop-slh-dsa-mtl-dnssec).
    fn collect_ladders(&mut self) {
        let zone = self.zone;
        let sets = zone
            .nodes
            .iter()
            .flat_map(|(name, node)| node.values().map(move |set| (name, set)))
            .chain(zone.nsec3.iter());
        let mut found = Vec::new();
        for (owner, set) in sets {
            for rdata in &set.rrsigs {
                let full = Rrsig::parse(rdata).is_some_and(|s| s.signature.first() == Some(&1));
                if !full {
                    continue;
                }
                let Ok(p) = self.prepare(owner, set, rdata) else {
                    continue;
                };
                if !p.alg.is_mtl() {
                    continue;
                }
                let sig = Rrsig::parse(rdata).expect("parsed above").signature;
                for k in &p.candidates {
                    let checked =
                        super::mtl::verify_signature(p.alg, &k[4..], &p.data, sig, &self.ladders);
                    if let Ok(Some(ladder)) = checked {
                        found.push(ladder);
                    }
                }
            }
        }
        for ladder in found {
            self.ladders.insert(ladder);
        }
    }

    /// Checks one RRSIG.
    fn check_signature(&self, owner: &Name, set: &RRset, rdata: &[u8]) -> Result<(), String> {
        let p = self.prepare(owner, set, rdata)?;
        let signature = Rrsig::parse(rdata).expect("prepared").signature;
        let (alg, tag) = (p.alg, p.tag);
        let scheme = self
            .provider
            .scheme(alg)
            .map_err(|e| format!("RRSIG key tag {tag}: {e}"))?;
        // Key tags can collide (RFC 4034 §5.3.1 note); try every matching key.
        let mut last = None;
        for k in &p.candidates {
            let public = &k[4..];
            let result = if alg.is_mtl() {
                super::mtl::verify_signature(alg, public, &p.data, signature, &self.ladders)
                    .map(|_| ())
            } else {
                scheme.verify(public, &p.data, signature)
            };
            match result {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e @ super::provider::CryptoError::LadderRequired(_)) => format!(
                "RRSIG key tag {tag} ({alg}): {e} (no valid full signature of this series in the zone)"
            ),
            Some(e @ super::provider::CryptoError::MalformedMtl(_)) => {
                format!("RRSIG key tag {tag} ({alg}): {e}")
            }
            _ => format!("RRSIG key tag {tag} ({alg}): signature does not verify"),
        })
    }

    /// Parses an RRSIG and checks what needs no crypto: signer, algorithm, validity window,
    /// labels, a DNSKEY with its tag and algorithm. Returns the signed data and candidate keys.
    fn prepare(&self, owner: &Name, set: &RRset, rdata: &[u8]) -> Result<Prepared<'_>, String> {
        let sig = Rrsig::parse(rdata).ok_or("malformed RRSIG RDATA")?;
        let f = &sig.fields;
        let tag = f.key_tag;
        if !owner.is_subdomain_of(&f.signer) {
            return Err(format!(
                "signer {} is not an ancestor of the owner",
                f.signer
            ));
        }
        let alg = self.profile.algorithm(f.algorithm).ok_or_else(|| {
            format!(
                "RRSIG algorithm {} is not mapped by profile {:?}",
                f.algorithm,
                self.profile.name()
            )
        })?;
        let now = self.opts.now as u32;
        if !serial_le(f.inception, now) {
            return Err(format!(
                "RRSIG key tag {tag} ({alg}) is not yet valid (inception {})",
                crate::time::to_yyyymmddhhmmss(u64::from(f.inception))
            ));
        }
        if !serial_le(now, f.expiration) {
            return Err(format!(
                "RRSIG key tag {tag} ({alg}) has expired ({})",
                crate::time::to_yyyymmddhhmmss(u64::from(f.expiration))
            ));
        }
        let signed_owner = signing_owner(owner, f.labels)
            .ok_or_else(|| format!("RRSIG key tag {tag}: labels field {} too large", f.labels))?;
        let candidates: Vec<&[u8]> = self
            .keys
            .get(&f.signer)
            .into_iter()
            .flatten()
            .copied()
            .filter(|k| {
                DnskeyRef::parse(k).is_some_and(|d| {
                    d.algorithm == f.algorithm && d.is_zone_key() && d.protocol == 3
                }) && key_tag(k) == tag
            })
            .collect();
        if candidates.is_empty() {
            return Err(format!(
                "no DNSKEY at {} with key tag {tag} and algorithm {}",
                f.signer, f.algorithm
            ));
        }
        // RFC 4034 §3.1.4: original TTL is what was signed; set.ttl may be lower after a cache.
        let data = signed_data(
            f,
            &signed_owner,
            Class::IN,
            set.rdatas.iter().map(Vec::as_slice),
        );
        Ok(Prepared {
            alg,
            tag,
            data,
            candidates,
        })
    }

    fn expected_types(&self, name: &Name) -> BTreeSet<RrType> {
        self.zone.nodes[name]
            .iter()
            .filter(|(_, s)| !s.rdatas.is_empty())
            .map(|(t, _)| *t)
            .collect()
    }

    fn check_nsec_chain(&mut self) {
        let zone = self.zone;
        let names: Vec<&Name> = zone
            .nodes
            .keys()
            .filter(|n| zone.authority(n) != Authority::Glue)
            .filter(|n| !self.expected_types(n).is_empty())
            .collect();
        for (i, name) in names.iter().enumerate() {
            let next = names[(i + 1) % names.len()];
            let Some(set) = zone.rrset(name, RrType::NSEC) else {
                self.fail(name, RrType::NSEC, "missing NSEC record");
                continue;
            };
            let Some(nsec) = Nsec::parse(&set.rdatas[0]) else {
                self.fail(name, RrType::NSEC, "malformed NSEC RDATA");
                continue;
            };
            if nsec.next != *next {
                self.fail(
                    name,
                    RrType::NSEC,
                    format!("next name {} should be {next}", nsec.next),
                );
            }
            let listed: BTreeSet<RrType> = nsec.types.iter().collect();
            let mut present = self.expected_types(name);
            present.insert(RrType::RRSIG);
            if listed != present {
                self.fail(
                    name,
                    RrType::NSEC,
                    format!(
                        "type bitmap {} should be {}",
                        type_list(&listed),
                        type_list(&present)
                    ),
                );
            }
        }
    }

    fn check_nsec3_chain(&mut self, nsec3param: &RRset) {
        let zone = self.zone;
        let Some(params) = Nsec3Param::parse(&nsec3param.rdatas[0]) else {
            self.fail(&zone.origin, RrType::NSEC3PARAM, "malformed NSEC3PARAM");
            return;
        };
        let params = Nsec3Params::from_view(&params);
        if params.iterations > MAX_ITERATIONS {
            self.fail(
                &zone.origin,
                RrType::NSEC3PARAM,
                format!(
                    "{} iterations exceed the limit of {MAX_ITERATIONS} (RFC 9276)",
                    params.iterations
                ),
            );
            return;
        }
        // Opt-Out is a flag of the NSEC3 records, never of NSEC3PARAM (RFC 5155 §4.1.2).
        let opt_out = zone
            .nsec3
            .values()
            .filter_map(|set| Nsec3::parse(set.rdatas.first()?))
            .any(|n| n.opt_out());
        // Expected: every non-glue name with data, plus empty non-terminals; with Opt-Out,
        // unsigned delegations may be left out (RFC 5155 §7.1).
        let mut expected: BTreeMap<Vec<u8>, (Name, Option<BTreeSet<RrType>>)> = BTreeMap::new();
        let mut optional: BTreeSet<Vec<u8>> = BTreeSet::new();
        for name in zone.nodes.keys() {
            let authority = zone.authority(name);
            if authority == Authority::Glue {
                continue;
            }
            let mut types = self.expected_types(name);
            if types.is_empty() {
                continue;
            }
            let signed = authority != Authority::Delegation || types.contains(&RrType::DS);
            if signed {
                types.insert(RrType::RRSIG);
            }
            if opt_out && !signed {
                optional.insert(params.hash(name).to_vec());
            }
            expected.insert(params.hash(name).to_vec(), (name.clone(), Some(types)));
        }
        for ent in zone.empty_non_terminals() {
            expected
                .entry(params.hash(&ent).to_vec())
                .or_insert((ent, None));
        }
        let mut present: Vec<(Vec<u8>, &Name, &[u8])> = Vec::new();
        for (owner, set) in &zone.nsec3 {
            if set.rdatas.is_empty() {
                // An RRSIG for an NSEC3 that is not there: check_rrset reported it.
                continue;
            }
            match (owner_hash(owner), set.rdatas.first()) {
                (Some(h), Some(r)) if owner.parent().as_ref() == Some(&zone.origin) => {
                    present.push((h, owner, r))
                }
                _ => self.fail(
                    owner,
                    RrType::NSEC3,
                    "NSEC3 owner is not <base32hex>.<apex>",
                ),
            }
        }
        present.sort();
        for (i, (hash, owner, rdata)) in present.iter().enumerate() {
            let next_expected = &present[(i + 1) % present.len()].0;
            let Some(nsec3) = Nsec3::parse(rdata) else {
                self.fail(owner, RrType::NSEC3, "malformed NSEC3 RDATA");
                continue;
            };
            let p = nsec3.params;
            if p.iterations != params.iterations || p.salt != params.salt.as_slice() {
                self.fail(owner, RrType::NSEC3, "parameters differ from NSEC3PARAM");
            }
            if nsec3.next_hashed != next_expected.as_slice() {
                self.fail(
                    owner,
                    RrType::NSEC3,
                    "next hashed owner does not follow the chain",
                );
            }
            let listed: BTreeSet<RrType> = nsec3.types.iter().collect();
            match expected.get(hash) {
                None => self.fail(owner, RrType::NSEC3, "hash matches no name in the zone"),
                Some((name, Some(types))) if &listed != types => self.fail(
                    owner,
                    RrType::NSEC3,
                    format!(
                        "type bitmap for {name} is {}, should be {}",
                        type_list(&listed),
                        type_list(types)
                    ),
                ),
                Some((name, None)) if !listed.is_empty() => self.fail(
                    owner,
                    RrType::NSEC3,
                    format!("empty non-terminal {name} should have an empty type bitmap"),
                ),
                _ => {}
            }
        }
        let have: BTreeSet<&Vec<u8>> = present.iter().map(|p| &p.0).collect();
        for (hash, (name, _)) in &expected {
            if !have.contains(hash) && !optional.contains(hash) {
                self.fail(name, RrType::NSEC3, "no NSEC3 record for this name");
            }
        }
    }
}

/// Types by mnemonic, as in a master file: `{NS SOA RRSIG}`.
fn type_list(types: &BTreeSet<RrType>) -> String {
    let names: Vec<String> = types.iter().map(ToString::to_string).collect();
    format!("{{{}}}", names.join(" "))
}

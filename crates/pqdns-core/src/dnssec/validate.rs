//! Validation of DNS answers (RFC 4035 §5, RFC 4034): DS → DNSKEY → RRSIG for one zone cut,
//! with a work budget, validity windows at a given clock, key-tag collisions tolerated, and
//! the outcome as [`Status`] with an RFC 8914 Extended DNS Error code.
//!
//! Proof is in the types. Data from the network arrives as [`UnverifiedRRset`] and stays that
//! type until a signature over it verifies:
//! - [`TrustedKeys`]: a zone's DNSKEY RRset authenticated from its DS RRset; only
//!   [`Validator::trust_dnskeys`] makes one (operator-configured keys: [`danger`]).
//! - [`VerifiedRRset`]: owns exactly what was verified (owner, type, class, RDATA, the RRSIGs
//!   that verified) with its TTL capped per RFC 4035 §5.3.3; only [`Validator::verify_rrset`]
//!   makes one (operator-configured DS anchors: [`danger`]).
//! - [`super::denial::VerifiedDenial`]: an NSEC/NSEC3 proof built only from verified RRsets.
//! - [`Status::Secure`] carries a [`Proof`], which only [`conclude`] makes, after checking that
//!   the verified RRsets and denials answer the question (CNAME chain, wildcard and negative
//!   proofs). So nothing reaches a caller as Secure without a verified signature over it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::algorithm::{Algorithm, SecAlg};
use super::denial::{Claim, VerifiedDenial};
use super::dnskey::{ds_digest, key_tag, DigestType, DnskeyRef};
use super::downgrade::SignalledAlgorithms;
use super::mtl::{self, LadderCache};
use super::profile::Profile;
use super::provider::{CryptoError, Provider, SignatureScheme};
use super::rrsig::{signed_data, signing_owner, Rrsig};
use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::time::serial_le;
use crate::wire::Ede;

/// Why validation did not reach Secure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// RFC 8914 Extended DNS Error code.
    pub ede: Ede,
    /// Human-readable explanation.
    pub text: String,
}

impl Reason {
    /// A reason with an EDE code.
    pub fn new(ede: Ede, text: impl Into<String>) -> Reason {
        Reason {
            ede,
            text: text.into(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (EDE {})", self.text, self.ede.0)
    }
}

/// Evidence that an answer validated: [`conclude`] checked that verified RRsets and denial
/// proofs answer the question. It has no public constructor, so [`Status::Secure`] cannot be
/// built anywhere else, and it is not `Clone`: a proof cannot be copied into another
/// [`Status`]. Cloning a whole `Status::Secure` (with the data it belongs to) is allowed.
///
/// ```compile_fail,E0599
/// use pqdns_core::dnssec::validate::Proof;
/// fn copy(proof: &Proof) -> Proof {
///     proof.clone()
/// }
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Proof {
    _private: (),
}

/// Validation status (RFC 4035 §4.3). The default is Indeterminate, never Secure.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum Status {
    /// A chain of verified signatures from a trust anchor answers the question.
    Secure(Proof),
    /// Provably unsigned (an authenticated insecure delegation, or only unsupported algorithms).
    Insecure(Reason),
    /// Signatures or proofs that should be there and valid are not.
    Bogus(Reason),
    /// No trust anchor covers the answer, or no answer could be validated (error RCODE,
    /// referral).
    Indeterminate(Reason),
}

impl Status {
    /// True for [`Status::Secure`].
    pub fn is_secure(&self) -> bool {
        matches!(self, Status::Secure(_))
    }

    /// True for [`Status::Bogus`].
    pub fn is_bogus(&self) -> bool {
        matches!(self, Status::Bogus(_))
    }

    /// The reason, for every status but Secure.
    pub fn reason(&self) -> Option<&Reason> {
        match self {
            Status::Secure(_) => None,
            Status::Insecure(r) | Status::Bogus(r) | Status::Indeterminate(r) => Some(r),
        }
    }

    /// `Secure`, `Insecure`, `Bogus` or `Indeterminate` (RFC 4035 §4.3 names).
    pub fn name(&self) -> &'static str {
        match self {
            Status::Secure(_) => "Secure",
            Status::Insecure(_) => "Insecure",
            Status::Bogus(_) => "Bogus",
            Status::Indeterminate(_) => "Indeterminate",
        }
    }
}

impl Clone for Status {
    fn clone(&self) -> Status {
        match self {
            Status::Secure(_) => Status::Secure(Proof { _private: () }),
            Status::Insecure(r) => Status::Insecure(r.clone()),
            Status::Bogus(r) => Status::Bogus(r.clone()),
            Status::Indeterminate(r) => Status::Indeterminate(r.clone()),
        }
    }
}

impl Default for Status {
    fn default() -> Status {
        Status::Indeterminate(Reason::new(Ede::OTHER, "not validated"))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            None => f.write_str(self.name()),
            Some(r) => write!(f, "{}: {r}", self.name()),
        }
    }
}

/// Limits that bound the work one validation may do. A post-quantum verify can cost 1000× an
/// Ed25519 one, so a hostile zone must not make us try every key against every signature.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// Signature verifications per [`Validator`] (per query), total.
    pub max_verifications: u32,
    /// RRSIGs considered per RRset.
    pub max_rrsigs_per_rrset: usize,
    /// DNSKEYs considered per zone.
    pub max_dnskeys: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_verifications: 64,
            max_rrsigs_per_rrset: 8,
            max_dnskeys: 16,
        }
    }
}

/// The rule for which algorithms may authenticate an answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PqPolicy {
    /// RFC 6840 §5.11: any supported algorithm that validates is enough.
    #[default]
    AnyAlgorithm,
    /// Every link of the chain must be post-quantum: the DS RRset (or trust anchor) must match
    /// a post-quantum DNSKEY whose signature authenticates the DNSKEY RRset, and every RRset
    /// (DS, answers, denial proofs) must carry a verified post-quantum signature. A chain with
    /// a classical link is Bogus, naming the link. This deliberately departs from RFC 6840
    /// §5.11 to stop downgrade to a classical key broken by a quantum adversary.
    RequirePq,
}

/// An RRset as received in a message section, with the RRSIG records that claim to cover it.
/// Nothing in it has been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnverifiedRRset {
    /// Owner name.
    pub owner: Name,
    /// Type.
    pub rtype: RrType,
    /// Class.
    pub class: Class,
    /// TTL in seconds: the lowest of the records' TTLs (RFC 2181 §5.2).
    pub ttl: u32,
    /// RDATA of each record, uncompressed wire format, duplicates removed.
    pub rdatas: Vec<Vec<u8>>,
    /// RDATA of the RRSIG records with this owner and class covering this type.
    pub rrsigs: Vec<Vec<u8>>,
    /// TTL of those RRSIG records in seconds (the lowest; 0 without RRSIGs).
    pub rrsig_ttl: u32,
}

impl UnverifiedRRset {
    /// Groups the records of one message section into RRsets by (owner, type, class), in
    /// order of first appearance, attaching each RRSIG to the RRset of its owner, class and
    /// type covered (RFC 4034 §3). RRSIGs covering a type absent from the section form an
    /// RRset with no RDATA.
    pub fn group(records: &[Record]) -> Vec<UnverifiedRRset> {
        let mut sets: Vec<UnverifiedRRset> = Vec::new();
        for r in records {
            let rtype = r.covered_type().unwrap_or(r.rtype);
            let i = match sets
                .iter()
                .position(|s| s.rtype == rtype && s.class == r.class && s.owner == r.owner)
            {
                Some(i) => i,
                None => {
                    sets.push(UnverifiedRRset {
                        owner: r.owner.clone(),
                        rtype,
                        class: r.class,
                        ttl: u32::MAX,
                        rdatas: Vec::new(),
                        rrsigs: Vec::new(),
                        rrsig_ttl: u32::MAX,
                    });
                    sets.len() - 1
                }
            };
            let set = &mut sets[i];
            if r.rtype == RrType::RRSIG {
                set.rrsig_ttl = set.rrsig_ttl.min(r.ttl);
                set.rrsigs.push(r.rdata.clone());
            } else {
                set.ttl = set.ttl.min(r.ttl);
                if !set.rdatas.contains(&r.rdata) {
                    set.rdatas.push(r.rdata.clone());
                }
            }
        }
        for s in &mut sets {
            if s.rdatas.is_empty() {
                s.ttl = 0;
            }
            if s.rrsigs.is_empty() {
                s.rrsig_ttl = 0;
            }
        }
        sets
    }

    /// The signer names of the RRSIGs that parse, in order, without repeats.
    pub fn signers(&self) -> Vec<Name> {
        let mut out: Vec<Name> = Vec::new();
        for s in self.rrsigs.iter().filter_map(|r| Rrsig::parse(r)) {
            if !out.contains(&s.fields.signer) {
                out.push(s.fields.signer);
            }
        }
        out
    }

    /// The records of the RRset (without RRSIGs), with the RRset TTL.
    pub fn records(&self) -> Vec<Record> {
        rrset_records(&self.owner, self.rtype, self.class, self.ttl, &self.rdatas)
    }
}

fn rrset_records(
    owner: &Name,
    rtype: RrType,
    class: Class,
    ttl: u32,
    rdatas: &[Vec<u8>],
) -> Vec<Record> {
    rdatas
        .iter()
        .map(|rdata| Record {
            owner: owner.clone(),
            rtype,
            class,
            ttl,
            rdata: rdata.clone(),
        })
        .collect()
}

/// A zone's DNSKEYs that chain to a trust anchor. Only [`Validator::trust_dnskeys`] (and, for
/// keys the operator configures, [`danger::trust_anchor_dnskeys`]) makes one.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    zone: Name,
    keys: Vec<Vec<u8>>,
    ttl: u32,
    dnskey_rrset: Option<VerifiedRRset>,
    /// The post-quantum algorithms the zone's DS RRset signalled ([`super::downgrade`]).
    signalled: SignalledAlgorithms,
}

impl TrustedKeys {
    /// The zone the keys belong to.
    pub fn zone(&self) -> &Name {
        &self.zone
    }
    /// The trusted DNSKEY RDATA.
    pub fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }
    /// How long the trust may be kept, seconds: the smaller of the DS and DNSKEY RRsets'
    /// capped TTLs (RFC 4035 §5.3.3); `u32::MAX` for operator-configured keys.
    pub fn ttl(&self) -> u32 {
        self.ttl
    }
    /// The verified DNSKEY RRset (`None` for operator-configured keys).
    pub fn dnskey_rrset(&self) -> Option<&VerifiedRRset> {
        self.dnskey_rrset.as_ref()
    }
    /// The post-quantum algorithms the zone's DS RRset signalled, which every RRset verified
    /// with these keys must use (downgrade protection, [`super::downgrade`]); empty when the
    /// DS signalled none or the protection is off.
    pub fn signalled_algorithms(&self) -> &SignalledAlgorithms {
        &self.signalled
    }
}

/// An RRset whose signature verified with trusted keys, owning exactly what was verified. Only
/// [`Validator::verify_rrset`] (and, for DS records the operator configures,
/// [`danger::trust_anchor_ds`]) makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedRRset {
    owner: Name,
    rtype: RrType,
    class: Class,
    ttl: u32,
    rdatas: Vec<Vec<u8>>,
    rrsigs: Vec<Vec<u8>>,
    /// The owner name the signature was made for (a wildcard when expanded).
    signed_owner: Name,
    /// The zone whose keys verified it; `None` for a trust anchor.
    signer: Option<Name>,
    /// Algorithm numbers of the RRSIGs that verified.
    algorithms: Vec<SecAlg>,
    post_quantum: bool,
}

impl VerifiedRRset {
    /// Owner name.
    pub fn owner(&self) -> &Name {
        &self.owner
    }
    /// Type.
    pub fn rtype(&self) -> RrType {
        self.rtype
    }
    /// Class.
    pub fn class(&self) -> Class {
        self.class
    }
    /// TTL in seconds, capped per RFC 4035 §5.3.3: the smallest of the RRset's TTL, the RRSIG
    /// records' TTL, each verified RRSIG's Original TTL, and the seconds left until its
    /// Signature Expiration at the validator's clock.
    pub fn ttl(&self) -> u32 {
        self.ttl
    }
    /// The verified RDATA (uncompressed wire format).
    pub fn rdatas(&self) -> &[Vec<u8>] {
        &self.rdatas
    }
    /// RDATA of the RRSIGs that verified (empty for a trust anchor).
    pub fn rrsigs(&self) -> &[Vec<u8>] {
        &self.rrsigs
    }
    /// The zone whose keys verified it; `None` for operator-configured trust-anchor DS records.
    pub fn signer(&self) -> Option<&Name> {
        self.signer.as_ref()
    }
    /// Algorithm numbers of the RRSIGs that verified.
    pub fn algorithms(&self) -> &[SecAlg] {
        &self.algorithms
    }
    /// True if a post-quantum signature verified it.
    pub fn is_post_quantum(&self) -> bool {
        self.post_quantum
    }
    /// True for operator-configured trust-anchor DS records.
    pub fn is_trust_anchor(&self) -> bool {
        self.signer.is_none()
    }
    /// True if the answer was synthesised from a wildcard (RFC 4035 §5.3.4).
    pub fn from_wildcard(&self) -> bool {
        self.signed_owner.is_wildcard() && !self.owner.is_wildcard()
    }
    /// The wildcard (or owner) name it was signed under.
    pub fn signed_owner(&self) -> &Name {
        &self.signed_owner
    }
    /// The same verified RRset expanded from its wildcard to `owner` (RFC 4035 §5.3.4): the
    /// RRSIGs verified over `*.<source>` hold for every name strictly below `<source>` that is
    /// not itself a wildcard. What the expansion still needs is the proof that no name closer
    /// to `owner` exists, and [`conclude`] demands it ([`Claim::Expanded`]), so this alone
    /// never makes an answer Secure. Used to synthesise wildcard answers from a validated
    /// cache (RFC 8198 §5.3).
    ///
    /// `None` unless this RRset was signed under a wildcard and `owner` is strictly below the
    /// wildcard's parent.
    pub fn expanded_to(&self, owner: &Name) -> Option<VerifiedRRset> {
        let source = self.signed_owner.parent()?;
        if !self.signed_owner.is_wildcard()
            || owner.is_wildcard()
            || *owner == source
            || !owner.is_subdomain_of(&source)
        {
            return None;
        }
        let mut expanded = self.clone();
        expanded.owner = owner.clone();
        Some(expanded)
    }
    /// The same RRset with its TTL lowered to at most `ttl` seconds: what is left of its life
    /// in a cache (RFC 8198 §5.4). Lowering a TTL never lets data live longer.
    #[must_use]
    pub fn with_ttl_at_most(mut self, ttl: u32) -> VerifiedRRset {
        self.ttl = self.ttl.min(ttl);
        self
    }
    /// The records of the RRset (without RRSIGs), with the capped TTL.
    pub fn records(&self) -> Vec<Record> {
        rrset_records(&self.owner, self.rtype, self.class, self.ttl, &self.rdatas)
    }
    /// The RRSIG records that verified, with the capped TTL.
    pub fn rrsig_records(&self) -> Vec<Record> {
        rrset_records(
            &self.owner,
            RrType::RRSIG,
            self.class,
            self.ttl,
            &self.rrsigs,
        )
    }
}

/// Constructors that skip verification, for data the operator configures (trust anchors,
/// RFC 4035 §4.4). Whatever goes in comes out trusted: never pass data from the network.
pub mod danger {
    use super::{Name, RrType, SignalledAlgorithms, TrustedKeys, VerifiedRRset};
    use crate::dnssec::dnskey::DnskeyRef;
    use crate::rr::Class;

    /// DS RDATA configured as a trust anchor for `zone`, as a [`VerifiedRRset`] without
    /// RRSIGs (TTL `u32::MAX`), to pass to [`super::Validator::trust_dnskeys`].
    pub fn trust_anchor_ds(zone: &Name, ds: Vec<Vec<u8>>) -> VerifiedRRset {
        VerifiedRRset {
            owner: zone.clone(),
            rtype: RrType::DS,
            class: Class::IN,
            ttl: u32::MAX,
            rdatas: ds,
            rrsigs: Vec::new(),
            signed_owner: zone.clone(),
            signer: None,
            algorithms: Vec::new(),
            post_quantum: false,
        }
    }

    /// DNSKEYs configured directly as trust anchors (RFC 4035 §4.4 allows DNSKEY as well as DS
    /// anchors): no signature is checked, because the operator vouches for the keys. Keys
    /// without the Zone Key flag are dropped (RFC 4034 §2.1.1).
    pub fn trust_anchor_dnskeys(zone: &Name, dnskeys: &[Vec<u8>]) -> TrustedKeys {
        TrustedKeys {
            zone: zone.clone(),
            keys: dnskeys
                .iter()
                .filter(|k| DnskeyRef::parse(k).is_some_and(|d| d.is_zone_key()))
                .cloned()
                .collect(),
            ttl: u32::MAX,
            dnskey_rrset: None,
            signalled: SignalledAlgorithms::default(),
        }
    }
}

/// Checks that verified RRsets and denial proofs answer (`qname`, `qtype`) and, if they do
/// completely, returns [`Status::Secure`] with its [`Proof`]:
/// - `answers` is the chain from `qname`: CNAME RRsets (RFC 1034 §3.6.2), each owned by the
///   previous one's target, or DNAME RRsets owned by an ancestor of the current name, which
///   redirect it by substitution (RFC 6672 §3.1; a synthesized CNAME is not needed, and for
///   QTYPE CNAME a final DNAME answers), then the `qtype` RRset (for QTYPE ANY, one RRset of
///   any type, a CNAME included: [`RrType::answers`]); an RRset off the chain is an error;
/// - every RRset synthesised from a wildcard has a [`Claim::Expanded`] proof for its owner
///   (RFC 4035 §5.3.4);
/// - if the chain ends before a `qtype` RRset, a denial proves NXDOMAIN or NODATA for the last
///   name (RFC 4035 §5.4, RFC 5155 §8).
///
/// A denial the answer needs that rests on an NSEC3 opt-out span
/// ([`super::denial::Coverage::OptOut`]) makes
/// it [`Status::Insecure`]: RFC 5155 §9.2, "The AD bit ... MUST NOT be set when returning a
/// response containing a closest (provable) encloser proof in which the NSEC3 RR that covers
/// the 'next closer' name has the Opt-Out bit set". So a Secure answer never rests on one.
/// Otherwise [`Status::Bogus`] names what is missing or off the chain.
pub fn conclude(
    qname: &Name,
    qtype: RrType,
    answers: &[VerifiedRRset],
    denials: &[VerifiedDenial],
) -> Status {
    match chain_proof(qname, qtype, answers, denials) {
        Ok(proof) => match proof.opt_out.and_then(|d| Some((d, d.opt_out()?))) {
            None => Status::Secure(Proof { _private: () }),
            Some((d, next_closer)) => Status::Insecure(Reason::new(
                Ede::OTHER,
                format!(
                    "{} for {} rests on an NSEC3 opt-out span of {} covering {next_closer}: \
                         an unsigned delegation may be there (RFC 5155 §9.2)",
                    claim_name(d.claim()),
                    d.name(),
                    d.zone()
                ),
            )),
        },
        Err(r) => Status::Bogus(r),
    }
}

/// A short name for a claim, for reasons.
fn claim_name(c: &Claim) -> String {
    match c {
        Claim::NxDomain => "NXDOMAIN".into(),
        Claim::NoData(t) => format!("NODATA ({t})"),
        Claim::NoDs => "no DS".into(),
        Claim::Expanded { source } => format!("the wildcard expansion of *.{source}"),
    }
}

/// What [`chain_proof`] found: the chain answers the question, and the first denial it needed
/// that rests on an opt-out span, if any.
struct ChainProof<'d> {
    opt_out: Option<&'d VerifiedDenial>,
}

/// The checks of [`conclude`]; among several denials proving the same, a complete one is
/// preferred.
fn chain_proof<'d>(
    qname: &Name,
    qtype: RrType,
    answers: &[VerifiedRRset],
    denials: &'d [VerifiedDenial],
) -> Result<ChainProof<'d>, Reason> {
    let bogus = |text: String| Reason::new(Ede::DNSSEC_BOGUS, text);
    let complete = |d: &VerifiedDenial| d.opt_out().is_none();
    // The denial to rely on among those matching: a complete one if there is one.
    let pick = |matching: Vec<&'d VerifiedDenial>| -> Option<&'d VerifiedDenial> {
        matching
            .iter()
            .find(|d| complete(d))
            .or_else(|| matching.first())
            .copied()
    };
    let mut opt_out: Option<&'d VerifiedDenial> = None;
    let mut name = qname.clone();
    for (i, rrset) in answers.iter().enumerate() {
        // RFC 6672 §3.1: a DNAME above the current name redirects it (the CNAME a server
        // synthesizes is unsigned and stands for nothing the DNAME does not already say).
        let redirects = rrset.rtype == RrType::DNAME
            && rrset.owner != name
            && name.is_subdomain_of(&rrset.owner);
        if rrset.owner != name && !redirects {
            return Err(bogus(format!(
                "{} {} is not on the answer chain from {qname} (expected {name})",
                rrset.owner, rrset.rtype
            )));
        }
        if rrset.from_wildcard() {
            let source = rrset.signed_owner.parent();
            let proven = pick(
                denials
                    .iter()
                    .filter(|d| {
                        d.name() == &rrset.owner
                            && matches!(d.claim(), Claim::Expanded { source: s } if Some(s) == source.as_ref())
                    })
                    .collect(),
            );
            if let Some(d) = proven.filter(|d| !complete(d)) {
                opt_out.get_or_insert(d);
            }
            if proven.is_none() {
                return Err(Reason::new(
                    Ede::NSEC_MISSING,
                    format!(
                        "{} {} expands {} without a proof that {} does not exist",
                        rrset.owner, rrset.rtype, rrset.signed_owner, rrset.owner
                    ),
                ));
            }
        }
        if redirects {
            let last = i + 1 == answers.len();
            name = rrset
                .rdatas
                .first()
                .and_then(|t| {
                    name.replace_suffix(&rrset.owner, &Name::from_wire(t).ok()?)?
                        .ok()
                })
                .ok_or_else(|| bogus(format!("malformed DNAME at {}", rrset.owner)))?;
            if last && qtype == RrType::CNAME {
                return Ok(ChainProof { opt_out });
            }
            continue;
        }
        if rrset.rtype.answers(qtype) {
            if i + 1 != answers.len() {
                return Err(bogus(format!("RRsets after the {qtype} RRset at {name}")));
            }
            return Ok(ChainProof { opt_out });
        }
        if rrset.rtype != RrType::CNAME || rrset.rdatas.len() != 1 {
            return Err(bogus(format!(
                "{} {} does not answer {qtype}",
                rrset.owner, rrset.rtype
            )));
        }
        name = Name::from_wire(&rrset.rdatas[0])
            .map_err(|_| bogus(format!("malformed CNAME at {}", rrset.owner)))?;
    }
    let denied = pick(
        denials
            .iter()
            .filter(|d| {
                d.name() == &name
                    && match d.claim() {
                        Claim::NxDomain => true,
                        Claim::NoData(t) => *t == qtype,
                        _ => false,
                    }
            })
            .collect(),
    );
    if let Some(d) = denied {
        if !complete(d) {
            opt_out.get_or_insert(d);
        }
        Ok(ChainProof { opt_out })
    } else {
        Err(Reason::new(
            Ede::NSEC_MISSING,
            format!("no verified proof that {name} has no {qtype} RRset"),
        ))
    }
}

/// Checks signatures for one query, within [`Limits`].
pub struct Validator {
    profile: Profile,
    provider: Provider,
    now: u32,
    limits: Limits,
    policy: PqPolicy,
    /// Downgrade protection by DS ([`super::downgrade`]).
    ds_downgrade_protection: bool,
    verifications: u32,
    /// Verified MTL ladders (shared with other validators by [`Validator::with_ladders`]).
    ladders: Arc<Mutex<LadderCache>>,
    /// Set when a condensed MTL signature could not be checked for want of its ladder.
    ladder_missing: bool,
}

/// Ladders a validator keeps by default (enough for a few MTL zones, each with its series).
pub const DEFAULT_LADDERS: usize = 16;

impl Validator {
    /// A validator evaluating validity windows at `now` (UNIX seconds), with downgrade
    /// protection by DS on ([`super::downgrade`]). It keeps its own copies of `profile` and
    /// `provider` (both small), so it can move to another thread.
    pub fn new(
        profile: &Profile,
        provider: &Provider,
        now: u64,
        limits: Limits,
        policy: PqPolicy,
    ) -> Validator {
        Validator {
            profile: profile.clone(),
            provider: provider.clone(),
            now: now as u32,
            limits,
            policy,
            ds_downgrade_protection: true,
            verifications: 0,
            ladders: Arc::new(Mutex::new(LadderCache::new(DEFAULT_LADDERS))),
            ladder_missing: false,
        }
    }

    /// Turns downgrade protection by DS ([`super::downgrade`]) on (the default) or off (RFC
    /// 6840 §5.11 for zones whose DS signals a post-quantum algorithm too).
    pub fn with_ds_downgrade_protection(mut self, on: bool) -> Validator {
        self.ds_downgrade_protection = on;
        self
    }

    /// True if downgrade protection by DS is on.
    pub fn ds_downgrade_protection(&self) -> bool {
        self.ds_downgrade_protection
    }

    /// Uses `ladders` for MTL signatures (draft-fregly-dnsop-slh-dsa-mtl-dnssec): ladders of
    /// full signatures verified here are added to it, and condensed signatures are checked
    /// against it with hashes only. A resolver shares one cache between its validators.
    pub fn with_ladders(mut self, ladders: Arc<Mutex<LadderCache>>) -> Validator {
        self.ladders = ladders;
        self
    }

    /// True if a condensed MTL signature could not be checked because its ladder is not held:
    /// asking again with EDNS option [`super::mtl::EDNS_FULL_SIGNATURES`] gets full signatures.
    pub fn ladder_missing(&self) -> bool {
        self.ladder_missing
    }

    /// Checks one signature field with `scheme` or, for MTL algorithms, through the ladders.
    fn check_signature(
        &mut self,
        alg: Algorithm,
        scheme: &dyn SignatureScheme,
        public_key: &[u8],
        data: &[u8],
        signature: &[u8],
    ) -> Result<(), CryptoError> {
        if !alg.is_mtl() {
            return scheme.verify(public_key, data, signature);
        }
        let result = if signature.first() == Some(&1) {
            // A full signature needs no cache (and a SPHINCS+ verification is slow: no lock).
            mtl::verify_signature(alg, public_key, data, signature, &LadderCache::new(1))
        } else {
            // A ladder cache is consistent after any panic: entries are whole.
            let held = self.ladders.lock().unwrap_or_else(PoisonError::into_inner);
            mtl::verify_signature(alg, public_key, data, signature, &held)
        };
        match result {
            Ok(Some(ladder)) => {
                self.ladders
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(ladder);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                if matches!(e, CryptoError::LadderRequired(_)) {
                    self.ladder_missing = true;
                }
                Err(e)
            }
        }
    }

    /// Signature verifications done so far.
    pub fn verifications(&self) -> u32 {
        self.verifications
    }

    /// The algorithm policy.
    pub fn policy(&self) -> PqPolicy {
        self.policy
    }

    fn supported(&self, alg: SecAlg) -> Option<Algorithm> {
        self.profile
            .algorithm(alg)
            .filter(|a| self.provider.scheme(*a).is_ok())
    }

    fn is_pq(&self, alg: SecAlg) -> bool {
        self.supported(alg).is_some_and(Algorithm::is_post_quantum)
    }

    fn alg_name(&self, alg: SecAlg) -> String {
        match self.profile.algorithm(alg) {
            Some(a) => format!("{} ({})", a.name(), alg.0),
            None => format!("algorithm {}", alg.0),
        }
    }

    /// Establishes trust in a zone's DNSKEY RRset from its trusted DS RRset (verified at the
    /// parent, or a trust anchor from [`danger::trust_anchor_ds`]): some DNSKEY must match a
    /// DS with a supported digest and algorithm, and a signature by such a key must verify
    /// over the DNSKEY RRset (RFC 4035 §5.2). Under [`PqPolicy::RequirePq`] only post-quantum
    /// DS records and keys count. With downgrade protection on (the default), when the usable
    /// DS records name post-quantum algorithms only those DS records, keys and RRSIGs count,
    /// and the keys returned carry those algorithms for every RRset verified with them
    /// ([`super::downgrade`]).
    ///
    /// Returns `Ok(None)` when no DS uses a supported algorithm and digest: the zone is then
    /// Insecure (RFC 4035 §5.2, RFC 6840 §5.2).
    ///
    /// # Errors
    /// A Bogus [`Reason`] when supported DS records exist but nothing verifies, naming the key
    /// tags involved; under require-pq, when the DS RRset offers no post-quantum algorithm.
    pub fn trust_dnskeys(
        &mut self,
        ds: &VerifiedRRset,
        dnskeys: &UnverifiedRRset,
    ) -> Result<Option<TrustedKeys>, Reason> {
        let zone = &dnskeys.owner;
        if ds.rtype != RrType::DS || dnskeys.rtype != RrType::DNSKEY || ds.owner != *zone {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!(
                    "{} {} cannot authenticate {zone} {}",
                    ds.owner, ds.rtype, dnskeys.rtype
                ),
            ));
        }
        let source = match &ds.signer {
            None => "the trust anchor".to_string(),
            Some(p) => format!("DS RRset signed by {p}"),
        };
        let usable_ds: Vec<(u16, SecAlg, DigestType, &[u8])> = ds
            .rdatas
            .iter()
            .filter(|d| d.len() > 4)
            .filter_map(|d| {
                let alg = SecAlg(d[2]);
                let digest = DigestType::from_number(d[3])?;
                self.supported(alg)?;
                Some((u16::from_be_bytes([d[0], d[1]]), alg, digest, &d[4..]))
            })
            .collect();
        if usable_ds.is_empty() {
            return Ok(None);
        }
        let usable_ds: Vec<_> = match self.policy {
            PqPolicy::RequirePq => {
                let pq: Vec<_> = usable_ds
                    .iter()
                    .copied()
                    .filter(|d| self.is_pq(d.1))
                    .collect();
                if pq.is_empty() {
                    let classical: Vec<String> = usable_ds
                        .iter()
                        .map(|d| format!("key {} {}", d.0, self.alg_name(d.1)))
                        .collect();
                    return Err(Reason::new(
                        Ede::DNSSEC_BOGUS,
                        format!(
                            "require-pq: the link to {zone}'s DNSKEY RRset is classical: {source} \
                             lists only {}",
                            classical.join(", ")
                        ),
                    ));
                }
                pq
            }
            PqPolicy::AnyAlgorithm => usable_ds,
        };
        let signalled = if self.ds_downgrade_protection {
            SignalledAlgorithms::from_ds(
                usable_ds
                    .iter()
                    .map(|d| d.1)
                    .filter(|a| self.is_pq(*a))
                    .collect::<Vec<_>>(),
            )
        } else {
            SignalledAlgorithms::default()
        };
        if signalled.is_empty() {
            return self
                .authenticate_dnskeys(ds, &source, &usable_ds, dnskeys, signalled)
                .map(Some);
        }
        // Downgrade protection (super::downgrade, rule 3): only the signalled algorithms'
        // DS records and keys may authenticate the DNSKEY RRset.
        let usable_ds: Vec<_> = usable_ds
            .into_iter()
            .filter(|d| signalled.permits(d.1))
            .collect();
        let named = signalled.describe(|a| self.alg_name(a));
        self.authenticate_dnskeys(ds, &source, &usable_ds, dnskeys, signalled)
            .map(Some)
            .map_err(|r| {
                Reason::new(
                    r.ede,
                    format!(
                        "DS downgrade protection: {source} names {named}, so {zone}'s DNSKEY \
                         RRset must be signed with it: {}",
                        r.text
                    ),
                )
            })
    }

    /// The second half of [`Validator::trust_dnskeys`]: `dnskeys` authenticated by a key that
    /// matches one of `usable_ds` (the DS records of `ds` that may count, described by
    /// `source`), with an RRSIG of an algorithm `signalled` permits.
    fn authenticate_dnskeys(
        &mut self,
        ds: &VerifiedRRset,
        source: &str,
        usable_ds: &[(u16, SecAlg, DigestType, &[u8])],
        dnskeys: &UnverifiedRRset,
        signalled: SignalledAlgorithms,
    ) -> Result<TrustedKeys, Reason> {
        let zone = &dnskeys.owner;
        if dnskeys.rdatas.is_empty() {
            return Err(Reason::new(
                Ede::DNSKEY_MISSING,
                format!("no DNSKEY RRset for {zone}"),
            ));
        }
        if dnskeys.rdatas.len() > self.limits.max_dnskeys {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!(
                    "{} DNSKEYs at {zone} exceed the limit of {}",
                    dnskeys.rdatas.len(),
                    self.limits.max_dnskeys
                ),
            ));
        }
        // DNSKEYs that a DS vouches for.
        let mut matched: Vec<&Vec<u8>> = Vec::new();
        for key in &dnskeys.rdatas {
            let Some(k) = DnskeyRef::parse(key) else {
                continue;
            };
            let tag = key_tag(key);
            let hit = usable_ds.iter().any(|(t, a, digest, value)| {
                *t == tag && *a == k.algorithm && ds_digest(zone, key, *digest) == *value
            });
            if hit {
                if !k.is_zone_key() {
                    return Err(Reason::new(
                        Ede::NO_ZONE_KEY_BIT,
                        format!("DNSKEY {tag} at {zone} matches a DS but lacks the Zone Key flag"),
                    ));
                }
                matched.push(key);
            }
        }
        let tags = |tags: &mut dyn Iterator<Item = u16>| {
            let mut v: Vec<String> = tags.map(|t| t.to_string()).collect();
            v.dedup();
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        if matched.is_empty() {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!(
                    "no DNSKEY at {zone} matches its DS records ({source}: key tags {}; \
                     DNSKEY RRset: key tags {})",
                    tags(&mut usable_ds.iter().map(|d| d.0)),
                    tags(&mut dnskeys.rdatas.iter().map(|k| key_tag(k)))
                ),
            ));
        }
        let matched_tags: Vec<u16> = matched.iter().map(|k| key_tag(k)).collect();
        let signing_tags: Vec<u16> = dnskeys
            .rrsigs
            .iter()
            .filter_map(|r| Rrsig::parse(r))
            .filter(|s| {
                s.fields.type_covered == RrType::DNSKEY
                    && s.fields.signer == *zone
                    && signalled.permits(s.fields.algorithm)
            })
            .map(|s| s.fields.key_tag)
            .collect();
        if !signing_tags.iter().any(|t| matched_tags.contains(t)) {
            return Err(Reason::new(
                if signing_tags.is_empty() {
                    Ede::RRSIGS_MISSING
                } else {
                    Ede::DNSSEC_BOGUS
                },
                format!(
                    "{zone}'s DNSKEY RRset is not signed by a key its DS vouches for: {source} \
                     matches key(s) {}, the RRSIGs over the DNSKEY RRset are by key(s) {}",
                    tags(&mut matched_tags.iter().copied()),
                    tags(&mut signing_tags.iter().copied())
                ),
            ));
        }
        let vouched = TrustedKeys {
            zone: zone.clone(),
            keys: matched.into_iter().cloned().collect(),
            ttl: ds.ttl,
            dnskey_rrset: None,
            signalled,
        };
        let verified = self.verify_rrset(&vouched, dnskeys)?;
        Ok(TrustedKeys {
            zone: zone.clone(),
            keys: dnskeys.rdatas.clone(),
            ttl: ds.ttl.min(verified.ttl),
            dnskey_rrset: Some(verified),
            signalled: vouched.signalled,
        })
    }

    /// Verifies an RRset and its RRSIGs against trusted keys (RFC 4035 §5.3): signer must be
    /// the keys' zone, owner inside it, labels consistent, validity window around the clock,
    /// and the signature must verify with a matching key. One verified RRSIG is enough; under
    /// [`PqPolicy::RequirePq`] classical RRSIGs are not tried and a post-quantum one must
    /// verify. When `keys` carry signalled algorithms ([`TrustedKeys::signalled_algorithms`],
    /// downgrade protection by DS) RRSIGs of other algorithms are not tried, and without one of
    /// a signalled algorithm the RRset is Bogus with EDE 10 (RRSIGs Missing).
    ///
    /// The result owns the RDATA and the RRSIGs that verified, with the TTL capped per
    /// RFC 4035 §5.3.3.
    ///
    /// # Errors
    /// A Bogus [`Reason`] naming the last problem found (missing RRSIGs, expired, not yet
    /// valid, no matching key, bad signature, classical only under require-pq, work limit).
    pub fn verify_rrset(
        &mut self,
        keys: &TrustedKeys,
        rrset: &UnverifiedRRset,
    ) -> Result<VerifiedRRset, Reason> {
        let (owner, rtype) = (&rrset.owner, rrset.rtype);
        let mut last = Reason::new(
            Ede::RRSIGS_MISSING,
            format!("no RRSIG over {owner} {rtype} by {}", keys.zone),
        );
        if rrset.rdatas.is_empty() {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!("RRSIGs over {owner} {rtype} but no {rtype} records"),
            ));
        }
        let require_pq = self.policy == PqPolicy::RequirePq;
        // Problems with an RRSIG by a trusted key (time window, bad signature) explain more
        // than RRSIGs we could not even try; report those first.
        let mut strong: Option<Reason> = None;
        for raw in rrset.rrsigs.iter().take(self.limits.max_rrsigs_per_rrset) {
            let Some(sig) = Rrsig::parse(raw) else {
                last = Reason::new(Ede::DNSSEC_BOGUS, "malformed RRSIG");
                continue;
            };
            let f = &sig.fields;
            if f.type_covered != rtype || f.signer != keys.zone || !owner.is_subdomain_of(&f.signer)
            {
                continue;
            }
            let Some(alg) = self.supported(f.algorithm) else {
                last = Reason::new(
                    Ede::UNSUPPORTED_DNSKEY_ALGORITHM,
                    format!(
                        "RRSIG algorithm {} not supported under profile {:?}",
                        f.algorithm,
                        self.profile.name()
                    ),
                );
                continue;
            };
            if require_pq && !alg.is_post_quantum() {
                last = Reason::new(
                    Ede::DNSSEC_BOGUS,
                    format!(
                        "require-pq: the link to {owner} {rtype} is classical: no post-quantum \
                         RRSIG by {} verified (key {} uses {})",
                        keys.zone,
                        f.key_tag,
                        self.alg_name(f.algorithm)
                    ),
                );
                continue;
            }
            if !keys.signalled.permits(f.algorithm) {
                last = Reason::new(
                    Ede::RRSIGS_MISSING,
                    format!(
                        "DS downgrade protection: {}'s DS RRset names {}, but no RRSIG over \
                         {owner} {rtype} by {} of that algorithm verified (key {} uses {})",
                        keys.zone,
                        keys.signalled.describe(|a| self.alg_name(a)),
                        keys.zone,
                        f.key_tag,
                        self.alg_name(f.algorithm)
                    ),
                );
                continue;
            }
            let candidates: Vec<&Vec<u8>> = keys
                .keys
                .iter()
                .filter(|k| {
                    DnskeyRef::parse(k)
                        .is_some_and(|d| d.algorithm == f.algorithm && d.is_zone_key())
                        && key_tag(k) == f.key_tag
                })
                .collect();
            if candidates.is_empty() {
                last = Reason::new(
                    Ede::DNSKEY_MISSING,
                    format!(
                        "RRSIG over {owner} {rtype} is by key {} ({}), which is not in {}'s \
                         trusted DNSKEY RRset",
                        f.key_tag,
                        self.alg_name(f.algorithm),
                        keys.zone
                    ),
                );
                continue;
            }
            let Some(signed_owner) = signing_owner(owner, f.labels) else {
                strong = Some(Reason::new(
                    Ede::DNSSEC_BOGUS,
                    format!("RRSIG over {owner} {rtype}: labels field exceeds the owner's labels"),
                ));
                continue;
            };
            if !serial_le(f.inception, self.now) {
                strong = Some(Reason::new(
                    Ede::SIGNATURE_NOT_YET_VALID,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} is not yet valid",
                        f.key_tag
                    ),
                ));
                continue;
            }
            if !serial_le(self.now, f.expiration) {
                strong = Some(Reason::new(
                    Ede::SIGNATURE_EXPIRED,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} has expired",
                        f.key_tag
                    ),
                ));
                continue;
            }
            let data = signed_data(
                f,
                &signed_owner,
                rrset.class,
                rrset.rdatas.iter().map(Vec::as_slice),
            );
            let scheme = self
                .provider
                .scheme(alg)
                .map_err(|e| Reason::new(Ede::UNSUPPORTED_DNSKEY_ALGORITHM, e.to_string()))?;
            let mut ok = false;
            let mut ladder_missing = None;
            for key in candidates {
                if self.verifications >= self.limits.max_verifications {
                    return Err(Reason::new(
                        Ede::DNSSEC_BOGUS,
                        format!(
                            "work limit of {} signature verifications reached",
                            self.limits.max_verifications
                        ),
                    ));
                }
                self.verifications += 1;
                match self.check_signature(alg, scheme, &key[4..], &data, sig.signature) {
                    Ok(()) => {
                        ok = true;
                        break;
                    }
                    Err(CryptoError::LadderRequired(series)) => ladder_missing = Some(series),
                    Err(_) => {}
                }
            }
            if let (false, Some(series)) = (ok, ladder_missing) {
                strong = Some(Reason::new(
                    Ede::DNSSEC_INDETERMINATE,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} is a condensed MTL signature of \
                         series {series:016x}, whose ladder is not held: ask again with EDNS \
                         option {}",
                        f.key_tag,
                        mtl::EDNS_FULL_SIGNATURES
                    ),
                ));
                continue;
            }
            if !ok {
                strong = Some(Reason::new(
                    Ede::DNSSEC_BOGUS,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} ({alg}) does not verify",
                        f.key_tag
                    ),
                ));
                continue;
            }
            let left = f.expiration.wrapping_sub(self.now);
            let ttl = [rrset.ttl, rrset.rrsig_ttl, f.original_ttl, left]
                .into_iter()
                .min()
                .unwrap_or(0);
            return Ok(VerifiedRRset {
                owner: owner.clone(),
                rtype,
                class: rrset.class,
                ttl,
                rdatas: rrset.rdatas.clone(),
                rrsigs: vec![raw.clone()],
                signed_owner,
                signer: Some(keys.zone.clone()),
                algorithms: vec![f.algorithm],
                post_quantum: alg.is_post_quantum(),
            });
        }
        Err(strong.unwrap_or(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::denial::prove;
    use crate::dnssec::dnskey::ds_record;
    use crate::dnssec::keyfile::{KeyRole, ZoneKey};
    use crate::dnssec::rrsig::{label_count, RrsigFields};

    struct Fixture {
        zone: Name,
        keys: Vec<ZoneKey>,
        /// The DNSKEY RRset with RRSIGs by every key.
        dnskeys: UnverifiedRRset,
        ds: Vec<Vec<u8>>,
    }

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn rrset(
        owner: &Name,
        rtype: RrType,
        rdatas: Vec<Vec<u8>>,
        rrsigs: Vec<Vec<u8>>,
    ) -> UnverifiedRRset {
        UnverifiedRRset {
            owner: owner.clone(),
            rtype,
            class: Class::IN,
            ttl: 3600,
            rdatas,
            rrsigs,
            rrsig_ttl: 3600,
        }
    }

    fn fixture(algs: &[Algorithm]) -> Fixture {
        fixture_with_roles(&algs.iter().map(|a| (*a, KeyRole::Csk)).collect::<Vec<_>>())
    }

    /// Keys with roles; KSKs and CSKs sign the DNSKEY RRset, DS records are made for every key.
    fn fixture_with_roles(keys: &[(Algorithm, KeyRole)]) -> Fixture {
        let zone = name("example.");
        let profile = Profile::default_profile();
        let provider = Provider::default_provider();
        let keys: Vec<ZoneKey> = keys
            .iter()
            .map(|(a, role)| ZoneKey::generate(&zone, *a, *role, &profile, &provider, 300).unwrap())
            .collect();
        let rdatas: Vec<Vec<u8>> = keys.iter().map(ZoneKey::dnskey_rdata).collect();
        let ds = keys
            .iter()
            .map(|k| {
                ds_record(&k.dnskey_record(), DigestType::Sha256)
                    .unwrap()
                    .rdata
            })
            .collect();
        let key_sigs = keys
            .iter()
            .filter(|k| k.is_sep())
            .map(|k| sign(k, &zone, RrType::DNSKEY, &rdatas, WINDOW))
            .collect();
        Fixture {
            dnskeys: rrset(&zone, RrType::DNSKEY, rdatas, key_sigs),
            zone,
            keys,
            ds,
        }
    }

    fn sign(
        key: &ZoneKey,
        owner: &Name,
        rtype: RrType,
        rdatas: &[Vec<u8>],
        window: (u32, u32),
    ) -> Vec<u8> {
        let fields = RrsigFields {
            type_covered: rtype,
            algorithm: key.number,
            labels: label_count(owner),
            original_ttl: 300,
            expiration: window.1,
            inception: window.0,
            key_tag: key.key_tag(),
            signer: key.owner.clone(),
        };
        let data = signed_data(&fields, owner, Class::IN, rdatas.iter().map(Vec::as_slice));
        fields.rdata(&key.key.sign(&data).unwrap())
    }

    const NOW: u64 = 1_750_000_000;
    const WINDOW: (u32, u32) = (1_749_000_000, 1_751_000_000);

    fn validator(policy: PqPolicy) -> Validator {
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        Validator::new(&profile, &provider, NOW, Limits::default(), policy)
    }

    /// A validator at NOW and the fixture's keys, trusted through its DS records as anchors.
    fn trust_fixture(policy: PqPolicy, f: &Fixture) -> (Validator, TrustedKeys) {
        trust_with(validator(policy), f)
    }

    /// `v` and the fixture's keys, trusted through its DS records as anchors.
    fn trust_with(mut v: Validator, f: &Fixture) -> (Validator, TrustedKeys) {
        let keys = v
            .trust_dnskeys(&danger::trust_anchor_ds(&f.zone, f.ds.clone()), &f.dnskeys)
            .unwrap()
            .unwrap();
        (v, keys)
    }

    #[test]
    fn ds_dnskey_rrsig_chain_and_its_failures() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        // RFC 6840 §5.11 (downgrade protection off): the ECDSA RRSIG alone is enough.
        let unprotected = validator(PqPolicy::AnyAlgorithm).with_ds_downgrade_protection(false);
        let (mut v, trusted) = trust_with(unprotected, &f);

        let www = name("www.example.");
        let a = vec![vec![192, 0, 2, 1]];
        let sigs = vec![sign(&f.keys[0], &www, RrType::A, &a, WINDOW)];
        assert!(v
            .verify_rrset(&trusted, &rrset(&www, RrType::A, a.clone(), sigs.clone()))
            .is_ok());

        // Tampered RDATA.
        let bad = vec![vec![192, 0, 2, 2]];
        let err = v
            .verify_rrset(&trusted, &rrset(&www, RrType::A, bad, sigs.clone()))
            .unwrap_err();
        assert_eq!(err.ede, Ede::DNSSEC_BOGUS);
        let mut ede_of = |sigs: &[Vec<u8>]| {
            v.verify_rrset(&trusted, &rrset(&www, RrType::A, a.clone(), sigs.to_vec()))
                .unwrap_err()
                .ede
        };
        let signed_at = |window| vec![sign(&f.keys[0], &www, RrType::A, &a, window)];
        // Stripped RRSIGs, expired, not yet valid, wrong key tag.
        assert_eq!(ede_of(&[]), Ede::RRSIGS_MISSING);
        let expired = signed_at((1_700_000_000, 1_700_000_100));
        assert_eq!(ede_of(&expired), Ede::SIGNATURE_EXPIRED);
        let future = signed_at((1_800_000_000, 1_800_000_100));
        assert_eq!(ede_of(&future), Ede::SIGNATURE_NOT_YET_VALID);
        let mut wrong_tag = sigs[0].clone();
        wrong_tag[16] ^= 0xff;
        assert_eq!(
            ede_of(std::slice::from_ref(&wrong_tag)),
            Ede::DNSKEY_MISSING
        );
        // An expired RRSIG by a trusted key explains more than one by an unknown key.
        assert_eq!(
            ede_of(&[expired[0].clone(), wrong_tag]),
            Ede::SIGNATURE_EXPIRED
        );

        // DS mismatch.
        let mut bad_ds = f.ds.clone();
        for d in &mut bad_ds {
            let last = d.len() - 1;
            d[last] ^= 1;
        }
        let err = v
            .trust_dnskeys(&danger::trust_anchor_ds(&f.zone, bad_ds), &f.dnskeys)
            .unwrap_err();
        assert!(err.text.contains("matches its DS"), "{err}");
        // Missing DNSKEY.
        let anchor = danger::trust_anchor_ds(&f.zone, f.ds.clone());
        let no_keys = rrset(&f.zone, RrType::DNSKEY, vec![], f.dnskeys.rrsigs.clone());
        assert_eq!(
            v.trust_dnskeys(&anchor, &no_keys).unwrap_err().ede,
            Ede::DNSKEY_MISSING
        );
        // DS with an unknown algorithm only: insecure, not bogus.
        let mut unknown = f.ds[0].clone();
        unknown[2] = 200;
        let unknown = danger::trust_anchor_ds(&f.zone, vec![unknown]);
        assert!(v.trust_dnskeys(&unknown, &f.dnskeys).unwrap().is_none());
        // A DS RRset for another zone cannot vouch for these keys.
        let other = danger::trust_anchor_ds(&name("other."), f.ds.clone());
        assert!(v.trust_dnskeys(&other, &f.dnskeys).is_err());
    }

    #[test]
    fn verified_rrsets_own_the_verified_data_and_cap_the_ttl() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256]);
        let (mut v, trusted) = trust_fixture(PqPolicy::AnyAlgorithm, &f);
        let www = name("www.example.");
        let a = vec![vec![192, 0, 2, 1], vec![192, 0, 2, 2]];
        let good = sign(&f.keys[0], &www, RrType::A, &a, WINDOW);
        let mut broken = good.clone();
        let last = broken.len() - 1;
        broken[last] ^= 1;
        // RRset TTL 3600, Original TTL 300: the Original TTL caps it.
        let set = rrset(
            &www,
            RrType::A,
            a.clone(),
            vec![broken.clone(), good.clone()],
        );
        let verified = v.verify_rrset(&trusted, &set).unwrap();
        assert_eq!(verified.ttl(), 300);
        assert_eq!(verified.rdatas(), a.as_slice());
        // Only the RRSIG that verified is kept.
        assert_eq!(verified.rrsigs(), [good].as_slice());
        assert_eq!(verified.signer(), Some(&f.zone));
        assert_eq!(verified.records().len(), 2);
        assert!(verified.records().iter().all(|r| r.ttl == 300));
        // 100 seconds before expiration, the remaining validity caps it.
        let soon = (WINDOW.0, NOW as u32 + 100);
        let sig = sign(&f.keys[0], &www, RrType::A, &a, soon);
        let verified = v
            .verify_rrset(
                &trusted,
                &rrset(&www, RrType::A, a.clone(), vec![sig.clone()]),
            )
            .unwrap();
        assert_eq!(verified.ttl(), 100);
        // A low RRset TTL or RRSIG TTL caps it too.
        let mut low = rrset(&www, RrType::A, a.clone(), vec![sig.clone()]);
        low.ttl = 30;
        assert_eq!(v.verify_rrset(&trusted, &low).unwrap().ttl(), 30);
        low.ttl = 3600;
        low.rrsig_ttl = 20;
        assert_eq!(v.verify_rrset(&trusted, &low).unwrap().ttl(), 20);
        // The trusted keys remember the DNSKEY RRset they were verified from.
        assert_eq!(
            trusted.dnskey_rrset().unwrap().rdatas(),
            f.dnskeys.rdatas.as_slice()
        );
        assert_eq!(trusted.ttl(), 300);
    }

    #[test]
    fn group_attaches_rrsigs_to_their_rrsets() {
        let www = name("www.example.");
        let rec = |owner: &Name, rtype: RrType, ttl: u32, rdata: Vec<u8>| Record {
            owner: owner.clone(),
            rtype,
            class: Class::IN,
            ttl,
            rdata,
        };
        let mut sig = vec![0, 1, 13, 2];
        sig.extend([0; 14]);
        sig.extend_from_slice(name("example.").as_wire());
        let records = vec![
            rec(&www, RrType::A, 60, vec![192, 0, 2, 1]),
            rec(&www, RrType::RRSIG, 50, sig.clone()),
            rec(&www, RrType::A, 30, vec![192, 0, 2, 2]),
            rec(&www, RrType::A, 60, vec![192, 0, 2, 2]),
            rec(&name("WWW.example."), RrType::AAAA, 60, vec![0; 16]),
        ];
        let sets = UnverifiedRRset::group(&records);
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].rtype, RrType::A);
        assert_eq!(sets[0].rdatas.len(), 2, "duplicates removed");
        assert_eq!(sets[0].ttl, 30, "lowest TTL (RFC 2181 §5.2)");
        assert_eq!(sets[0].rrsigs, vec![sig]);
        assert_eq!(sets[0].rrsig_ttl, 50);
        assert_eq!(sets[0].signers(), vec![name("example.")]);
        assert_eq!(sets[1].rtype, RrType::AAAA);
        assert!(sets[1].rrsigs.is_empty());
    }

    #[test]
    fn require_pq_rejects_classical_links() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        let www = name("www.example.");
        let a = vec![vec![192, 0, 2, 1]];
        let classical = vec![sign(&f.keys[0], &www, RrType::A, &a, WINDOW)];
        let both = vec![
            classical[0].clone(),
            sign(&f.keys[1], &www, RrType::A, &a, WINDOW),
        ];

        let (mut v, trusted) = trust_fixture(PqPolicy::RequirePq, &f);
        let err = v
            .verify_rrset(
                &trusted,
                &rrset(&www, RrType::A, a.clone(), classical.clone()),
            )
            .unwrap_err();
        assert!(err.text.contains("require-pq"), "{err}");
        let verified = v
            .verify_rrset(&trusted, &rrset(&www, RrType::A, a.clone(), both))
            .unwrap();
        assert!(verified.is_post_quantum());
        assert_eq!(verified.algorithms(), [SecAlg::MLDSA44].as_slice());

        let unprotected = validator(PqPolicy::AnyAlgorithm).with_ds_downgrade_protection(false);
        let (mut any, trusted) = trust_with(unprotected, &f);
        assert!(any
            .verify_rrset(&trusted, &rrset(&www, RrType::A, a, classical))
            .is_ok());

        // Issue 11 item 18: the only anchor is the ECDSA DS of a dual-signed zone. The DNSKEY
        // RRset is then authenticated classically, so require-pq refuses it and says so.
        let ecdsa_only = danger::trust_anchor_ds(&f.zone, vec![f.ds[0].clone()]);
        let mut v = validator(PqPolicy::RequirePq);
        let err = v.trust_dnskeys(&ecdsa_only, &f.dnskeys).unwrap_err();
        assert!(
            err.text.contains("require-pq")
                && err.text.contains("classical")
                && err.text.contains("trust anchor")
                && err.text.contains(&format!("key {}", f.keys[0].key_tag())),
            "{err}"
        );
        let mut any = validator(PqPolicy::AnyAlgorithm);
        assert!(any
            .trust_dnskeys(&ecdsa_only, &f.dnskeys)
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_ds_for_a_key_that_did_not_sign_the_dnskey_rrset_is_named_precisely() {
        // Issue 11 item 20: KSK + ZSK; the anchor is the ZSK's DS. The reason must name the
        // ZSK as the DS-matched key and the KSK as the signer, not claim a key is missing.
        let f = fixture_with_roles(&[
            (Algorithm::EcdsaP256Sha256, KeyRole::Ksk),
            (Algorithm::EcdsaP256Sha256, KeyRole::Zsk),
        ]);
        let (ksk, zsk) = (f.keys[0].key_tag(), f.keys[1].key_tag());
        let mut v = validator(PqPolicy::AnyAlgorithm);
        let anchor = danger::trust_anchor_ds(&f.zone, vec![f.ds[1].clone()]);
        let err = v.trust_dnskeys(&anchor, &f.dnskeys).unwrap_err();
        assert!(
            err.text.contains(&format!("matches key(s) {zsk}"))
                && err.text.contains(&format!("are by key(s) {ksk}"))
                && !err.text.contains("no DNSKEY with tag"),
            "{err}"
        );
        assert_eq!(v.verifications(), 0, "nothing to verify");
        let anchor = danger::trust_anchor_ds(&f.zone, vec![f.ds[0].clone()]);
        assert!(v.trust_dnskeys(&anchor, &f.dnskeys).unwrap().is_some());
    }

    #[test]
    fn thousands_of_rrsigs_stay_within_the_work_limit() {
        let f = fixture(&[Algorithm::MlDsa44]);
        let (mut v, trusted) = trust_fixture(PqPolicy::AnyAlgorithm, &f);
        let www = name("www.example.");
        let a = vec![vec![192, 0, 2, 1]];
        let mut bogus = sign(&f.keys[0], &www, RrType::A, &a, WINDOW);
        let last = bogus.len() - 1;
        bogus[last] ^= 1;
        let many = vec![bogus; 5000];
        assert!(v
            .verify_rrset(&trusted, &rrset(&www, RrType::A, a, many))
            .is_err());
        assert!(v.verifications() <= 1 + Limits::default().max_rrsigs_per_rrset as u32);
    }

    /// Downgrade protection by DS (super::super::downgrade), each way: a dual-signed zone whose
    /// DS names ML-DSA-44 needs ML-DSA-44 RRSIGs over the DNSKEY RRset and its data, and the
    /// ECDSA ones alone are Bogus with EDE 10; the same keys behind a DS naming only ECDSA, or
    /// with the protection off, validate through ECDSA.
    #[test]
    fn a_ds_naming_ml_dsa_requires_ml_dsa_signatures() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        let www = name("www.example.");
        let a = vec![vec![192, 0, 2, 1]];
        let ecdsa_sig = sign(&f.keys[0], &www, RrType::A, &a, WINDOW);
        let mldsa_sig = sign(&f.keys[1], &www, RrType::A, &a, WINDOW);
        let stripped = rrset(&www, RrType::A, a.clone(), vec![ecdsa_sig.clone()]);
        // ECDSA first: the protected validator must skip it, not stop at it.
        let dual = rrset(&www, RrType::A, a.clone(), vec![ecdsa_sig, mldsa_sig]);

        // Both DS records: ML-DSA-44 is signalled.
        let (mut v, trusted) = trust_fixture(PqPolicy::AnyAlgorithm, &f);
        assert!(v.ds_downgrade_protection(), "on by default");
        assert_eq!(
            trusted.signalled_algorithms().algorithms(),
            [SecAlg::MLDSA44].as_slice()
        );
        assert_eq!(
            trusted.dnskey_rrset().unwrap().algorithms(),
            [SecAlg::MLDSA44].as_slice(),
            "the DNSKEY RRset is authenticated through ML-DSA-44"
        );
        let err = v.verify_rrset(&trusted, &stripped).unwrap_err();
        assert_eq!(err.ede, Ede::RRSIGS_MISSING, "{err}");
        assert!(
            err.text.contains("downgrade")
                && err.text.contains("ML-DSA-44 (18)")
                && err.text.contains("www.example. A"),
            "{err}"
        );
        let verified = v.verify_rrset(&trusted, &dual).unwrap();
        assert_eq!(verified.algorithms(), [SecAlg::MLDSA44].as_slice());

        // The DNSKEY RRset with its ML-DSA RRSIG stripped: Bogus, EDE 10, naming the rule.
        let ecdsa_key_sig: Vec<Vec<u8>> = f
            .dnskeys
            .rrsigs
            .iter()
            .filter(|r| Rrsig::parse(r).unwrap().fields.algorithm == SecAlg::ECDSAP256SHA256)
            .cloned()
            .collect();
        assert_eq!(ecdsa_key_sig.len(), 1);
        let keys_stripped = rrset(
            &f.zone,
            RrType::DNSKEY,
            f.dnskeys.rdatas.clone(),
            ecdsa_key_sig,
        );
        let anchor = danger::trust_anchor_ds(&f.zone, f.ds.clone());
        let err = v.trust_dnskeys(&anchor, &keys_stripped).unwrap_err();
        assert_eq!(err.ede, Ede::RRSIGS_MISSING, "{err}");
        assert!(
            err.text
                .contains("DS downgrade protection: the trust anchor names ML-DSA-44 (18)"),
            "{err}"
        );

        // The same keys behind a DS naming only ECDSA: nothing signalled, ECDSA is enough,
        // for the stripped DNSKEY RRset and for the data.
        let ecdsa_ds = danger::trust_anchor_ds(&f.zone, vec![f.ds[0].clone()]);
        let classical = v.trust_dnskeys(&ecdsa_ds, &keys_stripped).unwrap().unwrap();
        assert!(classical.signalled_algorithms().is_empty());
        let verified = v.verify_rrset(&classical, &stripped).unwrap();
        assert_eq!(verified.algorithms(), [SecAlg::ECDSAP256SHA256].as_slice());

        // Protection off: both DS records, ECDSA accepted (RFC 6840 §5.11).
        let mut off = validator(PqPolicy::AnyAlgorithm).with_ds_downgrade_protection(false);
        let trusted = off.trust_dnskeys(&anchor, &keys_stripped).unwrap().unwrap();
        assert!(trusted.signalled_algorithms().is_empty());
        assert!(off.verify_rrset(&trusted, &stripped).is_ok());
    }

    /// A child's DS decides afresh: under a parent whose DS names ML-DSA-44, the child's DS
    /// RRset must carry the parent's ML-DSA signature, but a child whose DS names only ECDSA
    /// is validated with ECDSA.
    #[test]
    fn a_child_ds_decides_afresh_for_the_child() {
        let parent = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        let (mut v, parent_keys) = trust_fixture(PqPolicy::AnyAlgorithm, &parent);
        let child_zone = name("child.example.");
        let child_key = ZoneKey::generate(
            &child_zone,
            Algorithm::EcdsaP256Sha256,
            KeyRole::Csk,
            &Profile::default_profile(),
            &Provider::default_provider(),
            300,
        )
        .unwrap();
        let child_dnskeys = vec![child_key.dnskey_rdata()];
        let child_ds = vec![
            ds_record(&child_key.dnskey_record(), DigestType::Sha256)
                .unwrap()
                .rdata,
        ];
        let ds_sig = |k: &ZoneKey| sign(k, &child_zone, RrType::DS, &child_ds, WINDOW);
        // The child's DS RRset signed by the parent's ECDSA key only: Bogus under the rule.
        let classical_ds = rrset(
            &child_zone,
            RrType::DS,
            child_ds.clone(),
            vec![ds_sig(&parent.keys[0])],
        );
        let err = v.verify_rrset(&parent_keys, &classical_ds).unwrap_err();
        assert_eq!(err.ede, Ede::RRSIGS_MISSING, "{err}");
        let ds = v
            .verify_rrset(
                &parent_keys,
                &rrset(
                    &child_zone,
                    RrType::DS,
                    child_ds.clone(),
                    vec![ds_sig(&parent.keys[0]), ds_sig(&parent.keys[1])],
                ),
            )
            .unwrap();
        let key_sig = sign(
            &child_key,
            &child_zone,
            RrType::DNSKEY,
            &child_dnskeys,
            WINDOW,
        );
        let child_keys = v
            .trust_dnskeys(
                &ds,
                &rrset(&child_zone, RrType::DNSKEY, child_dnskeys, vec![key_sig]),
            )
            .unwrap()
            .unwrap();
        assert!(child_keys.signalled_algorithms().is_empty());
        let www = name("www.child.example.");
        let a = vec![vec![192, 0, 2, 7]];
        let sig = sign(&child_key, &www, RrType::A, &a, WINDOW);
        let verified = v
            .verify_rrset(&child_keys, &rrset(&www, RrType::A, a, vec![sig]))
            .unwrap();
        assert_eq!(verified.algorithms(), [SecAlg::ECDSAP256SHA256].as_slice());
    }

    /// A function that signs an RRset with `f`'s first key and returns it verified.
    fn signer(f: &Fixture) -> impl FnMut(&Name, RrType, Vec<Vec<u8>>) -> VerifiedRRset + '_ {
        let (mut v, trusted) = trust_fixture(PqPolicy::AnyAlgorithm, f);
        move |owner: &Name, rtype: RrType, rdatas: Vec<Vec<u8>>| {
            let sig = sign(&f.keys[0], owner, rtype, &rdatas, WINDOW);
            v.verify_rrset(&trusted, &rrset(owner, rtype, rdatas, vec![sig]))
                .unwrap()
        }
    }

    #[test]
    fn conclude_needs_the_whole_chain_and_its_proofs() {
        use crate::rdata::write_type_bitmap;
        let f = fixture(&[Algorithm::Ed25519]);
        let mut verified = signer(&f);
        let (alias, www) = (name("alias.example."), name("www.example."));
        let cname = verified(&alias, RrType::CNAME, vec![www.as_wire().to_vec()]);
        let a = verified(&www, RrType::A, vec![vec![192, 0, 2, 1]]);
        let evil = verified(
            &name("evil.example."),
            RrType::A,
            vec![vec![203, 0, 113, 66]],
        );
        assert!(conclude(&alias, RrType::A, &[cname.clone(), a.clone()], &[]).is_secure());
        assert!(conclude(&www, RrType::A, std::slice::from_ref(&a), &[]).is_secure());
        // A verified RRset off the chain, a chain in the wrong order, a chain that stops.
        assert!(conclude(&alias, RrType::A, &[cname.clone(), evil.clone()], &[]).is_bogus());
        assert!(conclude(&alias, RrType::A, &[a.clone(), cname.clone()], &[]).is_bogus());
        assert!(conclude(&www, RrType::A, &[a.clone(), evil], &[]).is_bogus());
        let err = conclude(&alias, RrType::A, std::slice::from_ref(&cname), &[])
            .reason()
            .cloned()
            .unwrap();
        assert_eq!(err.ede, Ede::NSEC_MISSING);
        assert!(conclude(&www, RrType::AAAA, &[], &[]).is_bogus());

        // NODATA for www AAAA: an NSEC at www listing A only.
        let mut nsec = name("zz.example.").as_wire().to_vec();
        write_type_bitmap(&mut nsec, &[RrType::A, RrType::RRSIG, RrType::NSEC]);
        let nsec = verified(&www, RrType::NSEC, vec![nsec]);
        let nodata = prove(
            &f.zone,
            &www,
            Claim::NoData(RrType::AAAA),
            std::slice::from_ref(&nsec),
        )
        .unwrap();
        assert_eq!(nodata.rrsets(), [nsec.clone()].as_slice());
        assert!(conclude(&www, RrType::AAAA, &[], std::slice::from_ref(&nodata)).is_secure());
        // After a CNAME the denial must be about the target, for the right type.
        assert!(conclude(
            &alias,
            RrType::AAAA,
            &[cname],
            std::slice::from_ref(&nodata)
        )
        .is_secure());
        assert!(conclude(&alias, RrType::AAAA, &[], std::slice::from_ref(&nodata)).is_bogus());
        assert!(conclude(&www, RrType::MX, &[], &[nodata]).is_bogus());
        // The NSEC does not prove NODATA for A, which it lists.
        assert!(prove(
            &f.zone,
            &www,
            Claim::NoData(RrType::A),
            std::slice::from_ref(&nsec)
        )
        .is_err());
        // NSECs signed by another zone's keys are not used.
        assert!(prove(&name("other."), &www, Claim::NoData(RrType::AAAA), &[nsec]).is_err());
    }

    #[test]
    fn a_denial_through_an_opt_out_span_is_insecure_never_secure() {
        // One NSEC3 at the apex whose next hash is its own: it matches example. and covers
        // every other name, so it proves NXDOMAIN for nope.example. With the Opt-Out flag the
        // answer is Insecure (RFC 5155 §9.2), without it Secure.
        use crate::dnssec::nsec3::Nsec3Params;
        let f = fixture(&[Algorithm::Ed25519]);
        let mut verified = signer(&f);
        let nope = name("nope.example.");
        let mut status = |opt_out: bool| {
            let params = Nsec3Params {
                opt_out,
                ..Nsec3Params::default()
            };
            let hash = params.hash(&f.zone);
            let owner = params.hashed_owner(&f.zone, &f.zone).unwrap();
            let rdata = params.nsec3_rdata(&hash, &[RrType::SOA, RrType::NS]);
            let nsec3 = verified(&owner, RrType::NSEC3, vec![rdata]);
            let d = prove(&f.zone, &nope, Claim::NxDomain, &[nsec3]).unwrap();
            conclude(&nope, RrType::A, &[], &[d])
        };
        assert!(status(false).is_secure());
        let insecure = status(true);
        assert!(matches!(insecure, Status::Insecure(_)), "{insecure}");
        let reason = insecure.reason().unwrap();
        assert!(
            reason.text.contains("opt-out") && reason.text.contains("nope.example."),
            "{reason}"
        );
    }

    #[test]
    fn a_dname_redirects_the_chain_by_substitution() {
        let f = fixture(&[Algorithm::Ed25519]);
        let mut verified = signer(&f);
        let dname = verified(
            &name("old.example."),
            RrType::DNAME,
            vec![name("new.example.").as_wire().to_vec()],
        );
        let a = verified(
            &name("www.new.example."),
            RrType::A,
            vec![vec![192, 0, 2, 1]],
        );
        let elsewhere = verified(
            &name("www.other.example."),
            RrType::A,
            vec![vec![192, 0, 2, 9]],
        );
        let qname = name("www.old.example.");
        assert!(conclude(&qname, RrType::A, &[dname.clone(), a.clone()], &[]).is_secure());
        // The DNAME's own substitution decides where the chain goes, not a CNAME or the data.
        assert!(conclude(&qname, RrType::A, &[dname.clone(), elsewhere], &[]).is_bogus());
        // For QTYPE CNAME the DNAME answers (it stands for the synthesized CNAME).
        assert!(conclude(&qname, RrType::CNAME, std::slice::from_ref(&dname), &[]).is_secure());
        // A DNAME redirects names below its owner only, and ends the chain for QTYPE DNAME.
        let owner = name("old.example.");
        assert!(conclude(&owner, RrType::A, &[dname.clone(), a.clone()], &[]).is_bogus());
        assert!(conclude(&owner, RrType::DNAME, std::slice::from_ref(&dname), &[]).is_secure());
        // Without the data or a proof, the redirected name is not answered.
        assert!(conclude(&qname, RrType::A, &[dname], &[]).is_bogus());
    }

    #[test]
    fn wildcard_answers_need_an_expansion_proof() {
        use crate::rdata::write_type_bitmap;
        let f = fixture(&[Algorithm::Ed25519]);
        let (mut v, trusted) = trust_fixture(PqPolicy::AnyAlgorithm, &f);
        let (wild, x) = (name("*.w.example."), name("x.w.example."));
        let txt = vec![b"\x04wild".to_vec()];
        let sig = sign(&f.keys[0], &wild, RrType::TXT, &txt, WINDOW);
        let expanded = v
            .verify_rrset(&trusted, &rrset(&x, RrType::TXT, txt, vec![sig]))
            .unwrap();
        assert!(expanded.from_wildcard());
        assert_eq!(expanded.signed_owner(), &wild);
        let err = conclude(&x, RrType::TXT, std::slice::from_ref(&expanded), &[])
            .reason()
            .cloned()
            .unwrap();
        assert!(err.text.contains("without a proof"), "{err}");
        // An NSEC from w.example. to z.w.example. covers x.w.example.
        let mut next = name("z.w.example.").as_wire().to_vec();
        write_type_bitmap(&mut next, &[RrType::TXT, RrType::RRSIG, RrType::NSEC]);
        let owner = name("w.example.");
        let sig = sign(
            &f.keys[0],
            &owner,
            RrType::NSEC,
            std::slice::from_ref(&next),
            WINDOW,
        );
        let nsec = v
            .verify_rrset(
                &trusted,
                &rrset(&owner, RrType::NSEC, vec![next], vec![sig]),
            )
            .unwrap();
        let source = Claim::Expanded {
            source: name("w.example."),
        };
        let proof = prove(&f.zone, &x, source.clone(), std::slice::from_ref(&nsec)).unwrap();
        assert!(conclude(&x, RrType::TXT, std::slice::from_ref(&expanded), &[proof]).is_secure());

        // The same verified data expanded to another name the NSEC covers (RFC 8198 §5.3).
        let y = name("y.w.example.");
        let again = expanded.expanded_to(&y).unwrap();
        assert_eq!(again.owner(), &y);
        assert_eq!(again.signed_owner(), &wild);
        let err = conclude(&y, RrType::TXT, std::slice::from_ref(&again), &[]);
        assert!(err.is_bogus(), "an expansion still needs its proof: {err}");
        let proof = prove(&f.zone, &y, source, std::slice::from_ref(&nsec)).unwrap();
        assert!(conclude(&y, RrType::TXT, &[again], &[proof]).is_secure());
        // Only strictly below the wildcard's parent, never to a wildcard or elsewhere.
        for not_below in ["w.example.", "*.w.example.", "x.other.example.", "example."] {
            assert!(
                expanded.expanded_to(&name(not_below)).is_none(),
                "{not_below}"
            );
        }
        assert!(expanded
            .expanded_to(&name("a.b.w.example."))
            .is_some_and(|e| e.from_wildcard()));
        // Data not signed under a wildcard does not expand.
        assert!(nsec.expanded_to(&name("q.w.example.")).is_none());
    }

    #[test]
    fn statuses_name_themselves() {
        let s = Status::default();
        assert!(!s.is_secure() && !s.is_bogus());
        assert_eq!(s.name(), "Indeterminate");
        assert_eq!(s.reason().unwrap().text, "not validated");
        let b = Status::Bogus(Reason::new(Ede::DNSSEC_BOGUS, "x"));
        assert!(b.is_bogus());
        assert_eq!(b.to_string(), "Bogus: x (EDE 6)");
    }
}

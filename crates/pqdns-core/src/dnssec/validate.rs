//! Validation of DNS answers (RFC 4035 §5, RFC 4034): DS → DNSKEY → RRSIG for one zone cut,
//! with a work budget, validity windows at a given clock, key-tag collisions tolerated, and
//! the outcome as [`Status`] with an RFC 8914 Extended DNS Error code.
//!
//! Proof is in the types: [`TrustedKeys`] and [`VerifiedRRset`] can only be made here, by
//! checking signatures, so a caller cannot cache data as Secure without a verified signature.

use std::fmt;

use super::algorithm::{Algorithm, SecAlg};
use super::dnskey::{ds_digest, key_tag, DigestType, DnskeyRef};
use super::profile::Profile;
use super::provider::Provider;
use super::rrsig::{signed_data, signing_owner, Rrsig};
use crate::name::Name;
use crate::rr::{Class, RrType};
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

/// Validation status (RFC 4035 §4.3). The default is Indeterminate, never Secure.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Status {
    /// A chain of verified signatures from a trust anchor.
    Secure,
    /// Provably unsigned (an authenticated insecure delegation, or only unsupported algorithms).
    Insecure(Reason),
    /// Signatures or proofs that should be there and valid are not.
    Bogus(Reason),
    /// No trust anchor covers the answer, or work limits were hit.
    Indeterminate(Reason),
}

impl Default for Status {
    fn default() -> Status {
        Status::Indeterminate(Reason::new(Ede::OTHER, "not validated"))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Secure => f.write_str("Secure"),
            Status::Insecure(r) => write!(f, "Insecure: {r}"),
            Status::Bogus(r) => write!(f, "Bogus: {r}"),
            Status::Indeterminate(r) => write!(f, "Indeterminate: {r}"),
        }
    }
}

/// Limits that bound the work one validation may do. A post-quantum verify can cost 1000× an
/// Ed25519 one, so a hostile zone must not make us try every key against every signature.
#[derive(Clone, Copy, Debug)]
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

/// The rule for answers that could have been validated with a post-quantum algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PqPolicy {
    /// RFC 6840 §5.11: any supported algorithm that validates is enough.
    #[default]
    AnyAlgorithm,
    /// When the DS RRset offers a post-quantum algorithm we support, only signatures by that
    /// (post-quantum) algorithm count: a classical-only validation is Bogus. This deliberately
    /// departs from RFC 6840 §5.11 to stop downgrade to a classical key broken by a quantum
    /// adversary.
    RequirePq,
}

/// A zone's DNSKEYs that chain to a trust anchor. Only [`Validator::trust_dnskeys`] makes one.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    zone: Name,
    keys: Vec<Vec<u8>>,
    /// Algorithms that must have signed (per the DS set and policy).
    required: Vec<SecAlg>,
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
}

/// An RRset whose signature verified with trusted keys. Only [`Validator::verify_rrset`]
/// makes one.
#[derive(Clone, Debug)]
pub struct VerifiedRRset {
    owner: Name,
    rtype: RrType,
    /// The owner name the signature was made for (a wildcard when expanded).
    signed_owner: Name,
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
    /// True if the answer was synthesised from a wildcard (RFC 4035 §5.3.4).
    pub fn from_wildcard(&self) -> bool {
        self.signed_owner.is_wildcard() && !self.owner.is_wildcard()
    }
    /// The wildcard (or owner) name it was signed under.
    pub fn signed_owner(&self) -> &Name {
        &self.signed_owner
    }
}

/// Checks signatures for one query, within [`Limits`].
pub struct Validator<'a> {
    profile: &'a Profile,
    provider: &'a Provider,
    now: u32,
    limits: Limits,
    policy: PqPolicy,
    verifications: u32,
}

impl<'a> Validator<'a> {
    /// A validator evaluating validity windows at `now` (UNIX seconds).
    pub fn new(
        profile: &'a Profile,
        provider: &'a Provider,
        now: u64,
        limits: Limits,
        policy: PqPolicy,
    ) -> Validator<'a> {
        Validator {
            profile,
            provider,
            now: now as u32,
            limits,
            policy,
            verifications: 0,
        }
    }

    /// Signature verifications done so far.
    pub fn verifications(&self) -> u32 {
        self.verifications
    }

    fn supported(&self, alg: SecAlg) -> Option<Algorithm> {
        self.profile
            .algorithm(alg)
            .filter(|a| self.provider.scheme(*a).is_ok())
    }

    /// Trusts DNSKEYs configured directly as trust anchors (RFC 4035 §4.4 allows DNSKEY as well
    /// as DS anchors): no signature is needed, because the operator vouches for the keys.
    /// Keys without the Zone Key flag are dropped (RFC 4034 §2.1.1).
    pub fn trust_anchor_dnskeys(&self, zone: &Name, dnskeys: &[Vec<u8>]) -> TrustedKeys {
        TrustedKeys {
            zone: zone.clone(),
            keys: dnskeys
                .iter()
                .filter(|k| DnskeyRef::parse(k).is_some_and(|d| d.is_zone_key()))
                .cloned()
                .collect(),
            required: Vec::new(),
        }
    }

    /// Establishes trust in a zone's DNSKEY RRset from a trusted DS RRset (or trust-anchor DS
    /// records): some DNSKEY must match a DS with a supported digest and algorithm, and a
    /// signature by such a key must verify over the DNSKEY RRset (RFC 4035 §5.2).
    ///
    /// Returns `Ok(None)` when no DS uses a supported algorithm and digest: the zone is then
    /// Insecure (RFC 4035 §5.2, RFC 6840 §5.2).
    ///
    /// # Errors
    /// A Bogus [`Reason`] when supported DS records exist but nothing verifies.
    pub fn trust_dnskeys(
        &mut self,
        zone: &Name,
        ds_set: &[Vec<u8>],
        dnskeys: &[Vec<u8>],
        rrsigs: &[Vec<u8>],
    ) -> Result<Option<TrustedKeys>, Reason> {
        let usable_ds: Vec<(u16, SecAlg, DigestType, &[u8])> = ds_set
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
        let required: Vec<SecAlg> = match self.policy {
            PqPolicy::RequirePq => {
                let pq: Vec<SecAlg> = usable_ds
                    .iter()
                    .map(|d| d.1)
                    .filter(|a| self.supported(*a).is_some_and(Algorithm::is_post_quantum))
                    .collect();
                pq
            }
            PqPolicy::AnyAlgorithm => Vec::new(),
        };
        if dnskeys.is_empty() {
            return Err(Reason::new(
                Ede::DNSKEY_MISSING,
                format!("no DNSKEY RRset for {zone}"),
            ));
        }
        if dnskeys.len() > self.limits.max_dnskeys {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!(
                    "{} DNSKEYs at {zone} exceed the limit of {}",
                    dnskeys.len(),
                    self.limits.max_dnskeys
                ),
            ));
        }
        // DNSKEYs that a DS vouches for.
        let mut matched: Vec<&[u8]> = Vec::new();
        for key in dnskeys {
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
        if matched.is_empty() {
            return Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!("no DNSKEY at {zone} matches its DS records"),
            ));
        }
        let vouched = TrustedKeys {
            zone: zone.clone(),
            keys: matched.iter().map(|k| k.to_vec()).collect(),
            required: required.clone(),
        };
        self.verify_rrset(&vouched, zone, RrType::DNSKEY, dnskeys, rrsigs)?;
        Ok(Some(TrustedKeys {
            zone: zone.clone(),
            keys: dnskeys.to_vec(),
            required,
        }))
    }

    /// Verifies an RRset (RDATA list, uncompressed) with its RRSIGs against trusted keys
    /// (RFC 4035 §5.3): signer must be the keys' zone, owner inside it, labels consistent,
    /// validity window around `now`, and the signature must verify with a matching key.
    ///
    /// # Errors
    /// A Bogus [`Reason`] naming the last problem found (missing RRSIGs, expired, not yet
    /// valid, no matching key, bad signature, work limit).
    pub fn verify_rrset(
        &mut self,
        keys: &TrustedKeys,
        owner: &Name,
        rtype: RrType,
        rdatas: &[Vec<u8>],
        rrsigs: &[Vec<u8>],
    ) -> Result<VerifiedRRset, Reason> {
        let mut last = Reason::new(
            Ede::RRSIGS_MISSING,
            format!("no RRSIG for {owner} {rtype} by {}", keys.zone),
        );
        let mut verified_algs: Vec<SecAlg> = Vec::new();
        let mut result = None;
        for raw in rrsigs.iter().take(self.limits.max_rrsigs_per_rrset) {
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
            if !serial_le(f.inception, self.now) {
                last = Reason::new(
                    Ede::SIGNATURE_NOT_YET_VALID,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} is not yet valid",
                        f.key_tag
                    ),
                );
                continue;
            }
            if !serial_le(self.now, f.expiration) {
                last = Reason::new(
                    Ede::SIGNATURE_EXPIRED,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} has expired",
                        f.key_tag
                    ),
                );
                continue;
            }
            let Some(signed_owner) = signing_owner(owner, f.labels) else {
                last = Reason::new(
                    Ede::DNSSEC_BOGUS,
                    "RRSIG labels field exceeds the owner's labels",
                );
                continue;
            };
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
                        "no DNSKEY with tag {} algorithm {} at {}",
                        f.key_tag, f.algorithm, keys.zone
                    ),
                );
                continue;
            }
            let data = signed_data(
                f,
                &signed_owner,
                Class::IN,
                rdatas.iter().map(Vec::as_slice),
            );
            let scheme = self
                .provider
                .scheme(alg)
                .map_err(|e| Reason::new(Ede::UNSUPPORTED_DNSKEY_ALGORITHM, e.to_string()))?;
            let mut ok = false;
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
                if scheme.verify(&key[4..], &data, sig.signature).is_ok() {
                    ok = true;
                    break;
                }
            }
            if !ok {
                last = Reason::new(
                    Ede::DNSSEC_BOGUS,
                    format!(
                        "RRSIG over {owner} {rtype} by key {} ({alg}) does not verify",
                        f.key_tag
                    ),
                );
                continue;
            }
            verified_algs.push(f.algorithm);
            result = Some(VerifiedRRset {
                owner: owner.clone(),
                rtype,
                signed_owner,
            });
            if keys.required.iter().all(|a| verified_algs.contains(a)) {
                break;
            }
        }
        match result {
            Some(v) if keys.required.iter().all(|a| verified_algs.contains(a)) => Ok(v),
            Some(_) => Err(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!("{owner} {rtype} validates only with classical algorithms, but the chain offers post-quantum {:?} (require-pq)", keys.required.iter().map(|a| a.0).collect::<Vec<_>>()),
            )),
            None => Err(last),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::dnskey::ds_record;
    use crate::dnssec::keyfile::{KeyRole, ZoneKey};
    use crate::dnssec::rrsig::{label_count, RrsigFields};

    struct Fixture {
        zone: Name,
        keys: Vec<ZoneKey>,
        dnskeys: Vec<Vec<u8>>,
        ds: Vec<Vec<u8>>,
        /// RRSIGs over the DNSKEY RRset by every key.
        key_sigs: Vec<Vec<u8>>,
    }

    fn fixture(algs: &[Algorithm]) -> Fixture {
        let zone: Name = "example.".parse().unwrap();
        let profile = Profile::default_profile();
        let provider = Provider::default_provider();
        let keys: Vec<ZoneKey> = algs
            .iter()
            .map(|a| ZoneKey::generate(&zone, *a, KeyRole::Csk, &profile, &provider, 300).unwrap())
            .collect();
        let dnskeys: Vec<Vec<u8>> = keys.iter().map(ZoneKey::dnskey_rdata).collect();
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
            .map(|k| sign(k, &zone, RrType::DNSKEY, &dnskeys, WINDOW))
            .collect();
        Fixture {
            zone,
            keys,
            dnskeys,
            ds,
            key_sigs,
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

    /// A validator at NOW and the fixture's keys, trusted through its DS records.
    fn trust_fixture<'a>(
        p: &'a Profile,
        pr: &'a Provider,
        policy: PqPolicy,
        f: &Fixture,
    ) -> (Validator<'a>, TrustedKeys) {
        let mut v = Validator::new(p, pr, NOW, Limits::default(), policy);
        let keys = v
            .trust_dnskeys(&f.zone, &f.ds, &f.dnskeys, &f.key_sigs)
            .unwrap()
            .unwrap();
        (v, keys)
    }

    #[test]
    fn ds_dnskey_rrsig_chain_and_its_failures() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        let (mut v, trusted) = trust_fixture(&profile, &provider, PqPolicy::AnyAlgorithm, &f);

        let www: Name = "www.example.".parse().unwrap();
        let a = vec![vec![192, 0, 2, 1]];
        let sigs = vec![sign(&f.keys[0], &www, RrType::A, &a, WINDOW)];
        assert!(v.verify_rrset(&trusted, &www, RrType::A, &a, &sigs).is_ok());

        // Tampered RDATA.
        let bad = vec![vec![192, 0, 2, 2]];
        let err = v
            .verify_rrset(&trusted, &www, RrType::A, &bad, &sigs)
            .unwrap_err();
        assert_eq!(err.ede, Ede::DNSSEC_BOGUS);
        let mut ede_of = |sigs: &[Vec<u8>]| {
            v.verify_rrset(&trusted, &www, RrType::A, &a, sigs)
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
        assert_eq!(ede_of(&[wrong_tag]), Ede::DNSKEY_MISSING);

        // DS mismatch.
        let mut bad_ds = f.ds.clone();
        for d in &mut bad_ds {
            let last = d.len() - 1;
            d[last] ^= 1;
        }
        let err = v
            .trust_dnskeys(&f.zone, &bad_ds, &f.dnskeys, &f.key_sigs)
            .unwrap_err();
        assert!(err.text.contains("matches its DS"), "{err}");
        // Missing DNSKEY.
        assert_eq!(
            v.trust_dnskeys(&f.zone, &f.ds, &[], &f.key_sigs)
                .unwrap_err()
                .ede,
            Ede::DNSKEY_MISSING
        );
        // DS with an unknown algorithm only: insecure, not bogus.
        let mut unknown = f.ds[0].clone();
        unknown[2] = 200;
        assert!(v
            .trust_dnskeys(&f.zone, &[unknown], &f.dnskeys, &f.key_sigs)
            .unwrap()
            .is_none());
    }

    #[test]
    fn require_pq_rejects_classical_only_answers() {
        let f = fixture(&[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44]);
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        let www: Name = "www.example.".parse().unwrap();
        let a = vec![vec![192, 0, 2, 1]];
        let classical = vec![sign(&f.keys[0], &www, RrType::A, &a, WINDOW)];
        let both = vec![
            classical[0].clone(),
            sign(&f.keys[1], &www, RrType::A, &a, WINDOW),
        ];

        let (mut v, trusted) = trust_fixture(&profile, &provider, PqPolicy::RequirePq, &f);
        let err = v
            .verify_rrset(&trusted, &www, RrType::A, &a, &classical)
            .unwrap_err();
        assert!(err.text.contains("require-pq"), "{err}");
        assert!(v.verify_rrset(&trusted, &www, RrType::A, &a, &both).is_ok());

        let (mut any, trusted) = trust_fixture(&profile, &provider, PqPolicy::AnyAlgorithm, &f);
        assert!(any
            .verify_rrset(&trusted, &www, RrType::A, &a, &classical)
            .is_ok());
    }

    #[test]
    fn thousands_of_rrsigs_stay_within_the_work_limit() {
        let f = fixture(&[Algorithm::MlDsa44]);
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        let (mut v, trusted) = trust_fixture(&profile, &provider, PqPolicy::AnyAlgorithm, &f);
        let www: Name = "www.example.".parse().unwrap();
        let a = vec![vec![192, 0, 2, 1]];
        let mut bogus = sign(&f.keys[0], &www, RrType::A, &a, WINDOW);
        let last = bogus.len() - 1;
        bogus[last] ^= 1;
        let many = vec![bogus; 5000];
        assert!(v
            .verify_rrset(&trusted, &www, RrType::A, &a, &many)
            .is_err());
        assert!(v.verifications() <= 1 + Limits::default().max_rrsigs_per_rrset as u32);
    }
}

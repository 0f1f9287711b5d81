//! Algorithm-number profiles: which [`Algorithm`] a DNSSEC algorithm number means.
//!
//! IANA has assigned one post-quantum number (18 = ML-DSA-44); every other PQC number in use is
//! project-local and projects clash (`docs/pqc-dnssec-wire.md` §1). A profile is chosen per
//! zone (signer) and per trust anchor (validator). Classical numbers (RFC 8624) are the same in
//! every built-in profile.

use std::collections::BTreeMap;

use super::algorithm::{Algorithm, SecAlg};
use super::provider::Provider;

/// A number ↔ algorithm mapping. Numbers it does not list are unknown algorithms: data, and
/// a validation failure where a signature must be checked, never a parse error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    name: String,
    /// The built-in profile this one starts from (its own name for a built-in profile); external
    /// schemes' [`super::algorithm::AlgorithmInfo::numbers`] are looked up under it.
    base: String,
    by_number: BTreeMap<u8, Algorithm>,
}

/// Why a profile could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// No built-in profile has this name.
    #[error(
        "unknown profile {0:?}; built-in profiles: default, oqs-bind, verisign-2025 (alias \
         verisign), verisign-2026"
    )]
    UnknownProfile(String),
    /// A custom entry names an algorithm pqdns does not know.
    #[error("unknown algorithm {0:?} in custom profile; `pqdns-zone algorithms` lists the names")]
    UnknownAlgorithm(String),
    /// A custom mapping entry is not `NUMBER=ALGORITHM` with a number from 0 to 255.
    #[error("bad profile mapping {0:?}: expected NUMBER=ALGORITHM, NUMBER from 0 to 255")]
    BadMapping(String),
}

const CLASSICAL: &[(u8, Algorithm)] = &[
    // RFC 8624 §3.1: "MUST NOT" sign, "MUST" validate; unbound, BIND and Knot Resolver
    // validate them by default ([`Profile::without`] treats them as unsupported).
    (5, Algorithm::RsaSha1),
    (7, Algorithm::RsaSha1Nsec3Sha1),
    (8, Algorithm::RsaSha256),
    (10, Algorithm::RsaSha512),
    (13, Algorithm::EcdsaP256Sha256),
    (14, Algorithm::EcdsaP384Sha384),
    (15, Algorithm::Ed25519),
    (16, Algorithm::Ed448),
];

/// IANA 18 for ML-DSA-44, CoreDNS dnssec_pqc numbers for the rest, MTL as Verisign: the 2025
/// SLH-DSA-MTL at 248/249 and the 2026 MTL modes at 128–131 (the numbers do not overlap, so a
/// default-profile validator reads zones of either generation).
///
/// 39, 49, 50 and 51 are pqdns-local choices with no standing outside this profile (IANA has
/// not assigned them; treat them as private use between consenting peers): SPHINCS+-128f so
/// the benchmark matrix can run the study's 128f rows, and FIPS 205 SLH-DSA, which is not
/// signature-compatible with the SPHINCS+ round 3.1 numbers 19/29.
const DEFAULT: &[(u8, Algorithm)] = &[
    (17, Algorithm::Falcon512),
    (18, Algorithm::MlDsa44),
    (19, Algorithm::SphincsSha2_128s),
    (20, Algorithm::Mayo1),
    (21, Algorithm::Snova24_5_4),
    (27, Algorithm::Falcon1024),
    (28, Algorithm::MlDsa65),
    (29, Algorithm::SphincsShake128s),
    (30, Algorithm::Mayo3),
    (37, Algorithm::FalconPadded512),
    (38, Algorithm::MlDsa87),
    (39, Algorithm::SphincsSha2_128f),
    (47, Algorithm::FalconPadded1024),
    (49, Algorithm::SphincsShake128f),
    (50, Algorithm::SlhDsaSha2_128s),
    (51, Algorithm::SlhDsaShake128s),
    (128, Algorithm::FlDsaMtl512),
    (129, Algorithm::MlDsaMtl44),
    (130, Algorithm::SlhDsaMtl2026Sha2_128s),
    (131, Algorithm::SlhDsaMtl2026Shake128s),
    (248, Algorithm::MtlSlhDsaSha2_128s),
    (249, Algorithm::MtlSlhDsaShake128s),
];

/// OQS-bind (BIND 9 fork): 18 is round-3 Dilithium2, not ML-DSA-44.
const OQS_BIND: &[(u8, Algorithm)] = &[
    (17, Algorithm::Falcon512),
    (18, Algorithm::Dilithium2),
    (19, Algorithm::SphincsSha2_128s),
];

/// Verisign's 2025 MTL-mode ldns/unbound/NSD builds (MTL library 1.1, SLH-DSA-MTL at 248/249).
const VERISIGN_2025: &[(u8, Algorithm)] = &[
    (230, Algorithm::Mayo1),
    (231, Algorithm::Mayo2),
    (232, Algorithm::Snova24_5_4),
    (244, Algorithm::Falcon512),
    (245, Algorithm::MlDsa44),
    (246, Algorithm::SphincsSha2_128s),
    (247, Algorithm::SphincsShake128s),
    (248, Algorithm::MtlSlhDsaSha2_128s),
    (249, Algorithm::MtlSlhDsaShake128s),
];

/// Verisign's 2026 builds (mtl-mode-nsd `val_pqc_algo.c`, mtl-mode-ldns "MTL Mode v08",
/// draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02): ML-DSA-44 at IANA's 18, the MTL modes at 128–131
/// (130/131 sign ladders with pre-FIPS SPHINCS+-128s-simple), 248/249 gone. 132/133 (MAYO-MTL)
/// and 134 (SNOVA-MTL) are left unknown: pqdns has no MTL mode over MAYO or SNOVA.
const VERISIGN_2026: &[(u8, Algorithm)] = &[
    (18, Algorithm::MlDsa44),
    (128, Algorithm::FlDsaMtl512),
    (129, Algorithm::MlDsaMtl44),
    (130, Algorithm::SlhDsaMtl2026Sha2_128s),
    (131, Algorithm::SlhDsaMtl2026Shake128s),
    (230, Algorithm::Mayo1),
    (231, Algorithm::Mayo2),
    (232, Algorithm::Snova24_5_4),
    (244, Algorithm::Falcon512),
    (246, Algorithm::SphincsSha2_128s),
    (247, Algorithm::SphincsShake128s),
];

impl Profile {
    /// Names of the built-in profiles (`verisign` is also accepted, as the old name of
    /// `verisign-2025`).
    pub const BUILT_IN: &'static [&'static str] =
        &["default", "oqs-bind", "verisign-2025", "verisign-2026"];

    /// A built-in profile by name. `verisign`, the name of `verisign-2025` before Verisign's
    /// 2026 renumbering, is kept as an alias so existing configurations keep their meaning;
    /// the profile it gives is called `verisign-2025`.
    ///
    /// # Errors
    /// [`ProfileError::UnknownProfile`] for any other name.
    pub fn named(name: &str) -> Result<Profile, ProfileError> {
        let name = if name == "verisign" {
            "verisign-2025"
        } else {
            name
        };
        let pq = match name {
            "default" => DEFAULT,
            "oqs-bind" => OQS_BIND,
            "verisign-2025" => VERISIGN_2025,
            "verisign-2026" => VERISIGN_2026,
            _ => return Err(ProfileError::UnknownProfile(name.to_string())),
        };
        Ok(Profile {
            name: name.to_string(),
            base: name.to_string(),
            by_number: CLASSICAL.iter().chain(pq).copied().collect(),
        })
    }

    /// The `default` profile.
    pub fn default_profile() -> Profile {
        Profile::named("default").expect("built-in")
    }

    /// A custom profile: `base` with `numbers` (algorithm name → number) laid over it. A number
    /// given here replaces whatever `base` mapped to it, and the algorithm loses its old number.
    ///
    /// # Errors
    /// [`ProfileError`] if `base` or an algorithm name is unknown.
    pub fn custom(
        name: &str,
        base: &str,
        numbers: &BTreeMap<String, u8>,
    ) -> Result<Profile, ProfileError> {
        let mut profile = Profile::named(base)?;
        profile.name = name.to_string();
        for (alg_name, &number) in numbers {
            let alg = Algorithm::from_name(alg_name)
                .ok_or_else(|| ProfileError::UnknownAlgorithm(alg_name.clone()))?;
            profile.assign(SecAlg(number), alg);
        }
        Ok(profile)
    }

    /// A profile from mapping text, as `pqdns-zone --profile` takes it: entries
    /// `NUMBER=ALGORITHM` separated by commas or newlines, laid over the built-in profile
    /// named by an optional `base=NAME` entry (default `default`); `#` starts a comment. For
    /// example `base=verisign-2026,253=SLH-DSA-MTL-FIPS205-SHA2-128s`. Algorithm names are
    /// looked up in `provider` too. Later entries win; a number given replaces what the base
    /// mapped to it and the algorithm loses its old number ([`Profile::assign`]).
    ///
    /// # Errors
    /// [`ProfileError::BadMapping`] for an entry that is not `NUMBER=ALGORITHM` or
    /// `base=NAME`; [`ProfileError::UnknownProfile`] / [`ProfileError::UnknownAlgorithm`] for
    /// unknown names.
    pub fn from_mappings(
        name: &str,
        text: &str,
        provider: &Provider,
    ) -> Result<Profile, ProfileError> {
        let entries: Vec<(&str, &str)> = text
            .lines()
            .map(|line| line.split('#').next().unwrap_or(""))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|e| {
                e.split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .ok_or_else(|| ProfileError::BadMapping(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let base = entries
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case("base"))
            .map_or("default", |(_, v)| *v);
        let mut profile = Profile::named(base)?.with_provider(provider);
        profile.name = name.to_string();
        for (key, value) in entries {
            if key.eq_ignore_ascii_case("base") {
                continue;
            }
            let number: u8 = key
                .parse()
                .map_err(|_| ProfileError::BadMapping(format!("{key}={value}")))?;
            let alg = provider
                .algorithm_by_name(value)
                .or_else(|| Algorithm::from_name(value))
                .ok_or_else(|| ProfileError::UnknownAlgorithm(value.to_string()))?;
            profile.assign(SecAlg(number), alg);
        }
        Ok(profile)
    }

    /// As [`Profile::custom`], but algorithm names are looked up in `provider` too, so schemes
    /// registered from outside pqdns can be numbered by name; external schemes' own numbers for
    /// `base` are applied first ([`Profile::with_provider`]).
    ///
    /// # Errors
    /// [`ProfileError`] if `base` or an algorithm name is unknown.
    pub fn custom_with_provider(
        name: &str,
        base: &str,
        numbers: &BTreeMap<String, u8>,
        provider: &Provider,
    ) -> Result<Profile, ProfileError> {
        let mut profile = Profile::named(base)?.with_provider(provider);
        profile.name = name.to_string();
        for (alg_name, &number) in numbers {
            let alg = provider
                .algorithm_by_name(alg_name)
                .or_else(|| Algorithm::from_name(alg_name))
                .ok_or_else(|| ProfileError::UnknownAlgorithm(alg_name.clone()))?;
            profile.assign(SecAlg(number), alg);
        }
        Ok(profile)
    }

    /// This profile plus the numbers that `provider`'s external schemes declare for its base
    /// profile ([`super::algorithm::AlgorithmInfo::numbers`]). A declared number replaces what
    /// the profile mapped to it.
    pub fn with_provider(mut self, provider: &Provider) -> Profile {
        for alg in provider.algorithms() {
            if let Algorithm::External(info) = alg {
                if let Some((_, n)) = info.numbers.iter().find(|(p, _)| *p == self.base) {
                    self.assign(SecAlg(*n), alg);
                }
            }
        }
        self
    }

    /// Maps `number` to `alg`: whatever `number` meant before is dropped, and `alg` loses any
    /// other number it had.
    pub fn assign(&mut self, number: SecAlg, alg: Algorithm) {
        self.by_number.retain(|_, a| *a != alg);
        self.by_number.insert(number.0, alg);
    }

    /// This profile without `number`: the algorithm becomes unknown, so a validator treats
    /// zones signed only with it as Insecure (RFC 4035 §5.2, RFC 6840 §5.2), as BIND's
    /// `disable-algorithms` does; e.g. RSASHA1 (5) and RSASHA1-NSEC3-SHA1 (7), which the
    /// profiles validate by default (RFC 8624 §3.1).
    pub fn without(mut self, number: SecAlg) -> Profile {
        self.by_number.remove(&number.0);
        self
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What `number` means here, or `None` for an unknown algorithm number.
    pub fn algorithm(&self, number: SecAlg) -> Option<Algorithm> {
        self.by_number.get(&number.0).copied()
    }

    /// The number this profile gives `alg`, or `None` if it has none.
    pub fn number(&self, alg: Algorithm) -> Option<SecAlg> {
        self.by_number
            .iter()
            .find(|(_, a)| **a == alg)
            .map(|(n, _)| SecAlg(*n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_disagree_where_projects_do() {
        let default = Profile::named("default").unwrap();
        let oqs = Profile::named("oqs-bind").unwrap();
        let verisign = Profile::named("verisign-2025").unwrap();
        assert_eq!(default.algorithm(SecAlg(18)), Some(Algorithm::MlDsa44));
        assert_eq!(oqs.algorithm(SecAlg(18)), Some(Algorithm::Dilithium2));
        assert_eq!(verisign.number(Algorithm::MlDsa44), Some(SecAlg(245)));
        assert_eq!(
            default.number(Algorithm::FalconPadded1024),
            Some(SecAlg(47))
        );
        for p in [&default, &oqs, &verisign] {
            assert_eq!(p.algorithm(SecAlg(13)), Some(Algorithm::EcdsaP256Sha256));
            assert_eq!(p.algorithm(SecAlg(200)), None);
        }
        assert!(matches!(
            Profile::named("coredns"),
            Err(ProfileError::UnknownProfile(_))
        ));
    }

    #[test]
    fn verisign_profiles_follow_the_2026_renumbering() {
        let old = Profile::named("verisign").unwrap();
        assert_eq!(old.name(), "verisign-2025", "alias of the 2025 profile");
        assert_eq!(old, Profile::named("verisign-2025").unwrap());
        let new = Profile::named("verisign-2026").unwrap();
        assert_eq!(new.algorithm(SecAlg(129)), Some(Algorithm::MlDsaMtl44));
        assert_eq!(new.algorithm(SecAlg(128)), Some(Algorithm::FlDsaMtl512));
        assert_eq!(
            new.algorithm(SecAlg(130)),
            Some(Algorithm::SlhDsaMtl2026Sha2_128s)
        );
        assert_eq!(new.algorithm(SecAlg(18)), Some(Algorithm::MlDsa44));
        assert_eq!(new.algorithm(SecAlg(248)), None, "gone in 2026");
        assert_eq!(
            new.algorithm(SecAlg(132)),
            None,
            "MAYO-MTL: not implemented"
        );
        assert_eq!(
            old.algorithm(SecAlg(248)),
            Some(Algorithm::MtlSlhDsaSha2_128s)
        );
        assert_eq!(old.algorithm(SecAlg(129)), None);
    }

    #[test]
    fn mappings_follow_renumbering_without_a_release() {
        let provider = Provider::default_provider();
        let p = Profile::from_mappings(
            "lab",
            "base=verisign-2026, 253=SLH-DSA-MTL-FIPS205-SHA2-128s\n# note\n140=ML-DSA-MTL-44",
            &provider,
        )
        .unwrap();
        assert_eq!(p.name(), "lab");
        assert_eq!(
            p.algorithm(SecAlg(253)),
            Some(Algorithm::SlhDsaMtlFips205Sha2_128s)
        );
        assert_eq!(p.algorithm(SecAlg(140)), Some(Algorithm::MlDsaMtl44));
        assert_eq!(p.algorithm(SecAlg(129)), None, "moved to 140");
        assert_eq!(
            p.algorithm(SecAlg(130)),
            Some(Algorithm::SlhDsaMtl2026Sha2_128s)
        );
        let d = Profile::from_mappings("x", "250=MAYO-2", &provider).unwrap();
        assert_eq!(
            d.algorithm(SecAlg(18)),
            Some(Algorithm::MlDsa44),
            "base default"
        );
        for (bad, err) in [
            ("300=MAYO-2", ProfileError::BadMapping("300=MAYO-2".into())),
            ("MAYO-2", ProfileError::BadMapping("MAYO-2".into())),
            (
                "1=Rainbow",
                ProfileError::UnknownAlgorithm("Rainbow".into()),
            ),
            ("base=nope", ProfileError::UnknownProfile("nope".into())),
        ] {
            assert_eq!(Profile::from_mappings("x", bad, &provider), Err(err));
        }
    }

    #[test]
    fn custom_overrides_move_numbers() {
        let numbers = BTreeMap::from([("MAYO-2".to_string(), 250u8), ("ML-DSA-44".into(), 253)]);
        let p = Profile::custom("lab", "default", &numbers).unwrap();
        assert_eq!(p.algorithm(SecAlg(250)), Some(Algorithm::Mayo2));
        assert_eq!(p.algorithm(SecAlg(18)), None);
        assert_eq!(p.number(Algorithm::MlDsa44), Some(SecAlg(253)));
        let bad = BTreeMap::from([("Rainbow".to_string(), 251u8)]);
        assert_eq!(
            Profile::custom("x", "default", &bad),
            Err(ProfileError::UnknownAlgorithm("Rainbow".into()))
        );
    }
}

//! Downgrade protection by DS: a zone whose authenticated DS RRset (or trust anchor) names a
//! post-quantum algorithm the validator supports must be validated through such an algorithm.
//!
//! RFC 6840 §5.11 lets a validator accept an RRset signed with *any* algorithm it supports, so
//! an attacker who can break one classical algorithm (a quantum adversary and ECDSA) strips
//! the post-quantum RRSIGs of a dual-signed zone and the validator falls back to the classical
//! ones. The DS RRset is the parent's signed statement of which algorithms the child uses; the
//! rule below, applied by [`super::validate::Validator`] unless it is turned off
//! ([`super::validate::Validator::with_ds_downgrade_protection`]), takes it as a commitment:
//!
//! 1. The *signalled algorithms* of zone Z are the algorithms of Z's DS records that are usable
//!    (supported digest type, algorithm supported by the profile and provider, RFC 4035 §5.2)
//!    and post-quantum ([`super::algorithm::Algorithm::is_post_quantum`], the same test
//!    `--require-pq` uses: ML-DSA-44 = 18 and the profile's post-quantum numbers). The DS RRset
//!    is the one verified at Z's parent, or the operator's trust anchor for Z.
//! 2. If that set is empty, nothing changes (RFC 6840 §5.11: any supported algorithm).
//! 3. Otherwise Z's DNSKEY RRset must be signed by a DS-matched key of a signalled algorithm,
//!    and every RRset verified with Z's keys — answers, CNAMEs, NSEC/NSEC3 denial records, the
//!    DS RRsets of Z's children and the proofs that a child has no DS — must carry a verified
//!    RRSIG of a signalled algorithm. RRSIGs of other algorithms are not tried. So the rule
//!    covers Z and everything below it down to the next delegation.
//! 4. A child C below Z decides afresh from C's own DS RRset (which, being signed by Z, was
//!    itself held to Z's rule): a child whose DS names only classical algorithms is validated
//!    with them.
//! 5. An RRset that fails the rule is Bogus: EDE 10 (RRSIGs Missing) when no RRSIG of a
//!    signalled algorithm is present, else the reason the signalled one failed (EDE 6 DNSSEC
//!    Bogus, expired, …), the text naming the DS and the algorithms it signalled.
//!
//! `PqPolicy::RequirePq` stays the stricter global policy: post-quantum at every link from
//! the anchor, whatever the DS RRsets say. Keys configured directly as DNSKEYs
//! ([`super::validate::danger::trust_anchor_dnskeys`]) signal nothing; the resolver turns
//! DNSKEY trust anchors into DS records, so its anchors do.

use super::algorithm::SecAlg;

/// The post-quantum algorithms a zone's DS RRset signalled (rule 1 of the module
/// documentation); empty when the DS RRset signalled none, and then any algorithm is
/// permitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignalledAlgorithms(Vec<SecAlg>);

impl SignalledAlgorithms {
    /// The set of `algorithms` (already filtered to usable post-quantum ones), without
    /// repeats, in order of first appearance.
    pub(crate) fn from_ds(algorithms: impl IntoIterator<Item = SecAlg>) -> SignalledAlgorithms {
        let mut out: Vec<SecAlg> = Vec::new();
        for a in algorithms {
            if !out.contains(&a) {
                out.push(a);
            }
        }
        SignalledAlgorithms(out)
    }

    /// The signalled algorithms; empty when there are none.
    pub fn algorithms(&self) -> &[SecAlg] {
        &self.0
    }

    /// True if the DS RRset signalled no post-quantum algorithm (the rule does not apply).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True if an RRSIG of `alg` may authenticate data of the zone: always when nothing was
    /// signalled, else only for a signalled algorithm.
    pub fn permits(&self, alg: SecAlg) -> bool {
        self.0.is_empty() || self.0.contains(&alg)
    }

    /// The algorithms as text, with `name` for each (`ML-DSA-44 (18)`), joined by `, `.
    pub(crate) fn describe(&self, name: impl Fn(SecAlg) -> String) -> String {
        self.0
            .iter()
            .map(|a| name(*a))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_set_permits_any_algorithm_and_a_signalled_one_only_itself() {
        let none = SignalledAlgorithms::default();
        assert!(none.is_empty());
        assert!(none.permits(SecAlg::ECDSAP256SHA256) && none.permits(SecAlg::MLDSA44));
        let pq = SignalledAlgorithms::from_ds([SecAlg::MLDSA44, SecAlg::MLDSA44]);
        assert_eq!(pq.algorithms(), &[SecAlg::MLDSA44]);
        assert!(pq.permits(SecAlg::MLDSA44));
        assert!(!pq.permits(SecAlg::ECDSAP256SHA256));
        assert_eq!(pq.describe(|a| format!("#{}", a.0)), "#18");
    }
}

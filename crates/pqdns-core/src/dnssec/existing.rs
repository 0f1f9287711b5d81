//! What signing does with the DNSSEC records already in its input (a re-signed zone, a zone
//! transferred from another signer, the real root zone): an explicit policy instead of keeping
//! whatever happens to be there.
//!
//! RRSIG, NSEC, NSEC3 and NSEC3PARAM records are always rebuilt by the signer
//! ([`super::sign::sign_zone`]), so they are removed here and counted. DNSKEY records that do
//! not belong to the signing keys are removed ([`ExistingDnssec::Strip`], the default) or
//! kept ([`ExistingDnssec::KeepDnskeys`], e.g. a pre-published key of a rollover). A kept
//! DNSKEY of an algorithm none of the signing keys has would break RFC 4035 §2.2 ("an RRSIG
//! for each RRset using at least one DNSKEY of each algorithm in the zone apex DNSKEY RRset")
//! and make the zone fail validation, so it is refused before any signing work.
//!
//! CDS and CDNSKEY (RFC 7344) are the operator's messages to the parent and stay as they are.

use std::fmt;

use super::algorithm::SecAlg;
use super::dnskey::{key_tag, DnskeyRef};
use super::keyfile::ZoneKey;
use crate::rr::RrType;
use crate::zone::Zone;

/// The policy for DNSKEY records found in a zone about to be signed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExistingDnssec {
    /// Remove every DNSKEY that is not one of the signing keys (default).
    #[default]
    Strip,
    /// Keep the DNSKEYs that are not signing keys (published, not signing); their algorithms
    /// must be among the signing keys' algorithms.
    KeepDnskeys,
}

/// A DNSKEY found in the input, by algorithm number, key tag and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundKey {
    /// Algorithm number (RFC 4034 §2.1.3).
    pub algorithm: SecAlg,
    /// Key tag (RFC 4034 Appendix B).
    pub key_tag: u16,
    /// DNSKEY flags (257 for a KSK, 256 for a ZSK).
    pub flags: u16,
}

impl fmt::Display for FoundKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "algorithm {} tag {} flags {}",
            self.algorithm, self.key_tag, self.flags
        )
    }
}

/// What [`prepare`] removed and kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// DNSKEYs removed (not signing keys, policy [`ExistingDnssec::Strip`]).
    pub removed_dnskeys: Vec<FoundKey>,
    /// DNSKEYs kept without signing with them (policy [`ExistingDnssec::KeepDnskeys`]).
    pub kept_dnskeys: Vec<FoundKey>,
    /// RRSIG records removed.
    pub rrsigs: usize,
    /// NSEC records removed.
    pub nsec: usize,
    /// NSEC3 and NSEC3PARAM records removed.
    pub nsec3: usize,
}

impl Prepared {
    /// True if the input had no DNSSEC records besides the signing keys' DNSKEYs.
    pub fn is_empty(&self) -> bool {
        *self == Prepared::default()
    }
}

impl fmt::Display for Prepared {
    /// One line for a log: counts, and every DNSKEY removed or kept.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |list: &[FoundKey]| {
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "removed {} DNSKEY, {} RRSIG, {} NSEC, {} NSEC3/NSEC3PARAM",
            self.removed_dnskeys.len(),
            self.rrsigs,
            self.nsec,
            self.nsec3
        )?;
        if !self.removed_dnskeys.is_empty() {
            write!(f, " (DNSKEY removed: {})", keys(&self.removed_dnskeys))?;
        }
        if !self.kept_dnskeys.is_empty() {
            write!(
                f,
                "; kept {} DNSKEY without signing with them: {}",
                self.kept_dnskeys.len(),
                keys(&self.kept_dnskeys)
            )?;
        }
        Ok(())
    }
}

/// A kept DNSKEY whose algorithm no signing key has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the input's DNSKEY ({key}) would stay in the zone, but no signing key has algorithm {}: \
     RFC 4035 §2.2 requires signatures of every algorithm in the DNSKEY RRset; give a key of \
     that algorithm or strip the old keys",
    key.algorithm
)]
pub struct UnsignedAlgorithm {
    /// The DNSKEY that would be left without signatures of its algorithm.
    pub key: FoundKey,
}

/// Removes the DNSSEC records `sign_zone` rebuilds and applies `policy` to DNSKEYs at the apex
/// that are not among `keys`. The zone is unchanged if an error is returned.
///
/// # Errors
/// [`UnsignedAlgorithm`] under [`ExistingDnssec::KeepDnskeys`] if a kept DNSKEY's algorithm
/// has no signing key.
pub fn prepare(
    zone: &mut Zone,
    keys: &[ZoneKey],
    policy: ExistingDnssec,
) -> Result<Prepared, UnsignedAlgorithm> {
    let ours: Vec<Vec<u8>> = keys.iter().map(ZoneKey::dnskey_rdata).collect();
    let found = |rdata: &Vec<u8>| {
        DnskeyRef::parse(rdata).map(|k| FoundKey {
            algorithm: k.algorithm,
            key_tag: key_tag(rdata),
            flags: k.flags,
        })
    };
    let foreign: Vec<FoundKey> = zone
        .rrset(&zone.origin, RrType::DNSKEY)
        .map(|s| {
            s.rdatas
                .iter()
                .filter(|r| !ours.contains(r))
                .filter_map(found)
                .collect()
        })
        .unwrap_or_default();
    let mut prepared = Prepared::default();
    match policy {
        ExistingDnssec::KeepDnskeys => {
            if let Some(key) = foreign
                .iter()
                .find(|f| !keys.iter().any(|k| k.number == f.algorithm))
            {
                return Err(UnsignedAlgorithm { key: *key });
            }
            prepared.kept_dnskeys = foreign;
        }
        ExistingDnssec::Strip => {
            if let Some(set) = zone
                .nodes
                .get_mut(&zone.origin)
                .and_then(|n| n.get_mut(&RrType::DNSKEY))
            {
                set.rdatas.retain(|r| ours.contains(r));
            }
            prepared.removed_dnskeys = foreign;
        }
    }
    for set in zone.nsec3.values() {
        prepared.nsec3 += set.rdatas.len();
        prepared.rrsigs += set.rrsigs.len();
    }
    zone.nsec3.clear();
    for node in zone.nodes.values_mut() {
        for (rtype, set) in node.iter_mut() {
            prepared.rrsigs += set.rrsigs.len();
            set.rrsigs.clear();
            match *rtype {
                RrType::NSEC => prepared.nsec += set.rdatas.len(),
                RrType::NSEC3PARAM => prepared.nsec3 += set.rdatas.len(),
                _ => continue,
            }
            set.rdatas.clear();
        }
        node.retain(|_, s| !s.rdatas.is_empty());
    }
    zone.nodes.retain(|_, n| !n.is_empty());
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::keyfile::KeyRole;
    use crate::dnssec::{Algorithm, Profile, Provider};
    use crate::zonefile::ZoneFileReader;
    use crate::Name;

    fn key(alg: Algorithm) -> ZoneKey {
        let origin: Name = "example.".parse().unwrap();
        let profile = Profile::default_profile();
        let provider = Provider::default_provider();
        ZoneKey::generate(&origin, alg, KeyRole::Csk, &profile, &provider, 3600).unwrap()
    }

    /// A zone already signed (RRSIG, NSEC, NSEC3PARAM), with a foreign algorithm-8 DNSKEY if
    /// `foreign`, and the DNSKEYs of `extra`.
    fn presigned(foreign: bool, extra: &[&ZoneKey]) -> Zone {
        let mut text = String::from(
            "@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
             @ RRSIG SOA 8 1 300 20300101000000 20200101000000 1 example. AQID\n\
             @ NSEC ns SOA NS RRSIG NSEC DNSKEY\nns NSEC example. A RRSIG NSEC\n\
             @ NSEC3PARAM 1 0 0 -\n",
        );
        if foreign {
            text.push_str("@ DNSKEY 257 3 8 AwEAAcE=\n");
        }
        for k in extra {
            text.push_str(&format!("{}\n", k.dnskey_record()));
        }
        let records = ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300))
            .read_str(&text, "t")
            .unwrap();
        Zone::from_records("example.".parse().unwrap(), records).unwrap()
    }

    #[test]
    fn strip_removes_foreign_keys_and_old_chains_and_says_so() {
        let ecdsa = key(Algorithm::EcdsaP256Sha256);
        let mut zone = presigned(true, &[&ecdsa]);
        let prepared = prepare(
            &mut zone,
            std::slice::from_ref(&ecdsa),
            ExistingDnssec::Strip,
        )
        .unwrap();
        assert_eq!(prepared.removed_dnskeys.len(), 1);
        assert_eq!(prepared.removed_dnskeys[0].algorithm, SecAlg(8));
        assert_eq!((prepared.rrsigs, prepared.nsec, prepared.nsec3), (1, 2, 1));
        let apex = zone.rrset(&zone.origin, RrType::DNSKEY).unwrap();
        assert_eq!(apex.rdatas, vec![ecdsa.dnskey_rdata()], "our key stays");
        assert!(zone.rrset(&zone.origin, RrType::NSEC).is_none());
        assert!(zone
            .nodes
            .values()
            .all(|n| n.values().all(|s| s.rrsigs.is_empty())));
        let line = prepared.to_string();
        assert!(line.contains("removed 1 DNSKEY, 1 RRSIG, 2 NSEC"), "{line}");
        assert!(line.contains("algorithm 8 tag"), "{line}");
    }

    #[test]
    fn keeping_a_key_of_an_algorithm_nobody_signs_with_is_refused() {
        let ecdsa = key(Algorithm::EcdsaP256Sha256);
        let mut zone = presigned(true, &[]);
        let before = zone.clone();
        let err = prepare(
            &mut zone,
            std::slice::from_ref(&ecdsa),
            ExistingDnssec::KeepDnskeys,
        )
        .unwrap_err();
        assert_eq!(err.key.algorithm, SecAlg(8));
        assert!(err.to_string().contains("RFC 4035 §2.2"), "{err}");
        assert_eq!(zone, before, "unchanged on error");
    }

    #[test]
    fn keeping_a_prepublished_key_of_a_signing_algorithm_works() {
        let active = key(Algorithm::EcdsaP256Sha256);
        let next = key(Algorithm::EcdsaP256Sha256);
        let mut zone = presigned(false, &[&next]);
        let prepared = prepare(
            &mut zone,
            std::slice::from_ref(&active),
            ExistingDnssec::KeepDnskeys,
        )
        .unwrap();
        assert_eq!(prepared.kept_dnskeys.len(), 1);
        assert_eq!(prepared.kept_dnskeys[0].key_tag, next.key_tag());
        let apex = zone.rrset(&zone.origin, RrType::DNSKEY).unwrap();
        assert!(apex.rdatas.contains(&next.dnskey_rdata()));
    }
}

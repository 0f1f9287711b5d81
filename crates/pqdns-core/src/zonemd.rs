//! ZONEMD, a message digest over a whole zone (RFC 8976): computing the SIMPLE scheme with
//! SHA-384 or SHA-512 (§3), placing the record at the apex (§3.1–3.2, §3.5) and verifying it
//! (§4).
//!
//! The SIMPLE digest (§3.3.1) hashes every RR of the zone in canonical form (RFC 4034 §6.2)
//! and canonical order (§6.1 names, then types, then RDATA), duplicates once, glue and
//! occluded data included, except the apex ZONEMD RRset and the apex RRSIGs that cover
//! ZONEMD (§3.3.1.1). The RRSIGs at a name form one RRset of type RRSIG, ordered by their
//! RDATA like any other.
//!
//! A signer places a ZONEMD with a placeholder digest ([`add_placeholder`]) before building the
//! NSEC/NSEC3 chain, so that the apex type bitmap lists it, signs, then fills in the digest
//! ([`update`]) and signs the ZONEMD RRset again (RFC 8976 §3.5: "the ZONEMD RRset is
//! signed last").

use std::collections::BTreeMap;

use sha2::{Digest, Sha384, Sha512};

use crate::dnssec::keyfile::ZoneKey;
use crate::dnssec::sign::{sign_rrset_again, SignError, SigningPolicy};
use crate::name::Name;
use crate::rdata::canonical_rdata;
use crate::rr::{Class, RrType};
use crate::zone::{RRset, Zone};

/// The SIMPLE scheme (RFC 8976 §2.2.2, §5.2).
pub const SCHEME_SIMPLE: u8 = 1;

/// The shortest digest a ZONEMD may carry, in bytes (RFC 8976 §2.2.4: "MUST be at least 12
/// octets").
pub const MIN_DIGEST_LEN: usize = 12;

/// A ZONEMD hash algorithm (RFC 8976 §2.2.3, §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZonemdHash {
    /// SHA-384, number 1 (mandatory to implement).
    Sha384,
    /// SHA-512, number 2.
    Sha512,
}

impl ZonemdHash {
    /// The algorithm number in the ZONEMD record.
    pub fn number(self) -> u8 {
        match self {
            ZonemdHash::Sha384 => 1,
            ZonemdHash::Sha512 => 2,
        }
    }

    /// The algorithm with this number, if supported.
    pub fn from_number(number: u8) -> Option<ZonemdHash> {
        match number {
            1 => Some(ZonemdHash::Sha384),
            2 => Some(ZonemdHash::Sha512),
            _ => None,
        }
    }

    /// Digest length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            ZonemdHash::Sha384 => 48,
            ZonemdHash::Sha512 => 64,
        }
    }
}

impl std::fmt::Display for ZonemdHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ZonemdHash::Sha384 => "SHA-384",
            ZonemdHash::Sha512 => "SHA-512",
        })
    }
}

/// A ZONEMD record's RDATA fields (RFC 8976 §2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zonemd {
    /// The SOA serial of the zone the digest is of.
    pub serial: u32,
    /// Scheme number.
    pub scheme: u8,
    /// Hash algorithm number.
    pub hash: u8,
    /// The digest.
    pub digest: Vec<u8>,
}

impl Zonemd {
    /// Reads ZONEMD RDATA; `None` if shorter than the fixed fields and [`MIN_DIGEST_LEN`].
    pub fn parse(rdata: &[u8]) -> Option<Zonemd> {
        if rdata.len() < 6 + MIN_DIGEST_LEN {
            return None;
        }
        Some(Zonemd {
            serial: u32::from_be_bytes([rdata[0], rdata[1], rdata[2], rdata[3]]),
            scheme: rdata[4],
            hash: rdata[5],
            digest: rdata[6..].to_vec(),
        })
    }

    /// The wire-format RDATA.
    pub fn rdata(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(6 + self.digest.len());
        out.extend(self.serial.to_be_bytes());
        out.push(self.scheme);
        out.push(self.hash);
        out.extend(&self.digest);
        out
    }
}

/// Why a zone's ZONEMD does not verify (RFC 8976 §4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZonemdError {
    /// A ZONEMD RDATA too short to hold a digest.
    #[error("ZONEMD at {0} is malformed (shorter than 18 bytes, RFC 8976 §2.2.4)")]
    Malformed(Name),
    /// The ZONEMD's serial is not the SOA's (§4 step 5).
    #[error("ZONEMD serial {zonemd} is not the SOA serial {soa} (RFC 8976 §4)")]
    Serial {
        /// In the ZONEMD.
        zonemd: u32,
        /// In the SOA.
        soa: u32,
    },
    /// Two ZONEMD records with one scheme and hash algorithm (§4 step 6 → §2.4).
    #[error("two ZONEMD records with scheme {scheme} and hash algorithm {hash} (RFC 8976 §2.4)")]
    Duplicate {
        /// Scheme number.
        scheme: u8,
        /// Hash algorithm number.
        hash: u8,
    },
    /// No ZONEMD of a supported scheme and hash algorithm (§4 step 7).
    #[error("no ZONEMD record with a supported scheme (1) and hash algorithm (1, 2)")]
    Unsupported,
    /// The digest differs from the zone's.
    #[error(
        "ZONEMD digest mismatch (scheme {scheme}, hash algorithm {hash}): the record says {}, \
         the zone's data gives {}",
        data_encoding::HEXUPPER.encode(record),
        data_encoding::HEXUPPER.encode(computed)
    )]
    Mismatch {
        /// Scheme number.
        scheme: u8,
        /// Hash algorithm number.
        hash: u8,
        /// The digest in the record.
        record: Vec<u8>,
        /// The digest computed over the zone.
        computed: Vec<u8>,
    },
}

/// Feeds every RR of the SIMPLE scheme, in order, to `hash` (RFC 8976 §3.3.1).
fn feed(zone: &Zone, mut hash: impl FnMut(&[u8])) {
    // The names of both maps, in canonical order (hashed NSEC3 owners sort among the others).
    let mut names: BTreeMap<&Name, Vec<(RrType, &RRset)>> = BTreeMap::new();
    for (name, node) in &zone.nodes {
        let sets = names.entry(name).or_default();
        sets.extend(node.iter().map(|(t, s)| (*t, s)));
    }
    for (name, set) in &zone.nsec3 {
        names.entry(name).or_default().push((RrType::NSEC3, set));
    }
    let mut wire = Vec::new();
    for (name, sets) in names {
        let apex = *name == zone.origin;
        let owner = name.to_lowercase();
        // Each RRset's records as (type, TTL, canonical RDATA); RRSIGs gathered as one RRset.
        let mut records: Vec<(RrType, u32, Vec<u8>)> = Vec::new();
        for (rtype, set) in sets {
            // §3.3.1.1: "the apex ZONEMD RRset ... and ... the RRSIG RRset covering it" are
            // omitted from the digest.
            if apex && rtype == RrType::ZONEMD {
                continue;
            }
            let rrsig_ttl = set.rrsig_ttl;
            records.extend(
                set.rdatas
                    .iter()
                    .map(|r| (rtype, set.ttl, canonical_rdata(rtype, r))),
            );
            records.extend(
                set.rrsigs
                    .iter()
                    .map(|r| (RrType::RRSIG, rrsig_ttl, canonical_rdata(RrType::RRSIG, r))),
            );
        }
        records.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
        // §3.3.1.3: duplicate RRs are included once.
        records.dedup_by(|a, b| a.0 == b.0 && a.2 == b.2);
        for (rtype, ttl, rdata) in records {
            wire.clear();
            wire.extend_from_slice(owner.as_wire());
            wire.extend(rtype.0.to_be_bytes());
            wire.extend(Class::IN.0.to_be_bytes());
            wire.extend(ttl.to_be_bytes());
            wire.extend((rdata.len() as u16).to_be_bytes());
            wire.extend(rdata);
            hash(&wire);
        }
    }
}

/// The SIMPLE-scheme digest of `zone` with `hash` (RFC 8976 §3.3.1).
pub fn digest(zone: &Zone, hash: ZonemdHash) -> Vec<u8> {
    match hash {
        ZonemdHash::Sha384 => {
            let mut h = Sha384::new();
            feed(zone, |b| h.update(b));
            h.finalize().to_vec()
        }
        ZonemdHash::Sha512 => {
            let mut h = Sha512::new();
            feed(zone, |b| h.update(b));
            h.finalize().to_vec()
        }
    }
}

/// The hash algorithms a signer puts in the apex ZONEMD: those `asked` for, and those of a
/// SIMPLE-scheme ZONEMD already at the apex of the input (a digest left stale would make the
/// signed zone fail verification), each once.
pub fn hashes_to_place(zone: &Zone, asked: &[ZonemdHash]) -> Vec<ZonemdHash> {
    let mut hashes: Vec<ZonemdHash> = Vec::new();
    let present = zone
        .rrset(&zone.origin, RrType::ZONEMD)
        .map_or(&[][..], |s| &s.rdatas[..])
        .iter()
        .filter_map(|r| Zonemd::parse(r))
        .filter(|z| z.scheme == SCHEME_SIMPLE)
        .filter_map(|z| ZonemdHash::from_number(z.hash));
    for hash in asked.iter().copied().chain(present) {
        if !hashes.contains(&hash) {
            hashes.push(hash);
        }
    }
    hashes
}

/// Replaces the apex ZONEMD RRset with one placeholder record per hash algorithm (SIMPLE
/// scheme, the SOA serial, a zero digest of the right length) and the SOA's TTL (RFC 8976
/// §3.1–3.2). Its RRSIGs go; the NSEC/NSEC3 chain built after this lists ZONEMD at the apex.
pub fn add_placeholder(zone: &mut Zone, hashes: &[ZonemdHash]) {
    let serial = zone.soa_serial();
    let ttl = zone.soa_ttl();
    let origin = zone.origin.clone();
    let set = RRset {
        ttl,
        rdatas: hashes
            .iter()
            .map(|h| {
                Zonemd {
                    serial,
                    scheme: SCHEME_SIMPLE,
                    hash: h.number(),
                    digest: vec![0; h.digest_len()],
                }
                .rdata()
            })
            .collect(),
        rrsigs: Vec::new(),
        rrsig_ttl: ttl,
    };
    zone.nodes
        .entry(origin)
        .or_default()
        .insert(RrType::ZONEMD, set);
}

/// Fills in the digest of every SIMPLE-scheme record of a supported hash algorithm in the
/// apex ZONEMD RRset, with the SOA serial, and drops the RRset's RRSIGs (sign it again after).
/// Returns the number of records updated.
pub fn update(zone: &mut Zone) -> usize {
    let serial = zone.soa_serial();
    let Some(rdatas) = zone
        .rrset(&zone.origin, RrType::ZONEMD)
        .map(|s| s.rdatas.clone())
    else {
        return 0;
    };
    let mut updated = 0;
    let new: Vec<Vec<u8>> = rdatas
        .into_iter()
        .map(|rdata| match Zonemd::parse(&rdata) {
            Some(z) if z.scheme == SCHEME_SIMPLE => match ZonemdHash::from_number(z.hash) {
                Some(hash) => {
                    updated += 1;
                    Zonemd {
                        serial,
                        digest: digest(zone, hash),
                        ..z
                    }
                    .rdata()
                }
                None => rdata,
            },
            _ => rdata,
        })
        .collect();
    let origin = zone.origin.clone();
    if let Some(set) = zone
        .nodes
        .get_mut(&origin)
        .and_then(|n| n.get_mut(&RrType::ZONEMD))
    {
        set.rdatas = new;
        set.rrsigs.clear();
    }
    updated
}

/// Finishes a zone signed with a placeholder from [`add_placeholder`]: fills in the digests
/// ([`update`]) and signs the apex ZONEMD RRset again with `keys` (RFC 8976 §3.5: computed
/// after all other DNSSEC records, then signed). Returns the number of digests computed.
///
/// # Errors
/// [`SignError`] from signing the ZONEMD RRset.
pub fn sign_digests(
    zone: &mut Zone,
    keys: &[ZoneKey],
    policy: &SigningPolicy,
) -> Result<usize, SignError> {
    let updated = update(zone);
    let origin = zone.origin.clone();
    sign_rrset_again(zone, &origin, RrType::ZONEMD, keys, policy)?;
    Ok(updated)
}

/// What [`verify`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZonemdStatus {
    /// No ZONEMD at the apex: nothing to check (RFC 8976 §4 step 3).
    Absent,
    /// A supported ZONEMD's digest matches the zone, with this hash algorithm.
    Verified(ZonemdHash),
}

/// Verifies the apex ZONEMD RRset of `zone` (RFC 8976 §4, without its DNSSEC step, which
/// [`crate::dnssec::verify`] covers): the serial must be the SOA's, no scheme/hash pair may
/// repeat, and one record of a supported scheme and hash algorithm must match.
///
/// # Errors
/// [`ZonemdError`] naming the first mismatch.
pub fn verify(zone: &Zone) -> Result<ZonemdStatus, ZonemdError> {
    let Some(set) = zone
        .rrset(&zone.origin, RrType::ZONEMD)
        .filter(|s| !s.rdatas.is_empty())
    else {
        return Ok(ZonemdStatus::Absent);
    };
    let records = set
        .rdatas
        .iter()
        .map(|r| Zonemd::parse(r).ok_or_else(|| ZonemdError::Malformed(zone.origin.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    let soa = zone.soa_serial();
    let mut pairs: Vec<(u8, u8)> = records.iter().map(|z| (z.scheme, z.hash)).collect();
    pairs.sort_unstable();
    if let Some(w) = pairs.windows(2).find(|w| w[0] == w[1]) {
        return Err(ZonemdError::Duplicate {
            scheme: w[0].0,
            hash: w[0].1,
        });
    }
    let mut mismatch = None;
    for z in &records {
        let Some(hash) = ZonemdHash::from_number(z.hash).filter(|_| z.scheme == SCHEME_SIMPLE)
        else {
            continue;
        };
        if z.serial != soa {
            return Err(ZonemdError::Serial {
                zonemd: z.serial,
                soa,
            });
        }
        let computed = digest(zone, hash);
        if computed == z.digest {
            return Ok(ZonemdStatus::Verified(hash));
        }
        mismatch.get_or_insert(ZonemdError::Mismatch {
            scheme: z.scheme,
            hash: z.hash,
            record: z.digest.clone(),
            computed,
        });
    }
    Err(mismatch.unwrap_or(ZonemdError::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zonefile::ZoneFileReader;

    fn zone(text: &str) -> Zone {
        let origin: Name = "example.".parse().unwrap();
        let records = ZoneFileReader::new(Some(origin.clone()), None)
            .read_str(text, "rfc8976")
            .unwrap();
        Zone::from_records(origin, records).unwrap()
    }

    /// RFC 8976 Appendix A.1, "Simple ZONEMD Example".
    const A1: &str = "example.      86400  IN  SOA     ns1 admin 2018031900 (
                                 1800 900 604800 86400 )
              86400  IN  NS      ns1
              86400  IN  NS      ns2
              86400  IN  ZONEMD  2018031900 1 1 (
                                 c68090d90a7aed71
                                 6bc459f9340e3d7c
                                 1370d4d24b7e2fc3
                                 a1ddc0b9a87153b9
                                 a9713b3c9ae5cc27
                                 777f98b8e730044c )
ns1           3600   IN  A       203.0.113.63
ns2           3600   IN  AAAA    2001:db8::63
";

    #[test]
    fn rfc8976_a1_simple_example_verifies() {
        let z = zone(A1);
        assert_eq!(verify(&z), Ok(ZonemdStatus::Verified(ZonemdHash::Sha384)));
    }

    #[test]
    fn a_changed_record_or_serial_fails_naming_the_mismatch() {
        let changed = zone(&A1.replace("203.0.113.63", "203.0.113.64"));
        let err = verify(&changed).unwrap_err();
        assert!(
            matches!(err, ZonemdError::Mismatch { hash: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("C68090D90A7AED71"), "{err}");
        let serial = zone(&A1.replace("admin 2018031900", "admin 2018031901"));
        assert_eq!(
            verify(&serial),
            Err(ZonemdError::Serial {
                zonemd: 2018031900,
                soa: 2018031901
            })
        );
        // The apex ZONEMD itself is not part of the digest: a second one with another hash
        // algorithm leaves the first valid.
        let mut both = zone(A1);
        let sha512 = Zonemd {
            serial: 2018031900,
            scheme: SCHEME_SIMPLE,
            hash: 2,
            digest: digest(&both, ZonemdHash::Sha512),
        };
        let origin = both.origin.clone();
        both.nodes
            .get_mut(&origin)
            .unwrap()
            .get_mut(&RrType::ZONEMD)
            .unwrap()
            .rdatas
            .push(sha512.rdata());
        assert_eq!(
            verify(&both),
            Ok(ZonemdStatus::Verified(ZonemdHash::Sha384))
        );
        let dup = zone(&format!(
            "{A1}@ 86400 ZONEMD 2018031900 1 1 {}\n",
            "00".repeat(48)
        ));
        assert!(matches!(
            verify(&dup),
            Err(ZonemdError::Duplicate { scheme: 1, hash: 1 })
        ));
        let unsupported = zone(&A1.replace("2018031900 1 1 (", "2018031900 1 240 ("));
        assert_eq!(verify(&unsupported), Err(ZonemdError::Unsupported));
        let none = zone("@ 60 SOA ns admin 1 2 3 4 5\n");
        assert_eq!(verify(&none), Ok(ZonemdStatus::Absent));
    }

    /// Signed, with a classical and with an MTL key (one-leaf series for the re-signed
    /// ZONEMD RRset): every signature verifies, the ZONEMD RRset is signed after its digest
    /// was filled in, and the digest verifies.
    #[test]
    fn signed_zone_with_zonemd_verifies_with_classical_and_mtl_keys() {
        use crate::dnssec::keyfile::KeyRole;
        use crate::dnssec::sign::{sign_zone, Denial};
        use crate::dnssec::verify::{verify_zone, VerifyOptions};
        use crate::dnssec::{Algorithm, Profile, Provider};
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        let now = crate::time::now();
        for alg in [Algorithm::Ed25519, Algorithm::MlDsaMtl44] {
            let mut z = zone(A1);
            let key =
                ZoneKey::generate(&z.origin, alg, KeyRole::Csk, &profile, &provider, 3600).unwrap();
            let policy = SigningPolicy {
                inception: now - 3600,
                expiration: now + 86_400,
                denial: Denial::Nsec,
                published_dnskeys: None,
            };
            add_placeholder(&mut z, &[ZonemdHash::Sha384]);
            sign_zone(&mut z, std::slice::from_ref(&key), &policy, &|_, _| {}).unwrap();
            let placeholder_sigs = z.rrset(&z.origin, RrType::ZONEMD).unwrap().rrsigs.clone();
            assert_eq!(sign_digests(&mut z, &[key], &policy).unwrap(), 1);
            let set = z.rrset(&z.origin, RrType::ZONEMD).unwrap();
            assert_eq!(set.rrsigs.len(), 1, "{alg:?}");
            assert_ne!(set.rrsigs, placeholder_sigs, "{alg:?}: signed again");
            let options = VerifyOptions::at(now);
            let report = verify_zone(&z, &profile, &provider, &options);
            assert!(report.failures.is_empty(), "{alg:?}: {:?}", report.failures);
            assert_eq!(verify(&z), Ok(ZonemdStatus::Verified(ZonemdHash::Sha384)));
        }
    }

    #[test]
    fn placeholder_then_update_reproduces_the_rfc_digest() {
        let mut z = zone(A1);
        add_placeholder(&mut z, &[ZonemdHash::Sha384, ZonemdHash::Sha512]);
        assert!(matches!(verify(&z), Err(ZonemdError::Mismatch { .. })));
        assert_eq!(update(&mut z), 2);
        assert_eq!(verify(&z), Ok(ZonemdStatus::Verified(ZonemdHash::Sha384)));
        let rdata = &z.rrset(&z.origin, RrType::ZONEMD).unwrap().rdatas[0];
        assert_eq!(
            data_encoding::HEXLOWER.encode(&rdata[6..]),
            "c68090d90a7aed716bc459f9340e3d7c1370d4d24b7e2fc3a1ddc0b9a87153b9\
             a9713b3c9ae5cc27777f98b8e730044c"
        );
    }
}

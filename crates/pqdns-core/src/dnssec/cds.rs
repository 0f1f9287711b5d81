//! Child DS and DNSKEY records (CDS/CDNSKEY, RFC 7344 §3–4; RFC 8078): what a signed zone
//! publishes at its apex so that its parent can update the DS RRset without an operator in
//! between (RFC 7344 §4), or remove it (RFC 8078 §4, "delete DNSSEC").

use crate::dnssec::dnskey::{ds_record, DigestType};
use crate::dnssec::keyfile::ZoneKey;
use crate::dnssec::SecAlg;
use crate::rr::{Class, Record, RrType};

/// What the apex publishes for the parent, the `[signing] cds` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CdsPublish {
    /// No CDS/CDNSKEY (the operator sends DS records to the parent by hand).
    #[default]
    None,
    /// CDS (SHA-256 digests) and CDNSKEY records of the keys a DS should point to: the
    /// key-signing keys, or every key when none has the SEP flag (CSK or a single key). A
    /// parent polling them (RFC 7344 §6.1) keeps its DS RRset equal to them.
    Always,
    /// The deletion records `CDS 0 0 0 00` and `CDNSKEY 0 3 0 AA==` (RFC 8078 §4): asks the
    /// parent to remove the DS RRset, the step before a zone stops being signed.
    Delete,
}

/// The keys of `keys` a DS record should point to, for the algorithms `algorithms` (the
/// requested DS set of a rollover, [`super::rollover::KeyState::ds_set`]): per algorithm, its
/// keys with the SEP flag (KSKs), or all of them when none has it (RFC 4034 §2.1.1 makes SEP
/// a hint only).
pub fn ds_keys<'k>(keys: &'k [ZoneKey], algorithms: &[SecAlg]) -> Vec<&'k ZoneKey> {
    let of = |alg: SecAlg| keys.iter().filter(move |k| k.number == alg);
    algorithms
        .iter()
        .flat_map(|&alg| {
            let has_sep = of(alg).any(ZoneKey::is_sep);
            of(alg).filter(move |k| !has_sep || k.is_sep())
        })
        .collect()
}

/// The distinct algorithms of `keys`, in order of first appearance.
pub fn algorithms_of(keys: &[ZoneKey]) -> Vec<SecAlg> {
    let mut algs: Vec<SecAlg> = Vec::new();
    for k in keys {
        if !algs.contains(&k.number) {
            algs.push(k.number);
        }
    }
    algs
}

/// The CDS and CDNSKEY records `publish` asks for, owned by `keys`' zone apex with the keys'
/// TTL (the DNSKEY TTL), for the DS keys ([`ds_keys`]) of `algorithms`; empty for
/// [`CdsPublish::None`] or no keys. RDATA is in wire format:
/// CDS as DS (RFC 4034 §5.1, SHA-256 digest), CDNSKEY as DNSKEY (RFC 4034 §2.1).
pub fn records(keys: &[ZoneKey], algorithms: &[SecAlg], publish: CdsPublish) -> Vec<Record> {
    let Some(first) = keys.first() else {
        return Vec::new();
    };
    let record = |rtype, rdata| Record {
        owner: first.owner.clone(),
        rtype,
        class: Class::IN,
        ttl: first.ttl,
        rdata,
    };
    match publish {
        CdsPublish::None => Vec::new(),
        CdsPublish::Always => ds_keys(keys, algorithms)
            .into_iter()
            .flat_map(|k| {
                let dnskey = k.dnskey_record();
                let cds =
                    ds_record(&dnskey, DigestType::Sha256).map(|ds| record(RrType::CDS, ds.rdata));
                cds.into_iter()
                    .chain([record(RrType::CDNSKEY, dnskey.rdata)])
            })
            .collect(),
        // RFC 8078 §4: key tag 0, algorithm 0, digest type 0, digest 0x00; flags 0,
        // protocol 3, algorithm 0, public key 0x00.
        CdsPublish::Delete => vec![
            record(RrType::CDS, vec![0, 0, 0, 0, 0]),
            record(RrType::CDNSKEY, vec![0, 0, 3, 0, 0]),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::keyfile::KeyRole;
    use crate::dnssec::{Algorithm, Profile, Provider};
    use crate::Name;

    fn key(role: KeyRole) -> ZoneKey {
        let origin: Name = "example.".parse().unwrap();
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        ZoneKey::generate(&origin, Algorithm::Ed25519, role, &profile, &provider, 600).unwrap()
    }

    #[test]
    fn always_publishes_the_ksk_as_its_ds_and_dnskey() {
        let keys = [key(KeyRole::Zsk), key(KeyRole::Ksk)];
        let records = records(&keys, &algorithms_of(&keys), CdsPublish::Always);
        let ksk = keys[1].dnskey_record();
        let ds = ds_record(&ksk, DigestType::Sha256).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[0].rtype, &records[0].rdata),
            (RrType::CDS, &ds.rdata)
        );
        assert_eq!(
            (records[1].rtype, &records[1].rdata),
            (RrType::CDNSKEY, &ksk.rdata)
        );
        assert!(records.iter().all(|r| r.owner == ksk.owner && r.ttl == 600));
        // Without a KSK, the single key is the one the DS points to.
        let csk = [key(KeyRole::Csk)];
        assert_eq!(records_of(&csk, RrType::CDNSKEY), [csk[0].dnskey_rdata()]);
        assert!(super::records(&keys, &algorithms_of(&keys), CdsPublish::None).is_empty());
        // Only the algorithms asked for: none here.
        assert!(super::records(&keys, &[SecAlg(13)], CdsPublish::Always).is_empty());
    }

    fn records_of(keys: &[ZoneKey], rtype: RrType) -> Vec<Vec<u8>> {
        records(keys, &algorithms_of(keys), CdsPublish::Always)
            .into_iter()
            .filter(|r| r.rtype == rtype)
            .map(|r| r.rdata)
            .collect()
    }

    #[test]
    fn delete_is_the_rfc_8078_deletion_pair() {
        let text: Vec<String> = records(&[key(KeyRole::Csk)], &[], CdsPublish::Delete)
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(
            text,
            [
                "example.\t600\tIN\tCDS\t0 0 0 00",
                "example.\t600\tIN\tCDNSKEY\t0 3 0 AA=="
            ]
        );
    }
}

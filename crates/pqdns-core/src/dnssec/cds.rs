//! Child DS and DNSKEY records (CDS/CDNSKEY, RFC 7344 §3–4; RFC 8078): what a signed zone
//! publishes at its apex so that its parent can update the DS RRset without an operator in
//! between (RFC 7344 §4), or remove it (RFC 8078 §4, "delete DNSSEC").

use crate::dnssec::dnskey::{ds_record, DigestType};
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

/// The CDS and CDNSKEY records `publish` asks for, for `dnskeys`: the DNSKEY records the
/// parent's DS RRset is to point to (the KSKs in the requested DS set,
/// [`super::rollover::Usage::in_ds_set`]), owned by the zone apex with the DNSKEY TTL; empty
/// for [`CdsPublish::None`] or no keys. RDATA is in wire format: CDS as DS (RFC 4034 §5.1,
/// SHA-256 digest), CDNSKEY as DNSKEY (RFC 4034 §2.1).
pub fn records(dnskeys: &[Record], publish: CdsPublish) -> Vec<Record> {
    let Some(first) = dnskeys.first() else {
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
        CdsPublish::Always => dnskeys
            .iter()
            .flat_map(|dnskey| {
                let cds =
                    ds_record(dnskey, DigestType::Sha256).map(|ds| record(RrType::CDS, ds.rdata));
                cds.into_iter()
                    .chain([record(RrType::CDNSKEY, dnskey.rdata.clone())])
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
    use crate::dnssec::keyfile::{KeyRole, ZoneKey};
    use crate::dnssec::{Algorithm, Profile, Provider};
    use crate::Name;

    fn key(role: KeyRole) -> Record {
        let origin: Name = "example.".parse().unwrap();
        let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
        ZoneKey::generate(&origin, Algorithm::Ed25519, role, &profile, &provider, 600)
            .unwrap()
            .dnskey_record()
    }

    #[test]
    fn always_publishes_each_key_as_its_ds_and_dnskey() {
        let ksk = key(KeyRole::Ksk);
        let records = records(std::slice::from_ref(&ksk), CdsPublish::Always);
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
        assert!(super::records(&[ksk], CdsPublish::None).is_empty());
        assert!(super::records(&[], CdsPublish::Always).is_empty());
    }

    #[test]
    fn delete_is_the_rfc_8078_deletion_pair() {
        let text: Vec<String> = records(&[key(KeyRole::Csk)], CdsPublish::Delete)
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

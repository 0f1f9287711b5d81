//! Trust anchors (RFC 4035 §4.4): DS or DNSKEY records in master-file syntax — the DS file
//! pqdns-server writes, or a `root.key`-style DNSKEY file. DNSKEY anchors are kept as DS
//! records (SHA-256) so that one code path establishes trust in a zone's keys.

use std::collections::BTreeMap;
use std::path::Path;

use pqdns_core::dnssec::dnskey::{ds_record, DigestType, DnskeyRef};
use pqdns_core::zonefile::{ZoneFileError, ZoneFileReader};
use pqdns_core::{Name, RrType};

/// Trust anchors by zone: DS RDATA per anchored zone.
#[derive(Clone, Debug, Default)]
pub struct TrustAnchors {
    by_zone: BTreeMap<Name, Vec<Vec<u8>>>,
}

impl TrustAnchors {
    /// Reads anchors from a master-file-syntax file; records other than DS and zone-key DNSKEYs
    /// (with or without the SEP flag) are ignored. Algorithms may be given as numbers or
    /// mnemonics (`RSASHA1`, `ECDSAP256SHA256`, `ML-DSA-44`; RFC 4034 §2.2, §5.3).
    ///
    /// # Errors
    /// [`ZoneFileError`] with file and line for unreadable or malformed files, or a file with
    /// no usable anchor (line 0).
    pub fn read(path: &Path) -> Result<TrustAnchors, ZoneFileError> {
        let records = ZoneFileReader::new(Some(Name::root()), Some(0)).read_file(path)?;
        let mut anchors = TrustAnchors::default();
        for r in &records {
            let ds = match r.rtype {
                RrType::DS => Some(r.rdata.clone()),
                // Any zone key, SEP flag or not: the flag is a hint for key management, not
                // a condition of trust (RFC 4034 §2.1.1, RFC 3757 §3.1; unbound and BIND
                // accept such anchors too).
                RrType::DNSKEY if DnskeyRef::parse(&r.rdata).is_some_and(|k| k.is_zone_key()) => {
                    ds_record(r, DigestType::Sha256).map(|d| d.rdata)
                }
                _ => None,
            };
            if let Some(ds) = ds {
                anchors.by_zone.entry(r.owner.clone()).or_default().push(ds);
            }
        }
        if anchors.by_zone.is_empty() {
            return Err(ZoneFileError {
                file: path.to_path_buf(),
                line: 0,
                message: "no DS or zone-key DNSKEY record to use as a trust anchor".into(),
            });
        }
        Ok(anchors)
    }

    /// Adds DS RDATA for `zone`.
    pub fn add_ds(&mut self, zone: Name, ds: Vec<u8>) {
        self.by_zone.entry(zone).or_default().push(ds);
    }

    /// Adds every anchor of `other`.
    pub fn extend(&mut self, other: TrustAnchors) {
        for (zone, ds) in other.by_zone {
            self.by_zone.entry(zone).or_default().extend(ds);
        }
    }

    /// The DS RDATA anchored at exactly `zone`.
    pub fn ds_for(&self, zone: &Name) -> Option<&[Vec<u8>]> {
        self.by_zone.get(zone).map(Vec::as_slice)
    }

    /// The closest anchored zone at or above `name`.
    pub fn closest(&self, name: &Name) -> Option<&Name> {
        let mut cur = Some(name.clone());
        while let Some(n) = cur {
            if let Some((zone, _)) = self.by_zone.get_key_value(&n) {
                return Some(zone);
            }
            cur = n.parent();
        }
        None
    }

    /// The anchored zones.
    pub fn zones(&self) -> impl Iterator<Item = &Name> {
        self.by_zone.keys()
    }

    /// True if no anchors are configured.
    pub fn is_empty(&self) -> bool {
        self.by_zone.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ds_and_dnskey_anchors_and_finds_the_closest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anchors");
        std::fs::write(
            &path,
            "example.com. IN DS 12345 13 2 0011223344556677889900112233445566778899001122334455667788990011\n\
             example.net. IN DS 2345 RSASHA1 1 0011223344556677889900112233445566778899\n\
             . 172800 IN DNSKEY 257 3 15 l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4=\n\
             . 172800 IN DNSKEY 256 3 ED25519 l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4=\n\
             . 172800 IN DNSKEY 0 3 15 l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4=\n",
        )
        .unwrap();
        let a = TrustAnchors::read(&path).unwrap();
        let www: Name = "www.example.com.".parse().unwrap();
        assert_eq!(a.closest(&www), Some(&"example.com.".parse().unwrap()));
        assert_eq!(a.closest(&"org.".parse().unwrap()), Some(&Name::root()));
        // Both zone keys become anchors, SEP flag or not (as in unbound and BIND); the key
        // without the Zone Key flag does not.
        assert_eq!(a.ds_for(&Name::root()).unwrap().len(), 2);
        // The mnemonic is the number (RFC 4034 §5.3).
        let net = a.ds_for(&"example.net.".parse().unwrap()).unwrap();
        assert_eq!(net[0][2], 5);
        std::fs::write(&path, "example.com. IN A 192.0.2.1\n").unwrap();
        assert!(TrustAnchors::read(&path)
            .unwrap_err()
            .message
            .contains("no DS"));
    }
}

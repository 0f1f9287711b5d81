//! RRSIG RDATA (RFC 4034 §3.1) and the data a signature covers (RFC 4034 §3.1.8.1 with the
//! canonical RR form and order of §6.2–§6.3).

use super::algorithm::SecAlg;
use crate::name::Name;
use crate::rdata::canonicalize_rdata;
use crate::rr::{Class, RrType};

/// The RRSIG RDATA fields before the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrsigFields {
    /// Type covered.
    pub type_covered: RrType,
    /// Algorithm number.
    pub algorithm: SecAlg,
    /// Labels of the owner name, not counting the root or a leading `*` (RFC 4034 §3.1.3).
    pub labels: u8,
    /// Original TTL, seconds.
    pub original_ttl: u32,
    /// Signature expiration, 32-bit UNIX time (serial arithmetic, RFC 4034 §3.1.5).
    pub expiration: u32,
    /// Signature inception, 32-bit UNIX time.
    pub inception: u32,
    /// Key tag of the signing DNSKEY.
    pub key_tag: u16,
    /// Signer's name: the zone apex.
    pub signer: Name,
}

/// A parsed RRSIG: fixed fields and the signature bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rrsig<'a> {
    /// Fields before the signature.
    pub fields: RrsigFields,
    /// Signature field (raw bytes, per algorithm).
    pub signature: &'a [u8],
}

impl RrsigFields {
    /// Writes the fields as RDATA (signer name in canonical form, RFC 4034 §3.1.7 / §6.2).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.type_covered.0.to_be_bytes());
        out.push(self.algorithm.0);
        out.push(self.labels);
        out.extend(self.original_ttl.to_be_bytes());
        out.extend(self.expiration.to_be_bytes());
        out.extend(self.inception.to_be_bytes());
        out.extend(self.key_tag.to_be_bytes());
        self.signer.write_canonical(out);
    }

    /// Full RRSIG RDATA with `signature` appended.
    pub fn rdata(&self, signature: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.signer.wire_len() + signature.len());
        self.write(&mut out);
        out.extend_from_slice(signature);
        out
    }
}

impl<'a> Rrsig<'a> {
    /// Parses RRSIG RDATA ([`crate::wire::rdata::Rrsig`]); `None` if truncated or the signer
    /// name is malformed.
    pub fn parse(rdata: &'a [u8]) -> Option<Rrsig<'a>> {
        let view = crate::wire::rdata::Rrsig::parse(rdata)?;
        Some(Rrsig {
            fields: RrsigFields {
                type_covered: view.type_covered,
                algorithm: view.algorithm,
                labels: view.labels,
                original_ttl: view.original_ttl,
                expiration: view.expiration,
                inception: view.inception,
                key_tag: view.key_tag,
                signer: view.signer.to_name(),
            },
            signature: view.signature,
        })
    }
}

/// The RRSIG labels value for an owner name (RFC 4034 §3.1.3).
pub fn label_count(owner: &Name) -> u8 {
    let n = owner.label_count() - usize::from(owner.is_wildcard());
    n as u8
}

/// The signed data of RFC 4034 §3.1.8.1: RRSIG fields, then each RR of the RRset in canonical
/// form (owner lowercased, original TTL, canonical RDATA) sorted by canonical RDATA.
///
/// `owner` is the name the RRset is signed under: for an answer synthesised from a wildcard the
/// caller passes the wildcard name (RFC 4035 §5.3.2 reconstructs it from the labels field).
pub fn signed_data<'r>(
    fields: &RrsigFields,
    owner: &Name,
    class: Class,
    rdatas: impl IntoIterator<Item = &'r [u8]>,
) -> Vec<u8> {
    // The fields and one RR; write_rr reserves room for each RR's RDATA.
    let mut out = Vec::with_capacity(18 + fields.signer.wire_len() + owner.wire_len() + 10);
    write_signed_data(fields, owner, class, rdatas, &mut out);
    out
}

/// [`signed_data`] written into `out`, which is cleared first: a signer that reuses one buffer
/// (online signing) allocates nothing per signature once it is large enough. An RRset of one
/// RR is written and canonicalized in place; only larger ones are copied to be sorted.
pub fn write_signed_data<'r>(
    fields: &RrsigFields,
    owner: &Name,
    class: Class,
    rdatas: impl IntoIterator<Item = &'r [u8]>,
    out: &mut Vec<u8>,
) {
    out.clear();
    fields.write(out);
    let mut rdatas = rdatas.into_iter();
    let (first, second) = (rdatas.next(), rdatas.next());
    let Some(second) = second else {
        if let Some(only) = first {
            write_rr(out, fields, owner, class, only);
            let start = out.len() - only.len();
            canonicalize_rdata(fields.type_covered, &mut out[start..]);
        }
        return;
    };
    let mut canonical: Vec<Vec<u8>> = first
        .into_iter()
        .chain([second])
        .chain(rdatas)
        .map(|r| {
            let mut c = r.to_vec();
            canonicalize_rdata(fields.type_covered, &mut c);
            c
        })
        .collect();
    canonical.sort();
    canonical.dedup();
    for rdata in &canonical {
        write_rr(out, fields, owner, class, rdata);
    }
}

/// Appends one RR of the signed data: owner lowercased, type, class, original TTL, RDATA.
fn write_rr(out: &mut Vec<u8>, fields: &RrsigFields, owner: &Name, class: Class, rdata: &[u8]) {
    out.reserve(owner.wire_len() + 10 + rdata.len());
    owner.write_canonical(out);
    out.extend(fields.type_covered.0.to_be_bytes());
    out.extend(class.0.to_be_bytes());
    out.extend(fields.original_ttl.to_be_bytes());
    out.extend((rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
}

/// For a signature whose labels field is smaller than the owner's label count, the wildcard
/// name the RRset was signed under (RFC 4035 §5.3.2); otherwise the owner itself.
/// `None` if the labels field exceeds the owner's label count (a bogus signature).
pub fn signing_owner(owner: &Name, labels: u8) -> Option<Name> {
    let have = owner.label_count();
    let want = usize::from(labels);
    if want > have {
        return None;
    }
    if want == have || (owner.is_wildcard() && want + 1 == have) {
        return Some(owner.clone());
    }
    let mut base = owner.clone();
    for _ in 0..have - want {
        base = base.parent()?;
    }
    base.prepend_label(b"*").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrsig_rdata_round_trips_and_labels_skip_wildcard() {
        let fields = RrsigFields {
            type_covered: RrType::A,
            algorithm: SecAlg(13),
            labels: 2,
            original_ttl: 300,
            expiration: 2,
            inception: 1,
            key_tag: 4242,
            signer: "Example.COM.".parse().unwrap(),
        };
        let rdata = fields.rdata(&[9, 9, 9]);
        let parsed = Rrsig::parse(&rdata).unwrap();
        assert_eq!(parsed.signature, &[9, 9, 9]);
        assert_eq!(parsed.fields.signer.as_wire(), b"\x07example\x03com\x00");
        assert_eq!(label_count(&"*.a.example.com.".parse().unwrap()), 3);
        assert!(Rrsig::parse(&rdata[..10]).is_none());
    }

    #[test]
    fn signing_owner_reconstructs_wildcard() {
        let owner: Name = "a.b.wild.example.".parse().unwrap();
        assert_eq!(
            signing_owner(&owner, 2),
            Some("*.wild.example.".parse().unwrap())
        );
        assert_eq!(signing_owner(&owner, 4), Some(owner.clone()));
        assert_eq!(signing_owner(&owner, 5), None);
    }

    #[test]
    fn signed_data_sorts_and_lowercases() {
        let fields = RrsigFields {
            type_covered: RrType::NS,
            algorithm: SecAlg(13),
            labels: 1,
            original_ttl: 60,
            expiration: 0,
            inception: 0,
            key_tag: 0,
            signer: "example.".parse().unwrap(),
        };
        let b: Name = "B.example.".parse().unwrap();
        let a: Name = "a.example.".parse().unwrap();
        let data = signed_data(
            &fields,
            &"EXAMPLE.".parse().unwrap(),
            Class::IN,
            [b.as_wire(), a.as_wire()],
        );
        let first_rr = 18 + 9;
        // Owner lowercased, then the RR with RDATA a.example. sorts before b.example.
        assert_eq!(&data[first_rr..first_rr + 9], b"\x07example\x00");
        assert_eq!(
            &data[first_rr + 19..first_rr + 19 + 11],
            b"\x01a\x07example\x00"
        );
        assert_eq!(&data[data.len() - 11..], b"\x01b\x07example\x00");
        // One RR is canonicalized where it is written, in a buffer holding other data.
        let mut reused = data.clone();
        write_signed_data(
            &fields,
            &"EXAMPLE.".parse().unwrap(),
            Class::IN,
            [b.as_wire()],
            &mut reused,
        );
        assert_eq!(reused.len(), first_rr + 19 + 11);
        assert_eq!(&reused[..first_rr + 19], &data[..first_rr + 19]);
        assert_eq!(&reused[first_rr + 19..], b"\x01b\x07example\x00");
    }
}

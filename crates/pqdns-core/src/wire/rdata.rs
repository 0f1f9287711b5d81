//! Typed views of uncompressed RDATA (as stored in zones and in `crate::Record`, or from
//! [`super::RecordView::rdata`]): each `parse` checks the whole layout once and exposes the
//! fields, borrowing names, keys, digests and signatures. `None` means the RDATA does not match
//! the type's layout.

use crate::dnssec::dnskey::{FLAG_SEP, FLAG_ZONE};
use crate::dnssec::nsec3::FLAG_OPT_OUT;
use crate::dnssec::SecAlg;
pub use crate::name::NameRef;
pub use crate::rdata::TypeBitmap;
use crate::rr::RrType;

/// A big-endian reader over RDATA.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn name(&mut self) -> Option<NameRef<'a>> {
        let (name, used) = NameRef::read(self.rest).ok()?;
        self.rest = &self.rest[used..];
        Some(name)
    }
    /// One length byte, then that many bytes.
    fn counted(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.bytes(usize::from(n))
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
    /// `value` if every byte was used.
    fn end<T>(&self, value: T) -> Option<T> {
        self.rest.is_empty().then_some(value)
    }
}

/// SOA RDATA (RFC 1035 §3.3.13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Soa<'a> {
    /// MNAME: the primary name server.
    pub mname: NameRef<'a>,
    /// RNAME: the responsible person's mailbox.
    pub rname: NameRef<'a>,
    /// SERIAL: the zone version (RFC 1982 serial number).
    pub serial: u32,
    /// REFRESH, seconds.
    pub refresh: u32,
    /// RETRY, seconds.
    pub retry: u32,
    /// EXPIRE, seconds.
    pub expire: u32,
    /// MINIMUM, seconds: the negative-caching TTL bound (RFC 2308 §4).
    pub minimum: u32,
}

impl<'a> Soa<'a> {
    /// Parses SOA RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Soa<'a>> {
        let mut f = Fields { rest: rdata };
        let soa = Soa {
            mname: f.name()?,
            rname: f.name()?,
            serial: f.u32()?,
            refresh: f.u32()?,
            retry: f.u32()?,
            expire: f.u32()?,
            minimum: f.u32()?,
        };
        f.end(soa)
    }
}

/// MX RDATA (RFC 1035 §3.3.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mx<'a> {
    /// PREFERENCE: lower is preferred.
    pub preference: u16,
    /// EXCHANGE: the mail server's name.
    pub exchange: NameRef<'a>,
}

impl<'a> Mx<'a> {
    /// Parses MX RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Mx<'a>> {
        let mut f = Fields { rest: rdata };
        let mx = Mx {
            preference: f.u16()?,
            exchange: f.name()?,
        };
        f.end(mx)
    }
}

/// SRV RDATA (RFC 2782).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Srv<'a> {
    /// Priority: lower is preferred.
    pub priority: u16,
    /// Weight among records of the same priority.
    pub weight: u16,
    /// Port of the service.
    pub port: u16,
    /// Target host name (`.` means the service is not available).
    pub target: NameRef<'a>,
}

impl<'a> Srv<'a> {
    /// Parses SRV RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Srv<'a>> {
        let mut f = Fields { rest: rdata };
        let srv = Srv {
            priority: f.u16()?,
            weight: f.u16()?,
            port: f.u16()?,
            target: f.name()?,
        };
        f.end(srv)
    }
}

/// The target name of an NS, MX or SRV record: the name whose addresses belong in the
/// additional section (RFC 1035 §3.3.9, §3.3.11; RFC 2782); `None` for other types.
pub fn target_of(rtype: RrType, rdata: &[u8]) -> Option<NameRef<'_>> {
    match rtype {
        RrType::NS => NameRef::read(rdata)
            .ok()
            .filter(|(_, n)| *n == rdata.len())
            .map(|(t, _)| t),
        RrType::MX => Mx::parse(rdata).map(|m| m.exchange),
        RrType::SRV => Srv::parse(rdata).map(|s| s.target),
        _ => None,
    }
}

/// DS RDATA (RFC 4034 §5.1); also CDS (RFC 7344 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ds<'a> {
    /// Key tag of the DNSKEY it refers to (RFC 4034 Appendix B).
    pub key_tag: u16,
    /// Algorithm number of that DNSKEY.
    pub algorithm: SecAlg,
    /// Digest type (2 = SHA-256, 4 = SHA-384).
    pub digest_type: u8,
    /// The digest.
    pub digest: &'a [u8],
}

impl<'a> Ds<'a> {
    /// Parses DS RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Ds<'a>> {
        let mut f = Fields { rest: rdata };
        let ds = Ds {
            key_tag: f.u16()?,
            algorithm: SecAlg(f.u8()?),
            digest_type: f.u8()?,
            digest: f.rest(),
        };
        Some(ds)
    }
}

/// DNSKEY RDATA (RFC 4034 §2.1); also CDNSKEY (RFC 7344 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dnskey<'a> {
    /// Flags (RFC 4034 §2.1.1).
    pub flags: u16,
    /// Protocol, 3.
    pub protocol: u8,
    /// Algorithm number.
    pub algorithm: SecAlg,
    /// Public-key field, raw bytes.
    pub public_key: &'a [u8],
}

impl<'a> Dnskey<'a> {
    /// Length of the fields before the public key, bytes.
    pub const FIXED_LEN: usize = 4;

    /// Parses DNSKEY RDATA; `None` if shorter than the 4-byte fixed part.
    pub fn parse(rdata: &'a [u8]) -> Option<Dnskey<'a>> {
        let mut f = Fields { rest: rdata };
        Some(Dnskey {
            flags: f.u16()?,
            protocol: f.u8()?,
            algorithm: SecAlg(f.u8()?),
            public_key: f.rest(),
        })
    }

    /// True if the SEP flag is set (a KSK by convention).
    pub fn is_sep(&self) -> bool {
        self.flags & FLAG_SEP != 0
    }

    /// True if the Zone Key flag is set; only such keys may verify zone data (RFC 4034 §2.1.1).
    pub fn is_zone_key(&self) -> bool {
        self.flags & FLAG_ZONE != 0
    }
}

/// RRSIG RDATA (RFC 4034 §3.1), borrowed. `crate::dnssec::rrsig::Rrsig` is the form signing
/// and validation use, built from this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rrsig<'a> {
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
    /// Signer's name: the zone apex (never compressed, RFC 4034 §3.1.7).
    pub signer: NameRef<'a>,
    /// Signature field (raw bytes, per algorithm).
    pub signature: &'a [u8],
}

impl<'a> Rrsig<'a> {
    /// Parses RRSIG RDATA; `None` if cut short or the signer name is malformed.
    pub fn parse(rdata: &'a [u8]) -> Option<Rrsig<'a>> {
        let mut f = Fields { rest: rdata };
        let sig = Rrsig {
            type_covered: RrType(f.u16()?),
            algorithm: SecAlg(f.u8()?),
            labels: f.u8()?,
            original_ttl: f.u32()?,
            expiration: f.u32()?,
            inception: f.u32()?,
            key_tag: f.u16()?,
            signer: f.name()?,
            signature: f.rest(),
        };
        Some(sig)
    }

    /// Length of the fields before the signature (18 bytes plus the signer name), bytes.
    pub fn fixed_len(&self) -> usize {
        18 + self.signer.wire_len()
    }
}

/// NSEC RDATA (RFC 4034 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nsec<'a> {
    /// Next owner name in canonical order (case kept, RFC 6840 §5.1).
    pub next: NameRef<'a>,
    /// Types present at the owner.
    pub types: TypeBitmap<'a>,
}

impl<'a> Nsec<'a> {
    /// Parses NSEC RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Nsec<'a>> {
        let mut f = Fields { rest: rdata };
        Some(Nsec {
            next: f.name()?,
            types: TypeBitmap::parse(f.rest())?,
        })
    }
}

/// NSEC3PARAM RDATA (RFC 5155 §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nsec3Param<'a> {
    /// Hash algorithm (1 = SHA-1).
    pub hash_algorithm: u8,
    /// Flags (0 in NSEC3PARAM).
    pub flags: u8,
    /// Extra hash iterations.
    pub iterations: u16,
    /// Salt (0 to 255 bytes).
    pub salt: &'a [u8],
}

impl<'a> Nsec3Param<'a> {
    /// Parses NSEC3PARAM RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Nsec3Param<'a>> {
        let mut f = Fields { rest: rdata };
        let p = Nsec3Param::read(&mut f)?;
        f.end(p)
    }

    /// The fields NSEC3 and NSEC3PARAM share (RFC 5155 §3.2, §4.2) at the start of `rdata`,
    /// and the bytes after them.
    pub(crate) fn read_prefix(rdata: &'a [u8]) -> Option<(Nsec3Param<'a>, &'a [u8])> {
        let mut f = Fields { rest: rdata };
        let p = Nsec3Param::read(&mut f)?;
        Some((p, f.rest))
    }

    fn read(f: &mut Fields<'a>) -> Option<Nsec3Param<'a>> {
        Some(Nsec3Param {
            hash_algorithm: f.u8()?,
            flags: f.u8()?,
            iterations: f.u16()?,
            salt: f.counted()?,
        })
    }
}

/// NSEC3 RDATA (RFC 5155 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nsec3<'a> {
    /// Hash algorithm, flags, iterations and salt.
    pub params: Nsec3Param<'a>,
    /// Next hashed owner name, raw hash bytes (1 to 255).
    pub next_hashed: &'a [u8],
    /// Types present at the original owner name.
    pub types: TypeBitmap<'a>,
}

impl<'a> Nsec3<'a> {
    /// Parses NSEC3 RDATA.
    pub fn parse(rdata: &'a [u8]) -> Option<Nsec3<'a>> {
        let mut f = Fields { rest: rdata };
        let params = Nsec3Param::read(&mut f)?;
        let next_hashed = f.counted().filter(|h| !h.is_empty())?;
        Some(Nsec3 {
            params,
            next_hashed,
            types: TypeBitmap::parse(f.rest())?,
        })
    }

    /// True if the Opt-Out flag is set (RFC 5155 §3.1.2.1).
    pub fn opt_out(&self) -> bool {
        self.params.flags & FLAG_OPT_OUT != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::Name;
    use crate::rdata::wire_from_text;

    fn wire(rtype: RrType, text: &str) -> Vec<u8> {
        wire_from_text(rtype, text, None)
    }

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    /// Every strict prefix of `rdata` is rejected by `parse` (for layouts that end in a
    /// fixed-size or counted field).
    fn prefixes_fail(rdata: &[u8], parses: impl Fn(&[u8]) -> bool) {
        for cut in 0..rdata.len() {
            assert!(!parses(&rdata[..cut]), "prefix of {cut} bytes accepted");
        }
    }

    #[test]
    fn soa_fields() {
        let rdata = wire(
            RrType::SOA,
            "ns1.example. hostmaster.example. 2024010101 7200 3600 1209600 300",
        );
        let soa = Soa::parse(&rdata).unwrap();
        assert_eq!(soa.mname, name("ns1.example."));
        assert_eq!(soa.rname, name("hostmaster.example."));
        assert_eq!(
            (soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum),
            (2024010101, 7200, 3600, 1209600, 300)
        );
        prefixes_fail(&rdata, |d| Soa::parse(d).is_some());
        let mut long = rdata.clone();
        long.push(0);
        assert!(Soa::parse(&long).is_none(), "a byte too many");
    }

    #[test]
    fn mx_srv_and_targets() {
        let mx = wire(RrType::MX, "10 mail.example.");
        let v = Mx::parse(&mx).unwrap();
        assert_eq!(
            (v.preference, v.exchange.to_string()),
            (10, "mail.example.".into())
        );
        prefixes_fail(&mx, |d| Mx::parse(d).is_some());
        let srv = wire(RrType::SRV, "1 2 443 web.example.");
        let v = Srv::parse(&srv).unwrap();
        assert_eq!((v.priority, v.weight, v.port), (1, 2, 443));
        assert_eq!(v.target, name("web.example."));
        prefixes_fail(&srv, |d| Srv::parse(d).is_some());
        let ns = name("ns.example.");
        assert_eq!(target_of(RrType::NS, ns.as_wire()).unwrap(), ns);
        assert_eq!(target_of(RrType::MX, &mx).unwrap(), name("mail.example."));
        assert_eq!(target_of(RrType::SRV, &srv).unwrap(), name("web.example."));
        assert!(target_of(RrType::CNAME, ns.as_wire()).is_none());
        assert!(target_of(RrType::NS, &[ns.as_wire(), &[0]].concat()).is_none());
    }

    #[test]
    fn ds_of_rfc4034_section_5_4() {
        let rdata = wire(
            RrType::DS,
            "60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118",
        );
        let ds = Ds::parse(&rdata).unwrap();
        assert_eq!(
            (ds.key_tag, ds.algorithm, ds.digest_type),
            (60485, SecAlg(5), 1)
        );
        assert_eq!(ds.digest.len(), 20);
        assert_eq!(ds.digest[..2], [0x2b, 0xb1]);
        prefixes_fail(&rdata[..4], |d| Ds::parse(d).is_some());
    }

    #[test]
    fn dnskey_flags() {
        let rdata = wire(RrType::DNSKEY, "257 3 13 AQID");
        let k = Dnskey::parse(&rdata).unwrap();
        assert_eq!((k.flags, k.protocol, k.algorithm), (257, 3, SecAlg(13)));
        assert_eq!(k.public_key, [1, 2, 3]);
        assert!(k.is_sep() && k.is_zone_key());
        prefixes_fail(&rdata[..Dnskey::FIXED_LEN], |d| Dnskey::parse(d).is_some());
    }

    #[test]
    fn rrsig_fields() {
        let rdata = wire(
            RrType::RRSIG,
            "A 18 3 3600 20300101000000 20250101000000 59829 example.com. AAEC",
        );
        let s = Rrsig::parse(&rdata).unwrap();
        assert_eq!(s.type_covered, RrType::A);
        assert_eq!(
            (s.algorithm, s.labels, s.original_ttl),
            (SecAlg(18), 3, 3600)
        );
        assert_eq!((s.expiration, s.inception), (1_893_456_000, 1_735_689_600));
        assert_eq!(s.key_tag, 59829);
        assert_eq!(s.signer, name("example.com."));
        assert_eq!(s.fixed_len(), 18 + 13);
        assert_eq!(s.signature, [0, 1, 2]);
        prefixes_fail(&rdata[..s.fixed_len()], |d| Rrsig::parse(d).is_some());
    }

    #[test]
    fn nsec_of_rfc4034_section_4_3() {
        let rdata = wire(RrType::NSEC, "host.example.com. A MX RRSIG NSEC TYPE1234");
        let n = Nsec::parse(&rdata).unwrap();
        assert_eq!(n.next, name("host.example.com."));
        let types: Vec<RrType> = n.types.iter().collect();
        assert_eq!(
            types,
            [
                RrType::A,
                RrType::MX,
                RrType::RRSIG,
                RrType::NSEC,
                RrType(1234)
            ]
        );
        assert!(n.types.contains(RrType(1234)) && n.types.contains(RrType::MX));
        assert!(!n.types.contains(RrType::AAAA) && !n.types.contains(RrType(1235)));
        assert!(
            !n.types.contains(RrType(0x1f00)),
            "a window that is not there"
        );
        let mut bad = rdata.clone();
        bad.push(0);
        assert!(Nsec::parse(&bad).is_none(), "a cut window");
    }

    #[test]
    fn nsec3_and_nsec3param_of_rfc5155_appendix_a() {
        let rdata = wire(
            RrType::NSEC3,
            "1 1 12 aabbccdd 2t7b4g4vsa5smi47k61mv5bv1a22bojr NS SOA MX RRSIG DNSKEY NSEC3PARAM",
        );
        let n = Nsec3::parse(&rdata).unwrap();
        assert_eq!((n.params.hash_algorithm, n.params.iterations), (1, 12));
        assert!(n.opt_out());
        assert_eq!(n.params.salt, [0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(n.next_hashed.len(), 20);
        assert!(n.types.contains(RrType::NSEC3PARAM) && !n.types.contains(RrType::A));
        let p = wire(RrType::NSEC3PARAM, "1 0 12 aabbccdd");
        let v = Nsec3Param::parse(&p).unwrap();
        assert_eq!((v.hash_algorithm, v.flags, v.iterations), (1, 0, 12));
        assert_eq!(v.salt, [0xaa, 0xbb, 0xcc, 0xdd]);
        prefixes_fail(&p, |d| Nsec3Param::parse(d).is_some());
        assert!(Nsec3::parse(&p).is_none(), "no next hashed owner");
    }

    #[test]
    fn type_bitmaps_are_checked() {
        assert!(TypeBitmap::parse(&[]).is_some());
        assert!(TypeBitmap::parse(&[0, 0]).is_none(), "empty window");
        assert!(
            TypeBitmap::parse(&[0, 33]).is_none(),
            "window longer than 32"
        );
        assert!(
            TypeBitmap::parse(&[1, 1, 0x80, 0, 1, 0x40]).is_none(),
            "out of order"
        );
        let b = TypeBitmap::parse(&[0, 1, 0x40, 1, 1, 0x80]).unwrap();
        assert_eq!(b.iter().collect::<Vec<_>>(), [RrType(1), RrType(256)]);
    }
}

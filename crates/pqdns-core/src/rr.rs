//! Resource records (RFC 1035 §3.2, §4.1.3): type and class numbers as open newtypes, and a
//! [`Record`] whose RDATA is kept in uncompressed wire format.
//!
//! Unknown types are data: they print as `TYPEnnn` (RFC 3597 §5) and round-trip unchanged.

use std::fmt;

use crate::name::Name;

/// An RR TYPE number. Unknown values are valid data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RrType(pub u16);

macro_rules! rr_types {
    ($($name:ident = $num:expr, $text:expr, $doc:expr;)*) => {
        impl RrType {
            $(#[doc = $doc] pub const $name: RrType = RrType($num);)*

            /// The mnemonic, or `None` for a type without one here.
            pub fn mnemonic(self) -> Option<&'static str> {
                match self.0 { $($num => Some($text),)* _ => None }
            }

            /// Parses a mnemonic (any case) or `TYPEnnn` (RFC 3597 §5).
            pub fn from_mnemonic(text: &str) -> Option<RrType> {
                let upper = text.to_ascii_uppercase();
                match upper.as_str() {
                    $($text => Some(RrType($num)),)*
                    _ => upper.strip_prefix("TYPE").and_then(|n| n.parse().ok()).map(RrType),
                }
            }
        }
    };
}

rr_types! {
    A = 1, "A", "IPv4 address, RFC 1035 §3.4.1.";
    NS = 2, "NS", "Authoritative name server, RFC 1035 §3.3.11.";
    CNAME = 5, "CNAME", "Canonical name, RFC 1035 §3.3.1.";
    SOA = 6, "SOA", "Start of authority, RFC 1035 §3.3.13.";
    PTR = 12, "PTR", "Domain name pointer, RFC 1035 §3.3.12.";
    HINFO = 13, "HINFO", "Host information, RFC 1035 §3.3.2.";
    MX = 15, "MX", "Mail exchange, RFC 1035 §3.3.9.";
    TXT = 16, "TXT", "Text strings, RFC 1035 §3.3.14.";
    RP = 17, "RP", "Responsible person, RFC 1183 §2.2.";
    AFSDB = 18, "AFSDB", "AFS database location, RFC 1183 §1.";
    AAAA = 28, "AAAA", "IPv6 address, RFC 3596.";
    LOC = 29, "LOC", "Location, RFC 1876.";
    SRV = 33, "SRV", "Service location, RFC 2782.";
    NAPTR = 35, "NAPTR", "Naming authority pointer, RFC 3403.";
    KX = 36, "KX", "Key exchanger, RFC 2230.";
    CERT = 37, "CERT", "Certificate, RFC 4398.";
    DNAME = 39, "DNAME", "Delegation name, RFC 6672.";
    OPT = 41, "OPT", "EDNS(0) pseudo-RR, RFC 6891.";
    DS = 43, "DS", "Delegation signer, RFC 4034 §5.";
    SSHFP = 44, "SSHFP", "SSH key fingerprint, RFC 4255.";
    IPSECKEY = 45, "IPSECKEY", "IPsec keying material, RFC 4025.";
    RRSIG = 46, "RRSIG", "RRset signature, RFC 4034 §3.";
    NSEC = 47, "NSEC", "Next secure, RFC 4034 §4.";
    DNSKEY = 48, "DNSKEY", "DNS public key, RFC 4034 §2.";
    DHCID = 49, "DHCID", "DHCP identifier, RFC 4701.";
    NSEC3 = 50, "NSEC3", "Hashed next secure, RFC 5155 §3.";
    NSEC3PARAM = 51, "NSEC3PARAM", "NSEC3 parameters, RFC 5155 §4.";
    TLSA = 52, "TLSA", "TLS association, RFC 6698.";
    SMIMEA = 53, "SMIMEA", "S/MIME certificate association, RFC 8162.";
    CDS = 59, "CDS", "Child DS, RFC 7344.";
    CDNSKEY = 60, "CDNSKEY", "Child DNSKEY, RFC 7344.";
    OPENPGPKEY = 61, "OPENPGPKEY", "OpenPGP public key, RFC 7929.";
    CSYNC = 62, "CSYNC", "Child-to-parent synchronisation, RFC 7477.";
    ZONEMD = 63, "ZONEMD", "Message digest for DNS zones, RFC 8976.";
    SVCB = 64, "SVCB", "Service binding, RFC 9460.";
    HTTPS = 65, "HTTPS", "Service binding for HTTPS, RFC 9460 §9.";
    SPF = 99, "SPF", "Sender policy, RFC 7208 §14.1.";
    EUI48 = 108, "EUI48", "48-bit extended unique identifier, RFC 7043 §3.";
    EUI64 = 109, "EUI64", "64-bit extended unique identifier, RFC 7043 §4.";
    NXNAME = 128, "NXNAME", "Nonexistent name meta-type in an NSEC type bitmap (compact denial of existence), RFC 9824 §2.";
    TSIG = 250, "TSIG", "Transaction signature meta-RR, RFC 8945 §4.2.";
    AXFR = 252, "AXFR", "Zone transfer QTYPE, RFC 5936.";
    ANY = 255, "ANY", "Any type QTYPE, RFC 1035 §3.2.3.";
    URI = 256, "URI", "Uniform resource identifier, RFC 7553.";
    CAA = 257, "CAA", "CA authorization, RFC 8659.";
}

impl RrType {
    /// Whether an RRset of this type answers a question for `qtype`: the same type, or for
    /// QTYPE ANY any type but RRSIG (RFC 1035 §3.2.3; RFC 8482 §4.1 lets one RRset of the
    /// name answer ANY). RRSIGs belong to the RRset they cover (RFC 4034 §3).
    pub fn answers(self, qtype: RrType) -> bool {
        self == qtype || (qtype == RrType::ANY && self != RrType::RRSIG)
    }
}

impl fmt::Display for RrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mnemonic() {
            Some(m) => f.write_str(m),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}

/// An RR CLASS number. Only IN is served; others are data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Class(pub u16);

impl Class {
    /// The Internet class, RFC 1035 §3.2.4.
    pub const IN: Class = Class(1);
    /// CHAOS, RFC 1035 §3.2.4.
    pub const CH: Class = Class(3);
    /// ANY as a QCLASS, RFC 1035 §3.2.5.
    pub const ANY: Class = Class(255);

    /// Parses `IN`, `CH`, `ANY` or `CLASSnnn` (RFC 3597 §5), any case.
    pub fn from_mnemonic(text: &str) -> Option<Class> {
        let upper = text.to_ascii_uppercase();
        match upper.as_str() {
            "IN" => Some(Class::IN),
            "CH" => Some(Class::CH),
            "ANY" => Some(Class::ANY),
            _ => upper
                .strip_prefix("CLASS")
                .and_then(|n| n.parse().ok())
                .map(Class),
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Class::IN => f.write_str("IN"),
            Class::CH => f.write_str("CH"),
            Class::ANY => f.write_str("ANY"),
            Class(n) => write!(f, "CLASS{n}"),
        }
    }
}

/// One resource record. `rdata` is the uncompressed wire-format RDATA (RFC 1035 §3.2.1), with
/// the case of embedded names preserved; see [`crate::rdata::canonical_rdata`] for RFC 4034 §6.2.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Record {
    /// Owner name.
    pub owner: Name,
    /// RR type.
    pub rtype: RrType,
    /// RR class.
    pub class: Class,
    /// Time to live, in seconds.
    pub ttl: u32,
    /// Uncompressed wire-format RDATA.
    pub rdata: Vec<u8>,
}

impl Record {
    /// Appends the record in uncompressed wire format (owner, type, class, TTL, RDLENGTH, RDATA).
    pub fn write_wire(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.owner.as_wire());
        out.extend_from_slice(&self.rtype.0.to_be_bytes());
        out.extend_from_slice(&self.class.0.to_be_bytes());
        out.extend_from_slice(&self.ttl.to_be_bytes());
        out.extend_from_slice(&(self.rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.rdata);
    }

    /// For an RRSIG record, the type it covers (first two RDATA bytes, RFC 4034 §3.1).
    pub fn covered_type(&self) -> Option<RrType> {
        (self.rtype == RrType::RRSIG && self.rdata.len() >= 2)
            .then(|| RrType(u16::from_be_bytes([self.rdata[0], self.rdata[1]])))
    }
}

impl fmt::Display for Record {
    /// One master-file line: `owner TTL CLASS TYPE RDATA`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\t{}\t{}\t{}\t",
            self.owner, self.ttl, self.class, self.rtype
        )?;
        crate::rdata::write_presentation(f, self.rtype, &self.rdata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_mnemonics_round_trip_and_unknown_is_data() {
        assert_eq!(RrType::from_mnemonic("rrsig"), Some(RrType::RRSIG));
        assert_eq!(RrType::from_mnemonic("TYPE65280"), Some(RrType(65280)));
        assert_eq!(RrType(65280).to_string(), "TYPE65280");
        assert_eq!(RrType::NSEC3PARAM.to_string(), "NSEC3PARAM");
        assert_eq!(RrType::from_mnemonic("BOGUS"), None);
        assert_eq!(Class::from_mnemonic("class4"), Some(Class(4)));
    }

    #[test]
    fn any_is_answered_by_any_type_but_rrsig() {
        assert!(RrType::A.answers(RrType::A) && RrType::MX.answers(RrType::ANY));
        assert!(RrType::CNAME.answers(RrType::ANY) && RrType::RRSIG.answers(RrType::RRSIG));
        assert!(!RrType::A.answers(RrType::AAAA) && !RrType::RRSIG.answers(RrType::ANY));
    }
}

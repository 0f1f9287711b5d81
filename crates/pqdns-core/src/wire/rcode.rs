//! Response codes (RFC 1035 §4.1.1; the IANA "DNS RCODEs" registry, RFC 6895 §2.3).

/// A 12-bit RCODE: the header's 4 bits plus the OPT record's 8 (RFC 6891 §6.1.3). Unknown
/// values are valid data and print as `RCODEn`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Rcode(pub u16);

named_codes!(Rcode, "RCODE" {
    NOERROR = 0, "NOERROR", "No error (RFC 1035 §4.1.1).";
    FORMERR = 1, "FORMERR", "Format error: the query could not be interpreted (RFC 1035 §4.1.1).";
    SERVFAIL = 2, "SERVFAIL", "Server failure (RFC 1035 §4.1.1).";
    NXDOMAIN = 3, "NXDOMAIN", "The name does not exist (RFC 1035 §4.1.1).";
    NOTIMP = 4, "NOTIMP", "Not implemented, e.g. the OPCODE (RFC 1035 §4.1.1).";
    REFUSED = 5, "REFUSED", "Refused by policy (RFC 1035 §4.1.1).";
    YXDOMAIN = 6, "YXDOMAIN", "A name exists that should not (RFC 2136 §2.2).";
    YXRRSET = 7, "YXRRSET", "An RRset exists that should not (RFC 2136 §2.2).";
    NXRRSET = 8, "NXRRSET", "An RRset that should exist does not (RFC 2136 §2.2).";
    NOTAUTH = 9, "NOTAUTH", "Not authoritative for the zone (RFC 2136 §2.2, RFC 5936 §2.2.1).";
    NOTZONE = 10, "NOTZONE", "A name is not in the zone (RFC 2136 §2.2).";
    DSOTYPENI = 11, "DSOTYPENI", "DSO-TYPE not implemented (RFC 8490 §10.2).";
    BADVERS = 16, "BADVERS", "Unsupported EDNS version (RFC 6891 §9); needs an OPT record.";
    BADKEY = 17, "BADKEY", "TSIG key not recognised (RFC 8945 §5.3.2).";
    BADTIME = 18, "BADTIME", "TSIG signature out of the time window (RFC 8945 §5.2.3).";
    BADMODE = 19, "BADMODE", "Bad TKEY mode (RFC 2930 §2.6).";
    BADNAME = 20, "BADNAME", "Duplicate key name (RFC 2930 §2.6).";
    BADALG = 21, "BADALG", "Algorithm not supported (RFC 2930 §2.6).";
    BADTRUNC = 22, "BADTRUNC", "Bad truncation (RFC 8945 §5.2.4).";
    BADCOOKIE = 23, "BADCOOKIE", "Bad or missing server cookie (RFC 7873 §8).";
});

impl Rcode {
    /// The low 4 bits, carried in the header.
    pub fn low(self) -> u16 {
        self.0 & 0xf
    }

    /// The upper 8 bits, carried in the OPT record's TTL (RFC 6891 §6.1.3).
    pub fn extended(self) -> u8 {
        (self.0 >> 4) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_and_split() {
        assert_eq!(Rcode::BADVERS.to_string(), "BADVERS");
        assert_eq!(Rcode(3841).to_string(), "RCODE3841");
        assert_eq!(Rcode(3841).mnemonic(), None);
        assert_eq!((Rcode::BADVERS.low(), Rcode::BADVERS.extended()), (0, 1));
        assert_eq!(
            (Rcode::BADCOOKIE.low(), Rcode::BADCOOKIE.extended()),
            (7, 1)
        );
    }
}

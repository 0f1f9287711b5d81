//! Operation codes (RFC 1035 §4.1.1; the IANA "DNS OpCodes" registry, RFC 6895 §2.2).

/// A 4-bit OPCODE. Unknown values are valid data and print as `OPCODEn`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Opcode(pub u8);

named_codes!(Opcode, "OPCODE" {
    QUERY = 0, "QUERY", "A standard query (RFC 1035 §4.1.1).";
    IQUERY = 1, "IQUERY", "Inverse query, retired (RFC 3425).";
    STATUS = 2, "STATUS", "Server status request (RFC 1035 §4.1.1).";
    NOTIFY = 4, "NOTIFY", "Zone change notification (RFC 1996 §3.1).";
    UPDATE = 5, "UPDATE", "Dynamic update (RFC 2136 §1).";
    DSO = 6, "DSO", "DNS stateful operations (RFC 8490 §10.1).";
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics() {
        assert_eq!(Opcode::NOTIFY.to_string(), "NOTIFY");
        assert_eq!(Opcode(9).to_string(), "OPCODE9");
    }
}

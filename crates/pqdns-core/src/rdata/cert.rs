//! CERT certificate types (RFC 4398 §2.1): the 16-bit type field is a number or one of these
//! mnemonics in presentation format (RFC 4398 §2.2), written as the mnemonic when it has one.

/// The mnemonics of RFC 4398 §2.1.
const TYPES: [(u16, &str); 10] = [
    (1, "PKIX"),
    (2, "SPKI"),
    (3, "PGP"),
    (4, "IPKIX"),
    (5, "ISPKI"),
    (6, "IPGP"),
    (7, "ACPKIX"),
    (8, "IACPKIX"),
    (253, "URI"),
    (254, "OID"),
];

/// A certificate type from its mnemonic (any case) or decimal number.
pub(super) fn parse_type(text: &str) -> Option<u16> {
    TYPES
        .iter()
        .find(|(_, m)| m.eq_ignore_ascii_case(text))
        .map(|(n, _)| *n)
        .or_else(|| text.parse().ok())
}

/// The mnemonic of a certificate type, if it has one.
pub(super) fn type_mnemonic(number: u16) -> Option<&'static str> {
    TYPES.iter().find(|(n, _)| *n == number).map(|(_, m)| *m)
}

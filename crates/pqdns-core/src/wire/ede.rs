//! Extended DNS Errors (RFC 8914): the INFO-CODE of an EDE option (option code
//! [`super::OPTION_EDE`], RFC 8914 §2), from the IANA "Extended DNS Error Codes" registry.

/// An RFC 8914 INFO-CODE. Unknown values are valid data and print as `INFO-CODE n`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Ede(pub u16);

named_codes!(Ede, "INFO-CODE " {
    OTHER = 0, "Other Error", "Other Error (RFC 8914 §4.1).";
    UNSUPPORTED_DNSKEY_ALGORITHM = 1, "Unsupported DNSKEY Algorithm", "Unsupported DNSKEY Algorithm (RFC 8914 §4.2).";
    UNSUPPORTED_DS_DIGEST = 2, "Unsupported DS Digest Type", "Unsupported DS Digest Type (RFC 8914 §4.3).";
    STALE_ANSWER = 3, "Stale Answer", "Stale Answer (RFC 8914 §4.4).";
    FORGED_ANSWER = 4, "Forged Answer", "Forged Answer (RFC 8914 §4.5).";
    DNSSEC_INDETERMINATE = 5, "DNSSEC Indeterminate", "DNSSEC Indeterminate (RFC 8914 §4.6).";
    DNSSEC_BOGUS = 6, "DNSSEC Bogus", "DNSSEC Bogus (RFC 8914 §4.7).";
    SIGNATURE_EXPIRED = 7, "Signature Expired", "Signature Expired (RFC 8914 §4.8).";
    SIGNATURE_NOT_YET_VALID = 8, "Signature Not Yet Valid", "Signature Not Yet Valid (RFC 8914 §4.9).";
    DNSKEY_MISSING = 9, "DNSKEY Missing", "DNSKEY Missing (RFC 8914 §4.10).";
    RRSIGS_MISSING = 10, "RRSIGs Missing", "RRSIGs Missing (RFC 8914 §4.11).";
    NO_ZONE_KEY_BIT = 11, "No Zone Key Bit Set", "No Zone Key Bit Set (RFC 8914 §4.12).";
    NSEC_MISSING = 12, "NSEC Missing", "NSEC Missing (RFC 8914 §4.13).";
    CACHED_ERROR = 13, "Cached Error", "Cached Error (RFC 8914 §4.14).";
    NOT_READY = 14, "Not Ready", "Not Ready (RFC 8914 §4.15).";
    BLOCKED = 15, "Blocked", "Blocked (RFC 8914 §4.16).";
    CENSORED = 16, "Censored", "Censored (RFC 8914 §4.17).";
    FILTERED = 17, "Filtered", "Filtered (RFC 8914 §4.18).";
    PROHIBITED = 18, "Prohibited", "Prohibited (RFC 8914 §4.19).";
    STALE_NXDOMAIN_ANSWER = 19, "Stale NXDomain Answer", "Stale NXDomain Answer (RFC 8914 §4.20).";
    NOT_AUTHORITATIVE = 20, "Not Authoritative", "Not Authoritative (RFC 8914 §4.21).";
    NOT_SUPPORTED = 21, "Not Supported", "Not Supported (RFC 8914 §4.22).";
    NO_REACHABLE_AUTHORITY = 22, "No Reachable Authority", "No Reachable Authority (RFC 8914 §4.23).";
    NETWORK_ERROR = 23, "Network Error", "Network Error (RFC 8914 §4.24).";
    INVALID_DATA = 24, "Invalid Data", "Invalid Data (RFC 8914 §4.25).";
    SIGNATURE_EXPIRED_BEFORE_VALID = 25, "Signature Expired before Valid", "Signature Expired before Valid (IANA registry, 2022).";
    TOO_EARLY = 26, "Too Early", "Too Early: 0-RTT data refused (RFC 9250 §4.5).";
    UNSUPPORTED_NSEC3_ITERATIONS = 27, "Unsupported NSEC3 Iterations Value", "Unsupported NSEC3 Iterations Value (RFC 9276 §3.2).";
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_registry() {
        assert_eq!(Ede(12), Ede::NSEC_MISSING);
        assert_eq!(Ede::SIGNATURE_EXPIRED.to_string(), "Signature Expired");
        assert_eq!(Ede(27).to_string(), "Unsupported NSEC3 Iterations Value");
        assert_eq!(Ede(49152).to_string(), "INFO-CODE 49152");
    }
}

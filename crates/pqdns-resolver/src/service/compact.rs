//! The RCODE a client gets when the answer is a compact denial of existence (RFC 9824 §5):
//! the NSEC at the name listing NXNAME, validated, says the name does not exist, whatever
//! RCODE the authority sent (NOERROR to a querier without CO, NXDOMAIN to one with CO; the
//! resolver sends CO upstream, `resolve::exchange`).
//!
//! - A client without DO gets NXDOMAIN: it sees no proof, only the RCODE, and for it the
//!   name does not exist (RFC 9824 §5, the restoration a resolver that understands NXNAME
//!   may do for non-DNSSEC queriers).
//! - A client with DO and CO gets NXDOMAIN, with CO in the response (RFC 9824 §5.1).
//! - A client with DO without CO gets NOERROR: CO is a hop-by-hop signal, and the resolver
//!   "will need to reset the response code back to NOERROR (0) for an NXNAME response"
//!   (RFC 9824 §5.1) for a DNSSEC querier that did not ask for it.
//!
//! Only a validated proof ([`VerifiedDenial::compact`]) changes the RCODE: an NSEC a zone
//! does not vouch for changes nothing, and an ordinary NXDOMAIN stays NXDOMAIN.

use pqdns_core::dnssec::denial::VerifiedDenial;
use pqdns_core::wire::Rcode;

use super::query::ClientQuery;

/// The RCODE for `query` of an answer received with `received` (NOERROR or NXDOMAIN) whose
/// validated proofs are `denials`.
pub(crate) fn rcode(query: &ClientQuery, received: Rcode, denials: &[VerifiedDenial]) -> Rcode {
    let compact = denials.iter().any(VerifiedDenial::compact);
    let answered = received == Rcode::NOERROR || received == Rcode::NXDOMAIN;
    if !compact || !answered {
        return received;
    }
    if query.dnssec_ok() && !query.compact_ok() {
        Rcode::NOERROR
    } else {
        Rcode::NXDOMAIN
    }
}

//! A stub's query as the resolver service reads it (RFC 1035 §4.1.1, RFC 6891 §6.1, RFC 4035
//! §3.2): one question, the RD/CD/AD bits, EDNS(0) (UDP payload size, DO, CO, version) and the
//! COOKIE option (RFC 7873 §4), after the acceptability check the authoritative server runs
//! too ([`pqdns_core::wire::query`]). Reading allocates nothing.

use pqdns_core::wire::query::{self, Malformed};
use pqdns_core::wire::{Header, NameBuf, Opcode, EDNS_CO, FLAG_AD, FLAG_CD, MIN_UDP_PAYLOAD};
use pqdns_core::{Class, RrType};
use pqdns_net::cookie;

/// Longest COOKIE option data RFC 7873 §5.2.2 accepts: an 8-byte client cookie and a server
/// cookie of at most 32 bytes.
const MAX_COOKIE: usize = 40;

/// The data of a query's COOKIE option (RFC 7873 §4), of a length [`cookie::split`] accepts:
/// a client cookie and possibly a server cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueryCookie {
    data: [u8; MAX_COOKIE],
    len: u8,
}

impl QueryCookie {
    /// The option data as sent.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }
}

/// What a query's COOKIE option is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CookieOption {
    /// No COOKIE option.
    Absent,
    /// A well-formed one.
    Present(QueryCookie),
    /// One of a length RFC 7873 §5.2.2 answers with FORMERR (not 8, nor 16 to 40 bytes).
    Malformed,
}

/// EDNS(0) as a client sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientEdns {
    /// Largest UDP response the client accepts, bytes (at least 512).
    pub(crate) udp_payload: u16,
    /// The DO bit (RFC 3225): the client wants RRSIG, NSEC and NSEC3 records.
    pub(crate) dnssec_ok: bool,
    /// The CO bit (RFC 9824 §5.1): the client takes a compact denial of existence with the
    /// RCODE NXDOMAIN.
    pub(crate) compact_ok: bool,
}

/// A query the service can answer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientQuery {
    pub(crate) header: Header,
    /// QNAME in uncompressed wire format, case as sent.
    pub(crate) qname: NameBuf,
    pub(crate) qtype: RrType,
    pub(crate) qclass: Class,
    pub(crate) edns: Option<ClientEdns>,
    /// The COOKIE option (the first one, if several).
    pub(crate) cookie: CookieOption,
}

impl ClientQuery {
    /// CD (RFC 4035 §3.2.2): the client validates itself and wants the data anyway.
    pub(crate) fn checking_disabled(&self) -> bool {
        self.header.has(FLAG_CD)
    }

    /// DO (RFC 3225).
    pub(crate) fn dnssec_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok)
    }

    /// DO and CO (RFC 9824 §5.1): a compact denial of existence is answered NXDOMAIN, with
    /// CO in the response.
    pub(crate) fn compact_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok && e.compact_ok)
    }

    /// Whether a Secure answer gets AD: when the query has DO or AD (RFC 6840 §5.7-5.8).
    pub(crate) fn wants_ad(&self) -> bool {
        self.dnssec_ok() || self.header.has(FLAG_AD)
    }

    /// The largest response that may be sent over UDP, bytes (RFC 6891 §6.2.5: the client's
    /// payload size, at least 512; 512 without EDNS, RFC 1035 §4.2.1).
    pub(crate) fn udp_limit(&self) -> usize {
        usize::from(
            self.edns
                .map_or(MIN_UDP_PAYLOAD, |e| e.udp_payload.max(MIN_UDP_PAYLOAD)),
        )
    }
}

/// What a message from a client is.
// The query lives on the stack of the serving thread; boxing it would allocate per query.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A query to answer.
    Query(ClientQuery),
    /// A message the acceptability check shared with the authoritative server
    /// ([`pqdns_core::wire::query`]) rejected: answered FORMERR, NOTIMP or BADVERS with a bare
    /// header and OPT, or not at all ([`Malformed::respond`]).
    Rejected(Malformed),
}

/// Reads a client's message.
pub(crate) fn parse(message: &[u8]) -> Parsed {
    let q = match query::parse(message, None, &[Opcode::QUERY]) {
        Ok(q) => q,
        Err(m) => return Parsed::Rejected(m),
    };
    let cookie = match q.cookie() {
        None => CookieOption::Absent,
        Some(data) if cookie::split(data).is_none() => CookieOption::Malformed,
        Some(data) => {
            let mut c = QueryCookie {
                data: [0; MAX_COOKIE],
                len: 0,
            };
            match (c.data.get_mut(..data.len()), u8::try_from(data.len())) {
                (Some(to), Ok(len)) => {
                    to.copy_from_slice(data);
                    c.len = len;
                    CookieOption::Present(c)
                }
                _ => CookieOption::Malformed,
            }
        }
    };
    Parsed::Query(ClientQuery {
        header: q.header,
        qname: q.qname,
        qtype: q.qtype,
        qclass: q.qclass,
        edns: q.edns.map(|o| ClientEdns {
            udp_payload: o.udp_payload(),
            dnssec_ok: o.dnssec_ok(),
            compact_ok: o.flags() & EDNS_CO != 0,
        }),
        cookie,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::{Edns, Rcode, EDNS_DO, FLAG_QR, FLAG_RD, OPTION_COOKIE};

    fn query(flags: u16, edns: Option<Edns>) -> Vec<u8> {
        let mut m = Message::query(
            7,
            Question {
                qname: "WwW.Example.".parse().unwrap(),
                qtype: RrType::AAAA,
                qclass: Class::IN,
            },
            false,
            edns,
        );
        m.flags = flags;
        m.to_wire()
    }

    #[test]
    fn a_query_with_edns_and_flags() {
        let Parsed::Query(q) = parse(&query(FLAG_RD | FLAG_CD, Some(Edns::dnssec_ok(4096)))) else {
            panic!("not a query")
        };
        assert_eq!(q.qname.as_wire(), b"\x03WwW\x07Example\x00");
        assert_eq!((q.qtype, q.qclass), (RrType::AAAA, Class::IN));
        assert!(q.header.has(FLAG_RD) && q.checking_disabled() && q.dnssec_ok());
        assert!(q.wants_ad());
        assert_eq!(q.udp_limit(), 4096);
        assert!(!q.compact_ok());
    }

    /// CO counts only with DO (RFC 9824 §5.1: a compact answer is a DNSSEC answer).
    #[test]
    fn compact_answers_ok() {
        for (flags, co) in [
            (EDNS_DO | EDNS_CO, true),
            (EDNS_CO, false),
            (EDNS_DO, false),
        ] {
            let mut edns = Edns::dnssec_ok(1232);
            edns.flags = flags;
            let Parsed::Query(q) = parse(&query(0, Some(edns))) else {
                panic!("not a query")
            };
            assert_eq!(q.compact_ok(), co, "flags {flags:#x}");
        }
    }

    #[test]
    fn limits_and_ad_without_edns() {
        let Parsed::Query(q) = parse(&query(0, None)) else {
            panic!("not a query")
        };
        assert_eq!(q.udp_limit(), 512);
        assert!(!q.dnssec_ok() && !q.wants_ad() && !q.checking_disabled());
        let Parsed::Query(q) = parse(&query(FLAG_AD, Some(Edns::dnssec_ok(100)))) else {
            panic!("not a query")
        };
        // A payload below 512 counts as 512 (RFC 6891 §6.2.5).
        assert_eq!(q.udp_limit(), 512);
        assert!(q.wants_ad());
    }

    #[test]
    fn cookie_options_by_length() {
        for (len, want) in [(8, true), (9, false), (16, true), (40, true), (41, false)] {
            let mut edns = Edns::dnssec_ok(1232);
            edns.set_option(OPTION_COOKIE, vec![7; len]);
            let Parsed::Query(q) = parse(&query(0, Some(edns))) else {
                panic!("not a query")
            };
            match q.cookie {
                CookieOption::Present(c) => {
                    assert!(want, "{len} bytes");
                    assert_eq!(c.as_bytes(), &vec![7; len][..]);
                }
                CookieOption::Malformed => assert!(!want, "{len} bytes"),
                CookieOption::Absent => panic!("{len} bytes: not seen"),
            }
        }
        let Parsed::Query(q) = parse(&query(0, Some(Edns::dnssec_ok(1232)))) else {
            panic!("not a query")
        };
        assert_eq!(q.cookie, CookieOption::Absent);
    }

    #[test]
    fn errors_and_drops() {
        let rcode = |m: &[u8]| match parse(m) {
            Parsed::Rejected(m) => (m.rcode(), m.edns),
            Parsed::Query(_) => panic!("accepted"),
        };
        assert_eq!(rcode(&[1, 2, 3]), (None, false));
        assert_eq!(rcode(&query(FLAG_QR, None)), (None, false));
        let mut truncated = query(0, None);
        truncated.pop();
        assert_eq!(rcode(&truncated), (Some(Rcode::FORMERR), false));
        let mut v1 = Edns::dnssec_ok(1232);
        v1.version = 1;
        assert_eq!(rcode(&query(0, Some(v1))), (Some(Rcode::BADVERS), true));
        // OPCODE 2 (STATUS).
        assert_eq!(rcode(&query(2 << 11, None)), (Some(Rcode::NOTIMP), false));
    }
}

//! The stages of the request pipeline before a handler (ARCHITECTURE.md, "The server's
//! request pipeline"): the prepared-answer lookup, which answers a query asked before
//! without parsing it; the one parse, with the acceptability check shared with the resolver
//! service ([`pqdns_core::wire::query`]); and message authentication: TSIG (RFC 8945,
//! [`verify_tsig`]) first, then DNS cookies (RFC 7873, [`authenticate`]).

use std::net::IpAddr;

use pqdns_core::wire::query::{self, Malformed, ParseError, Query};
use pqdns_core::wire::tsig::{self, Digest, Key, KeyRing, Mac, Rejection, Signed};
use pqdns_core::wire::{Opcode, WireError};
use pqdns_core::RrType;

use pqdns_net::Transport;

use crate::answer::Outcome;
use crate::catalog::Catalog;
use crate::cookie::{self, CookieCheck, CookieMode};
use crate::finish;

/// The OPCODEs the server handles; others get NOTIMP from the acceptability check: QUERY and
/// UPDATE (RFC 2136, [`crate::update`]).
pub(crate) const OPCODES: &[Opcode] = &[Opcode::QUERY, Opcode::UPDATE];
/// [`OPCODES`] and NOTIFY (RFC 1996), for a server with secondary zones.
pub(crate) const SECONDARY_OPCODES: &[Opcode] = &[Opcode::QUERY, Opcode::UPDATE, Opcode::NOTIFY];

/// What the pipeline knows about a request besides its bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange<'a> {
    /// How the response travels (which bounds its size).
    pub(crate) transport: Transport,
    /// The query's source address (for DNS cookies).
    pub(crate) client: IpAddr,
    /// Our EDNS UDP payload size, in bytes (at least 512).
    pub(crate) udp_payload: u16,
    /// Bytes kept free in the response for its TSIG record (0 for an unsigned request), so
    /// the signed answer still fits the transport's limit (RFC 8945 §5.3).
    pub(crate) tsig_room: usize,
    /// How an answer from an online zone gets signatures not cached yet ([`crate::online`]).
    pub(crate) signing: crate::online::Mode<'a>,
}

impl Exchange<'_> {
    /// UDP under `cookies = "require"`: a query's cookie decides its answer.
    fn cookies_required(&self, catalog: &Catalog) -> bool {
        self.transport == Transport::Udp
            && catalog
                .cookies
                .as_deref()
                .is_some_and(|c| c.mode() == CookieMode::Require)
    }
}

/// Stage 0: the stored answer to the query `packet`, if one was prepared (see
/// `answer_cache`), written to `out[base..]` with our cookie filled in. Never under
/// `cookies = "require"` over UDP, where the cookie decides the answer.
#[inline]
pub(crate) fn replay(
    catalog: &Catalog,
    packet: &[u8],
    x: &Exchange,
    out: &mut Vec<u8>,
    base: usize,
) -> Option<Outcome> {
    if x.cookies_required(catalog) {
        return None;
    }
    let r = catalog
        .answers
        .replay(packet, x.transport, x.udp_payload, out, base)?;
    let mut outcome = r.outcome;
    if let (Some(range), Some(cookies)) = (r.cookie, catalog.cookies.as_deref()) {
        let auth = Auth::checked(cookies, &packet[range], x.client);
        outcome.cookie = auth.check;
        finish::fill_cookie(catalog, &auth, x.client, &mut out[base..]);
    }
    Some(outcome)
}

/// Stages 1–2 for a caller that has only the QUERY handler ([`crate::answer::respond`]):
/// parses `packet` once and applies the shared acceptability check, accepting OPCODE QUERY
/// alone, so an UPDATE or NOTIFY gets NOTIMP instead of a query's answer; `compact` is the RR
/// type of ARRF's compact RRFRAG records (fragment requests), when fragmentation is on.
///
/// # Errors
/// [`Malformed`], which [`finish::reject`] answers (FORMERR, NOTIMP, BADVERS or nothing).
pub(crate) fn parse(packet: &[u8], compact: Option<RrType>) -> Result<Query<'_>, Malformed> {
    parse_with(packet, compact, &[Opcode::QUERY])
}

/// [`parse`] accepting the OPCODEs `opcodes`.
///
/// # Errors
/// As [`parse`].
pub(crate) fn parse_with<'a>(
    packet: &'a [u8],
    compact: Option<RrType>,
    opcodes: &[Opcode],
) -> Result<Query<'a>, Malformed> {
    query::parse(packet, compact, opcodes)
}

/// The result of message authentication: the query's COOKIE option data and how it checked
/// against our secrets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Auth<'a> {
    /// The COOKIE option data (RFC 7873 §4), when the query had one and cookies are on.
    pub(crate) cookie: Option<&'a [u8]>,
    /// How it checked; [`CookieCheck::Absent`] without one.
    pub(crate) check: CookieCheck,
    /// When it was checked, UNIX seconds (our answer's server cookie carries this stamp).
    pub(crate) now: u64,
    /// True when policy refuses to answer the question (`cookies = "require"` over UDP
    /// without a valid server cookie): the handler answers BADCOOKIE or TC, no data.
    pub(crate) refused: bool,
}

impl<'a> Auth<'a> {
    /// No authentication: for answers shared by every client (complete answers kept for
    /// fragmentation), which carry no cookie.
    pub(crate) fn none() -> Auth<'a> {
        Auth {
            cookie: None,
            check: CookieCheck::Absent,
            now: 0,
            refused: false,
        }
    }

    fn checked(cookies: &cookie::Cookies, data: &'a [u8], client: IpAddr) -> Auth<'a> {
        let now = pqdns_core::time::now();
        Auth {
            cookie: Some(data),
            check: cookies.check(data, client, now),
            now,
            refused: false,
        }
    }
}

/// A request whose TSIG verified: its answer is signed with `key` after `mac` (RFC 8945
/// §5.3: the request's MAC starts the response's digest).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Signer<'k> {
    /// The request's key.
    pub(crate) key: &'k Key,
    /// The request's MAC.
    pub(crate) mac: Mac,
}

impl Signer<'_> {
    /// Bytes the answer's TSIG record takes.
    pub(crate) fn room(&self) -> usize {
        self.key.record_len(0)
    }

    /// Signs the response in `out[base..]` as the answer to this request, at `now` (UNIX
    /// seconds); returns its new length (0, send nothing, if it cannot be signed: ARCOUNT is
    /// full, never in our answers).
    pub(crate) fn sign(&self, out: &mut Vec<u8>, base: usize, now: u64) -> usize {
        let fields = tsig::Fields::at(now);
        match tsig::sign(
            self.key,
            Digest::Response(self.mac.as_bytes()),
            out,
            base,
            &fields,
        ) {
            Ok(_) => out.len() - base,
            Err(_) => 0,
        }
    }
}

/// What the request's TSIG says (RFC 8945 §5.2).
#[derive(Debug)]
pub(crate) enum Tsig<'k, 'a> {
    /// No TSIG record.
    Unsigned,
    /// Verified: sign the answer.
    Verified(Signer<'k>),
    /// Rejected: answer NOTAUTH (or FORMERR) with the error ([`crate::finish::tsig_error`]).
    Rejected(Rejection<'k>, Box<Signed<'a>>),
    /// A TSIG record that is not the last record, or malformed: FORMERR (§5.1).
    Malformed(Malformed),
}

/// Stage 3: verifies the TSIG of `q`, if it has one, with `keys` at `now` (UNIX seconds).
/// Parses nothing again: the record is found in the parsed view.
pub(crate) fn verify_tsig<'k, 'a>(keys: &'k KeyRing, q: &Query<'a>, now: u64) -> Tsig<'k, 'a> {
    let signed = match tsig::find(&q.message) {
        Ok(Some(signed)) => signed,
        Ok(None) => return Tsig::Unsigned,
        Err(error) => {
            return Tsig::Malformed(Malformed {
                error: ParseError::Wire(error),
                header: Some(q.header),
                edns: q.edns.is_some(),
            })
        }
    };
    match signed.verify(keys.get(signed.key_name()), Digest::Request, now) {
        Ok(v) => Tsig::Verified(Signer {
            key: v.key,
            mac: v.mac,
        }),
        // A request with an empty MAC is not an error message: its MAC is shorter than RFC
        // 8945 §5.2.2.1 allows (FORMERR).
        Err(Rejection::Unsigned(_)) => Tsig::Rejected(Rejection::Malformed, Box::new(signed)),
        Err(rejection) => Tsig::Rejected(rejection, Box::new(signed)),
    }
}

/// Stage 4: authenticates the query `q` by its DNS cookie.
///
/// # Errors
/// [`Malformed`] (FORMERR) for a COOKIE option of a length other than 8 or 16 to 40 bytes
/// (RFC 7873 §5.2.2), when cookies are on.
pub(crate) fn authenticate<'a>(
    catalog: &Catalog,
    q: &Query<'a>,
    x: &Exchange,
) -> Result<Auth<'a>, Malformed> {
    let (Some(cookies), Some(data)) = (catalog.cookies.as_deref(), q.cookie()) else {
        let mut auth = Auth::none();
        auth.refused = x.cookies_required(catalog);
        return Ok(auth);
    };
    if cookie::split(data).is_none() {
        return Err(Malformed {
            error: ParseError::Wire(WireError::BadOpt),
            header: Some(q.header),
            edns: true,
        });
    }
    let mut auth = Auth::checked(cookies, data, x.client);
    auth.refused = x.cookies_required(catalog) && auth.check != CookieCheck::Valid;
    Ok(auth)
}

#[cfg(test)]
pub(crate) mod tests {
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::Edns;
    use pqdns_core::{Class, RrType};

    /// A query for tests: ID 0x1234, RD, the question, an optional OPT with payload and DO.
    pub(crate) fn build(qname: &str, qtype: RrType, edns: Option<(u16, bool)>) -> Vec<u8> {
        let edns = edns.map(|(size, dnssec_ok)| {
            let mut e = Edns::dnssec_ok(size);
            if !dnssec_ok {
                e.flags = 0;
            }
            e
        });
        let question = Question {
            qname: qname.parse().unwrap(),
            qtype,
            qclass: Class::IN,
        };
        Message::query(0x1234, question, true, edns).to_wire()
    }
}

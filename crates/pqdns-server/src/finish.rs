//! The response finisher: what every answer of the server gets around its records, in one
//! place. It opens a response to a query (header, question, OPT record with our payload size
//! and DO echoed, NSID when asked, room for our COOKIE option), fills the COOKIE option in
//! last (also in replayed answers), and answers a message the pipeline rejected. Room for the
//! TSIG record of an answer to a signed request is kept free when the response is opened
//! ([`Exchange::tsig_room`]); the record is added last (`request::Signer::sign`, RFC 8945
//! §5.3), and [`tsig_error`] answers a request whose TSIG was rejected (§5.2).
//!
//! Size: UDP responses are limited to min(client's EDNS payload, ours) bytes, 512 without
//! EDNS (RFC 6891 §6.2.5); stream transports allow 65535 bytes. What then happens to a
//! truncated UDP answer (fragments, the amplification limit, RRL) is the UDP stage of
//! `service`.

use std::net::IpAddr;

use pqdns_core::wire::query::{Malformed, Query};
use pqdns_core::wire::tsig::{self, Digest, Rejection, Signed};
use pqdns_core::wire::{
    MessageWriter, Rcode, EDNS_CO, EDNS_DO, HEADER_LEN, OPTION_COOKIE, OPTION_NSID,
};

use crate::answer::{Outcome, MAX_STREAM_MESSAGE};
use crate::catalog::Catalog;
use crate::cookie::{CookieCheck, RESPONSE_COOKIE_LEN};
use crate::request::{Auth, Exchange};

/// The placeholder for our COOKIE option data, filled in by [`fill_cookie`].
const COOKIE_PLACEHOLDER: [u8; RESPONSE_COOKIE_LEN] = [0; RESPONSE_COOKIE_LEN];

/// Opens the response to `q` in `out[base..]`: header, question and, when the query had EDNS,
/// the OPT record (our payload size, DO echoed, RFC 3225 §3), our NSID when the query asked
/// for it (RFC 5001 §2.2: its payload is ignored) and room for our COOKIE option when it had
/// one. The writer's budget is the transport's limit.
pub(crate) fn open<'b, 'o>(
    catalog: &'o Catalog,
    q: &Query<'_>,
    auth: &Auth<'_>,
    x: &Exchange,
    out: &'b mut Vec<u8>,
    base: usize,
) -> MessageWriter<'b, 'o> {
    let limit = if x.transport.is_stream() {
        MAX_STREAM_MESSAGE
    } else {
        q.udp_payload().min(x.udp_payload).into()
    };
    let limit = usize::max(limit.saturating_sub(x.tsig_room), HEADER_LEN);
    let mut w = MessageWriter::response(out, base, limit, q.header);
    // The question (at most 259 bytes) and an OPT always fit in 512 bytes.
    let _fits = w.question(q.qname.as_wire(), q.qtype, q.qclass);
    if let Some(edns) = q.edns {
        let flags = if q.dnssec_ok() { EDNS_DO } else { 0 };
        // RFC 9824 §5.1: CO echoed, since this server answers with compact denial (online
        // zones) and restores NXDOMAIN for queries that set it.
        let flags = flags | (edns.flags() & EDNS_CO);
        let _fits = w.set_opt(x.udp_payload, 0, flags);
        if let (Some(nsid), Some(_)) = (&catalog.identity.nsid, edns.option(OPTION_NSID)) {
            let _fits = w.add_option(OPTION_NSID, nsid);
        }
        if auth.cookie.is_some() {
            let _fits = w.add_option(OPTION_COOKIE, &COOKIE_PLACEHOLDER);
        }
    }
    w
}

/// Writes our COOKIE option data answering `auth`'s (RFC 9018 §4.3) into the placeholder
/// that ends `response`, which is left alone if it does not end in one (the answer was cut,
/// or the query had no cookie).
pub(crate) fn fill_cookie(catalog: &Catalog, auth: &Auth<'_>, client: IpAddr, response: &mut [u8]) {
    let (Some(cookies), Some(data)) = (catalog.cookies.as_deref(), auth.cookie) else {
        return;
    };
    let Some(at) = response.len().checked_sub(RESPONSE_COOKIE_LEN + 4) else {
        return;
    };
    let (head, slot) = response[at..].split_at_mut(4);
    if head[..2] != OPTION_COOKIE.to_be_bytes()
        || head[2..] != (RESPONSE_COOKIE_LEN as u16).to_be_bytes()
    {
        return;
    }
    if let Ok(slot) = <&mut [u8; RESPONSE_COOKIE_LEN]>::try_from(slot) {
        cookies.answer(data, auth.check, client, auth.now, slot);
    }
}

/// The response to a message the pipeline rejected ([`Malformed::respond`]: FORMERR, NOTIMP
/// or BADVERS with the header and OPT, or nothing), in `out[base..]`.
pub(crate) fn reject(m: &Malformed, x: &Exchange, out: &mut Vec<u8>, base: usize) -> Outcome {
    let len = m.respond(x.udp_payload, None, out, base);
    Outcome {
        len,
        rcode: m.rcode().unwrap_or(Rcode::FORMERR),
        truncated: false,
        qtype: None,
        error: Some(m.error),
        cache_ttl: None,
        cookie: CookieCheck::Absent,
    }
}

/// The answer to `q`, whose TSIG `signed` was rejected (RFC 8945 §5.2), in `out[base..]`:
/// header, question and OPT with NOTAUTH, and a TSIG record carrying the error: unsigned for
/// BADKEY and BADSIG (§5.3.2: "It MUST NOT send back a signed error message"), signed for
/// BADTIME with the request's time signed and our time `now` (UNIX seconds) in other data
/// (§5.2.3). A MAC of a forbidden length is FORMERR (§5.2.2.1), without TSIG.
pub(crate) fn tsig_error(
    q: &Query<'_>,
    rejection: &Rejection<'_>,
    signed: &Signed<'_>,
    x: &Exchange,
    out: &mut Vec<u8>,
    base: usize,
    now: u64,
) -> Outcome {
    let rcode = rejection.rcode();
    let mut w = MessageWriter::response(out, base, MAX_STREAM_MESSAGE, q.header);
    // The question (at most 259 bytes) and an OPT always fit.
    let _fits = w.question(q.qname.as_wire(), q.qtype, q.qclass);
    if q.edns.is_some() {
        let flags = if q.dnssec_ok() { EDNS_DO } else { 0 };
        let _fits = w.set_opt(x.udp_payload, 0, flags);
    }
    let mut len = w.finish(rcode);
    let added = match rejection {
        Rejection::Malformed => Ok(()),
        Rejection::BadTime(v) => {
            let fields = tsig::Fields::bad_time(v.time_signed, now);
            tsig::sign(
                v.key,
                Digest::Response(v.mac.as_bytes()),
                out,
                base,
                &fields,
            )
            .map(|_| ())
        }
        _ => tsig::append_unsigned(out, base, signed, rejection.error(), now),
    };
    if added.is_ok() {
        len = out.len() - base;
    }
    Outcome {
        len,
        rcode,
        truncated: false,
        qtype: Some(q.qtype),
        error: None,
        cache_ttl: None,
        cookie: CookieCheck::Absent,
    }
}

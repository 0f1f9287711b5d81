//! The response finisher: what every answer of the server gets around its records, in one
//! place. It opens a response to a query (header, question, OPT record with our payload size
//! and DO echoed, NSID when asked, room for our COOKIE option), fills the COOKIE option in
//! last (also in replayed answers), and answers a message the pipeline rejected. Room for a
//! TSIG record (RFC 8945 §5.3, signed last) belongs here too.
//!
//! Size: UDP responses are limited to min(client's EDNS payload, ours) bytes, 512 without
//! EDNS (RFC 6891 §6.2.5); stream transports allow 65535 bytes. What then happens to a
//! truncated UDP answer (fragments, the amplification limit, RRL) is the UDP stage of
//! `service`.

use std::net::IpAddr;

use pqdns_core::wire::query::{Malformed, Query};
use pqdns_core::wire::{MessageWriter, Rcode, EDNS_DO, OPTION_COOKIE, OPTION_NSID};

use crate::answer::{Outcome, Transport, MAX_STREAM_MESSAGE};
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
    let limit = match x.transport {
        Transport::Stream => MAX_STREAM_MESSAGE,
        Transport::Udp => q.udp_payload().min(x.udp_payload).into(),
    };
    let mut w = MessageWriter::response(out, base, limit, q.header);
    // The question (at most 259 bytes) and an OPT always fit in 512 bytes.
    let _fits = w.question(q.qname.as_wire(), q.qtype, q.qclass);
    if let Some(edns) = q.edns {
        let flags = if q.dnssec_ok() { EDNS_DO } else { 0 };
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

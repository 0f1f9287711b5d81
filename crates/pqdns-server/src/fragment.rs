//! The fragmenting responder for UDP: ARRF or QBF (`pqdns_core::frag`), only for clients that
//! sent the pqdns fragmentation EDNS option (`pqdns_core::frag::edns`); every other client gets
//! the standard truncated answer (TC=1) and retries over TCP.
//!
//! Two hooks in the UDP path of the request pipeline, both off the fast path of ordinary
//! answers, both working from the query parsed once by the pipeline (never parsing it again):
//! - [`replace_truncated`]: after the answer engine set TC, the complete answer is computed
//!   as for a stream transport and replaced by the first fragment (QBF fragment 1 with TC=1,
//!   or the ARRF answer with its largest records replaced by RRFRAGs and TC clear).
//!   With a valid server cookie and the option's PUSH flag, the other fragments are sent
//!   at once, unrequested (one round trip instead of two; see [`replace_truncated`]).
//! - [`answer_request`]: fragment requests (a QBF `?n?` QNAME, or ARRF's `. RRFRAG IN`
//!   question carrying the original question in the option) are answered by recomputing the
//!   complete answer and cutting the requested part. No per-client state is kept.
//!
//! Amplification: a fragment response is never larger than the UDP limit of an ordinary
//! answer to the same client (min(client EDNS payload, ours), RFC 6891 §6.2.5), and fragment
//! requests are longer than the original query, so bytes out minus bytes in never exceed
//! those of a normal full-size UDP answer. A fragment request that names a fragment or range
//! that does not exist gets FORMERR (as the QBF paper says).
//!
//! The complete answer is kept in a small cache ([`ANSWER_CACHE_ENTRIES`] answers, keyed by
//! question, RD/CD/DO and catalog version), so the fragment requests following a first
//! fragment cost a lookup, not a new answer.
//!
//! QBF fragment counts come from the algorithms' maximum sizes in the `default` profile, which
//! the resolver uses too.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use pqdns_core::dnssec::Profile;
use pqdns_core::frag::edns::{FragOption, Fragmentation, DEFAULT_CODE, PUSH};
use pqdns_core::frag::{arrf, qbf};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::query::Query;
use pqdns_core::wire::{NameBuf, Rcode, FLAG_CD, FLAG_RD, FLAG_TC, MIN_UDP_PAYLOAD, OPTION_COOKIE};
use pqdns_core::{Class, RrType};
use tracing::debug;

use pqdns_net::Transport;

use crate::answer::{self, Outcome, Prepare};
use crate::catalog::Catalog;
use crate::cookie::{CookieCheck, RESPONSE_COOKIE_LEN};
use crate::request::{Auth, Exchange};

/// Fragmentation settings (the `fragmentation`, `fragmentation_option` and `rrfrag_type`
/// keys of `[server]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FragSettings {
    /// The scheme offered to clients that signal it; [`Fragmentation::Off`] truncates always.
    pub mode: Fragmentation,
    /// EDNS option code of the negotiation option (65001–65534).
    pub option_code: u16,
    /// RR type number of ARRF's RRFRAG.
    pub rrfrag_type: RrType,
}

impl Default for FragSettings {
    /// ARRF, option 65108, RRFRAG type 65388 ([`arrf::DEFAULT_RRFRAG_TYPE`]).
    fn default() -> FragSettings {
        FragSettings {
            mode: Fragmentation::Arrf,
            option_code: DEFAULT_CODE,
            rrfrag_type: arrf::DEFAULT_RRFRAG_TYPE,
        }
    }
}

/// Complete answers a fragmenter keeps, so the fragment requests that follow a first fragment
/// cut from the same answer instead of recomputing it (each ≤ 65535 bytes: ≤ 2 MiB in all).
pub(crate) const ANSWER_CACHE_ENTRIES: usize = 32;

/// A complete answer computed for a question under one catalog version.
#[derive(Debug)]
struct Cached {
    /// The catalog it came from (held weakly: the allocation stays, so the pointer identifies
    /// the version; a reload makes a new catalog and these entries age out).
    catalog: Weak<Catalog>,
    question: Question,
    /// RD and CD of the query (copied into the answer), and DO.
    flags: (u16, bool),
    full: Message,
}

/// The responder's configuration, built once at start, and its answer cache.
#[derive(Debug)]
pub struct Fragmenter {
    settings: FragSettings,
    profile: Profile,
    cache: Mutex<VecDeque<Cached>>,
}

impl Fragmenter {
    /// A fragmenter for `settings`, or `None` when fragmentation is off.
    pub fn new(settings: FragSettings) -> Option<Fragmenter> {
        (settings.mode != Fragmentation::Off).then(|| Fragmenter {
            settings,
            profile: Profile::default_profile(),
            cache: Mutex::new(VecDeque::with_capacity(ANSWER_CACHE_ENTRIES)),
        })
    }

    /// The query's option, if it offers our scheme.
    fn signalled(&self, q: &Query<'_>) -> Option<FragOption> {
        let data = q.edns?.option(self.settings.option_code)?;
        FragOption::decode(data)
            .ok()
            .filter(|o| o.schemes & self.settings.mode.bit() != 0)
    }

    /// The complete answer to `q` (as over a stream transport, without a cookie: it is shared
    /// by every client asking the question), with our option saying which scheme fragments
    /// it; from the cache when the same question was answered under the same catalog.
    fn full_answer(
        &self,
        catalog: &Arc<Catalog>,
        q: &Query<'_>,
        udp_payload: u16,
    ) -> Option<Message> {
        let question = Question {
            qname: q.qname.to_name(),
            qtype: q.qtype,
            qclass: q.qclass,
        };
        let flags = (q.header.flags & (FLAG_RD | FLAG_CD), q.dnssec_ok());
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = cache.iter().find(|c| {
            c.catalog.as_ptr() == Arc::as_ptr(catalog) && c.flags == flags && c.question == question
        }) {
            let mut full = hit.full.clone();
            full.id = q.header.id;
            return Some(full);
        }
        drop(cache);
        let x = Exchange {
            transport: Transport::Tcp,
            client: Ipv4Addr::UNSPECIFIED.into(),
            udp_payload,
            tsig_room: 0,
            signing: crate::online::Mode::Inline,
        };
        let mut buf = Vec::new();
        let o = answer::answer(catalog, q, &Auth::none(), &x, Prepare::Skip, &mut buf, 0);
        // Our own response, in the owned form the fragmenting schemes cut.
        let mut full = Message::parse(&buf[..o.len]).ok()?;
        FragOption::schemes(self.settings.mode.bit())
            .put(full.edns.as_mut()?, self.settings.option_code);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.truncate(ANSWER_CACHE_ENTRIES - 1);
        cache.push_front(Cached {
            catalog: Arc::downgrade(catalog),
            question,
            flags,
            full: full.clone(),
        });
        Some(full)
    }

    /// Fragment sizes are bounded like an ordinary UDP answer to this client.
    fn budget(q: &Query<'_>, udp_payload: u16) -> usize {
        let ours = udp_payload.max(MIN_UDP_PAYLOAD);
        q.edns.map_or(MIN_UDP_PAYLOAD, |e| {
            e.udp_payload().clamp(MIN_UDP_PAYLOAD, ours)
        }) as usize
    }

    /// The RRFRAG type to write in compact form (ARRF only).
    pub(crate) fn compact(&self) -> Option<RrType> {
        (self.settings.mode == Fragmentation::Arrf).then_some(self.settings.rrfrag_type)
    }

    /// True if `q` is a fragment request of our scheme: a QBF `?n?` first label, or ARRF's
    /// `. RRFRAG` question.
    fn is_request(&self, q: &Query<'_>) -> bool {
        let wire = q.qname.as_wire();
        match self.settings.mode {
            Fragmentation::Qbf => (1..=63).contains(&wire[0]) && wire.get(1) == Some(&b'?'),
            Fragmentation::Arrf => wire == [0] && q.qtype == self.settings.rrfrag_type,
            Fragmentation::Off => false,
        }
    }
}

/// Encodes `m` into `out` (RRFRAGs of type `compact` in compact form) and describes it;
/// `None`, leaving `out` alone, if it would exceed `budget` bytes.
fn emit(m: &Message, compact: Option<RrType>, budget: usize, out: &mut Vec<u8>) -> Option<Outcome> {
    let wire = m.to_wire_with(compact);
    (wire.len() <= budget).then(|| write(m, &wire, out))
}

/// Copies `wire`, the encoding of `m`, into `out` and describes it.
fn write(m: &Message, wire: &[u8], out: &mut Vec<u8>) -> Outcome {
    out.clear();
    out.extend_from_slice(wire);
    Outcome {
        len: wire.len(),
        rcode: m.rcode(),
        truncated: m.has_flag(FLAG_TC),
        qtype: m.questions.first().map(|q| q.qtype),
        error: None,
        cache_ttl: None,
        cookie: CookieCheck::Absent,
    }
}

/// FORMERR for a fragment request that names no existing fragment, echoing its question.
fn formerr(request: &Message, out: &mut Vec<u8>) -> Outcome {
    let m = Message {
        id: request.id,
        flags: request.header().response().flags | Rcode::FORMERR.low(),
        questions: request.questions.clone(),
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
        edns: request.edns.clone().map(|mut e| {
            e.options.clear();
            e
        }),
    };
    write(&m, &m.to_wire(), out)
}

/// The COOKIE option data we answer the query's (authenticated as `auth`) with (RFC 7873
/// §5.2, RFC 9018 §4.3); `None` without cookies on either side.
fn answer_cookie(
    catalog: &Catalog,
    auth: &Auth<'_>,
    client: IpAddr,
) -> Option<[u8; RESPONSE_COOKIE_LEN]> {
    let (cookies, data) = (catalog.cookies.as_deref()?, auth.cookie?);
    let mut ours = [0; RESPONSE_COOKIE_LEN];
    cookies.answer(data, auth.check, client, auth.now, &mut ours);
    Some(ours)
}

/// `full` with our COOKIE option `data` (if any) in its OPT.
fn with_cookie(full: &Message, data: Option<[u8; RESPONSE_COOKIE_LEN]>) -> Message {
    let mut m = full.clone();
    if let (Some(data), Some(edns)) = (data, m.edns.as_mut()) {
        edns.set_option(OPTION_COOKIE, data.to_vec());
    }
    m
}

/// Answers the fragment request `q` (authenticated as `auth`, over UDP as `x` says) into
/// `out` (from `out[0]`). `None` if fragmentation is off or `q` is not a fragment request of
/// our scheme from a client that signalled it: the answer engine then handles it as any query.
///
/// QBF fragments carry our COOKIE option as fragment 1 did (every QBF fragment repeats
/// fragment 1's OPT: the fragment sizes depend on it); ARRF fragment responses carry none (the
/// reassembled answer has the first response's OPT).
pub(crate) fn answer_request(
    fragmenter: Option<&Fragmenter>,
    catalog: &Arc<Catalog>,
    q: &Query<'_>,
    auth: &Auth<'_>,
    x: &Exchange,
    out: &mut Vec<u8>,
) -> Option<Outcome> {
    let f = fragmenter.filter(|f| f.is_request(q))?;
    let option = f.signalled(q)?;
    let budget = Fragmenter::budget(q, x.udp_payload);
    // The owned form of the request the schemes read, copied from the view: not parsed again.
    let request = Message::from_view(&q.message);
    let result = match f.settings.mode {
        Fragmentation::Qbf => {
            let (n, qname) = qbf::parse_fragment_qname(&q.qname.to_name())?;
            let original = Query {
                qname: NameBuf::from(&qname),
                ..*q
            };
            let cookie = answer_cookie(catalog, auth, x.client);
            let full = with_cookie(&f.full_answer(catalog, &original, x.udp_payload)?, cookie);
            qbf::fragment(&full, n, budget, &f.profile).map_err(|e| e.to_string())
        }
        Fragmentation::Arrf => {
            let (qname, qtype) = option.question?;
            let original = Query {
                qname: NameBuf::from(&qname),
                qtype,
                qclass: Class::IN,
                ..*q
            };
            let full = f.full_answer(catalog, &original, x.udp_payload)?;
            let t = f.settings.rrfrag_type;
            arrf::answer_request(&full, &request, budget, t).map_err(|e| e.to_string())
        }
        Fragmentation::Off => return None,
    };
    let mut outcome = match result {
        Ok(m) => emit(&m, f.compact(), budget, out).unwrap_or_else(|| formerr(&request, out)),
        Err(e) => {
            debug!(error = %e, "fragment request refused");
            formerr(&request, out)
        }
    };
    outcome.cookie = auth.check;
    Some(outcome)
}

/// After the answer engine truncated the UDP answer in `out` to the query `q` (authenticated
/// as `auth`), replaces it by the first fragment if the client signalled our scheme and the
/// answer can be fragmented; otherwise leaves the TC=1 answer alone. The first fragment
/// carries our COOKIE option when the query had one, so a client learns its server cookie
/// from fragmented answers too.
///
/// If the query also set the [`PUSH`] flag and its server cookie is valid (RFC 7873 §5.2.3:
/// its source address is not spoofed), the first fragment says [`PUSH`] and the other
/// fragments are returned, in wire form, for the caller to send at once: QBF fragments
/// 2..=N, or the ARRF responses the client would have requested
/// ([`arrf::pushed_responses`]). Each fits the same budget as the first. Empty otherwise: the
/// client requests them (two round trips, and no unrequested datagrams to an unproven
/// address).
pub(crate) fn replace_truncated(
    fragmenter: Option<&Fragmenter>,
    catalog: &Arc<Catalog>,
    q: &Query<'_>,
    auth: &Auth<'_>,
    x: &Exchange,
    out: &mut Vec<u8>,
    outcome: &mut Outcome,
) -> Vec<Vec<u8>> {
    // A fragment request is answered by `answer_request` only, never re-fragmented.
    let Some(f) = fragmenter.filter(|f| !f.is_request(q)) else {
        return Vec::new();
    };
    let Some(option) = f.signalled(q).filter(|o| o.question.is_none()) else {
        return Vec::new();
    };
    let budget = Fragmenter::budget(q, x.udp_payload);
    let Some(shared) = f.full_answer(catalog, q, x.udp_payload) else {
        return Vec::new();
    };
    let push = option.push() && auth.check == CookieCheck::Valid;
    let full = with_cookie(&shared, answer_cookie(catalog, auth, x.client));
    let (t, compact) = (f.settings.rrfrag_type, f.compact());
    let fragments = match f.settings.mode {
        Fragmentation::Qbf => qbf::fragment(&full, 1, budget, &f.profile)
            .and_then(|first| {
                let count = if push {
                    qbf::fragment_count(&full, budget, &f.profile)?
                } else {
                    1
                };
                let rest = (2..=count).map(|n| qbf::fragment(&full, n, budget, &f.profile));
                std::iter::once(Ok(first))
                    .chain(rest)
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| e.to_string()),
        // Only the first response carries the cookie: the others are cut from the shared
        // answer, as requested ranges are.
        Fragmentation::Arrf => arrf::first_response(&full, budget, t)
            .and_then(|first| {
                let rest = if push {
                    arrf::pushed_responses(&shared, &first, budget, t)?
                } else {
                    Vec::new()
                };
                Ok(std::iter::once(first).chain(rest).collect())
            })
            .map_err(|e| e.to_string()),
        Fragmentation::Off => return Vec::new(),
    };
    let mut fragments: Vec<Message> = match fragments {
        Ok(f) => f,
        Err(e) => {
            debug!(error = %e, "answer not fragmented; TC stays");
            return Vec::new();
        }
    };
    if push && fragments.len() > 1 {
        if let Some(edns) = fragments[0].edns.as_mut() {
            FragOption::schemes(f.settings.mode.bit() | PUSH).put(edns, f.settings.option_code);
        }
    }
    let Some(o) = emit(&fragments[0], compact, budget, out) else {
        return Vec::new();
    };
    *outcome = Outcome {
        cookie: auth.check,
        ..o
    };
    fragments
        .drain(1..)
        .map(|m| m.to_wire_with(compact))
        .filter(|wire| wire.len() <= budget)
        .collect()
}

#[cfg(test)]
mod tests;

//! The authoritative server as a [`pqdns_net::Service`]: the request pipeline. The shared
//! listeners hand it query bytes with the client's address and transport; it answers
//! synchronously from the zone catalog in force, which is swapped atomically on reload. In
//! one order, each stage in one place (ARCHITECTURE.md draws it):
//!
//! 0. a prepared answer for a query asked before, without parsing it (`request::replay`);
//! 1. one parse and 2. the acceptability check shared with the resolver service
//!    ([`pqdns_core::wire::query`]; a rejection is answered by `finish::reject`);
//! 3. TSIG (RFC 8945), verified before anything acts on the request (`request::verify_tsig`):
//!    a rejected one is answered NOTAUTH with the TSIG error (`finish::tsig_error`); a
//!    verified one has its answer sized with room for the TSIG record and signed last
//!    (`request::Signer`), every message of a zone transfer included;
//!    NOTIFY (RFC 1996) for a secondary zone is answered here ([`crate::secondary`]), and an
//!    UPDATE (RFC 2136) goes to [`crate::update`] from here, with the key that signed it;
//! 4. transport policy: zone transfer requests (AXFR, IXFR) over TCP and DoT from clients in
//!    the allow-list ([`crate::acl`]) or signed with a key it names, from the prefix it may
//!    name ([`Settings::axfr_keys`], [`Settings::axfr_prefixed_keys`]),
//!    are answered with several messages ([`crate::axfr`]); others get REFUSED;
//! 5. message authentication: DNS cookies (`request::authenticate`);
//! 6. dispatch: UDP fragment requests to the ARRF/QBF responder ([`crate::fragment`]), queries
//!    to the answer engine ([`crate::answer`]); answers to signed requests are neither
//!    fragmented nor stored for replay;
//! 7. over UDP, the finish: a truncated answer becomes its first fragment for a client that
//!    signalled fragmentation and holds a valid server cookie (with every fragment at once
//!    when it asks, [`Messages::Fragments`], sent as paced datagrams by the listener). Against
//!    reflection, a client without a valid server cookie has not shown that the query's
//!    source address is its own: its answer is at most [`Settings::amplification_limit`]
//!    times the query's bytes (QUIC's rule toward an unvalidated address, RFC 9000 §8.1), and
//!    a larger one is cut to its question and OPT record with TC set, our server cookie
//!    included (RFC 7873 §5.2.3), so the client can ask again with the cookie or over TCP.
//!    Then response-rate limiting ([`crate::rrl`]). A request with a valid TSIG proved its
//!    key, so neither applies to it (a cut answer would lose its TSIG record).
//!
//! Stream transports allow 65535-byte answers; DoH gets no transfers (the engine answers them
//! REFUSED). Responses, transfer messages and TLS events are counted in the metrics when they
//! are on.

use std::cell::Cell;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};

use pqdns_core::wire::tsig::{KeyRing, Rejection};
use pqdns_core::wire::{truncate_to_question, Opcode, MIN_UDP_PAYLOAD};
use pqdns_core::Name;
use pqdns_net::dnstap::{Dnstap, Role};
use pqdns_net::{
    Event, OwnedRequest, Reply, Request, ResponseInfo, Service, Transfer, TransferEnd, Transport,
};
use tracing::{debug, info, warn};

use crate::acl::{AllowList, IpPrefix};
use crate::answer::{self, Outcome, ParseError, Prepare};
use crate::axfr;
use crate::catalog::Catalog;
use crate::control::Frozen;
use crate::cookie::{self, CookieCheck, CookieMode, Cookies};
use crate::finish;
use crate::fragment::{self, Fragmenter};
use crate::identity::Identity;
use crate::metrics::{Metrics, TsigFailure};
use crate::online::{self, OnlineSigning, SigningTask};
use crate::request::{self, Exchange, Tsig};
use crate::rrl::{self, Rrl, Verdict};
use crate::secondary::Secondaries;
use crate::settings::Settings;
use crate::update::{self, Updater};

/// The authoritative server's state as the listeners see it.
#[derive(Debug)]
pub struct Authoritative {
    catalog: RwLock<Arc<Catalog>>,
    /// Our EDNS UDP payload size, in bytes.
    pub udp_payload: u16,
    /// Clients that may transfer zones over TCP and DoT (empty: nobody).
    pub axfr_allow: AllowList,
    /// TSIG keys whose signed requests may transfer zones, from any address.
    pub axfr_keys: Vec<Name>,
    /// TSIG keys whose signed requests may transfer zones from a prefix only.
    pub axfr_prefixed_keys: Vec<(IpPrefix, Name)>,
    /// TSIG keys requests may be signed with (RFC 8945).
    tsig_keys: Arc<KeyRing>,
    /// Counters, when the metrics endpoint is configured (nothing is counted otherwise).
    pub metrics: Option<Arc<Metrics>>,
    /// UDP fragmentation for clients that signal it; `None` when off.
    pub fragmenter: Option<Fragmenter>,
    /// Memory budget of each catalog's prepared answers, in bytes.
    answer_cache_bytes: usize,
    /// What every catalog discloses about the server.
    identity: Identity,
    /// DNS cookie secrets, shared by every catalog (cookies outlive reloads).
    cookies: Option<Arc<Cookies>>,
    /// Response-rate limiting over UDP; `None` when off.
    rrl: Option<Rrl>,
    /// Largest UDP answer to a client without a valid server cookie, as a multiple of the
    /// query's length; 0: no limit.
    amplification_limit: u32,
    /// dnstap of every answered request (query and response); `None` when off.
    dnstap: Option<Arc<Dnstap>>,
    /// The secondary zones, which NOTIFY (RFC 1996) is answered for; without any, NOTIFY
    /// gets NOTIMP.
    secondaries: Option<Arc<Secondaries>>,
    /// Dynamic updates (RFC 2136) and the lock on catalog changes.
    updater: Updater,
    /// Zones whose updates are held (`pqdns-ctl zone-freeze`, [`crate::control`]).
    pub(crate) frozen: Frozen,
    /// Online signing's cache and signing permits, shared by every catalog ([`crate::online`]).
    online: Arc<OnlineSigning>,
}

impl Authoritative {
    /// State serving `catalog` with the payload size, allow-list, fragmentation and metrics of
    /// `settings`.
    pub fn new(catalog: Catalog, settings: &Settings) -> Authoritative {
        let cookies = match settings.cookies {
            CookieMode::Off => None,
            mode => Cookies::new(mode, settings.cookie_secret, cookie::DEFAULT_ROTATION)
                .map_err(|e| warn!(error = %e, "DNS cookies are off"))
                .ok()
                .map(Arc::new),
        };
        let online = Arc::new(OnlineSigning::new(settings.online_signing));
        Authoritative {
            catalog: RwLock::new(Arc::new(
                catalog
                    .with_answer_cache(settings.answer_cache_bytes)
                    .with_identity(settings.identity.clone())
                    .with_cookies(cookies.clone())
                    .with_online_signing(Arc::clone(&online)),
            )),
            udp_payload: settings.udp_payload,
            axfr_allow: settings.axfr_allow.clone(),
            axfr_keys: settings.axfr_keys.clone(),
            axfr_prefixed_keys: settings.axfr_prefixed_keys.clone(),
            tsig_keys: Arc::clone(&settings.tsig_keys),
            // Counted for the metrics endpoint and the control channel's `stats`.
            metrics: (settings.metrics.is_some() || settings.control_socket.is_some())
                .then(|| Arc::new(Metrics::default())),
            fragmenter: Fragmenter::new(settings.fragmentation),
            answer_cache_bytes: settings.answer_cache_bytes,
            identity: settings.identity.clone(),
            cookies,
            rrl: Rrl::new(settings.rrl),
            amplification_limit: settings.amplification_limit,
            dnstap: None,
            secondaries: None,
            updater: Updater::new(crate::notify::targets(settings)),
            frozen: Frozen::default(),
            online,
        }
    }

    /// Holds the lock every change of the served catalog takes (dynamic updates, transfers in,
    /// reloads), so that one never replaces a catalog another has just made.
    pub(crate) fn lock_catalog_changes(&self) -> std::sync::MutexGuard<'_, ()> {
        self.updater.lock()
    }

    /// Logs every answered request and its response to `dnstap`.
    pub fn with_dnstap(mut self, dnstap: Option<Arc<Dnstap>>) -> Authoritative {
        self.dnstap = dnstap;
        self
    }

    /// The dnstap output, if on.
    pub fn dnstap(&self) -> Option<&Arc<Dnstap>> {
        self.dnstap.as_ref()
    }

    /// Answers NOTIFY for the zones of `secondaries` ([`crate::secondary`]), while it has any
    /// (zones are added and removed at run time, [`crate::provisioning`]).
    pub fn with_secondaries(mut self, secondaries: Arc<Secondaries>) -> Authoritative {
        self.secondaries = Some(secondaries);
        self
    }

    /// The catalog in force now (queries in flight keep the one they started with).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the catalog (its prepared answers start empty).
    pub fn set_catalog(&self, catalog: Catalog) {
        let catalog = catalog
            .with_answer_cache(self.answer_cache_bytes)
            .with_identity(self.identity.clone())
            .with_cookies(self.cookies.clone())
            .with_online_signing(Arc::clone(&self.online));
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(catalog);
    }

    /// The pipeline's view of `request`, with online signing in `signing` mode.
    fn exchange<'a>(&self, request: &Request<'_>, signing: online::Mode<'a>) -> Exchange<'a> {
        Exchange {
            transport: request.transport,
            client: request.client.ip(),
            udp_payload: self.udp_payload.max(MIN_UDP_PAYLOAD),
            tsig_room: 0,
            signing,
        }
    }

    /// Stages 0–6: a prepared answer, else [`Authoritative::handle`].
    fn answer(
        &self,
        catalog: &Arc<Catalog>,
        request: &Request<'_>,
        x: &Exchange<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Handled {
        // 0. A query asked before: its prepared answer, without parsing it; but a truncated
        // UDP answer may become fragments, which takes the parsed query.
        let fragments = self.fragmenter.is_some() && request.transport == Transport::Udp;
        match request::replay(catalog, request.message, x, out, base) {
            Some(o) if !(o.truncated && fragments) => Handled::Answer(o, Vec::new(), false),
            _ => self.handle(catalog, request, x, out, base),
        }
    }

    /// Stage 7 and the metrics: over UDP, the limits for unproven addresses; the counters,
    /// dnstap, and the reply.
    fn finish(
        &self,
        request: &Request<'_>,
        x: &Exchange<'_>,
        (mut outcome, pushed, signed): (Outcome, Vec<Vec<u8>>, bool),
        out: &mut [u8],
        base: usize,
    ) -> Reply<Messages, SigningTask> {
        let transport = request.transport;
        if let Some(error) = outcome.error {
            debug!(peer = %request.client, %error, "malformed query");
        }
        if transport == Transport::Udp && !signed {
            self.limit(
                request.message.len(),
                x.client,
                &mut out[base..],
                &mut outcome,
            );
        }
        // NOTIMP and BADVERS are answers; anything else the pipeline rejected is malformed
        // (DoH sends 400 for it).
        let malformed = outcome
            .error
            .is_some_and(|e| !matches!(e, ParseError::Opcode(_) | ParseError::EdnsVersion(_)));
        if let Some(m) = &self.metrics {
            if outcome.len > 0 && !(malformed && transport == Transport::Doh) {
                m.response(
                    transport,
                    outcome.qtype,
                    outcome.rcode,
                    outcome.truncated,
                    outcome.len,
                );
            }
        }
        if let (Some(tap), true) = (&self.dnstap, outcome.len > 0) {
            let response = &out[base..base + outcome.len];
            tap.log_exchange(
                Role::Auth,
                transport,
                request.client,
                request.message,
                response,
            );
        }
        if !pushed.is_empty() && outcome.len > 0 {
            let first = out[base..base + outcome.len].to_vec();
            return Reply::Transfer(Messages::Fragments(PushedFragments {
                datagrams: std::iter::once(first).chain(pushed).collect(),
                sent: 0,
                metrics: self.metrics.clone(),
            }));
        }
        Reply::Ready(
            ResponseInfo::new(outcome.len)
                .with_cache_ttl(outcome.cache_ttl)
                .with_malformed(malformed),
        )
    }
    /// Stages 1–6 for a request without a prepared answer: one parse and the acceptability
    /// check, transport policy (zone transfers), authentication, dispatch and, over UDP, the
    /// fragmentation of a truncated answer (with the other fragments when they are pushed,
    /// see [`fragment::replace_truncated`]).
    fn handle(
        &self,
        catalog: &Arc<Catalog>,
        request: &Request<'_>,
        x: &Exchange,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Handled {
        let frag = self.fragmenter.as_ref();
        // 1–2. One parse; the acceptability check shared with the resolver service.
        let opcodes = if self.secondaries.as_ref().is_some_and(|s| !s.is_empty()) {
            request::SECONDARY_OPCODES
        } else {
            request::OPCODES
        };
        let compact = frag.and_then(Fragmenter::compact);
        let q = match request::parse_with(request.message, compact, opcodes) {
            Ok(q) => q,
            Err(m) => return Handled::Answer(finish::reject(&m, x, out, base), Vec::new(), false),
        };
        // 3. TSIG, before anything acts on the request (RFC 8945 §5.2).
        let now = pqdns_core::time::now();
        let signer = match request::verify_tsig(&self.tsig_keys, &q, now) {
            Tsig::Unsigned => None,
            Tsig::Verified(signer) => Some(signer),
            Tsig::Rejected(rejection, signed) => {
                self.count_tsig_failure(&rejection);
                let o = finish::tsig_error(&q, &rejection, &signed, x, out, base, now);
                return Handled::Answer(o, Vec::new(), false);
            }
            Tsig::Malformed(m) => {
                self.count_tsig_failure(&Rejection::Malformed);
                return Handled::Answer(finish::reject(&m, x, out, base), Vec::new(), false);
            }
        };
        let x = &Exchange {
            tsig_room: signer.map_or(0, |s| s.room()),
            ..*x
        };
        // NOTIFY for a secondary zone (RFC 1996), answered (and signed) here.
        if let (Some(secondaries), Opcode::NOTIFY) = (&self.secondaries, q.header.opcode()) {
            let key = signer.map(|s| s.key.name());
            let mut o = secondaries.notify(&q, x.client, key, out, base, x.tsig_room);
            if let Some(s) = signer {
                o.len = s.sign(out, base, now);
            }
            return Handled::Answer(o, Vec::new(), signer.is_some());
        }
        // Dynamic updates (RFC 2136): authorised by the TSIG key, applied in order.
        if q.header.opcode() == Opcode::UPDATE {
            let o = update::respond(&self.updater, self, &q, signer, x, out, base);
            return Handled::Answer(o, Vec::new(), signer.is_some());
        }
        // 4. Transport policy: zone transfers over TCP and DoT to the allow-list, by address or
        // by key; the engine answers every other transfer request REFUSED.
        let key_allowed = signer.is_some_and(|s| {
            let key = s.key.name();
            self.axfr_keys.contains(key)
                || (self.axfr_prefixed_keys.iter())
                    .any(|(prefix, k)| k == key && prefix.contains(x.client))
        });
        if matches!(request.transport, Transport::Tcp | Transport::Dot)
            && (self.axfr_allow.allows(x.client) || key_allowed)
        {
            let tsig = signer.map(|s| (s.key.clone(), s.mac));
            if let Some(xfr) = axfr::Transfer::start(Arc::clone(catalog), &q, tsig) {
                return Handled::Transfer(Messages::Zone(ZoneTransfer {
                    xfr,
                    client: request.client,
                    transport: request.transport,
                    metrics: self.metrics.clone(),
                }));
            }
        }
        // 5. Message authentication.
        let auth = match request::authenticate(catalog, &q, x) {
            Ok(auth) => auth,
            Err(m) => return Handled::Answer(finish::reject(&m, x, out, base), Vec::new(), false),
        };
        // 6. Dispatch: fragment requests (UDP), then the QUERY handler. Answers to signed
        // requests are not fragmented and not stored for replay (each is signed anew).
        let udp = x.transport == Transport::Udp;
        if udp && signer.is_none() {
            if let Some(o) = fragment::answer_request(frag, catalog, &q, &auth, x, out) {
                return Handled::Answer(o, Vec::new(), false);
            }
        }
        let prepare = if signer.is_some() {
            Prepare::Skip
        } else {
            Prepare::Store
        };
        let mut o = answer::answer(catalog, &q, &auth, x, prepare, out, base);
        // 7. Finish: a truncated UDP answer becomes its first fragment; never for an address
        // no cookie has proved while the amplification limit is on (some 1,200 bytes, it
        // would be cut to TC by the limit anyway). The TSIG record comes last.
        let mut pushed = Vec::new();
        match signer {
            Some(s) if o.len > 0 => o.len = s.sign(out, base, now),
            Some(_) => {}
            None if udp
                && o.truncated
                && (self.amplification_limit == 0 || o.cookie == CookieCheck::Valid) =>
            {
                pushed = fragment::replace_truncated(frag, catalog, &q, &auth, x, out, &mut o);
            }
            None => {}
        }
        Handled::Answer(o, pushed, signer.is_some())
    }

    fn count_tsig_failure(&self, rejection: &Rejection<'_>) {
        let Some(m) = &self.metrics else { return };
        m.tsig_failure(match rejection {
            Rejection::BadKey => TsigFailure::BadKey,
            Rejection::BadSig => TsigFailure::BadSig,
            Rejection::BadTime(_) => TsigFailure::BadTime,
            _ => TsigFailure::FormErr,
        });
    }

    /// The UDP limits, for clients without a valid server cookie: the amplification limit
    /// (a response over `amplification_limit` × `query_len` bytes is cut to its question and
    /// OPT record with TC set), then response-rate limiting (within the prefix's rate the
    /// response goes; beyond it, it is dropped or cut the same way).
    fn limit(&self, query_len: usize, client: IpAddr, out: &mut [u8], o: &mut Outcome) {
        if o.len == 0 || o.cookie == CookieCheck::Valid {
            return;
        }
        if rrl::exceeds_amplification_limit(self.amplification_limit, query_len, o.len) {
            self.truncate(out, o);
            if let Some(m) = &self.metrics {
                m.amplification_limited();
            }
        }
        let Some(rrl) = &self.rrl else { return };
        match rrl.verdict(client, o.rcode) {
            Verdict::Send => return,
            Verdict::Slip => self.truncate(out, o),
            Verdict::Drop => o.len = 0,
        }
        if let Some(m) = &self.metrics {
            m.rate_limited(o.len > 0);
        }
    }

    /// Cuts the response in `out[..o.len]` (an ARRF fragment too) to its question and OPT
    /// record with TC set ([`truncate_to_question`]); one that does not parse (never ours) is
    /// not sent.
    fn truncate(&self, out: &mut [u8], o: &mut Outcome) {
        let compact = self.fragmenter.as_ref().and_then(Fragmenter::compact);
        o.len = truncate_to_question(&mut out[..o.len], compact).unwrap_or(0);
        o.truncated = true;
    }
}

impl update::Served for Authoritative {
    fn current(&self) -> Arc<Catalog> {
        self.catalog()
    }

    fn replace(&self, catalog: Catalog) {
        self.set_catalog(catalog);
    }

    fn frozen(&self, zone: &Name) -> bool {
        self.frozen.contains(zone)
    }
}

/// What the stages after the prepared answers made of a request.
enum Handled {
    /// One response in the output buffer (its first fragment, over UDP, with the others), and
    /// whether it answers a request with a valid TSIG (signed, so never cut).
    Answer(Outcome, Vec<Vec<u8>>, bool),
    /// A zone transfer.
    Transfer(Messages),
}

impl Service for Authoritative {
    type Snapshot = Arc<Catalog>;
    type Transfer = Messages;
    type Deferred = SigningTask;

    fn snapshot(&self) -> Arc<Catalog> {
        self.catalog()
    }

    /// The request pipeline (ARCHITECTURE.md, "The server's request pipeline"): a prepared
    /// answer, else [`Authoritative::handle`]; then, over UDP, the limits for unproven
    /// addresses, and the metrics. An answer that needs online signatures not cached yet is
    /// deferred to a signing task while one is free, else answered SERVFAIL
    /// ([`crate::online`]).
    fn respond(
        &self,
        catalog: &Arc<Catalog>,
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<Messages, SigningTask> {
        let pending = Cell::new(false);
        let x = self.exchange(request, online::Mode::Defer(&pending));
        let answered = match self.answer(catalog, request, &x, out, base) {
            Handled::Answer(o, pushed, signed) => (o, pushed, signed),
            Handled::Transfer(transfer) => return Reply::Transfer(transfer),
        };
        if pending.get() {
            if let Some(permit) = catalog.online.try_permit() {
                return Reply::Defer(SigningTask::new(Arc::clone(catalog), permit));
            }
        }
        self.finish(request, &x, answered, out, base)
    }

    /// A deferred answer of an online zone: built again on a blocking thread, signing what
    /// the cache lacks, while the task holds its signing permit. (The query is parsed again
    /// there: the parsed view borrows the listener's buffer.)
    fn respond_later(
        self: Arc<Self>,
        request: OwnedRequest,
        task: SigningTask,
        mut out: Vec<u8>,
        base: usize,
    ) -> impl Future<Output = (Vec<u8>, ResponseInfo)> + Send + 'static {
        let signing = tokio::task::spawn_blocking(move || {
            let request = request.as_request();
            let x = self.exchange(&request, online::Mode::Inline);
            let catalog = task.catalog();
            let info = match self.answer(catalog, &request, &x, &mut out, base) {
                Handled::Answer(o, pushed, signed) => {
                    match self.finish(&request, &x, (o, pushed, signed), &mut out, base) {
                        Reply::Ready(info) => info,
                        // Pushed fragments: the first one is in `out`.
                        _ => ResponseInfo::new(out.len() - base),
                    }
                }
                // A transfer is never deferred (it signs nothing online).
                Handled::Transfer(_) => ResponseInfo::default(),
            };
            drop(task);
            (out, info)
        });
        async move {
            signing
                .await
                .unwrap_or_else(|_| (Vec::new(), ResponseInfo::default()))
        }
    }
    fn event(&self, event: &Event) {
        let Some(m) = &self.metrics else { return };
        match *event {
            Event::Handshake {
                transport, group, ..
            } => m.handshake(transport, group),
            Event::HandshakeFailed {
                transport, reason, ..
            } => m.handshake_failure(transport, reason),
            Event::ConnectionRefused { transport, .. } => m.connection_refused(transport),
            Event::ResetFlood { .. } => m.reset_flood(),
            _ => {}
        }
    }
}

/// A response of several messages.
#[derive(Debug)]
pub enum Messages {
    /// A zone transfer, on TCP and DoT.
    Zone(ZoneTransfer),
    /// All fragments of a large answer at once, over UDP, to a client with a valid server
    /// cookie ([`fragment::replace_truncated`]).
    Fragments(PushedFragments),
}

impl Transfer for Messages {
    fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize> {
        match self {
            Messages::Zone(z) => z.next_message(out, base),
            Messages::Fragments(f) => f.next_message(out, base),
        }
    }

    fn end(&mut self, end: TransferEnd) {
        match self {
            Messages::Zone(z) => z.end(end),
            Messages::Fragments(f) => f.end(end),
        }
    }
}

/// The fragments of one answer pushed over UDP: the first (already counted as the response)
/// and the rest, each counted as one more message; wire form, each within the client's UDP
/// budget.
#[derive(Debug)]
pub struct PushedFragments {
    datagrams: Vec<Vec<u8>>,
    sent: usize,
    metrics: Option<Arc<Metrics>>,
}

impl Transfer for PushedFragments {
    fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize> {
        let datagram = self.datagrams.get(self.sent)?;
        out.truncate(base);
        out.extend_from_slice(datagram);
        if let (Some(m), true) = (&self.metrics, self.sent > 0) {
            m.message(Transport::Udp, datagram.len());
        }
        self.sent += 1;
        Some(datagram.len())
    }

    fn end(&mut self, end: TransferEnd) {
        if end != TransferEnd::Complete {
            debug!(
                sent = self.sent,
                of = self.datagrams.len(),
                "pushed fragments cut short"
            );
        }
    }
}

/// A zone transfer being written to one client: the messages of [`axfr::Transfer`], counted
/// in the metrics and logged when it ends.
#[derive(Debug)]
pub struct ZoneTransfer {
    xfr: axfr::Transfer,
    client: SocketAddr,
    transport: Transport,
    metrics: Option<Arc<Metrics>>,
}

impl Transfer for ZoneTransfer {
    fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize> {
        let len = self.xfr.next_message(out, base)?;
        if let Some(m) = &self.metrics {
            if self.xfr.messages() == 1 {
                m.response(
                    self.transport,
                    Some(self.xfr.qtype()),
                    self.xfr.rcode(),
                    false,
                    len,
                );
            } else {
                m.message(self.transport, len);
            }
        }
        Some(len)
    }

    fn end(&mut self, end: TransferEnd) {
        let (peer, zone) = (self.client, self.xfr.zone());
        match end {
            TransferEnd::Complete => info!(
                %peer, %zone, qtype = %self.xfr.qtype(), rcode = %self.xfr.rcode(),
                incremental = self.xfr.is_incremental(), messages = self.xfr.messages(),
                records = self.xfr.records(), "zone transfer"
            ),
            TransferEnd::Shutdown => warn!(%peer, %zone, "zone transfer cut short by shutdown"),
            TransferEnd::Unsupported => {
                warn!(%peer, %zone, "zone transfer refused: the transport carries one message")
            }
            _ => warn!(%peer, %zone, "zone transfer aborted: write timed out or failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pqdns_core::dnssec::sign::Denial;
    use pqdns_core::dnssec::Algorithm;
    use std::time::Instant;

    use pqdns_core::frag::arrf::{self, Key, Limits, Progress, Reassembler};
    use pqdns_core::frag::edns::{FragOption, ARRF, DEFAULT_CODE, PUSH};
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::{Edns, MessageView, FLAG_TC, OPTION_COOKIE};
    use pqdns_core::{Class, RrType};

    use super::*;

    const ZONE: &str = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n";
    const CLIENT_COOKIE: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    fn server(algorithm: Algorithm, amplification_limit: u32) -> Authoritative {
        let catalog = crate::catalog::signed_for_tests(
            &"example.".parse().unwrap(),
            ZONE,
            &[algorithm],
            Denial::Nsec,
        );
        let mut settings = Settings::new(PathBuf::from("/nonexistent"));
        settings.amplification_limit = amplification_limit;
        Authoritative::new(catalog, &settings)
    }

    fn query(qname: &str, qtype: RrType, cookie: Option<&[u8]>, fragments: bool) -> Vec<u8> {
        let mut edns = Edns::dnssec_ok(4096);
        if let Some(c) = cookie {
            edns.set_option(OPTION_COOKIE, c.to_vec());
        }
        if fragments {
            FragOption::schemes(ARRF).put(&mut edns, DEFAULT_CODE);
        }
        let q = Question {
            qname: qname.parse().unwrap(),
            qtype,
            qclass: Class::IN,
        };
        Message::query(9, q, false, Some(edns)).to_wire()
    }

    /// The UDP response to `packet` from 192.0.2.7.
    fn udp(server: &Authoritative, packet: &[u8]) -> Vec<u8> {
        let client: SocketAddr = "192.0.2.7:5300".parse().unwrap();
        let mut out = Vec::new();
        let catalog = server.snapshot();
        match server.respond(
            &catalog,
            &Request::new(packet, client, Transport::Udp),
            &mut out,
            0,
        ) {
            Reply::Ready(info) => out.truncate(info.len),
            _ => panic!("a single UDP answer expected"),
        }
        out
    }

    fn server_cookie(response: &[u8]) -> Vec<u8> {
        let view = MessageView::parse_with(response, Some(arrf::DEFAULT_RRFRAG_TYPE)).unwrap();
        view.opt().unwrap().option(OPTION_COOKIE).unwrap().to_vec()
    }

    #[test]
    fn cookieless_answers_are_at_most_three_times_the_query() {
        let s = server(Algorithm::EcdsaP256Sha256, 3);
        for (name, qtype) in [
            ("example.", RrType::DNSKEY),
            ("nothere.example.", RrType::A),
        ] {
            for cookie in [None, Some(&CLIENT_COOKIE[..])] {
                let q = query(name, qtype, cookie, false);
                let r = udp(&s, &q);
                let view = MessageView::parse(&r).unwrap();
                assert!(
                    r.len() <= 3 * q.len(),
                    "{name} {qtype}: {} > 3 × {}",
                    r.len(),
                    q.len()
                );
                assert!(view.header().has(FLAG_TC), "{name} {qtype}");
                assert_eq!(view.counts()[1..3], [0, 0]);
                // The truncated answer hands out the server cookie to come back with.
                if cookie.is_some() {
                    assert_eq!(server_cookie(&r).len(), 24);
                }
            }
        }
        // With the server cookie it got, the same client gets the whole answer over UDP.
        let first = udp(
            &s,
            &query("example.", RrType::DNSKEY, Some(&CLIENT_COOKIE), false),
        );
        let cookie = server_cookie(&first);
        let q = query("example.", RrType::DNSKEY, Some(&cookie), false);
        let r = udp(&s, &q);
        let view = MessageView::parse(&r).unwrap();
        assert!(!view.header().has(FLAG_TC));
        assert!(r.len() > 3 * q.len(), "an ECDSA DNSKEY answer is large");
        assert_eq!(view.records(pqdns_core::wire::Section::Answer).count(), 2);
        // A forged server cookie proves nothing.
        let mut forged = cookie.clone();
        forged[12] ^= 1;
        let r = udp(&s, &query("example.", RrType::DNSKEY, Some(&forged), false));
        assert!(MessageView::parse(&r).unwrap().header().has(FLAG_TC));
    }

    /// Issue 26, must-show 1: whatever path a request takes through the pipeline, its bytes
    /// are parsed once (and a replayed answer not at all).
    #[test]
    fn every_request_is_parsed_once() {
        use pqdns_core::wire::parse_log::take_query_parses;
        let mut s = server(Algorithm::MlDsa44, 3);
        s.axfr_allow = "192.0.2.7"
            .parse::<crate::acl::IpPrefix>()
            .map(|p| AllowList::new(vec![p]))
            .unwrap();
        let parses = |s: &Authoritative, packet: &[u8], transport| {
            take_query_parses();
            let client: SocketAddr = "192.0.2.7:5300".parse().unwrap();
            let mut out = Vec::new();
            let request = Request::new(packet, client, transport);
            let reply = s.respond(&s.snapshot(), &request, &mut out, 0);
            (take_query_parses(), reply)
        };
        // An ordinary query, then the same bytes again: one parse, then a replay (over TCP:
        // over UDP this ML-DSA answer is truncated, and fragmenting takes the parsed query).
        let q = query("ns.example.", RrType::A, None, false);
        assert_eq!(parses(&s, &q, Transport::Tcp).0, 1);
        assert_eq!(parses(&s, &q, Transport::Tcp).0, 0, "replayed");
        // Malformed, and an OPCODE we do not handle.
        assert_eq!(parses(&s, &q[..q.len() - 1], Transport::Udp).0, 1);
        let mut notify = q.clone();
        notify[2] = 4 << 3;
        assert_eq!(parses(&s, &notify, Transport::Tcp).0, 1);
        // A zone transfer to an allowed client.
        let axfr = query("example.", RrType::AXFR, None, false);
        let (n, reply) = parses(&s, &axfr, Transport::Tcp);
        assert!(
            matches!(reply, Reply::Transfer(Messages::Zone(_))),
            "{reply:?}"
        );
        assert_eq!(n, 1);
        // A truncated ML-DSA answer that becomes pushed fragments for a proven client, twice
        // (the second time its truncated answer is prepared, and still fragmented).
        let first = udp(
            &s,
            &query("example.", RrType::DNSKEY, Some(&CLIENT_COOKIE), true),
        );
        let asking = |cookie: &[u8]| {
            let mut edns = Edns::dnssec_ok(1232);
            edns.set_option(OPTION_COOKIE, cookie.to_vec());
            FragOption::schemes(ARRF | PUSH).put(&mut edns, DEFAULT_CODE);
            let q = Question {
                qname: "example.".parse().unwrap(),
                qtype: RrType::DNSKEY,
                qclass: Class::IN,
            };
            Message::query(9, q, false, Some(edns)).to_wire()
        };
        let pushing = asking(&server_cookie(&first));
        for _ in 0..2 {
            let (n, reply) = parses(&s, &pushing, Transport::Udp);
            assert!(matches!(reply, Reply::Transfer(Messages::Fragments(_))));
            assert_eq!(n, 1);
        }
        // An ARRF fragment request.
        let fragment = query(
            "example.",
            RrType::DNSKEY,
            Some(&server_cookie(&first)),
            true,
        );
        let r = udp(&s, &fragment);
        let t = arrf::DEFAULT_RRFRAG_TYPE;
        let unsent = arrf::unsent(&Message::parse_with(&r, Some(t)).unwrap(), t).unwrap();
        let group = &arrf::plan_requests(&unsent, 1232)[0];
        let mut edns = Edns::dnssec_ok(4096);
        edns.set_option(OPTION_COOKIE, server_cookie(&first));
        let original = Message::parse(&fragment).unwrap().questions[0].clone();
        let request = arrf::fragment_request(9, &original, group, edns, t, DEFAULT_CODE)
            .to_wire_with(Some(t));
        let (n, reply) = parses(&s, &request, Transport::Udp);
        assert!(matches!(reply, Reply::Ready(_)));
        assert_eq!(n, 1);
    }

    #[test]
    fn the_limit_can_be_turned_off() {
        let s = server(Algorithm::EcdsaP256Sha256, 0);
        let q = query("example.", RrType::DNSKEY, None, false);
        let r = udp(&s, &q);
        assert!(!MessageView::parse(&r).unwrap().header().has(FLAG_TC));
        assert!(r.len() > 3 * q.len());
    }

    #[test]
    fn fragments_go_only_to_clients_with_a_valid_cookie() {
        let s = server(Algorithm::MlDsa44, 3);
        let q = query("example.", RrType::DNSKEY, Some(&CLIENT_COOKIE), true);
        let r = udp(&s, &q);
        let view = MessageView::parse(&r).unwrap();
        assert!(r.len() <= 3 * q.len(), "{} > 3 × {}", r.len(), q.len());
        assert!(
            view.header().has(FLAG_TC),
            "a TC stub, not a first fragment"
        );
        // Back with the cookie: the first ARRF fragment, some 1,200 bytes.
        let q = query("example.", RrType::DNSKEY, Some(&server_cookie(&r)), true);
        let r = udp(&s, &q);
        let t = Some(arrf::DEFAULT_RRFRAG_TYPE);
        let view = MessageView::parse_with(&r, t).unwrap();
        assert!(view.counts()[1] > 0 && r.len() > 1000, "{} bytes", r.len());
        // Fragment requests for the rest: from an unproven address they are cut too.
        let first = Message::parse_with(&r, t).unwrap();
        let mut reassembler = Reassembler::new(Limits::default(), arrf::DEFAULT_RRFRAG_TYPE);
        let original = Message::parse(&q).unwrap().questions[0].clone();
        let key = Key {
            server: "192.0.2.53:53".parse().unwrap(),
            id: 9,
            question: original.clone(),
        };
        let progress = reassembler.start(key, first, Instant::now()).unwrap();
        let Progress::Missing(wanted) = progress else {
            panic!("the DNSKEY RRset fits no single datagram")
        };
        let group = &arrf::plan_requests(&wanted, 1232)[0];
        let request = |cookie: &[u8]| {
            let mut edns = Edns::dnssec_ok(4096);
            edns.set_option(OPTION_COOKIE, cookie.to_vec());
            arrf::fragment_request(
                9,
                &original,
                group,
                edns,
                arrf::DEFAULT_RRFRAG_TYPE,
                DEFAULT_CODE,
            )
            .to_wire_with(t)
        };
        let cookie = server_cookie(&r);
        for (cookie, proven) in [(&CLIENT_COOKIE[..], false), (&cookie[..], true)] {
            let req = request(cookie);
            let resp = udp(&s, &req);
            let view = MessageView::parse_with(&resp, t).unwrap();
            assert_eq!(view.header().has(FLAG_TC), !proven);
            assert_eq!(resp.len() <= 3 * req.len(), !proven, "{} bytes", resp.len());
        }
    }
}

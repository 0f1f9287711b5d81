//! The authoritative server as a [`pqdns_net::Service`]: the shared listeners hand it query
//! bytes with the client's address and transport, and it answers synchronously from the zone
//! catalog in force ([`crate::answer`]), which is swapped atomically on reload. Per transport:
//!
//! - **UDP**: the answer engine with the client's EDNS payload limit; fragment requests and
//!   truncated answers go through the ARRF/QBF responder ([`crate::fragment`]) for clients that
//!   signalled it; a client with a valid server cookie that asks for it gets every fragment at
//!   once ([`Messages::Fragments`], sent as paced datagrams by the listener).
//! - **TCP and DoT**: zone transfer requests (AXFR, IXFR) from clients in the allow-list
//!   ([`crate::acl`]) are answered with several messages ([`crate::axfr`]); everything else is
//!   answered by the engine with the stream limit (65535 bytes).
//! - **DoH**: as TCP, without transfers (the engine answers them REFUSED).
//!
//! Responses, transfer messages and TLS events are counted in the metrics when they are on.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};

use pqdns_net::{Event, Reply, Request, ResponseInfo, Service, Transfer, TransferEnd, Transport};
use tracing::{debug, info, warn};

use crate::acl::AllowList;
use crate::answer::{self, respond, Outcome};
use crate::axfr;
use crate::catalog::Catalog;
use crate::cookie::{self, CookieCheck, CookieMode, Cookies};
use crate::fragment::{self, Fragmenter};
use crate::identity::Identity;
use crate::metrics::{Metrics, Proto};
use crate::query::ParseError;
use crate::rrl::{self, Rrl, Verdict};
use crate::settings::Settings;

/// The authoritative server's state as the listeners see it.
#[derive(Debug)]
pub struct Authoritative {
    catalog: RwLock<Arc<Catalog>>,
    /// Our EDNS UDP payload size, in bytes.
    pub udp_payload: u16,
    /// Clients that may transfer zones over TCP and DoT (empty: nobody).
    pub axfr_allow: AllowList,
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
        Authoritative {
            catalog: RwLock::new(Arc::new(
                catalog
                    .with_answer_cache(settings.answer_cache_bytes)
                    .with_identity(settings.identity.clone())
                    .with_cookies(cookies.clone()),
            )),
            udp_payload: settings.udp_payload,
            axfr_allow: settings.axfr_allow.clone(),
            metrics: settings.metrics.map(|_| Arc::new(Metrics::default())),
            fragmenter: Fragmenter::new(settings.fragmentation),
            answer_cache_bytes: settings.answer_cache_bytes,
            identity: settings.identity.clone(),
            cookies,
            rrl: Rrl::new(settings.rrl),
        }
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
            .with_cookies(self.cookies.clone());
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(catalog);
    }

    /// The UDP answer: fragment requests and truncated answers through the fragmenter; with
    /// the other fragments when they are pushed (see [`fragment::replace_truncated`]).
    fn answer_udp(
        &self,
        catalog: &Arc<Catalog>,
        request: &Request<'_>,
        out: &mut Vec<u8>,
    ) -> (Outcome, Vec<Vec<u8>>) {
        let (frag, payload) = (self.fragmenter.as_ref(), self.udp_payload);
        let packet = request.message;
        let client = request.client.ip();
        // Fragment requests are answers too: rate-limited like the rest.
        if let Some(mut o) = fragment::answer_request(frag, catalog, packet, client, payload, out) {
            self.limit(client, out, &mut o);
            return (o, Vec::new());
        }
        let mut o = respond(
            catalog,
            packet,
            answer::Transport::Udp,
            client,
            payload,
            out,
            0,
        );
        let mut pushed = Vec::new();
        if o.truncated {
            pushed =
                fragment::replace_truncated(frag, catalog, packet, client, payload, out, &mut o);
        }
        if let Some(error) = o.error {
            debug!(peer = %request.client, %error, "malformed UDP query");
        }
        self.limit(client, out, &mut o);
        (o, pushed)
    }

    /// Response-rate limiting: clients with a valid server cookie pass; others within their
    /// prefix's rate; beyond it the response is dropped or cut to a truncated stub.
    fn limit(&self, client: IpAddr, out: &mut [u8], o: &mut Outcome) {
        let Some(rrl) = &self.rrl else { return };
        if o.len == 0 || o.cookie == CookieCheck::Valid {
            return;
        }
        match rrl.verdict(client, o.rcode) {
            Verdict::Send => return,
            Verdict::Slip => {
                o.len = rrl::truncate_to_stub(&mut out[..o.len]);
                o.truncated = true;
            }
            Verdict::Drop => o.len = 0,
        }
        if let Some(m) = &self.metrics {
            m.rate_limited(o.len > 0);
        }
    }
}

impl Service for Authoritative {
    type Snapshot = Arc<Catalog>;
    type Transfer = Messages;

    fn snapshot(&self) -> Arc<Catalog> {
        self.catalog()
    }

    fn respond(
        &self,
        catalog: &Arc<Catalog>,
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<Messages> {
        let transport = request.transport;
        let mut pushed = Vec::new();
        let outcome = match transport {
            Transport::Udp => {
                let (outcome, rest) = self.answer_udp(catalog, request, out);
                pushed = rest;
                outcome
            }
            _ => {
                if matches!(transport, Transport::Tcp | Transport::Dot)
                    && self.axfr_allow.allows(request.client.ip())
                {
                    if let Some(xfr) = axfr::Transfer::start(Arc::clone(catalog), request.message) {
                        return Reply::Transfer(Messages::Zone(ZoneTransfer {
                            xfr,
                            client: request.client,
                            proto: Proto::of(transport),
                            metrics: self.metrics.clone(),
                        }));
                    }
                }
                let payload = self.udp_payload;
                respond(
                    catalog,
                    request.message,
                    answer::Transport::Stream,
                    request.client.ip(),
                    payload,
                    out,
                    base,
                )
            }
        };
        // NOTIMP for other opcodes is an answer; anything else the engine could not parse is
        // malformed (DoH sends 400 for it).
        let malformed = outcome
            .error
            .is_some_and(|e| !matches!(e, ParseError::Opcode(_)));
        if let (Some(m), Some(proto)) = (&self.metrics, Proto::of(transport)) {
            if outcome.len > 0 && !(malformed && transport == Transport::Doh) {
                m.response(
                    proto,
                    outcome.qtype,
                    outcome.rcode,
                    outcome.truncated,
                    outcome.len,
                );
            }
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

    fn event(&self, event: &Event) {
        let Some(m) = &self.metrics else { return };
        match *event {
            Event::Handshake {
                transport, group, ..
            } => {
                if let Some(p) = Proto::of(transport) {
                    m.handshake(p, group);
                }
            }
            Event::HandshakeFailed {
                transport, reason, ..
            } => {
                if let Some(p) = Proto::of(transport) {
                    m.handshake_failure(p, reason);
                }
            }
            Event::ConnectionRefused { transport, .. } => {
                if let Some(p) = Proto::of(transport) {
                    m.connection_refused(p);
                }
            }
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
            m.message(Proto::Udp, datagram.len());
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
    proto: Option<Proto>,
    metrics: Option<Arc<Metrics>>,
}

impl Transfer for ZoneTransfer {
    fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize> {
        let len = self.xfr.next_message(out, base)?;
        if let (Some(m), Some(proto)) = (&self.metrics, self.proto) {
            if self.xfr.messages() == 1 {
                m.response(proto, Some(self.xfr.qtype()), self.xfr.rcode(), false, len);
            } else {
                m.message(proto, len);
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
            _ => warn!(%peer, %zone, "zone transfer aborted: write timed out or failed"),
        }
    }
}

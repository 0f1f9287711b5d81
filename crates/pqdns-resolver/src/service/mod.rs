//! The resolver service: a validating recursive resolver that stubs, browsers and operating
//! systems query over UDP, TCP, DoT, DoH and DoQ, through the listeners of `pqdns-net` (the
//! same code as pqdns-server's).
//!
//! [`RecursiveService`] implements [`pqdns_net::Service`]:
//! - access control ([`crate::policy::access`]): a query from an address outside the
//!   allow-list gets REFUSED with EDE 18 (Prohibited) (RFC 5358: no open resolver), or with
//!   `[[access-control]]` tables what its longest prefix says (dropped, REFUSED, recursion, or
//!   RD=0 from the cache only);
//! - a name in a local zone ([`crate::policy::local_zone`]) is answered from it, without AD
//!   and without any query upstream (nor is the answer cached);
//! - a cache hit is answered at once, on the listener's thread, from the prepared response
//!   ([`cache`]); so is a miss that the resolver's validated NSEC/NSEC3 records already
//!   answer (RFC 8198, [`Resolver::synthesise`]; such answers are not cached here);
//! - a miss is deferred: the [`Resolver`] resolves and validates it (iteratively or through a
//!   forwarder), `response` writes the RFC 4035 §3.2 response, and the cache keeps it.
//!
//! QTYPE ANY gets a minimal answer (RFC 8482 §4.1): the first RRset the authority gives for
//! the name, validated as any other (AD when Secure), the others dropped. QTYPE RRSIG gets
//! the RRSIG records the authority gives, unvalidated (no AD: nothing signs a signature,
//! RFC 4035 §2.2; unbound does the same). The other meta-QTYPEs (128-254: AXFR, IXFR,
//! MAILA, MAILB) and classes other than IN get NOTIMP.
//!
//! Each client prefix (/24, /56, as response-rate limiting counts clients: one host's many
//! addresses are one client) has at most [`ServiceConfig::max_per_client`] resolutions in
//! flight, and the service at most [`ServiceConfig::max_in_flight`]; more get SERVFAIL with
//! EDE 0 at once (not cached). The resolver's [`crate::WorkLimits`] bound the work of each one
//! (at most `max_exchanges` responses of at most 64 KiB held, 4 MiB), so the memory of all
//! resolutions in flight is bounded too; the listeners bound connections and deferred
//! queries.
//!
//! Against reflection (the service's UDP answers can be kilobytes of post-quantum DNSSEC, and
//! a wide [`ServiceConfig::allow`] lets spoofed queries in), the service speaks DNS cookies
//! and limits UDP answers as pqdns-server does, with the same shared code
//! ([`pqdns_net::cookie`], [`pqdns_net::rrl`]):
//! - a COOKIE option of a length RFC 7873 §5.2.2 does not allow gets FORMERR; every response
//!   to a query with a client cookie carries our server cookie (RFC 7873 §5.2.3-5.2.5, RFC 9018
//!   format), written per response, cache hits included (never stored in the cache);
//! - over UDP, a client without a valid server cookie has not shown that the query's source
//!   address is its own: its response is at most [`ServiceConfig::amplification_limit`] times
//!   the query's bytes (a larger one is cut to its question and OPT record, our cookie
//!   included, with TC set: the client asks again with the cookie or over TCP), and responses
//!   to its prefix (/24, /56) are rate-limited ([`ServiceConfig::rrl`]). Stream transports and
//!   clients with a valid server cookie are not limited.

pub mod cache;
mod compact;
pub mod metrics;
pub mod prefetch;
mod query;
mod response;
pub mod stale;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use std::net::IpAddr;

use pqdns_core::wire::{
    truncate_to_question, Ede, Header, MessageWriter, Rcode, FLAG_RD, OPTION_COOKIE,
};
use pqdns_core::{Class, RrType};
use pqdns_net::acl::AllowList;
use pqdns_net::cookie::{self, CookieCheck, CookieMode, Cookies, RESPONSE_COOKIE_LEN};
use pqdns_net::dnstap::{Dnstap, Role};
use pqdns_net::rrl::{self, Rrl, RrlSettings, Verdict};
use pqdns_net::service::{
    Event, NoTransfer, OwnedRequest, Reply, Request, ResponseInfo, Service, Transport,
};
use pqdns_net::ConnLimiter;

use crate::padding;
use crate::policy::access::Decision;
use crate::policy::{Policy, ServicePolicy};
use crate::resolve::Resolver;
pub use cache::{CacheLimits, ResponseCache};
use cache::{Keep, Sink};
use metrics::Limited;
pub use metrics::ServiceMetrics;
use query::{ClientQuery, CookieOption, Parsed};
use response::Names;
pub use response::RESPONSE_UDP_PAYLOAD;

/// Largest message over a stream transport, bytes.
const MAX_STREAM_RESPONSE: usize = 65_535;

/// Settings of the service besides the resolver's.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServiceConfig {
    /// Who may ask for recursion; others get REFUSED. Default: loopback only.
    pub allow: AllowList,
    /// The answer cache's memory and TTL bounds, and how long validated answers may be served
    /// stale ([`CacheLimits::max_stale`], RFC 8767).
    pub cache: CacheLimits,
    /// How long a query whose cached answer is stale waits for a fresh one before the stale
    /// one is sent (RFC 8767 §5, "client response timer"; default
    /// [`stale::DEFAULT_CLIENT_RESPONSE_TIMER`], 1.8 s).
    pub client_response_timer: Duration,
    /// Resolutions in flight per client prefix ([`CLIENT_PREFIX`]).
    pub max_per_client: usize,
    /// Resolutions in flight in all.
    pub max_in_flight: usize,
    /// DNS cookies (RFC 7873, RFC 9018): [`CookieMode::On`] (default) answers COOKIE options
    /// with server cookies, and a valid one exempts a client from the UDP limits;
    /// [`CookieMode::Off`] ignores COOKIE options (no FORMERR, no server cookie, no
    /// exemption). [`CookieMode::Require`] is taken as `On`: the service never answers
    /// BADCOOKIE.
    pub cookies: CookieMode,
    /// The server secret (16 bytes, SipHash-2-4 key, RFC 9018 §4.4) shared with other
    /// servers of an anycast set; `None` (default): random, replaced every
    /// [`cookie::DEFAULT_ROTATION`].
    pub cookie_secret: Option<[u8; cookie::SECRET_LEN]>,
    /// Response-rate limiting of UDP responses to clients without a valid server cookie
    /// (default 200 responses/s per /24 or /56 and kind, slip 2; rate 0 turns it off).
    pub rrl: RrlSettings,
    /// Largest UDP response to a client without a valid server cookie, as a multiple of the
    /// query's length in bytes; 0: no limit. Default [`rrl::DEFAULT_AMPLIFICATION_LIMIT`] (3).
    pub amplification_limit: u32,
    /// Prefetch ([`prefetch`]): refresh a cached answer asked for in the last tenth of its
    /// lifetime. Default off, as in unbound.
    pub prefetch: bool,
    /// Refreshes running at once, at most (default [`prefetch::DEFAULT_MAX_PREFETCHES`]).
    pub max_prefetches: usize,
}

/// Default [`ServiceConfig::max_per_client`].
pub const DEFAULT_MAX_PER_CLIENT: usize = 64;
/// Default [`ServiceConfig::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// Prefix lengths that make one client for [`ServiceConfig::max_per_client`]: IPv4 /24,
/// IPv6 /56 (response-rate limiting counts the same way by default).
pub const CLIENT_PREFIX: (u8, u8) = (rrl::DEFAULT_IPV4_PREFIX, rrl::DEFAULT_IPV6_PREFIX);

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig {
            allow: AllowList::new(vec![
                "127.0.0.0/8".parse().expect("a valid prefix"),
                "::1".parse().expect("a valid prefix"),
            ]),
            cache: CacheLimits::default(),
            max_per_client: DEFAULT_MAX_PER_CLIENT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            cookies: CookieMode::On,
            cookie_secret: None,
            rrl: RrlSettings::default(),
            amplification_limit: rrl::DEFAULT_AMPLIFICATION_LIMIT,
            client_response_timer: stale::DEFAULT_CLIENT_RESPONSE_TIMER,
            prefetch: false,
            max_prefetches: prefetch::DEFAULT_MAX_PREFETCHES,
        }
    }
}

/// The resolver service; see the module documentation.
pub struct RecursiveService {
    resolver: Resolver,
    cache: ResponseCache,
    /// Access control and local zones, replaced as a whole by
    /// [`RecursiveService::install_policy`].
    policy: RwLock<Arc<ServicePolicy>>,
    /// Resolutions in flight, in all and per client prefix.
    clients: Arc<ConnLimiter>,
    metrics: ServiceMetrics,
    /// Server cookie secrets; `None` when cookies are off.
    cookies: Option<Cookies>,
    /// Response-rate limiting over UDP; `None` when off.
    rrl: Option<Rrl>,
    /// See [`ServiceConfig::amplification_limit`].
    amplification_limit: u32,
    /// dnstap of every client query and response (CLIENT_QUERY, CLIENT_RESPONSE); `None`
    /// when off.
    dnstap: Option<Arc<Dnstap>>,
    /// See [`ServiceConfig::client_response_timer`].
    client_response_timer: Duration,
    /// Refreshes of cached answers near their expiry; `None` when prefetch is off.
    prefetches: Option<prefetch::Prefetches>,
}

/// How a query's COOKIE option checked, and our COOKIE option data for its response.
#[derive(Clone, Copy, Debug)]
struct CookieReply {
    check: CookieCheck,
    data: Option<[u8; RESPONSE_COOKIE_LEN]>,
}

impl CookieReply {
    /// No cookie to check or send.
    const NONE: CookieReply = CookieReply {
        check: CookieCheck::Absent,
        data: None,
    };
}

impl RecursiveService {
    /// A service answering with `resolver`.
    pub fn new(resolver: Resolver, config: ServiceConfig) -> RecursiveService {
        RecursiveService {
            resolver,
            cache: ResponseCache::new(config.cache),
            policy: RwLock::new(Arc::new(ServicePolicy::from(Policy::allow_list(
                config.allow,
            )))),
            clients: ConnLimiter::per_prefix(
                config.max_in_flight,
                config.max_per_client,
                CLIENT_PREFIX.0,
                CLIENT_PREFIX.1,
            ),
            metrics: ServiceMetrics::default(),
            cookies: match config.cookies {
                CookieMode::Off => None,
                mode => Cookies::new(mode, config.cookie_secret, cookie::DEFAULT_ROTATION)
                    .map_err(|e| tracing::warn!(error = %e, "DNS cookies are off"))
                    .ok(),
            },
            rrl: Rrl::new(config.rrl),
            amplification_limit: config.amplification_limit,
            dnstap: None,
            client_response_timer: config.client_response_timer,
            prefetches: config
                .prefetch
                .then(|| prefetch::Prefetches::new(config.max_prefetches)),
        }
    }

    /// Logs every client query and its response to `dnstap` (`pqdns_net::dnstap`).
    pub fn with_dnstap(mut self, dnstap: Option<Arc<Dnstap>>) -> RecursiveService {
        self.dnstap = dnstap;
        self
    }

    /// The dnstap output, if on.
    pub fn dnstap(&self) -> Option<&Arc<Dnstap>> {
        self.dnstap.as_ref()
    }

    /// Puts `policy` in place of the one in use ([`crate::policy`]): the access control and
    /// local zones at once for every query that arrives later, the forward and stub zones for
    /// every resolution that starts later. The caches and connections stay; answers already
    /// cached are served until they expire — unless the insecure domains or negative trust
    /// anchors changed: then the answer cache is emptied.
    pub fn install_policy(&self, policy: Policy) {
        self.resolver.set_zones(policy.routes);
        if self
            .resolver
            .set_configured_trust(policy.insecure, policy.negative)
        {
            self.cache.clear();
        }
        let service = ServicePolicy {
            access: policy.access,
            local: policy.local,
        };
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(service);
    }

    /// The resolver.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// The answer cache.
    pub fn cache(&self) -> &ResponseCache {
        &self.cache
    }

    /// The counters (Prometheus text with [`ServiceMetrics::render`]).
    pub fn metrics(&self) -> &ServiceMetrics {
        &self.metrics
    }

    /// The metrics in Prometheus' text format: the service's ([`ServiceMetrics::render`])
    /// and the resolver's (`pqdns_resolver_minimised_queries_total`: QNAME-minimised queries
    /// sent to authorities, RFC 9156; `pqdns_resolver_nta_hits_total`: zones treated as
    /// Insecure because of a negative trust anchor, RFC 7646).
    pub fn render_metrics(&self) -> String {
        let mut text = self.metrics.render();
        text.push_str(
            "# HELP pqdns_resolver_minimised_queries_total Queries sent to authorities with a \
             minimised QNAME (RFC 9156).\n# TYPE pqdns_resolver_minimised_queries_total counter\n",
        );
        text.push_str(&format!(
            "pqdns_resolver_minimised_queries_total {}\n",
            self.resolver.minimised_queries()
        ));
        text.push_str(
            "# HELP pqdns_resolver_nta_hits_total Zones treated as Insecure because of a \
             negative trust anchor (RFC 7646).\n# TYPE pqdns_resolver_nta_hits_total counter\n",
        );
        text.push_str(&format!(
            "pqdns_resolver_nta_hits_total {}\n",
            self.resolver.nta_hits()
        ));
        text.push_str(
            "# HELP pqdns_resolver_prefetches_total Cached answers refreshed before their \
             expiry (prefetch).\n# TYPE pqdns_resolver_prefetches_total counter\n",
        );
        text.push_str(&format!(
            "pqdns_resolver_prefetches_total {}\n",
            self.prefetches
                .as_ref()
                .map_or(0, prefetch::Prefetches::started)
        ));
        text
    }

    /// Resolves `query`: the response written from the answer, or `Err` with a failure
    /// response when no answer could be had (RFC 8767 §4 serves stale data then).
    async fn resolve(&self, query: &ClientQuery) -> Result<response::Written, response::Written> {
        let qname = query.qname.to_name().to_lowercase();
        match self.resolver.resolve(&qname, query.qtype).await {
            Ok(answer) => {
                self.metrics.resolution(&answer);
                Ok(response::from_answer(query, &answer, Names::Compressed))
            }
            Err(e) => {
                tracing::debug!(%qname, qtype = %query.qtype, error = %e, "resolution failed");
                Err(response::from_error(query, &e))
            }
        }
    }

    /// Writes the response to `query` synthesised from the resolver's validated NSEC/NSEC3
    /// records (RFC 8198, [`Resolver::synthesise`]) to `to`, at once on the serving
    /// thread; its length, or `None` when they prove no answer (the query is resolved as any
    /// other miss). Not kept under the QNAME: the denial records answer every name of their
    /// span, and a flood of random names (RFC 8198 §1) would push the popular answers out of
    /// the cache. A negative answer is kept under its denial proof instead, so the next name
    /// the same proof covers costs a proof check and a copy, like a cache hit.
    fn synthesise(&self, query: &ClientQuery, to: &mut Sink<'_>, now: Instant) -> Option<usize> {
        let qname = query.qname.to_name();
        if let Some(proof) = self.resolver.denial_proof(&qname, query.qtype) {
            let kept = self.cache.answer_proven(query, proof, to, now);
            if let Some((len, kept)) = kept {
                self.metrics.synthesised_again(kept.algorithms());
                return Some(len);
            }
        }
        let (answer, proof) = self.resolver.synthesise_with_proof(&qname, query.qtype)?;
        self.metrics.resolution(&answer);
        if let Some(proof) = proof {
            let written = response::from_answer(query, &answer, Names::Uncompressed);
            // Uncompressed names cost some bytes: kept per proof only if it fits whole (else
            // written compressed, which may fit where it would be truncated).
            if to.fits(written.message.len(), written.layout.opt_at.is_some()) {
                let keep = Keep::ForProof(proof, metrics::secure_algorithms(&answer));
                return Some(self.cache.serve(query, written, keep, to, now));
            }
        }
        let written = response::from_answer(query, &answer, Names::Compressed);
        Some(self.cache.serve(query, written, Keep::Not, to, now))
    }

    /// RFC 8767 §5 for a query whose cached answer is stale: resolves it in a task of its own,
    /// which stores the answer it gets (also after we stop waiting); a fresh answer if it
    /// comes within the client response timer, else — or when the resolution fails — the
    /// stale one.
    async fn fresh_or_stale(self: &Arc<Self>, query: ClientQuery) -> Outcome {
        let service = Arc::clone(self);
        let refresh = tokio::spawn(async move {
            let result = service.resolve(&query).await;
            if let Ok(written) = &result {
                service.cache.store(&query, written.clone(), now());
            }
            result
        });
        match tokio::time::timeout(self.client_response_timer, refresh).await {
            Ok(Ok(Ok(written))) => Outcome::Send(written),
            Ok(Ok(Err(failed))) => Outcome::Stale(Some(failed)),
            // Timed out (the task goes on), or the task panicked or was cancelled.
            Ok(Err(_)) | Err(_) => Outcome::Stale(None),
        }
    }

    /// Checks the query's COOKIE option from `client` and makes the one of its response
    /// (RFC 7873 §5.2.3-5.2.5; RFC 9018 §4.3: a young valid server cookie is sent back).
    fn cookie(&self, query: &ClientQuery, client: IpAddr) -> CookieReply {
        let (Some(cookies), CookieOption::Present(c)) = (&self.cookies, query.cookie) else {
            return CookieReply::NONE;
        };
        let now = pqdns_core::time::now();
        let check = cookies.check(c.as_bytes(), client, now);
        let mut data = [0; RESPONSE_COOKIE_LEN];
        cookies.answer(c.as_bytes(), check, client, now, &mut data);
        CookieReply {
            check,
            data: Some(data),
        }
    }

    /// Applies the UDP limits to the response of `len` bytes at `out[base..]` to a query of
    /// `query_len` bytes whose cookie checked as `check`, and counts it; returns the length
    /// to send (0: nothing). See the module documentation: for clients without a valid
    /// server cookie, the amplification limit, then response-rate limiting (within the
    /// prefix's rate the response goes; beyond it, it is dropped or cut to TC). Over DoT,
    /// DoH and DoQ, a response to a query with a Padding option is padded ([`crate::padding`]).
    fn finish(
        &self,
        request: &Request<'_>,
        check: CookieCheck,
        out: &mut Vec<u8>,
        base: usize,
        mut len: usize,
    ) -> ResponseInfo {
        if request.transport.is_encrypted() && len > 0 && padding::requested(request.message) {
            len = padding::pad(out, base, len, padding::RESPONSE_BLOCK, MAX_STREAM_RESPONSE);
        }
        let udp = request.transport == Transport::Udp;
        if udp && len > 0 && check != CookieCheck::Valid {
            let query_len = request.message.len();
            if rrl::exceeds_amplification_limit(self.amplification_limit, query_len, len) {
                len = truncate_to_question(&mut out[base..base + len], None).unwrap_or(0);
                self.metrics.limited(Limited::Amplification);
            }
            if let (Some(rrl), Some(&flags)) = (&self.rrl, out.get(base + 3)) {
                match rrl.verdict(request.client.ip(), Rcode(u16::from(flags & 0x0f))) {
                    Verdict::Send => {}
                    Verdict::Slip => {
                        len = truncate_to_question(&mut out[base..base + len], None).unwrap_or(0);
                        self.metrics.limited(Limited::RateSlip);
                    }
                    Verdict::Drop => {
                        len = 0;
                        self.metrics.limited(Limited::RateDrop);
                    }
                }
            }
        }
        if len >= 4 {
            let rcode = Rcode(u16::from(out[base + 3] & 0x0f));
            self.metrics.response(request.transport, rcode);
        }
        if let (Some(tap), true) = (&self.dnstap, len > 0) {
            let (transport, client) = (request.transport, request.client);
            let response = &out[base..base + len];
            tap.log_exchange(Role::Client, transport, client, request.message, response);
        }
        ResponseInfo::new(len)
    }
}

/// Now, on the runtime's clock (tokio's, which tests pause and step; the system's monotonic
/// clock outside a runtime and in builds without tokio's test utilities).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The largest response `transport` carries for `query`, bytes.
fn limit(query: &ClientQuery, transport: Transport) -> usize {
    if transport == Transport::Udp {
        query.udp_limit()
    } else {
        MAX_STREAM_RESPONSE
    }
}

/// What a resolution leaves to send.
enum Outcome {
    /// A response to send and keep.
    Store(response::Written),
    /// A response to send, already kept.
    Send(response::Written),
    /// The stale answer; if it went meanwhile, the failure (or, without one, a SERVFAIL).
    Stale(Option<response::Written>),
}

/// A cache miss [`RecursiveService::respond`] deferred: the query as it was parsed there, so
/// [`Service::respond_later`] reads the request's bytes no more; with a slot, a cache hit that
/// claimed its refresh ([`prefetch`]).
#[derive(Debug)]
pub struct DeferredQuery(ClientQuery, Option<prefetch::Slot>);

/// QTYPEs answered NOTIMP: the meta-TYPEs 128-254 (RFC 6895 §3.1: AXFR, IXFR, MAILA, MAILB
/// and unassigned), which a recursive resolver does not pass on. ANY (255) is resolved: RFC
/// 8482 §4.1, see the module documentation.
fn is_meta_qtype(qtype: RrType) -> bool {
    (128..255).contains(&qtype.0)
}

/// A header-only response with `rcode` (and an OPT record when the query had one, with our
/// COOKIE option if given): for queries that cannot be answered at all.
fn bare(
    header: Header,
    rcode: Rcode,
    edns: bool,
    cookie: Option<&[u8; RESPONSE_COOKIE_LEN]>,
    out: &mut Vec<u8>,
    base: usize,
) -> usize {
    let mut w = MessageWriter::response(out, base, MAX_STREAM_RESPONSE, header);
    if edns {
        let _fits = w.set_opt(RESPONSE_UDP_PAYLOAD, 0, 0);
        if let Some(c) = cookie {
            let _fits = w.add_option(OPTION_COOKIE, c);
        }
    }
    w.finish(rcode)
}

impl Service for RecursiveService {
    type Snapshot = ();
    type Transfer = NoTransfer;
    type Deferred = DeferredQuery;

    fn snapshot(&self) {}

    fn respond(
        &self,
        _snapshot: &(),
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<NoTransfer, DeferredQuery> {
        let query = match query::parse(request.message) {
            Parsed::Query(q) => q,
            Parsed::Rejected(m) => {
                let len = m.respond(RESPONSE_UDP_PAYLOAD, None, out, base);
                if len == 0 {
                    return Reply::Ready(ResponseInfo::new(0));
                }
                let info = self.finish(request, CookieCheck::Absent, out, base, len);
                return Reply::Ready(info.with_malformed(m.rcode() == Some(Rcode::FORMERR)));
            }
        };
        if self.cookies.is_some() && query.cookie == CookieOption::Malformed {
            // RFC 7873 §5.2.2: "If the COOKIE option is too short to contain a Client Cookie
            // [...] or is otherwise malformed, then FORMERR is generated."
            let len = bare(query.header, Rcode::FORMERR, true, None, out, base);
            let info = self.finish(request, CookieCheck::Absent, out, base, len);
            return Reply::Ready(info.with_malformed(true));
        }
        let limit = limit(&query, request.transport);
        let cookie = self.cookie(&query, request.client.ip());
        let data = cookie.data.as_ref();
        let mut to = Sink {
            out,
            base,
            limit,
            cookie: data,
        };
        let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
        let rd = query.header.has(FLAG_RD);
        let decision = policy.access.decide(request.client.ip(), rd);
        let refused = match decision {
            Decision::Drop => return Reply::Ready(ResponseInfo::new(0)),
            Decision::Refuse(why) => Some(why),
            Decision::Recurse | Decision::CacheOnly => None,
        };
        if let Some(text) = refused {
            let written = response::failure(&query, Rcode::REFUSED, Ede::PROHIBITED, text);
            let len = self.cache.serve(&query, written, Keep::Not, &mut to, now());
            return Reply::Ready(self.finish(request, cookie.check, to.out, base, len));
        }
        if query.qclass != Class::IN || is_meta_qtype(query.qtype) {
            let edns = query.edns.is_some();
            let len = bare(query.header, Rcode::NOTIMP, edns, data, to.out, base);
            return Reply::Ready(self.finish(request, cookie.check, to.out, base, len));
        }
        if !policy.local.is_empty() {
            let qname = query.qname.to_name().to_lowercase();
            if let Some(local) = policy.local.answer(&qname, query.qtype) {
                let (answers, authority) = (&local.answers, &local.authority);
                let written = response::write(
                    &query,
                    local.rcode,
                    answers,
                    authority,
                    None,
                    Names::Compressed,
                )
                .authoritative();
                let len = self.cache.serve(&query, written, Keep::Not, &mut to, now());
                self.metrics.local_answer();
                return Reply::Ready(self.finish(request, cookie.check, to.out, base, len));
            }
        }
        drop(policy);
        let prefetch = self.prefetches.is_some();
        let hit = self.cache.answer_hit(&query, &mut to, now(), prefetch);
        self.metrics.cache(hit.is_some());
        match (hit, decision) {
            (Some((len, true)), _) => match self.prefetches.as_ref().and_then(|p| p.try_slot()) {
                // Answered again from the cache in `respond_later`, which spawns the refresh.
                Some(slot) => Reply::Defer(DeferredQuery(query, Some(slot))),
                None => {
                    self.cache.unclaim_prefetch(&query);
                    Reply::Ready(self.finish(request, cookie.check, to.out, base, len))
                }
            },
            (Some((len, false)), _) => {
                Reply::Ready(self.finish(request, cookie.check, to.out, base, len))
            }
            (None, Decision::CacheOnly) => {
                let text = "not in the cache: queries without RD are answered from it only";
                let written = response::failure(&query, Rcode::SERVFAIL, Ede::OTHER, text);
                let len = self.cache.serve(&query, written, Keep::Not, &mut to, now());
                Reply::Ready(self.finish(request, cookie.check, to.out, base, len))
            }
            (None, Decision::Recurse) => match self.synthesise(&query, &mut to, now()) {
                Some(len) => Reply::Ready(self.finish(request, cookie.check, to.out, base, len)),
                None => Reply::Defer(DeferredQuery(query, None)),
            },
            (None, _) => Reply::Defer(DeferredQuery(query, None)),
        }
    }

    async fn respond_later(
        self: Arc<Self>,
        request: OwnedRequest,
        DeferredQuery(query, prefetch): DeferredQuery,
        mut out: Vec<u8>,
        base: usize,
    ) -> (Vec<u8>, ResponseInfo) {
        let limit = limit(&query, request.transport);
        if let Some(slot) = prefetch {
            let cookie = self.cookie(&query, request.client.ip());
            let data = cookie.data.as_ref();
            let mut to = Sink {
                out: &mut out,
                base,
                limit,
                cookie: data,
            };
            if let Some(len) = self.cache.answer(&query, &mut to, now()) {
                self.spawn_prefetch(query, slot);
                let info = self.finish(&request.as_request(), cookie.check, &mut out, base, len);
                return (out, info);
            }
            // Expired meanwhile: resolved as a miss.
        }
        let Some(_slot) = self.clients.try_acquire(request.client.ip()) else {
            let text = "too many queries in progress (from this network or in all)";
            let written = response::failure(&query, Rcode::SERVFAIL, Ede::OTHER, text);
            let cookie = self.cookie(&query, request.client.ip());
            let data = cookie.data.as_ref();
            let mut to = Sink {
                out: &mut out,
                base,
                limit,
                cookie: data,
            };
            let len = self.cache.serve(&query, written, Keep::Not, &mut to, now());
            let info = self.finish(&request.as_request(), cookie.check, &mut out, base, len);
            return (out, info);
        };
        let outcome = if self.cache.has_stale(&query, now()) {
            self.fresh_or_stale(query).await
        } else {
            match self.resolve(&query).await {
                Ok(written) | Err(written) => Outcome::Store(written),
            }
        };
        // The cookie when the answer goes out: the secret may have rotated meanwhile.
        let cookie = self.cookie(&query, request.client.ip());
        let (now, data) = (now(), cookie.data.as_ref());
        let mut to = Sink {
            out: &mut out,
            base,
            limit,
            cookie: data,
        };
        let stale = match outcome {
            Outcome::Stale(_) => self.cache.answer_stale(&query, &mut to, now),
            Outcome::Store(_) | Outcome::Send(_) => None,
        };
        let len = match (stale, outcome) {
            (Some(len), _) => {
                self.metrics.stale_answer();
                len
            }
            (None, Outcome::Store(written)) => {
                self.cache
                    .serve(&query, written, Keep::ForQuery, &mut to, now)
            }
            (None, Outcome::Send(written) | Outcome::Stale(Some(written))) => {
                self.cache.serve(&query, written, Keep::Not, &mut to, now)
            }
            (None, Outcome::Stale(None)) => {
                // The stale entry went meanwhile (evicted, or past its window).
                let text = "no answer within the client response timer (RFC 8767 §5)";
                let written =
                    response::failure(&query, Rcode::SERVFAIL, Ede::NO_REACHABLE_AUTHORITY, text);
                self.cache.serve(&query, written, Keep::Not, &mut to, now)
            }
        };
        let info = self.finish(&request.as_request(), cookie.check, &mut out, base, len);
        (out, info)
    }

    fn event(&self, event: &Event) {
        if let Event::Handshake { group, .. } = event {
            self.metrics.handshake(*group);
        }
    }
}

#[cfg(test)]
mod tests;

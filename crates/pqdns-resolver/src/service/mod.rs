//! The resolver service: a validating recursive resolver that stubs, browsers and operating
//! systems query over UDP, TCP, DoT, DoH and DoQ, through the listeners of `pqdns-net` (the
//! same code as pqdns-server's).
//!
//! [`RecursiveService`] implements [`pqdns_net::Service`]:
//! - a query from an address outside the allow-list gets REFUSED with EDE 18 (Prohibited)
//!   (RFC 5358: no open resolver);
//! - a cache hit is answered at once, on the listener's thread, from the prepared response
//!   ([`cache`]);
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

pub mod cache;
pub mod metrics;
mod query;
mod response;

use std::sync::Arc;
use std::time::Instant;

use pqdns_core::wire::{Ede, Header, MessageWriter, Rcode};
use pqdns_core::{Class, RrType};
use pqdns_net::acl::AllowList;
use pqdns_net::service::{
    Event, NoTransfer, OwnedRequest, Reply, Request, ResponseInfo, Service, Transport,
};
use pqdns_net::ConnLimiter;

use crate::resolve::Resolver;
pub use cache::{CacheLimits, ResponseCache};
pub use metrics::ServiceMetrics;
use query::{ClientQuery, Parsed};
pub use response::RESPONSE_UDP_PAYLOAD;

/// Largest message over a stream transport, bytes.
const MAX_STREAM_RESPONSE: usize = 65_535;

/// Settings of the service besides the resolver's.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServiceConfig {
    /// Who may ask for recursion; others get REFUSED. Default: loopback only.
    pub allow: AllowList,
    /// The answer cache's memory and TTL bounds.
    pub cache: CacheLimits,
    /// Resolutions in flight per client prefix ([`CLIENT_PREFIX`]).
    pub max_per_client: usize,
    /// Resolutions in flight in all.
    pub max_in_flight: usize,
}

/// Default [`ServiceConfig::max_per_client`].
pub const DEFAULT_MAX_PER_CLIENT: usize = 64;
/// Default [`ServiceConfig::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// Prefix lengths that make one client for [`ServiceConfig::max_per_client`]: IPv4 /24,
/// IPv6 /56 (pqdns-server's response-rate limiting counts the same way).
pub const CLIENT_PREFIX: (u8, u8) = (24, 56);

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
        }
    }
}

/// The resolver service; see the module documentation.
pub struct RecursiveService {
    resolver: Resolver,
    cache: ResponseCache,
    allow: AllowList,
    /// Resolutions in flight, in all and per client prefix.
    clients: Arc<ConnLimiter>,
    metrics: ServiceMetrics,
}

impl RecursiveService {
    /// A service answering with `resolver`.
    pub fn new(resolver: Resolver, config: ServiceConfig) -> RecursiveService {
        RecursiveService {
            resolver,
            cache: ResponseCache::new(config.cache),
            allow: config.allow,
            clients: ConnLimiter::per_prefix(
                config.max_in_flight,
                config.max_per_client,
                CLIENT_PREFIX.0,
                CLIENT_PREFIX.1,
            ),
            metrics: ServiceMetrics::default(),
        }
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

    /// Counts a response of `len` bytes written at `out[base..]` and says it is ready.
    fn ready(&self, transport: Transport, out: &[u8], base: usize, len: usize) -> ResponseInfo {
        if len >= 4 {
            let rcode = Rcode(u16::from(out[base + 3] & 0x0f));
            self.metrics.response(transport, rcode);
        }
        ResponseInfo::new(len)
    }
}

/// The largest response `transport` carries for `query`, bytes.
fn limit(query: &ClientQuery, transport: Transport) -> usize {
    if transport == Transport::Udp {
        query.udp_limit()
    } else {
        MAX_STREAM_RESPONSE
    }
}

/// QTYPEs answered NOTIMP: the meta-TYPEs 128-254 (RFC 6895 §3.1: AXFR, IXFR, MAILA, MAILB
/// and unassigned), which a recursive resolver does not pass on. ANY (255) is resolved: RFC
/// 8482 §4.1, see the module documentation.
fn is_meta_qtype(qtype: RrType) -> bool {
    (128..255).contains(&qtype.0)
}

/// A header-only response with `rcode` (and an OPT record when the query had one): for
/// queries that cannot be answered at all.
fn bare(header: Header, rcode: Rcode, edns: bool, out: &mut Vec<u8>, base: usize) -> usize {
    let mut w = MessageWriter::response(out, base, MAX_STREAM_RESPONSE, header);
    if edns {
        let _fits = w.set_opt(RESPONSE_UDP_PAYLOAD, 0, 0);
    }
    w.finish(rcode)
}

impl Service for RecursiveService {
    type Snapshot = ();
    type Transfer = NoTransfer;

    fn snapshot(&self) {}

    fn respond(
        &self,
        _snapshot: &(),
        request: &Request<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Reply<NoTransfer> {
        let query = match query::parse(request.message) {
            Parsed::Query(q) => q,
            Parsed::Drop => return Reply::Ready(ResponseInfo::new(0)),
            Parsed::Error {
                header,
                rcode,
                edns,
            } => {
                let len = bare(header, rcode, edns, out, base);
                self.metrics.response(request.transport, rcode);
                let info = ResponseInfo::new(len).with_malformed(rcode == Rcode::FORMERR);
                return Reply::Ready(info);
            }
        };
        let limit = limit(&query, request.transport);
        if !self.allow.allows(request.client.ip()) {
            let text = "recursion is not offered to this address";
            let written = response::failure(&query, Rcode::REFUSED, Ede::PROHIBITED, text);
            let len = self
                .cache
                .serve(&query, written, false, out, base, limit, Instant::now());
            return Reply::Ready(self.ready(request.transport, out, base, len));
        }
        if query.qclass != Class::IN || is_meta_qtype(query.qtype) {
            let len = bare(query.header, Rcode::NOTIMP, query.edns.is_some(), out, base);
            return Reply::Ready(self.ready(request.transport, out, base, len));
        }
        let hit = self.cache.answer(&query, out, base, limit, Instant::now());
        self.metrics.cache(hit.is_some());
        match hit {
            Some(len) => Reply::Ready(self.ready(request.transport, out, base, len)),
            None => Reply::Defer,
        }
    }

    async fn respond_later(
        self: Arc<Self>,
        request: OwnedRequest,
        mut out: Vec<u8>,
        base: usize,
    ) -> (Vec<u8>, ResponseInfo) {
        let Parsed::Query(query) = query::parse(&request.message) else {
            return (out, ResponseInfo::default());
        };
        let limit = limit(&query, request.transport);
        let Some(_slot) = self.clients.try_acquire(request.client.ip()) else {
            let text = "too many queries in progress (from this network or in all)";
            let written = response::failure(&query, Rcode::SERVFAIL, Ede::OTHER, text);
            let len = self.cache.serve(
                &query,
                written,
                false,
                &mut out,
                base,
                limit,
                Instant::now(),
            );
            let info = self.ready(request.transport, &out, base, len);
            return (out, info);
        };
        let qname = query.qname.to_name().to_lowercase();
        let written = match self.resolver.resolve(&qname, query.qtype).await {
            Ok(answer) => {
                self.metrics.resolution(&answer);
                response::from_answer(&query, &answer)
            }
            Err(e) => {
                tracing::debug!(%qname, qtype = %query.qtype, error = %e, "resolution failed");
                response::from_error(&query, &e)
            }
        };
        let len = self
            .cache
            .serve(&query, written, true, &mut out, base, limit, Instant::now());
        let info = self.ready(request.transport, &out, base, len);
        (out, info)
    }

    fn event(&self, event: &Event) {
        if let Event::Handshake { group, .. } = event {
            self.metrics.handshake(*group);
        }
    }
}

//! Where a response comes from: the cache of raw responses ([`crate::cache`]) first, then
//! the forward or stub zone the name is in ([`crate::policy::forward`]), else the forwarders
//! ([`super::Mode::Forward`], [`super::Mode::ForwardAny`]) or iteration from the roots
//! ([`super::iterate`]). What comes from servers is stored unconfirmed; a resolution that does
//! not end Bogus confirms what it used ([`Fetch::confirm`], RFC 4035 §4.7).
//!
//! Owns the cache, the [`Exchanger`], the iteration state and the zones' routes (replaced as
//! a whole by [`Fetch::set_zones`] while lookups run).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use pqdns_core::message::Message;
use pqdns_core::{Name, RrType};

use super::ctx::Ctx;
use super::exchange::Exchanger;
use super::iterate::Iteration;
use super::{BoxFuture, Clock, Config, Mode, ResolveError};
use crate::cache::{Cache, Stored};
use crate::policy::forward::{RouteKind, ZoneRoute};
use crate::transport::Client;

/// Port of servers learned from glue below a stub zone in forwarding mode (iterative mode
/// uses its own).
const STUB_GLUE_PORT: u16 = 53;

/// Where the queries of a forward or stub zone go.
enum ZoneEntry {
    /// Its upstreams, through an exchanger of their own (transport, TLS name).
    Forward {
        exchanger: Box<Exchanger>,
        servers: Vec<SocketAddr>,
    },
    /// Iteration from its servers.
    Stub { servers: Vec<SocketAddr> },
}

/// Forward and stub zones by name (lowercase).
#[derive(Default)]
struct Zones {
    map: HashMap<Name, ZoneEntry>,
}

impl Zones {
    /// The zone whose name is the longest suffix of `name`.
    fn closest(&self, name: &Name) -> Option<(&Name, &ZoneEntry)> {
        if self.map.is_empty() {
            return None;
        }
        let mut cur = Some(name.to_lowercase());
        while let Some(n) = cur {
            if let Some(found) = self.map.get_key_value(&n) {
                return Some(found);
            }
            cur = n.parent();
        }
        None
    }
}

/// Gets responses: from the cache, or from servers.
pub(super) struct Fetch {
    cache: Cache,
    exchanger: Exchanger,
    /// The global forwarders, in order; `None`: iteration from the roots.
    forward: Option<Vec<SocketAddr>>,
    /// Referrals from the roots, or (in forwarding mode, without roots) from stub zones.
    iteration: Iteration,
    zones: RwLock<Arc<Zones>>,
    /// For RRSIG expirations in cache lifetimes.
    clock: Clock,
    /// EDNS(0) payload and exchange budget of the zones' exchangers.
    udp_payload: u16,
    max_exchanges: usize,
}

impl Fetch {
    /// The sources `config` names, queried through `client`.
    pub(super) fn new(config: &Config, client: Client) -> Fetch {
        let (forward, roots, port) = match &config.mode {
            Mode::Forward(server) => (Some(vec![*server]), Vec::new(), STUB_GLUE_PORT),
            Mode::ForwardAny(servers) => (Some(servers.clone()), Vec::new(), STUB_GLUE_PORT),
            Mode::Iterative { roots, port } => (None, roots.clone(), *port),
        };
        let iteration = Iteration::new(roots, port, &config.work, config.qname_minimisation);
        Fetch {
            cache: Cache::new(config.cache),
            exchanger: Exchanger::new(client, config.udp_payload, config.work.max_exchanges),
            forward,
            iteration,
            zones: RwLock::default(),
            clock: Clock(config.now),
            udp_payload: config.udp_payload,
            max_exchanges: config.work.max_exchanges,
        }
    }

    /// Replaces the forward and stub zones by `routes`, at once for lookups that start later
    /// (those under way finish with the zones they began with).
    pub(super) fn set_zones(&self, routes: Vec<ZoneRoute>) {
        let mut zones = Zones::default();
        for route in routes {
            let entry = match route.kind {
                RouteKind::Forward { client, servers } => ZoneEntry::Forward {
                    exchanger: Box::new(Exchanger::new(
                        *client,
                        self.udp_payload,
                        self.max_exchanges,
                    )),
                    servers,
                },
                RouteKind::Stub { servers } => ZoneEntry::Stub { servers },
            };
            zones.map.insert(route.name, entry);
        }
        *self.zones.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(zones);
    }

    /// The response for (qname, qtype) from the cache, the forwarder, or by iteration.
    pub(super) fn lookup<'a>(
        &'a self,
        qname: &'a Name,
        qtype: RrType,
        ctx: &'a mut Ctx,
    ) -> BoxFuture<'a, Result<Message, ResolveError>> {
        Box::pin(async move {
            let now = Instant::now();
            // A cached response may hold the condensed signatures that need a ladder.
            if ctx.may_use_cache(qtype) {
                if let Some((m, stored)) = self.cache.get(qname, qtype, now) {
                    ctx.used(qname, qtype, stored);
                    return Ok(m);
                }
            }
            let zones = Arc::clone(&self.zones.read().unwrap_or_else(|e| e.into_inner()));
            // DS lives at the parent side of a cut (RFC 4035 §3.1.4.1).
            let parent = (qtype == RrType::DS).then(|| qname.parent()).flatten();
            let m = match zones.closest(parent.as_ref().unwrap_or(qname)) {
                // A forwarder answers for every name of its zone.
                Some((zone, ZoneEntry::Forward { exchanger, servers })) => {
                    exchanger.ask(servers, zone, qname, qtype, ctx).await?
                }
                Some((zone, ZoneEntry::Stub { servers })) => {
                    let base = Some((zone, servers.as_slice()));
                    self.iteration
                        .iterate(self, &self.exchanger, base, qname, qtype, ctx)
                        .await?
                }
                // A forwarder answers for every zone: its queries are for the root's.
                None => match &self.forward {
                    Some(servers) => {
                        let root = Name::root();
                        self.exchanger
                            .ask(servers, &root, qname, qtype, ctx)
                            .await?
                    }
                    None => {
                        self.iteration
                            .iterate(self, &self.exchanger, None, qname, qtype, ctx)
                            .await?
                    }
                },
            };
            if let Some(stored) =
                self.cache
                    .put(qname.clone(), qtype, m.clone(), now, self.clock.unix())
            {
                ctx.used(qname, qtype, stored);
            }
            Ok(m)
        })
    }

    /// Minimised queries sent so far (RFC 9156; iterative mode and stub zones).
    pub(super) fn minimised_queries(&self) -> u64 {
        self.iteration.minimised_queries()
    }

    /// Lets the cached responses a resolution `used` live their whole TTL: it did not end
    /// Bogus ([`crate::cache`]).
    pub(super) fn confirm(&self, used: &[(Name, RrType, Stored)]) {
        for (name, qtype, stored) in used {
            self.cache.confirm(name, *qtype, *stored);
        }
    }
}

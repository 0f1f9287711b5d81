//! Where a response comes from: the cache of raw responses ([`crate::cache`]) first, then the
//! forwarders ([`super::Mode::Forward`], [`super::Mode::ForwardAny`]) or iteration from the
//! roots ([`super::iterate`]). What comes from servers is stored unconfirmed; a resolution
//! that does not end Bogus confirms what it used ([`Fetch::confirm`], RFC 4035 §4.7).
//!
//! Owns the cache, the [`Exchanger`] and the iteration state.

use std::net::SocketAddr;
use std::time::Instant;

use pqdns_core::message::Message;
use pqdns_core::{Name, RrType};

use super::ctx::Ctx;
use super::exchange::Exchanger;
use super::iterate::Iteration;
use super::{BoxFuture, Clock, Config, Mode, ResolveError};
use crate::cache::{Cache, Stored};
use crate::transport::Client;

/// Where queries go.
enum Route {
    /// Forwarders, in order.
    Forward(Vec<SocketAddr>),
    /// Referrals from the roots.
    Iterative(Iteration),
}

/// Gets responses: from the cache, or from servers.
pub(super) struct Fetch {
    cache: Cache,
    exchanger: Exchanger,
    route: Route,
    /// For RRSIG expirations in cache lifetimes.
    clock: Clock,
}

impl Fetch {
    /// The sources `config` names, queried through `client`.
    pub(super) fn new(config: &Config, client: Client) -> Fetch {
        let route = match &config.mode {
            Mode::Forward(server) => Route::Forward(vec![*server]),
            Mode::ForwardAny(servers) => Route::Forward(servers.clone()),
            Mode::Iterative { roots, port } => Route::Iterative(Iteration::new(
                roots.clone(),
                *port,
                &config.work,
                config.qname_minimisation,
            )),
        };
        Fetch {
            cache: Cache::new(config.cache),
            exchanger: Exchanger::new(client, config.udp_payload, config.work.max_exchanges),
            route,
            clock: Clock(config.now),
        }
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
            let m = match &self.route {
                // A forwarder answers for every zone: its queries are for the root's.
                Route::Forward(servers) => {
                    let root = Name::root();
                    self.exchanger
                        .ask(servers, &root, qname, qtype, ctx)
                        .await?
                }
                Route::Iterative(iteration) => {
                    iteration
                        .iterate(self, &self.exchanger, qname, qtype, ctx)
                        .await?
                }
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

    /// Minimised queries sent so far (RFC 9156; iterative mode).
    pub(super) fn minimised_queries(&self) -> u64 {
        match &self.route {
            Route::Forward(_) => 0,
            Route::Iterative(iteration) => iteration.minimised_queries(),
        }
    }

    /// Lets the cached responses a resolution `used` live their whole TTL: it did not end
    /// Bogus ([`crate::cache`]).
    pub(super) fn confirm(&self, used: &[(Name, RrType, Stored)]) {
        for (name, qtype, stored) in used {
            self.cache.confirm(name, *qtype, *stored);
        }
    }
}

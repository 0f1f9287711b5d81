//! One query to the servers of a zone: build it (a random ID from [`crate::random`], EDNS
//! with DO, CD set, RFC 4035 §3.2.2), ask the servers in turn until one answers — fastest
//! first, those that did not answer recently last, each but the last given up after its
//! retransmission timeout ([`crate::infra`]) — and count every try against the resolution's
//! budget.
//!
//! Owns the transport [`Client`] and the infrastructure cache.

use std::net::SocketAddr;
use std::time::Instant;

use pqdns_core::dnssec::mtl::{SigTags, EDNS_FULL_SIGNATURES};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, EDNS_CO, EDNS_DO, FLAG_CD};
use pqdns_core::{Class, Name, RrType};

use super::ctx::Ctx;
use super::{Lame, LimitReached, ResolveError};
use crate::infra::Infra;
use crate::random;
use crate::transport::{Client, TransportError};

/// Sends queries: the transport client and what is known of the servers.
pub(super) struct Exchanger {
    client: Client,
    /// Round-trip estimates and servers that did not answer recently.
    infra: Infra,
    /// EDNS(0) UDP payload size advertised, bytes.
    udp_payload: u16,
    /// [`super::WorkLimits::max_exchanges`], for the error that reports it.
    max_exchanges: usize,
}

impl Exchanger {
    /// Queries through `client`, advertising `udp_payload` bytes; `max_exchanges` is only
    /// reported (the budget itself is the resolution's, in [`Ctx`]).
    pub(super) fn new(client: Client, udp_payload: u16, max_exchanges: usize) -> Exchanger {
        Exchanger {
            client,
            infra: Infra::new(),
            udp_payload,
            max_exchanges,
        }
    }

    fn query(
        &self,
        qname: &Name,
        qtype: RrType,
        held_ladders: Option<&SigTags>,
    ) -> Result<Message, TransportError> {
        // Option 65050 asks for full MTL signatures: a 2025 server sends them all
        // (draft-fregly-dnsop-slh-dsa-mtl-dnssec); a 2026 server sends them where the ladder is
        // not among the SigTags listed, the (at most 8) newest ladders held
        // (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
        let options = match held_ladders {
            Some(held) => vec![(EDNS_FULL_SIGNATURES, held.to_bytes())],
            None => Vec::new(),
        };
        let mut m = Message::query(
            random::query_id()?,
            Question {
                qname: qname.clone(),
                qtype,
                qclass: Class::IN,
            },
            false,
            Some(Edns {
                udp_payload: self.udp_payload,
                ext_rcode: 0,
                version: 0,
                // CO (RFC 9824 §5.1): we take a compact denial with NXDOMAIN; the validator
                // reads the proof, and the service gives each client the RCODE it asked for.
                flags: EDNS_DO | EDNS_CO,
                options,
            }),
        );
        // We validate ourselves: ask for unvalidated data (RFC 4035 §3.2.2).
        m.flags |= FLAG_CD;
        Ok(m)
    }

    /// Asks `servers` (those of `zone`, which dnstap logs as the query's zone) in turn until
    /// one answers, in [`Infra::order`], giving up on each but the last after its RTO when it
    /// is known ([`crate::infra`]); each try counts against the budget.
    ///
    /// # Errors
    /// [`LimitReached::Exchanges`] when the budget is spent, [`Lame::NoServers`] for an empty
    /// list, else the last server's [`TransportError`].
    pub(super) async fn ask(
        &self,
        servers: &[SocketAddr],
        zone: &Name,
        qname: &Name,
        qtype: RrType,
        ctx: &mut Ctx,
    ) -> Result<Message, ResolveError> {
        let mut last = None;
        let order = self.infra.order(servers, Instant::now());
        for (i, server) in order.iter().enumerate() {
            if !ctx.spend_exchange() {
                return Err(LimitReached::Exchanges {
                    limit: self.max_exchanges,
                    qname: qname.clone(),
                    qtype,
                }
                .into());
            }
            let query = self.query(qname, qtype, ctx.held_ladders())?;
            // While others remain, a server with a known RTT gets its RTO, not the full
            // timeout ([`crate::infra`]).
            let early = match order.get(i + 1) {
                Some(_) => self.infra.timeout(*server, Instant::now()),
                None => None,
            };
            let exchange = self.client.exchange_for_zone(*server, zone, &query);
            let result = match early {
                Some(rto) => match tokio::time::timeout(rto, exchange).await {
                    Ok(result) => result,
                    Err(_) => {
                        tracing::debug!(%server, ?rto, "no answer within the RTO, next server");
                        self.infra.gave_up(*server, Instant::now());
                        last = Some(TransportError::Timeout(rto));
                        continue;
                    }
                },
                None => exchange.await,
            };
            match result {
                Ok((m, info)) => {
                    self.infra.answered(*server, info.elapsed, Instant::now());
                    ctx.exchanged(info);
                    return Ok(m);
                }
                Err(e) => {
                    tracing::debug!(%server, error = %e, "server failed");
                    if matches!(e, TransportError::Timeout(_) | TransportError::Io(_)) {
                        self.infra.failed(*server, Instant::now());
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.map_or(ResolveError::Lame(Lame::NoServers), ResolveError::from))
    }
}

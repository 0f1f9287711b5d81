//! Iterative resolution (RFC 1034 §5.3.3) with bailiwick rules (RFC 2181 §5.4.1 ranking:
//! data from a server counts only inside the zone it serves).
//!
//! - A referral is followed only if the delegated zone is strictly below the zone of the
//!   server asked and at or above QNAME; anything else (a referral to an unrelated zone, or
//!   upwards) ends the lookup as lame.
//! - Glue is used for NS names inside the zone of the server that referred (RFC 9471 §2.1
//!   "in-domain" glue below the delegated zone and §2.2 "sibling" glue elsewhere in the
//!   referring zone, e.g. the root's addresses for `a.gtld-servers.net.` in a referral to
//!   `com.`), and only to reach the servers, never as an answer. NS names outside the
//!   referring zone are resolved separately, from the roots, within [`WorkLimits`] (at most
//!   a few per referral and per resolution, against NXNSAttack-style amplification), never
//!   from the referring server's additional section.
//! - Records outside the zone of the answering server are dropped from its responses (and
//!   the drop is noted in the trace).
//! - A referral flagged AA (a server's fault) is followed like any referral ([`is_referral`]).
//! - Servers are asked minimised questions (RFC 9156, [`super::minimise`]) until the zone
//!   holding the name is reached.
//!
//! Owns the root servers, the delegations learned from referrals, and the referral and
//! NS-name budgets ([`Glueless`] is the per-resolution part, kept in the resolution's `Ctx`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use pqdns_core::message::Message;
use pqdns_core::wire::{Rcode, FLAG_AA};
use pqdns_core::{Name, Record, RrType};

use super::ctx::Ctx;
use super::exchange::Exchanger;
use super::fetch::Fetch;
use super::minimise::Minimiser;
use super::{lock, BoxFuture, Lame, ResolveError, WorkLimits};
use crate::ttl_map::TtlMap;

/// Referral following: the roots, what referrals taught, and the bounds.
pub(super) struct Iteration {
    roots: Vec<SocketAddr>,
    /// Port for servers learned from glue.
    port: u16,
    delegations: Mutex<Delegations>,
    max_referrals: usize,
    max_glueless_per_referral: usize,
    max_glueless: usize,
    /// QNAME minimisation on ([`super::Config::qname_minimisation`]).
    qname_minimisation: bool,
    /// Minimised queries sent (RFC 9156).
    minimised: AtomicU64,
}

/// One resolution's budget of NS names without glue, and the names being resolved.
pub(super) struct Glueless {
    left: usize,
    /// NS names being resolved (cycle guard for glueless delegations).
    resolving: Vec<Name>,
}

impl Glueless {
    /// A budget of `max` NS-name lookups ([`WorkLimits::max_glueless`]).
    pub(super) fn new(max: usize) -> Glueless {
        Glueless {
            left: max,
            resolving: Vec::new(),
        }
    }
}

/// Most delegations remembered.
const MAX_DELEGATIONS: usize = 4096;

/// Server addresses per delegated zone, learned from referrals, kept for the NS TTL.
struct Delegations {
    map: TtlMap<Name, Vec<SocketAddr>>,
}

impl Delegations {
    fn new() -> Delegations {
        Delegations {
            map: TtlMap::new(MAX_DELEGATIONS),
        }
    }

    /// The closest live delegation at or above `name`: (zone, servers).
    fn closest(&self, name: &Name, now: Instant) -> Option<(Name, Vec<SocketAddr>)> {
        let mut cur = Some(name.clone());
        while let Some(n) = cur {
            if let Some(servers) = self.map.get(&n, now) {
                return Some((n, servers.clone()));
            }
            cur = n.parent();
        }
        None
    }

    fn insert(&mut self, zone: Name, servers: Vec<SocketAddr>, ttl: u32, now: Instant) {
        self.map.insert(zone, servers, ttl, now);
    }
}

/// Keeps only records at or below `zone` in every section; returns how many were dropped.
fn keep_in_zone(m: &mut Message, zone: &Name) -> usize {
    let mut dropped = 0;
    for section in [&mut m.answers, &mut m.authority, &mut m.additional] {
        let before = section.len();
        section.retain(|r| r.owner.is_subdomain_of(zone));
        dropped += before - section.len();
    }
    dropped
}

/// True if `m`, from a server for `zone`, is a referral (RFC 1034 §4.3.2 step 3b): NOERROR,
/// no answer, no SOA, and NS records in the authority section for a name other than `zone`.
/// The AA flag does not decide it: a referral wrongly flagged AA is still followed, as other
/// resolvers do, while an authoritative answer, NODATA (SOA) or error stays the answer.
/// Without AA and without such NS records the response is lame ([`Lame::NoReferral`]).
fn is_referral(m: &Message, zone: &Name) -> bool {
    if !m.answers.is_empty() || m.rcode() != Rcode::NOERROR {
        return false;
    }
    if !m.has_flag(FLAG_AA) {
        return true;
    }
    let has = |t: RrType| m.authority.iter().any(|r| r.rtype == t && r.owner != *zone);
    let soa = m.authority.iter().any(|r| r.rtype == RrType::SOA);
    has(RrType::NS) && !soa
}

/// The address in an A or AAAA record.
fn address(r: &Record, port: u16) -> Option<SocketAddr> {
    let ip: IpAddr = match (r.rtype, r.rdata.len()) {
        (RrType::A, 4) => Ipv4Addr::new(r.rdata[0], r.rdata[1], r.rdata[2], r.rdata[3]).into(),
        (RrType::AAAA, 16) => {
            let octets: [u8; 16] = r.rdata.as_slice().try_into().ok()?;
            Ipv6Addr::from(octets).into()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

impl Iteration {
    /// Iteration from `roots`, glue addresses on `port`, within `work`, with QNAME
    /// minimisation if `qname_minimisation`.
    pub(super) fn new(
        roots: Vec<SocketAddr>,
        port: u16,
        work: &WorkLimits,
        qname_minimisation: bool,
    ) -> Iteration {
        Iteration {
            roots,
            port,
            delegations: Mutex::new(Delegations::new()),
            max_referrals: work.max_referrals,
            max_glueless_per_referral: work.max_glueless_per_referral,
            max_glueless: work.max_glueless,
            qname_minimisation,
            minimised: AtomicU64::new(0),
        }
    }

    /// Minimised queries sent so far (RFC 9156).
    pub(super) fn minimised_queries(&self) -> u64 {
        self.minimised.load(Relaxed)
    }

    /// Walks referrals from the closest known delegation (or the roots; or, with `base`, a
    /// stub zone and its servers, the closest known delegation below it) to a server that
    /// answers for (qname, qtype); returns its response with out-of-zone records removed.
    pub(super) fn iterate<'a>(
        &'a self,
        fetch: &'a Fetch,
        exchanger: &'a Exchanger,
        base: Option<(&'a Name, &'a [SocketAddr])>,
        qname: &'a Name,
        qtype: RrType,
        ctx: &'a mut Ctx,
    ) -> BoxFuture<'a, Result<Message, ResolveError>> {
        Box::pin(async move {
            // DS lives at the parent side of a cut (RFC 4035 §3.1.4.1): start above the name.
            let start = if qtype == RrType::DS {
                qname.parent().unwrap_or_else(Name::root)
            } else {
                qname.clone()
            };
            let known = lock(&self.delegations).closest(&start, Instant::now());
            let (mut zone, mut servers) = match (known, base) {
                (Some(k), Some((stub, _))) if k.0.is_subdomain_of(stub) => k,
                (_, Some((stub, servers))) => (stub.clone(), servers.to_vec()),
                (Some(k), None) => k,
                (None, None) => (Name::root(), self.roots.clone()),
            };
            let mut minimiser = Minimiser::new(self.qname_minimisation, &zone);
            let mut referrals = 0;
            // Ends: each turn returns, follows one of at most max_referrals referrals, or
            // sends one of at most MAX_MINIMISE_COUNT minimised queries (or the one full
            // question after them).
            loop {
                let (asked, asked_type) = minimiser.question(qname, qtype);
                let minimised = asked != *qname || asked_type != qtype;
                let mut m = exchanger
                    .ask(&servers, &zone, &asked, asked_type, ctx)
                    .await?;
                let dropped = keep_in_zone(&mut m, &zone);
                if dropped > 0 {
                    ctx.note(format!(
                        "{dropped} record(s) outside {zone} dropped from its server's response \
                         to {asked} {asked_type}"
                    ));
                }
                if minimised {
                    self.minimised.fetch_add(1, Relaxed);
                }
                let referral = is_referral(&m, &zone);
                if !referral && !minimised {
                    return Ok(m);
                }
                let cut = m
                    .authority
                    .iter()
                    .find(|r| r.rtype == RrType::NS && r.owner != zone)
                    .or_else(|| m.authority.iter().find(|r| r.rtype == RrType::NS))
                    .map(|r| r.owner.clone());
                if referral && qtype == RrType::DS && cut.as_ref() == Some(qname) {
                    // The parent referred us to the child for DS: the parent's answer is the
                    // referral itself.
                    return Ok(m);
                }
                let lame: Option<ResolveError> = match &cut {
                    _ if !referral => None,
                    None => Some(
                        Lame::NoReferral {
                            zone: zone.clone(),
                            qname: qname.clone(),
                            qtype,
                        }
                        .into(),
                    ),
                    Some(cut)
                        if *cut == zone
                            || !cut.is_subdomain_of(&zone)
                            || !asked.is_subdomain_of(cut) =>
                    {
                        Some(
                            Lame::OutOfBailiwick {
                                zone: zone.clone(),
                                qname: qname.clone(),
                                cut: cut.clone(),
                            }
                            .into(),
                        )
                    }
                    Some(_) => None,
                };
                if minimised && (!referral || lame.is_some()) {
                    // Not a referral to follow: CHILD exists (NOERROR), or the server did not
                    // cope with the minimised question (RFC 9156 relaxed mode: ask in full).
                    if m.rcode() == Rcode::NOERROR && !referral {
                        minimiser.exists(&asked);
                    } else {
                        ctx.note(format!(
                            "{zone}'s server answered the minimised {asked} {asked_type} with \
                             {}: asking for {qname} {qtype} (RFC 9156 relaxed mode)",
                            lame.map_or_else(|| m.rcode().to_string(), |e| e.to_string())
                        ));
                        minimiser.stop();
                    }
                    continue;
                }
                let cut = match (cut, lame) {
                    (_, Some(e)) => return Err(e),
                    (Some(cut), None) => cut,
                    (None, None) => {
                        return Err(Lame::NoReferral {
                            zone,
                            qname: qname.clone(),
                            qtype,
                        }
                        .into())
                    }
                };
                referrals += 1;
                if referrals > self.max_referrals {
                    break;
                }
                let ns_records: Vec<&Record> = m
                    .authority
                    .iter()
                    .filter(|r| r.rtype == RrType::NS && r.owner == cut)
                    .collect();
                let ttl = ns_records.iter().map(|r| r.ttl).min().unwrap_or(0);
                let ns_names: Vec<Name> = ns_records
                    .iter()
                    .filter_map(|r| Name::from_wire(&r.rdata).ok())
                    .collect();
                // Glue only for NS names inside the referring server's zone: in-domain or
                // sibling glue (RFC 9471 §2.1, §2.2).
                let mut addrs: Vec<SocketAddr> = m
                    .additional
                    .iter()
                    .filter(|r| r.owner.is_subdomain_of(&zone) && ns_names.contains(&r.owner))
                    .filter_map(|r| address(r, self.port))
                    .collect();
                if addrs.is_empty() {
                    addrs = self.glueless(fetch, &ns_names, &cut, ctx).await;
                }
                if addrs.is_empty() {
                    return Err(Lame::NoAddresses { cut }.into());
                }
                ctx.note(format!(
                    "referral from {zone} to {cut}: {} server(s)",
                    addrs.len()
                ));
                lock(&self.delegations).insert(cut.clone(), addrs.clone(), ttl, Instant::now());
                minimiser.referred(&cut);
                zone = cut;
                servers = addrs;
            }
            Err(Lame::TooManyReferrals {
                limit: self.max_referrals,
                qname: qname.clone(),
            }
            .into())
        })
    }

    /// Addresses of the NS names of `cut` (the referral gave no usable glue), each looked up
    /// like any name, within the per-referral and per-resolution budgets; stops at the first
    /// name that has addresses. Names inside `cut` are skipped: only glue can reach them.
    async fn glueless(
        &self,
        fetch: &Fetch,
        ns_names: &[Name],
        cut: &Name,
        ctx: &mut Ctx,
    ) -> Vec<SocketAddr> {
        let outside = ns_names.iter().filter(|n| !n.is_subdomain_of(cut));
        for ns in outside.take(self.max_glueless_per_referral) {
            if ctx.glueless().left == 0 {
                ctx.note(format!(
                    "budget of {} NS names without glue used up (at {cut})",
                    self.max_glueless
                ));
                break;
            }
            if ctx.glueless().resolving.contains(ns) {
                continue;
            }
            ctx.glueless().left -= 1;
            ctx.glueless().resolving.push(ns.clone());
            let mut addrs = Vec::new();
            for t in [RrType::A, RrType::AAAA] {
                if let Ok(m) = fetch.lookup(ns, t, ctx).await {
                    addrs.extend(
                        m.answers
                            .iter()
                            .filter(|r| r.owner == *ns)
                            .filter_map(|r| address(r, self.port)),
                    );
                }
                if !addrs.is_empty() {
                    break;
                }
            }
            ctx.glueless().resolving.pop();
            ctx.note(format!(
                "NS {ns} of {cut} (no glue): {} address(es)",
                addrs.len()
            ));
            if !addrs.is_empty() {
                return addrs;
            }
        }
        Vec::new()
    }
}

//! Resolution and validation (RFC 4035 §5): ask a named server (forwarding) or walk down from
//! root hints (iterative, RFC 1034 §5.3.3), then validate the answer through the chain of
//! trust — trust anchor → DS → DNSKEY → RRSIG at every zone cut, and NSEC/NSEC3 proofs for
//! negative and wildcard answers.
//!
//! The chain is driven by the signer names of the RRSIGs: to trust zone Z, get Z's DS from its
//! parent (signed by the parent, trusted the same way, recursively up to an anchor), then Z's
//! DNSKEY RRset, which a DS-matched key must sign.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pqdns_core::dnssec::denial::{check_nsec, check_nsec3, Claim};
use pqdns_core::dnssec::rrsig::Rrsig;
use pqdns_core::dnssec::validate::{Limits, PqPolicy, Reason, Status, TrustedKeys, Validator};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Ede, Edns, Rcode, EDNS_DO, FLAG_AA, FLAG_CD};
use pqdns_core::{Class, Name, Record, RrType};

use crate::anchors::TrustAnchors;
use crate::cache::{Cache, DEFAULT_CAPACITY};
use crate::transport::{Client, ExchangeInfo, TransportError};

/// Where queries go.
#[derive(Clone, Debug)]
pub enum Mode {
    /// Send every query to this server (it must serve or recurse for all zones involved).
    Forward(SocketAddr),
    /// Start at these root servers and follow referrals; glue addresses use `port`.
    Iterative {
        /// Root server addresses.
        roots: Vec<SocketAddr>,
        /// Port for servers learned from glue.
        port: u16,
    },
}

/// Resolver settings.
pub struct Config {
    /// Forwarding or iterative.
    pub mode: Mode,
    /// Trust anchors.
    pub anchors: TrustAnchors,
    /// Algorithm-number profile for validation.
    pub profile: Profile,
    /// Crypto provider.
    pub provider: Provider,
    /// RFC 6840 §5.11 behaviour or require-pq.
    pub pq_policy: PqPolicy,
    /// Work limits per query.
    pub limits: Limits,
    /// Clock for signature validity, UNIX seconds; `None` = now.
    pub now: Option<u64>,
    /// EDNS(0) UDP payload size advertised, bytes.
    pub udp_payload: u16,
}

/// EDNS(0) UDP payload size advertised by default, bytes (the DNS Flag Day 2020 value).
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

impl Config {
    /// Settings with the defaults: `default` profile and provider, RFC 6840 §5.11 algorithm
    /// policy, default work limits, the real clock, and a 1232-byte UDP payload.
    pub fn new(mode: Mode, anchors: TrustAnchors) -> Config {
        Config {
            mode,
            anchors,
            profile: Profile::default_profile(),
            provider: Provider::default_provider(),
            pq_policy: PqPolicy::AnyAlgorithm,
            limits: Limits::default(),
            now: None,
            udp_payload: DEFAULT_UDP_PAYLOAD,
        }
    }
}

/// Why resolution failed before validation could say anything.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Every server failed.
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// Referrals did not lead to an answer.
    #[error("resolution failed: {0}")]
    Lame(String),
}

/// A validated answer.
#[derive(Debug)]
pub struct Answer {
    /// The response message for the question.
    pub message: Message,
    /// Validation result.
    pub status: Status,
    /// The chain of trust walked, one line per step (for `--trace`).
    pub chain: Vec<String>,
    /// Every exchange made, in order.
    pub exchanges: Vec<ExchangeInfo>,
}

/// Trust established for a zone.
#[derive(Clone, Debug)]
enum ZoneTrust {
    Secure(TrustedKeys),
    Insecure(Reason),
    Bogus(Reason),
}

/// Most referrals followed for one lookup.
const MAX_REFERRALS: usize = 16;
/// Most zone cuts walked when establishing trust.
const MAX_DEPTH: usize = 16;

/// A resolver: one transport client, a cache, and trust per zone.
pub struct Resolver {
    config: Config,
    client: Client,
    cache: Cache,
    /// Servers per delegated zone learned from referrals (iterative mode).
    delegations: BTreeMap<Name, Vec<SocketAddr>>,
    next_id: u16,
}

/// RDATA of an RRset and of the RRSIGs covering it.
type RdatasAndSigs = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// RRsets of a section grouped by (owner, type), with the RRSIGs covering each.
#[derive(Default, Debug)]
struct Grouped {
    sets: BTreeMap<(Name, RrType), RdatasAndSigs>,
}

impl Grouped {
    fn from(records: &[Record]) -> Grouped {
        let mut g = Grouped::default();
        for r in records {
            let (key, sig) = match r.covered_type() {
                Some(t) => ((r.owner.clone(), t), true),
                None => ((r.owner.clone(), r.rtype), false),
            };
            let entry = g.sets.entry(key).or_default();
            if sig {
                entry.1.push(r.rdata.clone());
            } else if !entry.0.contains(&r.rdata) {
                entry.0.push(r.rdata.clone());
            }
        }
        g
    }

    fn signer(&self, key: &(Name, RrType)) -> Option<Name> {
        self.sets
            .get(key)
            .and_then(|(_, sigs)| sigs.iter().find_map(|s| Rrsig::parse(s)))
            .map(|s| s.fields.signer)
    }
}

impl Resolver {
    /// A resolver using `client` for transport.
    pub fn new(config: Config, client: Client) -> Resolver {
        Resolver {
            config,
            client,
            cache: Cache::new(DEFAULT_CAPACITY),
            delegations: BTreeMap::new(),
            next_id: std::process::id() as u16,
        }
    }

    fn now(&self) -> u64 {
        self.config.now.unwrap_or_else(pqdns_core::time::now)
    }

    /// Resolves `qname`/`qtype` and validates the answer.
    ///
    /// # Errors
    /// [`ResolveError`] when no answer could be obtained; validation problems are reported in
    /// [`Answer::status`], not as errors.
    pub async fn resolve(&mut self, qname: &Name, qtype: RrType) -> Result<Answer, ResolveError> {
        let mut chain = Vec::new();
        let mut exchanges = Vec::new();
        let message = self.lookup(qname, qtype, &mut exchanges).await?;
        let status = if self.config.anchors.closest(qname).is_none() {
            Status::Indeterminate(Reason::new(
                Ede::OTHER,
                format!("no trust anchor covers {qname}"),
            ))
        } else {
            let profile = self.config.profile.clone();
            let provider = self.config.provider.clone();
            let mut validator = Validator::new(
                &profile,
                &provider,
                self.now(),
                self.config.limits,
                self.config.pq_policy,
            );
            let mut trust = HashMap::new();
            self.validate(
                &message,
                qname,
                qtype,
                &mut validator,
                &mut trust,
                &mut chain,
                &mut exchanges,
            )
            .await
        };
        Ok(Answer {
            message,
            status,
            chain,
            exchanges,
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn validate(
        &mut self,
        message: &Message,
        qname: &Name,
        qtype: RrType,
        v: &mut Validator<'_>,
        trust: &mut HashMap<Name, ZoneTrust>,
        chain: &mut Vec<String>,
        exchanges: &mut Vec<ExchangeInfo>,
    ) -> Status {
        let answers = Grouped::from(&message.answers);
        let authority = Grouped::from(&message.authority);
        // Follow the answer: qname's RRset, or a CNAME chain inside the answer.
        let mut name = qname.clone();
        let mut secured_any = false;
        for _ in 0..16 {
            let key = if answers.sets.contains_key(&(name.clone(), qtype)) {
                (name.clone(), qtype)
            } else if answers.sets.contains_key(&(name.clone(), RrType::CNAME)) {
                (name.clone(), RrType::CNAME)
            } else {
                break;
            };
            let (rdatas, sigs) = &answers.sets[&key];
            let Some(signer) = answers.signer(&key) else {
                return self.unsigned(&key.0, trust, v, chain, exchanges).await;
            };
            match self
                .zone_trust(&signer, v, trust, chain, exchanges, 0)
                .await
            {
                ZoneTrust::Secure(keys) => match v.verify_rrset(&keys, &key.0, key.1, rdatas, sigs)
                {
                    Ok(verified) => {
                        chain.push(format!(
                            "{} {} verified with {}'s DNSKEY",
                            key.0, key.1, signer
                        ));
                        if verified.from_wildcard() {
                            let source = verified
                                .signed_owner()
                                .parent()
                                .expect("wildcard has a parent");
                            let claim = Claim::Expanded { source };
                            if let Err(r) = self.check_denial(&keys, &authority, &name, claim, v) {
                                return Status::Bogus(r);
                            }
                            chain.push(format!("{name}: wildcard expansion proven"));
                        }
                        secured_any = true;
                    }
                    Err(r) => return Status::Bogus(r),
                },
                ZoneTrust::Insecure(r) => return Status::Insecure(r),
                ZoneTrust::Bogus(r) => return Status::Bogus(r),
            }
            if key.1 == qtype {
                return Status::Secure;
            }
            // CNAME: continue with the target.
            match Name::from_wire(&rdatas[0]) {
                Ok(target) => name = target,
                Err(_) => return Status::Bogus(Reason::new(Ede::DNSSEC_BOGUS, "malformed CNAME")),
            }
        }
        // Negative answer for `name` (possibly after a CNAME chain).
        let claim = match message.rcode() {
            Rcode::NXDOMAIN => Claim::NxDomain,
            Rcode::NOERROR => Claim::NoData(qtype),
            other if secured_any => {
                return Status::Bogus(Reason::new(
                    Ede::OTHER,
                    format!("RCODE {other} after a verified CNAME"),
                ))
            }
            other => {
                return Status::Indeterminate(Reason::new(Ede::OTHER, format!("RCODE {other}")))
            }
        };
        let soa = authority
            .sets
            .keys()
            .find(|(_, t)| *t == RrType::SOA)
            .cloned();
        let Some(soa_key) = soa else {
            return Status::Bogus(Reason::new(
                Ede::NSEC_MISSING,
                format!("negative answer for {name} without SOA"),
            ));
        };
        let Some(signer) = authority.signer(&soa_key) else {
            return self.unsigned(&soa_key.0, trust, v, chain, exchanges).await;
        };
        let keys = match self
            .zone_trust(&signer, v, trust, chain, exchanges, 0)
            .await
        {
            ZoneTrust::Secure(k) => k,
            ZoneTrust::Insecure(r) => return Status::Insecure(r),
            ZoneTrust::Bogus(r) => return Status::Bogus(r),
        };
        let (rdatas, sigs) = &authority.sets[&soa_key];
        if let Err(r) = v.verify_rrset(&keys, &soa_key.0, RrType::SOA, rdatas, sigs) {
            return Status::Bogus(r);
        }
        match self.check_denial(&keys, &authority, &name, claim.clone(), v) {
            Ok(()) => {
                chain.push(format!(
                    "{name}: {claim:?} proven by {}'s denial records",
                    signer
                ));
                Status::Secure
            }
            Err(r) => Status::Bogus(r),
        }
    }

    /// Verifies the NSEC/NSEC3 RRsets of `authority` with `keys` and checks they prove `claim`.
    fn check_denial(
        &self,
        keys: &TrustedKeys,
        authority: &Grouped,
        name: &Name,
        claim: Claim,
        v: &mut Validator<'_>,
    ) -> Result<(), Reason> {
        let mut nsec = Vec::new();
        let mut nsec3 = Vec::new();
        for ((owner, t), (rdatas, sigs)) in &authority.sets {
            if *t != RrType::NSEC && *t != RrType::NSEC3 {
                continue;
            }
            v.verify_rrset(keys, owner, *t, rdatas, sigs)?;
            let list = if *t == RrType::NSEC {
                &mut nsec
            } else {
                &mut nsec3
            };
            list.extend(rdatas.iter().map(|r| (owner.clone(), r.clone())));
        }
        if !nsec3.is_empty() {
            check_nsec3(keys.zone(), name, claim, &nsec3)
        } else if !nsec.is_empty() {
            check_nsec(keys.zone(), name, claim, &nsec)
        } else {
            Err(Reason::new(
                Ede::NSEC_MISSING,
                format!("no NSEC or NSEC3 records for {name}"),
            ))
        }
    }

    /// An answer without RRSIGs: Insecure if its zone is provably unsigned, else Bogus.
    async fn unsigned(
        &mut self,
        owner: &Name,
        trust: &mut HashMap<Name, ZoneTrust>,
        v: &mut Validator<'_>,
        chain: &mut Vec<String>,
        exchanges: &mut Vec<ExchangeInfo>,
    ) -> Status {
        // Find the enclosing zone via its SOA, then ask whether that zone is secure.
        let zone = match self.find_zone(owner, exchanges).await {
            Some(z) => z,
            None => {
                return Status::Bogus(Reason::new(
                    Ede::RRSIGS_MISSING,
                    format!("no RRSIG for {owner}"),
                ))
            }
        };
        match self.zone_trust(&zone, v, trust, chain, exchanges, 0).await {
            ZoneTrust::Insecure(r) => Status::Insecure(r),
            ZoneTrust::Bogus(r) => Status::Bogus(r),
            ZoneTrust::Secure(_) => Status::Bogus(Reason::new(
                Ede::RRSIGS_MISSING,
                format!("{owner} is in signed zone {zone} but has no RRSIG"),
            )),
        }
    }

    async fn find_zone(&mut self, owner: &Name, exchanges: &mut Vec<ExchangeInfo>) -> Option<Name> {
        let mut cur = Some(owner.clone());
        while let Some(n) = cur {
            let m = self.lookup(&n, RrType::SOA, exchanges).await.ok()?;
            if m.answers
                .iter()
                .any(|r| r.rtype == RrType::SOA && r.owner == n)
            {
                return Some(n);
            }
            cur = n.parent();
        }
        None
    }

    /// Establishes (and memoises) trust in `zone`'s DNSKEYs.
    fn zone_trust<'a, 'v: 'a>(
        &'a mut self,
        zone: &'a Name,
        v: &'a mut Validator<'v>,
        trust: &'a mut HashMap<Name, ZoneTrust>,
        chain: &'a mut Vec<String>,
        exchanges: &'a mut Vec<ExchangeInfo>,
        depth: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ZoneTrust> + 'a>> {
        Box::pin(async move {
            if let Some(t) = trust.get(zone) {
                return t.clone();
            }
            let result = self
                .zone_trust_uncached(zone, v, trust, chain, exchanges, depth)
                .await;
            trust.insert(zone.clone(), result.clone());
            result
        })
    }

    async fn zone_trust_uncached(
        &mut self,
        zone: &Name,
        v: &mut Validator<'_>,
        trust: &mut HashMap<Name, ZoneTrust>,
        chain: &mut Vec<String>,
        exchanges: &mut Vec<ExchangeInfo>,
        depth: usize,
    ) -> ZoneTrust {
        let bogus = |text: String| ZoneTrust::Bogus(Reason::new(Ede::DNSSEC_BOGUS, text));
        if depth > MAX_DEPTH {
            return bogus(format!("chain of trust deeper than {MAX_DEPTH} zones"));
        }
        let ds_set: Vec<Vec<u8>> = if let Some(anchor) = self.config.anchors.ds_for(zone) {
            chain.push(format!(
                "{zone} DS: {} record(s) from the trust anchor",
                anchor.len()
            ));
            anchor.to_vec()
        } else {
            if self.config.anchors.closest(zone).is_none() {
                return ZoneTrust::Insecure(Reason::new(
                    Ede::OTHER,
                    format!("{zone} is outside every trust anchor"),
                ));
            }
            let m = match self.lookup(zone, RrType::DS, exchanges).await {
                Ok(m) => m,
                Err(e) => return bogus(format!("DS query for {zone} failed: {e}")),
            };
            let answers = Grouped::from(&m.answers);
            let key = (zone.clone(), RrType::DS);
            if let Some((rdatas, sigs)) = answers.sets.get(&key) {
                let Some(parent) = answers
                    .signer(&key)
                    .filter(|p| zone.is_subdomain_of(p) && p != zone)
                else {
                    return ZoneTrust::Bogus(Reason::new(
                        Ede::RRSIGS_MISSING,
                        format!("DS for {zone} is not signed by a parent zone"),
                    ));
                };
                let parent_keys = match self
                    .zone_trust(&parent, v, trust, chain, exchanges, depth + 1)
                    .await
                {
                    ZoneTrust::Secure(k) => k,
                    other => return other,
                };
                if let Err(r) = v.verify_rrset(&parent_keys, zone, RrType::DS, rdatas, sigs) {
                    return ZoneTrust::Bogus(r);
                }
                chain.push(format!(
                    "{zone} DS: {} record(s) verified with {parent}'s DNSKEY",
                    rdatas.len()
                ));
                rdatas.clone()
            } else {
                // No DS: the parent must prove it (an insecure delegation).
                let authority = Grouped::from(&m.authority);
                let signer = authority
                    .sets
                    .keys()
                    .find(|(_, t)| *t == RrType::SOA)
                    .and_then(|k| authority.signer(k));
                let Some(parent) = signer.filter(|p| zone.is_subdomain_of(p) && p != zone) else {
                    return ZoneTrust::Bogus(Reason::new(
                        Ede::NSEC_MISSING,
                        format!("no DS for {zone} and no signed proof of its absence"),
                    ));
                };
                let parent_keys = match self
                    .zone_trust(&parent, v, trust, chain, exchanges, depth + 1)
                    .await
                {
                    ZoneTrust::Secure(k) => k,
                    other => return other,
                };
                return match self.check_denial(&parent_keys, &authority, zone, Claim::NoDs, v) {
                    Ok(()) => {
                        chain.push(format!(
                            "{zone}: no DS, proven by {parent} (insecure delegation)"
                        ));
                        ZoneTrust::Insecure(Reason::new(
                            Ede::OTHER,
                            format!("{zone} is an unsigned delegation"),
                        ))
                    }
                    Err(r) => ZoneTrust::Bogus(r),
                };
            }
        };
        let m = match self.lookup(zone, RrType::DNSKEY, exchanges).await {
            Ok(m) => m,
            Err(e) => return bogus(format!("DNSKEY query for {zone} failed: {e}")),
        };
        let answers = Grouped::from(&m.answers);
        let empty = (Vec::new(), Vec::new());
        let (keys, sigs) = answers
            .sets
            .get(&(zone.clone(), RrType::DNSKEY))
            .unwrap_or(&empty);
        match v.trust_dnskeys(zone, &ds_set, keys, sigs) {
            Ok(Some(trusted)) => {
                chain.push(format!(
                    "{zone} DNSKEY: {} key(s), signed by a key matching its DS",
                    keys.len()
                ));
                ZoneTrust::Secure(trusted)
            }
            Ok(None) => ZoneTrust::Insecure(Reason::new(
                Ede::UNSUPPORTED_DNSKEY_ALGORITHM,
                format!("no DS for {zone} uses a supported algorithm and digest"),
            )),
            Err(r) => ZoneTrust::Bogus(r),
        }
    }

    fn query(&mut self, qname: &Name, qtype: RrType) -> Message {
        self.next_id = self.next_id.wrapping_mul(25_173).wrapping_add(13_849);
        let edns = Edns {
            udp_payload: self.config.udp_payload,
            ext_rcode: 0,
            version: 0,
            flags: EDNS_DO,
            options: Vec::new(),
        };
        let mut m = Message::query(
            self.next_id,
            Question {
                qname: qname.clone(),
                qtype,
                qclass: Class::IN,
            },
            false,
            Some(edns),
        );
        // We validate ourselves: ask for unvalidated data (RFC 4035 §3.2.2).
        m.flags |= FLAG_CD;
        m
    }

    async fn ask(
        &mut self,
        servers: &[SocketAddr],
        qname: &Name,
        qtype: RrType,
        exchanges: &mut Vec<ExchangeInfo>,
    ) -> Result<Message, ResolveError> {
        let query = self.query(qname, qtype);
        let mut last = None;
        for server in servers {
            match self.client.exchange(*server, &query).await {
                Ok((m, info)) => {
                    exchanges.push(info);
                    return Ok(m);
                }
                Err(e) => {
                    tracing::debug!(%server, error = %e, "server failed");
                    last = Some(e);
                }
            }
        }
        Err(last.map_or_else(
            || ResolveError::Lame("no servers".into()),
            ResolveError::from,
        ))
    }

    /// Gets the answer for (qname, qtype) from the cache, the forwarder, or by iteration.
    async fn lookup(
        &mut self,
        qname: &Name,
        qtype: RrType,
        exchanges: &mut Vec<ExchangeInfo>,
    ) -> Result<Message, ResolveError> {
        let now = Instant::now();
        if let Some(m) = self.cache.get(qname, qtype, now) {
            return Ok(m.clone());
        }
        let m = match self.config.mode.clone() {
            Mode::Forward(server) => self.ask(&[server], qname, qtype, exchanges).await?,
            Mode::Iterative { roots, port } => {
                self.iterate(qname, qtype, &roots, port, exchanges).await?
            }
        };
        self.cache.put(qname.clone(), qtype, m.clone(), now);
        Ok(m)
    }

    async fn iterate(
        &mut self,
        qname: &Name,
        qtype: RrType,
        roots: &[SocketAddr],
        port: u16,
        exchanges: &mut Vec<ExchangeInfo>,
    ) -> Result<Message, ResolveError> {
        // DS lives at the parent side of a cut (RFC 4035 §3.1.4.1): start above the name.
        let start = if qtype == RrType::DS {
            qname.parent().unwrap_or_else(Name::root)
        } else {
            qname.clone()
        };
        let mut servers = self
            .closest_servers(&start)
            .unwrap_or_else(|| roots.to_vec());
        for _ in 0..MAX_REFERRALS {
            let m = self.ask(&servers, qname, qtype, exchanges).await?;
            if m.has_flag(FLAG_AA) || !m.answers.is_empty() || m.rcode() != Rcode::NOERROR {
                return Ok(m);
            }
            let Some(cut) = m
                .authority
                .iter()
                .find(|r| r.rtype == RrType::NS)
                .map(|r| r.owner.clone())
            else {
                return Err(ResolveError::Lame(format!(
                    "no answer and no referral for {qname} {qtype}"
                )));
            };
            if qtype == RrType::DS && cut == *qname {
                // The parent referred us to the child for DS: the parent's answer is the referral.
                return Ok(m);
            }
            let addrs: Vec<SocketAddr> = m
                .additional
                .iter()
                .filter(|r| {
                    r.owner.is_subdomain_of(&cut)
                        || m.authority
                            .iter()
                            .any(|ns| ns.rtype == RrType::NS && ns.rdata == r.owner.as_wire())
                })
                .filter_map(|r| match (r.rtype, r.rdata.len()) {
                    (RrType::A, 4) => Some(SocketAddr::new(
                        std::net::Ipv4Addr::new(r.rdata[0], r.rdata[1], r.rdata[2], r.rdata[3])
                            .into(),
                        port,
                    )),
                    (RrType::AAAA, 16) => {
                        let octets: [u8; 16] = r.rdata.as_slice().try_into().ok()?;
                        Some(SocketAddr::new(
                            std::net::Ipv6Addr::from(octets).into(),
                            port,
                        ))
                    }
                    _ => None,
                })
                .collect();
            if addrs.is_empty() {
                return Err(ResolveError::Lame(format!(
                    "referral to {cut} without glue addresses"
                )));
            }
            self.delegations.insert(cut, addrs.clone());
            servers = addrs;
        }
        Err(ResolveError::Lame(format!(
            "more than {MAX_REFERRALS} referrals for {qname}"
        )))
    }

    fn closest_servers(&self, name: &Name) -> Option<Vec<SocketAddr>> {
        let mut cur = Some(name.clone());
        while let Some(n) = cur {
            if let Some(s) = self.delegations.get(&n) {
                return Some(s.clone());
            }
            cur = n.parent();
        }
        None
    }
}

/// Default per-exchange timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

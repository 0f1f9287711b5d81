//! Trust in zones (RFC 4035 §5.1–§5.2) and in RRsets (§5.3).
//!
//! The chain is driven by the signer names of the RRSIGs: to trust zone Z, get Z's DS from its
//! parent (signed by the parent, trusted the same way, recursively up to an anchor) or the
//! anchor itself, then Z's DNSKEY RRset, which a DS-matched key must sign. A missing DS must
//! be proven by the parent's NSEC/NSEC3 records (an unsigned delegation: Insecure).
//!
//! Trust never comes from above the closest trust anchor of the name being checked: an RRSIG
//! naming a signer above the anchor, or an SOA above it found for unsigned data, cannot turn
//! data below the anchor Insecure.
//!
//! Secure and Insecure zones are remembered across resolutions for their TTL (bounded, see
//! [`MEMO_CAPACITY`]); concurrent resolutions needing the same zone share one computation.
//!
//! Owns the trust anchors, the validator settings, trust per zone (remembered and in
//! flight), the blocking threads signature checks run on ([`Trust::verify`]) and the MTL
//! ladders verified by any resolution. [`Local`] is one resolution's part (its validator,
//! with the work budget, and the zones it has trusted), kept in its `Ctx`. The DS, DNSKEY and
//! SOA RRsets it needs come through [`Fetch::lookup`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use pqdns_core::dnssec::denial::{prove, Claim, VerifiedDenial};
use pqdns_core::dnssec::mtl::{LadderCache, SigTags};
use pqdns_core::dnssec::validate::{
    danger, Limits, PqPolicy, Reason, TrustedKeys, UnverifiedRRset, Validator, VerifiedRRset,
};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::wire::Ede;
use pqdns_core::{Name, RrType};
use tokio::sync::Semaphore;

use super::ctx::Ctx;
use super::fetch::Fetch;
use super::{lock, BoxFuture, Clock, Config, MAX_LADDERS};
use crate::anchor_update::{Change, ManagedAnchors};
use crate::anchors::TrustAnchors;
use crate::flight::Flights;
use crate::nta::NegativeTrustAnchors;
use crate::policy::insecure::InsecureDomains;
use crate::ttl_map::TtlMap;

/// Most zone cuts walked when establishing trust.
const MAX_DEPTH: usize = 16;

/// Most zones whose trust is remembered across resolutions.
const MEMO_CAPACITY: usize = 4096;

/// Trust established for a zone.
#[derive(Clone, Debug)]
enum ZoneTrust {
    Secure(Arc<TrustedKeys>),
    Insecure(Reason),
    Bogus(Reason),
}

/// Trust for every resolution of one resolver.
pub(super) struct Trust {
    anchors: TrustAnchors,
    /// The RFC 5011 state of the anchored zones' keys and its file, when automated updates
    /// are on ([`Config::anchor_state`]): a zone with a state takes its anchor from it.
    managed: Option<(std::path::PathBuf, Mutex<ManagedAnchors>)>,
    /// Negative trust anchors (RFC 7646) of the command line and the embedder.
    negative: Mutex<NegativeTrustAnchors>,
    /// The configuration file's insecure domains and negative trust anchors
    /// ([`crate::policy`]), replaced as a whole at each reload.
    configured: Mutex<(InsecureDomains, NegativeTrustAnchors)>,
    /// Zones found Insecure through a negative trust anchor.
    nta_hits: AtomicU64,
    memo: TrustMemo,
    profile: Profile,
    provider: Provider,
    pq_policy: PqPolicy,
    /// [`Config::ds_downgrade_protection`].
    ds_downgrade_protection: bool,
    /// Signature-verification limits per resolution.
    limits: Limits,
    /// For signature validity.
    clock: Clock,
    /// [`Config::verify_threads`] permits.
    verify_slots: Semaphore,
    /// MTL ladders verified by any resolution, by SigTag (draft-fregly-dnsop-slh-dsa-mtl-dnssec,
    /// draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
    ladders: Arc<Mutex<LadderCache>>,
}

/// One resolution's part of trust: its validator (whose work budget counts every signature
/// check of the resolution) and the zones it has trusted.
pub(super) struct Local {
    /// `None` only while a check runs on a blocking thread.
    validator: Option<Validator>,
    zones: HashMap<Name, ZoneTrust>,
}

impl Local {
    /// True if a condensed MTL signature could not be checked for want of its ladder.
    pub(super) fn ladder_missing(&self) -> bool {
        self.validator
            .as_ref()
            .is_some_and(Validator::ladder_missing)
    }
}

/// Trust remembered across resolutions, and the computations in flight.
struct TrustMemo {
    entries: Mutex<TtlMap<Name, ZoneTrust>>,
    flights: Flights<Name, ZoneTrust>,
}

impl TrustMemo {
    fn new() -> TrustMemo {
        TrustMemo {
            entries: Mutex::new(TtlMap::new(MEMO_CAPACITY)),
            flights: Flights::new(),
        }
    }

    fn get(&self, zone: &Name, now: Instant) -> Option<ZoneTrust> {
        lock(&self.entries).get(zone, now).cloned()
    }

    /// Remembers Secure and Insecure results for `ttl` seconds (capped at one day); Bogus ones
    /// are not kept, so a transient failure does not stick.
    fn put(&self, zone: &Name, trust: &ZoneTrust, ttl: u32, now: Instant) {
        if !matches!(trust, ZoneTrust::Bogus(_)) {
            lock(&self.entries).insert(zone.clone(), trust.clone(), ttl, now);
        }
    }
}

/// The outcome of checking one RRset.
pub(super) enum Checked {
    Secure(VerifiedRRset, Arc<TrustedKeys>),
    Insecure(Reason),
    Indeterminate(Reason),
    Bogus(Reason),
}

/// The outcome of checking data that has no RRSIGs.
pub(super) enum Unsigned {
    Insecure(Reason),
    Indeterminate(Reason),
    Bogus(Reason),
}

/// The outcome of looking for a proof that a delegation has no DS.
pub(super) enum NoDs {
    /// The parent's verified NSEC/NSEC3 records prove it: an unsigned delegation.
    Proven(VerifiedDenial),
    /// The parent zone is itself insecure.
    Insecure(Reason),
    Bogus(Reason),
}

fn bogus(ede: Ede, text: String) -> Reason {
    Reason::new(ede, text)
}

impl Trust {
    /// Trust from `config`'s anchors, validator settings and verification threads.
    pub(super) fn new(config: &Config) -> Trust {
        Trust {
            anchors: config.anchors.clone(),
            managed: config
                .anchor_state
                .as_ref()
                .map(|s| (s.path.clone(), Mutex::new(s.anchors.clone()))),
            negative: Mutex::new(config.negative_trust_anchors.clone()),
            configured: Mutex::default(),
            nta_hits: AtomicU64::new(0),
            memo: TrustMemo::new(),
            profile: config.profile.clone(),
            provider: config.provider.clone(),
            pq_policy: config.pq_policy,
            ds_downgrade_protection: config.ds_downgrade_protection,
            limits: config.limits,
            clock: Clock(config.now),
            verify_slots: Semaphore::new(config.verify_threads.max(1)),
            ladders: Arc::new(Mutex::new(LadderCache::new(MAX_LADDERS))),
        }
    }

    /// The negative trust anchors, to change at run time (RFC 7646 §6: added and removed by
    /// the operator); a change applies to the next resolution.
    pub(super) fn negative(&self) -> MutexGuard<'_, NegativeTrustAnchors> {
        lock(&self.negative)
    }

    /// Puts the configuration file's `insecure` domains and `negative` trust anchors in place
    /// of the previous file's, logging each anchor added or removed; true if anything
    /// changed.
    pub(super) fn set_configured(
        &self,
        insecure: InsecureDomains,
        negative: NegativeTrustAnchors,
    ) -> bool {
        let mut configured = lock(&self.configured);
        let (old_insecure, old_negative) = &*configured;
        for (domain, until) in negative.entries() {
            if !old_negative
                .entries()
                .any(|(d, e)| d == domain && e == until)
            {
                let until = pqdns_core::time::to_display(until);
                tracing::info!(%domain, %until, "negative trust anchor added (RFC 7646)");
            }
        }
        for (domain, _) in old_negative.entries() {
            if !negative.entries().any(|(d, _)| d == domain) {
                tracing::info!(%domain, "negative trust anchor removed (RFC 7646)");
            }
        }
        let changed = *old_insecure != insecure || *old_negative != negative;
        if changed {
            let domains: Vec<String> = insecure.names().iter().map(Name::to_string).collect();
            tracing::info!(domains = ?domains, "insecure domains in force");
        }
        *configured = (insecure, negative);
        changed
    }

    /// Removes the negative trust anchors (of every source) expired at `now` (UNIX seconds),
    /// logging each; returns them.
    pub(super) fn expire_negative(&self, now: u64) -> Vec<Name> {
        let mut gone = lock(&self.negative).expire(now);
        gone.append(&mut lock(&self.configured).1.expire(now));
        for domain in &gone {
            tracing::info!(%domain, "negative trust anchor expired (RFC 7646)");
        }
        gone
    }

    /// The earliest expiry of a negative trust anchor (UNIX seconds), if any.
    pub(super) fn next_negative_expiry(&self) -> Option<u64> {
        let runtime = lock(&self.negative).next_expiry();
        let file = lock(&self.configured).1.next_expiry();
        runtime.into_iter().chain(file).min()
    }

    /// Why `zone` is Insecure without validation, if it is: at or below an insecure domain,
    /// or a negative trust anchor in force (RFC 7646 §2: "as if it were unsigned"), counted.
    fn exempt(&self, zone: &Name) -> Option<Reason> {
        let now = self.clock.unix();
        let configured = lock(&self.configured);
        if let Some(domain) = configured.0.covering(zone) {
            let text = format!("{zone} is at or below the insecure domain {domain}");
            return Some(Reason::new(Ede::OTHER, text));
        }
        let nta = lock(&self.negative)
            .covering(zone, now)
            .or_else(|| configured.1.covering(zone, now))
            .cloned()?;
        self.nta_hits.fetch_add(1, Relaxed);
        let text = format!("{zone} is at or below the negative trust anchor {nta} (RFC 7646)");
        Some(Reason::new(Ede::OTHER, text))
    }

    /// Zones found Insecure through a negative trust anchor so far.
    pub(super) fn nta_hits(&self) -> u64 {
        self.nta_hits.load(Relaxed)
    }

    /// The SigTags of the newest ladders held, for a query asking for full MTL signatures.
    pub(super) fn held_ladders(&self) -> SigTags {
        lock(&self.ladders).recent_tags()
    }

    /// A new resolution's part: a validator with a fresh work budget.
    pub(super) fn local(&self) -> Local {
        let validator = Validator::new(
            &self.profile,
            &self.provider,
            self.clock.unix(),
            self.limits,
            self.pq_policy,
        )
        .with_ds_downgrade_protection(self.ds_downgrade_protection)
        .with_ladders(self.ladders.clone());
        Local {
            validator: Some(validator),
            zones: HashMap::new(),
        }
    }

    /// The closest trust anchor at or above `name`.
    pub(super) fn anchor(&self, name: &Name) -> Option<&Name> {
        self.anchors.closest(name)
    }

    /// The DS RDATA anchored at exactly `zone`: from its RFC 5011 state if it has one, else
    /// as configured.
    fn anchor_ds(&self, zone: &Name) -> Option<Vec<Vec<u8>>> {
        let configured = self.anchors.ds_for(zone)?;
        let managed = self
            .managed
            .as_ref()
            .and_then(|(_, m)| lock(m).ds_for(zone));
        Some(managed.unwrap_or_else(|| configured.to_vec()))
    }

    /// True if `zone` has a configured trust anchor and automated updates are on.
    pub(super) fn is_managed(&self, zone: &Name) -> bool {
        self.managed.is_some() && self.anchors.ds_for(zone).is_some()
    }

    /// Forgets the trust remembered for `zone`, so the next resolution establishes it from
    /// the anchors again.
    pub(super) fn forget(&self, zone: &Name) {
        lock(&self.memo.entries).remove(zone);
    }

    /// Applies `zone`'s DNSKEY RRset `rrset`, validated from its anchors at `now` (UNIX
    /// seconds), to its RFC 5011 state ([`ManagedAnchors::observe`]; `self_signed_revoked`
    /// lists the revoked keys whose signature over the RRset verified) and writes the state
    /// file if anything changed. Returns the changes.
    ///
    /// # Errors
    /// Writing the state file failed (the state in memory is updated all the same).
    pub(super) fn observe_anchor(
        &self,
        zone: &Name,
        rrset: &[Vec<u8>],
        self_signed_revoked: &[Vec<u8>],
        now: u64,
    ) -> std::io::Result<Vec<Change>> {
        let (Some((path, managed)), Some(configured)) = (&self.managed, self.anchors.ds_for(zone))
        else {
            return Ok(Vec::new());
        };
        let mut m = lock(managed);
        let revoked = |k: &[u8]| self_signed_revoked.iter().any(|r| r == k);
        let changes = m.observe(zone, rrset, configured, revoked, now);
        if !changes.is_empty() {
            m.save(path)?;
        }
        Ok(changes)
    }

    /// True if a signature by the DNSKEY `key` of `rrset`'s owner (RDATA as published, its
    /// flags included in the key tag) over `rrset` verifies; on a blocking thread.
    pub(super) async fn signed_by(&self, key: Vec<u8>, rrset: UnverifiedRRset) -> bool {
        let mut validator = Validator::new(
            &self.profile,
            &self.provider,
            self.clock.unix(),
            self.limits,
            PqPolicy::AnyAlgorithm,
        );
        let _permit = self.verify_slots.acquire().await;
        tokio::task::spawn_blocking(move || {
            let keys = danger::trust_anchor_dnskeys(&rrset.owner, &[key]);
            validator.verify_rrset(&keys, &rrset).is_ok()
        })
        .await
        .unwrap_or(false)
    }

    /// Runs signature checks on a blocking thread with the resolution's validator (so its work
    /// budget counts them), at most `verify_threads` at a time.
    async fn verify<T, F>(&self, ctx: &mut Ctx, check: F) -> Result<T, Reason>
    where
        F: FnOnce(&mut Validator) -> Result<T, Reason> + Send + 'static,
        T: Send + 'static,
    {
        let _permit = self
            .verify_slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut validator = ctx
            .trust()
            .validator
            .take()
            .expect("the validator is returned after every check");
        let job = tokio::task::spawn_blocking(move || {
            let out = check(&mut validator);
            (validator, out)
        });
        match job.await {
            Ok((validator, out)) => {
                ctx.trust().validator = Some(validator);
                out
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down and will drop this task.
            Err(_) => std::future::pending().await,
        }
    }

    /// Verifies `sets` with `keys` on a blocking thread.
    pub(super) async fn verify_all(
        &self,
        keys: &Arc<TrustedKeys>,
        sets: Vec<UnverifiedRRset>,
        ctx: &mut Ctx,
    ) -> Result<Vec<VerifiedRRset>, Reason> {
        if sets.is_empty() {
            return Ok(Vec::new());
        }
        let keys = keys.clone();
        self.verify(ctx, move |v| {
            sets.iter().map(|s| v.verify_rrset(&keys, s)).collect()
        })
        .await
    }

    /// Checks one RRset of a response: verified with its signer's trusted keys, or shown to be
    /// in an unsigned zone, or neither (Bogus).
    pub(super) async fn check_rrset(
        &self,
        rrset: &UnverifiedRRset,
        fetch: &Fetch,
        ctx: &mut Ctx,
    ) -> Checked {
        let owner = &rrset.owner;
        let Some(anchor) = self.anchors.closest(owner).cloned() else {
            return Checked::Indeterminate(Reason::new(
                Ede::OTHER,
                format!("no trust anchor covers {owner}"),
            ));
        };
        // The closest (longest) signer first: it is the zone that holds the RRset.
        let mut signers: Vec<Name> = rrset
            .signers()
            .into_iter()
            .filter(|s| owner.is_subdomain_of(s))
            .collect();
        signers.sort_by_key(|s| std::cmp::Reverse(s.label_count()));
        let Some(signer) = signers.into_iter().next() else {
            return match self.unsigned(owner, fetch, ctx).await {
                Unsigned::Insecure(r) => Checked::Insecure(r),
                Unsigned::Indeterminate(r) => Checked::Indeterminate(r),
                Unsigned::Bogus(r) => Checked::Bogus(r),
            };
        };
        if !signer.is_subdomain_of(&anchor) {
            return Checked::Bogus(bogus(
                Ede::DNSSEC_BOGUS,
                format!(
                    "RRSIG over {owner} {} names signer {signer}, above the trust anchor {anchor}",
                    rrset.rtype
                ),
            ));
        }
        match self.zone_trust(&signer, fetch, ctx, 0).await {
            ZoneTrust::Secure(keys) => match self.verify_all(&keys, vec![rrset.clone()], ctx).await
            {
                Ok(mut v) => {
                    let v = v.remove(0);
                    ctx.note(format!(
                        "{owner} {} verified with {signer}'s DNSKEY (algorithm {}, TTL {})",
                        rrset.rtype,
                        v.algorithms()
                            .iter()
                            .map(|a| a.0.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                        v.ttl()
                    ));
                    Checked::Secure(v, keys)
                }
                Err(r) => Checked::Bogus(r),
            },
            ZoneTrust::Insecure(r) => Checked::Insecure(r),
            ZoneTrust::Bogus(r) => Checked::Bogus(r),
        }
    }

    /// Data without RRSIGs at `owner`: Insecure if its zone is provably unsigned, else Bogus.
    /// The zone is found through SOA queries but never above the closest trust anchor; none
    /// are needed when a zone at or above `owner` (below the anchor) is already known to be
    /// Insecure ([`Trust::known_insecure`]).
    pub(super) async fn unsigned(&self, owner: &Name, fetch: &Fetch, ctx: &mut Ctx) -> Unsigned {
        let Some(anchor) = self.anchors.closest(owner).cloned() else {
            return Unsigned::Indeterminate(Reason::new(
                Ede::OTHER,
                format!("no trust anchor covers {owner}"),
            ));
        };
        if let Some(r) = self.known_insecure(owner, &anchor, ctx) {
            return Unsigned::Insecure(r);
        }
        let zone = match self.find_zone(owner, &anchor, fetch, ctx).await {
            Some(z) => z,
            None => anchor,
        };
        match self.zone_trust(&zone, fetch, ctx, 0).await {
            ZoneTrust::Insecure(r) => Unsigned::Insecure(r),
            ZoneTrust::Bogus(r) => Unsigned::Bogus(r),
            ZoneTrust::Secure(_) => Unsigned::Bogus(bogus(
                Ede::RRSIGS_MISSING,
                format!("{owner} is in signed zone {zone} but has no RRSIG"),
            )),
        }
    }

    /// The Insecure verdict of the closest zone at or above `owner`, strictly below `anchor`,
    /// that this resolution or an earlier one (within its TTL) found Insecure. RFC 4035 §4.3:
    /// below an unsigned delegation (or one whose DS algorithms are all unsupported) every
    /// name is Insecure, whatever zone holds it, so the SOA queries that would find that zone
    /// are not needed (a name in an unsigned zone then costs one query, not two). Secure
    /// zones prove nothing here: `owner` may sit in an unsigned zone below them.
    fn known_insecure(&self, owner: &Name, anchor: &Name, ctx: &mut Ctx) -> Option<Reason> {
        let now = Instant::now();
        let mut cur = Some(owner.clone());
        while let Some(n) = cur {
            if n == *anchor || !n.is_subdomain_of(anchor) {
                return None;
            }
            let trust = ctx
                .trust()
                .zones
                .get(&n)
                .cloned()
                .or_else(|| self.memo.get(&n, now));
            if let Some(ZoneTrust::Insecure(r)) = trust {
                ctx.note(format!("{owner}: below {n}, known to be Insecure"));
                return Some(r);
            }
            cur = n.parent();
        }
        None
    }

    /// The closest name at or above `owner`, strictly below `anchor`, that has an SOA.
    async fn find_zone(
        &self,
        owner: &Name,
        anchor: &Name,
        fetch: &Fetch,
        ctx: &mut Ctx,
    ) -> Option<Name> {
        let mut cur = Some(owner.clone());
        while let Some(n) = cur {
            if n == *anchor || !n.is_subdomain_of(anchor) {
                return None;
            }
            let m = fetch.lookup(&n, RrType::SOA, ctx).await.ok()?;
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
    fn zone_trust<'a>(
        &'a self,
        zone: &'a Name,
        fetch: &'a Fetch,
        ctx: &'a mut Ctx,
        depth: usize,
    ) -> BoxFuture<'a, ZoneTrust> {
        Box::pin(async move {
            if let Some(t) = ctx.trust().zones.get(zone) {
                return t.clone();
            }
            // Below an insecure domain or a negative trust anchor in force, as if unsigned.
            // Checked before the memo, which may hold the zone's trust from before (or after).
            if let Some(reason) = self.exempt(zone) {
                ctx.note(reason.text.clone());
                let trust = ZoneTrust::Insecure(reason);
                ctx.trust().zones.insert(zone.clone(), trust.clone());
                return trust;
            }
            if depth > MAX_DEPTH {
                return ZoneTrust::Bogus(bogus(
                    Ede::DNSSEC_BOGUS,
                    format!("chain of trust deeper than {MAX_DEPTH} zones at {zone}"),
                ));
            }
            let trust = match self.memo.get(zone, Instant::now()) {
                Some(t) => {
                    ctx.note(format!(
                        "{zone}: trust established by an earlier resolution"
                    ));
                    t
                }
                None => {
                    self.memo
                        .flights
                        .run(zone, || async {
                            let (t, ttl) = self.zone_trust_uncached(zone, fetch, ctx, depth).await;
                            self.memo.put(zone, &t, ttl, Instant::now());
                            t
                        })
                        .await
                }
            };
            ctx.trust().zones.insert(zone.clone(), trust.clone());
            trust
        })
    }

    /// Trust in `zone` and how long it may be remembered, seconds.
    async fn zone_trust_uncached(
        &self,
        zone: &Name,
        fetch: &Fetch,
        ctx: &mut Ctx,
        depth: usize,
    ) -> (ZoneTrust, u32) {
        let fail = |text: String| (ZoneTrust::Bogus(bogus(Ede::DNSSEC_BOGUS, text)), 0);
        let ds = if let Some(anchor) = self.anchor_ds(zone) {
            ctx.note(format!(
                "{zone} DS: {} record(s) from the trust anchor",
                anchor.len()
            ));
            danger::trust_anchor_ds(zone, anchor)
        } else {
            let Some(anchor) = self.anchors.closest(zone).cloned() else {
                return fail(format!("no trust anchor at or above {zone}"));
            };
            let m = match fetch.lookup(zone, RrType::DS, ctx).await {
                Ok(m) => m,
                Err(e) => return fail(format!("DS query for {zone} failed: {e}")),
            };
            let answers = UnverifiedRRset::group(&m.answers);
            match answers
                .into_iter()
                .find(|s| s.owner == *zone && s.rtype == RrType::DS && !s.rdatas.is_empty())
            {
                Some(ds_set) => {
                    let parent = ds_set.signers().into_iter().find(|p| {
                        zone.is_subdomain_of(p) && p != zone && p.is_subdomain_of(&anchor)
                    });
                    let Some(parent) = parent else {
                        return (
                            ZoneTrust::Bogus(bogus(
                                Ede::RRSIGS_MISSING,
                                format!(
                                    "DS for {zone} is not signed by a parent zone at or below \
                                     the trust anchor {anchor}"
                                ),
                            )),
                            0,
                        );
                    };
                    let parent_keys = match self.zone_trust(&parent, fetch, ctx, depth + 1).await {
                        ZoneTrust::Secure(k) => k,
                        other => return (other, 0),
                    };
                    match self.verify_all(&parent_keys, vec![ds_set], ctx).await {
                        Ok(mut v) => {
                            let v = v.remove(0);
                            ctx.note(format!(
                                "{zone} DS: {} record(s) verified with {parent}'s DNSKEY",
                                v.rdatas().len()
                            ));
                            v
                        }
                        Err(r) => return (ZoneTrust::Bogus(r), 0),
                    }
                }
                None => {
                    let authority = UnverifiedRRset::group(&m.authority);
                    return match self.prove_no_ds(zone, &authority, fetch, ctx, depth).await {
                        NoDs::Proven(denial) => {
                            ctx.note(format!(
                                "{zone}: no DS, proven by {}'s denial records (unsigned delegation)",
                                denial.zone()
                            ));
                            let ttl = denial.rrsets().iter().map(VerifiedRRset::ttl).min();
                            (
                                ZoneTrust::Insecure(Reason::new(
                                    Ede::OTHER,
                                    format!("{zone} is an unsigned delegation"),
                                )),
                                ttl.unwrap_or(0),
                            )
                        }
                        NoDs::Insecure(r) => (ZoneTrust::Insecure(r), 0),
                        NoDs::Bogus(r) => (ZoneTrust::Bogus(r), 0),
                    };
                }
            }
        };
        let m = match fetch.lookup(zone, RrType::DNSKEY, ctx).await {
            Ok(m) => m,
            Err(e) => return fail(format!("DNSKEY query for {zone} failed: {e}")),
        };
        let dnskeys = UnverifiedRRset::group(&m.answers)
            .into_iter()
            .find(|s| s.owner == *zone && s.rtype == RrType::DNSKEY)
            .unwrap_or_else(|| UnverifiedRRset {
                owner: zone.clone(),
                rtype: RrType::DNSKEY,
                class: pqdns_core::Class::IN,
                ttl: 0,
                rdatas: Vec::new(),
                rrsigs: Vec::new(),
                rrsig_ttl: 0,
            });
        let count = dnskeys.rdatas.len();
        let ds_ttl = ds.ttl();
        match self
            .verify(ctx, move |v| v.trust_dnskeys(&ds, &dnskeys))
            .await
        {
            Ok(Some(trusted)) => {
                ctx.note(format!(
                    "{zone} DNSKEY: {count} key(s), signed by a key matching its DS"
                ));
                let ttl = trusted.ttl();
                (ZoneTrust::Secure(Arc::new(trusted)), ttl)
            }
            Ok(None) => (
                ZoneTrust::Insecure(Reason::new(
                    Ede::UNSUPPORTED_DNSKEY_ALGORITHM,
                    format!("no DS for {zone} uses a supported algorithm and digest"),
                )),
                ds_ttl,
            ),
            Err(r) => (ZoneTrust::Bogus(r), 0),
        }
    }

    /// Looks in `authority` (a response about `zone`: its DS query, or a referral to it) for
    /// the parent's proof that `zone` has no DS.
    pub(super) async fn prove_no_ds(
        &self,
        zone: &Name,
        authority: &[UnverifiedRRset],
        fetch: &Fetch,
        ctx: &mut Ctx,
        depth: usize,
    ) -> NoDs {
        let anchor = self.anchors.closest(zone).cloned();
        let denial_sets: Vec<&UnverifiedRRset> = authority
            .iter()
            .filter(|s| s.rtype == RrType::NSEC || s.rtype == RrType::NSEC3)
            .collect();
        let parent = denial_sets.iter().flat_map(|s| s.signers()).find(|p| {
            zone.is_subdomain_of(p)
                && p != zone
                && anchor.as_ref().is_some_and(|a| p.is_subdomain_of(a))
        });
        let Some(parent) = parent else {
            return NoDs::Bogus(bogus(
                Ede::NSEC_MISSING,
                format!("no DS for {zone} and no signed proof of its absence"),
            ));
        };
        let keys = match self.zone_trust(&parent, fetch, ctx, depth + 1).await {
            ZoneTrust::Secure(k) => k,
            ZoneTrust::Insecure(r) => return NoDs::Insecure(r),
            ZoneTrust::Bogus(r) => return NoDs::Bogus(r),
        };
        let sets: Vec<UnverifiedRRset> = denial_sets
            .into_iter()
            .filter(|s| s.signers().contains(&parent))
            .cloned()
            .collect();
        let verified = match self.verify_all(&keys, sets, ctx).await {
            Ok(v) => v,
            Err(r) => return NoDs::Bogus(r),
        };
        match prove(&parent, zone, Claim::NoDs, &verified) {
            Ok(d) => NoDs::Proven(d),
            Err(r) => NoDs::Bogus(r),
        }
    }
}

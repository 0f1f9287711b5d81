//! The resolver service's answer cache: whole responses, prepared in wire format once and
//! served by patching a few bytes (the prepared-answer technique of pqdns-server's answer
//! cache), so a cache hit allocates nothing and runs on the UDP receiving thread.
//!
//! - Key: QNAME (lowercased), QTYPE, QCLASS, and the query bits that change the content: DO
//!   (RRSIGs, NSEC, NSEC3 included, RFC 4035 §3.2.1), CD (unvalidated data, RFC 4035 §3.2.2)
//!   whether the query had EDNS (an OPT record in the response, RFC 6891 §7) and CO with DO
//!   (the RCODE of a compact denial of existence and CO in the response, RFC 9824 §5.1).
//! - Served: the prepared bytes with the query's ID, RD bit and QNAME case copied in, AD set
//!   when the data was Secure and the query has DO or AD (RFC 6840 §5.7-5.8), and every TTL
//!   lowered by the seconds since it was stored (RFC 1035 §7.1). Our COOKIE option (RFC 7873
//!   §5.2.3-5.2.5), different for every client and query, is never stored: it is appended to
//!   the OPT record (the last record) of each response served. Over UDP, a response larger
//!   than the client accepts becomes its header, question and OPT with TC set (RFC 6891
//!   §7, RFC 1035 §4.2.1).
//! - Lifetime: the smallest TTL in the response (negative answers: min(SOA TTL, SOA MINIMUM),
//!   RFC 2308 §5; failures: [`FAILURE_TTL`], RFC 9520 §3.2), clamped to the configured floor
//!   and cap; TTLs above the cap are lowered to it when stored.
//! - Serve-stale (RFC 8767, [`super::stale`]): a response whose data was Secure or proven
//!   Insecure stays for [`CacheLimits::max_stale`] seconds past its lifetime, served then
//!   only as a stale answer (TTLs 30 s, EDE 3), never as a cache hit; a failure never
//!   replaces it.
//! - Bound: a size in bytes, counting each entry's key, message and offsets plus
//!   [`ENTRY_OVERHEAD`]. The cache is split in [`SHARDS`] shards, each with its share; a full
//!   shard drops its entries past use (expired, and past their stale window), then arbitrary
//!   ones (hash order), until the new one fits.
//! - Synthesised answers (RFC 8198) are not kept per QNAME: a flood of random names of one
//!   span would push the popular answers out. They are kept per denial proof instead
//!   (`DenialProof` of [`crate::resolve`]: the kept NSEC/NSEC3 records and closest encloser
//!   that prove the name absent), written with uncompressed names, so the next name the same proof
//!   covers is answered by splicing its question into the kept bytes. These live apart, in
//!   at most 1/[`PROVEN_SHARE`] of the bytes, never go stale, and are used only after the
//!   resolver has checked the new name against the records ([`crate::Resolver`]'s
//!   `denial_proof`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use pqdns_core::wire::{replay, Rcode, FLAG_AD, FLAG_RD, FLAG_TC, HEADER_LEN, OPTION_COOKIE};
use pqdns_net::cookie::RESPONSE_COOKIE_LEN;
use quick_cache::sync::Cache as QuickCache;
use quick_cache::Weighter;

use crate::resolve::DenialProof;

use super::query::ClientQuery;
use super::response::Written;
use super::stale::{DEFAULT_MAX_STALE, MAX_MAX_STALE, STALE_ANSWER_TTL, STALE_EDE_OPTION};

/// How long a failure (SERVFAIL) is cached, seconds (RFC 9520 §3.2: at least 1 s, at most
/// 5 minutes).
pub const FAILURE_TTL: u32 = 5;
/// Bytes charged per entry besides its key, message and TTL offsets (map slot, allocations).
pub const ENTRY_OVERHEAD: usize = 96;
/// Number of shards, each behind its own lock.
pub const SHARDS: usize = 16;
/// Longest key: 5 bytes of flags, type and class, and a 255-byte name.
const MAX_KEY: usize = 5 + 255;
/// The responses kept per denial proof get at most 1/`PROVEN_SHARE` of
/// [`CacheLimits::bytes`], the shards the rest.
pub const PROVEN_SHARE: usize = 16;

/// Cache settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheLimits {
    /// Memory for cached responses, bytes.
    pub bytes: usize,
    /// Smallest lifetime of a cached response, seconds (TTLs in it still count down from
    /// their own values, never below 0).
    pub min_ttl: u32,
    /// Largest lifetime of a cached response, and largest TTL served, seconds.
    pub max_ttl: u32,
    /// How long a response with validated data (Secure or Insecure) stays servable as a stale
    /// answer after its lifetime, seconds (RFC 8767 §4; 0: no serve-stale; larger values than
    /// [`MAX_MAX_STALE`] count as it).
    pub max_stale: u32,
}

impl Default for CacheLimits {
    /// 64 MiB, lifetimes 0 s to 1 day (RFC 8767 §4 suggests capping TTLs at 7 days), stale
    /// answers for a day after ([`DEFAULT_MAX_STALE`]).
    fn default() -> CacheLimits {
        CacheLimits {
            bytes: 64 << 20,
            min_ttl: 0,
            max_ttl: 86_400,
            max_stale: DEFAULT_MAX_STALE,
        }
    }
}

/// A response prepared for serving.
#[derive(Debug)]
struct Prepared {
    /// The response with ID 0, RD and AD clear.
    message: Box<[u8]>,
    /// Offsets of the TTL fields of every record but OPT.
    ttl_offsets: Box<[u16]>,
    /// End of the question section.
    question_end: u16,
    /// Start of the OPT record (the last record), if any.
    opt_at: Option<u16>,
    /// The data was Secure: AD is set for clients that want it.
    secure: bool,
    stored: Instant,
    expires: Instant,
    /// Until when it may be served stale (`expires` unless its data was validated).
    stale_until: Instant,
    /// NOERROR or NXDOMAIN: worth a prefetch ([`super::prefetch`]).
    answered: bool,
    /// A hit has claimed its prefetch.
    prefetch_claimed: AtomicBool,
}

/// Where a response is written: at `out[base..]` (`out` truncated to `base` first), at most
/// `limit` bytes (larger ones are sent truncated), with `cookie` as its COOKIE option data
/// (RFC 7873 §5.2.3, made for this query; only if the response has an OPT record).
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) base: usize,
    pub(crate) limit: usize,
    pub(crate) cookie: Option<&'a [u8; RESPONSE_COOKIE_LEN]>,
}

impl Sink<'_> {
    /// True if a response of `len` bytes fits within the limit, with the COOKIE option
    /// appended when it has an OPT record (`opt`).
    pub(crate) fn fits(&self, len: usize, opt: bool) -> bool {
        let cookie = self.cookie.filter(|_| opt).map_or(0, |c| 4 + c.len());
        len + cookie <= self.limit
    }
}

impl Prepared {
    /// Its length when written for `query`, whose question goes in place of the stored one,
    /// bytes (without the COOKIE option).
    fn len_for(&self, query: &ClientQuery) -> usize {
        HEADER_LEN + query.qname.as_wire().len() + 4 + self.message.len()
            - usize::from(self.question_end)
    }

    fn size(&self, key: usize) -> usize {
        key + self.message.len() + 2 * self.ttl_offsets.len() + ENTRY_OVERHEAD
    }

    /// True if it may be served stale once expired.
    fn can_go_stale(&self) -> bool {
        self.expires < self.stale_until
    }

    /// Writes the response to `query` to `to`; returns its length. A `stale` answer has every
    /// TTL [`STALE_ANSWER_TTL`] and, with an OPT record, EDE 3 (RFC 8767 §4).
    fn write(&self, query: &ClientQuery, to: &mut Sink<'_>, now: Instant, stale: bool) -> usize {
        let ede: &[u8] = if stale && self.opt_at.is_some() {
            &STALE_EDE_OPTION
        } else {
            &[]
        };
        let whole = to.fits(self.len_for(query) + ede.len(), self.opt_at.is_some());
        let Sink {
            ref mut out,
            base,
            limit: _,
            cookie,
        } = *to;
        out.truncate(base);
        let m = &self.message;
        let qend = usize::from(self.question_end);
        // The query's question goes in place of the stored one: the same bytes but for the
        // QNAME's case for an entry of the query's key; another name of the same proof for a
        // response kept per denial proof, whose later names are uncompressed.
        let qname = query.qname.as_wire();
        let question_end = HEADER_LEN + qname.len() + 4;
        let moved = |at: u16| base + question_end + usize::from(at) - qend;
        let head = |out: &mut Vec<u8>| {
            out.extend_from_slice(&m[..HEADER_LEN]);
            out.extend_from_slice(qname);
            out.extend_from_slice(&query.qtype.0.to_be_bytes());
            out.extend_from_slice(&query.qclass.0.to_be_bytes());
        };
        let body = &m[qend..];
        let cookie = cookie.filter(|_| self.opt_at.is_some());
        let extra = cookie.map_or(0, |c| 4 + c.len()) + ede.len();
        // Where the OPT record starts in `out`.
        let opt_at;
        if whole {
            opt_at = self.opt_at.map(moved);
            head(out);
            out.extend_from_slice(body);
            let elapsed = u32::try_from(now.saturating_duration_since(self.stored).as_secs())
                .unwrap_or(u32::MAX);
            for &at in self.ttl_offsets.iter() {
                let at = moved(at);
                let ttl = u32::from_be_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
                let ttl = if stale {
                    STALE_ANSWER_TTL
                } else {
                    ttl.saturating_sub(elapsed)
                };
                out[at..at + 4].copy_from_slice(&ttl.to_be_bytes());
            }
        } else {
            // Too large for the client: header, question and OPT, with TC (RFC 6891 §7).
            head(out);
            let opt = self.opt_at.map_or(&[][..], |at| &m[usize::from(at)..]);
            opt_at = (!opt.is_empty()).then_some(base + question_end);
            out.extend_from_slice(opt);
            out[base + 6..base + 12].copy_from_slice(&[0, 0, 0, 0, 0, u8::from(!opt.is_empty())]);
            out[base + 2] |= (FLAG_TC >> 8) as u8;
        }
        if let (true, Some(at)) = (extra > 0, opt_at) {
            // The OPT record is last: the options go at the end, its RDLENGTH grows.
            let rdlen = usize::from(u16::from_be_bytes([out[at + 9], out[at + 10]])) + extra;
            if let Ok(rdlen) = u16::try_from(rdlen) {
                out[at + 9..at + 11].copy_from_slice(&rdlen.to_be_bytes());
                out.extend_from_slice(ede);
                if let Some(cookie) = cookie {
                    out.extend_from_slice(&OPTION_COOKIE.to_be_bytes());
                    out.extend_from_slice(&(RESPONSE_COOKIE_LEN as u16).to_be_bytes());
                    out.extend_from_slice(cookie);
                }
            }
        }
        // ID and RD (the question is the client's already); AD for Secure data to clients
        // that want it (RFC 6840 §5.7-5.8).
        replay::patch_for_query(&mut out[base..], query.header, FLAG_RD, qname);
        if self.secure && query.wants_ad() {
            out[base + 3] |= FLAG_AD as u8;
        }
        out.len() - base
    }
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Box<[u8]>, Prepared>,
    bytes: usize,
}

/// The cache; see the module documentation. Shared by all serving threads (`&self`).
#[derive(Debug)]
pub struct ResponseCache {
    shards: Vec<RwLock<Shard>>,
    /// Responses synthesised from denial proofs (RFC 8198), by proof and the query bits.
    proven: QuickCache<ProvenKey, Arc<Proven>, ByBytes>,
    limits: CacheLimits,
}

/// Where [`ResponseCache::serve`] keeps the response it serves.
#[derive(Debug)]
pub(crate) enum Keep {
    /// Nowhere.
    Not,
    /// Under the query's key.
    ForQuery,
    /// Under the denial proof it was synthesised from (written with
    /// [`super::response::Names::Uncompressed`]), with the DNSSEC algorithms that validated
    /// its records (for metrics).
    ForProof(DenialProof, Box<[u8]>),
}

/// The key of a response kept per denial proof: the proof (QTYPE included) and the query
/// bits that change its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ProvenKey {
    proof: DenialProof,
    flags: u8,
    qclass: u16,
}

impl ProvenKey {
    fn of(query: &ClientQuery, proof: DenialProof) -> ProvenKey {
        ProvenKey {
            proof,
            flags: Key::flags(query),
            qclass: query.qclass.0,
        }
    }
}

/// A response kept per denial proof.
#[derive(Debug)]
pub(crate) struct Proven {
    prepared: Prepared,
    /// The DNSSEC algorithms that validated its records.
    algorithms: Box<[u8]>,
}

impl Proven {
    /// The DNSSEC algorithm numbers that validated its records.
    pub(crate) fn algorithms(&self) -> &[u8] {
        &self.algorithms
    }
}

/// Weighs a [`Proven`] by its bytes.
#[derive(Clone, Debug)]
struct ByBytes;

impl Weighter<ProvenKey, Arc<Proven>> for ByBytes {
    fn weight(&self, _key: &ProvenKey, entry: &Arc<Proven>) -> u64 {
        let size = entry.prepared.size(std::mem::size_of::<ProvenKey>());
        u64::try_from(size + entry.algorithms.len()).unwrap_or(u64::MAX)
    }
}

/// The key of a query: flags, QTYPE, QCLASS, lowercased QNAME.
struct Key {
    bytes: [u8; MAX_KEY],
    len: usize,
}

impl Key {
    /// The query bits that change a response's content.
    fn flags(query: &ClientQuery) -> u8 {
        u8::from(query.dnssec_ok())
            | u8::from(query.checking_disabled()) << 1
            | u8::from(query.edns.is_some()) << 2
            | u8::from(query.compact_ok()) << 3
    }

    fn of(query: &ClientQuery) -> Key {
        let mut bytes = [0; MAX_KEY];
        bytes[0] = Key::flags(query);
        bytes[1..3].copy_from_slice(&query.qtype.0.to_be_bytes());
        bytes[3..5].copy_from_slice(&query.qclass.0.to_be_bytes());
        let name = query.qname.as_wire();
        for (to, from) in bytes[5..].iter_mut().zip(name) {
            *to = from.to_ascii_lowercase();
        }
        Key {
            bytes,
            len: 5 + name.len(),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn shard(&self) -> usize {
        // FNV-1a over the key: cheap, and only spreads load (each shard's map hashes with
        // its own random keys).
        let h = self
            .as_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        (h % SHARDS as u64) as usize
    }
}

impl ResponseCache {
    /// An empty cache with `limits`.
    pub fn new(limits: CacheLimits) -> ResponseCache {
        let proven = limits.bytes / PROVEN_SHARE;
        let items = (proven / 1024).clamp(16, 1 << 16);
        ResponseCache {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            proven: QuickCache::with_weighter(items, proven as u64, ByBytes),
            limits,
        }
    }

    /// Writes the cached response to `query` to `to`; its length, or `None` on a miss or an
    /// expired entry.
    pub(crate) fn answer(
        &self,
        query: &ClientQuery,
        to: &mut Sink<'_>,
        now: Instant,
    ) -> Option<usize> {
        self.answer_hit(query, to, now, false).map(|(len, _)| len)
    }

    /// As [`ResponseCache::answer`]; with `prefetch`, also says whether this hit claimed the
    /// entry's refresh ([`super::prefetch`]: an answer in the last tenth of its lifetime, not
    /// claimed before; each entry is claimed once).
    pub(crate) fn answer_hit(
        &self,
        query: &ClientQuery,
        to: &mut Sink<'_>,
        now: Instant,
        prefetch: bool,
    ) -> Option<(usize, bool)> {
        self.with_entry(query, |entry| {
            if entry.expires <= now {
                return None;
            }
            let len = entry.write(query, to, now, false);
            let claim = prefetch
                && entry.answered
                && super::prefetch::due(entry.stored, entry.expires, now)
                && !entry.prefetch_claimed.swap(true, Ordering::AcqRel);
            Some((len, claim))
        })
    }

    /// Gives back the refresh of `query`'s entry claimed by [`ResponseCache::answer_hit`]
    /// (none could run): a later hit may claim it.
    pub(crate) fn unclaim_prefetch(&self, query: &ClientQuery) {
        let _ = self.with_entry(query, |entry| {
            entry.prefetch_claimed.store(false, Ordering::Release);
            Some(())
        });
    }

    /// True if the entry for `query` has expired at `now` but may still be served stale
    /// ([`ResponseCache::answer_stale`]).
    pub(crate) fn has_stale(&self, query: &ClientQuery, now: Instant) -> bool {
        self.with_entry(query, |e| {
            (e.expires <= now && now < e.stale_until).then_some(())
        })
        .is_some()
    }

    /// As [`ResponseCache::answer`], for an entry that has expired at `now` but is within its
    /// stale window: a stale answer (RFC 8767 §4: TTLs [`STALE_ANSWER_TTL`], EDE 3 when the
    /// query had EDNS). `None` when there is no such entry (none, still fresh, or past it).
    pub(crate) fn answer_stale(
        &self,
        query: &ClientQuery,
        to: &mut Sink<'_>,
        now: Instant,
    ) -> Option<usize> {
        self.with_entry(query, |entry| {
            let stale = entry.expires <= now && now < entry.stale_until;
            stale.then(|| entry.write(query, to, now, true))
        })
    }

    /// `f` of the entry for `query`, under its shard's read lock; `None` without an entry.
    fn with_entry<R>(
        &self,
        query: &ClientQuery,
        f: impl FnOnce(&Prepared) -> Option<R>,
    ) -> Option<R> {
        let key = Key::of(query);
        let shard = self.shards[key.shard()]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        f(shard.map.get(key.as_bytes())?)
    }

    /// As [`ResponseCache::answer`], for the response kept for `proof` ([`Keep::ForProof`]),
    /// with `query`'s question spliced in: its length and the DNSSEC algorithms that validated
    /// it; `None` also when it does not fit `to` whole. The caller has had `proof` from the resolver for this query's name and type just
    /// now: that is what makes the kept response true for it.
    pub(crate) fn answer_proven(
        &self,
        query: &ClientQuery,
        proof: DenialProof,
        to: &mut Sink<'_>,
        now: Instant,
    ) -> Option<(usize, Arc<Proven>)> {
        let entry = self.proven.get(&ProvenKey::of(query, proof))?;
        let fits = to.fits(
            entry.prepared.len_for(query),
            entry.prepared.opt_at.is_some(),
        );
        if entry.prepared.expires <= now || !fits {
            // Uncompressed, it would be truncated where the compressed one may fit.
            return None;
        }
        let len = entry.prepared.write(query, to, now, false);
        Some((len, entry))
    }

    /// Writes the response to `query` from `written` to `to`, as [`ResponseCache::answer`]
    /// would, and keeps it (without the cookie) for later queries as `keep` says. Returns the length (0 if an offset of `written` does
    /// not fit 16 bits, which a message of at most 65535 bytes cannot: nothing is sent).
    pub(crate) fn serve(
        &self,
        query: &ClientQuery,
        written: Written,
        keep: Keep,
        to: &mut Sink<'_>,
        now: Instant,
    ) -> usize {
        let Some(mut prepared) = self.prepare(written, now) else {
            return 0;
        };
        let len = prepared.write(query, to, now, false);
        match keep {
            Keep::Not => {}
            Keep::ForQuery => self.insert(query, prepared, now),
            Keep::ForProof(proof, algorithms) => {
                // Never stale: the records' expiry bounds it.
                prepared.stale_until = prepared.expires;
                let entry = Proven {
                    prepared,
                    algorithms,
                };
                self.proven
                    .insert(ProvenKey::of(query, proof), Arc::new(entry));
            }
        }
        len
    }

    /// Keeps the response to `query` from `written` for later queries, without serving it.
    pub(crate) fn store(&self, query: &ClientQuery, written: Written, now: Instant) {
        if let Some(prepared) = self.prepare(written, now) {
            self.insert(query, prepared, now);
        }
    }

    /// Puts `prepared` under `query`'s key if it fits its shard's share and is of use; a
    /// response that cannot go stale does not replace one that still can.
    fn insert(&self, query: &ClientQuery, prepared: Prepared, now: Instant) {
        let key = Key::of(query);
        let size = prepared.size(key.len);
        let share = (self.limits.bytes - self.limits.bytes / PROVEN_SHARE) / SHARDS;
        if prepared.stale_until <= now || size > share {
            return;
        }
        let mut shard = self.shards[key.shard()]
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(old) = shard.map.get(key.as_bytes()) {
            // RFC 8767 §4: a failed refresh leaves the stale data servable.
            if old.can_go_stale() && now < old.stale_until && !prepared.can_go_stale() {
                return;
            }
        }
        if let Some(old) = shard.map.remove(key.as_bytes()) {
            shard.bytes -= old.size(key.len);
        }
        if shard.bytes + size > share {
            shard.map.retain(|_, p| p.stale_until > now);
            shard.bytes = shard.map.iter().map(|(k, p)| p.size(k.len())).sum();
        }
        while shard.bytes + size > share {
            let Some(victim) = shard.map.keys().next().cloned() else {
                break;
            };
            if let Some(p) = shard.map.remove(&victim) {
                shard.bytes -= p.size(victim.len());
            }
        }
        shard.bytes += size;
        shard.map.insert(key.as_bytes().into(), prepared);
    }

    /// Drops every entry: for a change of what validation concludes (insecure domains,
    /// negative trust anchors; [`crate::policy`]), after which no answer validated under the
    /// old rules may be served, stale or not.
    pub fn clear(&self) {
        self.proven.clear();
        for shard in &self.shards {
            let mut shard = shard.write().unwrap_or_else(|e| e.into_inner());
            shard.map.clear();
            shard.bytes = 0;
        }
    }

    /// Memory charged to entries now, bytes.
    pub fn bytes(&self) -> usize {
        let proven = usize::try_from(self.proven.weight()).unwrap_or(usize::MAX);
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|e| e.into_inner()).bytes)
            .fold(proven, usize::saturating_add)
    }

    /// Caps a response's TTLs and keeps what serving it patches, as [`Written::layout`]
    /// recorded it when it was written (the message is not parsed); `None` if an offset does
    /// not fit 16 bits.
    fn prepare(&self, written: Written, now: Instant) -> Option<Prepared> {
        let Written {
            mut message,
            layout,
            secure,
            validated,
        } = written;
        let ttl = if layout.rcode != Rcode::NOERROR && layout.rcode != Rcode::NXDOMAIN {
            FAILURE_TTL
        } else if layout.answers == 0 {
            layout.negative_ttl.unwrap_or(FAILURE_TTL)
        } else {
            layout.min_ttl.unwrap_or(0)
        };
        let lifetime = ttl.clamp(
            self.limits.min_ttl,
            self.limits.max_ttl.max(self.limits.min_ttl),
        );
        let mut offsets = Vec::with_capacity(layout.ttl_offsets.len());
        for &at in &layout.ttl_offsets {
            let field = message.get_mut(at..at + 4)?;
            let t = u32::from_be_bytes([field[0], field[1], field[2], field[3]]);
            field.copy_from_slice(&t.min(self.limits.max_ttl).to_be_bytes());
            offsets.push(u16::try_from(at).ok()?);
        }
        let opt_at = match layout.opt_at {
            Some(at) => Some(u16::try_from(at).ok()?),
            None => None,
        };
        let expires = now + Duration::from_secs(u64::from(lifetime));
        let answered = layout.rcode == Rcode::NOERROR || layout.rcode == Rcode::NXDOMAIN;
        let stale = if validated && answered {
            self.limits.max_stale.min(MAX_MAX_STALE)
        } else {
            0
        };
        Some(Prepared {
            question_end: u16::try_from(layout.question_end).ok()?,
            opt_at,
            message: message.into_boxed_slice(),
            ttl_offsets: offsets.into_boxed_slice(),
            secure,
            stored: now,
            expires,
            stale_until: expires + Duration::from_secs(u64::from(stale)),
            answered,
            prefetch_claimed: AtomicBool::new(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::query::{parse, Parsed};
    use crate::service::response::{write, Names};
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::{Edns, Header, MessageView, Section, FLAG_RA};
    use pqdns_core::{Class, Name, Record, RrType};

    fn query(name: &str, flags: u16, edns: Option<Edns>) -> ClientQuery {
        let mut m = Message::query(
            0x1234,
            Question {
                qname: name.parse().unwrap(),
                qtype: RrType::A,
                qclass: Class::IN,
            },
            false,
            edns,
        );
        m.flags = flags;
        match parse(&m.to_wire()) {
            Parsed::Query(q) => q,
            other => panic!("{other:?}"),
        }
    }

    /// A response to `name` A: `answers` A records with `ttl`, or for 0 an NXDOMAIN with an
    /// SOA (TTL `ttl`, MINIMUM 60); OPT if `edns`; Secure.
    fn response(name: &str, answers: usize, ttl: u32, edns: bool) -> Written {
        let owner: Name = name.parse().unwrap();
        let record = |owner: &Name, rtype, rdata: Vec<u8>| Record {
            owner: owner.clone(),
            rtype,
            class: Class::IN,
            ttl,
            rdata,
        };
        let a: Vec<Record> = (0..answers)
            .map(|i| record(&owner, RrType::A, vec![192, 0, 2, i as u8]))
            .collect();
        let mut soa = Vec::new();
        if answers == 0 {
            // ns.example. hm.example. 1 7200 3600 1209600 60
            let mut rdata = b"\x02ns\x07example\x00\x02hm\x07example\x00".to_vec();
            for field in [1u32, 7200, 3600, 1_209_600, 60] {
                rdata.extend(field.to_be_bytes());
            }
            soa.push(record(&"example.".parse().unwrap(), RrType::SOA, rdata));
        }
        let rcode = if answers == 0 {
            Rcode::NXDOMAIN
        } else {
            Rcode::NOERROR
        };
        let mut no_do = Edns::dnssec_ok(1232);
        no_do.flags = 0;
        let q = query(name, 0, edns.then_some(no_do));
        let mut w = write(&q, rcode, &a, &soa, None, Names::Compressed);
        w.secure = true;
        w
    }

    /// Serves `w` to `q` from `cache` at `now` within `limit` bytes and stores it: the
    /// response.
    /// Where a test writes a response.
    fn sink<'a>(
        out: &'a mut Vec<u8>,
        base: usize,
        limit: usize,
        cookie: Option<&'a [u8; RESPONSE_COOKIE_LEN]>,
    ) -> Sink<'a> {
        Sink {
            out,
            base,
            limit,
            cookie,
        }
    }

    fn put(
        cache: &ResponseCache,
        q: &ClientQuery,
        w: Written,
        limit: usize,
        now: Instant,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let len = cache.serve(
            q,
            w,
            Keep::ForQuery,
            &mut sink(&mut out, 0, limit, None),
            now,
        );
        out.truncate(len);
        out
    }

    fn ttls(msg: &[u8]) -> Vec<u32> {
        let v = MessageView::parse(msg).unwrap();
        v.records(Section::Answer)
            .chain(v.records(Section::Authority))
            .map(|r| r.ttl())
            .collect()
    }

    #[test]
    fn a_hit_patches_id_flags_case_and_ttls() {
        let cache = ResponseCache::new(CacheLimits::default());
        let t0 = Instant::now();
        let stored = query("www.example.", FLAG_RD, Some(Edns::dnssec_ok(1232)));
        let mut out = vec![0xee; 2];
        let len = cache.serve(
            &stored,
            response("www.example.", 2, 300, true),
            Keep::ForQuery,
            &mut sink(&mut out, 2, 65_535, None),
            t0,
        );
        assert_eq!(
            out[..2],
            [0xee, 0xee],
            "the listener's bytes are left alone"
        );
        let first = out[2..2 + len].to_vec();
        let h = Header::parse(&first).unwrap();
        assert_eq!(h.id, 0x1234);
        assert!(h.has(FLAG_RD) && h.has(FLAG_AD) && h.has(FLAG_RA));

        // 100 s later, the same question spelled otherwise, without RD, with AD.
        let other = query("WWW.Example.", FLAG_AD, Some(Edns::dnssec_ok(1232)));
        let mut out = Vec::new();
        let len = cache
            .answer(
                &other,
                &mut sink(&mut out, 0, 65_535, None),
                t0 + Duration::from_secs(100),
            )
            .expect("a hit");
        let h = Header::parse(&out[..len]).unwrap();
        assert!(!h.has(FLAG_RD) && h.has(FLAG_AD));
        assert_eq!(&out[12..29], b"\x03WWW\x07Example\x00\x00\x01\x00\x01");
        assert_eq!(ttls(&out[..len]), [200, 200]);
        // A query without DO is another entry; an expired one is a miss.
        let no_do = query(
            "www.example.",
            0,
            Some(Edns::dnssec_ok(1232)).map(|mut e| {
                e.flags = 0;
                e
            }),
        );
        assert!(cache
            .answer(&no_do, &mut sink(&mut out, 0, 65_535, None), t0)
            .is_none());
        assert!(cache
            .answer(
                &other,
                &mut sink(&mut out, 0, 65_535, None),
                t0 + Duration::from_secs(300)
            )
            .is_none());
    }

    /// Serve-stale (RFC 8767, super::super::stale): a validated answer is a miss for
    /// `answer` once expired, and a stale answer (every TTL 30 s, EDE 3 beside the cookie,
    /// AD kept) for `answer_stale` until max-stale past its expiry, not after; a failure does
    /// not replace it. Unvalidated answers, failures and a cache without serve-stale: never.
    #[test]
    fn validated_answers_go_stale_for_max_stale_and_no_longer() {
        use crate::service::response::failure;
        use pqdns_core::wire::{Ede, OPTION_EDE};
        let limits = CacheLimits {
            max_stale: 3600,
            ..CacheLimits::default()
        };
        let cache = ResponseCache::new(limits);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let q = query("www.example.", 0, Some(Edns::dnssec_ok(1232)));
        let mut w = response("www.example.", 2, 300, true);
        w.validated = true;
        put(&cache, &q, w, 65_535, t0);
        let mut out = Vec::new();
        let cookie = [7u8; RESPONSE_COOKIE_LEN];
        assert!(!cache.has_stale(&q, at(299)), "still fresh");
        assert!(cache
            .answer_stale(&q, &mut sink(&mut out, 0, 65_535, None), at(299))
            .is_none());
        assert!(cache
            .answer(&q, &mut sink(&mut out, 0, 65_535, None), at(300))
            .is_none());
        // A failed refresh (SERVFAIL) is not kept over the stale data.
        let failed = failure(&q, Rcode::SERVFAIL, Ede::NO_REACHABLE_AUTHORITY, "down");
        cache.store(&q, failed, at(301));
        for s in [300, 1000, 3899] {
            assert!(cache.has_stale(&q, at(s)), "{s} s");
            let len = cache
                .answer_stale(&q, &mut sink(&mut out, 0, 65_535, Some(&cookie)), at(s))
                .expect("a stale answer");
            let v = MessageView::parse(&out[..len]).unwrap();
            assert_eq!(v.rcode(), Rcode::NOERROR);
            assert_eq!(ttls(&out[..len]), [30, 30], "{s} s");
            assert!(v.header().has(FLAG_AD), "the data was Secure");
            let opt = v.opt().unwrap();
            assert_eq!(opt.option(OPTION_EDE), Some(&[0, 3][..]), "EDE 3");
            assert_eq!(opt.option(OPTION_COOKIE), Some(&cookie[..]));
        }
        assert!(!cache.has_stale(&q, at(3900)), "past max-stale");
        assert!(cache
            .answer_stale(&q, &mut sink(&mut out, 0, 65_535, None), at(3900))
            .is_none());

        // Not validated (Indeterminate data, or CD), or a Bogus SERVFAIL: never stale.
        let unvalidated = query("u.example.", 0, Some(Edns::dnssec_ok(1232)));
        put(
            &cache,
            &unvalidated,
            response("u.example.", 1, 60, true),
            65_535,
            t0,
        );
        let bogus = query("bogus.example.", 0, Some(Edns::dnssec_ok(1232)));
        let servfail = failure(&bogus, Rcode::SERVFAIL, Ede::DNSSEC_BOGUS, "bogus");
        put(&cache, &bogus, servfail, 65_535, t0);
        for q in [&unvalidated, &bogus] {
            assert!(!cache.has_stale(q, at(61)));
            assert!(cache
                .answer_stale(q, &mut sink(&mut out, 0, 65_535, None), at(61))
                .is_none());
        }
        // Without serve-stale, a validated answer expires at its TTL.
        let off = ResponseCache::new(CacheLimits {
            max_stale: 0,
            ..CacheLimits::default()
        });
        let mut w = response("www.example.", 1, 60, true);
        w.validated = true;
        put(&off, &q, w, 65_535, t0);
        assert!(!off.has_stale(&q, at(60)));
    }

    #[test]
    fn ad_only_for_secure_data_and_clients_that_want_it() {
        let cache = ResponseCache::new(CacheLimits::default());
        let t0 = Instant::now();
        let plain = query(
            "a.example.",
            0,
            Some(Edns::dnssec_ok(1232)).map(|mut e| {
                e.flags = 0;
                e
            }),
        );
        let out = put(
            &cache,
            &plain,
            response("a.example.", 1, 60, true),
            65_535,
            t0,
        );
        let ad = |out: &[u8]| Header::parse(out).unwrap().has(FLAG_AD);
        assert!(!ad(&out), "no DO, no AD asked");
        let asking = query("b.example.", FLAG_AD, None);
        let mut insecure = response("b.example.", 1, 60, false);
        insecure.secure = false;
        assert!(
            !ad(&put(&cache, &asking, insecure, 65_535, t0)),
            "not Secure"
        );
    }

    #[test]
    fn too_large_for_udp_is_truncated_with_the_opt_record() {
        let cache = ResponseCache::new(CacheLimits::default());
        let q = query("big.example.", 0, Some(Edns::dnssec_ok(512)));
        let t0 = Instant::now();
        let mut out = put(&cache, &q, response("big.example.", 40, 60, true), 512, t0);
        let len = out.len();
        let v = MessageView::parse(&out[..len]).unwrap();
        assert!(v.header().has(FLAG_TC));
        assert_eq!(v.counts(), [1, 0, 0, 1]);
        assert_eq!(v.opt().unwrap().udp_payload(), 1232);
        // Over TCP the whole answer.
        let len = cache
            .answer(&q, &mut sink(&mut out, 0, 65_535, None), Instant::now())
            .unwrap();
        assert_eq!(MessageView::parse(&out[..len]).unwrap().counts()[1], 40);
    }

    #[test]
    fn the_cookie_is_written_per_response_never_stored() {
        let cache = ResponseCache::new(CacheLimits::default());
        let t0 = Instant::now();
        let q = query("c.example.", 0, Some(Edns::dnssec_ok(1232)));
        let cookie_of = |msg: &[u8]| {
            let v = MessageView::parse(msg).unwrap();
            v.opt().unwrap().option(OPTION_COOKIE).map(<[u8]>::to_vec)
        };
        let (a, b) = ([1u8; RESPONSE_COOKIE_LEN], [2u8; RESPONSE_COOKIE_LEN]);
        let mut out = Vec::new();
        let len = cache.serve(
            &q,
            response("c.example.", 3, 60, true),
            Keep::ForQuery,
            &mut sink(&mut out, 0, 65_535, Some(&a)),
            t0,
        );
        assert_eq!(cookie_of(&out[..len]), Some(a.to_vec()), "on the miss");
        let len = cache
            .answer(&q, &mut sink(&mut out, 0, 65_535, Some(&b)), t0)
            .unwrap();
        assert_eq!(cookie_of(&out[..len]), Some(b.to_vec()), "on a hit");
        assert_eq!(MessageView::parse(&out[..len]).unwrap().counts()[1], 3);
        let len = cache
            .answer(&q, &mut sink(&mut out, 0, 65_535, None), t0)
            .unwrap();
        assert_eq!(cookie_of(&out[..len]), None, "not stored");
        // The option counts against the client's size: one byte short, the answer is cut.
        let len = cache
            .answer(&q, &mut sink(&mut out, 0, 65_535, None), t0)
            .unwrap();
        let len = cache
            .answer(
                &q,
                &mut sink(&mut out, 0, len + 4 + RESPONSE_COOKIE_LEN - 1, Some(&a)),
                t0,
            )
            .unwrap();
        let v = MessageView::parse(&out[..len]).unwrap();
        assert!(v.header().has(FLAG_TC));
        assert_eq!(v.counts(), [1, 0, 0, 1]);
        assert_eq!(
            cookie_of(&out[..len]),
            Some(a.to_vec()),
            "kept when truncated"
        );
    }

    #[test]
    fn lifetimes_negative_floor_and_cap() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut out = Vec::new();
        // NXDOMAIN: min(SOA TTL 300, MINIMUM 60) = 60 s (RFC 2308 §5).
        let cache = ResponseCache::new(CacheLimits::default());
        let q = query("nx.example.", 0, None);
        put(&cache, &q, response("nx.example.", 0, 300, false), 512, t0);
        assert!(cache
            .answer(&q, &mut sink(&mut out, 0, 512, None), at(59))
            .is_some());
        assert!(cache
            .answer(&q, &mut sink(&mut out, 0, 512, None), at(60))
            .is_none());
        // A cap of 100 s lowers the TTLs served and the lifetime.
        let capped = ResponseCache::new(CacheLimits {
            max_ttl: 100,
            ..CacheLimits::default()
        });
        out = put(
            &capped,
            &q,
            response("nx.example.", 3, 3600, false),
            512,
            t0,
        );
        let len = out.len();
        assert_eq!(ttls(&out[..len]), [100, 100, 100]);
        assert!(capped
            .answer(&q, &mut sink(&mut out, 0, 512, None), at(100))
            .is_none());
        // A floor of 50 s keeps a 5 s answer; its TTLs count down to 0, not below.
        let floored = ResponseCache::new(CacheLimits {
            min_ttl: 50,
            ..CacheLimits::default()
        });
        put(&floored, &q, response("nx.example.", 1, 5, false), 512, t0);
        let len = floored
            .answer(&q, &mut sink(&mut out, 0, 512, None), at(40))
            .unwrap();
        assert_eq!(ttls(&out[..len]), [0]);
        assert!(floored
            .answer(&q, &mut sink(&mut out, 0, 512, None), at(50))
            .is_none());
        // Not stored when asked not to.
        let q2 = query("other.example.", 0, None);
        cache.serve(
            &q2,
            response("other.example.", 1, 60, false),
            Keep::Not,
            &mut sink(&mut out, 0, 512, None),
            t0,
        );
        assert!(cache
            .answer(&q2, &mut sink(&mut out, 0, 512, None), t0)
            .is_none());
    }

    #[test]
    fn memory_stays_within_the_bound() {
        let limits = CacheLimits {
            bytes: SHARDS * 1000,
            ..CacheLimits::default()
        };
        let cache = ResponseCache::new(limits);
        let t0 = Instant::now();
        let mut out = Vec::new();
        for i in 0..500 {
            let name = format!("n{i}.example.");
            let q = query(&name, 0, None);
            put(&cache, &q, response(&name, 3, 60, false), 512, t0);
            assert!(
                cache.bytes() <= limits.bytes,
                "{} bytes after {i}",
                cache.bytes()
            );
        }
        // The latest one is there; many earlier ones were dropped.
        let last = query("n499.example.", 0, None);
        assert!(cache
            .answer(&last, &mut sink(&mut out, 0, 512, None), t0)
            .is_some());
        assert!(cache.bytes() > limits.bytes / 2);
    }
}

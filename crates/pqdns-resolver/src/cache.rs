//! The resolver's cache of raw responses, keyed by (QNAME, QTYPE) and bounded in bytes.
//!
//! It stores responses as servers sent them; validation results are not cached here, so
//! nothing comes out of it marked Secure without being verified again through the trusted
//! keys. What it must not do is keep bad data alive (RFC 4035 §4.7: data that failed
//! validation is cached briefly or not at all, so the cache is no denial-of-service
//! amplifier), so a response lives in two stages:
//!
//! - **Unconfirmed**, from [`Cache::put`]: at most [`UNCONFIRMED_TTL`] seconds. Lookups made
//!   while a resolution runs (a CNAME chain, the DNSKEY and DS RRsets of the chain of trust)
//!   share it, but one forged or expired answer is forgotten within seconds.
//! - **Confirmed**, after [`Cache::confirm`]: the resolution that used it did not end Bogus.
//!   It then lives for its TTL: the smallest TTL of a positive answer, min(SOA TTL, SOA
//!   MINIMUM) for a negative one (RFC 2308 §5), never beyond the earliest RRSIG expiration in
//!   it (RFC 4035 §5.3.3) or [`Limits::max_ttl`].
//!
//! Memory: every entry is weighed in bytes ([`message_bytes`]: records, names and
//! [`ENTRY_OVERHEAD`]) and the whole is kept within [`Limits::bytes`] by `quick_cache`'s
//! S3-FIFO eviction; a response heavier than the cache's share per shard is not stored.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pqdns_core::message::Message;
use pqdns_core::wire::rdata::{Rrsig, Soa};
use pqdns_core::{Name, RrType};
use quick_cache::sync::Cache as QuickCache;
use quick_cache::Weighter;

pub use crate::ttl_map::MAX_TTL;

/// Longest life of a response no finished validation has vouched for, seconds (the failure
/// lifetime of RFC 9520 §3.2's range, as the resolver service caches SERVFAIL).
pub const UNCONFIRMED_TTL: u32 = 5;
/// Bytes charged per entry besides its records (the entry, its key, the map's slot).
pub const ENTRY_OVERHEAD: usize = 160;
/// Bytes charged per record besides its owner name and RDATA (the `Record` and its vectors).
pub const RECORD_OVERHEAD: usize = 64;

/// Bounds of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Memory for cached responses, bytes (as [`message_bytes`] counts them).
    pub bytes: usize,
    /// Longest life of a confirmed response, seconds.
    pub max_ttl: u32,
}

impl Limits {
    /// `bytes` of responses, each kept at most `max_ttl` seconds.
    pub fn new(bytes: usize, max_ttl: u32) -> Limits {
        Limits { bytes, max_ttl }
    }
}

impl Default for Limits {
    /// 16 MiB, one day ([`MAX_TTL`]).
    fn default() -> Limits {
        Limits::new(16 << 20, MAX_TTL)
    }
}

/// A cached response and its lifetimes.
#[derive(Debug)]
struct Entry {
    message: Message,
    stored: Instant,
    /// Lifetime once confirmed, seconds.
    ttl: u32,
    confirmed: AtomicBool,
    /// [`message_bytes`] of `message`, fixed when stored.
    bytes: u64,
    /// Which store this is ([`Stored`]): a confirmation names the entry it vouches for, not
    /// whatever a later store put under the same key.
    id: u64,
}

/// One stored response, as [`Cache::get`] and [`Cache::put`] name it for [`Cache::confirm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored(u64);

impl Entry {
    fn live(&self, now: Instant) -> bool {
        let ttl = if self.confirmed.load(Relaxed) {
            self.ttl
        } else {
            self.ttl.min(UNCONFIRMED_TTL)
        };
        now < self.stored + Duration::from_secs(u64::from(ttl))
    }
}

/// Weighs entries by their [`message_bytes`].
#[derive(Clone, Copy, Debug)]
struct ByBytes;

impl Weighter<(Name, RrType), Arc<Entry>> for ByBytes {
    fn weight(&self, _key: &(Name, RrType), entry: &Arc<Entry>) -> u64 {
        entry.bytes
    }
}

/// The cache; shared by reference (it locks internally, per shard).
pub struct Cache {
    entries: QuickCache<(Name, RrType), Arc<Entry>, ByBytes>,
    max_ttl: u32,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("entries", &self.entries.len())
            .field("bytes", &self.entries.weight())
            .finish()
    }
}

impl Cache {
    /// An empty cache within `limits`.
    pub fn new(limits: Limits) -> Cache {
        let bytes = u64::try_from(limits.bytes).unwrap_or(u64::MAX).max(1);
        // A guess at the number of entries (a typical response is about 1 kB) for sizing.
        let items = (limits.bytes / 1024).clamp(16, 1 << 20);
        Cache {
            entries: QuickCache::with_weighter(items, bytes, ByBytes),
            max_ttl: limits.max_ttl,
            next_id: AtomicU64::new(0),
        }
    }

    /// A live cached response for (`name`, `rtype`), if any, and which store it is.
    pub fn get(&self, name: &Name, rtype: RrType, now: Instant) -> Option<(Message, Stored)> {
        let entry = self.entries.get(&(name.clone(), rtype))?;
        entry
            .live(now)
            .then(|| (entry.message.clone(), Stored(entry.id)))
    }

    /// Stores `message`, unconfirmed, for the lifetime its records allow at `unix_now` (UNIX
    /// seconds, for RRSIG expirations); a lifetime of 0 is not stored (`None`).
    pub fn put(
        &self,
        name: Name,
        rtype: RrType,
        message: Message,
        now: Instant,
        unix_now: u64,
    ) -> Option<Stored> {
        let ttl = answer_ttl(&message, unix_now).min(self.max_ttl);
        if ttl == 0 {
            return None;
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        let bytes = message_bytes(&name, &message);
        let entry = Entry {
            message,
            stored: now,
            ttl,
            confirmed: AtomicBool::new(false),
            bytes,
            id,
        };
        self.entries.insert((name, rtype), Arc::new(entry));
        Some(Stored(id))
    }

    /// Lets the response `stored` for (`name`, `rtype`) live for its whole lifetime: a
    /// resolution that used it ended other than Bogus. Nothing happens if another response
    /// has replaced it since.
    pub fn confirm(&self, name: &Name, rtype: RrType, stored: Stored) {
        if let Some(entry) = self.entries.get(&(name.clone(), rtype)) {
            if entry.id == stored.0 {
                entry.confirmed.store(true, Relaxed);
            }
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.entries.clear();
    }

    /// Number of entries (live or expired).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, as [`message_bytes`] counts them.
    pub fn bytes(&self) -> u64 {
        self.entries.weight()
    }
}

/// The bytes a cached response is charged: per record its owner name, RDATA and
/// [`RECORD_OVERHEAD`], plus the key's name and [`ENTRY_OVERHEAD`].
pub fn message_bytes(name: &Name, m: &Message) -> u64 {
    let records = m
        .answers
        .iter()
        .chain(&m.authority)
        .chain(&m.additional)
        .map(|r| r.owner.wire_len() + r.rdata.len() + RECORD_OVERHEAD)
        .sum::<usize>();
    let questions = m
        .questions
        .iter()
        .map(|q| q.qname.wire_len() + RECORD_OVERHEAD)
        .sum::<usize>();
    let total = records + questions + name.wire_len() + ENTRY_OVERHEAD;
    u64::try_from(total).unwrap_or(u64::MAX)
}

/// How long a response may be cached once confirmed, seconds: the smallest TTL of the answer
/// section, or for a negative answer min(SOA TTL, SOA MINIMUM) (RFC 2308 §5); never past
/// the earliest expiration of an RRSIG in it at `unix_now` (RFC 4035 §5.3.3).
fn answer_ttl(m: &Message, unix_now: u64) -> u32 {
    let ttl = if m.answers.is_empty() {
        m.authority
            .iter()
            .find(|r| r.rtype == RrType::SOA)
            .map_or(0, |soa| {
                let min = Soa::parse(&soa.rdata).map_or(0, |s| s.minimum);
                soa.ttl.min(min)
            })
    } else {
        m.answers.iter().map(|r| r.ttl).min().unwrap_or(0)
    };
    // RRSIG times are 32-bit serial numbers (RFC 4034 §3.1.5): the distance from now.
    let now = unix_now as u32;
    m.answers
        .iter()
        .chain(&m.authority)
        .filter(|r| r.rtype == RrType::RRSIG)
        .filter_map(|r| Rrsig::parse(&r.rdata))
        .map(|sig| u32::try_from(sig.expiration.wrapping_sub(now) as i32).unwrap_or(0))
        .fold(ttl, u32::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::message::{Message, Question};
    use pqdns_core::{Class, Record};

    const NOW: u64 = 1_800_000_000;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn answer(ttl: u32, rdata_len: usize) -> Message {
        let mut m = Message::query(
            1,
            Question {
                qname: n("a.example."),
                qtype: RrType::TXT,
                qclass: Class::IN,
            },
            false,
            None,
        );
        m.answers.push(Record {
            owner: n("a.example."),
            rtype: RrType::TXT,
            class: Class::IN,
            ttl,
            rdata: vec![0; rdata_len],
        });
        m
    }

    /// An RRSIG record expiring `expires_in` seconds after [`NOW`].
    fn rrsig(expires_in: i64) -> Record {
        let mut rdata = vec![0, 16, 13, 2, 0, 0, 14, 16];
        rdata.extend(((NOW as i64 + expires_in) as u32).to_be_bytes());
        rdata.extend((NOW as u32 - 3600).to_be_bytes());
        rdata.extend([0, 1, 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0]);
        rdata.extend([0; 64]);
        Record {
            owner: n("a.example."),
            rtype: RrType::RRSIG,
            class: Class::IN,
            ttl: 3600,
            rdata,
        }
    }

    #[test]
    fn unconfirmed_responses_live_seconds_confirmed_ones_their_ttl() {
        let now = Instant::now();
        let c = Cache::new(Limits::default());
        let (a, b) = (n("a.example."), n("b.example."));
        c.put(a.clone(), RrType::TXT, answer(86_400, 10), now, NOW);
        let stored = c.put(b.clone(), RrType::TXT, answer(86_400, 10), now, NOW);
        c.confirm(&b, RrType::TXT, stored.unwrap());
        let at = |s: u64| now + Duration::from_secs(s);
        assert!(c.get(&a, RrType::TXT, at(4)).is_some());
        assert!(c.get(&a, RrType::TXT, at(5)).is_none(), "never confirmed");
        assert!(c.get(&b, RrType::TXT, at(86_399)).is_some());
        assert!(c.get(&b, RrType::TXT, at(86_400)).is_none());
        // A TTL of 0 is not stored, and a short TTL is not lengthened.
        c.put(a.clone(), RrType::A, answer(0, 4), now, NOW);
        assert!(c.get(&a, RrType::A, now).is_none());
        let stored = c
            .put(a.clone(), RrType::MX, answer(2, 4), now, NOW)
            .unwrap();
        c.confirm(&a, RrType::MX, stored);
        assert!(c.get(&a, RrType::MX, at(2)).is_none());
        // A confirmation vouches for the response it used, not for one stored since.
        let used = c
            .put(b.clone(), RrType::A, answer(600, 4), now, NOW)
            .unwrap();
        let later = c
            .put(b.clone(), RrType::A, answer(600, 4), now, NOW)
            .unwrap();
        assert_ne!(used, later);
        c.confirm(&b, RrType::A, used);
        assert!(
            c.get(&b, RrType::A, at(5)).is_none(),
            "the later one stays unconfirmed"
        );
    }

    #[test]
    fn lifetimes_are_capped_by_the_limit_and_rrsig_expiration() {
        let now = Instant::now();
        let at = |s: u64| now + Duration::from_secs(s);
        let c = Cache::new(Limits::new(1 << 20, 600));
        let a = n("a.example.");
        let stored = c.put(a.clone(), RrType::TXT, answer(86_400, 10), now, NOW);
        c.confirm(&a, RrType::TXT, stored.unwrap());
        assert!(c.get(&a, RrType::TXT, at(599)).is_some());
        assert!(c.get(&a, RrType::TXT, at(600)).is_none(), "max_ttl");
        let mut signed = answer(500, 10);
        signed.answers.push(rrsig(100));
        let stored = c.put(a.clone(), RrType::TXT, signed, now, NOW);
        c.confirm(&a, RrType::TXT, stored.unwrap());
        assert!(c.get(&a, RrType::TXT, at(99)).is_some());
        assert!(
            c.get(&a, RrType::TXT, at(100)).is_none(),
            "the RRSIG expires"
        );
        // Already expired signatures: not kept at all.
        let mut expired = answer(500, 10);
        expired.answers.push(rrsig(-10));
        c.put(a.clone(), RrType::AAAA, expired, now, NOW);
        assert!(c.get(&a, RrType::AAAA, now).is_none());
    }

    #[test]
    fn memory_is_bounded_in_bytes() {
        let now = Instant::now();
        let limit = 1 << 20;
        let c = Cache::new(Limits::new(limit, MAX_TTL));
        for i in 0..200 {
            let name = n(&format!("n{i}.example."));
            if let Some(stored) = c.put(name.clone(), RrType::TXT, answer(3600, 62_000), now, NOW) {
                c.confirm(&name, RrType::TXT, stored);
            }
        }
        assert!(c.bytes() <= limit as u64, "{} bytes", c.bytes());
        assert!(c.len() < 20, "{} entries of 62 kB in 1 MiB", c.len());
        assert!(!c.is_empty());
    }
}

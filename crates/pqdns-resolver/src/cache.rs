//! A bounded answer cache keyed by (QNAME, QTYPE), honouring TTLs: the smallest TTL in a
//! positive answer, and for negative answers min(SOA TTL, SOA MINIMUM) (RFC 2308 §5).
//!
//! It stores raw answers only; validation results are not cached here, so nothing can come
//! out of the cache marked Secure without being verified again through the trusted keys.

use std::time::Instant;

use pqdns_core::message::Message;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::{Name, RrType};

use crate::ttl_map::TtlMap;
pub use crate::ttl_map::MAX_TTL;

/// Default number of cached answers.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// The cache.
#[derive(Debug)]
pub struct Cache {
    entries: TtlMap<(Name, RrType), Message>,
}

impl Cache {
    /// A cache holding at most `capacity` answers.
    pub fn new(capacity: usize) -> Cache {
        Cache {
            entries: TtlMap::new(capacity),
        }
    }

    /// A live cached answer, if any.
    pub fn get(&self, name: &Name, rtype: RrType, now: Instant) -> Option<&Message> {
        self.entries.get(&(name.clone(), rtype), now)
    }

    /// Stores an answer for its TTL (at most [`MAX_TTL`]; TTL 0: not stored); when full,
    /// evicts expired entries, then the entry that expires first.
    pub fn put(&mut self, name: Name, rtype: RrType, message: Message, now: Instant) {
        let ttl = answer_ttl(&message);
        self.entries.insert((name, rtype), message, ttl, now);
    }

    /// Number of entries (live or expired).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0
    }
}

/// How long an answer may be cached, seconds.
fn answer_ttl(m: &Message) -> u32 {
    if m.answers.is_empty() {
        // Negative answer: the SOA in the authority section bounds it (RFC 2308 §5).
        return m
            .authority
            .iter()
            .find(|r| r.rtype == RrType::SOA)
            .map_or(0, |soa| {
                let min = Soa::parse(&soa.rdata).map_or(0, |s| s.minimum);
                soa.ttl.min(min)
            });
    }
    m.answers.iter().map(|r| r.ttl).min().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::message::{Message, Question};
    use pqdns_core::{Class, Record};
    use std::time::Duration;

    fn answer(ttl: u32) -> Message {
        let mut m = Message::query(
            1,
            Question {
                qname: "a.example.".parse().unwrap(),
                qtype: RrType::A,
                qclass: Class::IN,
            },
            false,
            None,
        );
        m.answers.push(Record {
            owner: "a.example.".parse().unwrap(),
            rtype: RrType::A,
            class: Class::IN,
            ttl,
            rdata: vec![192, 0, 2, 1],
        });
        m
    }

    #[test]
    fn honours_ttl_and_capacity() {
        let now = Instant::now();
        let mut c = Cache::new(2);
        let n = |s: &str| -> Name { s.parse().unwrap() };
        c.put(n("a.example."), RrType::A, answer(10), now);
        assert!(c.get(&n("a.example."), RrType::A, now).is_some());
        assert!(c
            .get(&n("a.example."), RrType::A, now + Duration::from_secs(11))
            .is_none());
        c.put(n("b.example."), RrType::A, answer(100), now);
        c.put(n("c.example."), RrType::A, answer(100), now);
        assert_eq!(c.len(), 2);
        // The first entry expired soonest and was evicted.
        assert!(c.get(&n("a.example."), RrType::A, now).is_none());
        // Zero TTL is not cached.
        c.put(n("d.example."), RrType::A, answer(0), now);
        assert!(c.get(&n("d.example."), RrType::A, now).is_none());
    }
}

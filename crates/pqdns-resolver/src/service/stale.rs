//! Serve-stale (RFC 8767): when the authorities cannot give a fresh answer, the service
//! answers from expired cache entries, with TTL [`STALE_ANSWER_TTL`] and Extended DNS Error 3
//! (Stale Answer, RFC 8914 §4.4).
//!
//! - Only validated data goes stale: a response is kept past its TTL only if its data was
//!   Secure or proven Insecure and it answered NOERROR or NXDOMAIN without CD. Bogus answers
//!   (SERVFAIL), failures, unvalidated data (CD) and data under no trust anchor
//!   (Indeterminate) expire at their TTL as before.
//! - An expired entry stays servable for the *max stale* time after its expiry (RFC 8767 §4,
//!   "max stale timer": 1 to 3 days suggested; [`DEFAULT_MAX_STALE`], at most
//!   [`MAX_MAX_STALE`]); the cache's byte bound counts it like any entry, and a full shard
//!   drops entries past their stale window first.
//! - A query whose entry is expired but servable is resolved as usual; if the resolution
//!   fails (no reachable authority) the stale answer is sent at once, and if it is still
//!   running when the *client response timer* fires (RFC 8767 §5, 1.8 s:
//!   [`DEFAULT_CLIENT_RESPONSE_TIMER`]) the stale answer is sent then, while the resolution
//!   goes on and refreshes the cache when it succeeds.
//! - A stale answer's TTLs are all [`STALE_ANSWER_TTL`] (RFC 8767 §4: 30 s), and when the
//!   query had EDNS its OPT record carries EDE 3 (no EXTRA-TEXT).

use std::time::Duration;

use pqdns_core::wire::{Ede, OPTION_EDE};

/// TTL of the records of a stale answer, seconds (RFC 8767 §4: "set to 30 seconds").
pub const STALE_ANSWER_TTL: u32 = 30;
/// How long an expired, validated response stays servable by default, seconds (RFC 8767 §4
/// suggests 1 to 3 days): one day.
pub const DEFAULT_MAX_STALE: u32 = 86_400;
/// The largest max-stale time accepted, seconds: three days (RFC 8767 §4, "between 1 and 3
/// days").
pub const MAX_MAX_STALE: u32 = 3 * 86_400;
/// How long a client waits for a fresh answer before a stale one is sent (RFC 8767 §5:
/// "1.8 seconds").
pub const DEFAULT_CLIENT_RESPONSE_TIMER: Duration = Duration::from_millis(1800);

/// The EDE option of a stale answer, as appended to an OPT record: OPTION-CODE 15,
/// OPTION-LENGTH 2, INFO-CODE 3 (Stale Answer), no EXTRA-TEXT (RFC 8914 §2, §4.4).
pub(crate) const STALE_EDE_OPTION: [u8; 6] = {
    let code = OPTION_EDE.to_be_bytes();
    let info = Ede::STALE_ANSWER.0.to_be_bytes();
    [code[0], code[1], 0, 2, info[0], info[1]]
};

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use pqdns_core::wire::{MessageView, Rcode, Section};
    use pqdns_core::{Class, Record, RrType};
    use pqdns_net::service::Transport;

    use super::*;
    use crate::service::query::{parse, Parsed};
    use crate::service::response::{failure, write, Names};
    use crate::service::tests::{ask, query};
    use crate::service::{CacheLimits, RecursiveService, ServiceConfig};
    use crate::{Client, Config, Mode, Resolver, TlsOptions, TrustAnchors};

    /// TTL of the seeded answers, seconds.
    const TTL: u32 = 60;
    /// The services' max-stale time, seconds.
    const MAX_STALE: u32 = 120;
    const CLIENT: &str = "127.0.0.1:5300";

    #[test]
    fn the_option_is_ede_3() {
        assert_eq!(STALE_EDE_OPTION, [0, 15, 0, 2, 0, 3]);
    }

    /// A service whose forwarder never answers (its socket, returned, stays bound and
    /// silent): each exchange waits `exchange`, a query with a stale answer `timer`.
    fn service(exchange: Duration, timer: Duration) -> (Arc<RecursiveService>, UdpSocket) {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mode = Mode::Forward(silent.local_addr().unwrap());
        let client = Client::new(crate::Transport::Udp, exchange, TlsOptions::default()).unwrap();
        let resolver = Resolver::new(Config::new(mode, TrustAnchors::default()), client);
        let config = ServiceConfig {
            cache: CacheLimits {
                max_stale: MAX_STALE,
                ..CacheLimits::default()
            },
            client_response_timer: timer,
            ..ServiceConfig::default()
        };
        (Arc::new(RecursiveService::new(resolver, config)), silent)
    }

    /// Puts in `s`'s cache, as if resolved `age` ago, `name` A (TTL [`TTL`]) with its data
    /// `validated` or not.
    fn seed(s: &RecursiveService, name: &str, age: u64, validated: bool) {
        let Parsed::Query(q) = parse(&query(name, None)) else {
            panic!("a query");
        };
        let a = Record {
            owner: name.parse().unwrap(),
            rtype: RrType::A,
            class: Class::IN,
            ttl: TTL,
            rdata: vec![192, 0, 2, 1],
        };
        let mut w = write(&q, Rcode::NOERROR, &[a], &[], None, Names::Compressed);
        w.secure = validated;
        w.validated = validated;
        s.cache.store(&q, w, ago(age));
    }

    fn ago(seconds: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(seconds))
            .expect("the monotonic clock started minutes ago")
    }

    /// The response's RCODE, answer TTLs and EDE INFO-CODE.
    fn summary(r: &[u8]) -> (Rcode, Vec<u32>, Option<u16>) {
        let v = MessageView::parse(r).unwrap();
        let ttls = v.records(Section::Answer).map(|r| r.ttl()).collect();
        let ede = v
            .opt()
            .and_then(|o| o.option(OPTION_EDE))
            .map(|d| u16::from_be_bytes([d[0], d[1]]));
        (v.rcode(), ttls, ede)
    }

    /// The authority is down (silent: each exchange would wait 5 s): a name whose validated
    /// answer expired within the max-stale window is answered when the client response timer
    /// fires, stale: TTL 30, EDE 3, counted.
    #[tokio::test]
    async fn a_silent_authority_gets_the_stale_answer_when_the_timer_fires() {
        let timer = Duration::from_millis(200);
        let (s, _silent) = service(Duration::from_secs(5), timer);
        seed(&s, "www.stale.test.", u64::from(TTL) + 1, true);
        let started = Instant::now();
        let (r, at_once) = ask(&s, &query("www.stale.test.", None), CLIENT, Transport::Tcp).await;
        let waited = started.elapsed();
        assert!(!at_once, "an expired entry is no cache hit");
        assert_eq!(
            summary(&r),
            (Rcode::NOERROR, vec![STALE_ANSWER_TTL], Some(3))
        );
        assert!(
            waited >= timer && waited < Duration::from_secs(2),
            "answered after {waited:?}: the timer, not the exchange"
        );
        assert!(s
            .metrics()
            .render()
            .contains("pqdns_resolver_stale_answers_total 1\n"));
    }

    /// A resolution that fails (the exchange gives up after 50 ms) gets the stale answer at
    /// once, long before a client response timer of a minute.
    #[tokio::test]
    async fn a_failed_resolution_gets_the_stale_answer_at_once() {
        let (s, _silent) = service(Duration::from_millis(50), Duration::from_secs(60));
        let age = u64::from(TTL + MAX_STALE) - 5;
        seed(&s, "late.stale.test.", age, true);
        let started = Instant::now();
        let (r, _) = ask(&s, &query("late.stale.test.", None), CLIENT, Transport::Tcp).await;
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(
            summary(&r),
            (Rcode::NOERROR, vec![STALE_ANSWER_TTL], Some(3))
        );
    }

    /// Past the max-stale window, unvalidated data and a Bogus answer (SERVFAIL) are never
    /// served stale: the failed resolution's SERVFAIL (EDE 22) goes out.
    #[tokio::test]
    async fn past_the_window_unvalidated_and_bogus_answers_never_go_stale() {
        let (s, _silent) = service(Duration::from_millis(50), Duration::from_secs(60));
        seed(&s, "old.stale.test.", u64::from(TTL + MAX_STALE) + 1, true);
        seed(&s, "unvalidated.stale.test.", u64::from(TTL) + 1, false);
        let Parsed::Query(q) = parse(&query("bogus.stale.test.", None)) else {
            panic!("a query");
        };
        let bogus = failure(
            &q,
            Rcode::SERVFAIL,
            pqdns_core::wire::Ede::DNSSEC_BOGUS,
            "x",
        );
        s.cache.store(&q, bogus, ago(u64::from(TTL)));
        for name in [
            "old.stale.test.",
            "unvalidated.stale.test.",
            "bogus.stale.test.",
        ] {
            let (r, at_once) = ask(&s, &query(name, None), CLIENT, Transport::Tcp).await;
            assert!(!at_once, "{name}: expired");
            assert_eq!(summary(&r), (Rcode::SERVFAIL, vec![], Some(22)), "{name}");
        }
        assert!(s
            .metrics()
            .render()
            .contains("pqdns_resolver_stale_answers_total 0\n"));
    }
}

//! Prefetch (issue 29): the resolver service, forwarding through a counting relay to an
//! ECDSA-signed zone on pqdns-server (TTL 300 s), on a tokio clock the test pauses and steps.
//!
//! With prefetch on: a hit with more than 10 % of the TTL left is a plain hit; the first hit
//! with less is answered at once from the cache (its TTL counting down, no query upstream
//! yet) and starts one refresh (`pqdns_resolver_prefetches_total` 1; a second hit does not
//! start another); the refresh reaches the authority; after the original TTL has run out,
//! the name is still a cache hit, answered at once with no query upstream. With prefetch
//! off, the same query after the TTL is a miss that waits for the authority.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, MessageView, Section};
use pqdns_core::{Class, RrType};
use pqdns_net::service::{Reply, Request, Service, Transport};
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{Config, Mode, Resolver};

use common::{counting_relay, serve_www_example, udp_client};

/// How `ask` was answered.
#[derive(Debug, PartialEq, Eq)]
enum Way {
    /// At once from the cache.
    Hit,
    /// Deferred: a miss, or the hit that starts a refresh.
    Deferred,
}

/// Asks `s` for www.example. A with DO over TCP from 127.0.0.1: how, and the answer's TTL.
async fn ask(s: &Arc<RecursiveService>) -> (Way, u32) {
    let question = Question {
        qname: "www.example.".parse().unwrap(),
        qtype: RrType::A,
        qclass: Class::IN,
    };
    let packet = Message::query(9, question, true, Some(Edns::dnssec_ok(1232))).to_wire();
    let request = Request::new(&packet, "127.0.0.1:5301".parse().unwrap(), Transport::Tcp);
    let mut out = Vec::new();
    let (way, out) = match s.respond(&(), &request, &mut out, 0) {
        Reply::Ready(info) => {
            out.truncate(info.len);
            (Way::Hit, out)
        }
        Reply::Defer(deferred) => {
            let later = Arc::clone(s).respond_later(request.to_owned(), deferred, out, 0);
            let (mut out, info) = later.await;
            out.truncate(info.len);
            (Way::Deferred, out)
        }
        _ => panic!("a transfer"),
    };
    let m = MessageView::parse(&out).unwrap();
    let ttl = m
        .records(Section::Answer)
        .find(|r| r.rtype() == RrType::A)
        .unwrap_or_else(|| panic!("no A record: {out:?}"))
        .ttl();
    (way, ttl)
}

/// The value of the prefetch counter in `s`'s metrics.
fn prefetches(s: &RecursiveService) -> u64 {
    s.render_metrics()
        .lines()
        .find_map(|l| l.strip_prefix("pqdns_resolver_prefetches_total "))
        .and_then(|v| v.parse().ok())
        .expect("the counter is rendered")
}

#[test]
fn a_cached_answer_near_expiry_is_refreshed_in_the_background() {
    let served = serve_www_example();
    let (relay, count) = counting_relay(&served.rt, served.addr);
    let service = |prefetch: bool| {
        let config = Config::new(Mode::Forward(relay), served.anchors.clone());
        let resolver = Resolver::new(config, udp_client(Duration::from_secs(3)));
        let mut config = ServiceConfig::default();
        config.prefetch = prefetch;
        Arc::new(RecursiveService::new(resolver, config))
    };
    let asked = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = service(true);
        assert_eq!(
            ask(&s).await,
            (Way::Deferred, 300),
            "the first query is a miss"
        );
        let warm = asked(&count);
        assert!(warm > 0);

        tokio::time::pause();
        tokio::time::advance(Duration::from_secs(269)).await;
        assert_eq!(
            ask(&s).await,
            (Way::Hit, 31),
            "31 s of 300 left: a plain hit"
        );
        assert_eq!(prefetches(&s), 0);
        tokio::time::advance(Duration::from_secs(2)).await;
        // 29 s left: the cached answer at once, and one refresh started (not yet run: this
        // runtime has one thread, and the test has not yielded).
        assert_eq!(ask(&s).await, (Way::Deferred, 29));
        assert_eq!(prefetches(&s), 1);
        assert_eq!(
            asked(&count),
            warm,
            "the answer did not wait for the authority"
        );
        assert_eq!(ask(&s).await, (Way::Hit, 29), "claimed once");
        assert_eq!(prefetches(&s), 1);

        // The refresh runs (on the running clock, bounded wait) and replaces the entry.
        tokio::time::resume();
        let mut refreshed = false;
        for _ in 0..500 {
            if ask(&s).await.1 > 290 {
                refreshed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(refreshed, "no refreshed answer within 5 s");
        let after = asked(&count);
        assert!(after > warm, "the refresh asked the authority");

        // 40 s later the original TTL has run out: still a hit, nothing asked upstream.
        tokio::time::pause();
        tokio::time::advance(Duration::from_secs(40)).await;
        let (way, ttl) = ask(&s).await;
        assert_eq!(way, Way::Hit);
        assert!((250..=262).contains(&ttl), "{ttl}");
        assert_eq!(asked(&count), after);
        tokio::time::resume();

        // Without prefetch, the same query past the TTL is a miss.
        let off = service(false);
        assert_eq!(ask(&off).await.0, Way::Deferred);
        tokio::time::pause();
        tokio::time::advance(Duration::from_secs(271)).await;
        assert_eq!(ask(&off).await, (Way::Hit, 29));
        assert_eq!(prefetches(&off), 0);
        tokio::time::advance(Duration::from_secs(40)).await;
        let question = Question {
            qname: "www.example.".parse().unwrap(),
            qtype: RrType::A,
            qclass: Class::IN,
        };
        let packet = Message::query(9, question, true, Some(Edns::dnssec_ok(1232))).to_wire();
        let request = Request::new(&packet, "127.0.0.1:5301".parse().unwrap(), Transport::Tcp);
        let reply = off.respond(&(), &request, &mut Vec::new(), 0);
        assert!(matches!(reply, Reply::Defer(_)), "expired: resolved anew");
        tokio::time::resume();
    });
}

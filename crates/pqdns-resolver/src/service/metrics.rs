//! Prometheus metrics of the resolver service (text exposition format 0.0.4, served by
//! [`pqdns_net::metrics_http`] with `pqdns-resolver --metrics ADDR`):
//!
//! - `pqdns_resolver_queries_total{transport,rcode}`: responses sent;
//! - `pqdns_resolver_cache_total{result}`: queries answered from the cache (`hit`) or
//!   resolved (`miss`);
//! - `pqdns_resolver_validations_total{status,algorithm}`: resolutions by validation status
//!   (`secure`, `insecure`, `bogus`, `indeterminate`); Secure ones once per DNSSEC algorithm
//!   number whose signatures verified the answer, the others with `algorithm="none"`;
//! - `pqdns_resolver_upstream_rtt_seconds`: histogram of the time of each exchange with an
//!   authority or forwarder;
//! - `pqdns_resolver_tls_handshakes_total{group}`: completed DoT/DoH/DoQ handshakes with
//!   stubs, by negotiated key exchange group;
//! - `pqdns_resolver_synthesised_answers_total`: NXDOMAIN and NODATA answers synthesised
//!   from cached, validated NSEC/NSEC3 records (RFC 8198), no authority asked;
//! - `pqdns_resolver_udp_limited_total{limit,action}`: UDP responses to clients without a
//!   valid server cookie cut to TC (`truncated`) or not sent (`dropped`) by the amplification
//!   limit (`amplification`) or response-rate limiting (`rate`).
//!
//! Counting is relaxed atomic adds on fixed arrays: no lock, no allocation.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use pqdns_core::dnssec::validate::Status;
use pqdns_core::wire::Rcode;
use pqdns_net::metrics_http::{counters, group_label, group_slot, write_histogram, GROUP_SLOTS};
use pqdns_net::Transport;

use crate::answer::{Answer, AnswerRRset};

const TRANSPORTS: [Transport; 5] = [
    Transport::Udp,
    Transport::Tcp,
    Transport::Dot,
    Transport::Doh,
    Transport::Doq,
];
/// RCODEs counted by name (low 4 bits of the header); others count as `OTHER`.
const RCODES: [Rcode; 6] = [
    Rcode::NOERROR,
    Rcode::FORMERR,
    Rcode::SERVFAIL,
    Rcode::NXDOMAIN,
    Rcode::NOTIMP,
    Rcode::REFUSED,
];
const STATUSES: [&str; 4] = ["secure", "insecure", "bogus", "indeterminate"];
/// Upper bounds of the upstream RTT buckets, seconds (the last bucket is `+Inf`).
pub const RTT_BUCKETS: [f64; 12] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The counters; about 9 KiB.
#[derive(Debug)]
pub struct ServiceMetrics {
    queries: [[AtomicU64; RCODES.len() + 1]; TRANSPORTS.len()],
    cache: [AtomicU64; 2],
    /// Per status, per algorithm number (slot 0: none).
    validations: [[AtomicU64; 256]; STATUSES.len()],
    rtt: [AtomicU64; RTT_BUCKETS.len() + 1],
    rtt_sum_micros: AtomicU64,
    handshakes: [AtomicU64; GROUP_SLOTS],
    /// UDP responses limited: amplification/truncated, rate/truncated, rate/dropped.
    limited: [AtomicU64; 3],
    /// Stale answers sent (RFC 8767).
    stale: AtomicU64,
    /// Answers from local zones ([`crate::policy::local_zone`]).
    local: AtomicU64,
    /// Negative answers synthesised from validated NSEC/NSEC3 records (RFC 8198).
    synthesised: AtomicU64,
}

/// Labels of [`ServiceMetrics`]' `limited` counters.
const LIMITED: [(&str, &str); 3] = [
    ("amplification", "truncated"),
    ("rate", "truncated"),
    ("rate", "dropped"),
];

/// Why a UDP response was limited ([`ServiceMetrics::limited`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limited {
    /// Over the amplification limit: cut to TC.
    Amplification,
    /// Over the prefix's rate: sent as a TC stub (slip).
    RateSlip,
    /// Over the prefix's rate: not sent.
    RateDrop,
}

impl Default for ServiceMetrics {
    fn default() -> ServiceMetrics {
        ServiceMetrics {
            queries: std::array::from_fn(|_| counters()),
            cache: counters(),
            validations: std::array::from_fn(|_| counters()),
            rtt: counters(),
            rtt_sum_micros: AtomicU64::new(0),
            handshakes: counters(),
            limited: counters(),
            stale: AtomicU64::new(0),
            local: AtomicU64::new(0),
            synthesised: AtomicU64::new(0),
        }
    }
}

/// The DNSSEC algorithm numbers of the signatures that made `answer`'s Secure RRsets Secure,
/// each once, in ascending order.
pub(crate) fn secure_algorithms(answer: &Answer) -> Box<[u8]> {
    let mut seen = [false; 256];
    for set in answer.answers().iter().chain(answer.authority()) {
        if let AnswerRRset::Secure(v) = set {
            for alg in v.algorithms() {
                seen[usize::from(alg.0)] = true;
            }
        }
    }
    (0..=u8::MAX).filter(|&a| seen[usize::from(a)]).collect()
}

impl ServiceMetrics {
    /// A response with `rcode` sent over `transport`.
    pub(crate) fn response(&self, transport: Transport, rcode: Rcode) {
        let Some(t) = TRANSPORTS.iter().position(|x| *x == transport) else {
            return;
        };
        let r = RCODES
            .iter()
            .position(|x| *x == rcode)
            .unwrap_or(RCODES.len());
        self.queries[t][r].fetch_add(1, Relaxed);
    }

    /// A query answered from the cache (`hit`) or deferred to resolution.
    pub(crate) fn cache(&self, hit: bool) {
        self.cache[usize::from(!hit)].fetch_add(1, Relaxed);
    }

    /// A resolution's validation status and its upstream exchanges.
    pub(crate) fn resolution(&self, answer: &Answer) {
        let status = match answer.status() {
            Status::Secure(_) => 0,
            Status::Insecure(_) => 1,
            Status::Bogus(_) => 2,
            _ => 3,
        };
        if status == 0 {
            self.secure(&secure_algorithms(answer));
        } else {
            self.validations[status][0].fetch_add(1, Relaxed);
        }
        for e in answer.exchanges() {
            self.upstream(e.elapsed);
        }
        if answer.synthesised() {
            self.synthesised.fetch_add(1, Relaxed);
        }
    }

    /// A Secure answer synthesised again from a response kept for its denial proof (RFC
    /// 8198), whose records were validated with `algorithms` (as [`secure_algorithms`]).
    pub(crate) fn synthesised_again(&self, algorithms: &[u8]) {
        self.secure(algorithms);
        self.synthesised.fetch_add(1, Relaxed);
    }

    /// A Secure answer validated with `algorithms` (DNSSEC algorithm numbers).
    fn secure(&self, algorithms: &[u8]) {
        for &alg in algorithms {
            self.validations[0][usize::from(alg)].fetch_add(1, Relaxed);
        }
    }

    fn upstream(&self, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        let b = RTT_BUCKETS
            .iter()
            .position(|&le| s <= le)
            .unwrap_or(RTT_BUCKETS.len());
        self.rtt[b].fetch_add(1, Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.rtt_sum_micros.fetch_add(micros, Relaxed);
    }

    /// A completed TLS handshake with a stub.
    pub(crate) fn handshake(&self, group: Option<rustls::NamedGroup>) {
        self.handshakes[group_slot(group)].fetch_add(1, Relaxed);
    }

    /// A stale answer sent (RFC 8767).
    pub(crate) fn stale_answer(&self) {
        self.stale.fetch_add(1, Relaxed);
    }

    /// An answer from a local zone.
    pub(crate) fn local_answer(&self) {
        self.local.fetch_add(1, Relaxed);
    }

    /// A UDP response limited for `why`.
    pub(crate) fn limited(&self, why: Limited) {
        self.limited[why as usize].fetch_add(1, Relaxed);
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let load = |c: &AtomicU64| c.load(Relaxed);
        out.push_str("# HELP pqdns_resolver_queries_total Responses sent, by transport and response code.\n# TYPE pqdns_resolver_queries_total counter\n");
        for (t, transport) in TRANSPORTS.iter().map(|t| t.name()).enumerate() {
            for (r, c) in self.queries[t].iter().enumerate() {
                let rcode = RCODES.get(r).and_then(|k| k.mnemonic()).unwrap_or("OTHER");
                let _ = writeln!(
                    out,
                    "pqdns_resolver_queries_total{{transport=\"{transport}\",rcode=\"{rcode}\"}} {}",
                    load(c)
                );
            }
        }
        out.push_str("# HELP pqdns_resolver_cache_total Queries answered from the cache or resolved.\n# TYPE pqdns_resolver_cache_total counter\n");
        for (i, result) in ["hit", "miss"].iter().enumerate() {
            let n = load(&self.cache[i]);
            let _ = writeln!(out, "pqdns_resolver_cache_total{{result=\"{result}\"}} {n}");
        }
        out.push_str("# HELP pqdns_resolver_validations_total Resolutions by validation status and the DNSSEC algorithms that verified Secure ones.\n# TYPE pqdns_resolver_validations_total counter\n");
        for (s, status) in STATUSES.iter().enumerate() {
            for (alg, c) in self.validations[s].iter().enumerate() {
                let n = load(c);
                if n == 0 && !(alg == 0 && s > 0) {
                    continue;
                }
                let label = if alg == 0 {
                    "none".to_string()
                } else {
                    alg.to_string()
                };
                let _ = writeln!(
                    out,
                    "pqdns_resolver_validations_total{{status=\"{status}\",algorithm=\"{label}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP pqdns_resolver_upstream_rtt_seconds Time of exchanges with authorities or forwarders.\n# TYPE pqdns_resolver_upstream_rtt_seconds histogram\n");
        let sum = load(&self.rtt_sum_micros) as f64 / 1e6;
        let name = "pqdns_resolver_upstream_rtt_seconds";
        write_histogram(&mut out, name, "", &RTT_BUCKETS, &self.rtt, sum);
        out.push_str("# HELP pqdns_resolver_tls_handshakes_total Completed TLS handshakes with stubs, by key exchange group.\n# TYPE pqdns_resolver_tls_handshakes_total counter\n");
        for (g, c) in self.handshakes.iter().enumerate() {
            let group = group_label(g);
            let n = load(c);
            let _ = writeln!(
                out,
                "pqdns_resolver_tls_handshakes_total{{group=\"{group}\"}} {n}"
            );
        }
        out.push_str("# HELP pqdns_resolver_udp_limited_total UDP responses to clients without a valid server cookie truncated or dropped, by limit.\n# TYPE pqdns_resolver_udp_limited_total counter\n");
        for ((limit, action), c) in LIMITED.iter().zip(&self.limited) {
            let _ = writeln!(
                out,
                "pqdns_resolver_udp_limited_total{{limit=\"{limit}\",action=\"{action}\"}} {}",
                load(c)
            );
        }
        out.push_str("# HELP pqdns_resolver_stale_answers_total Expired validated answers sent with EDE 3 because no fresh one came in time (RFC 8767).\n# TYPE pqdns_resolver_stale_answers_total counter\n");
        let _ = writeln!(
            out,
            "pqdns_resolver_stale_answers_total {}",
            load(&self.stale)
        );
        out.push_str("# HELP pqdns_resolver_local_answers_total Answers from local zones, without any query upstream.\n# TYPE pqdns_resolver_local_answers_total counter\n");
        let _ = writeln!(
            out,
            "pqdns_resolver_local_answers_total {}",
            load(&self.local)
        );
        out.push_str("# HELP pqdns_resolver_synthesised_answers_total NXDOMAIN and NODATA answers synthesised from cached, validated NSEC/NSEC3 records without asking the authorities (RFC 8198).\n# TYPE pqdns_resolver_synthesised_answers_total counter\n");
        let _ = writeln!(
            out,
            "pqdns_resolver_synthesised_answers_total {}",
            load(&self.synthesised)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_under_their_labels() {
        let m = ServiceMetrics::default();
        m.response(Transport::Udp, Rcode::NOERROR);
        m.response(Transport::Udp, Rcode::NOERROR);
        m.response(Transport::Dot, Rcode::SERVFAIL);
        m.response(Transport::Doh, Rcode(9));
        m.cache(true);
        m.cache(false);
        m.cache(false);
        m.upstream(Duration::from_micros(700));
        m.upstream(Duration::from_secs(9));
        m.handshake(Some(rustls::NamedGroup::from(0x11ec)));
        m.handshake(None);
        m.limited(Limited::Amplification);
        m.limited(Limited::RateDrop);
        m.limited(Limited::RateDrop);
        let text = m.render();
        for line in [
            "pqdns_resolver_queries_total{transport=\"udp\",rcode=\"NOERROR\"} 2",
            "pqdns_resolver_queries_total{transport=\"dot\",rcode=\"SERVFAIL\"} 1",
            "pqdns_resolver_queries_total{transport=\"doh\",rcode=\"OTHER\"} 1",
            "pqdns_resolver_cache_total{result=\"hit\"} 1",
            "pqdns_resolver_cache_total{result=\"miss\"} 2",
            "pqdns_resolver_validations_total{status=\"bogus\",algorithm=\"none\"} 0",
            "pqdns_resolver_upstream_rtt_seconds_bucket{le=\"0.0005\"} 0",
            "pqdns_resolver_upstream_rtt_seconds_bucket{le=\"0.001\"} 1",
            "pqdns_resolver_upstream_rtt_seconds_bucket{le=\"2.5\"} 1",
            "pqdns_resolver_upstream_rtt_seconds_bucket{le=\"+Inf\"} 2",
            "pqdns_resolver_upstream_rtt_seconds_sum 9.0007",
            "pqdns_resolver_tls_handshakes_total{group=\"X25519MLKEM768\"} 1",
            "pqdns_resolver_tls_handshakes_total{group=\"other\"} 1",
            "pqdns_resolver_udp_limited_total{limit=\"amplification\",action=\"truncated\"} 1",
            "pqdns_resolver_udp_limited_total{limit=\"rate\",action=\"truncated\"} 0",
            "pqdns_resolver_udp_limited_total{limit=\"rate\",action=\"dropped\"} 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}

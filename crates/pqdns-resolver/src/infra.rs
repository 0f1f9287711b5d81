//! What the resolver remembers of the servers it asks (unbound's "infrastructure cache";
//! RFC 1035 §7.2 asks resolvers to keep per-server performance):
//!
//! - **Round-trip time.** Each answer's time is a sample for a smoothed estimate kept per
//!   server (SRTT and RTTVAR as RFC 6298 §2 computes them for TCP). Servers are asked fastest
//!   first; a server never asked (or forgotten after [`RTT_LIFETIME`]) goes before those
//!   known, so its time is learnt once.
//! - **Early give-up.** While other servers remain to be tried, a server with a known RTT gets
//!   its retransmission timeout (SRTT + 4·RTTVAR, at least [`MIN_TIMEOUT`]) instead of the
//!   full exchange timeout: a server that stopped answering costs about its RTO, not the full
//!   timeout. Its estimate then backs off (doubled, RFC 6298 §5.5), so it is asked later. The
//!   last server left always gets the full timeout.
//! - **Hold-down.** A server that did not answer within the full timeout (or whose connection
//!   failed) is tried after the others for [`HOLD_DOWN`], so one silent name server costs a
//!   timeout once per hold-down, not once per name. A server is never dropped altogether:
//!   when every server of a set is held down, they are still tried, fastest first.
//!
//! Bounded: at most [`MAX_SERVERS`] servers remembered in each table; the oldest go first.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::resolve::lock;
use crate::ttl_map::TtlMap;

/// How long a server that did not answer is tried last, seconds.
pub(crate) const HOLD_DOWN: u32 = 120;
/// How long a server's round-trip estimate is kept after its last update, seconds (unbound's
/// `infra-host-ttl`).
pub(crate) const RTT_LIFETIME: u32 = 900;
/// Shortest retransmission timeout given to a server before the next one is tried (unbound's
/// `RTT_MIN_TIMEOUT` is 50 ms; this leaves room for a loaded signer answering over TCP).
pub(crate) const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// Servers remembered at once.
pub(crate) const MAX_SERVERS: usize = 10_000;

/// A server's smoothed round-trip time and its variation (RFC 6298 §2), microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rtt {
    srtt_us: u64,
    rttvar_us: u64,
}

impl Rtt {
    /// The estimate after the first sample (RFC 6298 §2.2).
    fn first(sample_us: u64) -> Rtt {
        Rtt {
            srtt_us: sample_us,
            rttvar_us: sample_us / 2,
        }
    }

    /// The estimate after one more sample (RFC 6298 §2.3: β = 1/4, α = 1/8).
    fn update(self, sample_us: u64) -> Rtt {
        Rtt {
            rttvar_us: (3 * self.rttvar_us + self.srtt_us.abs_diff(sample_us)) / 4,
            srtt_us: (7 * self.srtt_us + sample_us) / 8,
        }
    }

    /// SRTT + 4·RTTVAR (RFC 6298 §2.3), at least [`MIN_TIMEOUT`].
    fn timeout(self) -> Duration {
        Duration::from_micros(
            self.srtt_us
                .saturating_add(self.rttvar_us.saturating_mul(4)),
        )
        .max(MIN_TIMEOUT)
    }
}

/// Round-trip estimates and the servers that did not answer recently.
#[derive(Debug)]
pub(crate) struct Infra {
    unresponsive: Mutex<TtlMap<SocketAddr, ()>>,
    rtt: Mutex<TtlMap<SocketAddr, Rtt>>,
}

impl Infra {
    pub(crate) fn new() -> Infra {
        Infra {
            unresponsive: Mutex::new(TtlMap::new(MAX_SERVERS)),
            rtt: Mutex::new(TtlMap::new(MAX_SERVERS)),
        }
    }

    /// `servers` in the order to try them at `now`: those not held down first, then those
    /// held down; within each, servers without an estimate first, then by SRTT (the sort is
    /// stable: equal ones keep their order).
    pub(crate) fn order(&self, servers: &[SocketAddr], now: Instant) -> Vec<SocketAddr> {
        let down = lock(&self.unresponsive);
        let rtt = lock(&self.rtt);
        let mut ordered = servers.to_vec();
        ordered.sort_by_key(|s| {
            let held = down.get(s, now).is_some();
            (held, rtt.get(s, now).map_or(0, |r| r.srtt_us))
        });
        ordered
    }

    /// How long to wait for `server` at `now` before trying the next one: its retransmission
    /// timeout when its round-trip time is known, else `None` (the full exchange timeout).
    pub(crate) fn timeout(&self, server: SocketAddr, now: Instant) -> Option<Duration> {
        lock(&self.rtt).get(&server, now).map(|r| r.timeout())
    }

    /// `server` answered after `elapsed` at `now`: a round-trip sample; it is no longer held
    /// down.
    pub(crate) fn answered(&self, server: SocketAddr, elapsed: Duration, now: Instant) {
        lock(&self.unresponsive).remove(&server);
        let sample = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let mut rtt = lock(&self.rtt);
        let next = match rtt.get(&server, now) {
            Some(r) => r.update(sample),
            None => Rtt::first(sample),
        };
        rtt.insert(server, next, RTT_LIFETIME, now);
    }

    /// `server` did not answer within its retransmission timeout at `now`: its estimate backs
    /// off (doubled, RFC 6298 §5.5), so others are asked first.
    pub(crate) fn gave_up(&self, server: SocketAddr, now: Instant) {
        let mut rtt = lock(&self.rtt);
        if let Some(r) = rtt.get(&server, now).copied() {
            let backed_off = Rtt {
                srtt_us: r
                    .timeout()
                    .as_micros()
                    .try_into()
                    .unwrap_or(u64::MAX)
                    .saturating_mul(2),
                rttvar_us: r.rttvar_us,
            };
            rtt.insert(server, backed_off, RTT_LIFETIME, now);
        }
    }

    /// `server` did not answer within the full timeout, or its connection failed, at `now`.
    pub(crate) fn failed(&self, server: SocketAddr, now: Instant) {
        lock(&self.unresponsive).insert(server, (), HOLD_DOWN, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(HOLD_DOWN as u64);
    const MS: Duration = Duration::from_millis(1);

    fn servers() -> (SocketAddr, SocketAddr, SocketAddr) {
        (
            "192.0.2.1:53".parse().unwrap(),
            "192.0.2.2:53".parse().unwrap(),
            "192.0.2.3:53".parse().unwrap(),
        )
    }

    #[test]
    fn a_silent_server_is_tried_last_until_the_hold_down_ends() {
        let infra = Infra::new();
        let (a, b, _) = servers();
        let now = Instant::now();
        assert_eq!(infra.order(&[a, b], now), [a, b]);
        infra.failed(a, now);
        assert_eq!(infra.order(&[a, b], now), [b, a]);
        assert_eq!(infra.order(&[a], now), [a], "never dropped");
        assert_eq!(
            infra.order(&[a, b], now + HOLD),
            [a, b],
            "held down no longer"
        );
        infra.failed(a, now);
        infra.answered(a, MS, now);
        assert_eq!(
            infra.order(&[a, b], now),
            [b, a],
            "b is unknown: asked first"
        );
        infra.answered(b, 2 * MS, now);
        assert_eq!(infra.order(&[a, b], now), [a, b], "a answered faster");
    }

    #[test]
    fn servers_are_asked_unknown_first_then_fastest_first() {
        let infra = Infra::new();
        let (a, b, c) = servers();
        let now = Instant::now();
        infra.answered(a, 80 * MS, now);
        infra.answered(b, 5 * MS, now);
        assert_eq!(infra.order(&[a, b, c], now), [c, b, a]);
        // Estimates are forgotten after their lifetime: all unknown, the given order.
        let later = now + Duration::from_secs(u64::from(RTT_LIFETIME));
        assert_eq!(infra.order(&[a, b, c], later), [a, b, c]);
    }

    #[test]
    fn the_estimate_follows_rfc_6298() {
        // Known answers: 100 ms first (SRTT 100, RTTVAR 50); then 200 ms:
        // RTTVAR = 3/4·50 + 1/4·|100 − 200| = 62.5, SRTT = 7/8·100 + 1/8·200 = 112.5.
        let r = Rtt::first(100_000);
        assert_eq!(r.timeout(), Duration::from_millis(300));
        let r = r.update(200_000);
        assert_eq!(
            r,
            Rtt {
                srtt_us: 112_500,
                rttvar_us: 62_500
            }
        );
        assert_eq!(r.timeout(), Duration::from_micros(362_500));
        assert_eq!(Rtt::first(200).timeout(), MIN_TIMEOUT, "floor");
    }

    #[test]
    fn a_server_given_up_on_is_asked_after_the_others_and_waited_for_longer() {
        let infra = Infra::new();
        let (a, b, _) = servers();
        let now = Instant::now();
        assert_eq!(infra.timeout(a, now), None, "unknown: the full timeout");
        infra.answered(a, MS, now);
        infra.answered(b, 10 * MS, now);
        assert_eq!(infra.order(&[a, b], now), [a, b]);
        assert_eq!(infra.timeout(a, now), Some(MIN_TIMEOUT));
        infra.gave_up(a, now);
        assert_eq!(infra.order(&[a, b], now), [b, a]);
        assert_eq!(infra.timeout(a, now), Some(2 * MIN_TIMEOUT + 2 * MS));
        // Backed off, not held down: before a server that did not answer at all.
        let (_, _, c) = servers();
        infra.failed(c, now);
        assert_eq!(infra.order(&[c, a], now), [a, c]);
    }
}

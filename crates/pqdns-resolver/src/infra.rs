//! What the resolver remembers of the servers it asks (unbound's "infrastructure cache";
//! RFC 1035 §7.2 asks resolvers to keep per-server performance): a server that did not answer
//! (timeout, or the connection failed) is tried after the others for [`HOLD_DOWN`], so one
//! silent name server costs a timeout once per hold-down, not once per name. A server is never
//! dropped altogether: when every server of a set is held down, they are still tried, in
//! their order.
//!
//! Bounded: at most [`MAX_SERVERS`] servers remembered; the oldest go first.

use std::net::SocketAddr;
use std::sync::Mutex;
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

use crate::resolve::lock;
use crate::ttl_map::TtlMap;

/// How long a server that did not answer is tried last, seconds.
pub const HOLD_DOWN: u32 = 120;
/// Servers remembered at once.
pub const MAX_SERVERS: usize = 10_000;

/// The servers that did not answer recently.
#[derive(Debug)]
pub(crate) struct Infra {
    unresponsive: Mutex<TtlMap<SocketAddr, ()>>,
}

impl Infra {
    pub(crate) fn new() -> Infra {
        Infra {
            unresponsive: Mutex::new(TtlMap::new(MAX_SERVERS)),
        }
    }

    /// `servers` in the order to try them at `now`: those that answered (or were never
    /// asked) first, in their order; then those held down.
    pub(crate) fn order(&self, servers: &[SocketAddr], now: Instant) -> Vec<SocketAddr> {
        let down = lock(&self.unresponsive);
        let (mut up, held): (Vec<SocketAddr>, Vec<SocketAddr>) =
            servers.iter().partition(|s| down.get(s, now).is_none());
        up.extend(held);
        up
    }

    /// `server` did not answer at `now`.
    pub(crate) fn failed(&self, server: SocketAddr, now: Instant) {
        lock(&self.unresponsive).insert(server, (), HOLD_DOWN, now);
    }

    /// `server` answered: it is no longer held down.
    pub(crate) fn answered(&self, server: SocketAddr) {
        lock(&self.unresponsive).remove(&server);
    }
}

/// [`HOLD_DOWN`] as a duration.
#[cfg(test)]
const HOLD: Duration = Duration::from_secs(HOLD_DOWN as u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_server_is_tried_last_until_the_hold_down_ends() {
        let infra = Infra::new();
        let a: SocketAddr = "192.0.2.1:53".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:53".parse().unwrap();
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
        infra.answered(a);
        assert_eq!(infra.order(&[a, b], now), [a, b]);
    }
}

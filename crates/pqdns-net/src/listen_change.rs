//! What changes between the [`ListenConfig`] listeners run with and a new one: which listen
//! addresses to start and which to stop, per transport, and which settings differ but apply
//! only at the next start ([`ListenChange::between`]). [`Listeners::prepare`] binds the
//! addresses to start and [`Listeners::apply`] starts and stops them, so that a reload
//! (SIGHUP, a control channel) changes listeners without a restart while every listener whose
//! address stays keeps running, with its open connections.
//!
//! Listeners are matched by transport and *configured* address (`127.0.0.1:0` stays the
//! listener bound at start, whatever port the system chose), so an unchanged configuration
//! changes nothing.
//!
//! [`Listeners::prepare`]: crate::Listeners::prepare
//! [`Listeners::apply`]: crate::Listeners::apply

use std::net::SocketAddr;
use std::sync::Arc;

use crate::listeners::ListenConfig;
use crate::service::Transport;

/// The listener changes from one [`ListenConfig`] to another.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenChange {
    /// Listeners to start: transport and configured address, in configuration order
    /// (UDP, TCP, DoT, DoH, DoQ).
    pub start: Vec<(Transport, SocketAddr)>,
    /// Running listeners to stop: transport and configured address.
    pub stop: Vec<(Transport, SocketAddr)>,
    /// Settings that differ but take effect only at the next start (they shape every
    /// listener, or need sockets bound again), by their [`ListenConfig`] field names:
    /// `udp_threads`, `doq_endpoints`, `doh_path`, `idle_timeout`, `handshake_timeout`,
    /// `max_connections`, `max_connections_per_ip`, `client_prefix`, `max_deferred`,
    /// `deferred_timeout`, `tls`. New listeners get the settings the running ones have.
    pub needs_restart: Vec<&'static str>,
}

/// The listen addresses of `config` per transport, in the order listeners start.
pub(crate) fn addresses(config: &ListenConfig) -> [(Transport, &[SocketAddr]); 5] {
    [
        (Transport::Udp, &config.udp),
        (Transport::Tcp, &config.tcp),
        (Transport::Dot, &config.dot),
        (Transport::Doh, &config.doh),
        (Transport::Doq, &config.doq),
    ]
}

impl ListenChange {
    /// The change from `running` to `wanted`. An address listed twice for one transport
    /// counts once.
    pub fn between(running: &ListenConfig, wanted: &ListenConfig) -> ListenChange {
        let mut change = ListenChange::default();
        for ((transport, old), (_, new)) in addresses(running).into_iter().zip(addresses(wanted)) {
            for &addr in new {
                if !old.contains(&addr) && !change.start.contains(&(transport, addr)) {
                    change.start.push((transport, addr));
                }
            }
            for &addr in old {
                if !new.contains(&addr) && !change.stop.contains(&(transport, addr)) {
                    change.stop.push((transport, addr));
                }
            }
        }
        let (r, w) = (running, wanted);
        let tls_same = {
            let (a, b) = (&r.tls, &w.tls);
            a.policy == b.policy
                && a.cert_and_key == b.cert_and_key
                && match (&a.certified_key, &b.certified_key) {
                    (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                    (x, y) => x.is_none() && y.is_none(),
                }
                && a.generated_cert_dir == b.generated_cert_dir
                && a.certificate_algorithm == b.certificate_algorithm
                && a.names == b.names
        };
        for (same, key) in [
            (r.udp_threads == w.udp_threads, "udp_threads"),
            (r.doq_endpoints == w.doq_endpoints, "doq_endpoints"),
            (r.doh_path == w.doh_path, "doh_path"),
            (r.idle_timeout == w.idle_timeout, "idle_timeout"),
            (
                r.handshake_timeout == w.handshake_timeout,
                "handshake_timeout",
            ),
            (r.max_connections == w.max_connections, "max_connections"),
            (
                r.max_connections_per_ip == w.max_connections_per_ip,
                "max_connections_per_ip",
            ),
            (r.client_prefix == w.client_prefix, "client_prefix"),
            (r.max_deferred == w.max_deferred, "max_deferred"),
            (r.deferred_timeout == w.deferred_timeout, "deferred_timeout"),
            (tls_same, "tls"),
        ] {
            if !same {
                change.needs_restart.push(key);
            }
        }
        change
    }

    /// True if no listener starts or stops and no setting waits for a restart.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty() && self.stop.is_empty() && self.needs_restart.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn config() -> ListenConfig {
        let mut c = ListenConfig::new(PathBuf::from("certs"));
        c.udp = vec![addr("127.0.0.1:53"), addr("[::1]:53")];
        c.tcp = vec![addr("127.0.0.1:53"), addr("[::1]:53")];
        c.dot = vec![addr("127.0.0.1:853")];
        c
    }

    #[test]
    fn the_same_configuration_changes_nothing() {
        let change = ListenChange::between(&config(), &config());
        assert!(change.is_empty(), "{change:?}");
    }

    /// Addresses added start, addresses removed stop, per transport: the same address under
    /// another transport is another listener; the others stay.
    #[test]
    fn addresses_added_start_and_removed_stop_per_transport() {
        let mut wanted = config();
        wanted.udp = vec![addr("127.0.0.1:53"), addr("127.0.0.1:5300")];
        wanted.tcp = vec![
            addr("127.0.0.1:53"),
            addr("[::1]:53"),
            addr("127.0.0.1:5300"),
        ];
        wanted.dot = Vec::new();
        wanted.doq = vec![addr("127.0.0.1:853"), addr("127.0.0.1:853")];
        let change = ListenChange::between(&config(), &wanted);
        assert_eq!(
            change.start,
            vec![
                (Transport::Udp, addr("127.0.0.1:5300")),
                (Transport::Tcp, addr("127.0.0.1:5300")),
                (Transport::Doq, addr("127.0.0.1:853")),
            ]
        );
        assert_eq!(
            change.stop,
            vec![
                (Transport::Udp, addr("[::1]:53")),
                (Transport::Dot, addr("127.0.0.1:853")),
            ]
        );
        assert!(change.needs_restart.is_empty());
    }

    /// Settings that shape every listener are reported by their key names, not applied.
    #[test]
    fn settings_of_every_listener_need_a_restart() {
        let mut wanted = config();
        wanted.udp_threads = 4;
        wanted.idle_timeout = Duration::from_secs(30);
        wanted.tls.names = vec!["ns1.example".into()];
        let change = ListenChange::between(&config(), &wanted);
        assert!(change.start.is_empty() && change.stop.is_empty());
        assert_eq!(change.needs_restart, ["udp_threads", "idle_timeout", "tls"]);
    }
}

//! The AF_XDP fast path for UDP answers (`[server] xdp = ["IFACE", "IFACE@PORT"]`, `--xdp`):
//! which interfaces and ports, and starting `pqdns_xdp` listeners on the server's one request
//! pipeline (`Authoritative::respond`). Built with the cargo feature `xdp`; without it a
//! configuration that names an interface is refused at start, never silently served by the
//! socket path alone.
//!
//! `IFACE` serves the ports of the `udp` listen addresses, `IFACE@PORT` that port only (as
//! Knot DNS's `xdp.listen`). The UDP sockets stay bound: what the XDP program passes to the
//! kernel (IP fragments, queries with IP options, other interfaces) is answered there.

use std::net::SocketAddr;
use std::str::FromStr;

/// One interface of the fast path and the UDP port it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpInterface {
    /// The network interface name (at most 15 bytes, as Linux's `IFNAMSIZ` allows).
    pub interface: String,
    /// The UDP destination port answered there; `None`: every port of the `udp` addresses.
    pub port: Option<u16>,
}

impl XdpInterface {
    /// The ports served on this interface, given the server's UDP listen addresses.
    pub fn ports(&self, udp: &[SocketAddr]) -> Vec<u16> {
        let mut ports: Vec<u16> = match self.port {
            Some(port) => vec![port],
            None => udp.iter().map(SocketAddr::port).collect(),
        };
        ports.sort_unstable();
        ports.dedup();
        ports
    }
}

impl FromStr for XdpInterface {
    type Err = String;

    /// `IFACE` or `IFACE@PORT`.
    fn from_str(s: &str) -> Result<XdpInterface, String> {
        let (interface, port) = match s.split_once('@') {
            Some((name, port)) => {
                let port: u16 =
                    port.parse().ok().filter(|&p| p != 0).ok_or_else(|| {
                        format!("xdp {s:?}: {port:?} is not a UDP port (1..=65535)")
                    })?;
                (name, Some(port))
            }
            None => (s, None),
        };
        let valid = !interface.is_empty()
            && interface.len() < 16
            && !interface.contains(['/', ' ', '\0'])
            && interface != "."
            && interface != "..";
        if !valid {
            return Err(format!("xdp {s:?}: {interface:?} is not an interface name"));
        }
        Ok(XdpInterface {
            interface: interface.to_string(),
            port,
        })
    }
}

/// The running fast path (feature `xdp`), one listener per interface; the metrics listener
/// holds weak references ([`Watched`]).
#[cfg(feature = "xdp")]
pub(crate) type Running = Vec<std::sync::Arc<pqdns_xdp::XdpListener>>;
/// The fast path is not built in: nothing runs.
#[cfg(not(feature = "xdp"))]
#[derive(Debug)]
pub(crate) struct Running;

/// What the metrics listener reads the fast path's counters from.
#[cfg(feature = "xdp")]
pub(crate) type Watched = Vec<std::sync::Weak<pqdns_xdp::XdpListener>>;
/// The fast path is not built in: nothing to watch.
#[cfg(not(feature = "xdp"))]
pub(crate) struct Watched;

/// Stops the fast path: detaches the XDP programs and joins the serving threads (blocks for
/// up to `pqdns_net::POLL_INTERVAL`).
#[cfg(feature = "xdp")]
pub(crate) fn stop(running: Running) {
    drop(running);
}

/// Nothing runs without the feature.
#[cfg(not(feature = "xdp"))]
pub(crate) fn stop(_running: Running) {}

/// Weak references to the running listeners, for the metrics.
#[cfg(feature = "xdp")]
pub(crate) fn watch(running: &Running) -> Watched {
    running.iter().map(std::sync::Arc::downgrade).collect()
}

/// Nothing to watch without the feature.
#[cfg(not(feature = "xdp"))]
pub(crate) fn watch(_running: &Running) -> Watched {
    Watched
}

/// Appends `pqdns_xdp_frames_total{interface, outcome}` (Prometheus text) for the listeners
/// still running.
#[cfg(feature = "xdp")]
pub(crate) fn render(watched: &Watched, out: &mut String) {
    use std::fmt::Write;
    let running: Vec<_> = watched
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    if running.is_empty() {
        return;
    }
    out.push_str("# HELP pqdns_xdp_frames_total Frames on the AF_XDP fast path by interface and outcome: redirected to it or passed to the kernel by the XDP program; answered, unreadable, oversize (answer larger than a frame) or (answers made later) dropped for want of a free frame (tx_ring_full) by pqdns; dropped by the kernel for a full RX ring or an empty fill ring.\n# TYPE pqdns_xdp_frames_total counter\n");
    for listener in running {
        let s = listener.stats();
        for (outcome, n) in [
            ("redirected", s.redirected),
            ("passed", s.passed),
            ("answered", s.answered),
            ("unreadable", s.unreadable),
            ("oversize", s.oversize),
            ("tx_ring_full", s.tx_ring_full),
            ("rx_ring_full", s.rx_ring_full),
            ("fill_ring_empty", s.fill_ring_empty),
        ] {
            let _ = writeln!(
                out,
                "pqdns_xdp_frames_total{{interface=\"{}\",outcome=\"{outcome}\"}} {n}",
                listener.interface()
            );
        }
    }
}

/// Nothing to render without the feature.
#[cfg(not(feature = "xdp"))]
pub(crate) fn render(_watched: &Watched, _out: &mut String) {}

/// Starts the fast path on every interface of `settings.xdp`, answering through `service`.
/// Must be called inside the tokio runtime.
///
/// # Errors
/// A message naming the interface: it cannot be served (no such interface, MTU, the kernel
/// refused the program or the socket), or the server was built without the feature `xdp`.
#[cfg(feature = "xdp")]
pub(crate) fn start(
    settings: &crate::settings::Settings,
    udp: &[SocketAddr],
    service: &std::sync::Arc<crate::service::Authoritative>,
) -> Result<Running, String> {
    let listen = settings.listen_config();
    let mut running = Vec::new();
    for entry in &settings.xdp {
        let config = pqdns_xdp::XdpConfig {
            interface: entry.interface.clone(),
            ports: entry.ports(udp),
            max_message: usize::from(settings.udp_payload),
            max_deferred: listen.max_deferred,
            deferred_timeout: listen.deferred_timeout,
        };
        let listener = pqdns_xdp::XdpListener::start(
            &config,
            std::sync::Arc::clone(service),
            tokio::runtime::Handle::current(),
        )
        .map_err(|e| format!("xdp {}: {e}", entry.interface))?;
        running.push(std::sync::Arc::new(listener));
    }
    Ok(running)
}

/// Without the feature `xdp`: refuses any interface.
#[cfg(not(feature = "xdp"))]
pub(crate) fn start(
    settings: &crate::settings::Settings,
    _udp: &[SocketAddr],
    _service: &std::sync::Arc<crate::service::Authoritative>,
) -> Result<Running, String> {
    match settings.xdp.first() {
        Some(entry) => Err(format!(
            "xdp {}: this pqdns-server was built without the feature `xdp`",
            entry.interface
        )),
        None => Ok(Running),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_entries_parse_with_and_without_a_port() {
        let plain: XdpInterface = "eth0".parse().unwrap();
        assert_eq!(plain.port, None);
        let udp: Vec<SocketAddr> = vec![
            "192.0.2.1:53".parse().unwrap(),
            "[2001:db8::1]:53".parse().unwrap(),
            "192.0.2.1:5353".parse().unwrap(),
        ];
        assert_eq!(plain.ports(&udp), vec![53, 5353]);
        let one: XdpInterface = "veth0@5300".parse().unwrap();
        assert_eq!((one.interface.as_str(), one.port), ("veth0", Some(5300)));
        assert_eq!(one.ports(&udp), vec![5300]);
        for bad in [
            "",
            "@53",
            "eth0@",
            "eth0@0",
            "eth0@65536",
            "a/b",
            "sixteen-bytes-xx",
        ] {
            assert!(bad.parse::<XdpInterface>().is_err(), "{bad:?} accepted");
        }
    }
}

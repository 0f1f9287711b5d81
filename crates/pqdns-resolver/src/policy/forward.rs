//! Per-domain forward zones and stub zones (`[[forward-zone]]`, `[[stub-zone]]` tables), as
//! unbound's `forward-zone` and `stub-zone`: the zone whose name is the longest suffix of
//! QNAME (of its parent for QTYPE DS, which the parent side of a zone cut holds, RFC 4035
//! §3.1.4.1) decides where a query the cache cannot answer goes; names in no such zone follow
//! the global mode (`--forward` or iteration from the root hints).
//!
//! - A forward zone sends its queries to its upstreams, in order of their recent speed, over
//!   one transport: UDP (TCP when truncated), TCP, DNS over TLS (RFC 7858), DNS over HTTPS
//!   (RFC 8484) or DNS over QUIC (RFC 9250), with its own TLS server name and, with
//!   `pq-only`, only handshakes that negotiate a hybrid post-quantum key exchange.
//! - A stub zone iterates from its servers (RFC 1034 §5.3.3), with the bailiwick rules of
//!   iteration, as if they had been given in a referral to the zone.
//!
//! Validation stays on for both: the chain of trust of a name in a forward or stub zone runs
//! from the trust anchors through the zone's parent (its DS is asked where the parent's
//! name leads), as for any other name.

use std::net::{IpAddr, SocketAddr};

use pqdns_core::Name;

use crate::transport::{Client, Transport};

/// One upstream of a forward zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// How queries reach it.
    pub transport: Transport,
    /// Its address.
    pub addr: SocketAddr,
    /// TLS server name to send and verify (after `#`), for DoT, DoH and DoQ.
    pub tls_name: Option<String>,
}

impl std::str::FromStr for Upstream {
    type Err = String;

    /// `IP[:PORT]` or `udp://IP[:PORT]` (UDP, TCP when truncated; port 53), `tcp://IP[:PORT]`
    /// (53), `tls://IP[:PORT][#NAME]` (DoT, 853), `https://IP[:PORT]/dns-query[#NAME]` (DoH,
    /// 443) or `quic://IP[:PORT][#NAME]` (DoQ, 853); IPv6 as `[::1]:PORT`.
    fn from_str(text: &str) -> Result<Upstream, String> {
        let (rest, tls_name) = match text.split_once('#') {
            Some((r, n)) if !n.is_empty() => (r, Some(n.to_owned())),
            Some(_) => return Err(format!("{text:?}: empty TLS name after '#'")),
            None => (text, None),
        };
        let schemes = [
            ("udp://", Transport::Udp, 53),
            ("tcp://", Transport::Tcp, 53),
            ("tls://", Transport::Dot, 853),
            ("https://", Transport::Doh, 443),
            ("quic://", Transport::Doq, 853),
        ];
        let (transport, port, host) = schemes
            .iter()
            .find_map(|(prefix, t, port)| rest.strip_prefix(prefix).map(|h| (*t, *port, h)))
            .unwrap_or((Transport::Udp, 53, rest));
        let host = match transport {
            Transport::Doh => host.strip_suffix("/dns-query").unwrap_or(host),
            _ => host,
        };
        let addr = host
            .parse::<SocketAddr>()
            .or_else(|_| host.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, port)))
            .map_err(|_| {
                format!(
                    "{text:?}: expected IP[:PORT], udp://, tcp://, tls://, https://…/dns-query \
                     or quic:// and an IP address (IPv6 as [::1]:PORT), with #NAME for TLS"
                )
            })?;
        if tls_name.is_some() && matches!(transport, Transport::Udp | Transport::Tcp) {
            return Err(format!(
                "{text:?}: a TLS name (#NAME) needs tls://, https:// or quic://"
            ));
        }
        Ok(Upstream {
            transport,
            addr,
            tls_name,
        })
    }
}

/// Where the queries of one zone go.
pub(crate) enum RouteKind {
    /// To these upstreams through `client`.
    Forward {
        client: Box<Client>,
        servers: Vec<SocketAddr>,
    },
    /// Iteration from these servers of the zone.
    Stub { servers: Vec<SocketAddr> },
}

/// A forward or stub zone, ready to use.
pub(crate) struct ZoneRoute {
    /// The zone (lowercase).
    pub(crate) name: Name,
    pub(crate) kind: RouteKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_forms() {
        let up = |s: &str| s.parse::<Upstream>().unwrap();
        assert_eq!(up("192.0.2.1").addr, "192.0.2.1:53".parse().unwrap());
        assert_eq!(up("udp://192.0.2.1:5353").transport, Transport::Udp);
        assert_eq!(up("tcp://[::1]:53").transport, Transport::Tcp);
        let dot = up("tls://192.0.2.1#dns.example");
        assert_eq!(
            (dot.transport, dot.addr.port(), dot.tls_name.as_deref()),
            (Transport::Dot, 853, Some("dns.example"))
        );
        let doh = up("https://192.0.2.1:8443/dns-query#dns.example");
        assert_eq!((doh.transport, doh.addr.port()), (Transport::Doh, 8443));
        assert_eq!(up("quic://192.0.2.1").transport, Transport::Doq);
        for bad in [
            "dns.example",
            "tls://192.0.2.1#",
            "192.0.2.1#x",
            "ftp://192.0.2.1",
        ] {
            assert!(bad.parse::<Upstream>().is_err(), "{bad}");
        }
    }
}

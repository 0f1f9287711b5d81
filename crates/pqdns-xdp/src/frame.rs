//! Ethernet II frames carrying DNS over UDP: reading a query's headers and writing its
//! answer's, with the checksums the kernel would compute.
//!
//! Headers: Ethernet II (IEEE 802.3 §3.2.6; no VLAN tag), IPv4 (RFC 791 §3.1, header checksum
//! per RFC 1071), IPv6 (RFC 8200 §3; no extension headers), UDP (RFC 768; checksum over the
//! pseudo-header of RFC 768 for IPv4 and RFC 8200 §8.1 for IPv6). A frame is read only if every
//! length agrees and the UDP checksum verifies, as the kernel's UDP receive path requires
//! (a zero UDP checksum is "none" over IPv4 and invalid over IPv6, RFC 8200 §8.1). Trailing
//! bytes past the IP length (Ethernet padding to 60 bytes) are ignored.
//!
//! The answer is written in place of the query: the addresses and ports swapped, TTL / hop
//! limit [`HOP_LIMIT`], IPv4 without options, with DF set and identification 0 (RFC 6864
//! §4.1: an atomic datagram's ID has no meaning), traffic class and flow label 0.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Length of an Ethernet II header, bytes.
pub const ETHERNET_HEADER: usize = 14;
/// Length of an IPv4 header without options, bytes.
pub const IPV4_HEADER: usize = 20;
/// Length of an IPv6 header, bytes.
pub const IPV6_HEADER: usize = 40;
/// Length of a UDP header, bytes.
pub const UDP_HEADER: usize = 8;
/// The most header bytes an answer takes (Ethernet, IPv6, UDP), bytes.
pub const MAX_ANSWER_HEADERS: usize = ETHERNET_HEADER + IPV6_HEADER + UDP_HEADER;
/// TTL (IPv4) and hop limit (IPv6) of answers: Linux's default (`net.ipv4.ip_default_ttl`).
pub const HOP_LIMIT: u8 = 64;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTOCOL_UDP: u8 = 17;

/// Where a query came from and went to: what its answer is addressed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The client's MAC address (the query's Ethernet source).
    pub client_mac: [u8; 6],
    /// Ours (the query's Ethernet destination).
    pub server_mac: [u8; 6],
    /// The client's address and UDP port.
    pub client: SocketAddr,
    /// The address and UDP port the query was sent to.
    pub server: SocketAddr,
}

impl Route {
    /// Header bytes of an answer along this route (Ethernet, IP, UDP).
    pub fn header_len(&self) -> usize {
        ETHERNET_HEADER
            + UDP_HEADER
            + match self.client {
                SocketAddr::V4(_) => IPV4_HEADER,
                SocketAddr::V6(_) => IPV6_HEADER,
            }
    }
}

/// A UDP datagram read from a frame: its route and where its payload lies in the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Addresses and ports.
    pub route: Route,
    /// The UDP payload's range in the frame (the DNS message).
    pub payload: std::ops::Range<usize>,
}

/// Why a frame was not read as a UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// Not IPv4 or IPv6 over Ethernet II carrying UDP, or an IP fragment.
    NotUdp,
    /// A length field disagrees with the frame or with another length.
    Length,
    /// The IPv4 header checksum or the UDP checksum does not verify.
    Checksum,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads the Ethernet, IP and UDP headers of `frame`.
///
/// # Errors
/// [`Unreadable`] for anything but a whole, checksum-correct UDP datagram over IPv4 or IPv6.
pub fn read(frame: &[u8]) -> Result<Datagram, Unreadable> {
    if frame.len() < ETHERNET_HEADER {
        return Err(Unreadable::Length);
    }
    let mut client_mac = [0; 6];
    let mut server_mac = [0; 6];
    server_mac.copy_from_slice(&frame[0..6]);
    client_mac.copy_from_slice(&frame[6..12]);
    let ip = &frame[ETHERNET_HEADER..];
    let (src, dst, udp_at, ip_end, pseudo) = match be16(frame, 12) {
        ETHERTYPE_IPV4 => {
            if ip.len() < IPV4_HEADER || ip[0] >> 4 != 4 {
                return Err(Unreadable::NotUdp);
            }
            let header = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(be16(ip, 2));
            if header < IPV4_HEADER || total < header || total > ip.len() {
                return Err(Unreadable::Length);
            }
            // RFC 791 §3.1: MF set or a non-zero fragment offset: a fragment.
            if be16(ip, 6) & 0x3fff != 0 || ip[9] != PROTOCOL_UDP {
                return Err(Unreadable::NotUdp);
            }
            if checksum(0, &ip[..header]) != 0xffff {
                return Err(Unreadable::Checksum);
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let pseudo = pseudo_sum(IpAddr::V4(src), IpAddr::V4(dst), total - header);
            (IpAddr::V4(src), IpAddr::V4(dst), header, total, pseudo)
        }
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_HEADER || ip[0] >> 4 != 6 {
                return Err(Unreadable::NotUdp);
            }
            if ip[6] != PROTOCOL_UDP {
                return Err(Unreadable::NotUdp);
            }
            let total = IPV6_HEADER + usize::from(be16(ip, 4));
            if total > ip.len() {
                return Err(Unreadable::Length);
            }
            let octets = |at: usize| -> [u8; 16] { ip[at..at + 16].try_into().unwrap_or([0; 16]) };
            let src = Ipv6Addr::from(octets(8));
            let dst = Ipv6Addr::from(octets(24));
            let pseudo = pseudo_sum(IpAddr::V6(src), IpAddr::V6(dst), total - IPV6_HEADER);
            (IpAddr::V6(src), IpAddr::V6(dst), IPV6_HEADER, total, pseudo)
        }
        _ => return Err(Unreadable::NotUdp),
    };
    let udp = &ip[udp_at..ip_end];
    if udp.len() < UDP_HEADER || usize::from(be16(udp, 4)) != udp.len() {
        return Err(Unreadable::Length);
    }
    // RFC 768: zero is "no checksum" over IPv4; RFC 8200 §8.1: invalid over IPv6.
    let none = be16(udp, 6) == 0;
    if (none && src.is_ipv6()) || (!none && checksum(pseudo, udp) != 0xffff) {
        return Err(Unreadable::Checksum);
    }
    let start = ETHERNET_HEADER + udp_at + UDP_HEADER;
    Ok(Datagram {
        route: Route {
            client_mac,
            server_mac,
            client: SocketAddr::new(src, be16(udp, 0)),
            server: SocketAddr::new(dst, be16(udp, 2)),
        },
        payload: start..ETHERNET_HEADER + ip_end,
    })
}

/// Writes the headers of the answer along `route` in front of the `payload_len` bytes of
/// payload already at `frame[route.header_len()..]`, and returns the frame's length.
///
/// # Errors
/// `None` if the frame is shorter than headers and payload, or the payload does not fit a
/// UDP length.
pub fn write_answer(frame: &mut [u8], route: &Route, payload_len: usize) -> Option<usize> {
    let headers = route.header_len();
    let total = headers.checked_add(payload_len)?;
    if frame.len() < total {
        return None;
    }
    let udp_len = u16::try_from(UDP_HEADER + payload_len).ok()?;
    frame[0..6].copy_from_slice(&route.client_mac);
    frame[6..12].copy_from_slice(&route.server_mac);
    let udp_at = headers - UDP_HEADER;
    let (ethertype, pseudo) = match (route.server.ip(), route.client.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let ip = &mut frame[ETHERNET_HEADER..udp_at];
            let ip_len = u16::try_from(IPV4_HEADER).ok()? + udp_len;
            ip[0] = 0x45;
            ip[1] = 0;
            ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
            ip[4..6].copy_from_slice(&[0, 0]);
            // Flags: DF; fragment offset 0.
            ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
            ip[8] = HOP_LIMIT;
            ip[9] = PROTOCOL_UDP;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let sum = !checksum(0, ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            (
                ETHERTYPE_IPV4,
                pseudo_sum(src.into(), dst.into(), udp_len.into()),
            )
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let ip = &mut frame[ETHERNET_HEADER..udp_at];
            ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = PROTOCOL_UDP;
            ip[7] = HOP_LIMIT;
            ip[8..24].copy_from_slice(&src.octets());
            ip[24..40].copy_from_slice(&dst.octets());
            (
                ETHERTYPE_IPV6,
                pseudo_sum(src.into(), dst.into(), udp_len.into()),
            )
        }
        _ => return None,
    };
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
    let udp = &mut frame[udp_at..total];
    udp[0..2].copy_from_slice(&route.server.port().to_be_bytes());
    udp[2..4].copy_from_slice(&route.client.port().to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    // RFC 768: a computed checksum of zero is sent as all ones (zero means none).
    let sum = match !checksum(pseudo, udp) {
        0 => 0xffff,
        sum => sum,
    };
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
    Some(total)
}

/// The one's complement sum (RFC 1071) of the pseudo-header: source, destination, protocol
/// UDP and the UDP length.
fn pseudo_sum(src: IpAddr, dst: IpAddr, udp_len: usize) -> u16 {
    let mut sum = 0u32;
    let mut add = |bytes: &[u8]| sum = fold(sum + u32::from(checksum(0, bytes)));
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            add(&s.octets());
            add(&d.octets());
        }
        (s, d) => {
            add(&ip6(s).octets());
            add(&ip6(d).octets());
        }
    }
    // Lengths are at most 65535 + 40 here: the 32-bit form of RFC 8200 §8.1 in two words.
    let len = u32::try_from(udp_len).unwrap_or(u32::MAX);
    add(&len.to_be_bytes());
    add(&[0, PROTOCOL_UDP]);
    u16::try_from(sum).unwrap_or(0xffff)
}

fn ip6(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

fn fold(mut sum: u32) -> u32 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

/// The one's complement sum (RFC 1071 §4.1) of `bytes` (a trailing odd byte padded with
/// zero), added to `initial`; a correct header with its checksum in place sums to 0xffff.
pub fn checksum(initial: u16, bytes: &[u8]) -> u16 {
    let mut sum = u32::from(initial);
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        if sum > 0xffff {
            sum = fold(sum);
        }
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    u16::try_from(fold(sum)).unwrap_or(0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DNS query (`example.com. A`, ID 0x1234) from 192.0.2.1:40000 to 192.0.2.53:53, with the
    /// header and UDP checksums computed by hand (RFC 1071 worked as in the RFC's §3 example).
    fn ipv4_query() -> Vec<u8> {
        let dns: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        let mut f = vec![
            2, 0, 0, 0, 0, 0x53, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 0, 0xab, 0xcd, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2,
            53, // IPv4
            0x9c, 0x40, 0, 53, 0, 0, 0, 0, // UDP
        ];
        f.extend_from_slice(dns);
        let ip_len = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        let udp_len = (f.len() - 34) as u16;
        f[38..40].copy_from_slice(&udp_len.to_be_bytes());
        f
    }

    #[test]
    fn checksum_matches_rfc_1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (one's complement).
        assert_eq!(
            checksum(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        // An odd byte is padded on the right.
        assert_eq!(checksum(0, &[0x01]), 0x0100);
    }

    #[test]
    fn a_known_ipv4_header_checksum() {
        // The IPv4 header of Wikipedia's and many textbooks' example: checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(!checksum(0, &h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(checksum(0, &h), 0xffff);
    }

    #[test]
    fn an_ipv4_query_with_checksum_zero_is_read() {
        let f = ipv4_query();
        // IPv4 header checksum: filled in; UDP checksum 0 ("none", RFC 768).
        let mut f = f;
        let sum = !checksum(0, &f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        let d = read(&f).unwrap();
        assert_eq!(d.route.client, "192.0.2.1:40000".parse().unwrap());
        assert_eq!(d.route.server, "192.0.2.53:53".parse().unwrap());
        assert_eq!(d.route.client_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[d.payload.clone()][..2], &[0x12, 0x34]);
        assert_eq!(d.payload.end, f.len());
        // A wrong header checksum is refused.
        f[25] ^= 1;
        assert_eq!(read(&f), Err(Unreadable::Checksum));
    }

    #[test]
    fn answers_round_trip_through_read_with_checksums_verified() {
        for (client, server) in [
            ("192.0.2.1:40000", "192.0.2.53:53"),
            ("[2001:db8::1]:40000", "[2001:db8::53]:5353"),
        ] {
            let route = Route {
                client_mac: [2, 0, 0, 0, 0, 1],
                server_mac: [2, 0, 0, 0, 0, 0x53],
                client: client.parse().unwrap(),
                server: server.parse().unwrap(),
            };
            let payload = b"\x12\x34\x81\x80odd";
            let mut f = vec![0xee; 200];
            let at = route.header_len();
            f[at..at + payload.len()].copy_from_slice(payload);
            let len = write_answer(&mut f, &route, payload.len()).unwrap();
            assert_eq!(len, at + payload.len());
            // Read back as a datagram sent by the server to the client: everything swapped.
            let back = read(&f[..len]).unwrap();
            assert_eq!(back.route.client, route.server);
            assert_eq!(back.route.server, route.client);
            assert_eq!(back.route.client_mac, route.server_mac);
            assert_eq!(&f[back.payload], payload);
            // Any flipped bit in the UDP part fails the checksum.
            let mut bad = f[..len].to_vec();
            bad[len - 1] ^= 0x10;
            assert_eq!(read(&bad), Err(Unreadable::Checksum));
            // The ports went out in network order.
            assert_eq!(be16(&f, at - 8), route.server.port());
        }
    }

    #[test]
    fn fragments_truncated_frames_and_other_protocols_are_not_read() {
        let mut f = ipv4_query();
        let sum = !checksum(0, &f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(read(&f).is_ok());
        let mut more_fragments = f.clone();
        more_fragments[20] = 0x20;
        assert_eq!(read(&more_fragments), Err(Unreadable::NotUdp));
        assert_eq!(read(&f[..f.len() - 1]), Err(Unreadable::Length));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(read(&arp), Err(Unreadable::NotUdp));
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(read(&tcp), Err(Unreadable::NotUdp));
        // Ethernet padding after the IP datagram is ignored.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 7]);
        assert_eq!(read(&padded).unwrap().payload.end, f.len());
    }
}

//! Ports free for a test server, probed on the loopback addresses the tests use. A port free
//! now may be taken before the server binds it (by another test's connection); the probes
//! keep that window short, and a server that fails to bind says so.

use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};

/// A 127.0.0.1 port free for both UDP and TCP right now: for a test server listening on both at
/// one port, and for clients that retry a UDP query over TCP on the same port (delv does for
/// every DNAME answer without a server cookie). A port free for UDP may be taken for TCP (by
/// another test's connection), so both are tried.
///
/// # Panics
/// If no such port turns up in 64 tries.
pub fn free_dual_port() -> u16 {
    free_dual_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// [`free_dual_port`] on `ip` (a loopback address such as 127.0.0.2, where a test puts one
/// tier of a hierarchy).
///
/// # Panics
/// If `ip` cannot be bound, or no such port turns up in 64 tries.
pub fn free_dual_port_on(ip: IpAddr) -> u16 {
    for _ in 0..64 {
        let tcp = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("binding {ip} port 0: {e}"));
        let port = tcp.local_addr().expect("a bound address").port();
        if UdpSocket::bind((ip, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP on {ip} in 64 tries");
}

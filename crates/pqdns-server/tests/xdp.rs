//! The AF_XDP fast path (issue 33, feature `xdp`) end to end, in two network namespaces this
//! test makes itself and joined by a veth pair: `pqdns-server --xdp` on one end, a client on
//! the other.
//!
//! The server answers UDP port [`XDP_PORT`] only through AF_XDP (no UDP socket is bound
//! there, so every answer on it came through the XDP program and the AF_XDP socket) and port
//! [`SOCKET_PORT`] through its UDP sockets. The same client socket sends every query of a
//! corpus (positive, NXDOMAIN, NODATA, wildcard, CNAME, DO=0/1, no EDNS, EDNS sizes 512 to
//! 4096, a TC answer, client and server cookies, FORMERR) to both, over IPv4 and IPv6, and the
//! answers must be byte-identical. Response-rate limiting too: two more client addresses send
//! the same burst of queries above the rate, one through each path, and both get the same
//! answers, slipped TC answers and drops, in the order RRL prescribes (see [`rrl_burst`]).
//! A burst of [`BURST`] queries through AF_XDP is answered in full.
//! TCP to the XDP port, and a UDP datagram to a closed port (answered by the kernel with ICMP
//! port unreachable), keep working on the same interface. The server's `/metrics` then count
//! every query frame redirected and answered (but those RRL dropped), some frames passed to
//! the kernel, and none unreadable or dropped.
//!
//! Skipped with a message (never passed silently) when not root, when network namespaces
//! cannot be made, or when the kernel has no AF_XDP. The namespaces (and with them the veth
//! pair) are deleted when the test ends, also when it fails.

#![cfg(feature = "xdp")]

#[allow(
    dead_code,
    unused_imports,
    reason = "this binary uses only RECORDS of the harness the integration binary shares"
)]
mod common;

use std::fs::File;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command};
use std::time::Duration;

use common::RECORDS;
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, OPTION_COOKIE};
use pqdns_core::{Class, RrType};

/// The UDP port answered through AF_XDP only.
const XDP_PORT: u16 = 5300;
/// The UDP port answered through the server's sockets.
const SOCKET_PORT: u16 = 5301;
/// The metrics listener, on the server namespace's loopback.
const METRICS: &str = "127.0.0.1:9153";
/// Queries in the burst every one of which must be answered through AF_XDP.
const BURST: u16 = 100;
/// How long the client waits for one answer.
const WAIT: Duration = Duration::from_secs(3);

const SERVER_V4: &str = "192.0.2.1";
const CLIENT_V4: &str = "192.0.2.2";
const SERVER_V6: &str = "2001:db8::1";
const CLIENT_V6: &str = "2001:db8::2";

/// Responses per second per client address (`rrl_rate`; `rrl_slip` is 2, the prefixes /32
/// and /128): above what the corpus sends from [`CLIENT_V4`] or [`CLIENT_V6`] in a second.
const RRL_RATE: usize = 50;
/// Queries in one RRL burst: the rate, then 4 dropped and 4 slipped.
const RRL_BURST: usize = RRL_RATE + 8;
/// RRL bursts tried (a burst must fit in one second of the server's clock); each one from
/// its own pair of client addresses, so it starts with empty buckets.
const RRL_TRIES: usize = 4;

/// The client addresses of RRL burst `try_` through AF_XDP (`xdp` true) or the sockets.
fn rrl_client(family: Family, try_: usize, xdp: bool) -> String {
    let n = if xdp { 10 + try_ } else { 20 + try_ };
    match family {
        Family::V4 => format!("192.0.2.{n}"),
        Family::V6 => format!("2001:db8::{n}"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

/// Two network namespaces joined by a veth pair, deleted on drop.
struct Namespaces {
    server: String,
    client: String,
    server_if: String,
    client_if: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Namespaces {
    fn new() -> Result<Namespaces, String> {
        let id = std::process::id();
        let ns = Namespaces {
            server: format!("pqxdp-s-{id}"),
            client: format!("pqxdp-c-{id}"),
            server_if: format!("pqxs{}", id % 100_000),
            client_if: format!("pqxc{}", id % 100_000),
        };
        ip(&["netns", "add", &ns.server])?;
        ip(&["netns", "add", &ns.client])?;
        let (s, c) = (ns.server.as_str(), ns.client.as_str());
        let (sif, cif) = (ns.server_if.as_str(), ns.client_if.as_str());
        ip(&[
            "link", "add", sif, "netns", s, "type", "veth", "peer", "name", cif, "netns", c,
        ])?;
        for (n, dev, v4, v6) in [
            (s, sif, SERVER_V4, SERVER_V6),
            (c, cif, CLIENT_V4, CLIENT_V6),
        ] {
            ip(&["-n", n, "addr", "add", &format!("{v4}/24"), "dev", dev])?;
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                dev,
                "nodad",
            ])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        for try_ in 0..RRL_TRIES {
            for xdp in [true, false] {
                let v4 = format!("{}/24", rrl_client(Family::V4, try_, xdp));
                let v6 = format!("{}/64", rrl_client(Family::V6, try_, xdp));
                ip(&["-n", c, "addr", "add", &v4, "dev", cif])?;
                ip(&["-n", c, "addr", "add", &v6, "dev", cif, "nodad"])?;
            }
        }
        Ok(ns)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client] {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

/// Runs `f` on a thread that has entered network namespace `ns`.
fn in_namespace<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("the client thread panicked")
}

/// A query for `name` (relative to the test zone) and `qtype`, EDNS with `payload` and DO as
/// given (no OPT record if `payload` is 0), with COOKIE option `cookie` if given.
fn query(
    id: u16,
    name: &str,
    qtype: RrType,
    payload: u16,
    dnssec: bool,
    cookie: Option<&[u8]>,
) -> Vec<u8> {
    let edns = (payload > 0).then(|| {
        let mut e = Edns::dnssec_ok(payload);
        if !dnssec {
            e.flags = 0;
        }
        if let Some(c) = cookie {
            e.options.push((OPTION_COOKIE, c.to_vec()));
        }
        e
    });
    let question = Question {
        qname: format!("{name}{}", common::ORIGIN).parse().unwrap(),
        qtype,
        qclass: Class::IN,
    };
    Message::query(id, question, false, edns).to_wire()
}

const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

/// The corpus; cookie-carrying queries are marked (their server cookie holds a timestamp in
/// seconds, RFC 9018 §4.3).
fn corpus() -> Vec<(&'static str, Vec<u8>, bool)> {
    let mut c = vec![
        (
            "www A DO=1 1232",
            query(1, "www.", RrType::A, 1232, true, None),
            false,
        ),
        (
            "www AAAA DO=0 4096",
            query(2, "www.", RrType::AAAA, 4096, false, None),
            false,
        ),
        (
            "www A no EDNS",
            query(3, "www.", RrType::A, 0, false, None),
            false,
        ),
        (
            "NXDOMAIN DO=1",
            query(4, "nothing-here.", RrType::A, 1232, true, None),
            false,
        ),
        (
            "NXDOMAIN DO=0",
            query(5, "nothing-here.", RrType::A, 1232, false, None),
            false,
        ),
        (
            "NODATA DO=1",
            query(6, "www.", RrType::TXT, 1232, true, None),
            false,
        ),
        (
            "wildcard DO=1",
            query(7, "x.apps.", RrType::TXT, 1400, true, None),
            false,
        ),
        (
            "CNAME DO=1",
            query(8, "ftp.", RrType::A, 1232, true, None),
            false,
        ),
        (
            "DNSKEY DO=1 512 (TC)",
            query(9, "", RrType::DNSKEY, 512, true, None),
            false,
        ),
        (
            "DNSKEY DO=1 1232",
            query(10, "", RrType::DNSKEY, 1232, true, None),
            false,
        ),
        (
            "delegation DO=1",
            query(11, "host.child.", RrType::A, 1232, true, None),
            false,
        ),
        (
            "client cookie",
            query(12, "www.", RrType::A, 1232, true, Some(&CLIENT_COOKIE)),
            true,
        ),
    ];
    // A header claiming a question that is not there: FORMERR.
    let mut malformed = query(13, "www.", RrType::A, 0, false, None);
    malformed.truncate(12);
    c.push(("FORMERR", malformed, false));
    c
}

/// Sends `wire` from `socket` to `to` and returns the answer (bounded by [`WAIT`]).
fn exchange(socket: &UdpSocket, to: SocketAddr, wire: &[u8]) -> Vec<u8> {
    socket.send_to(wire, to).unwrap();
    let mut buf = vec![0u8; 65535];
    let (len, from) = socket
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("no answer from {to}: {e}"));
    assert_eq!(from, to, "answer from the wrong address");
    buf.truncate(len);
    buf
}

/// The server cookie of an answer, if it has one.
fn server_cookie(answer: &[u8]) -> Option<Vec<u8>> {
    let m = common::parse_response(answer);
    m.edns?.option(OPTION_COOKIE).map(<[u8]>::to_vec)
}

/// What the client saw, to check after leaving the namespace.
#[derive(Debug, Default)]
struct Observed {
    /// (family, query, answer through AF_XDP, answer through sockets).
    pairs: Vec<(&'static str, &'static str, Vec<u8>, Vec<u8>)>,
    /// A TCP answer from the XDP port.
    tcp: Vec<u8>,
    /// The error a UDP datagram to a closed port brought back, per family.
    closed_port: Vec<std::io::ErrorKind>,
    /// Per family, the RRL burst that fitted in one second of the clock, if one did.
    rrl: Vec<(Family, Option<RrlBurst>)>,
    /// Query frames sent to the XDP port.
    xdp_sent: u64,
    /// Of those, the ones that got no answer (RRL drops).
    xdp_unanswered: u64,
}

/// The answers (`None`: dropped) to the queries of one RRL burst, through AF_XDP and through
/// the sockets.
#[derive(Debug)]
struct RrlBurst {
    xdp: Vec<Option<Vec<u8>>>,
    sockets: Vec<Option<Vec<u8>>>,
}

/// Seconds of `CLOCK_MONOTONIC_COARSE`, the clock RRL counts its seconds on (the server runs
/// on the same host, so it reads the same clock).
fn coarse_seconds() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .expect("CLOCK_MONOTONIC_COARSE")
        .tv_sec()
}

/// One RRL burst: a client address for each path (fresh RRL buckets) sends [`RRL_BURST`]
/// `www A` queries without EDNS (answers under the amplification limit: a full answer is
/// told from a slipped TC one), alternating between the paths, then a query with a valid
/// server cookie (never limited). Each path answers in order, so whatever came before that
/// last answer was answered and the rest dropped. The server cookies come from NXDOMAIN
/// answers, counted in another RRL bucket. Returns the answers and whether the burst began
/// and ended in the same second of the RRL clock. Adds the XDP path's frames sent and left
/// unanswered to `seen`.
fn rrl_burst(
    seen: &mut Observed,
    family: Family,
    server: std::net::IpAddr,
    try_: usize,
) -> (RrlBurst, bool) {
    let started = coarse_seconds();
    let mut paths = Vec::new();
    for (xdp, port) in [(true, XDP_PORT), (false, SOCKET_PORT)] {
        let local = match family {
            Family::V4 => format!("{}:0", rrl_client(family, try_, xdp)),
            Family::V6 => format!("[{}]:0", rrl_client(family, try_, xdp)),
        };
        let socket = UdpSocket::bind(local.as_str()).unwrap();
        socket.set_read_timeout(Some(WAIT)).unwrap();
        let to = SocketAddr::new(server, port);
        let ask = query(
            1,
            "nothing-here.",
            RrType::A,
            1232,
            false,
            Some(&CLIENT_COOKIE),
        );
        let cookie = server_cookie(&exchange(&socket, to, &ask)).expect("a server cookie");
        paths.push((socket, to, cookie));
    }
    for i in 0..RRL_BURST {
        let wire = query(100 + i as u16, "www.", RrType::A, 0, false, None);
        for (socket, to, _) in &paths {
            socket.send_to(&wire, *to).unwrap();
        }
    }
    let mut answers = Vec::new();
    for (socket, to, cookie) in &paths {
        const LAST: u16 = 0xffff;
        socket
            .send_to(
                &query(LAST, "www.", RrType::A, 1232, false, Some(cookie)),
                *to,
            )
            .unwrap();
        let mut got = vec![None; RRL_BURST];
        let mut buf = vec![0u8; 65535];
        let mut last = false;
        // At most one datagram per query and the last one.
        for _ in 0..=RRL_BURST {
            let (len, from) = socket
                .recv_from(&mut buf)
                .unwrap_or_else(|e| panic!("RRL burst: no answer from {to}: {e}"));
            assert_eq!(from, *to, "answer from the wrong address");
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            if id == LAST {
                last = true;
                break;
            }
            let slot = usize::from(id.wrapping_sub(100));
            assert!(
                slot < RRL_BURST && got[slot].is_none(),
                "RRL burst: stray id {id}"
            );
            got[slot] = Some(buf[..len].to_vec());
        }
        assert!(last, "RRL burst: more answers than queries from {to}");
        answers.push(got);
    }
    let xdp_answers = answers.remove(0);
    seen.xdp_sent += 2 + RRL_BURST as u64;
    seen.xdp_unanswered += xdp_answers.iter().filter(|a| a.is_none()).count() as u64;
    let burst = RrlBurst {
        xdp: xdp_answers,
        sockets: answers.remove(0),
    };
    (burst, coarse_seconds() == started)
}

/// What RRL does to the `i`-th response (from 0) of a burst within one second: the rate
/// goes out, then with slip 2 every second one over the rate is a TC answer and the others
/// are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rrl {
    Sent,
    Slipped,
    Dropped,
}

fn expected_rrl(i: usize) -> Rrl {
    match (i + 1).checked_sub(RRL_RATE) {
        None | Some(0) => Rrl::Sent,
        Some(over) if over.is_multiple_of(2) => Rrl::Slipped,
        Some(_) => Rrl::Dropped,
    }
}

/// What an RRL burst's answer (or its absence) shows.
fn rrl_outcome(answer: &Option<Vec<u8>>) -> Rrl {
    let Some(wire) = answer else {
        return Rrl::Dropped;
    };
    let m = common::parse_response(wire);
    match (m.flags & pqdns_core::wire::FLAG_TC != 0, m.answers.len()) {
        (false, 1) => Rrl::Sent,
        (true, 0) => Rrl::Slipped,
        other => panic!("neither an answer nor a slipped one: {other:?} {m:?}"),
    }
}

/// Turns off TX checksum offload on `interface` (`ethtool -K IFACE tx off`, through the
/// SIOCETHTOOL ioctl with ETHTOOL_STXCSUM): a veth peer otherwise hands the XDP side UDP
/// datagrams whose checksum the kernel left for a NIC to fill in (CHECKSUM_PARTIAL), which
/// the fast path, like the kernel for frames from a wire, refuses.
fn tx_checksums_in_software(interface: &str) {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    const SIOCETHTOOL: nix::libc::c_ulong = 0x8946;
    const ETHTOOL_STXCSUM: u32 = 0x17;
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    let mut value = EthtoolValue {
        cmd: ETHTOOL_STXCSUM,
        data: 0,
    };
    let mut req = IfReq {
        name: [0; 16],
        data: &mut value,
        _pad: [0; 16],
    };
    req.name[..interface.len()].copy_from_slice(interface.as_bytes());
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCETHTOOL reads an ifreq whose data points to an ethtool_value, both alive
    // and properly laid out (repr(C)) for the duration of the call.
    let rc = unsafe { nix::libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL, &mut req) };
    assert_eq!(
        rc,
        0,
        "ethtool -K {interface} tx off: {}",
        std::io::Error::last_os_error()
    );
}

fn client(server_v4: &str, server_v6: &str, interface: &str) -> Observed {
    tx_checksums_in_software(interface);
    let mut seen = Observed::default();
    for (family, kind, server, local) in [
        ("IPv4", Family::V4, server_v4, format!("{CLIENT_V4}:0")),
        ("IPv6", Family::V6, server_v6, format!("[{CLIENT_V6}]:0")),
    ] {
        let socket = UdpSocket::bind(local.as_str()).unwrap();
        socket.set_read_timeout(Some(WAIT)).unwrap();
        let ip: std::net::IpAddr = server.parse().unwrap();
        let xdp = SocketAddr::new(ip, XDP_PORT);
        let sockets = SocketAddr::new(ip, SOCKET_PORT);
        let mut queries = corpus();
        // The second cookie query carries the server cookie of the first answer.
        let first = exchange(&socket, sockets, &queries[11].1);
        let cookie = server_cookie(&first).expect("a server cookie");
        queries.push((
            "client and server cookie",
            query(14, "www.", RrType::A, 1232, true, Some(&cookie)),
            true,
        ));
        for (name, wire, timed) in queries {
            // A server cookie made in another second differs in its timestamp: such a pair
            // is sent again (at most 3 times); any other difference stays.
            let mut tries = if timed { 3 } else { 1 };
            loop {
                let a = exchange(&socket, xdp, &wire);
                let b = exchange(&socket, sockets, &wire);
                seen.xdp_sent += 1;
                tries -= 1;
                if a == b || tries == 0 {
                    seen.pairs.push((family, name, a, b));
                    break;
                }
            }
        }
        // A burst larger than one batch of the serving loop (64) and than what one wake-up
        // of the kernel sends in copy mode (32), with a server cookie (not rate-limited):
        // every query is answered, none left behind on the TX ring.
        let burst = query(0, "www.", RrType::A, 1232, true, Some(&cookie));
        for id in 0..BURST {
            let mut wire = burst.clone();
            wire[..2].copy_from_slice(&(1000 + id).to_be_bytes());
            socket.send_to(&wire, xdp).unwrap();
        }
        seen.xdp_sent += u64::from(BURST);
        let mut answered = vec![false; usize::from(BURST)];
        let mut buf = vec![0u8; 65535];
        for _ in 0..BURST {
            let (_, from) = socket
                .recv_from(&mut buf)
                .unwrap_or_else(|e| panic!("{family} burst: an answer is missing: {e}"));
            assert_eq!(from, xdp, "answer from the wrong address");
            let id = u16::from_be_bytes([buf[0], buf[1]]).wrapping_sub(1000);
            assert!(id < BURST, "{family} burst: stray id {id}");
            answered[usize::from(id)] = true;
        }
        assert!(
            answered.iter().all(|a| *a),
            "{family} burst: an answer came twice"
        );
        // Nothing listens on port 9: the kernel answers ICMP port unreachable, which a
        // connected socket reports as "connection refused".
        let probe = UdpSocket::bind(local.as_str()).unwrap();
        probe.set_read_timeout(Some(WAIT)).unwrap();
        probe.connect(SocketAddr::new(ip, 9)).unwrap();
        probe.send(b"not DNS").unwrap();
        let mut buf = [0u8; 16];
        seen.closed_port
            .push(probe.recv(&mut buf).map(|_| ()).unwrap_err().kind());
        let burst = (0..RRL_TRIES).find_map(|try_| {
            let (burst, one_second) = rrl_burst(&mut seen, kind, ip, try_);
            one_second.then_some(burst)
        });
        seen.rrl.push((kind, burst));
    }
    // TCP to the XDP port: the XDP program passes it to the kernel.
    let to = SocketAddr::new(server_v4.parse().unwrap(), XDP_PORT);
    let mut tcp = TcpStream::connect_timeout(&to, WAIT).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let wire = query(15, "www.", RrType::A, 1232, true, None);
    use std::io::{Read, Write};
    tcp.write_all(&(wire.len() as u16).to_be_bytes()).unwrap();
    tcp.write_all(&wire).unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    tcp.read_exact(&mut answer).unwrap();
    seen.tcp = answer;
    seen
}

/// Kills the server when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn xdp_answers_are_byte_identical_to_socket_answers_over_ipv4_and_ipv6() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: the AF_XDP test needs root (network namespaces, XDP, AF_XDP)");
        return;
    }
    let ns = match Namespaces::new() {
        Ok(ns) => ns,
        Err(e) => {
            eprintln!("SKIPPED: network namespaces with a veth pair cannot be made here: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("zone.toml"),
        format!(
            "origin = \"{}\"\nrecords = '''{RECORDS}'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
             key_directory = \"keys\"\n[server]\n\
             udp = [\"{SERVER_V4}:{SOCKET_PORT}\", \"[{SERVER_V6}]:{SOCKET_PORT}\"]\n\
             tcp = [\"{SERVER_V4}:{XDP_PORT}\"]\ndot = []\ndoh = []\n\
             cookie_secret = \"e5e973e5a6b2a43f48e7dc849e37bfcf\"\n\
             rrl_rate = {RRL_RATE}\nrrl_slip = 2\nrrl_ipv4_prefix = 32\nrrl_ipv6_prefix = 128\n",
            common::ORIGIN
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let bin = env!("CARGO_BIN_EXE_pqdns-server");
    let xdp = format!("{}@{XDP_PORT}", ns.server_if);
    let (child, rx) = common::spawn(
        std::path::Path::new("ip"),
        &[
            "netns",
            "exec",
            &ns.server,
            bin,
            "--xdp",
            &xdp,
            "--zone",
            "zone.toml",
            "--metrics",
            METRICS,
        ],
        dir.path(),
        &log,
    );
    let mut server = Killed(child);
    // `listening xdp IFACE udp ports [P]` comes after the sockets' lines.
    let started = (0..200).find_map(|_| match rx.recv_timeout(Duration::from_millis(100)) {
        Ok(line) if line.starts_with("listening xdp ") => Some(Ok(line)),
        Ok(_) => None,
        Err(_) => server.0.try_wait().ok().flatten().map(Err),
    });
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    match started {
        Some(Ok(line)) => assert!(line.contains(&format!("[{XDP_PORT}]")), "{line}"),
        Some(Err(status)) if log_text().contains("Address family not supported") => {
            eprintln!(
                "SKIPPED: this kernel has no AF_XDP sockets ({status}):\n{}",
                log_text()
            );
            return;
        }
        other => panic!(
            "the server did not start its AF_XDP path ({other:?}); log:\n{}",
            log_text()
        ),
    }
    let client_if = ns.client_if.clone();
    let seen = in_namespace(&ns.client, move || client(SERVER_V4, SERVER_V6, &client_if));
    let metrics = in_namespace(&ns.server, || {
        common::http_get(METRICS.parse().unwrap(), "/metrics")
    });
    drop(server);
    // The program redirected every UDP query to the XDP port and passed the rest (TCP, the
    // closed-port probe, neighbour discovery); every redirected frame was answered.
    let counter = |outcome: &str| -> u64 {
        let key = format!(
            "pqdns_xdp_frames_total{{interface=\"{}\",outcome=\"{outcome}\"}} ",
            ns.server_if
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /metrics:\n{metrics}"))
    };
    assert!(counter("redirected") >= seen.xdp_sent, "{metrics}");
    assert_eq!(
        counter("answered"),
        counter("redirected") - seen.xdp_unanswered,
        "every frame answered but those RRL dropped: {metrics}"
    );
    assert!(counter("passed") > 0, "{metrics}");
    for outcome in ["unreadable", "oversize", "tx_ring_full"] {
        assert_eq!(counter(outcome), 0, "{outcome}: {metrics}");
    }
    assert_eq!(
        seen.pairs.len(),
        2 * 14,
        "{:?}",
        seen.pairs.iter().map(|p| p.1).collect::<Vec<_>>()
    );
    for (family, name, xdp, sockets) in &seen.pairs {
        assert_eq!(
            xdp, sockets,
            "{family} {name}: the AF_XDP answer differs from the socket answer"
        );
        // Each answer is a DNS response both decoders read (second opinion).
        let m = common::parse_response(xdp);
        assert!(
            m.flags & pqdns_core::wire::FLAG_QR != 0,
            "{family} {name}: not a response"
        );
    }
    for (family, burst) in &seen.rrl {
        let burst = burst.as_ref().unwrap_or_else(|| {
            panic!("{family:?}: no RRL burst within one second in {RRL_TRIES} tries")
        });
        for (i, (xdp, sockets)) in burst.xdp.iter().zip(&burst.sockets).enumerate() {
            assert_eq!(
                xdp, sockets,
                "{family:?} RRL burst query {i}: the AF_XDP path differs from the sockets"
            );
            assert_eq!(
                rrl_outcome(xdp),
                expected_rrl(i),
                "{family:?} RRL burst query {i}"
            );
        }
    }
    assert_eq!(
        seen.closed_port,
        vec![std::io::ErrorKind::ConnectionRefused; 2],
        "UDP to a closed port on the XDP interface is no longer answered by the kernel"
    );
    let tcp = common::parse_response(&seen.tcp);
    assert_eq!(
        tcp.answers.len(),
        2,
        "www A and its RRSIG over TCP: {tcp:?}"
    );
}

//! A corpus of malformed queries over UDP: each gets FORMERR (with the query's ID) or no
//! answer at all, never anything else, and the server still answers a good query afterwards.
//! Every receive is bounded by a timeout and the corpus is finite.

use crate::common;

use std::net::UdpSocket;
use std::time::Duration;

use common::{TestServer, ORIGIN};
use pqdns_core::{Name, RrType};
use pqdns_server::settings::KxPolicy;

/// How long to wait for an answer that may legitimately never come.
const WAIT: Duration = Duration::from_millis(1500);

fn query(qname: &str, qtype: RrType, opt: bool) -> Vec<u8> {
    let name: Name = qname.parse().unwrap();
    let mut p = vec![0xbe, 0xef, 0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(opt)];
    p.extend_from_slice(name.as_wire());
    p.extend(qtype.0.to_be_bytes());
    p.extend(1u16.to_be_bytes());
    if opt {
        p.extend([0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
    }
    p
}

fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let good = query(&format!("www.{ORIGIN}"), RrType::A, true);
    let mut cases = vec![
        ("empty", vec![]),
        ("short header", good[..7].to_vec()),
        ("header only", good[..12].to_vec()),
        (
            "compression loop",
            vec![
                0xbe, 0xef, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1,
            ],
        ),
        (
            "forward pointer",
            vec![
                0xbe, 0xef, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 14, 0, 1, 0, 1,
            ],
        ),
        (
            "label runs past end",
            vec![0xbe, 0xef, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 40, b'a', b'b'],
        ),
    ];
    let mut qd0 = good.clone();
    qd0[5] = 0;
    cases.push(("QDCOUNT 0", qd0));
    let mut qd2 = good.clone();
    qd2[5] = 2;
    cases.push(("QDCOUNT 2", qd2));
    let mut bad_opt = good.clone();
    let n = bad_opt.len();
    bad_opt[n - 1] = 8; // RDLENGTH 8 but no RDATA follows
    cases.push(("OPT RDLENGTH overrun", bad_opt));
    let mut bad_option = good.clone();
    let n = bad_option.len();
    bad_option[n - 1] = 3;
    bad_option.extend([0, 10, 0]);
    cases.push(("OPT option header overrun", bad_option));
    let mut two_opts = good.clone();
    two_opts.extend_from_slice(&good[good.len() - 11..]);
    two_opts[11] = 2;
    cases.push(("two OPT records", two_opts));
    let mut trailing = good.clone();
    trailing.extend([0xde, 0xad]);
    cases.push(("trailing garbage", trailing));
    // Deterministic pseudo-random garbage (xorshift), with the QR bit cleared.
    let mut x: u32 = 0x9e37_79b9;
    for len in [12usize, 13, 30, 100, 512] {
        let mut g: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        g[2] &= 0x07; // QUERY opcode, QR clear: the server must parse it
        cases.push(("garbage", g));
    }
    cases
}

#[test]
fn malformed_queries_get_formerr_or_nothing_and_server_survives() {
    let server = TestServer::start(&["ECDSAP256SHA256"], KxPolicy::HybridPreferred);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    sock.connect(server.udp()).unwrap();
    let mut buf = [0u8; 4096];
    let mut formerr = 0;
    for (what, packet) in corpus() {
        sock.send(&packet).unwrap();
        match sock.recv(&mut buf) {
            Ok(len) => {
                assert!(len >= 12, "{what}: short response");
                assert_eq!(&buf[..2], &packet[..2], "{what}: ID echoed");
                assert_eq!(buf[2] & 0x80, 0x80, "{what}: QR set");
                let rcode = buf[3] & 0x0f;
                assert!(
                    rcode == 1 || rcode == 4,
                    "{what}: FORMERR (or NOTIMP for a garbage opcode), got {rcode}"
                );
                formerr += 1;
            }
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{what}: {e}"
            ),
        }
    }
    assert!(
        formerr >= 8,
        "most malformed queries with a header get FORMERR, got {formerr}"
    );

    let good = query(&format!("www.{ORIGIN}"), RrType::A, false);
    sock.send(&good).unwrap();
    let len = sock.recv(&mut buf).expect("the server still answers");
    assert_eq!(buf[3] & 0x0f, 0, "NOERROR");
    assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 1, "one answer");
    assert_eq!(&buf[len - 4..len], &[192, 0, 2, 80]);
}

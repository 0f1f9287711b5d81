//! RFC 7766 behaviour over a plain TCP socket: pipelined queries are all answered, in order,
//! on one connection; the per-address connection cap closes the extra connection; an idle
//! connection is closed after the idle timeout. Reads are bounded by socket timeouts.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{TestServer, ORIGIN};
use pqdns_core::Name;

/// Upper bound on any single read in this test.
const READ_LIMIT: Duration = Duration::from_secs(10);

fn framed_query(id: u16, qname: &str) -> Vec<u8> {
    let name: Name = qname.parse().unwrap();
    let mut q = id.to_be_bytes().to_vec();
    q.extend([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(name.as_wire());
    q.extend([0, 1, 0, 1]);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend(q);
    framed
}

fn read_response(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut msg).unwrap();
    msg
}

/// True if the server closed the connection (EOF or reset) before `READ_LIMIT`.
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
        ),
    }
}

#[test]
fn pipelining_connection_cap_and_idle_timeout() {
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        s.max_connections_per_ip = 2;
        s.idle_timeout = Duration::from_secs(1);
    });
    let connect = || {
        let s = TcpStream::connect(server.tcp()).unwrap();
        s.set_read_timeout(Some(READ_LIMIT)).unwrap();
        s
    };

    let mut a = connect();
    let names = ["www", "nope", "ftp"];
    let mut batch = Vec::new();
    for (i, n) in names.iter().enumerate() {
        batch.extend(framed_query(100 + i as u16, &format!("{n}.{ORIGIN}")));
    }
    a.write_all(&batch).unwrap();
    let rcodes: Vec<(u16, u8)> = (0..names.len())
        .map(|_| {
            let r = read_response(&mut a);
            (u16::from_be_bytes([r[0], r[1]]), r[3] & 0x0f)
        })
        .collect();
    assert_eq!(
        rcodes,
        [(100, 0), (101, 3), (102, 0)],
        "all pipelined queries answered in order"
    );

    let mut b = connect();
    b.write_all(&framed_query(7, &format!("www.{ORIGIN}")))
        .unwrap();
    assert_eq!(read_response(&mut b)[..2], [0, 7]);
    let mut c = connect();
    assert!(
        closed_by_server(&mut c),
        "third connection from one address is refused"
    );

    // The idle timeout (1 s here) closes both idle connections; the read limit is 10 s.
    assert!(closed_by_server(&mut a), "idle connection closed");
    assert!(closed_by_server(&mut b), "idle connection closed");
    let mut d = connect();
    d.write_all(&framed_query(8, &format!("www.{ORIGIN}")))
        .unwrap();
    assert_eq!(
        read_response(&mut d)[..2],
        [0, 8],
        "slots are freed when connections close"
    );
}

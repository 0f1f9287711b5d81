//! Issue 31 item 2: `--cache-size` bounds the resolver service's memory. An authority answers
//! every name under `big.test.` with a 62 kB TXT RRset (a wildcard), and a stub asks for a
//! thousand of them over TCP; with `--cache-size 1` the service's resident memory grows by at
//! most the cache size plus a stated constant ([`SLACK`]), where an entry-counted cache (10,000
//! raw responses) held every one of them (some 62 MB).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::Edns;
use pqdns_core::{Class, RrType};

use crate::common;
use common::service::Service;
use common::{serve, ZoneSpec};

/// Memory beyond `--cache-size` the service may grow by while answering (allocator slack,
/// buffers of the connections and resolutions in flight), bytes.
const SLACK: u64 = 24 << 20;

/// A TXT RRset of about 62 kB: 240 strings of 255 bytes.
fn big_txt() -> String {
    let string = format!("\"{}\"", "x".repeat(255));
    vec![string; 240].join(" ")
}

/// Asks `qname` TXT over the open TCP connection; the answer's length.
fn ask(stream: &mut TcpStream, id: u16, qname: &str) -> usize {
    let q = Question {
        qname: qname.parse().unwrap(),
        qtype: RrType::TXT,
        qclass: Class::IN,
    };
    let wire = Message::query(id, q, true, Some(Edns::dnssec_ok(1232))).to_wire();
    let mut framed = (wire.len() as u16).to_be_bytes().to_vec();
    framed.extend(wire);
    stream.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer).unwrap();
    answer.len()
}

#[test]
fn cache_size_bounds_memory_under_large_answers() {
    let records = format!(
        "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
         *.big 3600 TXT {}\n",
        big_txt()
    );
    let zone = ZoneSpec {
        origin: "test.",
        records: &records,
        algorithms: &["ECDSAP256SHA256"],
        denial: "nsec",
    };
    let served = serve(zone, false, |s| s.rrl.rate = 0);
    let dir = tempfile::tempdir().unwrap();
    let ds = served.dir.path().join("keys/test.ds");
    let upstream = served.addr.to_string();
    let service = Service::start(
        dir.path(),
        "resolver",
        &[
            "--forward",
            &upstream,
            "--trust-anchor",
            ds.to_str().unwrap(),
            "--cache-size",
            "1",
        ],
    );
    let mut stream = TcpStream::connect(service.tcp).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    for i in 0..20 {
        assert!(ask(&mut stream, i, &format!("w{i}.big.test.")) > 60_000);
    }
    let before = service.rss();
    for i in 20..1000 {
        assert!(
            ask(&mut stream, i, &format!("n{i}.big.test.")) > 60_000,
            "n{i}"
        );
    }
    let grown = service.rss().saturating_sub(before);
    assert!(
        grown <= (1 << 20) + SLACK,
        "resident memory grew by {} MiB for a 1 MiB cache",
        grown >> 20
    );
}

//! A hostile ARRF server on 127.0.0.1 (McGowan et al. 2025): it announces a record of
//! RRSIZE = 4 GiB and sends 10 000 fragments for it, or announces a plausible 60 000-byte
//! record and answers every fragment request with 10 000 duplicated fragments that never
//! complete it. The client must refuse or give up, fall back to TCP (where this server answers
//! normally), and keep its memory bounded. Memory is measured with a counting global
//! allocator, so this file holds one test (nothing else allocates in the process meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pqdns_core::frag::arrf::{Limits, RrFrag, DEFAULT_RRFRAG_TYPE};
use pqdns_core::frag::edns::{FragOption, Fragmentation, ARRF, DEFAULT_CODE};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, FLAG_AA, FLAG_QR};
use pqdns_core::{Class, Name, Record, RrType};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::{Client, TlsOptions, Transport};

/// Heap bytes in use, and the most since the last reset.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only
// observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const ID: u16 = 0x4242;
const T: RrType = DEFAULT_RRFRAG_TYPE;
/// Datagrams the server sends per burst.
const BURST: usize = 10_000;

fn question() -> Question {
    Question {
        qname: "www.example.".parse().unwrap(),
        qtype: RrType::A,
        qclass: Class::IN,
    }
}

fn edns(option: bool) -> Edns {
    let mut e = Edns::dnssec_ok(1232);
    if option {
        FragOption::schemes(ARRF).put(&mut e, DEFAULT_CODE);
    }
    e
}

/// A response to our query (first response when `q` is the original question).
fn response(q: Question, frags: &[RrFrag]) -> Vec<u8> {
    let mut m = Message::query(ID, q, false, Some(edns(true)));
    m.flags = FLAG_QR | FLAG_AA;
    m.answers = frags.iter().map(|f| f.to_record(T)).collect();
    m.to_wire_with(Some(T))
}

fn frag(rr_size: u32, cur_idx: u32, len: usize) -> RrFrag {
    RrFrag {
        frag_size: len as u16,
        cur_idx,
        rr_size,
        rr_id: 0,
        data: vec![0xaa; len],
    }
}

fn root_question() -> Question {
    Question {
        qname: Name::root(),
        qtype: T,
        qclass: Class::IN,
    }
}

/// The hostile server: UDP answers from prepared datagrams (no allocation while the client is
/// measured), TCP answers `www.example. A 192.0.2.9`. Returns its address.
fn hostile(first: Vec<u8>, after_query: Vec<Vec<u8>>, per_request: Vec<Vec<u8>>) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap();
    let udp = UdpSocket::bind(addr).unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_535];
        // Bounded: one query and a few fragment requests.
        for _ in 0..8 {
            let Ok((n, peer)) = udp.recv_from(&mut buf) else {
                return;
            };
            let fragment_request = n > 12 && buf[12] == 0;
            let burst = if fragment_request {
                &per_request
            } else {
                let _ = udp.send_to(&first, peer);
                &after_query
            };
            for d in burst {
                let _ = udp.send_to(d, peer);
            }
        }
    });
    std::thread::spawn(move || {
        let mut m = Message::query(ID, question(), false, Some(edns(false)));
        m.flags = FLAG_QR | FLAG_AA;
        m.answers = vec![Record {
            owner: "www.example.".parse().unwrap(),
            rtype: RrType::A,
            class: Class::IN,
            ttl: 60,
            rdata: vec![192, 0, 2, 9],
        }];
        let wire = m.to_wire();
        for stream in tcp.incoming().take(4) {
            let Ok(mut s) = stream else { return };
            let mut len = [0u8; 2];
            let mut query = vec![0u8; 512];
            if s.read_exact(&mut len).is_err() {
                continue;
            }
            let n = usize::from(u16::from_be_bytes(len)).min(512);
            if s.read_exact(&mut query[..n]).is_err() {
                continue;
            }
            let _ = s.write_all(&(wire.len() as u16).to_be_bytes());
            let _ = s.write_all(&wire);
        }
    });
    addr
}

/// Runs one exchange against `server`; returns (peak heap growth, reassembler peak, bytes
/// received over UDP and TCP).
fn measure(server: SocketAddr) -> (usize, usize, usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut client = Client::new(
        Transport::Udp,
        Duration::from_secs(10),
        TlsOptions::default(),
    )
    .unwrap();
    let mut config = FragConfig::new(Fragmentation::Arrf);
    config.round_timeout = Duration::from_millis(300);
    client.set_fragmentation(config);
    let query = Message::query(ID, question(), false, Some(edns(false)));
    let baseline = CURRENT.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let (answer, info) = rt.block_on(client.exchange(server, &query)).unwrap();
    let growth = PEAK.load(Ordering::Relaxed) - baseline;
    assert_eq!(info.transport, Some(Transport::Tcp), "fell back to TCP");
    assert_eq!(answer.answers[0].rdata, [192, 0, 2, 9]);
    let (used, peak) = client.reassembly_memory().unwrap();
    assert_eq!(used, 0, "state dropped after the fallback");
    (growth, peak, info.bytes_received)
}

#[test]
fn four_gib_announcements_and_fragment_floods_keep_client_memory_bounded() {
    // The documented bound: the reassembly limit plus one receive buffer per socket and the
    // transient parse of a datagram, far below the 4 GiB announced.
    let bound = Limits::default().max_bytes + 512 * 1024;

    // 1. RRSIZE = 4 GiB - 1 in the first response and in 9 999 more fragments.
    let huge = u32::MAX;
    let first = response(question(), &[frag(huge, 0, 0)]);
    let flood: Vec<Vec<u8>> = (1..BURST as u32)
        .map(|k| response(root_question(), &[frag(huge, k * 1000, 1000)]))
        .collect();
    let (growth, peak, received) = measure(hostile(first, flood, Vec::new()));
    assert!(growth < bound, "heap grew by {growth} bytes");
    assert_eq!(peak, 0, "nothing stored for an impossible RRSIZE");
    assert!(received > 0);
    eprintln!("4 GiB RRSIZE: heap peak growth {growth} B, reassembly peak {peak} B");

    // 2. A plausible 60 000-byte record whose range 30 never comes: every fragment request is
    //    answered by 10 000 duplicates of the other 59 ranges.
    let first = response(question(), &[frag(60_000, 0, 0)]);
    let dups: Vec<Vec<u8>> = (0..BURST as u32)
        .map(|k| {
            let j = k % 59;
            let j = if j >= 30 { j + 1 } else { j };
            response(root_question(), &[frag(60_000, j * 1000, 1000)])
        })
        .collect();
    let (growth, peak, received) = measure(hostile(first, Vec::new(), dups));
    assert!(growth < bound, "heap grew by {growth} bytes");
    assert!(peak <= 60_000 + 59 * 64 + 1232, "reassembly peak {peak}");
    assert!(peak >= 59_000, "the 59 ranges were stored: {peak}");
    assert!(
        received > 100 * 1000,
        "the flood reached the client: {received} bytes"
    );
    eprintln!("flood of duplicates: heap peak growth {growth} B, reassembly peak {peak} B, {received} B received");
}

//! Reflection and amplification by a UDP DNS server: a stream of queries from one address (as
//! an attacker spoofing a victim's address sends them) at a fixed rate, and the bytes that come
//! back to that address. The ratio bytes out ÷ bytes in is what a reflection attack gains; with
//! response-rate limiting it falls, and with a valid DNS cookie (a client proven to own its
//! address) it does not.
//!
//! Bytes are DNS messages (UDP payloads); the IP-level ratio adds 28 bytes (IPv4 and UDP
//! headers) to every datagram both ways.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pqdns_core::frag::edns::{FragOption, Fragmentation, DEFAULT_CODE};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, OPTION_COOKIE};
use pqdns_core::{Class, Name, RrType};
use serde::Serialize;

/// IPv4 and UDP header bytes per datagram.
const IP_UDP_HEADERS: u64 = 28;
/// How long to keep reading after the last query, for late responses.
const DRAIN: Duration = Duration::from_millis(500);

/// One kind of query to reflect.
#[derive(Clone, Debug)]
pub struct Probe {
    /// Label for reports.
    pub label: String,
    /// QNAME; with `random_label`, a random label is prepended to every query.
    pub qname: Name,
    /// QTYPE.
    pub qtype: RrType,
    /// Prepend a random label (NXDOMAIN answers with their proofs).
    pub random_label: bool,
    /// Send the fragmentation option offering ARRF (the server may then answer with a
    /// fragment instead of TC=1).
    pub fragmentation: bool,
    /// The COOKIE option each query carries (RFC 7873).
    pub cookie: CookieUse,
}

/// The DNS cookie a probe sends (RFC 7873 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieUse {
    /// No COOKIE option: what a spoofing attacker sends most cheaply.
    None,
    /// An 8-byte client cookie without a server cookie: what a spoofing attacker can add, since
    /// the victim never learnt a server cookie; the response then carries our server cookie.
    ClientOnly,
    /// A server cookie learnt first and sent with every query: a client proven to own its
    /// address.
    Valid,
}

/// What one stream reflected.
#[derive(Clone, Debug, Serialize)]
pub struct Reflection {
    /// The probe's label.
    pub probe: String,
    /// Queries sent.
    pub queries: u64,
    /// DNS bytes sent (what the server received).
    pub bytes_in: u64,
    /// Responses received.
    pub responses: u64,
    /// Responses with TC set.
    pub truncated: u64,
    /// DNS bytes received (what the victim would receive).
    pub bytes_out: u64,
    /// bytes_out ÷ bytes_in.
    pub ratio: f64,
    /// The same with IP and UDP headers on every datagram.
    pub ip_ratio: f64,
}

/// Sends `probe` to `target` at `rate` queries per second for `duration`, and counts what
/// comes back.
///
/// # Errors
/// A message when the socket cannot be used or no server cookie could be learnt.
pub fn reflect(
    target: SocketAddr,
    probe: &Probe,
    rate: u32,
    duration: Duration,
) -> Result<Reflection, String> {
    let socket = UdpSocket::bind(if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    })
    .map_err(|e| format!("bind: {e}"))?;
    let cookie = match probe.cookie {
        CookieUse::None => None,
        CookieUse::ClientOnly => {
            let mut client = [0u8; 8];
            getrandom::fill(&mut client).map_err(|e| e.to_string())?;
            Some(client.to_vec())
        }
        CookieUse::Valid => Some(learn_cookie(&socket, target, probe)?),
    };
    let reader = socket.try_clone().map_err(|e| e.to_string())?;
    reader
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicBool::new(false));
    let counting = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let (mut n, mut tc, mut bytes) = (0u64, 0u64, 0u64);
            let mut buf = [0u8; 65535];
            let mut quiet_since: Option<Instant> = None;
            loop {
                match reader.recv_from(&mut buf) {
                    Ok((len, _)) => {
                        n += 1;
                        bytes += len as u64;
                        tc += u64::from(len > 2 && buf[2] & 0x02 != 0);
                        quiet_since = None;
                    }
                    Err(_) if done.load(Ordering::Relaxed) => {
                        let since = *quiet_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= DRAIN {
                            break;
                        }
                    }
                    Err(_) => {}
                }
            }
            (n, tc, bytes)
        })
    };
    let total = (f64::from(rate) * duration.as_secs_f64()) as u64;
    let start = Instant::now();
    let (mut sent, mut bytes_in) = (0u64, 0u64);
    while sent < total {
        // Pace: send what is due by now, then sleep a millisecond.
        let due = (start.elapsed().as_secs_f64() * f64::from(rate)) as u64;
        while sent < due.min(total) {
            let q = query(probe, sent as u16, cookie.as_deref());
            if socket.send_to(&q, target).is_ok() {
                bytes_in += q.len() as u64;
            }
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    done.store(true, Ordering::Relaxed);
    let (responses, truncated, bytes_out) = counting.join().map_err(|_| "reader panicked")?;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Ok(Reflection {
        probe: probe.label.clone(),
        queries: sent,
        bytes_in,
        responses,
        truncated,
        bytes_out,
        ratio: ratio(bytes_out, bytes_in),
        ip_ratio: ratio(
            bytes_out + IP_UDP_HEADERS * responses,
            bytes_in + IP_UDP_HEADERS * sent,
        ),
    })
}

/// Asks once with a client cookie (the apex SOA: a plain answer, never a fragment) and returns
/// the whole COOKIE option the server sent back; it holds for any question from this address.
fn learn_cookie(socket: &UdpSocket, target: SocketAddr, probe: &Probe) -> Result<Vec<u8>, String> {
    let soa = Probe {
        qtype: RrType::SOA,
        random_label: false,
        fragmentation: false,
        ..probe.clone()
    };
    let mut client = [0u8; 8];
    getrandom::fill(&mut client).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 65535];
    for id in 0..3u16 {
        socket
            .send_to(&query(&soa, id, Some(&client)), target)
            .map_err(|e| e.to_string())?;
        let Ok((len, _)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let cookie = Message::parse(&buf[..len])
            .ok()
            .and_then(|m| m.edns?.option(OPTION_COOKIE).map(<[u8]>::to_vec));
        if let Some(c) = cookie.filter(|c| c.len() > 8) {
            return Ok(c);
        }
    }
    Err(format!("{target} sent no server cookie"))
}

fn query(probe: &Probe, id: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let qname = if probe.random_label {
        let label = format!("r{id:04x}{:08x}", id as u32 * 2_654_435_761);
        probe
            .qname
            .prepend_label(label.as_bytes())
            .unwrap_or_else(|_| probe.qname.clone())
    } else {
        probe.qname.clone()
    };
    let mut edns = Edns::dnssec_ok(4096);
    if probe.fragmentation {
        FragOption::schemes(Fragmentation::Arrf.bit()).put(&mut edns, DEFAULT_CODE);
    }
    if let Some(c) = cookie {
        edns.options.push((OPTION_COOKIE, c.to_vec()));
    }
    let q = Question {
        qname,
        qtype: probe.qtype,
        qclass: Class::IN,
    };
    Message::query(id, q, false, Some(edns)).to_wire()
}

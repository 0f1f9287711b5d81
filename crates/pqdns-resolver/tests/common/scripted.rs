//! Scripted UDP authorities for iteration tests: each on its own 127.0.0.x address (one port
//! shared by all, as glue gives addresses, not ports), answering with a closure and logging
//! the questions it was asked.

use std::sync::{Arc, Mutex};

use pqdns_core::message::Message;
use pqdns_core::wire::{Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Name, Record, RrType};
use tokio::net::UdpSocket;

/// An IN record with TTL 300.
pub(crate) fn rec(owner: &str, rtype: RrType, rdata: Vec<u8>) -> Record {
    super::record(owner, rtype, 300, rdata)
}

/// An A record.
pub(crate) fn a(owner: &str, ip: &str) -> Record {
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    rec(owner, RrType::A, ip.octets().to_vec())
}

/// An NS record.
pub(crate) fn ns(owner: &str, target: &str) -> Record {
    rec(owner, RrType::NS, super::name(target).as_wire().to_vec())
}

/// A response to `q` with RCODE `code`, AA as given, no EDNS.
pub(crate) fn reply(q: &Message, aa: bool, code: Rcode) -> Message {
    let mut m = q.clone();
    m.flags = FLAG_QR | if aa { FLAG_AA } else { 0 } | code.low();
    m.edns = None;
    m
}

/// How a scripted server answers a query.
pub(crate) type Behaviour = Arc<dyn Fn(&Message) -> Message + Send + Sync>;

/// The questions a server was asked.
pub(crate) type Log = Arc<Mutex<Vec<(Name, RrType)>>>;

/// Starts a UDP server at `ip:port` answering with `behave`; returns its question log.
pub(crate) async fn server(ip: &str, port: u16, behave: Behaviour) -> std::io::Result<Log> {
    let socket = UdpSocket::bind((ip, port)).await?;
    let log: Log = Arc::default();
    let seen = log.clone();
    super::spawn_udp(socket, move |wire, _| {
        let q = Message::parse(wire).ok()?;
        seen.lock()
            .unwrap()
            .push((q.questions[0].qname.clone(), q.questions[0].qtype));
        Some(behave(&q).to_wire())
    });
    Ok(log)
}

/// Servers at `list`'s addresses on one port; returns their logs (in order) and the port.
pub(crate) async fn servers_at(list: &[(&str, Behaviour)]) -> (Vec<Log>, u16) {
    'port: for _ in 0..20 {
        let port = std::net::UdpSocket::bind((list[0].0, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut logs = Vec::new();
        for (ip, behave) in list {
            match server(ip, port, behave.clone()).await {
                Ok(log) => logs.push(log),
                Err(_) => continue 'port,
            }
        }
        return (logs, port);
    }
    panic!(
        "no port free on every address of {:?}",
        list.iter().map(|l| l.0).collect::<Vec<_>>()
    );
}

//! NOTIFY out (RFC 1996): after start and after every successful reload, each zone is announced
//! to every configured secondary over UDP so that it checks our SOA serial and transfers the
//! new version.
//!
//! - **Request** (§3.3–§3.7): opcode NOTIFY (4), AA set, one question (the zone apex, SOA, IN)
//!   and the current SOA in the answer section as a hint (§3.7); a fresh ID per target.
//! - **Retries** (§3.6): up to [`NOTIFY_ATTEMPTS`] sends, [`NOTIFY_TIMEOUT`] apart, until a
//!   response with our ID, QR set and opcode NOTIFY arrives from the target (the socket is
//!   connected, so the kernel drops datagrams from other addresses). Any RCODE ends the
//!   exchange; an error RCODE is logged as a warning (a NOTIMP completes the transaction,
//!   §3.12). Every exchange is bounded: at most `NOTIFY_ATTEMPTS × NOTIFY_TIMEOUT`.
//! - **TSIG** (RFC 8945): NOTIFY to a target configured with a key (`notify = ["ADDR key
//!   NAME"]`) is signed, and only an answer whose TSIG verifies after our MAC acknowledges it;
//!   others are logged and ignored, as the retries go on.
//! - **Incoming NOTIFY**: answered for secondary zones ([`crate::secondary`]); a server
//!   without any replies NOTIMP, as to any opcode other than QUERY.
//!
//! A secondary zone is also announced after each new version it transferred. Every zone is
//! announced after a reload, changed or not: a secondary whose serial is current
//! only queries our SOA and does not transfer (§3.11).

use std::hash::BuildHasher;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::wire::tsig::{self, Digest, Fields, Key, Mac};
use pqdns_core::wire::{Header, MessageView, MessageWriter, Opcode, Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Class, Name, RrType, Zone};
use tokio::net::UdpSocket;
use tokio::time::{timeout_at, Instant};
use tracing::{info, warn};

use crate::axfr::write_apex_soa;
use crate::catalog::Catalog;
use crate::settings::Settings;

/// A secondary to NOTIFY, and the TSIG key to sign with.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its address and port.
    pub addr: SocketAddr,
    /// The key NOTIFY to it is signed with, if any.
    pub key: Option<Key>,
}

/// The NOTIFY targets of `settings`, each with its key from [`Settings::notify_keys`].
pub(crate) fn targets(settings: &Settings) -> Vec<Target> {
    settings
        .notify
        .iter()
        .map(|&addr| Target {
            addr,
            key: settings
                .notify_keys
                .iter()
                .find(|(a, _)| *a == addr)
                .and_then(|(_, name)| settings.tsig_keys.get(name.as_wire()))
                .cloned(),
        })
        .collect()
}

/// True if `response` carries a TSIG that verifies with `key` after our request's `mac` at
/// `now` (UNIX seconds).
fn signed_by(response: &[u8], key: &Key, mac: &Mac, now: u64) -> bool {
    MessageView::parse(response)
        .ok()
        .and_then(|v| tsig::find(&v).ok().flatten())
        .is_some_and(|s| {
            s.verify(Some(key), Digest::Response(mac.as_bytes()), now)
                .is_ok()
        })
}
/// Sends of one NOTIFY before giving up on a target.
pub(crate) const NOTIFY_ATTEMPTS: u32 = 3;
/// Wait for a response to each send.
pub(crate) const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest response read, in bytes (a NOTIFY response is small; longer ones are cut and
/// ignored unless the header matches).
const MAX_RESPONSE: usize = 4096;

/// Builds the NOTIFY request for `zone` with message ID `id`: header, question (apex SOA IN)
/// and the apex SOA record in the answer section, names uncompressed.
pub(crate) fn build(zone: &Zone, id: u16) -> Vec<u8> {
    let apex = zone.origin.as_wire();
    let header = Header { id, flags: FLAG_AA }.with_opcode(Opcode::NOTIFY);
    let mut msg = Vec::with_capacity(512);
    let mut w = MessageWriter::new(&mut msg, 0, usize::MAX, header).without_compression();
    // No budget: nothing is ever full.
    let _unlimited = w.question(apex, RrType::SOA, Class::IN);
    write_apex_soa(&mut w, zone);
    w.finish(Rcode::NOERROR);
    msg
}

/// The RCODE of `response` if it answers the NOTIFY with ID `id`, else `None`.
pub(crate) fn acknowledges(response: &[u8], id: u16) -> Option<Rcode> {
    let header = Header::parse(response)?;
    // RFC 1996 §3.3: "NOTIFY is similar to QUERY in that it has a request message with the
    // header QR flag "clear" and a response message with QR "set"."
    let matches = header.id == id && header.has(FLAG_QR) && header.opcode() == Opcode::NOTIFY;
    matches.then_some(header.rcode(0))
}

/// How a NOTIFY exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The target answered with this RCODE after this many sends.
    Answered {
        /// The response code.
        rcode: Rcode,
        /// Sends it took (1 to [`NOTIFY_ATTEMPTS`]).
        attempts: u32,
    },
    /// No matching response to any of the sends.
    NoResponse,
}

/// A message ID for a NOTIFY: not secret, only distinct between exchanges.
fn fresh_id() -> u16 {
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now()) as u16
}

/// Sends the NOTIFY for `zone` to `target`, signed with `key` when given, retrying as the
/// module doc says.
///
/// # Errors
/// The I/O error if no socket can be bound or a send fails (e.g. no route to the target).
pub(crate) async fn notify(
    zone: &Zone,
    target: SocketAddr,
    key: Option<&Key>,
) -> std::io::Result<Outcome> {
    let local: SocketAddr = if target.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).await?;
    socket.connect(target).await?;
    let id = fresh_id();
    let mut request = build(zone, id);
    let now = pqdns_core::time::now();
    // A NOTIFY holds no additional records: signing cannot fail.
    let signed = key.and_then(|k| {
        let mac = tsig::sign(k, Digest::Request, &mut request, 0, &Fields::at(now)).ok()?;
        Some((k, mac))
    });
    let mut buf = vec![0u8; MAX_RESPONSE];
    for attempt in 1..=NOTIFY_ATTEMPTS {
        socket.send(&request).await?;
        let deadline = Instant::now() + NOTIFY_TIMEOUT;
        // Unrelated datagrams are ignored until the deadline of this attempt.
        while let Ok(received) = timeout_at(deadline, socket.recv(&mut buf)).await {
            match received {
                Ok(n) => {
                    if let Some(rcode) = acknowledges(&buf[..n], id) {
                        if let Some((k, mac)) = signed {
                            if !signed_by(&buf[..n], k, &mac, pqdns_core::time::now()) {
                                warn!(%target, key = %k.name(), "NOTIFY answer without a valid TSIG ignored");
                                continue;
                            }
                        }
                        return Ok(Outcome::Answered {
                            rcode,
                            attempts: attempt,
                        });
                    }
                }
                // An ICMP error (port unreachable) surfaces as a receive error on a connected
                // socket: wait out the attempt rather than spin on it.
                Err(_) => {
                    tokio::time::sleep_until(deadline).await;
                    break;
                }
            }
        }
    }
    Ok(Outcome::NoResponse)
}

/// Announces every zone of `catalog` to every target, each exchange in its own task; the
/// outcome is logged (info when acknowledged with NOERROR, warn otherwise).
pub(crate) fn spawn_all(catalog: Arc<Catalog>, targets: &[Target]) {
    for origin in catalog.zones().map(|z| z.zone.origin.clone()) {
        spawn_zone(&catalog, &origin, targets);
    }
}

/// Announces the zone `origin` of `catalog` to every target, as [`spawn_all`] does (after a
/// secondary zone's transfer, [`crate::secondary`], or a dynamic update, [`crate::update`]).
/// The tasks keep the zone's apex SOA, not the catalog: a NOTIFY retried for a silent target
/// must not keep a served version alive (a dynamic update reuses the version before the
/// served one once no catalog holds it, `resign.rs`).
pub(crate) fn spawn_zone(catalog: &Arc<Catalog>, origin: &Name, targets: &[Target]) {
    let Some(soa) = catalog
        .zone(origin)
        .and_then(|z| z.zone.nodes.get(origin))
        .and_then(|node| node.get(&RrType::SOA))
    else {
        return;
    };
    let mut apex = Zone::new(origin.clone());
    let soa = pqdns_core::zone::RRset {
        rrsigs: Vec::new(),
        ..soa.clone()
    };
    apex.nodes
        .entry(origin.clone())
        .or_default()
        .insert(RrType::SOA, soa);
    let apex = Arc::new(apex);
    for t in targets {
        let (target, key) = (t.addr, t.key.clone());
        let zone = Arc::clone(&apex);
        let origin: Name = origin.clone();
        tokio::spawn(async move {
            let serial = zone.soa_serial();
            match notify(&zone, target, key.as_ref()).await {
                Ok(Outcome::Answered { rcode, attempts }) if rcode == Rcode::NOERROR => {
                    info!(zone = %origin, %target, serial, attempts, "NOTIFY acknowledged")
                }
                Ok(Outcome::Answered { rcode, attempts }) => warn!(
                    zone = %origin, %target, serial, attempts, %rcode,
                    "NOTIFY answered with an error"
                ),
                Ok(Outcome::NoResponse) => warn!(
                    zone = %origin, %target, serial, attempts = NOTIFY_ATTEMPTS,
                    "NOTIFY not acknowledged; giving up"
                ),
                Err(error) => {
                    warn!(zone = %origin, %target, %error, "NOTIFY could not be sent")
                }
            }
        });
    }
}

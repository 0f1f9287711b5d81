//! Incoming zone transfers: the secondary's side of AXFR (RFC 5936) and IXFR (RFC 1995),
//! over TCP, with TSIG (RFC 8945).
//!
//! - **Exchange** ([`refresh`]): one TCP connection to the primary; an SOA query (RFC 1035
//!   §4.3.5); when the primary's serial is newer than ours (RFC 1982), an IXFR request
//!   carrying our SOA in the authority section (RFC 1995 §3), or an AXFR request when we
//!   hold no copy. A primary that answers the IXFR with an error, or whose differences do
//!   not apply to our copy, is asked for the whole zone by AXFR (RFC 1995 §4).
//! - **TSIG** (RFC 8945 §5.3.1): with a key, every request is signed and every message of
//!   every response must carry a TSIG that verifies, the first after the request's MAC, each
//!   later one after the prior message's MAC. §5.3.1 lets a server leave up to 99 messages
//!   unsigned between signed ones; BIND, Knot and NSD sign each, and so does pqdns: an
//!   unsigned message fails the transfer here.
//! - **Reading the answer** ([`Assembler`]): the first record is the new SOA; an IXFR
//!   response whose second record is an SOA is a list of differences (old SOA, deletions,
//!   new SOA, additions), anything else the whole zone (AXFR form, which an IXFR may also
//!   get). The transfer ends with the new SOA where a difference or the zone would start
//!   again; records after it, a message with another ID or question, a TC bit, an error
//!   RCODE or a connection closed before the end fail the transfer.
//! - **Bounds**: every transfer is limited in bytes ([`Limits::max_bytes`], each message at
//!   most 65535 bytes as TCP framing allows) and in time ([`Limits::timeout`], connecting
//!   included).
//!
//! Nothing here changes what is served: a transfer gives a new [`Zone`] or an error, and the
//! secondary ([`crate::secondary`]) decides.

use std::net::SocketAddr;
use std::time::Duration;

use pqdns_core::serial::Serial;
use pqdns_core::wire::tsig::{self, Digest, Fields, Key, Mac};
use pqdns_core::wire::{
    random_id, Header, MessageView, MessageWriter, Opcode, Rcode, Section, WireError, FLAG_QR,
    FLAG_TC,
};
use pqdns_core::zone::ZoneError;
use pqdns_core::{Class, Name, Record, RrType, Zone};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A primary as the transfer client uses it: address and, when transfers are signed, the key.
#[derive(Clone, Debug)]
pub struct Primary {
    /// Address and port (TCP).
    pub addr: SocketAddr,
    /// The TSIG key signing requests to it and its responses.
    pub key: Option<Key>,
}

/// Bounds of one refresh.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// Most bytes of DNS messages read in all (SOA answer and transfer).
    pub max_bytes: usize,
    /// Longest refresh, connecting included.
    pub timeout: Duration,
}

/// Why a refresh failed; the copy served stays as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// Connecting, reading or writing failed, or the primary closed the connection early.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The refresh took longer than [`Limits::timeout`].
    #[error("no complete answer within {0:?}")]
    Timeout(Duration),
    /// The primary sent more than [`Limits::max_bytes`].
    #[error("more than {0} bytes")]
    TooLarge(usize),
    /// A message did not parse.
    #[error("malformed message: {0}")]
    Wire(#[from] WireError),
    /// The primary answered with an error.
    #[error("answered {0}")]
    Rcode(Rcode),
    /// A response's TSIG was missing or did not verify.
    #[error("TSIG: {0}")]
    Tsig(&'static str),
    /// The answer broke the protocol (wrong ID or question, misplaced SOA, data after the end).
    #[error("{0}")]
    Protocol(String),
    /// The records do not make a zone, or an IXFR difference does not apply to our copy.
    #[error("zone data: {0}")]
    Zone(String),
    /// The primary's serial is not newer than ours.
    #[error("primary serial {primary} is not newer than ours, {ours} (RFC 1982)")]
    NotNewer {
        /// The primary's serial.
        primary: u32,
        /// Ours.
        ours: u32,
    },
}

impl From<ZoneError> for TransferError {
    fn from(e: ZoneError) -> TransferError {
        TransferError::Zone(e.to_string())
    }
}

/// What a successful refresh found.
#[derive(Debug)]
pub enum Refreshed {
    /// The primary's serial is ours: nothing to transfer.
    UpToDate,
    /// A newer version, by AXFR or IXFR.
    Transferred {
        /// The new version.
        zone: Zone,
        /// True if it came as IXFR differences.
        incremental: bool,
        /// The IXFR differences as received (RFC 1995 §4: for each, the old SOA, deletions,
        /// the new SOA, additions), applied to make `zone`; empty for a whole zone.
        differences: Vec<Record>,
        /// Bytes of DNS messages read.
        bytes: usize,
    },
}

/// The SOA serial in SOA RDATA (RFC 1035 §3.3.13: 20 bytes before the end).
fn soa_serial(rdata: &[u8]) -> Option<u32> {
    let at = rdata.len().checked_sub(20)?;
    Some(u32::from_be_bytes(rdata[at..at + 4].try_into().ok()?))
}

/// The shape of a transfer answer, known from its second record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// Only the first SOA so far.
    Unknown,
    /// The whole zone (RFC 5936 §2.2; an IXFR answered in full, RFC 1995 §4).
    Full,
    /// Differences (RFC 1995 §4); the count of SOAs after the first.
    Incremental(usize),
}

/// Reads the records of an AXFR or IXFR answer as they arrive, finds where the transfer
/// ends and builds the new version (see the module doc).
#[derive(Debug)]
pub struct Assembler {
    origin: Name,
    records: Vec<Record>,
    form: Form,
    done: bool,
}

impl Assembler {
    /// An assembler for a transfer of `origin`.
    pub fn new(origin: Name) -> Assembler {
        Assembler {
            origin,
            records: Vec::new(),
            form: Form::Unknown,
            done: false,
        }
    }

    /// The serial of the first record, the SOA of the version being transferred.
    pub fn serial(&self) -> Option<u32> {
        self.records.first().and_then(|r| soa_serial(&r.rdata))
    }

    /// Whether the closing SOA has arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes the next record of the answer section.
    ///
    /// # Errors
    /// [`TransferError::Protocol`] for a first record that is not the zone's SOA, a record
    /// after the end, or an SOA of another owner.
    pub fn push(&mut self, record: Record) -> Result<(), TransferError> {
        if self.done {
            return Err(TransferError::Protocol(format!(
                "record {} {} after the closing SOA",
                record.owner, record.rtype
            )));
        }
        let is_soa = record.rtype == RrType::SOA;
        if is_soa && (record.owner != self.origin || soa_serial(&record.rdata).is_none()) {
            return Err(TransferError::Protocol(format!(
                "SOA of {} in a transfer of {}",
                record.owner, self.origin
            )));
        }
        let Some(new) = self.serial() else {
            if !is_soa {
                return Err(TransferError::Protocol(format!(
                    "the transfer starts with {} {}, not the zone's SOA",
                    record.owner, record.rtype
                )));
            }
            self.records.push(record);
            return Ok(());
        };
        let serial = if is_soa {
            soa_serial(&record.rdata)
        } else {
            None
        };
        self.form = match (self.form, serial) {
            // A second SOA with the new serial closes a zone that is only its SOA.
            (Form::Unknown, Some(s)) if s == new => {
                self.done = true;
                Form::Full
            }
            (Form::Unknown, Some(_)) => Form::Incremental(1),
            (Form::Unknown, None) => Form::Full,
            (Form::Full, Some(s)) => {
                if s != new {
                    return Err(TransferError::Protocol(format!(
                        "SOA serial {s} inside the whole zone at serial {new}"
                    )));
                }
                self.done = true;
                Form::Full
            }
            // Deletions start with an old SOA, additions with a newer one; the new serial
            // where deletions would start ends the transfer.
            (Form::Incremental(n), Some(s)) => {
                if n % 2 == 0 && s == new {
                    self.done = true;
                }
                Form::Incremental(n + 1)
            }
            (form, None) => form,
        };
        self.records.push(record);
        Ok(())
    }

    /// Whether the answer so far is a lone SOA: the IXFR answer "you are up to date" (RFC
    /// 1995 §4) when its serial is not newer than ours.
    pub fn is_lone_soa(&self) -> bool {
        self.records.len() == 1
    }

    /// The new version: the whole zone, or `current` with the differences applied in order
    /// (then also the differences, without the first and the closing SOA).
    ///
    /// # Errors
    /// [`TransferError::Protocol`] before the closing SOA; [`TransferError::Zone`] when the
    /// records do not make a zone (RFC 1035 rules of [`Zone::insert_checked`]), or a
    /// difference starts from another serial than the version it applies to or deletes a
    /// record that version lacks; differences without a `current` to apply them to.
    pub fn finish(self, current: Option<&Zone>) -> Result<(Zone, Vec<Record>), TransferError> {
        if !self.done {
            return Err(TransferError::Protocol(
                "the connection ended before the closing SOA".into(),
            ));
        }
        let mut records = self.records;
        records.pop();
        match self.form {
            Form::Incremental(_) => {
                let current = current.ok_or_else(|| {
                    TransferError::Zone("differences, but no copy to apply them to".into())
                })?;
                let differences = records[1..].to_vec();
                Ok((apply(current.clone(), records)?, differences))
            }
            _ => Ok((Zone::from_records(self.origin, records)?, Vec::new())),
        }
    }
}

/// Applies the differences `records` (without the first SOA, the new one, which the last
/// difference's additions start with) to `zone` (RFC 1995 §4).
fn apply(mut zone: Zone, records: Vec<Record>) -> Result<Zone, TransferError> {
    let mut records = records.into_iter().skip(1).peekable();
    while let Some(old) = records.next() {
        let from = soa_serial(&old.rdata).unwrap_or_default();
        if from != zone.soa_serial() {
            return Err(TransferError::Zone(format!(
                "a difference from serial {from} for our serial {}",
                zone.soa_serial()
            )));
        }
        while let Some(r) = records.next_if(|r| r.rtype != RrType::SOA) {
            if !zone.remove(&r) {
                return Err(TransferError::Zone(format!(
                    "serial {from}: deletes {} {}, which our copy lacks",
                    r.owner, r.rtype
                )));
            }
        }
        let new = records.next().ok_or_else(|| {
            TransferError::Zone(format!("serial {from}: deletions without additions"))
        })?;
        let old_soa = Record {
            rdata: zone.soa().to_vec(),
            ..new.clone()
        };
        zone.remove(&old_soa);
        zone.insert_checked(new)?;
        while let Some(r) = records.next_if(|r| r.rtype != RrType::SOA) {
            zone.insert_checked(r)?;
        }
    }
    zone.check_apex()?;
    Ok(zone)
}

/// The query for `origin`/`qtype` with ID `id`; for IXFR, `ours` in the authority section
/// (RFC 1995 §3).
fn request(origin: &Name, qtype: RrType, id: u16, ours: Option<&Zone>) -> Vec<u8> {
    let mut msg = Vec::with_capacity(512);
    let mut w =
        MessageWriter::new(&mut msg, 0, usize::MAX, Header { id, flags: 0 }).without_compression();
    // No budget: nothing is ever full.
    let _unlimited = w.question(origin.as_wire(), qtype, Class::IN);
    if let Some(zone) = ours {
        w.record(
            Section::Authority,
            zone.origin.as_wire(),
            RrType::SOA,
            Class::IN,
            zone.soa_ttl(),
            zone.soa(),
        );
    }
    w.finish(Rcode::NOERROR);
    msg
}

/// One TCP connection to a primary, counting the bytes read against the limit.
struct Connection<'p> {
    stream: TcpStream,
    primary: &'p Primary,
    read: usize,
    max_bytes: usize,
}

/// Where a signed exchange is in its TSIG chain: the MAC the next message's digest starts
/// with, and whether that message is the first of the answer.
struct Chain {
    mac: Mac,
    first: bool,
}

impl Connection<'_> {
    /// Sends the query `qtype` for `origin` (signed when the primary has a key); the ID and
    /// the TSIG chain its answer must follow.
    async fn ask(
        &mut self,
        origin: &Name,
        qtype: RrType,
        ours: Option<&Zone>,
    ) -> Result<(u16, Option<Chain>), TransferError> {
        let id = random_id().ok_or_else(|| std::io::Error::other("the random generator failed"))?;
        let mut msg = request(origin, qtype, id, ours);
        let chain = match &self.primary.key {
            Some(key) => {
                let fields = Fields::at(pqdns_core::time::now());
                let mac = tsig::sign(key, Digest::Request, &mut msg, 0, &fields)?;
                Some(Chain { mac, first: true })
            }
            None => None,
        };
        let mut framed = Vec::with_capacity(msg.len() + 2);
        framed.extend((msg.len() as u16).to_be_bytes());
        framed.extend(msg);
        self.stream.write_all(&framed).await?;
        Ok((id, chain))
    }

    /// Reads one message of the answer to `id` for `origin`/`qtype` and checks its header,
    /// question and TSIG; its answer-section records.
    async fn receive(
        &mut self,
        id: u16,
        origin: &Name,
        qtype: RrType,
        chain: &mut Option<Chain>,
    ) -> Result<Vec<Record>, TransferError> {
        let len = usize::from(self.stream.read_u16().await?);
        self.read += len + 2;
        if self.read > self.max_bytes {
            return Err(TransferError::TooLarge(self.max_bytes));
        }
        let mut msg = vec![0u8; len];
        self.stream.read_exact(&mut msg).await?;
        let view = MessageView::parse(&msg)?;
        let header = view.header();
        if header.id != id || !header.has(FLAG_QR) || header.opcode() != Opcode::QUERY {
            return Err(TransferError::Protocol(format!(
                "a message with ID {} that answers no request of ours",
                header.id
            )));
        }
        let question_ok = |q: pqdns_core::wire::QuestionView<'_>| {
            q.qname.to_name() == *origin && q.qtype == qtype && q.qclass == Class::IN
        };
        let first = chain.as_ref().is_none_or(|c| c.first);
        match view.question() {
            Some(q) if !question_ok(q) => {
                return Err(TransferError::Protocol(
                    "an answer to another question".into(),
                ))
            }
            None if first => {
                return Err(TransferError::Protocol("an answer without question".into()))
            }
            _ => {}
        }
        if let Some(c) = chain {
            let key = self
                .primary
                .key
                .as_ref()
                .ok_or(TransferError::Tsig("no key"))?;
            let signed = tsig::find(&view)?.ok_or(TransferError::Tsig("unsigned message"))?;
            let digest = if c.first {
                Digest::Response(c.mac.as_bytes())
            } else {
                Digest::Subsequent(c.mac.as_bytes())
            };
            let verified = signed
                .verify(Some(key), digest, pqdns_core::time::now())
                .map_err(|r| {
                    TransferError::Tsig(match r.error() {
                        Rcode::BADKEY => "BADKEY",
                        tsig::BADSIG => "BADSIG",
                        Rcode::BADTIME => "BADTIME",
                        _ => "malformed",
                    })
                })?;
            *c = Chain {
                mac: verified.mac,
                first: false,
            };
        }
        let rcode = view.rcode();
        if rcode != Rcode::NOERROR {
            return Err(TransferError::Rcode(rcode));
        }
        if header.has(FLAG_TC) {
            return Err(TransferError::Protocol("TC set on a stream".into()));
        }
        Ok(view
            .records(Section::Answer)
            .map(|r| r.to_record())
            .collect())
    }

    /// The primary's SOA serial (RFC 1035 §4.3.5).
    async fn serial(&mut self, origin: &Name) -> Result<u32, TransferError> {
        let (id, mut chain) = self.ask(origin, RrType::SOA, None).await?;
        let answer = self.receive(id, origin, RrType::SOA, &mut chain).await?;
        answer
            .iter()
            .find(|r| r.rtype == RrType::SOA && r.owner == *origin)
            .and_then(|r| soa_serial(&r.rdata))
            .ok_or_else(|| TransferError::Protocol("no SOA in the answer to our SOA query".into()))
    }

    /// One transfer of `origin`: IXFR from `ours` when given, else AXFR.
    async fn transfer(
        &mut self,
        origin: &Name,
        ours: Option<&Zone>,
    ) -> Result<Refreshed, TransferError> {
        let qtype = if ours.is_some() {
            RrType(251)
        } else {
            RrType::AXFR
        };
        let (id, mut chain) = self.ask(origin, qtype, ours).await?;
        let mut assembler = Assembler::new(origin.clone());
        let mut messages = 0usize;
        while !assembler.is_done() {
            let records = self.receive(id, origin, qtype, &mut chain).await?;
            messages += 1;
            for r in records {
                assembler.push(r)?;
            }
            let ours_serial = ours.map(Zone::soa_serial);
            if messages == 1 && assembler.is_lone_soa() {
                if let (Some(new), Some(ours)) = (assembler.serial(), ours_serial) {
                    if !Serial(new).is_newer_than(Serial(ours)) {
                        return Ok(Refreshed::UpToDate);
                    }
                }
            }
        }
        let (zone, differences) = assembler.finish(ours)?;
        Ok(Refreshed::Transferred {
            zone,
            incremental: !differences.is_empty(),
            differences,
            bytes: self.read,
        })
    }
}

/// Refreshes `origin` from `primary` (see the module doc): `ours` is the version held, if
/// any. The new version's serial is newer than `ours`'s (RFC 1982).
///
/// # Errors
/// [`TransferError`]; nothing is changed.
pub async fn refresh(
    primary: &Primary,
    origin: &Name,
    ours: Option<&Zone>,
    limits: Limits,
) -> Result<Refreshed, TransferError> {
    let run = async {
        let mut conn = connect(primary, limits).await?;
        let serial = conn.serial(origin).await?;
        if let Some(z) = ours {
            let held = z.soa_serial();
            if serial == held {
                return Ok(Refreshed::UpToDate);
            }
            if !Serial(serial).is_newer_than(Serial(held)) {
                return Err(TransferError::NotNewer {
                    primary: serial,
                    ours: held,
                });
            }
        }
        let result = match conn.transfer(origin, ours).await {
            // RFC 1995 §4 lets a primary answer IXFR in full; one that refuses it, or whose
            // differences do not fit our copy, is asked for the whole zone.
            Err(e @ (TransferError::Rcode(_) | TransferError::Zone(_))) if ours.is_some() => {
                tracing::info!(zone = %origin, primary = %primary.addr, "IXFR failed ({e}): trying AXFR");
                let read = conn.read;
                drop(conn);
                let mut again = connect(primary, limits).await?;
                again.read = read;
                again.transfer(origin, None).await
            }
            other => other,
        }?;
        if let (Refreshed::Transferred { zone, .. }, Some(z)) = (&result, ours) {
            if !Serial(zone.soa_serial()).is_newer_than(Serial(z.soa_serial())) {
                return Err(TransferError::NotNewer {
                    primary: zone.soa_serial(),
                    ours: z.soa_serial(),
                });
            }
        }
        Ok(result)
    };
    tokio::time::timeout(limits.timeout, run)
        .await
        .map_err(|_| TransferError::Timeout(limits.timeout))?
}

async fn connect(primary: &Primary, limits: Limits) -> Result<Connection<'_>, TransferError> {
    let stream = TcpStream::connect(primary.addr).await?;
    Ok(Connection {
        stream,
        primary,
        read: 0,
        max_bytes: limits.max_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::zonefile::ZoneFileReader;

    fn origin() -> Name {
        "example.".parse().unwrap()
    }

    fn records(text: &str) -> Vec<Record> {
        ZoneFileReader::new(Some(origin()), Some(300))
            .read_str(text, "t")
            .unwrap()
    }

    fn zone(text: &str) -> Zone {
        Zone::from_records(origin(), records(text)).unwrap()
    }

    fn assemble(text: &str) -> Result<Assembler, TransferError> {
        let mut a = Assembler::new(origin());
        for r in records(text) {
            a.push(r)?;
        }
        Ok(a)
    }

    const V1: &str = "@ SOA ns h 1 60 30 600 300\n@ NS ns\nns A 192.0.2.1\nold A 192.0.2.9\n";

    /// An AXFR answer: the zone between two copies of its SOA; nothing may follow.
    #[test]
    fn a_full_transfer_is_the_zone_between_its_soas() {
        let a = assemble(&format!("{V1}@ SOA ns h 1 60 30 600 300\n")).unwrap();
        assert!(a.is_done());
        let (z, differences) = a.finish(None).unwrap();
        assert!(differences.is_empty());
        assert_eq!(z, zone(V1));
        let err =
            assemble(&format!("{V1}@ SOA ns h 1 60 30 600 300\nx A 192.0.2.7\n")).unwrap_err();
        assert!(err.to_string().contains("after the closing SOA"), "{err}");
        // Cut short: no closing SOA.
        let err = assemble(V1).unwrap().finish(None).unwrap_err();
        assert!(err.to_string().contains("before the closing SOA"), "{err}");
        // Not starting with the SOA, or an SOA of another serial inside.
        assert!(assemble("ns A 192.0.2.1\n").is_err());
        assert!(assemble(&format!("{V1}@ SOA ns h 7 60 30 600 300\n")).is_err());
    }

    /// An IXFR answer with two differences (1 → 2 → 3) applies to version 1 in order: old
    /// SOA, deletions, new SOA, additions; the TTL of a deletion is not compared.
    #[test]
    fn differences_apply_in_order() {
        let ixfr = "@ SOA ns h 3 60 30 600 300\n\
                    @ SOA ns h 1 60 30 600 300\nold 1 A 192.0.2.9\n\
                    @ SOA ns h 2 60 30 600 300\nnew A 192.0.2.10\n\
                    @ SOA ns h 2 60 30 600 300\nnew A 192.0.2.10\n\
                    @ SOA ns h 3 60 30 600 300\nnewer A 192.0.2.11\n\
                    @ SOA ns h 3 60 30 600 300\n";
        let a = assemble(ixfr).unwrap();
        assert!(a.is_done());
        let (z, differences) = a.finish(Some(&zone(V1))).unwrap();
        assert_eq!(
            differences.len(),
            8,
            "both differences, without the first and the closing SOA"
        );
        assert_eq!(differences[0].rdata, zone(V1).soa());
        assert_eq!(
            z,
            zone("@ SOA ns h 3 60 30 600 300\n@ NS ns\nns A 192.0.2.1\nnewer A 192.0.2.11\n")
        );
    }

    /// Differences that do not fit the copy change nothing: another starting serial, a
    /// deleted record we lack, no copy at all.
    #[test]
    fn differences_that_do_not_fit_are_refused() {
        let from_5 = "@ SOA ns h 6 60 30 600 300\n@ SOA ns h 5 60 30 600 300\n\
                      @ SOA ns h 6 60 30 600 300\n@ SOA ns h 6 60 30 600 300\n";
        let lacks = "@ SOA ns h 2 60 30 600 300\n@ SOA ns h 1 60 30 600 300\n\
                     gone A 192.0.2.99\n@ SOA ns h 2 60 30 600 300\n@ SOA ns h 2 60 30 600 300\n";
        for (text, expected) in [(from_5, "from serial 5"), (lacks, "lacks")] {
            let err = assemble(text).unwrap().finish(Some(&zone(V1))).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
        let err = assemble(lacks).unwrap().finish(None).unwrap_err();
        assert!(err.to_string().contains("no copy"), "{err}");
    }

    /// A lone SOA is the "up to date" answer; a zone of only its SOA is two of them.
    #[test]
    fn lone_soa_and_soa_only_zone() {
        let a = assemble("@ SOA ns h 1 60 30 600 300\n").unwrap();
        assert!(a.is_lone_soa() && !a.is_done());
        let a = assemble("@ SOA ns h 1 60 30 600 300\n@ SOA ns h 1 60 30 600 300\n").unwrap();
        assert!(a.is_done());
        let (z, _) = a.finish(None).unwrap();
        assert_eq!(z.record_count(), 1);
    }

    /// What the fake primary does with the next request.
    enum Step {
        /// Answers with these records (one message per inner list), then reads on.
        Answer(Vec<Vec<Record>>),
        /// Answers with the RCODE.
        Refuse(Rcode),
        /// Sends these bytes as one framed message.
        Raw(Vec<u8>),
        /// Answers with these records in one message and closes the connection.
        AnswerAndClose(Vec<Record>),
    }

    /// The answer to `request` with `records` and `rcode`, unsigned.
    fn answer(request: &[u8], records: &[Record], rcode: Rcode) -> Vec<u8> {
        let view = MessageView::parse(request).unwrap();
        let q = view.question().unwrap();
        let mut out = Vec::new();
        let mut w = MessageWriter::response(&mut out, 0, 65535, view.header());
        w.question(q.qname.to_name().as_wire(), q.qtype, q.qclass)
            .unwrap();
        for r in records {
            w.record(
                Section::Answer,
                r.owner.as_wire(),
                r.rtype,
                r.class,
                r.ttl,
                &r.rdata,
            );
        }
        w.finish(rcode);
        out
    }

    /// A primary on 127.0.0.1 that follows `script`, one step per request, across
    /// connections; it closes each connection when the script ends.
    async fn fake_primary(script: Vec<Step>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut steps = script.into_iter();
            'connections: while let Ok((mut conn, _)) = listener.accept().await {
                loop {
                    let Ok(len) = conn.read_u16().await else {
                        continue 'connections;
                    };
                    let mut request = vec![0; usize::from(len)];
                    conn.read_exact(&mut request).await.unwrap();
                    let (messages, close) = match steps.next() {
                        Some(Step::Answer(sets)) => (
                            sets.iter()
                                .map(|set| answer(&request, set, Rcode::NOERROR))
                                .collect(),
                            false,
                        ),
                        Some(Step::Refuse(rcode)) => (vec![answer(&request, &[], rcode)], false),
                        Some(Step::Raw(bytes)) => (vec![bytes], false),
                        Some(Step::AnswerAndClose(set)) => {
                            (vec![answer(&request, &set, Rcode::NOERROR)], true)
                        }
                        None => return,
                    };
                    for m in messages {
                        conn.write_all(&(m.len() as u16).to_be_bytes())
                            .await
                            .unwrap();
                        conn.write_all(&m).await.unwrap();
                    }
                    if close {
                        continue 'connections;
                    }
                }
            }
        });
        addr
    }

    fn run_refresh(
        script: Vec<Step>,
        key: Option<Key>,
        ours: Option<&Zone>,
        max_bytes: usize,
    ) -> Result<Refreshed, TransferError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let addr = fake_primary(script).await;
            let primary = Primary { addr, key };
            let limits = Limits {
                max_bytes,
                timeout: Duration::from_secs(10),
            };
            refresh(&primary, &origin(), ours, limits).await
        })
    }

    fn soa(serial: u32) -> Vec<Record> {
        records(&format!("@ SOA ns h {serial} 60 30 600 300\n"))
    }

    /// Over TCP against a scripted primary: a complete AXFR gives the zone; a lower serial,
    /// a transfer cut short, garbage, an unsigned answer to a signed request and a transfer
    /// over the byte bound each fail; an IXFR refused falls back to AXFR on a new connection.
    #[test]
    fn refreshes_from_a_scripted_primary() {
        let v2 = zone(&V1.replace(" 1 60", " 2 60"));
        let full = |z: &Zone| {
            let mut all = z.records();
            all.extend(soa(z.soa_serial()));
            Step::Answer(vec![all])
        };
        // Complete AXFR, no copy held.
        let got = run_refresh(
            vec![Step::Answer(vec![soa(2)]), full(&v2)],
            None,
            None,
            1 << 20,
        );
        match got.unwrap() {
            Refreshed::Transferred {
                zone, incremental, ..
            } => assert_eq!((zone, incremental), (v2.clone(), false)),
            other => panic!("{other:?}"),
        }
        // Our serial: up to date, no transfer asked.
        let got = run_refresh(vec![Step::Answer(vec![soa(2)])], None, Some(&v2), 1 << 20);
        assert!(matches!(got, Ok(Refreshed::UpToDate)), "{got:?}");
        // A lower serial than ours (RFC 1982).
        let got = run_refresh(vec![Step::Answer(vec![soa(1)])], None, Some(&v2), 1 << 20);
        assert!(
            matches!(
                got,
                Err(TransferError::NotNewer {
                    primary: 1,
                    ours: 2
                })
            ),
            "{got:?}"
        );
        // Cut short: the zone without its closing SOA, then the connection closes.
        let got = run_refresh(
            vec![
                Step::Answer(vec![soa(2)]),
                Step::AnswerAndClose(v2.records()),
            ],
            None,
            None,
            1 << 20,
        );
        assert!(matches!(got, Err(TransferError::Io(_))), "{got:?}");
        // Garbage.
        let got = run_refresh(
            vec![Step::Answer(vec![soa(2)]), Step::Raw(vec![0xff; 40])],
            None,
            None,
            1 << 20,
        );
        assert!(matches!(got, Err(TransferError::Wire(_))), "{got:?}");
        // A key is configured, the answer is unsigned.
        let key = Key::generate(
            &"k.".parse().unwrap(),
            pqdns_core::wire::tsig::Algorithm::HmacSha256,
        )
        .unwrap();
        let got = run_refresh(vec![Step::Answer(vec![soa(2)])], Some(key), None, 1 << 20);
        assert!(
            matches!(got, Err(TransferError::Tsig("unsigned message"))),
            "{got:?}"
        );
        // Over the byte bound.
        let got = run_refresh(vec![Step::Answer(vec![soa(2)]), full(&v2)], None, None, 200);
        assert!(matches!(got, Err(TransferError::TooLarge(200))), "{got:?}");
        // IXFR refused: AXFR on a new connection (SOA again, then the zone).
        let v1 = zone(V1);
        let got = run_refresh(
            vec![
                Step::Answer(vec![soa(2)]),
                Step::Refuse(Rcode::NOTIMP),
                full(&v2),
            ],
            None,
            Some(&v1),
            1 << 20,
        );
        match got.unwrap() {
            Refreshed::Transferred {
                zone, incremental, ..
            } => assert_eq!((zone, incremental), (v2, false)),
            other => panic!("{other:?}"),
        }
    }

    /// The IXFR request carries our SOA in the authority section (RFC 1995 §3).
    #[test]
    fn the_ixfr_request_carries_our_soa() {
        let ours = zone(V1);
        let wire = request(&origin(), RrType(251), 7, Some(&ours));
        let m = pqdns_core::message::Message::parse(&wire).unwrap();
        assert_eq!((m.id, m.questions[0].qtype), (7, RrType(251)));
        assert_eq!(m.authority.len(), 1);
        assert_eq!(soa_serial(&m.authority[0].rdata), Some(1));
    }
}

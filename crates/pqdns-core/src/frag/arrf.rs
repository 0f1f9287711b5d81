//! ARRF: application-layer request-based resource fragmentation (Goertzen & Stebila, ARES
//! 2022, arXiv 2211.14196; `docs/pqc-dnssec-wire.md` §3), so post-quantum answers stay on UDP.
//!
//! Wire form of an RRFRAG (compact: no CLASS, TTL or RDLENGTH; big-endian):
//! `NAME=0x00 | TYPE u16 | FRAGSIZE u16 | CURIDX u32 | RRSIZE u32 | RRID u16 | FRAGDATA`.
//! RRID names one record of the complete answer (pqdns: its index in answer, authority,
//! additional order), RRSIZE is that record's length in uncompressed wire form and CURIDX the
//! offset of FRAGDATA in it. In responses FRAGDATA has FRAGSIZE bytes; in fragment requests
//! there is no FRAGDATA and FRAGSIZE is the length wanted. TYPE is [`DEFAULT_RRFRAG_TYPE`]
//! (65388, private use) unless configured otherwise; the experiments used 108, which IANA
//! assigned to EUI48 (RFC 7043), so talking to them takes an RRFRAG type of 108.
//!
//! Server ([`first_response`]): when the complete answer exceeds the UDP budget, the largest
//! records are replaced in place by RRFRAGs until it fits; the free room then carries the
//! start of the replaced records in 32-byte blocks. TC is not set. Fragment requests
//! ([`fragment_request`], [`answer_request`]): same message ID, question `. RRFRAG IN`,
//! data-less RRFRAGs in the additional section naming the ranges wanted, and the pqdns
//! negotiation option carrying the original question (`frag::edns`), so the server recomputes
//! the answer without per-client state. The reply carries the RRFRAGs with data in its answer
//! section and is never larger than the budget of an ordinary UDP answer.
//!
//! Client ([`Reassembler`]): never allocates from the unauthenticated RRSIZE (the McGowan et
//! al. 2025 memory-exhaustion attack). RRSIZE is capped at [`MAX_RR_SIZE`]; the announced sizes
//! of one answer plus its other records may not exceed 65535 bytes; every fragment must repeat
//! its record's RRSIZE; duplicate, overlapping and out-of-range fragments are rejected; state is
//! keyed by (server address and port, message ID, question); the total memory of all pending
//! reassemblies is capped by [`Limits::max_bytes`] and each expires after [`Limits::timeout`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::frag::edns::{FragOption, ARRF};
use crate::message::{Message, Question};
use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::wire::{Edns, FLAG_QR, FLAG_TC};

/// Default RRFRAG type: 65388 (0xFF6C, the experiments' 108 moved into the private-use range
/// 65280–65534 of RFC 6895 §3.1). The ARRF experiments used 108, which is IANA's EUI48
/// (RFC 7043); it stays selectable (`rrfrag_type` in the server settings, `FragConfig` in the
/// resolver).
pub const DEFAULT_RRFRAG_TYPE: RrType = RrType(65_388);
/// Bytes of an RRFRAG before FRAGDATA: name, TYPE, FRAGSIZE, CURIDX, RRSIZE, RRID.
pub const RRFRAG_HEADER_LEN: usize = 15;
/// Largest record an RRFRAG may announce, bytes: owner name (≤ 255) + TYPE, CLASS, TTL,
/// RDLENGTH (10) + RDATA (≤ 65535).
pub const MAX_RR_SIZE: u32 = 255 + 10 + 65_535;
/// Largest reassembled message, bytes.
pub const MAX_MESSAGE: usize = 65_535;
/// Data in a first response is sent in blocks of this many bytes (except a record's last one).
pub const DATA_BLOCK: usize = 32;
/// Bytes of a fragment response besides its RRFRAGs: header (12), question `. RRFRAG IN` (5),
/// OPT (11) with the 1-byte negotiation option (5).
pub const RESPONSE_OVERHEAD: usize = 12 + 5 + 11 + 5;
/// Memory charged per stored data chunk beyond its bytes (map node and vector header).
pub const CHUNK_OVERHEAD: usize = 64;

/// Why ARRF fragmentation, a fragment request or reassembly failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArrfError {
    /// Even with every record replaced, the answer exceeds the budget: use TC + TCP.
    #[error("answer cannot be fragmented within {0} bytes")]
    DoesNotFit(usize),
    /// More records than a 16-bit RRID can name.
    #[error("too many records to fragment")]
    TooManyRecords,
    /// An RRFRAG's fixed fields are cut, or its data length differs from FRAGSIZE.
    #[error("malformed RRFRAG")]
    Malformed,
    /// An announced RRSIZE above [`MAX_RR_SIZE`] or below the smallest record (11 bytes).
    #[error("RRSIZE {0} is impossible")]
    RrSize(u32),
    /// The announced records would make a message above 65535 bytes.
    #[error("announced records exceed 65535 bytes")]
    MessageTooLarge,
    /// An RRID that the first response did not announce, or that the answer does not have.
    #[error("unknown RRID {0}")]
    UnknownRr(u16),
    /// An RRID announced twice, or a fragment whose RRSIZE differs from the announcement
    /// (or, on the server, from the record).
    #[error("RRID {0}: inconsistent RRSIZE or repeated announcement")]
    Inconsistent(u16),
    /// CURIDX + FRAGSIZE beyond RRSIZE, or an empty range.
    #[error("RRID {0}: range out of bounds")]
    OutOfRange(u16),
    /// A range already received (e.g. a duplicated datagram).
    #[error("RRID {0}: duplicate fragment")]
    Duplicate(u16),
    /// A range that partly overlaps data already received.
    #[error("RRID {0}: overlapping fragment")]
    Overlap(u16),
    /// Not a fragment response for this reassembly (question, ID or QR differ).
    #[error("not a fragment response for this query")]
    NotForUs,
    /// No reassembly is pending under this key (never started, finished or expired).
    #[error("no pending reassembly")]
    NotPending,
    /// [`Limits::max_pending`] reassemblies are already running.
    #[error("too many pending reassemblies")]
    TooManyPending,
    /// Storing this fragment would exceed [`Limits::max_bytes`].
    #[error("reassembly memory limit reached")]
    MemoryLimit,
    /// The reassembled bytes of a record do not form exactly one record.
    #[error("RRID {0}: reassembled bytes are not a record")]
    BadRecord(u16),
}

/// One RRFRAG. In a request `data` is empty and `frag_size` is the length wanted; in a
/// response `frag_size == data.len()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrFrag {
    /// FRAGSIZE, bytes.
    pub frag_size: u16,
    /// CURIDX: offset of the data in the record's wire form, bytes.
    pub cur_idx: u32,
    /// RRSIZE: length of the whole record in uncompressed wire form, bytes.
    pub rr_size: u32,
    /// RRID: which record of the answer.
    pub rr_id: u16,
    /// FRAGDATA.
    pub data: Vec<u8>,
}

impl RrFrag {
    /// The compact record as [`Message::to_wire_with`] writes it (owner root, type `rtype`).
    pub fn to_record(&self, rtype: RrType) -> Record {
        let mut rdata = Vec::with_capacity(12 + self.data.len());
        rdata.extend(self.frag_size.to_be_bytes());
        rdata.extend(self.cur_idx.to_be_bytes());
        rdata.extend(self.rr_size.to_be_bytes());
        rdata.extend(self.rr_id.to_be_bytes());
        rdata.extend_from_slice(&self.data);
        Record {
            owner: Name::root(),
            rtype,
            class: Class(0),
            ttl: 0,
            rdata,
        }
    }

    /// Reads an RRFRAG from a record returned by [`Message::parse_with`]; `None` if the record
    /// is not of type `rtype` at the root.
    ///
    /// # Errors
    /// [`ArrfError::Malformed`] if the fields are cut or the data length disagrees with
    /// FRAGSIZE (`with_data`: response form; otherwise request form without data).
    pub fn from_record(
        r: &Record,
        rtype: RrType,
        with_data: bool,
    ) -> Option<Result<RrFrag, ArrfError>> {
        if r.rtype != rtype || !r.owner.is_root() {
            return None;
        }
        let d = &r.rdata;
        if d.len() < 12 {
            return Some(Err(ArrfError::Malformed));
        }
        let frag_size = u16::from_be_bytes([d[0], d[1]]);
        let data = &d[12..];
        let expected = if with_data { usize::from(frag_size) } else { 0 };
        if data.len() != expected {
            return Some(Err(ArrfError::Malformed));
        }
        Some(Ok(RrFrag {
            frag_size,
            cur_idx: u32::from_be_bytes([d[2], d[3], d[4], d[5]]),
            rr_size: u32::from_be_bytes([d[6], d[7], d[8], d[9]]),
            rr_id: u16::from_be_bytes([d[10], d[11]]),
            data: data.to_vec(),
        }))
    }

    /// Bytes this RRFRAG takes on the wire.
    pub fn wire_len(&self) -> usize {
        RRFRAG_HEADER_LEN + self.data.len()
    }
}

fn records(m: &Message) -> impl Iterator<Item = &Record> {
    m.answers.iter().chain(&m.authority).chain(&m.additional)
}

fn records_mut(m: &mut Message) -> impl Iterator<Item = &mut Record> {
    m.answers
        .iter_mut()
        .chain(m.authority.iter_mut())
        .chain(m.additional.iter_mut())
}

fn rr_wire(r: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.owner.wire_len() + 10 + r.rdata.len());
    r.write_wire(&mut out);
    out
}

/// The first response for a `budget`-byte UDP answer: `full` (the complete answer) with its
/// largest records replaced in place by RRFRAGs until it fits, and the free room filled with
/// the replaced records' first bytes in [`DATA_BLOCK`]-byte blocks. TC is cleared. A `full`
/// that already fits comes back unchanged.
///
/// # Errors
/// [`ArrfError::DoesNotFit`] if it does not fit even with every record replaced,
/// [`ArrfError::TooManyRecords`] beyond 65536 records.
pub fn first_response(full: &Message, budget: usize, rtype: RrType) -> Result<Message, ArrfError> {
    let mut size = full.to_wire().len();
    let wires: Vec<Vec<u8>> = records(full).map(rr_wire).collect();
    if wires.len() > usize::from(u16::MAX) + 1 {
        return Err(ArrfError::TooManyRecords);
    }
    let mut by_size: Vec<usize> = (0..wires.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(wires[i].len()));
    let mut replaced = vec![false; wires.len()];
    for &i in &by_size {
        if size <= budget {
            break;
        }
        size = size - wires[i].len() + RRFRAG_HEADER_LEN;
        replaced[i] = true;
    }
    if size > budget {
        return Err(ArrfError::DoesNotFit(budget));
    }
    let mut room = budget - size;
    let mut out = full.clone();
    out.flags &= !FLAG_TC;
    for (i, r) in records_mut(&mut out).enumerate() {
        if !replaced[i] {
            continue;
        }
        let wire = &wires[i];
        let take = if wire.len() <= room {
            wire.len()
        } else {
            room / DATA_BLOCK * DATA_BLOCK
        };
        room -= take;
        *r = RrFrag {
            frag_size: take as u16,
            cur_idx: 0,
            rr_size: wire.len() as u32,
            rr_id: i as u16,
            data: wire[..take].to_vec(),
        }
        .to_record(rtype);
    }
    Ok(out)
}

/// A range of one record still to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// RRID.
    pub rr_id: u16,
    /// RRSIZE as announced, bytes.
    pub rr_size: u32,
    /// First byte wanted (CURIDX).
    pub start: u32,
    /// Bytes wanted.
    pub len: u32,
}

/// Groups `wanted` ranges into fragment requests whose responses fit `budget` bytes each
/// (splitting long ranges): each response holds [`RESPONSE_OVERHEAD`] bytes plus
/// [`RRFRAG_HEADER_LEN`] + data per range. Requests can then go out in parallel.
pub fn plan_requests(wanted: &[Wanted], budget: usize) -> Vec<Vec<Wanted>> {
    let capacity = budget.saturating_sub(RESPONSE_OVERHEAD);
    if capacity <= RRFRAG_HEADER_LEN {
        return Vec::new();
    }
    let mut groups: Vec<Vec<Wanted>> = Vec::new();
    let mut room = 0;
    for w in wanted {
        let (mut start, mut left) = (w.start, w.len);
        while left > 0 {
            if room <= RRFRAG_HEADER_LEN {
                groups.push(Vec::new());
                room = capacity;
            }
            let take = left.min((room - RRFRAG_HEADER_LEN).min(usize::from(u16::MAX)) as u32);
            groups.last_mut().expect("pushed above").push(Wanted {
                start,
                len: take,
                ..*w
            });
            room -= RRFRAG_HEADER_LEN + take as usize;
            start += take;
            left -= take;
        }
    }
    groups
}

/// A fragment request for the ranges `wanted` of the answer to `original`: same `id`, question
/// `. rtype IN`, one data-less RRFRAG per range in the additional section, `edns` with the
/// negotiation option (scheme ARRF, the original question) under `option_code`.
pub fn fragment_request(
    id: u16,
    original: &Question,
    wanted: &[Wanted],
    mut edns: Edns,
    rtype: RrType,
    option_code: u16,
) -> Message {
    FragOption {
        schemes: ARRF,
        question: Some((original.qname.clone(), original.qtype)),
    }
    .put(&mut edns, option_code);
    let mut m = Message::query(
        id,
        Question {
            qname: Name::root(),
            qtype: rtype,
            qclass: Class::IN,
        },
        false,
        Some(edns),
    );
    m.additional = wanted
        .iter()
        .map(|w| {
            RrFrag {
                frag_size: w.len.min(u32::from(u16::MAX)) as u16,
                cur_idx: w.start,
                rr_size: w.rr_size,
                rr_id: w.rr_id,
                data: Vec::new(),
            }
            .to_record(rtype)
        })
        .collect();
    m
}

/// The server's reply to the fragment `request` (parsed with [`Message::parse_with`]) from the
/// complete answer `full`: header of `full` with the request's ID and TC clear, question
/// `. rtype IN`, `full`'s OPT, and one RRFRAG with data per requested range in the answer
/// section, cut (or left out) so the reply never exceeds `budget` bytes.
///
/// # Errors
/// [`ArrfError::UnknownRr`] for an RRID the answer lacks, [`ArrfError::Inconsistent`] if
/// RRSIZE differs from the record, [`ArrfError::OutOfRange`] for a range beyond it or none at
/// all, [`ArrfError::Malformed`] for a cut RRFRAG.
pub fn answer_request(
    full: &Message,
    request: &Message,
    budget: usize,
    rtype: RrType,
) -> Result<Message, ArrfError> {
    let wanted = request
        .additional
        .iter()
        .filter_map(|r| RrFrag::from_record(r, rtype, false))
        .map(|want| {
            want.map(|w| Wanted {
                rr_id: w.rr_id,
                rr_size: w.rr_size,
                start: w.cur_idx,
                len: u32::from(w.frag_size),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    ranges_response(full, request.id, &wanted, budget, rtype)
}

/// A fragment response with ID `id` carrying the `wanted` ranges of `full`'s records, cut (or
/// left out) so it never exceeds `budget` bytes; see [`answer_request`].
fn ranges_response(
    full: &Message,
    id: u16,
    wanted: &[Wanted],
    budget: usize,
    rtype: RrType,
) -> Result<Message, ArrfError> {
    let all: Vec<&Record> = records(full).collect();
    let mut out = Message {
        id,
        flags: (full.flags | FLAG_QR) & !FLAG_TC,
        questions: vec![Question {
            qname: Name::root(),
            qtype: rtype,
            qclass: Class::IN,
        }],
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
        edns: full.edns.clone(),
    };
    if wanted.is_empty() {
        return Err(ArrfError::OutOfRange(0));
    }
    let mut size = out.to_wire().len();
    for want in wanted {
        let rr = all
            .get(usize::from(want.rr_id))
            .ok_or(ArrfError::UnknownRr(want.rr_id))?;
        let wire = rr_wire(rr);
        if want.rr_size as usize != wire.len() {
            return Err(ArrfError::Inconsistent(want.rr_id));
        }
        let start = want.start as usize;
        let end = start + want.len as usize;
        if want.len == 0 || want.len > u32::from(u16::MAX) || end > wire.len() {
            return Err(ArrfError::OutOfRange(want.rr_id));
        }
        let room = budget.saturating_sub(size + RRFRAG_HEADER_LEN);
        let take = (end - start).min(room);
        if take == 0 {
            break;
        }
        let frag = RrFrag {
            frag_size: take as u16,
            cur_idx: want.start,
            rr_size: want.rr_size,
            rr_id: want.rr_id,
            data: wire[start..start + take].to_vec(),
        };
        size += frag.wire_len();
        out.answers.push(frag.to_record(rtype));
    }
    Ok(out)
}

/// The ranges the first response `first` (from [`first_response`]) announces but does not
/// carry: for each RRFRAG, the bytes after its data.
///
/// # Errors
/// [`ArrfError::Malformed`] for an RRFRAG that does not decode.
pub fn unsent(first: &Message, rtype: RrType) -> Result<Vec<Wanted>, ArrfError> {
    let mut wanted = Vec::new();
    for r in records(first) {
        let Some(frag) = RrFrag::from_record(r, rtype, true) else {
            continue;
        };
        let frag = frag?;
        let sent = frag.cur_idx.saturating_add(u32::from(frag.frag_size));
        if sent < frag.rr_size {
            wanted.push(Wanted {
                rr_id: frag.rr_id,
                rr_size: frag.rr_size,
                start: sent,
                len: frag.rr_size - sent,
            });
        }
    }
    Ok(wanted)
}

/// Every fragment response a client would have asked for after the first response `first`
/// to the complete answer `full`, made without its requests: the [`unsent`] ranges grouped
/// by [`plan_requests`] and cut as [`answer_request`] would, each at most `budget` bytes,
/// with `full`'s ID. A server sends them unasked to a client that proved its address (a valid
/// DNS cookie; `frag::edns::PUSH`), which saves the round trip of the requests.
///
/// # Errors
/// As [`answer_request`], which cannot happen for a `first` made from `full`.
pub fn pushed_responses(
    full: &Message,
    first: &Message,
    budget: usize,
    rtype: RrType,
) -> Result<Vec<Message>, ArrfError> {
    plan_requests(&unsent(first, rtype)?, budget)
        .iter()
        .map(|group| ranges_response(full, full.id, group, budget, rtype))
        .collect()
}

/// Bounds on client-side reassembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most reassemblies pending at once.
    pub max_pending: usize,
    /// Most memory charged to all pending reassemblies, bytes: each first response's wire
    /// length plus every stored data chunk's length and [`CHUNK_OVERHEAD`].
    pub max_bytes: usize,
    /// A reassembly older than this is dropped.
    pub timeout: Duration,
}

impl Default for Limits {
    /// 16 pending, 1 MiB, 5 seconds.
    fn default() -> Limits {
        Limits {
            max_pending: 16,
            max_bytes: 1 << 20,
            timeout: Duration::from_secs(5),
        }
    }
}

/// What a reassembly is bound to: the server (address and port), the message ID and the
/// original question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// Server address and port the query went to (responses from elsewhere are not fed in).
    pub server: SocketAddr,
    /// Message ID of the query and every fragment request.
    pub id: u16,
    /// The original question.
    pub question: Question,
}

/// State of a reassembly after a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// These ranges are still missing.
    Missing(Vec<Wanted>),
    /// The complete answer, RRFRAGs replaced by the reassembled records.
    Complete(Message),
}

struct RrState {
    rr_id: u16,
    rr_size: u32,
    /// Received data by offset; ranges never overlap.
    chunks: BTreeMap<u32, Vec<u8>>,
    received: u32,
}

impl RrState {
    fn missing(&self, out: &mut Vec<Wanted>) {
        let mut at = 0;
        let gaps = self
            .chunks
            .iter()
            .map(|(&o, d)| (o, o + d.len() as u32))
            .chain([(self.rr_size, self.rr_size)]);
        for (start, end) in gaps {
            if start > at {
                out.push(Wanted {
                    rr_id: self.rr_id,
                    rr_size: self.rr_size,
                    start: at,
                    len: start - at,
                });
            }
            at = end;
        }
    }

    /// Checks that `f` is new, in range and disjoint from what is stored.
    fn check(&self, f: &RrFrag) -> Result<(), ArrfError> {
        if f.rr_size != self.rr_size {
            return Err(ArrfError::Inconsistent(f.rr_id));
        }
        let end = u64::from(f.cur_idx) + u64::from(f.frag_size);
        if f.frag_size == 0 || end > u64::from(self.rr_size) {
            return Err(ArrfError::OutOfRange(f.rr_id));
        }
        if let Some(d) = self.chunks.get(&f.cur_idx) {
            return Err(if *d == f.data {
                ArrfError::Duplicate(f.rr_id)
            } else {
                ArrfError::Overlap(f.rr_id)
            });
        }
        let end = end as u32;
        let before = self.chunks.range(..f.cur_idx).next_back();
        let after = self.chunks.range(f.cur_idx..).next();
        if before.is_some_and(|(&o, d)| o + d.len() as u32 > f.cur_idx)
            || after.is_some_and(|(&o, _)| o < end)
        {
            return Err(ArrfError::Overlap(f.rr_id));
        }
        Ok(())
    }

    /// The record from complete data.
    fn record(&self) -> Result<Record, ArrfError> {
        let bad = ArrfError::BadRecord(self.rr_id);
        let mut wire = Vec::with_capacity(self.received as usize);
        for d in self.chunks.values() {
            wire.extend_from_slice(d);
        }
        let (owner, used) = Name::read_uncompressed(&wire).map_err(|_| bad)?;
        let fixed = wire.get(used..used + 10).ok_or(bad)?;
        let rdlen = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        if used + 10 + rdlen != wire.len() {
            return Err(bad);
        }
        Ok(Record {
            owner,
            rtype: RrType(u16::from_be_bytes([fixed[0], fixed[1]])),
            class: Class(u16::from_be_bytes([fixed[2], fixed[3]])),
            ttl: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
            rdata: wire[used + 10..].to_vec(),
        })
    }
}

struct Pending {
    key: Key,
    started: Instant,
    first: Message,
    rrs: Vec<RrState>,
    cost: usize,
}

impl Pending {
    fn missing(&self) -> Vec<Wanted> {
        let mut out = Vec::new();
        for rr in &self.rrs {
            rr.missing(&mut out);
        }
        out
    }

    fn progress(&self, rtype: RrType) -> Result<Progress, ArrfError> {
        let missing = self.missing();
        if !missing.is_empty() {
            return Ok(Progress::Missing(missing));
        }
        let mut out = self.first.clone();
        let is_frag_of = |r: &Record, rr: &RrState| {
            RrFrag::from_record(r, rtype, true)
                .is_some_and(|f| f.is_ok_and(|f| f.rr_id == rr.rr_id))
        };
        for rr in &self.rrs {
            let record = rr.record()?;
            let slot = records_mut(&mut out)
                .find(|r| is_frag_of(r, rr))
                .ok_or(ArrfError::UnknownRr(rr.rr_id))?;
            *slot = record;
        }
        Ok(Progress::Complete(out))
    }
}

/// Client-side ARRF reassembly for any number of queries, within [`Limits`]. Feed it the first
/// response ([`Reassembler::start`]) and then fragment responses ([`Reassembler::add`]).
pub struct Reassembler {
    limits: Limits,
    rtype: RrType,
    pending: Vec<Pending>,
    used: usize,
    peak: usize,
}

impl Reassembler {
    /// An empty reassembler for RRFRAGs of type `rtype`.
    pub fn new(limits: Limits, rtype: RrType) -> Reassembler {
        Reassembler {
            limits,
            rtype,
            pending: Vec::new(),
            used: 0,
            peak: 0,
        }
    }

    /// Memory charged now, bytes (see [`Limits::max_bytes`]).
    pub fn memory_used(&self) -> usize {
        self.used
    }

    /// Highest [`Reassembler::memory_used`] so far, bytes.
    pub fn peak_memory(&self) -> usize {
        self.peak
    }

    /// Drops reassemblies older than [`Limits::timeout`].
    pub fn expire(&mut self, now: Instant) {
        let timeout = self.limits.timeout;
        let mut freed = 0;
        self.pending.retain(|p| {
            let keep = now.saturating_duration_since(p.started) < timeout;
            if !keep {
                freed += p.cost;
            }
            keep
        });
        self.used -= freed;
    }

    /// The ranges still missing from the reassembly under `key`; `None` if none is pending.
    pub fn missing(&self, key: &Key) -> Option<Vec<Wanted>> {
        Some(self.pending.iter().find(|p| p.key == *key)?.missing())
    }

    /// Forgets the reassembly under `key` (after a failure, before falling back to TCP).
    pub fn abandon(&mut self, key: &Key) {
        if let Some(i) = self.pending.iter().position(|p| p.key == *key) {
            self.used -= self.pending.swap_remove(i).cost;
        }
    }

    fn charge(&mut self, cost: usize) -> Result<(), ArrfError> {
        if self.used + cost > self.limits.max_bytes {
            return Err(ArrfError::MemoryLimit);
        }
        self.used += cost;
        self.peak = self.peak.max(self.used);
        Ok(())
    }

    /// Starts reassembling the first response `first` (parsed with [`Message::parse_with`])
    /// to the query described by `key`. A response without RRFRAGs is complete at once.
    ///
    /// # Errors
    /// [`ArrfError::Malformed`], [`ArrfError::RrSize`], [`ArrfError::Inconsistent`] (an RRID
    /// announced twice), [`ArrfError::OutOfRange`], [`ArrfError::MessageTooLarge`],
    /// [`ArrfError::TooManyPending`], [`ArrfError::MemoryLimit`]. Nothing is kept on error.
    pub fn start(&mut self, key: Key, first: Message, now: Instant) -> Result<Progress, ArrfError> {
        self.expire(now);
        self.abandon(&key);
        let frags: Vec<RrFrag> = records(&first)
            .filter_map(|r| RrFrag::from_record(r, self.rtype, true))
            .collect::<Result<_, _>>()?;
        if frags.is_empty() {
            return Ok(Progress::Complete(first));
        }
        if self.pending.len() >= self.limits.max_pending {
            return Err(ArrfError::TooManyPending);
        }
        let first_len = first.to_wire_with(Some(self.rtype)).len();
        let mut total = first_len;
        let mut rrs: Vec<RrState> = Vec::with_capacity(frags.len());
        for f in &frags {
            if !(11..=MAX_RR_SIZE).contains(&f.rr_size) {
                return Err(ArrfError::RrSize(f.rr_size));
            }
            total = total - f.wire_len() + f.rr_size as usize;
            if total > MAX_MESSAGE {
                return Err(ArrfError::MessageTooLarge);
            }
            if rrs.iter().any(|r| r.rr_id == f.rr_id) {
                return Err(ArrfError::Inconsistent(f.rr_id));
            }
            rrs.push(RrState {
                rr_id: f.rr_id,
                rr_size: f.rr_size,
                chunks: BTreeMap::new(),
                received: 0,
            });
        }
        let mut cost = first_len;
        for (f, rr) in frags.into_iter().zip(&mut rrs) {
            if f.frag_size == 0 {
                continue;
            }
            rr.check(&f)?;
            cost += f.data.len() + CHUNK_OVERHEAD;
            rr.received += u32::from(f.frag_size);
            rr.chunks.insert(f.cur_idx, f.data);
        }
        self.charge(cost)?;
        let p = Pending {
            key,
            started: now,
            first,
            rrs,
            cost,
        };
        self.finish_or_keep(p)
    }

    fn finish_or_keep(&mut self, p: Pending) -> Result<Progress, ArrfError> {
        let progress = p.progress(self.rtype);
        match progress {
            Ok(Progress::Missing(_)) => self.pending.push(p),
            _ => self.used -= p.cost,
        }
        progress
    }

    /// Adds the fragment response `response` (parsed with [`Message::parse_with`]) received
    /// from `key.server` for the reassembly under `key`. The response is taken whole or not at
    /// all: on error nothing changes, and the caller may keep waiting (e.g. after
    /// [`ArrfError::Duplicate`]) or [`Reassembler::abandon`].
    ///
    /// # Errors
    /// [`ArrfError::NotPending`], [`ArrfError::NotForUs`], [`ArrfError::Malformed`],
    /// [`ArrfError::UnknownRr`], [`ArrfError::Inconsistent`], [`ArrfError::OutOfRange`],
    /// [`ArrfError::Duplicate`], [`ArrfError::Overlap`], [`ArrfError::MemoryLimit`],
    /// [`ArrfError::BadRecord`] when the last range completes a record that does not parse.
    pub fn add(
        &mut self,
        key: &Key,
        response: &Message,
        now: Instant,
    ) -> Result<Progress, ArrfError> {
        self.expire(now);
        let i = self
            .pending
            .iter()
            .position(|p| p.key == *key)
            .ok_or(ArrfError::NotPending)?;
        let q = response.questions.first().ok_or(ArrfError::NotForUs)?;
        if response.id != key.id
            || !response.has_flag(FLAG_QR)
            || response.questions.len() != 1
            || !q.qname.is_root()
            || q.qtype != self.rtype
        {
            return Err(ArrfError::NotForUs);
        }
        let frags: Vec<RrFrag> = records(response)
            .filter_map(|r| RrFrag::from_record(r, self.rtype, true))
            .collect::<Result<_, _>>()?;
        let p = &self.pending[i];
        let mut cost = 0;
        for (n, f) in frags.iter().enumerate() {
            let rr = p
                .rrs
                .iter()
                .find(|r| r.rr_id == f.rr_id)
                .ok_or(ArrfError::UnknownRr(f.rr_id))?;
            rr.check(f)?;
            // Ranges within this one response must be disjoint too.
            let end = f.cur_idx + u32::from(f.frag_size);
            if frags[..n].iter().any(|g| {
                g.rr_id == f.rr_id
                    && g.cur_idx < end
                    && f.cur_idx < g.cur_idx + u32::from(g.frag_size)
            }) {
                return Err(ArrfError::Overlap(f.rr_id));
            }
            cost += f.data.len() + CHUNK_OVERHEAD;
        }
        self.charge(cost)?;
        let mut p = self.pending.swap_remove(i);
        p.cost += cost;
        for f in frags {
            let rr = p
                .rrs
                .iter_mut()
                .find(|r| r.rr_id == f.rr_id)
                .expect("checked above");
            rr.received += u32::from(f.frag_size);
            rr.chunks.insert(f.cur_idx, f.data);
        }
        self.finish_or_keep(p)
    }
}

#[cfg(test)]
mod tests;

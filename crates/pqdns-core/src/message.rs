//! Whole DNS messages (RFC 1035 §4.1) for clients: parse a response with name decompression
//! (§4.1.4) into owned [`Record`]s with uncompressed RDATA, and build queries with EDNS(0)
//! (RFC 6891 §6.1).
//!
//! Parsing is bounded: compression pointers must point strictly backwards (so loops end), a
//! message is at most 65535 bytes and each record at least 11, so record counts are bounded by
//! the input; nothing is allocated from an unchecked length field.

use crate::name::{Name, NameError, MAX_NAME_LEN};
use crate::rr::{Class, Record, RrType};

/// Fixed header length, bytes.
pub const HEADER_LEN: usize = 12;

/// Header flag QR (response).
pub const FLAG_QR: u16 = 0x8000;
/// Header flag AA (authoritative answer).
pub const FLAG_AA: u16 = 0x0400;
/// Header flag TC (truncated).
pub const FLAG_TC: u16 = 0x0200;
/// Header flag RD (recursion desired).
pub const FLAG_RD: u16 = 0x0100;
/// Header flag AD (authentic data, RFC 4035 §3.2.3).
pub const FLAG_AD: u16 = 0x0020;
/// Header flag CD (checking disabled, RFC 4035 §3.2.2).
pub const FLAG_CD: u16 = 0x0010;
/// EDNS flag DO (DNSSEC OK, RFC 3225 §3) in the OPT TTL's low 16 bits.
pub const EDNS_DO: u16 = 0x8000;

/// RCODE values (RFC 1035 §4.1.1, RFC 6891 §9).
pub mod rcode {
    /// No error.
    pub const NOERROR: u16 = 0;
    /// Format error.
    pub const FORMERR: u16 = 1;
    /// Server failure.
    pub const SERVFAIL: u16 = 2;
    /// Name does not exist.
    pub const NXDOMAIN: u16 = 3;
    /// Not implemented.
    pub const NOTIMP: u16 = 4;
    /// Refused.
    pub const REFUSED: u16 = 5;
    /// Bad EDNS version (extended RCODE 16).
    pub const BADVERS: u16 = 16;
}

/// Why a message could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ends inside a field.
    #[error("message truncated")]
    Truncated,
    /// A name is malformed, too long, or its compression pointer does not point backwards.
    #[error("bad name: {0}")]
    Name(NameError),
    /// A compression pointer that loops or points forward.
    #[error("bad compression pointer")]
    BadPointer,
    /// Bytes after the last counted record.
    #[error("trailing bytes after the last record")]
    Trailing,
    /// More than one OPT record, or OPT not at the root.
    #[error("malformed OPT record")]
    BadOpt,
}

/// One question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// QNAME.
    pub qname: Name,
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: Class,
}

/// EDNS(0) parameters (RFC 6891 §6.1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edns {
    /// UDP payload size, bytes.
    pub udp_payload: u16,
    /// Upper 8 bits of the extended RCODE.
    pub ext_rcode: u8,
    /// EDNS version.
    pub version: u8,
    /// Flags (DO = [`EDNS_DO`]).
    pub flags: u16,
    /// Options as (code, data).
    pub options: Vec<(u16, Vec<u8>)>,
}

impl Edns {
    /// EDNS version 0 with the DO bit (RFC 3225 §3), `udp_payload` bytes and no options: what
    /// a DNSSEC-aware client sends.
    pub fn dnssec_ok(udp_payload: u16) -> Edns {
        Edns {
            udp_payload,
            ext_rcode: 0,
            version: 0,
            flags: EDNS_DO,
            options: Vec::new(),
        }
    }
}

/// A parsed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Message ID.
    pub id: u16,
    /// Header flags word (QR, OPCODE, AA, TC, RD, RA, Z, AD, CD, low 4 bits of RCODE).
    pub flags: u16,
    /// Questions.
    pub questions: Vec<Question>,
    /// Answer section.
    pub answers: Vec<Record>,
    /// Authority section.
    pub authority: Vec<Record>,
    /// Additional section, without the OPT record.
    pub additional: Vec<Record>,
    /// The OPT record, if any.
    pub edns: Option<Edns>,
}

struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let s = self
            .msg
            .get(self.pos..self.pos + n)
            .ok_or(WireError::Truncated)?;
        self.pos += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn name(&mut self) -> Result<Name, WireError> {
        let (name, next) = read_name(self.msg, self.pos)?;
        self.pos = next;
        Ok(name)
    }
}

/// Reads a possibly compressed name at `start` in `msg`; returns it and the offset just after
/// its in-place encoding. Pointers must point strictly before the label that holds them.
pub fn read_name(msg: &[u8], start: usize) -> Result<(Name, usize), WireError> {
    let mut wire = Vec::with_capacity(32);
    let mut pos = start;
    let mut end = None;
    // The lowest offset a pointer may target: strictly before the current label run.
    let mut limit = start;
    loop {
        let len = *msg.get(pos).ok_or(WireError::Truncated)?;
        match len {
            0 => {
                wire.push(0);
                let name = Name::from_wire(&wire).map_err(WireError::Name)?;
                return Ok((name, end.unwrap_or(pos + 1)));
            }
            1..=63 => {
                let label = msg
                    .get(pos..pos + 1 + usize::from(len))
                    .ok_or(WireError::Truncated)?;
                wire.extend_from_slice(label);
                if wire.len() >= MAX_NAME_LEN {
                    return Err(WireError::Name(NameError::NameTooLong));
                }
                pos += 1 + usize::from(len);
            }
            0xc0..=0xff => {
                let lo = *msg.get(pos + 1).ok_or(WireError::Truncated)?;
                let target = usize::from(u16::from_be_bytes([len & 0x3f, lo]));
                if target >= limit {
                    return Err(WireError::BadPointer);
                }
                end.get_or_insert(pos + 2);
                limit = target;
                pos = target;
            }
            _ => return Err(WireError::Name(NameError::BadWire)),
        }
    }
}

/// RDATA of `rtype` at `msg[start..start + len]` with compressed names expanded, for the types
/// whose RDATA names may be compressed (RFC 3597 §4: NS, CNAME, SOA, PTR, MX; DNAME and SRV are
/// accepted too, as some servers compress them). `None` for other types (copied verbatim) or
/// if the names do not end inside the RDATA.
fn decompress_rdata(rtype: RrType, msg: &[u8], start: usize, len: usize) -> Option<Vec<u8>> {
    let (prefix, names, suffix) = match rtype {
        RrType::NS | RrType::CNAME | RrType::PTR | RrType::DNAME => (0, 1, 0),
        RrType::MX => (2, 1, 0),
        RrType::SRV => (6, 1, 0),
        RrType::SOA => (0, 2, 20),
        _ => return None,
    };
    let end = start + len;
    let mut out = msg.get(start..start + prefix)?.to_vec();
    let mut pos = start + prefix;
    for _ in 0..names {
        let (name, next) = read_name(msg, pos).ok()?;
        if next > end {
            return None;
        }
        out.extend_from_slice(name.as_wire());
        pos = next;
    }
    if end - pos != suffix {
        return None;
    }
    out.extend_from_slice(&msg[pos..end]);
    Some(out)
}

/// Length of the fixed part of a compact record after its TYPE: FRAGSIZE u16, CURIDX u32,
/// RRSIZE u32, RRID u16 (ARRF, `frag::arrf`).
const COMPACT_FIXED: usize = 12;

fn read_record(
    r: &mut Reader<'_>,
    compact: Option<RrType>,
    with_data: bool,
) -> Result<Record, WireError> {
    let owner = r.name()?;
    let rtype = RrType(r.u16()?);
    if compact == Some(rtype) && owner.is_root() {
        // Compact form: no CLASS, TTL or RDLENGTH; FRAGSIZE bytes of data in responses only.
        let start = r.pos;
        let size = usize::from(r.u16()?);
        r.take(COMPACT_FIXED - 2 + if with_data { size } else { 0 })?;
        return Ok(Record {
            owner,
            rtype,
            class: Class(0),
            ttl: 0,
            rdata: r.msg[start..r.pos].to_vec(),
        });
    }
    let class = Class(r.u16()?);
    let ttl = r.u32()?;
    let len = usize::from(r.u16()?);
    let start = r.pos;
    r.take(len)?;
    let rdata = decompress_rdata(rtype, r.msg, start, len)
        .unwrap_or_else(|| r.msg[start..start + len].to_vec());
    Ok(Record {
        owner,
        rtype,
        class,
        ttl,
        rdata,
    })
}

impl Message {
    /// Parses a whole message.
    ///
    /// # Errors
    /// [`WireError`] for truncation, bad names or pointers, a misplaced or repeated OPT, or
    /// trailing bytes.
    pub fn parse(msg: &[u8]) -> Result<Message, WireError> {
        Message::parse_with(msg, None)
    }

    /// Parses a whole message in which records of type `compact` owned by the root use ARRF's
    /// compact RRFRAG form (`NAME=0 | TYPE | FRAGSIZE u16 | CURIDX u32 | RRSIZE u32 | RRID u16`
    /// followed, in responses (QR=1) only, by FRAGSIZE data bytes; Goertzen & Stebila 2022,
    /// `docs/pqc-dnssec-wire.md` §3). Such a record is returned with CLASS 0, TTL 0 and the
    /// bytes after TYPE as RDATA; `frag::arrf` interprets them.
    ///
    /// # Errors
    /// As [`Message::parse`].
    pub fn parse_with(msg: &[u8], compact: Option<RrType>) -> Result<Message, WireError> {
        let mut r = Reader { msg, pos: 0 };
        let id = r.u16()?;
        let flags = r.u16()?;
        let counts = [r.u16()?, r.u16()?, r.u16()?, r.u16()?];
        let mut questions = Vec::with_capacity(usize::from(counts[0]).min(16));
        for _ in 0..counts[0] {
            questions.push(Question {
                qname: r.name()?,
                qtype: RrType(r.u16()?),
                qclass: Class(r.u16()?),
            });
        }
        let mut sections: [Vec<Record>; 3] = Default::default();
        let mut edns = None;
        for (i, section) in sections.iter_mut().enumerate() {
            // Each record takes at least 11 bytes: bound the reservation by what is left.
            let cap = usize::from(counts[i + 1]).min((msg.len() - r.pos) / 11);
            section.reserve(cap);
            for _ in 0..counts[i + 1] {
                let rec = read_record(&mut r, compact, flags & FLAG_QR != 0)?;
                if rec.rtype == RrType::OPT {
                    if i != 2 || edns.is_some() || !rec.owner.is_root() {
                        return Err(WireError::BadOpt);
                    }
                    edns = Some(parse_opt(&rec)?);
                    continue;
                }
                section.push(rec);
            }
        }
        if r.pos != msg.len() {
            return Err(WireError::Trailing);
        }
        let [answers, authority, additional] = sections;
        Ok(Message {
            id,
            flags,
            questions,
            answers,
            authority,
            additional,
            edns,
        })
    }

    /// The full RCODE: header low 4 bits plus the OPT extension (RFC 6891 §6.1.3).
    pub fn rcode(&self) -> u16 {
        let ext = self.edns.as_ref().map_or(0, |e| u16::from(e.ext_rcode));
        ext << 4 | (self.flags & 0xf)
    }

    /// True if the header flag `flag` is set.
    pub fn has_flag(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// A query: one question, RD as given, and an OPT record with `udp_payload` and DO when
    /// `edns` is set.
    pub fn query(
        id: u16,
        question: Question,
        recursion_desired: bool,
        edns: Option<Edns>,
    ) -> Message {
        Message {
            id,
            flags: if recursion_desired { FLAG_RD } else { 0 },
            questions: vec![question],
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
            edns,
        }
    }

    /// Encodes the message without name compression.
    pub fn to_wire(&self) -> Vec<u8> {
        self.to_wire_with(None)
    }

    /// Encodes the message without name compression, writing root-owned records of type
    /// `compact` in ARRF's compact form (root, TYPE, then RDATA as [`Message::parse_with`]
    /// returns it: no CLASS, TTL or RDLENGTH).
    pub fn to_wire_with(&self, compact: Option<RrType>) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend(self.id.to_be_bytes());
        out.extend(self.flags.to_be_bytes());
        let ar = self.additional.len() + usize::from(self.edns.is_some());
        for n in [
            self.questions.len(),
            self.answers.len(),
            self.authority.len(),
            ar,
        ] {
            out.extend((n as u16).to_be_bytes());
        }
        for q in &self.questions {
            out.extend_from_slice(q.qname.as_wire());
            out.extend(q.qtype.0.to_be_bytes());
            out.extend(q.qclass.0.to_be_bytes());
        }
        for r in self
            .answers
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
        {
            if compact == Some(r.rtype) && r.owner.is_root() {
                out.push(0);
                out.extend(r.rtype.0.to_be_bytes());
                out.extend_from_slice(&r.rdata);
            } else {
                r.write_wire(&mut out);
            }
        }
        if let Some(e) = &self.edns {
            out.push(0);
            out.extend(RrType::OPT.0.to_be_bytes());
            out.extend(e.udp_payload.to_be_bytes());
            out.push(e.ext_rcode);
            out.push(e.version);
            out.extend(e.flags.to_be_bytes());
            let len: usize = e.options.iter().map(|(_, d)| 4 + d.len()).sum();
            out.extend((len as u16).to_be_bytes());
            for (code, data) in &e.options {
                out.extend(code.to_be_bytes());
                out.extend((data.len() as u16).to_be_bytes());
                out.extend_from_slice(data);
            }
        }
        out
    }
}

fn parse_opt(rec: &Record) -> Result<Edns, WireError> {
    let mut options = Vec::new();
    let mut rest = rec.rdata.as_slice();
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(WireError::BadOpt);
        }
        let code = u16::from_be_bytes([rest[0], rest[1]]);
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        let data = rest.get(4..4 + len).ok_or(WireError::BadOpt)?;
        options.push((code, data.to_vec()));
        rest = &rest[4 + len..];
    }
    Ok(Edns {
        udp_payload: rec.class.0,
        ext_rcode: (rec.ttl >> 24) as u8,
        version: (rec.ttl >> 16) as u8,
        flags: rec.ttl as u16,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str, t: RrType) -> Question {
        Question {
            qname: name.parse().unwrap(),
            qtype: t,
            qclass: Class::IN,
        }
    }

    #[test]
    fn query_round_trips_with_edns() {
        let edns = Edns {
            udp_payload: 1232,
            ext_rcode: 0,
            version: 0,
            flags: EDNS_DO,
            options: vec![(65001, vec![1, 2])],
        };
        let m = Message::query(7, q("www.example.", RrType::A), false, Some(edns));
        let parsed = Message::parse(&m.to_wire()).unwrap();
        assert_eq!(parsed, m);
    }

    #[test]
    fn compressed_names_in_owner_and_rdata_are_expanded() {
        // Header, question www.example. A, answer: owner = pointer to 12, CNAME -> mail.<ptr 16>.
        let mut msg = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        msg.extend(b"\x03www\x07example\x00\x00\x01\x00\x01");
        msg.extend([0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 7]);
        msg.extend(b"\x04mail\xc0\x10");
        let m = Message::parse(&msg).unwrap();
        assert_eq!(m.answers[0].owner, "www.example.".parse().unwrap());
        assert_eq!(
            m.answers[0].rdata,
            "mail.example.".parse::<Name>().unwrap().as_wire()
        );
        assert!(m.has_flag(FLAG_AA));
    }

    #[test]
    fn hostile_messages_are_errors() {
        let header = |qd: u8| vec![0, 1, 0, 0, 0, qd, 0, 0, 0, 0, 0, 0];
        assert_eq!(Message::parse(&[0, 1, 2]), Err(WireError::Truncated));
        // Pointer to itself.
        let mut m = header(1);
        m.extend([0xc0, 12, 0, 1, 0, 1]);
        assert_eq!(Message::parse(&m), Err(WireError::BadPointer));
        // Forward pointer.
        let mut m = header(1);
        m.extend([0xc0, 20, 0, 1, 0, 1, 0, 0]);
        assert_eq!(Message::parse(&m), Err(WireError::BadPointer));
        // Counts larger than the data.
        let mut m = header(1);
        m[7] = 200;
        m.extend(b"\x00\x00\x01\x00\x01");
        assert_eq!(Message::parse(&m), Err(WireError::Truncated));
        // Trailing garbage.
        let mut m = header(1);
        m.extend(b"\x00\x00\x01\x00\x01\xff");
        assert_eq!(Message::parse(&m), Err(WireError::Trailing));
    }
}

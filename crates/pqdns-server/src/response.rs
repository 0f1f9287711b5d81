//! Building a response into a caller-owned buffer with a size budget: header and question
//! (RFC 1035 §4.1), name compression (RFC 1035 §4.1.4), the EDNS(0) OPT record (RFC 6891
//! §6.1.2, §7) and truncation that drops whole RRsets (RFC 2181 §9).
//!
//! Room for the OPT record is reserved before any record is written, so an OPT always fits.
//! An RRset and its RRSIGs are written as one unit: if the unit overflows the budget, the bytes
//! are rolled back and the caller decides whether the loss sets TC.
//!
//! Owner names are compressed against earlier names; names inside NS, CNAME, PTR, MX and SOA
//! RDATA are compressed too (RFC 3597 §4 allows it only for these RFC 1035 types).

use pqdns_core::{Name, RrType};

use crate::query::{Header, EDNS_FLAG_DO, FLAG_CD, FLAG_QR, FLAG_RD, FLAG_TC};

/// Smallest UDP response size every client accepts, in bytes (RFC 1035 §4.2.1).
pub const MIN_UDP_PAYLOAD: u16 = 512;
/// Size of an OPT record without options, in bytes (RFC 6891 §6.1.2).
pub const OPT_LEN: usize = 11;
/// Names remembered for compression per response; later names are written uncompressed.
pub const MAX_COMPRESSION_ENTRIES: usize = 48;
/// Compression pointers can reach only the first 16 KiB of a message (14-bit offset).
const MAX_POINTER_TARGET: usize = 0x3fff;

/// Response codes (RFC 1035 §4.1.1, RFC 6891 §9 for the extended BADVERS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rcode(pub u16);

impl Rcode {
    /// No error.
    pub const NOERROR: Rcode = Rcode(0);
    /// Format error: the query could not be interpreted.
    pub const FORMERR: Rcode = Rcode(1);
    /// Server failure.
    pub const SERVFAIL: Rcode = Rcode(2);
    /// The name does not exist.
    pub const NXDOMAIN: Rcode = Rcode(3);
    /// The opcode is not implemented.
    pub const NOTIMP: Rcode = Rcode(4);
    /// Refused by policy (e.g. not authoritative for the name).
    pub const REFUSED: Rcode = Rcode(5);
    /// Not authoritative for the zone of a transfer request (RFC 2136 §2.2, RFC 5936 §2.2.1).
    pub const NOTAUTH: Rcode = Rcode(9);
    /// Unsupported EDNS version (RFC 6891 §9); needs an OPT to carry its upper bits.
    pub const BADVERS: Rcode = Rcode(16);

    /// The mnemonic, for logs and metrics.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "NOERROR",
            1 => "FORMERR",
            2 => "SERVFAIL",
            3 => "NXDOMAIN",
            4 => "NOTIMP",
            5 => "REFUSED",
            9 => "NOTAUTH",
            16 => "BADVERS",
            _ => "OTHER",
        }
    }
}

/// Message sections that hold records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Answer section.
    Answer = 0,
    /// Authority section.
    Authority = 1,
    /// Additional section.
    Additional = 2,
}

/// The unit being written did not fit in the budget and was rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// A position to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    counts: [u16; 3],
    names: usize,
}

/// The OPT record to append (RFC 6891 §6.1.2–§6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptOut {
    /// Our UDP payload size, in bytes.
    pub udp_payload: u16,
    /// Echo of the DO bit (RFC 3225 §3).
    pub dnssec_ok: bool,
}

/// Writes one response message into `buf[base..]`.
pub struct ResponseWriter<'b> {
    buf: &'b mut Vec<u8>,
    base: usize,
    /// Largest message length allowed for records, in bytes (OPT room already subtracted).
    budget: usize,
    counts: [u16; 3],
    /// Offsets (from `base`) of names and name suffixes already in the message.
    names: [u16; MAX_COMPRESSION_ENTRIES],
    name_count: usize,
    section: Section,
    flags: u16,
    opt: Option<OptOut>,
}

impl<'b> ResponseWriter<'b> {
    /// Starts a response to `header`: truncates `buf` to `base`, writes the header with QR set
    /// and RD/CD copied, and, if `question` is given, the question section.
    ///
    /// `limit` is the largest message the transport allows, in bytes (512 to 65535); when `opt`
    /// is set, 11 bytes of it are kept for the OPT record.
    pub fn new(
        buf: &'b mut Vec<u8>,
        base: usize,
        limit: usize,
        header: Header,
        question: Option<(&Name, RrType, u16)>,
        opt: Option<OptOut>,
    ) -> ResponseWriter<'b> {
        buf.truncate(base);
        let flags = FLAG_QR | (header.flags & (0x7800 | FLAG_RD | FLAG_CD));
        buf.extend(header.id.to_be_bytes());
        buf.extend([0; 10]);
        let mut w = ResponseWriter {
            buf,
            base,
            budget: limit.saturating_sub(if opt.is_some() { OPT_LEN } else { 0 }),
            counts: [0; 3],
            names: [0; MAX_COMPRESSION_ENTRIES],
            name_count: 0,
            section: Section::Answer,
            flags,
            opt,
        };
        if let Some((qname, qtype, qclass)) = question {
            w.write_name(qname.as_wire());
            w.buf.extend(qtype.0.to_be_bytes());
            w.buf.extend(qclass.to_be_bytes());
            w.buf[base + 5] = 1;
        }
        w
    }

    /// Sets header flag bits (AA, TC).
    pub fn set_flag(&mut self, flag: u16) {
        self.flags |= flag;
    }

    /// Clears AA (a referral is not an authoritative answer, RFC 1034 §4.3.2 step 3b).
    pub fn clear_aa(&mut self) {
        self.flags &= !crate::query::FLAG_AA;
    }

    /// True once TC has been set.
    pub fn truncated(&self) -> bool {
        self.flags & FLAG_TC != 0
    }

    /// Records in `section` so far.
    pub fn count(&self, section: Section) -> u16 {
        self.counts[section as usize]
    }

    /// Current position for [`ResponseWriter::rollback`].
    pub fn mark(&self) -> Mark {
        Mark {
            len: self.buf.len(),
            counts: self.counts,
            names: self.name_count,
        }
    }

    /// Drops everything written since `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        self.buf.truncate(mark.len);
        self.counts = mark.counts;
        self.name_count = mark.names;
    }

    /// Checks the budget after a unit was written since `mark`; rolls it back if over.
    ///
    /// # Errors
    /// [`Full`] if the message is now longer than the budget (the unit is gone).
    pub fn commit(&mut self, mark: Mark) -> Result<(), Full> {
        if self.buf.len() - self.base > self.budget {
            self.rollback(mark);
            return Err(Full);
        }
        Ok(())
    }

    /// Appends one record to `section` (sections must be written in order). Call
    /// [`ResponseWriter::commit`] after the unit's last record.
    pub fn record(
        &mut self,
        section: Section,
        owner: &[u8],
        rtype: RrType,
        ttl: u32,
        rdata: &[u8],
    ) {
        debug_assert!(
            section as usize >= self.section as usize,
            "sections out of order"
        );
        self.section = section;
        self.write_name(owner);
        self.buf.extend(rtype.0.to_be_bytes());
        self.buf.extend(1u16.to_be_bytes());
        self.buf.extend(ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend([0, 0]);
        self.write_rdata(rtype, rdata);
        let rdlen = (self.buf.len() - len_at - 2).min(usize::from(u16::MAX)) as u16;
        self.buf[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        self.counts[section as usize] = self.counts[section as usize].saturating_add(1);
    }

    /// Finishes the message: the OPT record (with the upper rcode bits), counts, flags, rcode.
    /// Returns the message length in bytes (from `base`).
    pub fn finish(self, rcode: Rcode) -> usize {
        let mut arcount = self.counts[2];
        if let Some(opt) = self.opt {
            self.buf.push(0);
            self.buf.extend(RrType::OPT.0.to_be_bytes());
            self.buf.extend(opt.udp_payload.to_be_bytes());
            let ext = (rcode.0 >> 4) as u8;
            let flags = if opt.dnssec_ok { EDNS_FLAG_DO } else { 0 };
            self.buf.extend([ext, 0]);
            self.buf.extend(flags.to_be_bytes());
            self.buf.extend([0, 0]);
            arcount += 1;
        }
        let b = self.base;
        let flags = self.flags | (rcode.0 & 0xf);
        self.buf[b + 2..b + 4].copy_from_slice(&flags.to_be_bytes());
        self.buf[b + 6..b + 8].copy_from_slice(&self.counts[0].to_be_bytes());
        self.buf[b + 8..b + 10].copy_from_slice(&self.counts[1].to_be_bytes());
        self.buf[b + 10..b + 12].copy_from_slice(&arcount.to_be_bytes());
        self.buf.len() - b
    }

    /// Writes RDATA, compressing the embedded names of the RFC 1035 types.
    fn write_rdata(&mut self, rtype: RrType, rdata: &[u8]) {
        let (fixed_before, names) = match rtype {
            RrType::NS | RrType::CNAME | RrType::PTR => (0, 1),
            RrType::MX => (2, 1),
            RrType::SOA => (0, 2),
            _ => (0, 0),
        };
        if names == 0 || rdata.len() < fixed_before {
            self.buf.extend_from_slice(rdata);
            return;
        }
        let mut pos = fixed_before;
        let mut spans = [(0, 0); 2];
        for span in spans.iter_mut().take(names) {
            match uncompressed_name_len(&rdata[pos..]) {
                Some(len) => {
                    *span = (pos, pos + len);
                    pos += len;
                }
                None => {
                    self.buf.extend_from_slice(rdata);
                    return;
                }
            }
        }
        self.buf.extend_from_slice(&rdata[..fixed_before]);
        for &(start, end) in spans.iter().take(names) {
            self.write_name(&rdata[start..end]);
        }
        self.buf.extend_from_slice(&rdata[pos..]);
    }

    /// Writes an uncompressed wire-format name, replacing its longest already-written suffix
    /// with a pointer, and remembers the new suffixes.
    fn write_name(&mut self, wire: &[u8]) {
        let mut start = 0;
        while start < wire.len() && wire[start] != 0 {
            let suffix = &wire[start..];
            if let Some(&offset) = self.names[..self.name_count]
                .iter()
                .find(|&&off| name_at_equals(&self.buf[self.base..], usize::from(off), suffix))
            {
                self.remember_labels(&wire[..start]);
                self.buf.extend_from_slice(&wire[..start]);
                self.buf.extend((0xc000 | offset).to_be_bytes());
                return;
            }
            start += 1 + usize::from(wire[start]);
        }
        self.remember_labels(wire);
        self.buf.extend_from_slice(wire);
    }

    /// Remembers the offsets the labels of `prefix` will have once appended at the end.
    fn remember_labels(&mut self, prefix: &[u8]) {
        let at = self.buf.len() - self.base;
        let mut i = 0;
        while i < prefix.len() && prefix[i] != 0 {
            if self.name_count == MAX_COMPRESSION_ENTRIES || at + i > MAX_POINTER_TARGET {
                return;
            }
            self.names[self.name_count] = (at + i) as u16;
            self.name_count += 1;
            i += 1 + usize::from(prefix[i]);
        }
    }
}

/// Length of the uncompressed name at the start of `data`, if well formed.
fn uncompressed_name_len(data: &[u8]) -> Option<usize> {
    let mut pos = 0;
    loop {
        let len = usize::from(*data.get(pos)?);
        if len > 63 {
            return None;
        }
        pos += 1 + len;
        if pos > 255 || pos > data.len() {
            return None;
        }
        if len == 0 {
            return Some(pos);
        }
    }
}

/// True if the (possibly compressed) name at `msg[off..]` equals the uncompressed `wire`,
/// ignoring ASCII case. Only reads names this writer wrote, so pointers go backwards.
fn name_at_equals(msg: &[u8], mut off: usize, mut wire: &[u8]) -> bool {
    for _ in 0..=crate::query::MAX_POINTER_JUMPS {
        let Some(&b) = msg.get(off) else { return false };
        if b & 0xc0 == 0xc0 {
            let Some(&low) = msg.get(off + 1) else {
                return false;
            };
            off = usize::from(u16::from_be_bytes([b & 0x3f, low]));
            continue;
        }
        let len = usize::from(b);
        let (Some(label), Some(expected)) = (msg.get(off..off + 1 + len), wire.get(..1 + len))
        else {
            return false;
        };
        if !label.eq_ignore_ascii_case(expected) {
            return false;
        }
        if len == 0 {
            return true;
        }
        wire = &wire[1 + len..];
        off += 1 + len;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::parse;

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn compresses_owner_and_rdata_names() {
        let mut buf = Vec::new();
        let header = Header {
            id: 7,
            flags: 0x0100,
        };
        let q = name("www.example.com.");
        let mut w = ResponseWriter::new(&mut buf, 0, 512, header, Some((&q, RrType::A, 1)), None);
        let m = w.mark();
        w.record(
            Section::Answer,
            q.as_wire(),
            RrType::CNAME,
            60,
            name("web.example.com.").as_wire(),
        );
        w.commit(m).unwrap();
        let len = w.finish(Rcode::NOERROR);
        assert_eq!(len, buf.len());
        // Header 12 + question 17+4; owner is a 2-byte pointer; RDATA "web" + pointer = 6.
        assert_eq!(buf.len(), 12 + 21 + 2 + 10 + 6);
        assert_eq!(&buf[33..35], &[0xc0, 12]);
        assert_eq!(&buf[45..51], &[3, b'w', b'e', b'b', 0xc0, 16]);
        assert_eq!(u16::from_be_bytes([buf[2], buf[3]]), 0x8100);
    }

    #[test]
    fn overflow_rolls_back_the_unit_and_opt_still_fits() {
        let mut buf = vec![0xaa, 0xbb];
        let header = Header { id: 1, flags: 0 };
        let q = name("example.");
        let opt = OptOut {
            udp_payload: 1232,
            dnssec_ok: true,
        };
        let mut w = ResponseWriter::new(
            &mut buf,
            2,
            100,
            header,
            Some((&q, RrType::TXT, 1)),
            Some(opt),
        );
        let m = w.mark();
        w.record(Section::Answer, q.as_wire(), RrType::TXT, 1, &[10; 40]);
        assert!(w.commit(m).is_ok());
        let m = w.mark();
        w.record(Section::Answer, q.as_wire(), RrType::TXT, 1, &[10; 40]);
        assert_eq!(w.commit(m), Err(Full));
        assert_eq!(w.count(Section::Answer), 1);
        w.set_flag(FLAG_TC);
        let len = w.finish(Rcode::BADVERS);
        assert!(len <= 100);
        assert_eq!(&buf[..2], &[0xaa, 0xbb]);
        let msg = &buf[2..];
        // ARCOUNT 1 (the OPT), TC set, low rcode bits 0, extended rcode 1 in the OPT TTL.
        assert_eq!(msg[11], 1);
        assert_eq!(msg[2] & 0x02, 0x02);
        assert_eq!(msg[3] & 0x0f, 0);
        let opt_at = msg.len() - OPT_LEN;
        assert_eq!(&msg[opt_at..opt_at + 7], &[0, 0, 41, 0x04, 0xd0, 1, 0]);
    }

    #[test]
    fn output_is_parseable_wire_format() {
        // The question we write parses back (our parser follows our pointers).
        let mut buf = Vec::new();
        let q = name("a.b.example.");
        let header = Header { id: 9, flags: 0 };
        let w = ResponseWriter::new(&mut buf, 0, 512, header, Some((&q, RrType::MX, 1)), None);
        w.finish(Rcode::NOERROR);
        buf[2] &= 0x7f; // clear QR so it parses as a query
        assert_eq!(parse(&buf).unwrap().qname, q);
    }
}

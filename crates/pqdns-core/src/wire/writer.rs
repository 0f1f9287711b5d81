//! Writing a message into a caller-owned buffer with a size budget (RFC 1035 §4.1): header
//! and question, name compression (RFC 1035 §4.1.4), the EDNS(0) OPT record with its options
//! (RFC 6891 §6.1.2, §7), and truncation that drops whole RRsets (RFC 2181 §9).
//!
//! Room for the OPT record and for every option added with [`MessageWriter::add_option`] is
//! reserved from the budget when it is asked for, so they always fit at [`MessageWriter::finish`].
//! A unit (an RRset and its RRSIGs) is written between [`MessageWriter::mark`] and
//! [`MessageWriter::commit`]: if it overflows, its bytes are rolled back and the caller
//! decides whether the loss sets TC.
//!
//! Owner names are compressed against earlier names; names inside RDATA only where the RDATA
//! layouts of `crate::rdata` allow it (RFC 3597 §4: the RFC 1035 types NS, CNAME, SOA, PTR and
//! MX). The writer allocates nothing beyond the caller's buffer.

use super::edns::{Edns, OPT_LEN};
use super::record::Section;
use super::{Header, Rcode, FLAG_TC, HEADER_LEN};
use crate::rdata::{field_len, is_well_formed, layout};
use crate::rr::{Class, RrType};

/// Names remembered for compression per message; later names are written uncompressed.
pub const MAX_COMPRESSION_ENTRIES: usize = 48;
/// Options [`MessageWriter::add_option`] takes per message (besides those of an [`Edns`]).
pub const MAX_OPTIONS: usize = 8;
/// Compression pointers can reach only the first 16 KiB of a message (14-bit offset).
const MAX_POINTER_TARGET: usize = 0x3fff;

/// What was asked to be written does not fit the budget (or the option table), and was not
/// written or was rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("does not fit in the message")]
pub struct Full;

/// A position to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    counts: [u16; 4],
    names: usize,
}

/// The OPT record to append at [`MessageWriter::finish`].
#[derive(Clone, Copy, Debug)]
struct Opt<'o> {
    udp_payload: u16,
    version: u8,
    flags: u16,
    /// Options of an [`Edns`], written first.
    edns: &'o [(u16, Vec<u8>)],
}

/// Writes one message into `buf[base..]`.
pub struct MessageWriter<'b, 'o> {
    buf: &'b mut Vec<u8>,
    base: usize,
    /// Largest message length, bytes.
    limit: usize,
    /// Bytes reserved for the OPT record and its options.
    reserved: usize,
    counts: [u16; 4],
    compress: bool,
    /// Offsets (from `base`) of names and name suffixes already in the message.
    names: [u16; MAX_COMPRESSION_ENTRIES],
    name_count: usize,
    /// Questions are done once a record is written; then sections only advance.
    section: usize,
    flags: u16,
    opt: Option<Opt<'o>>,
    options: [(u16, &'o [u8]); MAX_OPTIONS],
    option_count: usize,
}

impl<'b, 'o> MessageWriter<'b, 'o> {
    /// Starts a message with `header` (the flags as given; counts are filled in by
    /// [`MessageWriter::finish`]): truncates `buf` to `base` and writes the header there. The
    /// bytes before `base` are left alone (e.g. a TCP length prefix). `limit` is the largest
    /// message allowed, in bytes.
    pub fn new(buf: &'b mut Vec<u8>, base: usize, limit: usize, header: Header) -> Self {
        buf.truncate(base);
        buf.extend(header.id.to_be_bytes());
        buf.extend([0; HEADER_LEN - 2]);
        MessageWriter {
            buf,
            base,
            limit,
            reserved: 0,
            counts: [0; 4],
            compress: true,
            names: [0; MAX_COMPRESSION_ENTRIES],
            name_count: 0,
            section: 0,
            flags: header.flags,
            opt: None,
            options: [(0, &[]); MAX_OPTIONS],
            option_count: 0,
        }
    }

    /// Starts the response to a query with header `query` ([`Header::response`]: QR set, ID,
    /// OPCODE, RD and CD copied).
    pub fn response(buf: &'b mut Vec<u8>, base: usize, limit: usize, query: Header) -> Self {
        MessageWriter::new(buf, base, limit, query.response())
    }

    /// Turns name compression off for the rest of the message (names are written as given).
    pub fn without_compression(mut self) -> Self {
        self.compress = false;
        self
    }

    /// Appends a question (RFC 1035 §4.1.2); questions come before any record.
    ///
    /// # Errors
    /// [`Full`] if it does not fit (nothing is written).
    pub fn question(&mut self, qname: &[u8], qtype: RrType, qclass: Class) -> Result<(), Full> {
        debug_assert!(self.section == 0, "questions after records");
        let mark = self.mark();
        self.write_name(qname);
        self.buf.extend(qtype.0.to_be_bytes());
        self.buf.extend(qclass.0.to_be_bytes());
        self.counts[0] = self.counts[0].saturating_add(1);
        self.commit(mark)
    }

    /// Reserves room for an OPT record (RFC 6891 §6.1.2) with `udp_payload` (bytes), EDNS
    /// `version` and `flags` (DO = [`super::EDNS_DO`]); the extended RCODE comes from
    /// [`MessageWriter::finish`]. Replaces an earlier OPT and keeps its options.
    ///
    /// # Errors
    /// [`Full`] if its 11 bytes do not fit after what is written.
    pub fn set_opt(&mut self, udp_payload: u16, version: u8, flags: u16) -> Result<(), Full> {
        let edns = match self.opt {
            Some(o) => o.edns,
            None => {
                self.reserve(OPT_LEN)?;
                &[]
            }
        };
        self.opt = Some(Opt {
            udp_payload,
            version,
            flags,
            edns,
        });
        Ok(())
    }

    /// Reserves the OPT record of `edns` with all its options (its `ext_rcode` is ignored:
    /// [`MessageWriter::finish`] writes the RCODE's).
    ///
    /// # Errors
    /// [`Full`] if the record does not fit after what is written (nothing is reserved).
    pub fn set_edns(&mut self, edns: &'o Edns) -> Result<(), Full> {
        let old = self.opt.map_or(0, |o| OPT_LEN + options_len(o.edns));
        let new = OPT_LEN + options_len(&edns.options);
        self.reserve(new.saturating_sub(old))?;
        self.reserved -= old.saturating_sub(new);
        self.opt = Some(Opt {
            udp_payload: edns.udp_payload,
            version: edns.version,
            flags: edns.flags,
            edns: &edns.options,
        });
        Ok(())
    }

    /// Adds an EDNS option (code, data) to the OPT record, reserving its 4 + `data.len()`
    /// bytes. An OPT record must have been set ([`MessageWriter::set_opt`]).
    ///
    /// # Errors
    /// [`Full`] if there is no OPT record, the option does not fit after what is written, or
    /// [`MAX_OPTIONS`] options were added already.
    pub fn add_option(&mut self, code: u16, data: &'o [u8]) -> Result<(), Full> {
        if self.opt.is_none() || self.option_count == MAX_OPTIONS {
            return Err(Full);
        }
        self.reserve(4 + data.len())?;
        self.options[self.option_count] = (code, data);
        self.option_count += 1;
        Ok(())
    }

    /// True if an OPT record will be written.
    pub fn has_opt(&self) -> bool {
        self.opt.is_some()
    }

    fn reserve(&mut self, n: usize) -> Result<(), Full> {
        if self.used() + self.reserved + n > self.limit {
            return Err(Full);
        }
        self.reserved += n;
        Ok(())
    }

    /// Bytes written so far (from `base`).
    pub fn used(&self) -> usize {
        self.buf.len() - self.base
    }

    /// Sets header flag bits (e.g. AA, TC).
    pub fn set_flag(&mut self, flag: u16) {
        self.flags |= flag;
    }

    /// Clears header flag bits (e.g. AA for a referral, RFC 1034 §4.3.2 step 3b).
    pub fn clear_flag(&mut self, flag: u16) {
        self.flags &= !flag;
    }

    /// True once TC has been set.
    pub fn truncated(&self) -> bool {
        self.flags & FLAG_TC != 0
    }

    /// Records in `section` so far (the OPT record is not counted).
    pub fn count(&self, section: Section) -> u16 {
        self.counts[section as usize + 1]
    }

    /// Current position for [`MessageWriter::rollback`].
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
    /// [`Full`] if the message (with the reserved OPT) is now longer than the limit; the unit
    /// is gone.
    pub fn commit(&mut self, mark: Mark) -> Result<(), Full> {
        if self.used() + self.reserved > self.limit {
            self.rollback(mark);
            return Err(Full);
        }
        Ok(())
    }

    /// Appends one record to `section` (sections are written in order). Call
    /// [`MessageWriter::commit`] after the unit's last record.
    ///
    /// Returns the offset of the record's TTL field from `base`, for callers that lower TTLs
    /// when they serve the message again (a cache) without parsing it; the offset is only
    /// meaningful while the record is not rolled back.
    pub fn record(
        &mut self,
        section: Section,
        owner: &[u8],
        rtype: RrType,
        class: Class,
        ttl: u32,
        rdata: &[u8],
    ) -> usize {
        self.enter(section);
        self.write_name(owner);
        self.buf.extend(rtype.0.to_be_bytes());
        self.buf.extend(class.0.to_be_bytes());
        let ttl_at = self.used();
        self.buf.extend(ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend([0, 0]);
        self.write_rdata(rtype, rdata);
        let rdlen = (self.buf.len() - len_at - 2).min(usize::from(u16::MAX)) as u16;
        self.buf[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        let i = section as usize + 1;
        self.counts[i] = self.counts[i].saturating_add(1);
        ttl_at
    }

    /// Appends a record in ARRF's compact RRFRAG form (`crate::frag::arrf`): root owner,
    /// `rtype`, then `body` as is (no CLASS, TTL or RDLENGTH).
    pub fn compact_record(&mut self, section: Section, rtype: RrType, body: &[u8]) {
        self.enter(section);
        self.buf.push(0);
        self.buf.extend(rtype.0.to_be_bytes());
        self.buf.extend_from_slice(body);
        let i = section as usize + 1;
        self.counts[i] = self.counts[i].saturating_add(1);
    }

    fn enter(&mut self, section: Section) {
        let i = section as usize + 1;
        debug_assert!(i >= self.section, "sections out of order");
        self.section = i;
    }

    /// Finishes the message: the OPT record (with the RCODE's upper bits), counts, flags and
    /// the RCODE's low bits. Returns the message length in bytes (from `base`).
    pub fn finish(self, rcode: Rcode) -> usize {
        let mut arcount = self.counts[3];
        if let Some(opt) = self.opt {
            let extra = &self.options[..self.option_count];
            let rdlen =
                options_len(opt.edns) + extra.iter().map(|(_, d)| 4 + d.len()).sum::<usize>();
            self.buf.push(0);
            self.buf.extend(RrType::OPT.0.to_be_bytes());
            self.buf.extend(opt.udp_payload.to_be_bytes());
            self.buf.extend([rcode.extended(), opt.version]);
            self.buf.extend(opt.flags.to_be_bytes());
            self.buf
                .extend((rdlen.min(usize::from(u16::MAX)) as u16).to_be_bytes());
            let all = opt.edns.iter().map(|(c, d)| (*c, d.as_slice()));
            for (code, data) in all.chain(extra.iter().copied()) {
                self.buf.extend(code.to_be_bytes());
                self.buf.extend((data.len() as u16).to_be_bytes());
                self.buf.extend_from_slice(data);
            }
            arcount = arcount.saturating_add(1);
        }
        let b = self.base;
        let flags = (self.flags & !0xf) | rcode.low();
        self.buf[b + 2..b + 4].copy_from_slice(&flags.to_be_bytes());
        for (i, n) in [self.counts[0], self.counts[1], self.counts[2], arcount]
            .into_iter()
            .enumerate()
        {
            self.buf[b + 4 + 2 * i..b + 6 + 2 * i].copy_from_slice(&n.to_be_bytes());
        }
        self.buf.len() - b
    }

    /// Writes RDATA, compressing the embedded names its layout allows to be compressed.
    fn write_rdata(&mut self, rtype: RrType, rdata: &[u8]) {
        let fields = layout(rtype).filter(|fields| {
            self.compress
                && fields
                    .iter()
                    .any(|f| f.name_rule().is_some_and(|r| r.compress))
        });
        let Some(fields) = fields else {
            self.buf.extend_from_slice(rdata);
            return;
        };
        // RDATA that does not match its layout is copied as it is.
        if !is_well_formed(rtype, rdata) {
            self.buf.extend_from_slice(rdata);
            return;
        }
        let mut pos = 0;
        for &field in fields {
            // Checked above.
            let n = field_len(field, &rdata[pos..]).unwrap_or(0);
            let part = &rdata[pos..pos + n];
            if field.name_rule().is_some_and(|r| r.compress) {
                self.write_name(part);
            } else {
                self.buf.extend_from_slice(part);
            }
            pos += n;
        }
    }

    /// Writes an uncompressed wire-format name, replacing its longest already-written suffix
    /// with a pointer, and remembers the new suffixes.
    fn write_name(&mut self, wire: &[u8]) {
        if !self.compress {
            self.buf.extend_from_slice(wire);
            return;
        }
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
        let at = self.used();
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

fn options_len(options: &[(u16, Vec<u8>)]) -> usize {
    options.iter().map(|(_, d)| 4 + d.len()).sum()
}

/// True if the (possibly compressed) name at `msg[off..]` equals the uncompressed `wire`,
/// ignoring ASCII case. Only reads names this writer wrote, whose pointers go backwards; the
/// jump count bounds the loop anyway.
fn name_at_equals(msg: &[u8], mut off: usize, mut wire: &[u8]) -> bool {
    for _ in 0..=super::MAX_POINTER_JUMPS {
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
    use crate::name::Name;
    use crate::rdata::wire_from_text;
    use crate::wire::{MessageView, EDNS_DO, FLAG_QR, FLAG_RD, OPTION_COOKIE, OPTION_EDE};

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn rdata(rtype: RrType, text: &str) -> Vec<u8> {
        wire_from_text(rtype, text, None)
    }

    const QUERY: Header = Header {
        id: 7,
        flags: FLAG_RD,
    };

    #[test]
    fn compression_offsets_of_owner_and_rdata_names() {
        let mut buf = Vec::new();
        let q = name("www.example.com.");
        let mut w = MessageWriter::response(&mut buf, 0, 512, QUERY);
        w.question(q.as_wire(), RrType::A, Class::IN).unwrap();
        let m = w.mark();
        let cname = name("web.example.com.");
        w.record(
            Section::Answer,
            q.as_wire(),
            RrType::CNAME,
            Class::IN,
            60,
            cname.as_wire(),
        );
        let mx = rdata(RrType::MX, "10 mail.web.example.com.");
        w.record(
            Section::Answer,
            cname.as_wire(),
            RrType::MX,
            Class::IN,
            60,
            &mx,
        );
        w.commit(m).unwrap();
        let len = w.finish(Rcode::NOERROR);
        assert_eq!(len, buf.len());
        let mut expected = vec![0, 7, 0x81, 0x00, 0, 1, 0, 2, 0, 0, 0, 0];
        // 12: question www.example.com. A IN (offsets: www 12, example 16, com 24).
        expected.extend(b"\x03www\x07example\x03com\x00\x00\x01\x00\x01");
        // 33: owner -> 12; CNAME RDATA "web" + pointer to "example.com." at 16.
        expected.extend([0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 6]);
        expected.extend(b"\x03web\xc0\x10");
        // 51: owner -> "web..." at 45; MX 10, "mail" + pointer to 45.
        expected.extend([0xc0, 45, 0, 15, 0, 1, 0, 0, 0, 60, 0, 9, 0, 10]);
        expected.extend(b"\x04mail\xc0\x2d");
        assert_eq!(buf, expected);
        let view = MessageView::parse(&buf).unwrap();
        let answers: Vec<_> = view
            .records(Section::Answer)
            .map(|r| r.to_record())
            .collect();
        assert_eq!(answers[0].rdata, cname.as_wire());
        assert_eq!(answers[1].rdata, mx);
        assert_eq!(answers[1].owner, cname);
    }

    #[test]
    fn rdata_names_of_other_types_are_never_compressed() {
        // RFC 3597 §4: SRV, DNAME, RRSIG and NSEC names stay whole although a suffix is there.
        let mut buf = Vec::new();
        let owner = name("example.");
        let mut w = MessageWriter::response(&mut buf, 0, 4096, QUERY);
        w.question(owner.as_wire(), RrType::ANY, Class::IN).unwrap();
        let cases = [
            (RrType::SRV, rdata(RrType::SRV, "0 1 443 www.example.")),
            (RrType::DNAME, name("www.example.").as_wire().to_vec()),
            (RrType::NSEC, rdata(RrType::NSEC, "www.example. A")),
            (
                RrType::RRSIG,
                rdata(
                    RrType::RRSIG,
                    "A 13 1 60 20300101000000 20250101000000 1 example. AAAA",
                ),
            ),
        ];
        for (rtype, data) in &cases {
            w.record(Section::Answer, owner.as_wire(), *rtype, Class::IN, 1, data);
        }
        w.finish(Rcode::NOERROR);
        let view = MessageView::parse(&buf).unwrap();
        for (r, (rtype, data)) in view.records(Section::Answer).zip(&cases) {
            assert_eq!(r.rtype(), *rtype);
            assert_eq!(r.rdata_raw(), data.as_slice(), "{rtype} written whole");
        }
    }

    #[test]
    fn overflow_rolls_back_the_unit_and_the_opt_still_fits() {
        let mut buf = vec![0xaa, 0xbb];
        let q = name("example.");
        let mut w = MessageWriter::response(&mut buf, 2, 100, Header { id: 1, flags: 0 });
        w.question(q.as_wire(), RrType::TXT, Class::IN).unwrap();
        w.set_opt(1232, 0, EDNS_DO).unwrap();
        for fits in [true, false] {
            let m = w.mark();
            let txt = [10; 40];
            w.record(
                Section::Answer,
                q.as_wire(),
                RrType::TXT,
                Class::IN,
                1,
                &txt,
            );
            assert_eq!(w.commit(m).is_ok(), fits);
        }
        assert_eq!(w.count(Section::Answer), 1);
        w.set_flag(FLAG_TC);
        assert!(w.truncated());
        let len = w.finish(Rcode::BADVERS);
        assert!(len <= 100);
        assert_eq!(&buf[..2], &[0xaa, 0xbb], "bytes before the base are kept");
        let msg = &buf[2..];
        // ARCOUNT 1 (the OPT), TC set, low RCODE bits 0, extended RCODE 1 in the OPT TTL.
        assert_eq!(msg[11], 1);
        assert_eq!(msg[2], 0x82);
        assert_eq!(msg[3] & 0x0f, 0);
        let opt_at = msg.len() - OPT_LEN;
        assert_eq!(&msg[opt_at..], &[0, 0, 41, 0x04, 0xd0, 1, 0, 0x80, 0, 0, 0]);
        assert_eq!(MessageView::parse(msg).unwrap().rcode(), Rcode::BADVERS);
    }

    #[test]
    fn options_are_reserved_before_records_and_written_last() {
        let cookie = [1, 2, 3, 4, 5, 6, 7, 8];
        let ede = [0, 6, b'x'];
        let mut buf = Vec::new();
        let q = name("a.");
        let mut w = MessageWriter::response(&mut buf, 0, 64, QUERY);
        w.question(q.as_wire(), RrType::A, Class::IN).unwrap();
        assert_eq!(
            w.add_option(OPTION_COOKIE, &cookie),
            Err(Full),
            "no OPT yet"
        );
        w.set_opt(1232, 0, 0).unwrap();
        w.add_option(OPTION_COOKIE, &cookie).unwrap();
        // 12 + 7 question + 11 OPT + 12 cookie = 42 of 64: an EDE of 7 bytes still fits ...
        w.add_option(OPTION_EDE, &ede).unwrap();
        // ... leaving 15 bytes: a 16-byte A record does not, a 26-byte option does not either.
        assert_eq!(w.add_option(OPTION_EDE, &[0; 22]), Err(Full));
        let m = w.mark();
        w.record(
            Section::Answer,
            q.as_wire(),
            RrType::A,
            Class::IN,
            1,
            &[192, 0, 2, 1],
        );
        assert_eq!(w.commit(m), Err(Full));
        let len = w.finish(Rcode::SERVFAIL);
        assert_eq!(len, 12 + 7 + 11 + 12 + 7);
        let view = MessageView::parse(&buf).unwrap();
        let opt = view.opt().unwrap();
        let options: Vec<_> = opt.options().collect();
        assert_eq!(
            options,
            [(OPTION_COOKIE, &cookie[..]), (OPTION_EDE, &ede[..])]
        );
        assert_eq!(view.rcode(), Rcode::SERVFAIL);
        assert_eq!(view.header().flags, FLAG_QR | FLAG_RD | 2);
        assert!(buf.len() <= 64);
    }

    #[test]
    fn set_edns_writes_every_option_and_replaces_the_reservation() {
        let edns = Edns {
            udp_payload: 4096,
            ext_rcode: 0,
            version: 0,
            flags: EDNS_DO,
            options: (0..10).map(|i| (65001 + i, vec![i as u8])).collect(),
        };
        let mut buf = Vec::new();
        let mut w = MessageWriter::new(&mut buf, 0, 512, Header { id: 9, flags: 0 });
        w.set_opt(512, 0, 0).unwrap();
        w.set_edns(&edns).unwrap();
        w.add_option(OPTION_COOKIE, &[9; 8]).unwrap();
        let len = w.finish(Rcode::NOERROR);
        assert_eq!(len, 12 + edns.wire_len() + 12, "one OPT, reserved once");
        let opt = MessageView::parse(&buf).unwrap().opt().unwrap();
        assert_eq!(opt.udp_payload(), 4096);
        assert_eq!(opt.options().count(), 11);
        assert_eq!(opt.option(65010), Some(&[9][..]));
        assert_eq!(opt.option(OPTION_COOKIE), Some(&[9; 8][..]));
    }

    #[test]
    fn uncompressed_writer_copies_names() {
        let mut buf = Vec::new();
        let q = name("example.");
        let mut w = MessageWriter::new(&mut buf, 0, 512, QUERY).without_compression();
        w.question(q.as_wire(), RrType::NS, Class::IN).unwrap();
        w.record(
            Section::Answer,
            q.as_wire(),
            RrType::NS,
            Class::IN,
            1,
            q.as_wire(),
        );
        w.finish(Rcode::NOERROR);
        assert_eq!(buf.len(), 12 + 13 + 9 + 10 + 9);
        assert!(!buf.iter().any(|&b| b >= 0xc0), "no pointer anywhere");
    }
}

//! A whole message read in place: [`MessageView::parse`] checks everything once and keeps
//! only offsets, so reading a query allocates nothing.

use super::edns::OptView;
use super::name::{skip_name, WireName};
use super::record::{RecordView, Section};
use super::{Header, Rcode, WireError, FLAG_QR, HEADER_LEN};
use crate::rr::{Class, RrType};

/// A parsed message: header, the offsets of its sections and the OPT record. Every name,
/// record and option in it was checked by [`MessageView::parse`], so the accessors cannot
/// fail.
#[derive(Clone, Copy, Debug)]
pub struct MessageView<'a> {
    msg: &'a [u8],
    header: Header,
    counts: [u16; 4],
    /// Offsets of the question, answer, authority and additional sections.
    starts: [usize; 4],
    /// Start and end offsets of the OPT record, and its view.
    opt: Option<(usize, usize, OptView<'a>)>,
    compact: Option<RrType>,
}

/// One question (RFC 1035 §4.1.2).
#[derive(Clone, Copy, Debug)]
pub struct QuestionView<'a> {
    /// QNAME.
    pub qname: WireName<'a>,
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: Class,
}

impl<'a> MessageView<'a> {
    /// Parses and checks a whole message.
    ///
    /// # Errors
    /// [`WireError`]: a short header, truncation, a bad name or pointer, compressed RDATA that
    /// does not match its type's layout, an OPT record that is misplaced, repeated or
    /// malformed, or bytes after the last record.
    pub fn parse(msg: &'a [u8]) -> Result<MessageView<'a>, WireError> {
        MessageView::parse_with(msg, None)
    }

    /// Parses a message in which records of type `compact` owned by the root use ARRF's
    /// compact RRFRAG form (`NAME=0 | TYPE | FRAGSIZE u16 | CURIDX u32 | RRSIZE u32 | RRID u16`
    /// followed, in responses (QR=1) only, by FRAGSIZE data bytes; Goertzen & Stebila 2022,
    /// `docs/pqc-dnssec-wire.md` §3). Such a record has CLASS 0, TTL 0 and the bytes after
    /// TYPE as RDATA.
    ///
    /// # Errors
    /// As [`MessageView::parse`].
    pub fn parse_with(
        msg: &'a [u8],
        compact: Option<RrType>,
    ) -> Result<MessageView<'a>, WireError> {
        let header = Header::parse(msg).ok_or(WireError::ShortHeader)?;
        #[cfg(feature = "parse-log")]
        if !header.has(FLAG_QR) {
            super::parse_log::count_query();
        }
        let count = |i: usize| u16::from_be_bytes([msg[4 + 2 * i], msg[5 + 2 * i]]);
        let counts = [count(0), count(1), count(2), count(3)];
        let with_data = header.has(FLAG_QR);
        let mut starts = [HEADER_LEN; 4];
        let mut pos = HEADER_LEN;
        for _ in 0..counts[0] {
            pos = skip_name(msg, pos)? + 4;
            if pos > msg.len() {
                return Err(WireError::Truncated);
            }
        }
        let mut opt = None;
        for (section, &n) in counts[1..].iter().enumerate() {
            starts[section + 1] = pos;
            for _ in 0..n {
                let (record, next) = RecordView::read(msg, pos, compact, with_data)?;
                if record.rtype() == RrType::OPT {
                    if section != Section::Additional as usize || !record.owner().is_root() {
                        return Err(WireError::BadOpt);
                    }
                    if opt.is_some() {
                        return Err(WireError::DuplicateOpt);
                    }
                    let view = OptView::new(record.class().0, record.ttl(), record.rdata_raw())?;
                    opt = Some((pos, next, view));
                }
                pos = next;
            }
        }
        if pos != msg.len() {
            return Err(WireError::Trailing);
        }
        Ok(MessageView {
            msg,
            header,
            counts,
            starts,
            opt,
            compact,
        })
    }

    /// The message bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.msg
    }

    /// ID and flags.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The full RCODE: the header's 4 bits and the OPT record's upper 8 (RFC 6891 §6.1.3).
    pub fn rcode(&self) -> Rcode {
        self.header
            .rcode(self.opt.map_or(0, |(_, _, o)| o.ext_rcode()))
    }

    /// QDCOUNT, ANCOUNT, NSCOUNT and ARCOUNT as in the header (ARCOUNT includes the OPT).
    pub fn counts(&self) -> [u16; 4] {
        self.counts
    }

    /// The questions, in order.
    pub fn questions(&self) -> Questions<'a> {
        Questions {
            msg: self.msg,
            pos: HEADER_LEN,
            left: self.counts[0],
        }
    }

    /// The first question, if any.
    pub fn question(&self) -> Option<QuestionView<'a>> {
        self.questions().next()
    }

    /// The records of `section`, in order; the OPT record is left out of the additional
    /// section (see [`MessageView::opt`]).
    pub fn records(&self, section: Section) -> Records<'a> {
        let i = section as usize + 1;
        Records {
            msg: self.msg,
            pos: self.starts[i],
            left: self.counts[i],
            skip: self.opt.map(|(at, _, _)| at),
            compact: self.compact,
            with_data: self.header.has(FLAG_QR),
        }
    }

    /// The OPT record, if the message has one.
    pub fn opt(&self) -> Option<OptView<'a>> {
        self.opt.map(|(_, _, o)| o)
    }

    /// Where the question section ends (the answer section starts), in bytes from the start.
    pub fn question_end(&self) -> usize {
        self.starts[1]
    }

    /// The bytes of the OPT record (owner, type, class, TTL, RDATA), as a range of the
    /// message, if it has one.
    pub fn opt_range(&self) -> Option<std::ops::Range<usize>> {
        self.opt.map(|(start, end, _)| start..end)
    }
}

/// Cuts the response in `msg` down to its header, question section and OPT record (with
/// every option it carries, e.g. the server's COOKIE) and sets TC: the answer a client gets
/// when the whole one may not be sent over UDP (RFC 1035 §4.2.1, RFC 6891 §7: the OPT record
/// stays so the client keeps its EDNS parameters). ANCOUNT and NSCOUNT become 0 and ARCOUNT
/// 1 (0 without OPT). Returns the new length in bytes. `compact` is as in
/// [`MessageView::parse_with`] (an ARRF fragment's RRFRAG type).
///
/// # Errors
/// [`WireError`] if `msg` is not a well-formed message ([`MessageView::parse_with`]); `msg` is
/// then unchanged.
pub fn truncate_to_question(msg: &mut [u8], compact: Option<RrType>) -> Result<usize, WireError> {
    let view = MessageView::parse_with(msg, compact)?;
    let (end, opt) = (view.question_end(), view.opt_range());
    let flags = view.header().flags | super::FLAG_TC;
    let opt_len = opt.map_or(0, |range| {
        let len = range.len();
        msg.copy_within(range, end);
        len
    });
    msg[2..4].copy_from_slice(&flags.to_be_bytes());
    msg[6..12].copy_from_slice(&[0, 0, 0, 0, 0, u8::from(opt_len > 0)]);
    Ok(end + opt_len)
}

/// Iterator over the questions of a [`MessageView`].
#[derive(Clone, Debug)]
pub struct Questions<'a> {
    msg: &'a [u8],
    pos: usize,
    left: u16,
}

impl<'a> Iterator for Questions<'a> {
    type Item = QuestionView<'a>;

    fn next(&mut self) -> Option<QuestionView<'a>> {
        self.left = self.left.checked_sub(1)?;
        let qname = WireName::checked(self.msg, self.pos);
        // Checked by the parse; a failure only ends the iteration.
        let at = skip_name(self.msg, self.pos).ok()?;
        let fixed = self.msg.get(at..at + 4)?;
        self.pos = at + 4;
        Some(QuestionView {
            qname,
            qtype: RrType(u16::from_be_bytes([fixed[0], fixed[1]])),
            qclass: Class(u16::from_be_bytes([fixed[2], fixed[3]])),
        })
    }
}

/// Iterator over the records of one section of a [`MessageView`].
#[derive(Clone, Debug)]
pub struct Records<'a> {
    msg: &'a [u8],
    pos: usize,
    left: u16,
    skip: Option<usize>,
    compact: Option<RrType>,
    with_data: bool,
}

impl<'a> Iterator for Records<'a> {
    type Item = RecordView<'a>;

    fn next(&mut self) -> Option<RecordView<'a>> {
        loop {
            self.left = self.left.checked_sub(1)?;
            let at = self.pos;
            // Checked by the parse; a failure only ends the iteration.
            let (record, next) =
                RecordView::read(self.msg, at, self.compact, self.with_data).ok()?;
            self.pos = next;
            if Some(at) != self.skip {
                return Some(record);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Edns, MessageWriter, Rcode, EDNS_DO, FLAG_AA, FLAG_TC, OPT_LEN};

    /// A response with compressed names in owners and RDATA, glue, and an OPT with an option.
    fn sample() -> Vec<u8> {
        let zone: crate::Name = "example.".parse().unwrap();
        let ns: crate::Name = "ns.example.".parse().unwrap();
        let mut edns = Edns::dnssec_ok(1232);
        edns.set_option(10, vec![7; 8]);
        let mut buf = Vec::new();
        let mut w = MessageWriter::new(
            &mut buf,
            0,
            1232,
            Header {
                id: 3,
                flags: FLAG_QR,
            },
        );
        w.set_flag(FLAG_AA);
        w.question(zone.as_wire(), RrType::NS, Class::IN).unwrap();
        w.set_edns(&edns).unwrap();
        w.record(
            Section::Answer,
            zone.as_wire(),
            RrType::NS,
            Class::IN,
            60,
            ns.as_wire(),
        );
        w.record(
            Section::Additional,
            ns.as_wire(),
            RrType::A,
            Class::IN,
            60,
            &[192, 0, 2, 1],
        );
        w.finish(Rcode::NOERROR);
        buf
    }

    #[test]
    fn sections_questions_and_opt() {
        let msg = sample();
        let v = MessageView::parse(&msg).unwrap();
        assert_eq!(v.counts(), [1, 1, 0, 2]);
        let q = v.question().unwrap();
        assert_eq!(
            (q.qname.to_name().to_string(), q.qtype),
            ("example.".into(), RrType::NS)
        );
        let answers: Vec<_> = v.records(Section::Answer).collect();
        assert_eq!(answers.len(), 1);
        assert_ne!(
            answers[0].rdata_raw(),
            answers[0].rdata().as_ref(),
            "compressed"
        );
        assert_eq!(answers[0].to_record().rdata, b"\x02ns\x07example\x00");
        assert_eq!(v.records(Section::Authority).count(), 0);
        let additional: Vec<_> = v.records(Section::Additional).collect();
        assert_eq!(additional.len(), 1, "the OPT is not an additional record");
        assert_eq!(additional[0].owner().to_name().to_string(), "ns.example.");
        let opt = v.opt().unwrap();
        assert!(opt.dnssec_ok());
        assert_eq!(opt.option(10), Some(&[7; 8][..]));
        assert_eq!(opt.flags(), EDNS_DO);
    }

    #[test]
    fn truncation_keeps_the_question_and_the_opt_record() {
        let mut msg = sample();
        let full = msg.len();
        let len = truncate_to_question(&mut msg, None).unwrap();
        // Header, "example." NS IN (9 + 4 bytes), and the OPT with its 12-byte option.
        assert_eq!(len, HEADER_LEN + 13 + OPT_LEN + 12);
        assert!(len < full);
        let v = MessageView::parse(&msg[..len]).unwrap();
        assert_eq!(v.counts(), [1, 0, 0, 1]);
        assert!(v.header().has(FLAG_TC) && v.header().has(FLAG_AA) && v.header().has(FLAG_QR));
        assert_eq!(v.header().id, 3);
        assert_eq!(v.question().unwrap().qtype, RrType::NS);
        assert_eq!(v.opt().unwrap().option(10), Some(&[7; 8][..]));
        assert!(v.opt().unwrap().dnssec_ok());
        // Without OPT: header and question only. Not a message: an error, nothing changed.
        let mut plain = msg[..len].to_vec();
        plain[11] = 0;
        let q_end = v.question_end();
        plain.truncate(q_end);
        assert_eq!(truncate_to_question(&mut plain, None).unwrap(), q_end);
        let mut garbage = vec![0u8, 1, 0x80, 0, 0, 9];
        assert!(truncate_to_question(&mut garbage, None).is_err());
        assert_eq!(garbage, [0u8, 1, 0x80, 0, 0, 9]);
    }

    #[test]
    fn every_cut_and_byte_change_is_an_error_or_a_consistent_view() {
        let msg = sample();
        for cut in 0..msg.len() {
            assert!(MessageView::parse(&msg[..cut]).is_err(), "cut at {cut}");
        }
        // Any single byte replaced by any value: never a panic; a view that parses walks
        // to the end of every iterator.
        for at in 0..msg.len() {
            for b in [0u8, 1, 0x3f, 0x40, 0xc0, 0xc1, 0xff] {
                let mut m = msg.clone();
                m[at] = b;
                if let Ok(v) = MessageView::parse(&m) {
                    let n: usize = [Section::Answer, Section::Authority, Section::Additional]
                        .into_iter()
                        .map(|s| {
                            v.records(s)
                                .filter(|r| r.to_record().rtype == r.rtype())
                                .count()
                        })
                        .sum();
                    let expected: usize = v.counts()[1..].iter().map(|&c| usize::from(c)).sum();
                    assert_eq!(
                        n + usize::from(v.opt().is_some()),
                        expected,
                        "byte {at} = {b}"
                    );
                    assert_eq!(v.questions().count(), usize::from(v.counts()[0]));
                }
            }
        }
    }
}

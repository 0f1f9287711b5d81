//! Whole DNS messages (RFC 1035 §4.1) as owned values, for clients: parse a response into
//! [`Record`]s with uncompressed RDATA, and build queries with EDNS(0) (RFC 6891 §6.1).
//!
//! There is one parser and one encoder: [`Message::parse`] reads through
//! [`crate::wire::MessageView`] (bounded, checked decompression) and [`Message::to_wire`]
//! writes through [`crate::wire::MessageWriter`] without name compression.

use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::wire::{
    Edns, Header, MessageView, MessageWriter, Rcode, RecordView, Section, WireError, FLAG_RD,
};

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

impl Message {
    /// Parses a whole message.
    ///
    /// # Errors
    /// [`WireError`] for truncation, bad names or pointers, compressed RDATA that does not
    /// match its type, a misplaced or repeated OPT, or trailing bytes.
    pub fn parse(msg: &[u8]) -> Result<Message, WireError> {
        Ok(Message::from_view(&MessageView::parse(msg)?))
    }

    /// Parses a whole message in which root-owned records of type `compact` use ARRF's compact
    /// RRFRAG form ([`MessageView::parse_with`]); such a record comes back with CLASS 0, TTL 0
    /// and the bytes after TYPE as RDATA, for `crate::frag::arrf` to interpret.
    ///
    /// # Errors
    /// As [`Message::parse`].
    pub fn parse_with(msg: &[u8], compact: Option<RrType>) -> Result<Message, WireError> {
        Ok(Message::from_view(&MessageView::parse_with(msg, compact)?))
    }

    /// The owned copy of a parsed view.
    pub fn from_view(view: &MessageView<'_>) -> Message {
        let records = |s| {
            view.records(s)
                .map(|r: RecordView<'_>| r.to_record())
                .collect()
        };
        let header = view.header();
        Message {
            id: header.id,
            flags: header.flags,
            questions: view
                .questions()
                .map(|q| Question {
                    qname: q.qname.to_name(),
                    qtype: q.qtype,
                    qclass: q.qclass,
                })
                .collect(),
            answers: records(Section::Answer),
            authority: records(Section::Authority),
            additional: records(Section::Additional),
            edns: view.opt().map(|o| o.to_edns()),
        }
    }

    /// ID and flags.
    pub fn header(&self) -> Header {
        Header {
            id: self.id,
            flags: self.flags,
        }
    }

    /// The full RCODE: header low 4 bits plus the OPT extension (RFC 6891 §6.1.3).
    pub fn rcode(&self) -> Rcode {
        self.header()
            .rcode(self.edns.as_ref().map_or(0, |e| e.ext_rcode))
    }

    /// True if the header flag `flag` (a `crate::wire::FLAG_*` bit) is set.
    pub fn has_flag(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// A query: one question, RD as given, and the OPT record `edns` if set.
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
        let mut w =
            MessageWriter::new(&mut out, 0, usize::MAX, self.header()).without_compression();
        for q in &self.questions {
            // No budget: nothing is ever full.
            let _unlimited = w.question(q.qname.as_wire(), q.qtype, q.qclass);
        }
        let sections = [
            (Section::Answer, &self.answers),
            (Section::Authority, &self.authority),
            (Section::Additional, &self.additional),
        ];
        for (section, records) in sections {
            for r in records {
                if compact == Some(r.rtype) && r.owner.is_root() {
                    w.compact_record(section, r.rtype, &r.rdata);
                } else {
                    let owner = r.owner.as_wire();
                    w.record(section, owner, r.rtype, r.class, r.ttl, &r.rdata);
                }
            }
        }
        if let Some(e) = &self.edns {
            let _unlimited = w.set_edns(e);
        }
        w.finish(self.rcode());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EDNS_DO, FLAG_AA};

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
        let wire = m.to_wire();
        // Header, question (13 + 4), OPT (11) with one 6-byte option.
        let mut expected = vec![0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        expected.extend(b"\x03www\x07example\x00\x00\x01\x00\x01");
        expected.extend([
            0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 6, 0xfd, 0xe9, 0, 2, 1, 2,
        ]);
        assert_eq!(wire, expected);
        assert_eq!(Message::parse(&wire).unwrap(), m);
    }

    #[test]
    fn extended_rcode_travels_in_the_opt_record() {
        let mut m = Message::query(1, q("a.", RrType::A), false, Some(Edns::dnssec_ok(512)));
        m.flags |= 0x8000;
        m.edns.as_mut().unwrap().ext_rcode = 1;
        assert_eq!(m.rcode(), Rcode::BADVERS);
        let back = Message::parse(&m.to_wire()).unwrap();
        assert_eq!(back.rcode(), Rcode::BADVERS);
        assert_eq!(back.flags & 0xf, 0);
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
        assert_eq!(Message::parse(&[0, 1, 2]), Err(WireError::ShortHeader));
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
        // An NS record whose RDATA name runs past its RDLENGTH.
        let mut m = header(0);
        m[7] = 1;
        m.extend([0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 2, 1, b'a', 0]);
        assert_eq!(Message::parse(&m), Err(WireError::BadRdata));
        // OPT in the answer section, OPT not at the root, two OPT records.
        let opt = [0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0];
        let mut m = header(0);
        m[7] = 1;
        m.extend(opt);
        assert_eq!(Message::parse(&m), Err(WireError::BadOpt));
        let mut m = header(0);
        m[11] = 1;
        m.extend([1, b'x']);
        m.extend(opt);
        assert_eq!(Message::parse(&m), Err(WireError::BadOpt));
        let mut m = header(0);
        m[11] = 2;
        m.extend(opt);
        m.extend(opt);
        assert_eq!(Message::parse(&m), Err(WireError::DuplicateOpt));
    }
}

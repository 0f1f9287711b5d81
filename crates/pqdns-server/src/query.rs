//! What the server accepts as a query, on top of `pqdns_core::wire`: not a response, OPCODE
//! QUERY, exactly one question (RFC 1035 §4.1.1–§4.1.2), and a message that
//! [`MessageView::parse`] accepts (names under the one decompression rule, every record and
//! the OPT record checked, RFC 6891 §6.1.1: one OPT at most). Records in the answer and
//! authority sections are checked and otherwise ignored (AXFR/IXFR look at them).
//!
//! Parsing allocates nothing: the QNAME is decoded into a stack buffer. Errors carry the
//! header when there was one, so the engine can answer FORMERR or NOTIMP with the query's ID.

use pqdns_core::wire::{
    Header, MessageView, NameBuf, Opcode, OptView, WireError, FLAG_QR, HEADER_LEN, MIN_UDP_PAYLOAD,
};
use pqdns_core::{Class, RrType};

/// A parsed query.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// Header ID and flags as received.
    pub header: Header,
    /// QNAME in uncompressed wire format, case preserved (compression pointers resolved).
    pub qname: NameBuf,
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: Class,
    /// The OPT record, if present.
    pub edns: Option<OptView<'a>>,
    /// The whole message.
    pub message: MessageView<'a>,
}

impl Query<'_> {
    /// True if the query has EDNS with the DO bit set (RFC 3225 §3).
    pub fn dnssec_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok())
    }

    /// The EDNS UDP payload size the client offered, at least 512 bytes (RFC 6891 §6.2.5);
    /// 512 without EDNS (RFC 1035 §4.2.1).
    pub fn udp_payload(&self) -> u16 {
        self.edns
            .map_or(MIN_UDP_PAYLOAD, |e| e.udp_payload().max(MIN_UDP_PAYLOAD))
    }
}

/// Why a message is not an acceptable query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer than 12 bytes: there is no ID to answer to, so the message is dropped.
    #[error("message shorter than the 12-byte header")]
    ShortHeader,
    /// The QR bit is set: a response is never answered (it would allow reflection loops).
    #[error("QR bit set: the message is a response")]
    NotAQuery,
    /// An OPCODE other than QUERY (answered NOTIMP).
    #[error("opcode {0} is not implemented")]
    Opcode(Opcode),
    /// QDCOUNT is not 1.
    #[error("QDCOUNT is {0}, must be 1")]
    QuestionCount(u16),
    /// The message does not parse (answered FORMERR).
    #[error("{0}")]
    Wire(WireError),
}

/// A message that could not be parsed as a query, with the header if one was readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The reason.
    pub error: ParseError,
    /// The header, when the message was at least 12 bytes long.
    pub header: Option<Header>,
}

impl Malformed {
    /// True if no response should be sent at all (no header, or the message is a response).
    pub fn drop_silently(&self) -> bool {
        self.header.is_none() || self.error == ParseError::NotAQuery
    }
}

/// Parses a query message.
///
/// # Errors
/// [`Malformed`] with the [`ParseError`] and, when the message had a full header, that header
/// so the caller can answer FORMERR or NOTIMP.
pub fn parse(packet: &[u8]) -> Result<Query<'_>, Malformed> {
    let Some(header) = Header::parse(packet) else {
        return Err(Malformed {
            error: ParseError::ShortHeader,
            header: None,
        });
    };
    let malformed = |error| Malformed {
        error,
        header: Some(header),
    };
    if header.has(FLAG_QR) {
        return Err(malformed(ParseError::NotAQuery));
    }
    if header.opcode() != Opcode::QUERY {
        return Err(malformed(ParseError::Opcode(header.opcode())));
    }
    let wire = |e| malformed(ParseError::Wire(e));
    let message = MessageView::parse(packet).map_err(wire)?;
    let qdcount = message.counts()[0];
    if qdcount != 1 {
        return Err(malformed(ParseError::QuestionCount(qdcount)));
    }
    // The view has checked the question: decode the QNAME once (one walk, no second pass
    // through `MessageView::question`) and read QTYPE and QCLASS after it.
    let (qname, end) = NameBuf::read(packet, HEADER_LEN).map_err(wire)?;
    let fixed = packet
        .get(end..end + 4)
        .ok_or(WireError::Truncated)
        .map_err(wire)?;
    Ok(Query {
        header,
        qname,
        qtype: RrType(u16::from_be_bytes([fixed[0], fixed[1]])),
        qclass: Class(u16::from_be_bytes([fixed[2], fixed[3]])),
        edns: message.opt(),
        message,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pqdns_core::Name;

    /// Builds a query for tests: header, question, optional OPT with payload and DO.
    pub(crate) fn build(qname: &str, qtype: RrType, edns: Option<(u16, bool)>) -> Vec<u8> {
        let name: Name = qname.parse().unwrap();
        let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0];
        p.push(u8::from(edns.is_some()));
        p.extend_from_slice(name.as_wire());
        p.extend(qtype.0.to_be_bytes());
        p.extend(1u16.to_be_bytes());
        if let Some((size, dnssec_ok)) = edns {
            p.push(0);
            p.extend(41u16.to_be_bytes());
            p.extend(size.to_be_bytes());
            p.extend([0, 0, if dnssec_ok { 0x80 } else { 0 }, 0]);
            p.extend(0u16.to_be_bytes());
        }
        p
    }

    #[test]
    fn parses_question_and_edns() {
        let packet = build("www.Example.com.", RrType::AAAA, Some((4096, true)));
        let q = parse(&packet).unwrap();
        assert_eq!(q.header.id, 0x1234);
        assert_eq!(q.qname.to_name().to_string(), "www.Example.com.");
        assert_eq!(q.qname.as_wire()[5], b'E', "case preserved");
        assert_eq!(q.qtype, RrType::AAAA);
        assert_eq!(q.qclass, Class::IN);
        let e = q.edns.unwrap();
        assert_eq!((e.udp_payload(), e.version()), (4096, 0));
        assert!(q.dnssec_ok());
        assert_eq!(q.udp_payload(), 4096);
        let packet = build("example.com.", RrType::A, None);
        let q = parse(&packet).unwrap();
        assert!(q.edns.is_none() && !q.dnssec_ok());
        assert_eq!(q.udp_payload(), 512);
        let packet = build("example.com.", RrType::A, Some((100, false)));
        assert_eq!(
            parse(&packet).unwrap().udp_payload(),
            512,
            "below 512 counts as 512"
        );
    }

    fn error_of(packet: &[u8]) -> ParseError {
        parse(packet).unwrap_err().error
    }

    #[test]
    fn rejects_malformed_queries() {
        let good = build("a.example.", RrType::A, Some((1232, false)));
        assert_eq!(error_of(&good[..11]), ParseError::ShortHeader);
        assert!(parse(&good[..11]).unwrap_err().drop_silently());
        // Truncated anywhere after the header: an error with the header, never a panic.
        for cut in 12..good.len() {
            let m = parse(&good[..cut]).unwrap_err();
            assert_eq!(m.header.map(|h| h.id), Some(0x1234), "cut at {cut}");
        }
        let mut qd0 = good.clone();
        qd0[5] = 0;
        assert!(matches!(
            error_of(&qd0),
            ParseError::QuestionCount(0) | ParseError::Wire(_)
        ));
        let mut qd0 = build("a.example.", RrType::A, None);
        qd0[5] = 0;
        qd0.truncate(12);
        assert_eq!(error_of(&qd0), ParseError::QuestionCount(0));
        let mut qd2 = build("a.example.", RrType::A, None);
        let question = qd2[12..].to_vec();
        qd2.extend(question);
        qd2[5] = 2;
        assert_eq!(error_of(&qd2), ParseError::QuestionCount(2));
        let mut response = good.clone();
        response[2] |= 0x80;
        assert!(parse(&response).unwrap_err().drop_silently());
        let mut notify = good.clone();
        notify[2] = 4 << 3;
        assert_eq!(error_of(&notify), ParseError::Opcode(Opcode::NOTIFY));
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(error_of(&trailing), ParseError::Wire(WireError::Trailing));
    }

    #[test]
    fn rejects_pointer_loops_and_bad_opt() {
        // QNAME is a pointer to itself.
        let mut p = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1];
        assert_eq!(error_of(&p), ParseError::Wire(WireError::BadPointer));
        // A pointer forwards.
        p[13] = 16;
        assert_eq!(error_of(&p), ParseError::Wire(WireError::BadPointer));
        // A reserved label type (0x40).
        p[12] = 0x41;
        assert!(matches!(error_of(&p), ParseError::Wire(WireError::Name(_))));

        let mut two_opts = build("a.example.", RrType::A, Some((1232, false)));
        let opt = two_opts[two_opts.len() - 11..].to_vec();
        two_opts.extend(opt);
        two_opts[11] = 2;
        assert_eq!(
            error_of(&two_opts),
            ParseError::Wire(WireError::DuplicateOpt)
        );

        let mut bad_option = build("a.example.", RrType::A, Some((1232, false)));
        let n = bad_option.len();
        bad_option[n - 1] = 3; // RDLENGTH 3, then 3 bytes: an option header needs 4
        bad_option.extend([0, 10, 0]);
        assert_eq!(error_of(&bad_option), ParseError::Wire(WireError::BadOpt));

        let mut opt_not_root = build("a.example.", RrType::A, Some((1232, false)));
        let n = opt_not_root.len();
        opt_not_root.splice(n - 11..n - 10, [1, b'x', 0]);
        assert_eq!(error_of(&opt_not_root), ParseError::Wire(WireError::BadOpt));
    }

    #[test]
    fn follows_backward_pointer_in_question() {
        // A name in the question that points back into the header bytes is legal wire format;
        // here it points at a root label planted in the ID field.
        let p = [
            0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0xc0, 0, 0, 1, 0, 1,
        ];
        let q = parse(&p).unwrap();
        assert_eq!(q.qname.to_name().to_string(), "a.");
    }
}

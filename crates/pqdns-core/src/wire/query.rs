//! What a DNS server accepts as a query: the one acceptability check shared by the
//! authoritative server and the resolver service, so both give the same RCODE to the same
//! message.
//!
//! In this order (each step only runs when the ones before it passed):
//! 1. at least a 12-byte header, else nothing is sent (there is no ID to answer to);
//! 2. QR clear, else nothing is sent (answering responses allows reflection loops);
//! 3. the whole message parses under [`MessageView::parse_with`] (names under the one
//!    decompression rule, every record, at most one OPT, RFC 6891 §6.1.1), else FORMERR: the
//!    OPCODE of a message that does not parse is not trusted either;
//! 4. an OPCODE the caller handles (QUERY for both today; the server adds UPDATE and NOTIFY
//!    when it implements them), else NOTIMP (RFC 1035 §4.1.1);
//! 5. exactly one question (RFC 1035 §4.1.2), else FORMERR;
//! 6. EDNS version 0 when there is an OPT record, else BADVERS (RFC 6891 §6.1.3);
//! 7. QTYPE other than OPT (a pseudo-type, RFC 6891 §6.1.1), else FORMERR.
//!
//! An error response ([`Malformed::respond`]) is the header alone (no question: it may be
//! what was wrong) with an OPT record when the query's OPT record parsed.
//!
//! Parsing allocates nothing: the QNAME is decoded into a stack buffer.

use super::{
    Header, MessageView, MessageWriter, NameBuf, Opcode, OptView, Rcode, WireError, FLAG_QR,
    HEADER_LEN, MIN_UDP_PAYLOAD, OPTION_COOKIE,
};
use crate::{Class, RrType};

/// The largest message on a stream transport, in bytes (RFC 1035 §4.2.2); error responses
/// are far smaller.
const MAX_ERROR_RESPONSE: usize = 65535;

/// A query that passed the acceptability check.
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
    /// The OPT record, if present (version 0).
    pub edns: Option<OptView<'a>>,
    /// The whole message, checked.
    pub message: MessageView<'a>,
}

impl<'a> Query<'a> {
    /// True if the query has EDNS with the DO bit set (RFC 3225 §3).
    pub fn dnssec_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok())
    }

    /// The EDNS UDP payload size the client offered, in bytes, at least 512 (RFC 6891
    /// §6.2.5); 512 without EDNS (RFC 1035 §4.2.1).
    pub fn udp_payload(&self) -> u16 {
        self.edns
            .map_or(MIN_UDP_PAYLOAD, |e| e.udp_payload().max(MIN_UDP_PAYLOAD))
    }

    /// The data of the first COOKIE option (RFC 7873 §4), as sent (its length unchecked).
    pub fn cookie(&self) -> Option<&'a [u8]> {
        self.edns.and_then(|e| e.option(OPTION_COOKIE))
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
    /// The message does not parse (answered FORMERR).
    #[error("{0}")]
    Wire(WireError),
    /// An OPCODE the server does not handle (answered NOTIMP).
    #[error("opcode {0} is not implemented")]
    Opcode(Opcode),
    /// QDCOUNT is not 1 (answered FORMERR).
    #[error("QDCOUNT is {0}, must be 1")]
    QuestionCount(u16),
    /// An EDNS version above 0 (answered BADVERS).
    #[error("EDNS version {0} is not implemented")]
    EdnsVersion(u8),
    /// QTYPE OPT, a pseudo-type that is never asked for (answered FORMERR).
    #[error("QTYPE OPT in the question")]
    OptQuestion,
}

/// A message that could not be accepted as a query, with what its error response needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The reason.
    pub error: ParseError,
    /// The header, when the message was at least 12 bytes long.
    pub header: Option<Header>,
    /// True if the message parsed and had an OPT record: the error response gets one too.
    pub edns: bool,
}

impl Malformed {
    /// The RCODE to answer with; `None` when nothing is sent (no header, or a response).
    pub fn rcode(&self) -> Option<Rcode> {
        match (self.error, self.header) {
            (ParseError::ShortHeader | ParseError::NotAQuery, _) | (_, None) => None,
            (ParseError::Opcode(_), _) => Some(Rcode::NOTIMP),
            (ParseError::EdnsVersion(_), _) => Some(Rcode::BADVERS),
            _ => Some(Rcode::FORMERR),
        }
    }

    /// Writes the error response into `out[base..]` (`out` truncated to `base` first): the
    /// header with [`Malformed::rcode`], and an OPT record offering `udp_payload` bytes when
    /// the query had one, carrying `cookie` as COOKIE option data when given. Returns its
    /// length in bytes; 0, writing nothing, when no response is sent.
    pub fn respond(
        &self,
        udp_payload: u16,
        cookie: Option<&[u8]>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> usize {
        let (Some(rcode), Some(header)) = (self.rcode(), self.header) else {
            out.truncate(base);
            return 0;
        };
        let mut w = MessageWriter::response(out, base, MAX_ERROR_RESPONSE, header);
        if self.edns {
            let _fits = w.set_opt(udp_payload, 0, 0);
            if let Some(c) = cookie {
                let _fits = w.add_option(OPTION_COOKIE, c);
            }
        }
        w.finish(rcode)
    }
}

/// Checks `packet` as a query with OPCODE in `opcodes`, records of type `compact` owned by the
/// root in ARRF's compact form (see [`MessageView::parse_with`]; `None` for plain DNS).
///
/// # Errors
/// [`Malformed`]: the first failed step of the module's list, the header when there was one
/// and whether the message had an OPT record.
pub fn parse<'a>(
    packet: &'a [u8],
    compact: Option<RrType>,
    opcodes: &[Opcode],
) -> Result<Query<'a>, Malformed> {
    let Some(header) = Header::parse(packet) else {
        return Err(Malformed {
            error: ParseError::ShortHeader,
            header: None,
            edns: false,
        });
    };
    let mut malformed = Malformed {
        error: ParseError::NotAQuery,
        header: Some(header),
        edns: false,
    };
    if header.has(FLAG_QR) {
        return Err(malformed);
    }
    let message = MessageView::parse_with(packet, compact).map_err(|e| Malformed {
        error: ParseError::Wire(e),
        ..malformed
    })?;
    let edns = message.opt();
    malformed.edns = edns.is_some();
    let reject = |error| Malformed { error, ..malformed };
    if !opcodes.contains(&header.opcode()) {
        return Err(reject(ParseError::Opcode(header.opcode())));
    }
    let qdcount = message.counts()[0];
    if qdcount != 1 {
        return Err(reject(ParseError::QuestionCount(qdcount)));
    }
    if let Some(version) = edns.map(|e| e.version()).filter(|v| *v > 0) {
        return Err(reject(ParseError::EdnsVersion(version)));
    }
    // The view has checked the question: decode the QNAME once (one walk, no second pass
    // through `MessageView::question`) and read QTYPE and QCLASS after it.
    let wire = |e| reject(ParseError::Wire(e));
    let (qname, end) = NameBuf::read(packet, HEADER_LEN).map_err(wire)?;
    let fixed = packet
        .get(end..end + 4)
        .ok_or(WireError::Truncated)
        .map_err(wire)?;
    let qtype = RrType(u16::from_be_bytes([fixed[0], fixed[1]]));
    if qtype == RrType::OPT {
        return Err(reject(ParseError::OptQuestion));
    }
    Ok(Query {
        header,
        qname,
        qtype,
        qclass: Class(u16::from_be_bytes([fixed[2], fixed[3]])),
        edns,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Name;

    const QUERY: &[Opcode] = &[Opcode::QUERY];

    /// A query: header, question, optional OPT with payload and DO.
    fn build(qname: &str, qtype: RrType, edns: Option<(u16, bool)>) -> Vec<u8> {
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

    fn error_of(packet: &[u8]) -> ParseError {
        parse(packet, None, QUERY).unwrap_err().error
    }

    #[test]
    fn parses_question_and_edns() {
        let packet = build("www.Example.com.", RrType::AAAA, Some((4096, true)));
        let q = parse(&packet, None, QUERY).unwrap();
        assert_eq!(q.header.id, 0x1234);
        assert_eq!(q.qname.to_name().to_string(), "www.Example.com.");
        assert_eq!(q.qname.as_wire()[5], b'E', "case preserved");
        assert_eq!((q.qtype, q.qclass), (RrType::AAAA, Class::IN));
        let e = q.edns.unwrap();
        assert_eq!((e.udp_payload(), e.version()), (4096, 0));
        assert!(q.dnssec_ok() && q.cookie().is_none());
        assert_eq!(q.udp_payload(), 4096);
        let packet = build("example.com.", RrType::A, None);
        let q = parse(&packet, None, QUERY).unwrap();
        assert!(q.edns.is_none() && !q.dnssec_ok());
        assert_eq!(q.udp_payload(), 512);
        let packet = build("example.com.", RrType::A, Some((100, false)));
        let q = parse(&packet, None, QUERY).unwrap();
        assert_eq!(q.udp_payload(), 512, "below 512 counts as 512");
    }

    #[test]
    fn rejects_in_order_with_the_rcode_of_each_step() {
        let good = build("a.example.", RrType::A, Some((1232, false)));
        let m = parse(&good[..11], None, QUERY).unwrap_err();
        assert_eq!((m.error, m.rcode()), (ParseError::ShortHeader, None));
        // Truncated anywhere after the header: FORMERR with the header, never a panic.
        for cut in 12..good.len() {
            let m = parse(&good[..cut], None, QUERY).unwrap_err();
            assert_eq!(m.header.map(|h| h.id), Some(0x1234), "cut at {cut}");
            assert_eq!(m.rcode(), Some(Rcode::FORMERR), "cut at {cut}");
        }
        let mut response = good.clone();
        response[2] |= 0x80;
        assert_eq!(parse(&response, None, QUERY).unwrap_err().rcode(), None);
        // A NOTIFY is NOTIMP unless the caller handles it; a malformed one is FORMERR.
        let mut notify = good.clone();
        notify[2] = 4 << 3;
        let m = parse(&notify, None, QUERY).unwrap_err();
        assert_eq!(m.error, ParseError::Opcode(Opcode::NOTIFY));
        assert_eq!((m.rcode(), m.edns), (Some(Rcode::NOTIMP), true));
        assert!(parse(&notify, None, &[Opcode::QUERY, Opcode::NOTIFY]).is_ok());
        notify.push(0);
        assert_eq!(error_of(&notify), ParseError::Wire(WireError::Trailing));
        let mut qd0 = build("a.example.", RrType::A, None);
        qd0[5] = 0;
        qd0.truncate(12);
        assert_eq!(error_of(&qd0), ParseError::QuestionCount(0));
        let mut qd2 = build("a.example.", RrType::A, None);
        let question = qd2[12..].to_vec();
        qd2.extend(question);
        qd2[5] = 2;
        assert_eq!(error_of(&qd2), ParseError::QuestionCount(2));
        let mut v1 = good.clone();
        let n = v1.len();
        v1[n - 5] = 1; // the OPT record's VERSION byte
        let m = parse(&v1, None, QUERY).unwrap_err();
        assert_eq!(
            (m.error, m.rcode()),
            (ParseError::EdnsVersion(1), Some(Rcode::BADVERS))
        );
        let opt = build("a.example.", RrType::OPT, None);
        assert_eq!(error_of(&opt), ParseError::OptQuestion);
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
        let q = parse(&p, None, QUERY).unwrap();
        assert_eq!(q.qname.to_name().to_string(), "a.");
    }

    #[test]
    fn error_responses_echo_the_header_and_opt() {
        let mut notify = build("a.example.", RrType::SOA, Some((4096, false)));
        notify[2] = 4 << 3;
        let m = parse(&notify, None, QUERY).unwrap_err();
        let mut out = vec![0xff; 2];
        let len = m.respond(1232, Some(&[7; 24]), &mut out, 2);
        let view = MessageView::parse(&out[2..2 + len]).unwrap();
        assert_eq!(view.header().id, 0x1234);
        assert!(view.header().has(FLAG_QR));
        assert_eq!(view.header().opcode(), Opcode::NOTIFY);
        assert_eq!(view.rcode(), Rcode::NOTIMP);
        assert_eq!(view.counts(), [0, 0, 0, 1]);
        assert_eq!(
            view.opt().unwrap().option(OPTION_COOKIE),
            Some(&[7; 24][..])
        );
        assert_eq!(out[..2], [0xff; 2], "bytes before base stay");
        // BADVERS is an extended RCODE: its upper bits travel in the OPT record.
        let mut v1 = build("a.example.", RrType::A, Some((1232, false)));
        let n = v1.len();
        v1[n - 5] = 1;
        let len = parse(&v1, None, QUERY)
            .unwrap_err()
            .respond(1232, None, &mut out, 0);
        assert_eq!(
            MessageView::parse(&out[..len]).unwrap().rcode(),
            Rcode::BADVERS
        );
        // Nothing at all for a response.
        v1[2] |= 0x80;
        assert_eq!(
            parse(&v1, None, QUERY)
                .unwrap_err()
                .respond(1232, None, &mut out, 0),
            0
        );
    }
}

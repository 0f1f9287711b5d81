//! Parsing one DNS query message: the header and question (RFC 1035 §4.1.1–§4.1.2), name
//! compression in the question (RFC 1035 §4.1.4) and the EDNS(0) OPT pseudo-record
//! (RFC 6891 §6.1).
//!
//! The parser never panics and never allocates more than the question name: every count and
//! length is checked against the packet, and compression pointers must point strictly backwards,
//! so a pointer loop ends after at most 127 jumps (a 16-bit offset into a message of at most
//! 65535 bytes). Records in the answer and authority sections are skipped; a query with bytes
//! left over after the last counted record is rejected as malformed.

use pqdns_core::name::MAX_NAME_LEN;
use pqdns_core::{Class, Name, RrType};

/// Length of the fixed DNS header, in bytes (RFC 1035 §4.1.1).
pub const HEADER_LEN: usize = 12;
/// Longest chain of compression pointers followed in one name; each must point backwards.
pub const MAX_POINTER_JUMPS: usize = 127;

/// Header flag QR: the message is a response.
pub const FLAG_QR: u16 = 0x8000;
/// Header flag AA: authoritative answer.
pub const FLAG_AA: u16 = 0x0400;
/// Header flag TC: truncated.
pub const FLAG_TC: u16 = 0x0200;
/// Header flag RD: recursion desired (copied into the response).
pub const FLAG_RD: u16 = 0x0100;
/// Header flag CD: checking disabled (copied into the response, RFC 4035 §3.1.6).
pub const FLAG_CD: u16 = 0x0010;
/// OPT TTL flag DO: the client wants DNSSEC records (RFC 3225 §3).
pub const EDNS_FLAG_DO: u16 = 0x8000;

/// The fields of a query header that a response echoes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message ID.
    pub id: u16,
    /// The 16-bit flags word as received.
    pub flags: u16,
}

impl Header {
    /// OPCODE (RFC 1035 §4.1.1): 0 is QUERY.
    pub fn opcode(self) -> u8 {
        ((self.flags >> 11) & 0xf) as u8
    }
}

/// EDNS(0) parameters from the query's OPT record (RFC 6891 §6.1.2–§6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size, in bytes (values below 512 are treated as 512).
    pub udp_payload: u16,
    /// EDNS version; only 0 is implemented.
    pub version: u8,
    /// The DO bit (RFC 3225).
    pub dnssec_ok: bool,
}

/// A parsed query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Header ID and flags.
    pub header: Header,
    /// QNAME, case preserved (compression pointers resolved).
    pub qname: Name,
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: Class,
    /// The OPT record, if present.
    pub edns: Option<Edns>,
}

/// A parsed query whose QNAME lives in a caller's buffer, so parsing allocates nothing; the
/// UDP hot path looks prepared answers up with it (see [`crate::answer_cache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryView<'b> {
    /// Header ID and flags.
    pub header: Header,
    /// QNAME in uncompressed wire format, case preserved (1–255 bytes).
    pub qname: &'b [u8],
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: Class,
    /// The OPT record, if present.
    pub edns: Option<Edns>,
}

impl QueryView<'_> {
    /// The owned [`Query`] (allocates the QNAME).
    ///
    /// # Errors
    /// [`ParseError::BadName`] cannot happen for a view from [`parse_view`], which validated
    /// the name; it is returned rather than assumed.
    pub fn to_query(&self) -> Result<Query, ParseError> {
        Ok(Query {
            header: self.header,
            qname: Name::from_wire(self.qname).map_err(|_| ParseError::BadName)?,
            qtype: self.qtype,
            qclass: self.qclass,
            edns: self.edns,
        })
    }
}

impl Query {
    /// True if the query has EDNS with the DO bit set.
    pub fn dnssec_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok)
    }
}

/// Why a message is not an acceptable query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Fewer than 12 bytes: there is no ID to answer to, so the message is dropped.
    #[error("message shorter than the 12-byte header")]
    ShortHeader,
    /// The QR bit is set: a response is never answered (it would allow reflection loops).
    #[error("QR bit set: the message is a response")]
    NotAQuery,
    /// An opcode other than QUERY (answered NOTIMP).
    #[error("opcode {0} is not implemented")]
    Opcode(u8),
    /// QDCOUNT is not 1.
    #[error("QDCOUNT is {0}, must be 1")]
    QuestionCount(u16),
    /// A name runs past the end, uses a reserved label type, or is longer than 255 bytes.
    #[error("malformed name")]
    BadName,
    /// A compression pointer points forwards or to itself, or the chain is too long.
    #[error("compression pointer loop")]
    PointerLoop,
    /// A fixed-size field or RDATA runs past the end of the message.
    #[error("message truncated inside a record")]
    Truncated,
    /// The OPT record is not owned by the root, or its options overrun its RDATA.
    #[error("malformed OPT record")]
    BadOpt,
    /// More than one OPT record (RFC 6891 §6.1.1).
    #[error("more than one OPT record")]
    DuplicateOpt,
    /// Bytes after the last record counted in the header.
    #[error("{0} bytes after the last record")]
    TrailingData(usize),
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

/// A cursor over the message with bounds-checked reads.
struct Reader<'a> {
    packet: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        let end = self.pos.checked_add(n).ok_or(ParseError::Truncated)?;
        let out = self
            .packet
            .get(self.pos..end)
            .ok_or(ParseError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, ParseError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Reads a possibly compressed name into `out` (uncompressed wire format); returns its length.
    fn name(&mut self, out: &mut [u8; MAX_NAME_LEN]) -> Result<usize, ParseError> {
        let packet = self.packet;
        let mut pos = self.pos;
        let mut len = 0;
        let mut resume = None;
        let mut jumps = 0;
        loop {
            let b = *packet.get(pos).ok_or(ParseError::BadName)?;
            match b & 0xc0 {
                0x00 => {
                    let label_len = usize::from(b);
                    let label = packet
                        .get(pos + 1..pos + 1 + label_len)
                        .ok_or(ParseError::BadName)?;
                    if len + 1 + label_len > out.len() {
                        return Err(ParseError::BadName);
                    }
                    out[len] = b;
                    out[len + 1..len + 1 + label_len].copy_from_slice(label);
                    len += 1 + label_len;
                    pos += 1 + label_len;
                    if label_len == 0 {
                        break;
                    }
                }
                0xc0 => {
                    let low = *packet.get(pos + 1).ok_or(ParseError::BadName)?;
                    let target = usize::from(u16::from_be_bytes([b & 0x3f, low]));
                    jumps += 1;
                    // Backwards-only pointers make every chain finite; the jump cap bounds work.
                    if target >= pos || jumps > MAX_POINTER_JUMPS {
                        return Err(ParseError::PointerLoop);
                    }
                    resume.get_or_insert(pos + 2);
                    pos = target;
                }
                _ => return Err(ParseError::BadName),
            }
        }
        self.pos = resume.unwrap_or(pos);
        Ok(len)
    }

    /// Skips a name (validating it).
    fn skip_name(&mut self) -> Result<(), ParseError> {
        let mut scratch = [0u8; MAX_NAME_LEN];
        self.name(&mut scratch).map(|_| ())
    }
}

/// Reads the possibly compressed name at `packet[pos..]`; returns it and the position after it
/// (after the first pointer, if any).
///
/// # Errors
/// [`ParseError::BadName`] or [`ParseError::PointerLoop`].
pub fn read_name(packet: &[u8], pos: usize) -> Result<(Name, usize), ParseError> {
    let mut r = Reader { packet, pos };
    let mut wire = [0u8; MAX_NAME_LEN];
    let len = r.name(&mut wire)?;
    let name = Name::from_wire(&wire[..len]).map_err(|_| ParseError::BadName)?;
    Ok((name, r.pos))
}

/// Parses a query message.
///
/// # Errors
/// [`Malformed`] with the [`ParseError`] and, when the message had a full header, that header
/// so the caller can answer FORMERR or NOTIMP.
pub fn parse(packet: &[u8]) -> Result<Query, Malformed> {
    let mut qname = [0u8; MAX_NAME_LEN];
    let view = parse_view(packet, &mut qname)?;
    view.to_query().map_err(|error| Malformed {
        error,
        header: Some(view.header),
    })
}

/// Parses a query message like [`parse`], writing the QNAME into `qname` instead of
/// allocating it.
///
/// # Errors
/// As [`parse`].
pub fn parse_view<'b>(
    packet: &[u8],
    qname: &'b mut [u8; MAX_NAME_LEN],
) -> Result<QueryView<'b>, Malformed> {
    if packet.len() < HEADER_LEN {
        return Err(Malformed {
            error: ParseError::ShortHeader,
            header: None,
        });
    }
    let header = Header {
        id: u16::from_be_bytes([packet[0], packet[1]]),
        flags: u16::from_be_bytes([packet[2], packet[3]]),
    };
    parse_body(packet, header, qname).map_err(|error| Malformed {
        error,
        header: Some(header),
    })
}

fn parse_body<'b>(
    packet: &[u8],
    header: Header,
    qname: &'b mut [u8; MAX_NAME_LEN],
) -> Result<QueryView<'b>, ParseError> {
    if header.flags & FLAG_QR != 0 {
        return Err(ParseError::NotAQuery);
    }
    if header.opcode() != 0 {
        return Err(ParseError::Opcode(header.opcode()));
    }
    let count = |i: usize| u16::from_be_bytes([packet[i], packet[i + 1]]);
    let (qdcount, ancount, nscount, arcount) = (count(4), count(6), count(8), count(10));
    if qdcount != 1 {
        return Err(ParseError::QuestionCount(qdcount));
    }
    let mut r = Reader {
        packet,
        pos: HEADER_LEN,
    };
    let qname_len = r.name(qname)?;
    let qtype = RrType(r.u16()?);
    let qclass = Class(r.u16()?);

    for _ in 0..u32::from(ancount) + u32::from(nscount) {
        skip_record(&mut r)?;
    }
    let mut edns = None;
    for _ in 0..arcount {
        let start = r.pos;
        r.skip_name()?;
        let owner_is_root = r.pos == start + 1 && packet[start] == 0;
        let rtype = RrType(r.u16()?);
        let class = r.u16()?;
        let ttl = r.bytes(4)?;
        let rdlen = usize::from(r.u16()?);
        let rdata = r.bytes(rdlen)?;
        if rtype != RrType::OPT {
            continue;
        }
        // RFC 6891 §6.1.1: "If a query message with more than one OPT RR is received, a
        // FORMERR (RCODE=1) MUST be returned."
        if edns.is_some() {
            return Err(ParseError::DuplicateOpt);
        }
        if !owner_is_root || !options_well_formed(rdata) {
            return Err(ParseError::BadOpt);
        }
        edns = Some(Edns {
            udp_payload: class,
            version: ttl[1],
            dnssec_ok: u16::from_be_bytes([ttl[2], ttl[3]]) & EDNS_FLAG_DO != 0,
        });
    }
    if r.pos != packet.len() {
        return Err(ParseError::TrailingData(packet.len() - r.pos));
    }
    Ok(QueryView {
        header,
        qname: &qname[..qname_len],
        qtype,
        qclass,
        edns,
    })
}

fn skip_record(r: &mut Reader<'_>) -> Result<(), ParseError> {
    r.skip_name()?;
    r.bytes(8)?;
    let rdlen = usize::from(r.u16()?);
    r.bytes(rdlen).map(|_| ())
}

/// True if the OPT RDATA is a sequence of {code, length, data} options that ends exactly at
/// the end of the RDATA (RFC 6891 §6.1.2).
fn options_well_formed(mut rdata: &[u8]) -> bool {
    while !rdata.is_empty() {
        let Some(head) = rdata.get(..4) else {
            return false;
        };
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        match rdata.get(4 + len..) {
            Some(rest) => rdata = rest,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a query for tests: header, question, optional OPT with payload and DO.
    pub(crate) fn build(qname: &str, qtype: RrType, edns: Option<(u16, bool)>) -> Vec<u8> {
        let name: Name = qname.parse().unwrap();
        let mut p = vec![
            0x12,
            0x34,
            0x01,
            0x00,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            u8::from(edns.is_some()),
        ];
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
        let q = parse(&build("www.Example.com.", RrType::AAAA, Some((4096, true)))).unwrap();
        assert_eq!(q.header.id, 0x1234);
        assert_eq!(q.qname.to_string(), "www.Example.com.");
        assert_eq!(q.qtype, RrType::AAAA);
        assert_eq!(q.qclass, Class::IN);
        assert_eq!(
            q.edns,
            Some(Edns {
                udp_payload: 4096,
                version: 0,
                dnssec_ok: true
            })
        );
        assert!(q.dnssec_ok());
        let q = parse(&build("example.com.", RrType::A, None)).unwrap();
        assert_eq!(q.edns, None);
    }

    fn error_of(packet: &[u8]) -> ParseError {
        parse(packet).unwrap_err().error
    }

    #[test]
    fn rejects_malformed_queries() {
        let good = build("a.example.", RrType::A, Some((1232, false)));
        assert_eq!(error_of(&good[..11]), ParseError::ShortHeader);
        assert!(parse(&good[..11]).unwrap_err().drop_silently());
        // Truncated anywhere after the header: an error, never a panic.
        for cut in HEADER_LEN..good.len() {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut qd0 = good.clone();
        qd0[5] = 0;
        assert_eq!(error_of(&qd0), ParseError::QuestionCount(0));
        let mut qd2 = good.clone();
        qd2[5] = 2;
        assert!(parse(&qd2).is_err());
        let mut response = good.clone();
        response[2] |= 0x80;
        assert!(parse(&response).unwrap_err().drop_silently());
        let mut notify = good.clone();
        notify[2] = 4 << 3;
        assert_eq!(error_of(&notify), ParseError::Opcode(4));
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(error_of(&trailing), ParseError::TrailingData(1));
    }

    #[test]
    fn rejects_pointer_loops_and_bad_opt() {
        // QNAME is a pointer to itself.
        let mut p = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1];
        assert_eq!(error_of(&p), ParseError::PointerLoop);
        // A pointer forwards.
        p[13] = 16;
        assert_eq!(error_of(&p), ParseError::PointerLoop);
        // A reserved label type (0x40).
        p[12] = 0x41;
        assert_eq!(error_of(&p), ParseError::BadName);

        let mut two_opts = build("a.example.", RrType::A, Some((1232, false)));
        let opt = two_opts[two_opts.len() - 11..].to_vec();
        two_opts.extend(opt);
        two_opts[11] = 2;
        assert_eq!(error_of(&two_opts), ParseError::DuplicateOpt);

        let mut bad_option = build("a.example.", RrType::A, Some((1232, false)));
        let n = bad_option.len();
        bad_option[n - 1] = 3; // RDLENGTH 3, then 3 bytes: an option header needs 4
        bad_option.extend([0, 10, 0]);
        assert_eq!(error_of(&bad_option), ParseError::BadOpt);

        let mut opt_not_root = build("a.example.", RrType::A, Some((1232, false)));
        let n = opt_not_root.len();
        opt_not_root.splice(n - 11..n - 10, [1, b'x', 0]);
        assert_eq!(error_of(&opt_not_root), ParseError::BadOpt);
    }

    #[test]
    fn follows_backward_pointer_in_question() {
        // A name in the question that points back into the header bytes is legal wire format;
        // here it points at a root label planted in the ID field.
        let p = [
            0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0xc0, 0, 0, 1, 0, 1,
        ];
        let q = parse(&p).unwrap();
        assert_eq!(q.qname.to_string(), "a.");
    }
}

//! Queries for the load generator: read from a dnsperf-format file (one `NAME TYPE` per line,
//! `#` comments, as dnsperf(1) `-d` reads) or generated, and encoded as DNS wire-format
//! queries (RFC 1035 §4.1) with an optional EDNS(0) OPT record and DO bit (RFC 6891, RFC 3225).

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, EDNS_DO};
use pqdns_core::{Class, Name, RrType};

/// One query: QNAME and QTYPE (QCLASS IN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuerySpec {
    /// QNAME, absolute.
    pub qname: Name,
    /// QTYPE.
    pub qtype: RrType,
}

/// Why a query file line was rejected.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct QueryFileError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses one `NAME [TYPE]` pair (TYPE defaults to A; a relative NAME is taken as absolute).
///
/// # Errors
/// A message if the name or type is invalid.
pub fn parse_query(name: &str, qtype: Option<&str>) -> Result<QuerySpec, String> {
    let absolute = if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    };
    let qname = Name::parse(&absolute, None).map_err(|e| format!("{name:?}: {e}"))?;
    let qtype = match qtype {
        None => RrType::A,
        Some(t) => RrType::from_mnemonic(&t.to_ascii_uppercase())
            .ok_or_else(|| format!("unknown query type {t:?}"))?,
    };
    Ok(QuerySpec { qname, qtype })
}

/// The lines of a query file or log that hold an entry, with their 1-based numbers: trimmed,
/// without blank lines and `#` comments.
pub fn entries(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Parses a dnsperf query file: one `NAME TYPE` per line; blank lines and lines starting with
/// `#` are skipped. At most `limit` queries are kept (memory bound).
///
/// # Errors
/// [`QueryFileError`] for the first bad line, or when the file holds no query.
pub fn parse_dnsperf(text: &str, limit: usize) -> Result<Vec<QuerySpec>, QueryFileError> {
    let mut out = Vec::new();
    for (line, text) in entries(text).take(limit) {
        let mut words = text.split_ascii_whitespace();
        let name = words.next().unwrap_or_default();
        let spec =
            parse_query(name, words.next()).map_err(|message| QueryFileError { line, message })?;
        out.push(spec);
    }
    if out.is_empty() {
        return Err(QueryFileError {
            line: 0,
            message: "no queries in the file".into(),
        });
    }
    Ok(out)
}

/// `count` queries `host0.ORIGIN` … `host{count-1}.ORIGIN` of type `qtype`, the names that
/// `pqdns-bench gen-zone --hosts` writes.
///
/// # Errors
/// A message if the names would be invalid (e.g. too long an origin).
pub fn generated(origin: &Name, count: usize, qtype: RrType) -> Result<Vec<QuerySpec>, String> {
    (0..count.max(1))
        .map(|i| {
            let qname =
                Name::parse(&format!("host{i}"), Some(origin)).map_err(|e| e.to_string())?;
            Ok(QuerySpec { qname, qtype })
        })
        .collect()
}

/// Header bits and EDNS(0) settings of generated queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryOptions {
    /// Advertised UDP payload size, bytes; `None` sends no OPT record (and so no DO bit).
    pub udp_payload: Option<u16>,
    /// Set the DO bit (RFC 3225): ask for DNSSEC records.
    pub dnssec_ok: bool,
    /// Set the RD header bit (RFC 1035 §4.1.1): for recursive resolvers; authoritative
    /// servers are asked with RD clear.
    pub recursion_desired: bool,
}

/// The wire form of `spec` with message ID `id`, RD per `edns.recursion_desired`, and an OPT
/// record per `edns`.
pub fn query_wire(spec: &QuerySpec, id: u16, edns: QueryOptions) -> Vec<u8> {
    let opt = edns.udp_payload.map(|udp_payload| Edns {
        udp_payload,
        ext_rcode: 0,
        version: 0,
        flags: if edns.dnssec_ok { EDNS_DO } else { 0 },
        options: Vec::new(),
    });
    let question = Question {
        qname: spec.qname.clone(),
        qtype: spec.qtype,
        qclass: Class::IN,
    };
    Message::query(id, question, edns.recursion_desired, opt).to_wire()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dnsperf_file_with_comments_and_default_type() {
        let q = parse_dnsperf(
            "# c\n\nwww.example.com A\nexample.com. dnskey\nmail.example.com\n",
            10,
        )
        .unwrap();
        assert_eq!(q.len(), 3);
        assert_eq!(q[1].qtype, RrType::DNSKEY);
        assert_eq!(q[2].qtype, RrType::A);
        assert_eq!(q[0].qname.to_string(), "www.example.com.");
        assert_eq!(parse_dnsperf("a.example BOGUS\n", 10).unwrap_err().line, 1);
        assert!(parse_dnsperf("# nothing\n", 10).is_err());
        assert_eq!(parse_dnsperf("a A\nb A\nc A\n", 2).unwrap().len(), 2);
    }

    /// Known answer: `example.com. A`, ID 0x1234, OPT 1232 with DO is 12 + 17 + 11 = 40 bytes
    /// (RFC 1035 §4.1 header and question, RFC 6891 §6.1.2 OPT).
    #[test]
    fn query_wire_known_bytes() {
        let spec = parse_query("example.com", Some("A")).unwrap();
        let edns = QueryOptions {
            udp_payload: Some(1232),
            dnssec_ok: true,
            recursion_desired: false,
        };
        let wire = query_wire(&spec, 0x1234, edns);
        let mut expected = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        expected.extend(b"\x07example\x03com\x00\x00\x01\x00\x01");
        expected.extend([0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
        assert_eq!(wire, expected);
        let plain = query_wire(
            &spec,
            1,
            QueryOptions {
                udp_payload: None,
                dnssec_ok: true,
                recursion_desired: true,
            },
        );
        assert_eq!(plain.len(), 29);
        // RD is the 0x01 bit of the flags' first byte.
        assert_eq!((wire[2], plain[2]), (0x00, 0x01));
    }

    #[test]
    fn generated_names_match_gen_zone_hosts() {
        let origin = Name::parse("tld.", None).unwrap();
        let q = generated(&origin, 3, RrType::A).unwrap();
        assert_eq!(q[2].qname.to_string(), "host2.tld.");
    }
}

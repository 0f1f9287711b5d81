//! A second decoder for every response the tests see (issue 16): hickory-proto, an independent
//! Rust DNS implementation, decodes the response, and its reading is compared field by field
//! with pqdns-core's: header bits, full RCODE (RFC 6891 §6.1.3), questions, and every record of
//! every section (owner name and names inside RDATA decompressed, type, class, TTL, RDATA
//! bytes), and the OPT record (payload size, version, DO bit, option codes). A response one of
//! them cannot decode, or a field they read differently, is an error naming the field.

use hickory_proto::op::Message as Theirs;
use hickory_proto::rr::Record as TheirRecord;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};
use pqdns_core::message::Message;
use pqdns_core::wire::{FLAG_AA, FLAG_AD, FLAG_CD, FLAG_QR, FLAG_RA, FLAG_RD, FLAG_TC};
use pqdns_core::Record;

/// Compares hickory-proto's and pqdns-core's decoding of `response` (a whole DNS message).
///
/// # Errors
/// A description of the first disagreement, or of a decoder that refused the message.
pub fn second_opinion(response: &[u8]) -> Result<(), String> {
    let ours = Message::parse(response).map_err(|e| format!("pqdns-core: {e}"))?;
    let theirs = Theirs::from_vec(response).map_err(|e| format!("hickory-proto: {e}"))?;
    let m = &theirs.metadata;
    let bits = [
        (
            "QR",
            FLAG_QR,
            m.message_type == hickory_proto::op::MessageType::Response,
        ),
        ("AA", FLAG_AA, m.authoritative),
        ("TC", FLAG_TC, m.truncation),
        ("RD", FLAG_RD, m.recursion_desired),
        ("RA", FLAG_RA, m.recursion_available),
        ("AD", FLAG_AD, m.authentic_data),
        ("CD", FLAG_CD, m.checking_disabled),
    ];
    agree("ID", ours.id, m.id)?;
    for (name, flag, theirs) in bits {
        agree(name, ours.has_flag(flag), theirs)?;
    }
    agree("RCODE", ours.rcode().0, u16::from(m.response_code))?;
    agree("QDCOUNT", ours.questions.len(), theirs.queries.len())?;
    for (q, t) in ours.questions.iter().zip(&theirs.queries) {
        agree("QNAME", lower(q.qname.as_wire()), lower(&wire(&t.name)?))?;
        agree("QTYPE", q.qtype.0, u16::from(t.query_type))?;
        agree("QCLASS", q.qclass.0, u16::from(t.query_class))?;
    }
    let sections = [
        ("answer", &ours.answers, &theirs.answers),
        ("authority", &ours.authority, &theirs.authorities),
        ("additional", &ours.additional, &theirs.additionals),
    ];
    for (section, ours, theirs) in sections {
        agree(section, ours.len(), theirs.len())?;
        for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
            same_record(o, t).map_err(|e| format!("{section} record {i} ({o}): {e}"))?;
        }
    }
    match (&ours.edns, &theirs.edns) {
        (None, None) => Ok(()),
        (Some(o), Some(t)) => {
            agree("OPT payload", o.udp_payload, t.max_payload())?;
            agree("OPT version", o.version, t.version())?;
            agree("OPT DO", o.flags & 0x8000 != 0, t.flags().dnssec_ok)?;
            let codes: Vec<u16> = o.options.iter().map(|(c, _)| *c).collect();
            let their_codes: Vec<u16> = t
                .options()
                .as_ref()
                .iter()
                .map(|(c, _)| u16::from(*c))
                .collect();
            agree("OPT option codes", codes, their_codes)
        }
        (o, t) => Err(format!("OPT present: {} vs {}", o.is_some(), t.is_some())),
    }
}

fn same_record(ours: &Record, theirs: &TheirRecord) -> Result<(), String> {
    agree(
        "owner",
        lower(ours.owner.as_wire()),
        lower(&wire(&theirs.name)?),
    )?;
    agree("type", ours.rtype.0, u16::from(theirs.record_type()))?;
    agree("class", ours.class.0, u16::from(theirs.dns_class))?;
    agree("TTL", ours.ttl, theirs.ttl)?;
    // Names inside RDATA uncompressed and in their case, as pqdns-core keeps them.
    let mut rdata = Vec::new();
    let mut encoder = BinEncoder::new(&mut rdata);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    theirs
        .data
        .emit(&mut encoder)
        .map_err(|e| format!("hickory-proto re-encoding RDATA: {e}"))?;
    agree("RDATA", &ours.rdata, &rdata)
}

fn wire(name: &hickory_proto::rr::Name) -> Result<Vec<u8>, String> {
    name.to_bytes()
        .map_err(|e| format!("hickory-proto encoding {name}: {e}"))
}

fn lower(wire: &[u8]) -> Vec<u8> {
    wire.to_ascii_lowercase()
}

fn agree<T: PartialEq + std::fmt::Debug>(field: &str, ours: T, theirs: T) -> Result<(), String> {
    if ours == theirs {
        Ok(())
    } else {
        Err(format!(
            "{field}: pqdns-core {ours:?}, hickory-proto {theirs:?}"
        ))
    }
}

//! Replaying a stored response to a new query with the same question: what differs between
//! the two queries is patched in place, so a stored answer is served by one copy. Used by the
//! authoritative server's prepared answers and the resolver service's response cache.

use super::{Header, HEADER_LEN};

/// Patches `response`, a stored answer to a query with the same question, for the query with
/// header `query` and QNAME `qname` (uncompressed wire form, as sent): the message ID, the
/// header flags in `echo` copied from the query (e.g. RD and CD, RFC 1035 §4.1.1, RFC 4035
/// §3.1.6), and the QNAME's letter case (RFC 4343 §4.1: the question is echoed as sent; names
/// compressed against it follow). Leaves `response` alone if it is shorter than its header and
/// a QNAME of that length.
#[inline]
pub fn patch_for_query(response: &mut [u8], query: Header, echo: u16, qname: &[u8]) {
    let Some(question) = response.get_mut(HEADER_LEN..HEADER_LEN + qname.len()) else {
        return;
    };
    question.copy_from_slice(qname);
    let flags = u16::from_be_bytes([response[2], response[3]]);
    let flags = (flags & !echo) | (query.flags & echo);
    response[..2].copy_from_slice(&query.id.to_be_bytes());
    response[2..4].copy_from_slice(&flags.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{FLAG_AA, FLAG_CD, FLAG_QR, FLAG_RD};

    #[test]
    fn id_echoed_flags_and_case_are_the_query_s() {
        // ID 0, QR AA CD, question "www.example." A IN, no records.
        let mut stored = vec![0, 0, 0x84, 0x10, 0, 1, 0, 0, 0, 0, 0, 0];
        stored.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        let query = Header {
            id: 0xbeef,
            flags: FLAG_RD,
        };
        let mut r = stored.clone();
        patch_for_query(&mut r, query, FLAG_RD | FLAG_CD, b"\x03WwW\x07ExAmple\x00");
        assert_eq!(r[..2], [0xbe, 0xef]);
        let flags = u16::from_be_bytes([r[2], r[3]]);
        assert_eq!(
            flags,
            FLAG_QR | FLAG_AA | FLAG_RD,
            "RD set, CD cleared, the rest kept"
        );
        assert_eq!(&r[12..25], b"\x03WwW\x07ExAmple\x00");
        assert_eq!(r[25..], stored[25..]);
        // Too short for the QNAME: untouched.
        let mut short = stored[..20].to_vec();
        patch_for_query(&mut short, query, FLAG_RD, b"\x03WwW\x07ExAmple\x00");
        assert_eq!(short, stored[..20]);
    }
}

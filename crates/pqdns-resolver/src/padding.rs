//! EDNS(0) padding (RFC 7830) with the block-length policy of RFC 8467 §4.1, so that the
//! length of an encrypted DNS message says little about the name asked or the answer:
//!
//! - responses to a client query that carried a Padding option, over DoT, DoH or DoQ, are
//!   padded to a multiple of [`RESPONSE_BLOCK`] (468) bytes, within the client's size limit
//!   (RFC 7830 §3: "Responders MUST pad DNS responses when the respective DNS query included
//!   the 'Padding' option, unless doing so would violate the maximum UDP payload size"); a
//!   response that would not fit its block is padded up to the limit, and one with no room
//!   for the option at all is sent unpadded;
//! - responses over plain UDP and TCP are never padded (RFC 7830 §6: padding is for encrypted
//!   transports), nor are responses to queries without a Padding option (RFC 7830 §3);
//! - queries the resolver sends over DoT, DoH or DoQ are padded to a multiple of
//!   [`QUERY_BLOCK`] (128) bytes (RFC 8467 §4.1, "Block-Length Padding").
//!
//! The option is appended to the message's OPT record after it is written (the cache's
//! prepared responses are never padded, so the replay of cached answers and their TTL
//! offsets are unchanged); a message without an OPT record is left alone.

use pqdns_core::wire::{MessageView, OPTION_PADDING};

/// Block length of padded responses, bytes (RFC 8467 §4.1: "Responders SHOULD pad to a
/// multiple of 468 octets").
pub const RESPONSE_BLOCK: usize = 468;
/// Block length of padded queries, bytes (RFC 8467 §4.1: "Clients SHOULD pad queries to the
/// closest multiple of 128 octets").
pub const QUERY_BLOCK: usize = 128;
/// Bytes of an EDNS option's code and length fields (RFC 6891 §6.1.2).
const OPTION_HEADER: usize = 4;

/// True if the query `message` has an OPT record with a Padding option (RFC 7830 §3); false
/// for a message that does not parse.
pub fn requested(message: &[u8]) -> bool {
    MessageView::parse(message)
        .ok()
        .and_then(|m| m.opt())
        .is_some_and(|opt| opt.option(OPTION_PADDING).is_some())
}

/// The length a message of `len` bytes is padded to with blocks of `block` bytes, at most
/// `limit` bytes: the smallest multiple of `block` that holds the message and a Padding
/// option, or `limit` when that multiple is larger; `None` when not even an empty Padding
/// option fits `limit`.
pub fn padded_len(len: usize, block: usize, limit: usize) -> Option<usize> {
    let least = len.checked_add(OPTION_HEADER)?;
    if least > limit {
        return None;
    }
    Some(least.next_multiple_of(block.max(1)).min(limit))
}

/// Pads the message at `out[base..base + len]` (`out` is truncated there first) with a
/// Padding option at the end of its OPT record, to [`padded_len`]`(len, block, limit)` bytes
/// of zeros (RFC 7830 §4: "The PADDING octets SHOULD be set to 0x00"). Returns the new
/// length; `len` unchanged when the message does not parse, has no OPT record, its OPT record
/// is not last, or no padding fits.
pub fn pad(out: &mut Vec<u8>, base: usize, len: usize, block: usize, limit: usize) -> usize {
    out.truncate(base + len);
    let Some(opt) = out
        .get(base..)
        .and_then(|m| MessageView::parse(m).ok())
        .and_then(|m| m.opt_range())
    else {
        return len;
    };
    let Some(target) = padded_len(len, block, limit) else {
        return len;
    };
    // RDLENGTH is the last field before the RDATA (RFC 6891 §6.1.2): owner (1 byte, root),
    // TYPE, CLASS, TTL, then RDLENGTH at offset 9.
    let at = base + opt.start + 9;
    let rdlen = usize::from(u16::from_be_bytes([out[at], out[at + 1]]));
    let data = target - len - OPTION_HEADER;
    let (Ok(rdlen), Ok(data_len), true) = (
        u16::try_from(rdlen + OPTION_HEADER + data),
        u16::try_from(data),
        opt.end == len,
    ) else {
        return len;
    };
    out[at..at + 2].copy_from_slice(&rdlen.to_be_bytes());
    out.extend_from_slice(&OPTION_PADDING.to_be_bytes());
    out.extend_from_slice(&data_len.to_be_bytes());
    out.resize(base + target, 0);
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::{Edns, OPTION_COOKIE};
    use pqdns_core::{Class, RrType};

    fn query(name: &str, edns: Option<Edns>) -> Vec<u8> {
        let q = Question {
            qname: name.parse().unwrap(),
            qtype: RrType::A,
            qclass: Class::IN,
        };
        Message::query(7, q, false, edns).to_wire()
    }

    /// Known answers of RFC 8467 §4.1's block policy: 4 bytes of option header always, then
    /// up to the next multiple of the block, capped at the limit.
    #[test]
    fn padded_lengths() {
        assert_eq!(padded_len(100, 468, 65_535), Some(468));
        assert_eq!(
            padded_len(464, 468, 65_535),
            Some(468),
            "0 bytes of padding"
        );
        assert_eq!(
            padded_len(465, 468, 65_535),
            Some(936),
            "no room: next block"
        );
        assert_eq!(padded_len(1000, 468, 65_535), Some(1404));
        assert_eq!(padded_len(28, 128, 65_535), Some(128));
        assert_eq!(padded_len(125, 128, 65_535), Some(256));
        assert_eq!(padded_len(65_400, 468, 65_535), Some(65_520), "140 blocks");
        assert_eq!(
            padded_len(65_520, 468, 65_535),
            Some(65_535),
            "capped at the limit"
        );
        assert_eq!(
            padded_len(65_532, 468, 65_535),
            None,
            "no room for the option"
        );
    }

    #[test]
    fn a_query_is_padded_to_its_block_and_still_parses() {
        let mut edns = Edns::dnssec_ok(1232);
        edns.set_option(OPTION_COOKIE, vec![1; 8]);
        let mut wire = query("www.example.", Some(edns));
        let before = wire.len();
        let len = pad(&mut wire, 0, before, QUERY_BLOCK, 65_535);
        assert_eq!((len, wire.len()), (128, 128));
        let m = MessageView::parse(&wire).unwrap();
        let opt = m.opt().unwrap();
        assert_eq!(opt.option(OPTION_COOKIE), Some(&[1; 8][..]), "kept");
        assert_eq!(
            opt.option(OPTION_PADDING),
            Some(&vec![0; 128 - before - 4][..])
        );
        assert!(requested(&wire));
        assert!(!requested(&query(
            "www.example.",
            Some(Edns::dnssec_ok(1232))
        )));
    }

    #[test]
    fn after_base_and_without_opt() {
        let mut out = vec![0xee; 3];
        out.extend(query("a.example.", Some(Edns::dnssec_ok(1232))));
        let len = out.len() - 3;
        out.extend([9, 9]); // bytes past the message are dropped
        assert_eq!(pad(&mut out, 3, len, RESPONSE_BLOCK, 65_535), 468);
        assert_eq!(out.len(), 3 + 468);
        assert_eq!(out[..3], [0xee; 3]);
        assert!(MessageView::parse(&out[3..]).is_ok());
        // No OPT record: nothing to pad.
        let mut plain = query("a.example.", None);
        let len = plain.len();
        assert_eq!(pad(&mut plain, 0, len, RESPONSE_BLOCK, 65_535), len);
        assert_eq!(plain.len(), len);
        assert!(!requested(&plain));
    }
}

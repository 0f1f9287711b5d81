//! The fixed message header (RFC 1035 §4.1.1): ID, flag bits, OPCODE, RCODE and the four
//! section counts.

use super::{Opcode, Rcode};

/// Length of the header, bytes.
pub const HEADER_LEN: usize = 12;

/// Flag QR: the message is a response.
pub const FLAG_QR: u16 = 0x8000;
/// Flag AA: authoritative answer.
pub const FLAG_AA: u16 = 0x0400;
/// Flag TC: truncated (RFC 1035 §4.1.1, RFC 2181 §9).
pub const FLAG_TC: u16 = 0x0200;
/// Flag RD: recursion desired (copied into a response).
pub const FLAG_RD: u16 = 0x0100;
/// Flag RA: recursion available.
pub const FLAG_RA: u16 = 0x0080;
/// Flag AD: authentic data (RFC 4035 §3.2.3, RFC 6840 §5.7).
pub const FLAG_AD: u16 = 0x0020;
/// Flag CD: checking disabled (RFC 4035 §3.2.2; copied into a response, §3.1.6).
pub const FLAG_CD: u16 = 0x0010;

/// A message ID from the OS CSPRNG, for a client's query (RFC 5452 §9.2: unpredictable to
/// an off-path attacker); `None` if the generator fails.
pub fn random_id() -> Option<u16> {
    let mut id = [0u8; 2];
    aws_lc_rs::rand::fill(&mut id).ok()?;
    Some(u16::from_be_bytes(id))
}

/// Bits of the flags word holding the OPCODE.
const OPCODE_MASK: u16 = 0x7800;

/// The ID and the 16-bit flags word (QR, OPCODE, AA, TC, RD, RA, Z, AD, CD, low 4 bits of
/// RCODE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Message ID.
    pub id: u16,
    /// Flags word as on the wire.
    pub flags: u16,
}

impl Header {
    /// The header at the start of `msg`; `None` if `msg` is shorter than [`HEADER_LEN`].
    #[inline]
    pub fn parse(msg: &[u8]) -> Option<Header> {
        let h = msg.get(..HEADER_LEN)?;
        Some(Header {
            id: u16::from_be_bytes([h[0], h[1]]),
            flags: u16::from_be_bytes([h[2], h[3]]),
        })
    }

    /// True if `flag` (one of the `FLAG_*` bits) is set.
    pub fn has(self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// The OPCODE (4 bits).
    pub fn opcode(self) -> Opcode {
        Opcode(((self.flags & OPCODE_MASK) >> 11) as u8)
    }

    /// The low 4 bits of the RCODE (the rest is in the OPT record, RFC 6891 §6.1.3).
    pub fn rcode_low(self) -> u16 {
        self.flags & 0xf
    }

    /// Flags word with `opcode` set in place of the current OPCODE.
    pub fn with_opcode(self, opcode: Opcode) -> Header {
        let bits = (u16::from(opcode.0) << 11) & OPCODE_MASK;
        Header {
            id: self.id,
            flags: (self.flags & !OPCODE_MASK) | bits,
        }
    }

    /// The header of a response to this query: same ID and OPCODE, QR set, RD and CD copied
    /// (RFC 1035 §4.1.1, RFC 4035 §3.1.6), everything else clear.
    pub fn response(self) -> Header {
        Header {
            id: self.id,
            flags: FLAG_QR | (self.flags & (OPCODE_MASK | FLAG_RD | FLAG_CD)),
        }
    }

    /// The full RCODE given the OPT record's upper 8 bits (0 without EDNS).
    pub fn rcode(self, ext_rcode: u8) -> Rcode {
        Rcode(u16::from(ext_rcode) << 4 | self.rcode_low())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_a_known_header() {
        // ID 0xbeef, QR, OPCODE NOTIFY (4), AA, RD, CD, RCODE 3.
        let h = Header::parse(&[0xbe, 0xef, 0xa5, 0x13, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(h.id, 0xbeef);
        assert!(h.has(FLAG_QR) && h.has(FLAG_AA) && h.has(FLAG_RD) && h.has(FLAG_CD));
        assert!(!h.has(FLAG_TC) && !h.has(FLAG_RA) && !h.has(FLAG_AD));
        assert_eq!(h.opcode(), Opcode::NOTIFY);
        assert_eq!(h.rcode(0), Rcode::NXDOMAIN);
        assert_eq!(h.rcode(1), Rcode(19));
        assert_eq!(Header::parse(&[0; 11]), None);
        // A response keeps ID, OPCODE, RD, CD; drops AA and the RCODE.
        let query = Header {
            id: 7,
            flags: 0x2000 | FLAG_RD | FLAG_CD | FLAG_AD | FLAG_TC,
        };
        assert_eq!(query.response().flags, FLAG_QR | 0x2000 | FLAG_RD | FLAG_CD);
        assert_eq!(query.with_opcode(Opcode::QUERY).opcode(), Opcode::QUERY);
        assert_eq!(
            Header { id: 0, flags: 0 }.with_opcode(Opcode(15)).flags,
            0x7800
        );
    }
}

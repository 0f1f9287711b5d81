//! Names inside messages, with compression pointers (RFC 1035 §4.1.4) under one rule for every
//! reader of this crate.
//!
//! The rule: a pointer must point strictly before the start of the label run that holds it
//! (the run began at the name's first byte or at the previous pointer's target). Targets
//! therefore strictly decrease, no byte is read twice and every chain ends; at most
//! [`MAX_POINTER_JUMPS`] pointers and 255 bytes of uncompressed name are accepted, so the work
//! per name is bounded too. Every legitimate compressor satisfies it: a pointer always names an
//! earlier occurrence.

use std::fmt;

use super::WireError;
use crate::name::{Name, NameError, MAX_NAME_LEN};

/// Most compression pointers followed in one name: one per label (at most 127) plus one.
pub const MAX_POINTER_JUMPS: usize = 128;

/// Walks the possibly compressed name at `msg[start..]`, calling `label` with each label
/// including its length byte, the root label (`[0]`) last. Returns the offset just after the
/// name's in-place encoding (after its first pointer, if any).
pub(crate) fn walk_name(
    msg: &[u8],
    start: usize,
    mut label: impl FnMut(&[u8]),
) -> Result<usize, WireError> {
    let mut pos = start;
    let mut run_start = start;
    let mut end = None;
    let mut len = 0;
    let mut jumps = 0;
    loop {
        let b = *msg.get(pos).ok_or(WireError::Truncated)?;
        match b {
            0 => {
                label(&msg[pos..=pos]);
                return Ok(end.unwrap_or(pos + 1));
            }
            1..=63 => {
                let l = msg
                    .get(pos..pos + 1 + usize::from(b))
                    .ok_or(WireError::Truncated)?;
                len += l.len();
                // The root label still needs one byte.
                if len >= MAX_NAME_LEN {
                    return Err(WireError::Name(NameError::NameTooLong));
                }
                label(l);
                pos += l.len();
            }
            0xc0..=0xff => {
                let low = *msg.get(pos + 1).ok_or(WireError::Truncated)?;
                let target = usize::from(u16::from_be_bytes([b & 0x3f, low]));
                jumps += 1;
                if target >= run_start || jumps > MAX_POINTER_JUMPS {
                    return Err(WireError::BadPointer);
                }
                end.get_or_insert(pos + 2);
                run_start = target;
                pos = target;
            }
            // 0x40 and 0x80: extended and reserved label types (RFC 6891 §5).
            _ => return Err(WireError::Name(NameError::BadWire)),
        }
    }
}

/// Offset just after the possibly compressed name at `msg[start..]`, checking it.
pub(crate) fn skip_name(msg: &[u8], start: usize) -> Result<usize, WireError> {
    walk_name(msg, start, |_| {})
}

/// A name decoded into a fixed 255-byte buffer (uncompressed wire format, case preserved), so
/// reading a QNAME allocates nothing.
#[derive(Clone, Copy)]
pub struct NameBuf {
    bytes: [u8; MAX_NAME_LEN],
    len: u8,
}

impl NameBuf {
    /// Decodes the name at `msg[start..]`; returns it and the offset after its in-place
    /// encoding.
    ///
    /// # Errors
    /// [`WireError`] as the module doc describes.
    pub fn read(msg: &[u8], start: usize) -> Result<(NameBuf, usize), WireError> {
        let mut buf = NameBuf {
            bytes: [0; MAX_NAME_LEN],
            len: 0,
        };
        let next = walk_name(msg, start, |l| {
            // walk_name keeps the total within 255 bytes.
            let at = usize::from(buf.len);
            buf.bytes[at..at + l.len()].copy_from_slice(l);
            buf.len += l.len() as u8;
        })?;
        Ok((buf, next))
    }

    /// The name in uncompressed wire format (1 to 255 bytes).
    pub fn as_wire(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The owned [`Name`].
    pub fn to_name(&self) -> Name {
        Name::from_checked_wire(self.as_wire())
    }
}

impl From<&Name> for NameBuf {
    /// The name's wire form (at most 255 bytes, as every [`Name`] is).
    fn from(name: &Name) -> NameBuf {
        let wire = name.as_wire();
        let mut buf = NameBuf {
            bytes: [0; MAX_NAME_LEN],
            len: wire.len() as u8,
        };
        buf.bytes[..wire.len()].copy_from_slice(wire);
        buf
    }
}

impl fmt::Debug for NameBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameBuf({})", self.to_name())
    }
}

/// A name inside a message that [`super::MessageView`] has checked: where it starts, possibly
/// compressed. Decoding it cannot fail.
#[derive(Clone, Copy)]
pub struct WireName<'a> {
    msg: &'a [u8],
    offset: usize,
}

impl<'a> WireName<'a> {
    /// A name the caller has checked with [`walk_name`].
    pub(crate) fn checked(msg: &'a [u8], offset: usize) -> WireName<'a> {
        WireName { msg, offset }
    }

    /// Offset of the name's first byte in the message.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// True for the root name.
    pub fn is_root(&self) -> bool {
        self.msg.get(self.offset) == Some(&0)
    }

    /// The name decoded into a stack buffer.
    pub fn decode(&self) -> NameBuf {
        // Checked by the view's parse: the error branch is never taken.
        NameBuf::read(self.msg, self.offset).map_or(
            NameBuf {
                bytes: [0; MAX_NAME_LEN],
                len: 1,
            },
            |(buf, _)| buf,
        )
    }

    /// Appends the uncompressed name to `out`.
    pub fn write_uncompressed(&self, out: &mut Vec<u8>) {
        let _checked = walk_name(self.msg, self.offset, |l| out.extend_from_slice(l));
    }

    /// The owned [`Name`].
    pub fn to_name(&self) -> Name {
        self.decode().to_name()
    }
}

impl fmt::Debug for WireName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WireName({} at {})", self.to_name(), self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(msg: &[u8], at: usize) -> Result<(String, usize), WireError> {
        NameBuf::read(msg, at).map(|(n, next)| (n.to_name().to_string(), next))
    }

    #[test]
    fn pointers_strictly_backwards_are_followed() {
        // 0: "example." ; 9: "www" + pointer to 0 ; 15: pointer to 9 ; 17: pointer to 15.
        let msg = b"\x07example\x00\x03www\xc0\x00\xc0\x09\xc0\x0f";
        assert_eq!(read(msg, 0), Ok(("example.".into(), 9)));
        assert_eq!(read(msg, 9), Ok(("www.example.".into(), 15)));
        assert_eq!(read(msg, 15), Ok(("www.example.".into(), 17)));
        assert_eq!(read(msg, 17), Ok(("www.example.".into(), 19)));
    }

    #[test]
    fn loops_forward_pointers_and_bad_labels_are_errors() {
        // A pointer to itself, forwards, and into its own label run.
        assert_eq!(read(b"\xc0\x00", 0).unwrap_err(), WireError::BadPointer);
        assert_eq!(read(b"\xc0\x02\x00", 0).unwrap_err(), WireError::BadPointer);
        assert_eq!(
            read(b"\x00\x01a\x01b\xc0\x03", 1).unwrap_err(),
            WireError::BadPointer,
            "a pointer back into the run that holds it"
        );
        // A chain of pointers, each strictly backwards, longer than the jump limit.
        let mut chain = vec![0u8];
        for i in 0..=MAX_POINTER_JUMPS {
            let target = if i == 0 { 0 } else { 1 + 2 * (i - 1) };
            chain.extend((0xc000 | target as u16).to_be_bytes());
        }
        let last = chain.len() - 2;
        assert_eq!(read(&chain, last).unwrap_err(), WireError::BadPointer);
        assert!(read(&chain, last - 2).is_ok(), "one jump fewer is accepted");
        assert_eq!(
            read(b"\x41a\x00", 0).unwrap_err(),
            WireError::Name(NameError::BadWire)
        );
        assert_eq!(read(b"\x03ww", 0).unwrap_err(), WireError::Truncated);
        assert_eq!(read(b"\xc0", 0).unwrap_err(), WireError::Truncated);
        // 128 labels of one byte: 256 bytes with the root, one too many.
        let long: Vec<u8> = [1, b'a'].repeat(128).into_iter().chain([0]).collect();
        assert_eq!(
            read(&long, 0).unwrap_err(),
            WireError::Name(NameError::NameTooLong)
        );
        assert!(read(&long[2..], 0).is_ok(), "255 bytes is the limit");
    }
}

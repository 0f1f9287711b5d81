//! EDNS(0) (RFC 6891): the OPT pseudo-record read through a borrowed [`OptView`], and written
//! from the owned [`Edns`] (or field by field with [`super::MessageWriter`]). There is no other
//! EDNS type in this crate.

use super::WireError;

/// Flag DO (DNSSEC OK, RFC 3225 §3) in the OPT TTL's low 16 bits.
pub const EDNS_DO: u16 = 0x8000;
/// The CO (Compact Answers OK) flag: the second most significant bit of the EDNS flags (bit 1,
/// after DO), RFC 9824 §5.1. A querier that sets it accepts NXDOMAIN with a compact denial
/// proof (an NSEC at QNAME listing NXNAME).
pub const EDNS_CO: u16 = 0x4000;
/// Smallest UDP payload every client accepts, bytes (RFC 1035 §4.2.1); a smaller EDNS payload
/// size is treated as this (RFC 6891 §6.2.5).
pub const MIN_UDP_PAYLOAD: u16 = 512;
/// Length of an OPT record without options, bytes (RFC 6891 §6.1.2: root owner, TYPE, CLASS,
/// TTL, RDLENGTH).
pub const OPT_LEN: usize = 11;
/// Option code NSID (RFC 5001 §2.3).
pub const OPTION_NSID: u16 = 3;
/// Option code COOKIE (RFC 7873 §4).
pub const OPTION_COOKIE: u16 = 10;
/// Option code Padding (RFC 7830 §3).
pub const OPTION_PADDING: u16 = 12;
/// Option code Extended DNS Error (RFC 8914 §2): INFO-CODE ([`super::Ede`]) and UTF-8 text.
pub const OPTION_EDE: u16 = 15;

/// The OPT record of a parsed message (RFC 6891 §6.1.2–§6.1.3), options checked to end
/// exactly at the end of its RDATA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptView<'a> {
    udp_payload: u16,
    ttl: u32,
    options: &'a [u8],
}

impl<'a> OptView<'a> {
    /// The view of an OPT record with CLASS `class`, TTL `ttl` and RDATA `rdata`.
    ///
    /// # Errors
    /// [`WireError::BadOpt`] if the options do not end exactly at the end of `rdata`.
    pub(crate) fn new(class: u16, ttl: u32, rdata: &'a [u8]) -> Result<OptView<'a>, WireError> {
        let mut rest = rdata;
        while let [_, _, hi, lo, tail @ ..] = rest {
            let len = usize::from(u16::from_be_bytes([*hi, *lo]));
            rest = tail.get(len..).ok_or(WireError::BadOpt)?;
        }
        if !rest.is_empty() {
            return Err(WireError::BadOpt);
        }
        Ok(OptView {
            udp_payload: class,
            ttl,
            options: rdata,
        })
    }

    /// The requestor's UDP payload size, bytes, as sent (callers clamp it to at least
    /// [`MIN_UDP_PAYLOAD`]).
    pub fn udp_payload(&self) -> u16 {
        self.udp_payload
    }

    /// The upper 8 bits of the RCODE.
    pub fn ext_rcode(&self) -> u8 {
        (self.ttl >> 24) as u8
    }

    /// The EDNS version (0 is the only one defined).
    pub fn version(&self) -> u8 {
        (self.ttl >> 16) as u8
    }

    /// The 16 flag bits (DO = [`EDNS_DO`]).
    pub fn flags(&self) -> u16 {
        self.ttl as u16
    }

    /// True if the DO bit is set (RFC 3225 §3).
    pub fn dnssec_ok(&self) -> bool {
        self.flags() & EDNS_DO != 0
    }

    /// The options, in order, as (code, data).
    pub fn options(&self) -> EdnsOptions<'a> {
        EdnsOptions { rest: self.options }
    }

    /// The data of the first option with `code`, if any.
    pub fn option(&self, code: u16) -> Option<&'a [u8]> {
        self.options().find(|(c, _)| *c == code).map(|(_, d)| d)
    }

    /// The owned form.
    pub fn to_edns(&self) -> Edns {
        Edns {
            udp_payload: self.udp_payload,
            ext_rcode: self.ext_rcode(),
            version: self.version(),
            flags: self.flags(),
            options: self.options().map(|(c, d)| (c, d.to_vec())).collect(),
        }
    }
}

/// Iterator over the options of an [`OptView`]: (code, data).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EdnsOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for EdnsOptions<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let [c1, c0, l1, l0, tail @ ..] = self.rest else {
            return None;
        };
        let len = usize::from(u16::from_be_bytes([*l1, *l0]));
        // Checked when the view was made; a short tail only ends the iteration.
        let data = tail.get(..len)?;
        self.rest = &tail[len..];
        Some((u16::from_be_bytes([*c1, *c0]), data))
    }
}

/// EDNS(0) parameters to send, or as read into an owned `crate::message::Message`
/// (RFC 6891 §6.1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edns {
    /// UDP payload size, bytes.
    pub udp_payload: u16,
    /// Upper 8 bits of the extended RCODE (on output, writers take them from the RCODE).
    pub ext_rcode: u8,
    /// EDNS version.
    pub version: u8,
    /// Flags (DO = [`EDNS_DO`]).
    pub flags: u16,
    /// Options as (code, data), in order.
    pub options: Vec<(u16, Vec<u8>)>,
}

impl Edns {
    /// EDNS version 0 with the DO bit (RFC 3225 §3), `udp_payload` bytes and no options: what
    /// a DNSSEC-aware client sends.
    pub fn dnssec_ok(udp_payload: u16) -> Edns {
        Edns {
            udp_payload,
            ext_rcode: 0,
            version: 0,
            flags: EDNS_DO,
            options: Vec::new(),
        }
    }

    /// The data of the first option with `code`, if any.
    pub fn option(&self, code: u16) -> Option<&[u8]> {
        self.options
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, d)| d.as_slice())
    }

    /// Sets the option `code` to `data`, replacing every option with that code.
    pub fn set_option(&mut self, code: u16, data: Vec<u8>) {
        self.options.retain(|(c, _)| *c != code);
        self.options.push((code, data));
    }

    /// Length of the OPT record on the wire, bytes.
    pub fn wire_len(&self) -> usize {
        OPT_LEN + self.options.iter().map(|(_, d)| 4 + d.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_and_iterated() {
        // DO, version 0, extended RCODE 1; options 10 (2 bytes) and 15 (0 bytes).
        let rdata = [0, 10, 0, 2, 0xab, 0xcd, 0, 15, 0, 0];
        let v = OptView::new(1232, 0x0100_8000, &rdata).unwrap();
        assert_eq!((v.udp_payload(), v.ext_rcode(), v.version()), (1232, 1, 0));
        assert!(v.dnssec_ok());
        let opts: Vec<_> = v.options().collect();
        assert_eq!(opts, [(10, &[0xab, 0xcd][..]), (15, &[][..])]);
        assert_eq!(v.option(15), Some(&[][..]));
        assert_eq!(v.option(3), None);
        let owned = v.to_edns();
        assert_eq!(owned.wire_len(), 11 + 6 + 4);
        assert_eq!(owned.option(10), Some(&[0xab, 0xcd][..]));
        for bad in [&[0, 10, 0][..], &[0, 10, 0, 3, 1, 2], &[0, 10, 0, 0, 9]] {
            assert_eq!(OptView::new(512, 0, bad), Err(WireError::BadOpt), "{bad:?}");
        }
    }

    #[test]
    fn set_option_replaces() {
        let mut e = Edns::dnssec_ok(1232);
        e.set_option(10, vec![1]);
        e.set_option(15, vec![2]);
        e.set_option(10, vec![3]);
        assert_eq!(e.options, [(15, vec![2]), (10, vec![3])]);
    }
}

//! Negotiation of application-layer fragmentation with an EDNS(0) option (RFC 6891 §6.1.2) in
//! the local/experimental range 65001–65534 (RFC 6891 §9). Neither ARRF nor QBF defines
//! negotiation (`docs/pqc-dnssec-wire.md` §3–4); a server that fragments for an unmodified
//! resolver breaks it, so pqdns fragments only for clients that send this option, and everyone
//! else gets standard truncation (TC=1, retry over TCP).
//!
//! Option data (all big-endian):
//! - byte 0: scheme bits, [`ARRF`] (0x01) and/or [`QBF`] (0x02). In a query: the schemes the
//!   client can reassemble. In a response: the one scheme the server used (present only on
//!   fragmented answers and fragment responses, so the client can tell a fragment from an
//!   ordinary truncated answer). Plus the [`PUSH`] flag (0x80): in a query, "send every
//!   fragment at once" (honoured only when the query also carries a valid DNS server cookie,
//!   RFC 7873 §5.2.3, which proves the source address is not spoofed); in a first fragment,
//!   "the other fragments are on their way, unrequested" (one round trip instead of two).
//! - only in an ARRF fragment request (question `. RRFRAG IN`): bytes 1–2 the original QTYPE,
//!   then the original QNAME in uncompressed wire form. With it the server recomputes the
//!   answer instead of keeping per-client state (the ARRF experiments cache the response; a
//!   stateless server cannot be filled up by spoofed queries).
//!
//! The code defaults to [`DEFAULT_CODE`] and is configurable on both ends.

use crate::name::Name;
use crate::rr::RrType;
use crate::wire::Edns;

/// Default option code: 65108, in the local/experimental range (RFC 6891 §9), ending in the
/// RRFRAG type number of the ARRF experiments so captures are easy to read.
pub const DEFAULT_CODE: u16 = 65_108;
/// Scheme bit: ARRF (RRFRAG records, `frag::arrf`).
pub const ARRF: u8 = 0x01;
/// Scheme bit: QBF (`?n?` fragment names, `frag::qbf`).
pub const QBF: u8 = 0x02;

/// Flag: fragments pushed without per-fragment requests (see the module documentation). Not a
/// scheme: mask it off ([`FragOption::scheme_bits`]) before comparing schemes.
pub const PUSH: u8 = 0x80;

/// Which fragmentation scheme an end uses: the `fragmentation = "arrf" | "qbf" | "off"`
/// setting of server and resolver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fragmentation {
    /// Never fragment; large UDP answers are truncated (TC=1) and retried over TCP.
    #[default]
    Off,
    /// ARRF (`frag::arrf`).
    Arrf,
    /// QBF (`frag::qbf`).
    Qbf,
}

impl Fragmentation {
    /// The scheme bit ([`ARRF`] or [`QBF`]); 0 for [`Fragmentation::Off`].
    pub fn bit(self) -> u8 {
        match self {
            Fragmentation::Off => 0,
            Fragmentation::Arrf => ARRF,
            Fragmentation::Qbf => QBF,
        }
    }

    /// The setting's name: `off`, `arrf` or `qbf`.
    pub fn name(self) -> &'static str {
        match self {
            Fragmentation::Off => "off",
            Fragmentation::Arrf => "arrf",
            Fragmentation::Qbf => "qbf",
        }
    }
}

impl std::str::FromStr for Fragmentation {
    type Err = String;

    /// Parses `arrf`, `qbf` or `off` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Fragmentation, String> {
        [Fragmentation::Off, Fragmentation::Arrf, Fragmentation::Qbf]
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("fragmentation {s:?} is not one of arrf, qbf, off"))
    }
}

impl std::fmt::Display for Fragmentation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A decoded fragmentation option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragOption {
    /// Scheme bits ([`ARRF`], [`QBF`]) and the [`PUSH`] flag.
    pub schemes: u8,
    /// The original (QNAME, QTYPE), only in ARRF fragment requests.
    pub question: Option<(Name, RrType)>,
}

/// Why option data could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// Empty data, a cut QTYPE, or a QNAME that is not one well-formed uncompressed name
    /// ending exactly at the end of the data.
    #[error("malformed fragmentation option")]
    Malformed,
}

impl FragOption {
    /// An option offering or announcing `schemes`, without a question.
    pub fn schemes(schemes: u8) -> FragOption {
        FragOption {
            schemes,
            question: None,
        }
    }

    /// The scheme bits without the [`PUSH`] flag.
    pub fn scheme_bits(&self) -> u8 {
        self.schemes & !PUSH
    }

    /// True if the [`PUSH`] flag is set.
    pub fn push(&self) -> bool {
        self.schemes & PUSH != 0
    }

    /// The option data (1 byte, or 3 + QNAME length bytes with a question).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.schemes];
        if let Some((qname, qtype)) = &self.question {
            out.extend(qtype.0.to_be_bytes());
            out.extend_from_slice(qname.as_wire());
        }
        out
    }

    /// Decodes option data.
    ///
    /// # Errors
    /// [`OptionError::Malformed`] as described there.
    pub fn decode(data: &[u8]) -> Result<FragOption, OptionError> {
        let (&schemes, rest) = data.split_first().ok_or(OptionError::Malformed)?;
        if rest.is_empty() {
            return Ok(FragOption::schemes(schemes));
        }
        let (qtype, qname) = rest.split_at_checked(2).ok_or(OptionError::Malformed)?;
        let (name, used) = Name::read_uncompressed(qname).map_err(|_| OptionError::Malformed)?;
        if used != qname.len() {
            return Err(OptionError::Malformed);
        }
        Ok(FragOption {
            schemes,
            question: Some((name, RrType(u16::from_be_bytes([qtype[0], qtype[1]])))),
        })
    }

    /// The option with `code` in `edns`, if present and well formed.
    pub fn find(edns: Option<&Edns>, code: u16) -> Option<FragOption> {
        FragOption::decode(edns?.option(code)?).ok()
    }

    /// Adds this option under `code` to `edns`, replacing an option with the same code.
    pub fn put(&self, edns: &mut Edns, code: u16) {
        edns.set_option(code, self.encode());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, Question};
    use crate::rr::Class;

    #[test]
    fn option_on_the_wire() {
        assert_eq!(FragOption::schemes(ARRF | QBF).encode(), [0x03]);
        let with_q = FragOption {
            schemes: ARRF,
            question: Some(("example.".parse().unwrap(), RrType::DNSKEY)),
        };
        assert_eq!(with_q.encode(), b"\x01\x00\x30\x07example\x00");
        assert_eq!(FragOption::decode(&with_q.encode()), Ok(with_q.clone()));
        // Inside a query's OPT: code 65108 = 0xfe54, length 1, data.
        let mut edns = Edns::dnssec_ok(1232);
        FragOption::schemes(QBF).put(&mut edns, DEFAULT_CODE);
        let q = Question {
            qname: "a.".parse().unwrap(),
            qtype: RrType::A,
            qclass: Class::IN,
        };
        let wire = Message::query(1, q, false, Some(edns.clone())).to_wire();
        assert_eq!(&wire[wire.len() - 7..], [0, 5, 0xfe, 0x54, 0, 1, 0x02]);
        assert_eq!(
            FragOption::find(Some(&edns), DEFAULT_CODE),
            Some(FragOption::schemes(QBF))
        );
        assert_eq!(FragOption::find(Some(&edns), 65001), None);
    }

    #[test]
    fn settings_names_parse() {
        assert_eq!("ARRF".parse(), Ok(Fragmentation::Arrf));
        assert_eq!("qbf".parse::<Fragmentation>().unwrap().bit(), QBF);
        assert_eq!("off".parse::<Fragmentation>().unwrap().bit(), 0);
        assert!("tcp".parse::<Fragmentation>().is_err());
    }

    #[test]
    fn malformed_options_are_errors() {
        for bad in [
            &b""[..],
            b"\x01\x00",
            b"\x01\x00\x01\x03abc",
            b"\x01\x00\x01\x00\x00",
        ] {
            assert_eq!(
                FragOption::decode(bad),
                Err(OptionError::Malformed),
                "{bad:?}"
            );
        }
    }
}

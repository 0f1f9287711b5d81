//! RDATA layouts: presentation ↔ wire conversion and canonical form (RFC 4034 §6.2).
//!
//! Each known type is described once as a list of fields; parsing, printing and
//! canonicalisation all walk that list, so a type is added in one place. Types without a layout
//! use the RFC 3597 generic syntax `\# <length> <hex>`, which is also accepted for every type.
//!
//! The same table says how each domain name inside RDATA travels (a `NameRule`): whether it may
//! be compressed on output, whether a compressed form is accepted on input, and whether
//! canonical form lowercases it. The wire layer (`crate::wire`) reads and writes RDATA names
//! with it, so compression, decompression and canonical form cannot disagree.

use std::fmt;

use base64::Engine as _;
use data_encoding::{BASE32HEX_NOPAD, HEXUPPER};

use crate::name::{parse_escape, Name};
use crate::rr::RrType;
use crate::time;

mod cert;
mod eui;
mod ipseckey;
mod loc;
mod svcb;

/// One field of an RDATA layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    U8,
    /// A DNSSEC algorithm number: on input a decimal number or a mnemonic (RFC 4034 §2.2,
    /// §3.2, §5.3 and Appendix A.1; [`crate::dnssec::SecAlg::parse`]), on output the
    /// number.
    Alg,
    U16,
    U32,
    /// An RR type number, printed as its mnemonic.
    Type,
    /// A 32-bit UNIX time printed as YYYYMMDDHHMMSS (RFC 4034 §3.2).
    Time,
    /// A domain name, treated as its [`NameRule`] says.
    DName(NameRule),
    Ipv4,
    Ipv6,
    CharString,
    /// All remaining character-strings (TXT).
    CharStrings,
    /// All remaining bytes, base64 in presentation format (keys, signatures).
    Base64,
    /// All remaining bytes, hex in presentation format (digests).
    Hex,
    /// One length byte then bytes, hex or `-` for empty (NSEC3 salt, RFC 5155 §3.3).
    Salt,
    /// One length byte then bytes, base32hex without padding (NSEC3 next hashed owner).
    Base32,
    /// The remaining bytes are a type bitmap (RFC 4034 §4.1.2).
    TypeBitmap,
    /// CAA tag: one length byte then ASCII (RFC 8659 §4.1).
    CaaTag,
    /// All remaining bytes as one quoted string (CAA value, RFC 8659 §4.1.1; URI target,
    /// RFC 7553 §4.5).
    Text,
    /// EUI-48 address, 6 bytes (RFC 7043 §3).
    Eui48,
    /// EUI-64 address, 8 bytes (RFC 7043 §4).
    Eui64,
    /// CERT certificate type: 16 bits, a mnemonic in presentation format (RFC 4398 §2.1).
    CertType,
    /// The whole LOC RDATA (RFC 1876 §2), [`loc`].
    Loc,
    /// IPSECKEY after the precedence: gateway type, algorithm, gateway and public key
    /// (RFC 4025 §2), [`ipseckey`].
    IpsecKey,
    /// SVCB/HTTPS SvcParams (RFC 9460 §2.2), [`svcb`].
    SvcParams,
}

use Field::*;

/// How one domain name inside RDATA is treated on the wire and in canonical form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameRule {
    /// May be compressed on output. RFC 3597 §4: only the types of RFC 1035 (here NS, CNAME,
    /// SOA, PTR, MX).
    pub compress: bool,
    /// A compressed form is accepted on input: the RFC 1035 types, and the types RFC 3597 §4
    /// says receivers SHOULD decompress (SRV, NAPTR) plus DNAME, which some servers compress
    /// although RFC 6672 §2.5 forbids it.
    pub decompress: bool,
    /// Lowercased in canonical form (RFC 4034 §6.2, as amended by RFC 6840 §5.1: not NSEC's
    /// next name).
    pub lower: bool,
}

/// A name of an RFC 1035 type: compressed on output and input, lowercased when canonical.
const RFC1035: Field = DName(NameRule {
    compress: true,
    decompress: true,
    lower: true,
});
/// A name some servers compress although they should not: accepted compressed, never written
/// compressed, lowercased when canonical (SRV, NAPTR, DNAME).
const LENIENT: Field = DName(NameRule {
    compress: false,
    decompress: true,
    lower: true,
});
/// A name never compressed, lowercased when canonical (RRSIG's signer, RFC 4034 §3.1.7).
const LOWER: Field = DName(NameRule {
    compress: false,
    decompress: false,
    lower: true,
});
/// A name never compressed and kept as is (NSEC's next name, RFC 4034 §4.1.1, RFC 6840 §5.1;
/// SVCB's TargetName, RFC 9460 §2.2, which RFC 4034 §6.2 does not list).
const KEEP: Field = DName(NameRule {
    compress: false,
    decompress: false,
    lower: false,
});

/// The layout of `rtype`'s RDATA: the one table of which types carry names and how.
pub(crate) fn layout(rtype: RrType) -> Option<&'static [Field]> {
    Some(match rtype {
        RrType::A => &[Ipv4],
        RrType::AAAA => &[Ipv6],
        RrType::NS | RrType::CNAME | RrType::PTR => &[RFC1035],
        RrType::DNAME => &[LENIENT],
        RrType::SOA => &[RFC1035, RFC1035, U32, U32, U32, U32, U32],
        RrType::MX => &[U16, RFC1035],
        RrType::TXT | RrType::SPF => &[CharStrings],
        RrType::HINFO => &[CharString, CharString],
        // RFC 3597 §4 asks receivers to decompress RP and AFSDB; RFC 4034 §6.2 lowercases
        // them and KX.
        RrType::RP => &[LENIENT, LENIENT],
        RrType::AFSDB => &[U16, LENIENT],
        RrType::KX => &[U16, LOWER],
        RrType::LOC => &[Loc],
        RrType::CERT => &[CertType, U16, Alg, Base64],
        RrType::IPSECKEY => &[U8, IpsecKey],
        RrType::DHCID | RrType::OPENPGPKEY => &[Base64],
        RrType::SMIMEA => &[U8, U8, U8, Hex],
        RrType::CSYNC => &[U32, U16, TypeBitmap],
        RrType::ZONEMD => &[U32, U8, U8, Hex],
        RrType::SVCB | RrType::HTTPS => &[U16, KEEP, SvcParams],
        RrType::EUI48 => &[Eui48],
        RrType::EUI64 => &[Eui64],
        RrType::URI => &[U16, U16, Text],
        RrType::SRV => &[U16, U16, U16, LENIENT],
        RrType::NAPTR => &[U16, U16, CharString, CharString, CharString, LENIENT],
        RrType::DS | RrType::CDS => &[U16, Alg, U8, Hex],
        RrType::SSHFP => &[U8, U8, Hex],
        RrType::RRSIG => &[Type, Alg, U8, U32, Time, Time, U16, LOWER, Base64],
        RrType::NSEC => &[KEEP, TypeBitmap],
        RrType::DNSKEY | RrType::CDNSKEY => &[U16, U8, Alg, Base64],
        RrType::NSEC3 => &[U8, U8, U16, Salt, Base32, TypeBitmap],
        RrType::NSEC3PARAM => &[U8, U8, U16, Salt],
        RrType::TLSA => &[U8, U8, U8, Hex],
        RrType::CAA => &[U8, CaaTag, Text],
        _ => return None,
    })
}

/// Why presentation-format RDATA could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RdataError {
    /// Fewer fields than the type needs.
    #[error("missing RDATA field: expected {0}")]
    Missing(&'static str),
    /// A field that does not parse; says what was expected and what was found.
    #[error("bad RDATA field {found:?}: expected {expected}")]
    Bad {
        /// What the field should be.
        expected: &'static str,
        /// The text found.
        found: String,
    },
    /// More fields than the type takes.
    #[error("unexpected extra RDATA {0:?}")]
    Extra(String),
    /// The RDATA would exceed 65535 bytes.
    #[error("RDATA longer than 65535 bytes")]
    TooLong,
    /// Fields that parse but break a rule of the type (named with its RFC section).
    #[error("bad RDATA {found:?}: {rule}")]
    Rule {
        /// The rule broken.
        rule: &'static str,
        /// The text found.
        found: String,
    },
    /// A type with no known layout, given without RFC 3597 `\#` syntax.
    #[error("type {0} has no presentation format here; use RFC 3597 \\# syntax")]
    UnknownType(RrType),
}

fn expected(field: Field) -> &'static str {
    match field {
        U8 => "an 8-bit number",
        Alg => "an algorithm number or mnemonic",
        U16 => "a 16-bit number",
        U32 => "a 32-bit number",
        Type => "an RR type",
        Time => "a time (YYYYMMDDHHMMSS or seconds)",
        DName(_) => "a domain name",
        Ipv4 => "an IPv4 address",
        Ipv6 => "an IPv6 address",
        CharString | CharStrings => "a character-string",
        Base64 => "base64 data",
        Hex => "hex data",
        Salt => "a hex salt or -",
        Base32 => "a base32hex hash",
        TypeBitmap => "RR types",
        CaaTag => "a CAA tag",
        Text => "a string",
        Eui48 => "an EUI-48 address (xx-xx-xx-xx-xx-xx)",
        Eui64 => "an EUI-64 address (xx-xx-xx-xx-xx-xx-xx-xx)",
        CertType => "a certificate type (RFC 4398 §2.1)",
        Loc => "a location (RFC 1876 §3)",
        IpsecKey => "gateway type, algorithm, gateway and key (RFC 4025 §3)",
        SvcParams => "SvcParams (RFC 9460 §2.1)",
    }
}

/// A presentation-format token as the zone-file lexer delivers it: text with escapes still in
/// place, and whether it was quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Raw text (escapes not yet decoded).
    pub text: String,
    /// True if the token was a quoted string.
    pub quoted: bool,
}

/// Parses presentation-format RDATA for `rtype` into uncompressed wire format. Relative names
/// are completed with `origin`.
///
/// # Errors
/// [`RdataError`] describing the first field that is missing, malformed or extra.
pub fn parse_presentation(
    rtype: RrType,
    tokens: &[Token],
    origin: Option<&Name>,
) -> Result<Vec<u8>, RdataError> {
    if tokens.first().is_some_and(|t| !t.quoted && t.text == "\\#") {
        return parse_generic(&tokens[1..]);
    }
    let fields = layout(rtype).ok_or(RdataError::UnknownType(rtype))?;
    let mut out = Vec::new();
    let mut rest = tokens;
    for &field in fields {
        let bad = |t: &Token| RdataError::Bad {
            expected: expected(field),
            found: t.text.clone(),
        };
        if is_rest_field(field) {
            parse_rest(field, rest, &mut out, origin)?;
            rest = &[];
            continue;
        }
        let (tok, tail) = rest
            .split_first()
            .ok_or(RdataError::Missing(expected(field)))?;
        rest = tail;
        let text = tok.text.as_str();
        match field {
            U8 => out.push(text.parse::<u8>().map_err(|_| bad(tok))?),
            Alg => out.push(
                crate::dnssec::SecAlg::parse(text)
                    .ok_or_else(|| bad(tok))?
                    .0,
            ),
            U16 => out.extend(text.parse::<u16>().map_err(|_| bad(tok))?.to_be_bytes()),
            U32 => out.extend(text.parse::<u32>().map_err(|_| bad(tok))?.to_be_bytes()),
            Type => out.extend(
                RrType::from_mnemonic(text)
                    .ok_or_else(|| bad(tok))?
                    .0
                    .to_be_bytes(),
            ),
            Time => out.extend(parse_time(text).ok_or_else(|| bad(tok))?.to_be_bytes()),
            DName(_) => {
                let name = Name::parse(text, origin).map_err(|_| bad(tok))?;
                out.extend_from_slice(name.as_wire());
            }
            Ipv4 => out.extend(
                text.parse::<std::net::Ipv4Addr>()
                    .map_err(|_| bad(tok))?
                    .octets(),
            ),
            Ipv6 => out.extend(
                text.parse::<std::net::Ipv6Addr>()
                    .map_err(|_| bad(tok))?
                    .octets(),
            ),
            CharString => push_char_string(&mut out, text).ok_or_else(|| bad(tok))?,
            Salt => {
                let salt = if text == "-" {
                    Vec::new()
                } else {
                    HEXUPPER
                        .decode(text.to_ascii_uppercase().as_bytes())
                        .map_err(|_| bad(tok))?
                };
                out.push(u8::try_from(salt.len()).map_err(|_| bad(tok))?);
                out.extend(salt);
            }
            Base32 => {
                let hash = BASE32HEX_NOPAD
                    .decode(text.to_ascii_uppercase().as_bytes())
                    .map_err(|_| bad(tok))?;
                out.push(u8::try_from(hash.len()).map_err(|_| bad(tok))?);
                out.extend(hash);
            }
            Eui48 | Eui64 => {
                let len = if field == Eui48 { 6 } else { 8 };
                out.extend(eui::parse(text, len).ok_or_else(|| bad(tok))?);
            }
            CertType => out.extend(
                cert::parse_type(text)
                    .ok_or_else(|| bad(tok))?
                    .to_be_bytes(),
            ),
            CaaTag => {
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(bad(tok));
                }
                out.push(u8::try_from(text.len()).map_err(|_| bad(tok))?);
                out.extend(text.bytes());
            }
            _ => unreachable!("rest fields handled above"),
        }
    }
    if let Some(extra) = rest.first() {
        return Err(RdataError::Extra(extra.text.clone()));
    }
    if out.len() > usize::from(u16::MAX) {
        return Err(RdataError::TooLong);
    }
    Ok(out)
}

fn is_rest_field(field: Field) -> bool {
    matches!(
        field,
        CharStrings | Base64 | Hex | TypeBitmap | Text | Loc | IpsecKey | SvcParams
    )
}

fn parse_rest(
    field: Field,
    tokens: &[Token],
    out: &mut Vec<u8>,
    origin: Option<&Name>,
) -> Result<(), RdataError> {
    let joined = || tokens.iter().map(|t| t.text.as_str()).collect::<String>();
    let bad = |found: String| RdataError::Bad {
        expected: expected(field),
        found,
    };
    match field {
        CharStrings => {
            if tokens.is_empty() {
                return Err(RdataError::Missing(expected(field)));
            }
            for tok in tokens {
                push_char_string(out, &tok.text).ok_or_else(|| bad(tok.text.clone()))?;
            }
        }
        Base64 => {
            let text = joined();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.as_bytes())
                .map_err(|_| bad(text.clone()))?;
            if bytes.is_empty() {
                return Err(RdataError::Missing(expected(field)));
            }
            out.extend(bytes);
        }
        Hex => {
            let text = joined().to_ascii_uppercase();
            let bytes = HEXUPPER
                .decode(text.as_bytes())
                .map_err(|_| bad(text.clone()))?;
            if bytes.is_empty() {
                return Err(RdataError::Missing(expected(field)));
            }
            out.extend(bytes);
        }
        TypeBitmap => {
            let mut types = Vec::with_capacity(tokens.len());
            for tok in tokens {
                types.push(RrType::from_mnemonic(&tok.text).ok_or_else(|| bad(tok.text.clone()))?);
            }
            write_type_bitmap(out, &types);
        }
        Loc => loc::parse(tokens, out)?,
        IpsecKey => ipseckey::parse(tokens, origin, out)?,
        SvcParams => svcb::parse(tokens, out)?,
        Text => {
            let tok = tokens.first().ok_or(RdataError::Missing(expected(field)))?;
            if let Some(extra) = tokens.get(1) {
                return Err(RdataError::Extra(extra.text.clone()));
            }
            let bytes = unescape(&tok.text).ok_or_else(|| bad(tok.text.clone()))?;
            out.extend(bytes);
        }
        _ => unreachable!("only rest fields reach parse_rest"),
    }
    Ok(())
}

fn parse_generic(tokens: &[Token]) -> Result<Vec<u8>, RdataError> {
    let (len_tok, hex) = tokens
        .split_first()
        .ok_or(RdataError::Missing("an RDATA length"))?;
    let len: usize = len_tok.text.parse().map_err(|_| RdataError::Bad {
        expected: "an RDATA length",
        found: len_tok.text.clone(),
    })?;
    let text: String = hex.iter().map(|t| t.text.as_str()).collect();
    let bytes = HEXUPPER
        .decode(text.to_ascii_uppercase().as_bytes())
        .map_err(|_| RdataError::Bad {
            expected: "hex data",
            found: text.clone(),
        })?;
    if bytes.len() != len {
        return Err(RdataError::Bad {
            expected: "hex data as long as the given length",
            found: text,
        });
    }
    if bytes.len() > usize::from(u16::MAX) {
        return Err(RdataError::TooLong);
    }
    Ok(bytes)
}

/// Decodes `\X` and `\DDD` escapes in a character-string.
fn unescape(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let (b, used) = parse_escape(&bytes[i + 1..]).ok()?;
            out.push(b);
            i += 1 + used;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn push_char_string(out: &mut Vec<u8>, text: &str) -> Option<()> {
    let bytes = unescape(text)?;
    out.push(u8::try_from(bytes.len()).ok()?);
    out.extend(bytes);
    Some(())
}

/// Writes an RFC 4034 §4.1.2 type bitmap for `types` (any order, duplicates ignored).
pub fn write_type_bitmap(out: &mut Vec<u8>, types: &[RrType]) {
    let mut sorted: Vec<u16> = types.iter().map(|t| t.0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut i = 0;
    while i < sorted.len() {
        let window = (sorted[i] >> 8) as u8;
        let mut bits = [0u8; 32];
        let mut used = 0;
        while i < sorted.len() && (sorted[i] >> 8) as u8 == window {
            let low = (sorted[i] & 0xff) as usize;
            bits[low / 8] |= 0x80 >> (low % 8);
            used = low / 8 + 1;
            i += 1;
        }
        out.push(window);
        out.push(used as u8);
        out.extend_from_slice(&bits[..used]);
    }
}

/// Reads an RFC 4034 §4.1.2 type bitmap; `None` if malformed.
pub fn read_type_bitmap(data: &[u8]) -> Option<Vec<RrType>> {
    Some(TypeBitmap::parse(data)?.iter().collect())
}

/// A type bitmap (RFC 4034 §4.1.2, RFC 5155 §3.2.1) borrowed from RDATA, checked when made:
/// windows in increasing order, each 1 to 32 bytes long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeBitmap<'a> {
    data: &'a [u8],
}

impl<'a> TypeBitmap<'a> {
    /// Checks `data` (the whole bitmap, to the end of the RDATA); `None` if a window is empty,
    /// longer than 32 bytes, cut off, or not in increasing order. An empty bitmap is valid
    /// (an empty non-terminal's NSEC3, RFC 5155 §3.2.1).
    pub fn parse(data: &'a [u8]) -> Option<TypeBitmap<'a>> {
        let mut rest = data;
        let mut last: Option<u8> = None;
        while let [window, len, tail @ ..] = rest {
            let len = usize::from(*len);
            if len == 0 || len > 32 || tail.len() < len || last.is_some_and(|l| l >= *window) {
                return None;
            }
            last = Some(*window);
            rest = &tail[len..];
        }
        rest.is_empty().then_some(TypeBitmap { data })
    }

    /// The types listed, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = RrType> + 'a {
        let mut rest = self.data;
        std::iter::from_fn(move || {
            let [window, len, tail @ ..] = rest else {
                return None;
            };
            let (bits, next) = tail.split_at(usize::from(*len));
            rest = next;
            let window = u16::from(*window) << 8;
            Some(bits.iter().enumerate().flat_map(move |(i, byte)| {
                (0..8u16)
                    .filter(move |bit| byte & (0x80 >> bit) != 0)
                    .map(move |bit| RrType(window | (i as u16 * 8 + bit)))
            }))
        })
        .flatten()
    }

    /// True if `rtype` is listed.
    pub fn contains(&self, rtype: RrType) -> bool {
        let [window, low] = rtype.0.to_be_bytes();
        let mut rest = self.data;
        while let [w, len, tail @ ..] = rest {
            let (bits, next) = tail.split_at(usize::from(*len));
            if *w == window {
                return bits
                    .get(usize::from(low / 8))
                    .is_some_and(|b| b & (0x80 >> (low % 8)) != 0);
            }
            rest = next;
        }
        false
    }

    /// The bitmap bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }
}

/// Parses an RRSIG time field: YYYYMMDDHHMMSS (UTC) or a decimal number of seconds.
pub fn parse_time(text: &str) -> Option<u32> {
    if text.len() == 14 && text.bytes().all(|b| b.is_ascii_digit()) {
        time::from_yyyymmddhhmmss(text).and_then(|t| u32::try_from(t).ok())
    } else {
        text.parse().ok()
    }
}

impl Field {
    /// The rule of a name field; `None` for other fields.
    pub(crate) fn name_rule(self) -> Option<NameRule> {
        match self {
            DName(rule) => Some(rule),
            _ => None,
        }
    }
}

/// Length in bytes of `field` at the start of `data` (uncompressed RDATA from this field to the
/// end of the RDATA), or `None` if it is malformed or runs past the end. Fields that take the
/// rest of the RDATA take all of `data`. Allocates nothing.
pub(crate) fn field_len(field: Field, data: &[u8]) -> Option<usize> {
    let counted = |d: &[u8]| Some(1 + usize::from(*d.first()?));
    let n = match field {
        U8 | Alg => 1,
        U16 | Type => 2,
        U32 | Time | Ipv4 => 4,
        Ipv6 => 16,
        Eui48 => 6,
        Eui64 => 8,
        CertType => 2,
        DName(_) => crate::name::uncompressed_len(data).ok()?,
        CharString | Salt | Base32 => counted(data)?,
        // RFC 8659 §4.1.1: the tag is at least one letter or digit, nothing else.
        CaaTag => {
            let n = counted(data)?;
            let tag = data.get(1..n)?;
            (!tag.is_empty() && tag.iter().all(u8::is_ascii_alphanumeric)).then_some(n)?
        }
        CharStrings => {
            if data.is_empty() {
                return None;
            }
            let mut at = 0;
            while at < data.len() {
                at += counted(&data[at..])?;
            }
            at
        }
        // Presentation format has no empty base64 or hex field: such RDATA prints as RFC 3597.
        Base64 | Hex => (!data.is_empty()).then_some(data.len())?,
        Text => data.len(),
        Loc => loc::check(data).then_some(data.len())?,
        IpsecKey => ipseckey::check(data).then_some(data.len())?,
        SvcParams => svcb::check(data).then_some(data.len())?,
        TypeBitmap => {
            TypeBitmap::parse(data)?;
            data.len()
        }
    };
    (n <= data.len()).then_some(n)
}

/// A field's position inside wire-format RDATA, found by walking the layout.
struct Walk<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Walk<'_> {
    /// Returns the byte range of the field and advances past it.
    fn field(&mut self, field: Field) -> Option<std::ops::Range<usize>> {
        let start = self.pos;
        self.pos += field_len(field, &self.data[start..])?;
        Some(start..self.pos)
    }
}

/// Lowercases the embedded names RFC 4034 §6.2 lists (as amended by RFC 6840 §5.1: not NSEC's
/// next name), in place. RDATA that does not match its layout is left unchanged.
pub fn canonicalize_rdata(rtype: RrType, rdata: &mut [u8]) {
    let Some(fields) = layout(rtype) else { return };
    let mut ranges = Vec::new();
    let mut walk = Walk {
        data: rdata,
        pos: 0,
    };
    for &field in fields {
        let Some(range) = walk.field(field) else {
            return;
        };
        if field.name_rule().is_some_and(|r| r.lower) {
            ranges.push(range);
        }
    }
    for range in ranges {
        rdata[range].make_ascii_lowercase();
    }
}

/// The RDATA in canonical form (RFC 4034 §6.2), as a new buffer.
pub fn canonical_rdata(rtype: RrType, rdata: &[u8]) -> Vec<u8> {
    let mut out = rdata.to_vec();
    canonicalize_rdata(rtype, &mut out);
    out
}

/// Checks that wire-format RDATA matches the type's layout (always true for types without one).
pub fn is_well_formed(rtype: RrType, rdata: &[u8]) -> bool {
    let Some(fields) = layout(rtype) else {
        return true;
    };
    let mut walk = Walk {
        data: rdata,
        pos: 0,
    };
    fields.iter().all(|&f| walk.field(f).is_some()) && walk.pos == rdata.len()
}

/// Writes RDATA in presentation format; RDATA that does not fit its layout (or has none) is
/// written in RFC 3597 generic syntax.
pub fn write_presentation(f: &mut impl fmt::Write, rtype: RrType, rdata: &[u8]) -> fmt::Result {
    if !is_well_formed(rtype, rdata) || layout(rtype).is_none() {
        return write!(f, "\\# {} {}", rdata.len(), HEXUPPER.encode(rdata));
    }
    let fields = layout(rtype).unwrap_or(&[]);
    let mut walk = Walk {
        data: rdata,
        pos: 0,
    };
    for (i, &field) in fields.iter().enumerate() {
        // SvcParams write their own separators: there may be none.
        if i > 0 && field != SvcParams {
            f.write_char(' ')?;
        }
        let Some(range) = walk.field(field) else {
            return Ok(());
        };
        let v = &rdata[range];
        match field {
            U8 | Alg => write!(f, "{}", v[0])?,
            U16 => write!(f, "{}", u16::from_be_bytes([v[0], v[1]]))?,
            U32 => write!(f, "{}", u32::from_be_bytes([v[0], v[1], v[2], v[3]]))?,
            Type => write!(f, "{}", RrType(u16::from_be_bytes([v[0], v[1]])))?,
            Time => f.write_str(&time::to_yyyymmddhhmmss(u64::from(u32::from_be_bytes([
                v[0], v[1], v[2], v[3],
            ]))))?,
            DName(_) => match crate::name::Name::from_wire(v) {
                Ok(n) => write!(f, "{n}")?,
                Err(_) => return Err(fmt::Error),
            },
            Ipv4 => write!(f, "{}", std::net::Ipv4Addr::new(v[0], v[1], v[2], v[3]))?,
            Ipv6 => {
                let octets: [u8; 16] = v.try_into().map_err(|_| fmt::Error)?;
                write!(f, "{}", std::net::Ipv6Addr::from(octets))?
            }
            CharString => write_char_string(f, &v[1..])?,
            CharStrings => {
                let mut rest = v;
                let mut first = true;
                while let Some((&len, tail)) = rest.split_first() {
                    if !first {
                        f.write_char(' ')?;
                    }
                    first = false;
                    write_char_string(f, &tail[..usize::from(len)])?;
                    rest = &tail[usize::from(len)..];
                }
            }
            Base64 => f.write_str(&base64::engine::general_purpose::STANDARD.encode(v))?,
            Hex => f.write_str(&HEXUPPER.encode(v))?,
            Salt if v.len() == 1 => f.write_char('-')?,
            Salt => f.write_str(&HEXUPPER.encode(&v[1..]))?,
            Base32 => f.write_str(&BASE32HEX_NOPAD.encode(&v[1..]))?,
            TypeBitmap => {
                let types = read_type_bitmap(v).unwrap_or_default();
                let list: Vec<String> = types.iter().map(ToString::to_string).collect();
                f.write_str(&list.join(" "))?
            }
            CaaTag => f.write_str(&String::from_utf8_lossy(&v[1..]))?,
            Text => write_char_string(f, v)?,
            Eui48 | Eui64 => eui::write(f, v)?,
            CertType => {
                let number = u16::from_be_bytes([v[0], v[1]]);
                match cert::type_mnemonic(number) {
                    Some(m) => f.write_str(m)?,
                    None => write!(f, "{number}")?,
                }
            }
            Loc => loc::write(f, v)?,
            IpsecKey => ipseckey::write(f, v)?,
            SvcParams => svcb::write(f, v)?,
        }
    }
    Ok(())
}

fn write_char_string(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    f.write_char('"')?;
    for &b in bytes {
        match b {
            b'"' | b'\\' => write!(f, "\\{}", b as char)?,
            0x20..=0x7e => f.write_char(b as char)?,
            _ => write!(f, "\\{b:03}")?,
        }
    }
    f.write_char('"')
}

/// RDATA rendered as a presentation-format string.
pub fn to_presentation(rtype: RrType, rdata: &[u8]) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail except on malformed names, already checked above.
    let _ = write_presentation(&mut s, rtype, rdata);
    s
}

/// Wire RDATA from presentation text split at white space (tests only).
#[cfg(test)]
pub(crate) fn wire_from_text(rtype: RrType, text: &str, origin: Option<&Name>) -> Vec<u8> {
    let tokens: Vec<Token> = text
        .split_whitespace()
        .map(|t| Token {
            text: t.to_string(),
            quoted: false,
        })
        .collect();
    parse_presentation(rtype, &tokens, origin).expect("test RDATA parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Token> {
        s.split_whitespace()
            .map(|t| Token {
                text: t.to_string(),
                quoted: false,
            })
            .collect()
    }

    fn round_trip(rtype: RrType, text: &str) -> String {
        let origin: Name = "example.com.".parse().unwrap();
        to_presentation(rtype, &wire_from_text(rtype, text, Some(&origin)))
    }

    #[test]
    fn presentation_round_trips() {
        assert_eq!(round_trip(RrType::MX, "10 mail"), "10 mail.example.com.");
        assert_eq!(
            round_trip(RrType::SOA, "ns1 hostmaster 1 7200 3600 1209600 300"),
            "ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 300"
        );
        assert_eq!(round_trip(RrType::AAAA, "2001:db8::1"), "2001:db8::1");
        assert_eq!(
            round_trip(RrType::NSEC, "a.example.com. A MX RRSIG NSEC TYPE1234"),
            "a.example.com. A MX RRSIG NSEC TYPE1234"
        );
        assert_eq!(
            round_trip(
                RrType::NSEC3,
                "1 0 0 - 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG"
            ),
            "1 0 0 - 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG"
        );
        assert_eq!(
            round_trip(
                RrType::RRSIG,
                "A 18 3 3600 20300101000000 20250101000000 59829 example.com. AAEC"
            ),
            "A 18 3 3600 20300101000000 20250101000000 59829 example.com. AAEC"
        );
        assert_eq!(round_trip(RrType::DS, "1 13 2 ab CD"), "1 13 2 ABCD");
        assert_eq!(round_trip(RrType(65000), "\\# 2 abcd"), "\\# 2 ABCD");
    }

    /// Presentation text through the zone-file lexer (quoted strings), to wire.
    fn read(rtype: &str, text: &str) -> Result<Vec<u8>, String> {
        crate::zonefile::ZoneFileReader::new(Some("example.com.".parse().unwrap()), Some(60))
            .read_str(&format!("x {rtype} {text}"), "t")
            .map(|mut r| r.remove(0).rdata)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn types_added_for_zone_file_compatibility_have_their_wire_form() {
        let hex = |h: &str| HEXUPPER.decode(h.to_ascii_uppercase().as_bytes()).unwrap();
        // (type, presentation in, wire, presentation out)
        let cases = [
            // RFC 1876 §4 example; wire computed from §2 (size 30m = 3e3 cm, defaults 1e6, 1e3).
            ("LOC", "42 21 54 N 71 06 18 W -24m 30m", "0033161389172dd070be15f000988d20",
             "42 21 54.000 N 71 6 18.000 W -24.00m 30m 10000m 10m"),
            ("LOC", "52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m",
             "000016138b3cf018810cbce0009895b8", "52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m"),
            // RFC 7043 §3.2 and §4.2 examples.
            ("EUI48", "00-00-5e-00-53-2a", "00005e00532a", "00-00-5e-00-53-2a"),
            ("EUI64", "00-00-5E-EF-10-00-00-2a", "00005eef1000002a", "00-00-5e-ef-10-00-00-2a"),
            // RFC 4025 §3.3 examples (gateway types 1, 0, 3 and 2).
            ("IPSECKEY", "( 10 1 2 192.0.2.38 AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ== )",
             "0a0102c0000226 010351537986ed35533b6064478eeeb27b5bd74dae149b6e81ba3a0521af82ab7801",
             "10 1 2 192.0.2.38 AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ=="),
            ("IPSECKEY", "10 0 2 . AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ==",
             "0a0002 010351537986ed35533b6064478eeeb27b5bd74dae149b6e81ba3a0521af82ab7801",
             "10 0 2 . AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ=="),
            ("IPSECKEY", "10 3 0 gw", "0a0300 026777076578616d706c6503636f6d00", "10 3 0 gw.example.com."),
            ("IPSECKEY", "10 2 0 2001:0DB8:0:8002::2000:1", "0a0200 20010db8000080020000000020000001",
             "10 2 0 2001:db8:0:8002::2000:1"),
            // RFC 4398 §2.1 mnemonics, the algorithm as a mnemonic too.
            ("CERT", "PGP 0 0 AQID", "0003 0000 00 010203", "PGP 0 0 AQID"),
            ("CERT", "1 12345 RSASHA256 AQID", "0001 3039 08 010203", "PKIX 12345 8 AQID"),
            ("CERT", "65000 1 1 AQID", "fde8 0001 01 010203", "65000 1 1 AQID"),
            // RFC 7477 §2.3 example.
            ("CSYNC", "66 3 A NS AAAA", "00000042 0003 0004 6000 0008", "66 3 A NS AAAA"),
            // RFC 7553 §4.5; RFC 1183 §1, §2.2; RFC 2230; RFC 4701 §3.6.
            ("URI", "10 1 \"ftp://ftp1.example.com/public\"",
             "000a 0001 6674703a2f2f667470312e6578616d706c652e636f6d2f7075626c6963",
             "10 1 \"ftp://ftp1.example.com/public\""),
            ("AFSDB", "1 afs", "0001 03616673 076578616d706c6503636f6d00", "1 afs.example.com."),
            ("RP", "mbox.example. .", "046d626f78 076578616d706c6500 00", "mbox.example. ."),
            ("KX", "10 kx", "000a 026b78 076578616d706c6503636f6d00", "10 kx.example.com."),
            ("DHCID", "( AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA= )",
             "000201636fc0b8271c82825bb1ac5c41cf5351aa69b4febd94e8f17cdb95000da48c40",
             "AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA="),
            ("ZONEMD", "2018031500 1 1 ( FEBE3D4CE2EC2FFA4BA99D46CD69D6D29711E55217057BEE 7EB1A7B641A47BA7FED2DD5B97AE499FAFA4F22C6BD647DE )",
             "7848b78c 01 01 febe3d4ce2ec2ffa4ba99d46cd69d6d29711e55217057bee7eb1a7b641a47ba7fed2dd5b97ae499fafa4f22c6bd647de",
             "2018031500 1 1 FEBE3D4CE2EC2FFA4BA99D46CD69D6D29711E55217057BEE7EB1A7B641A47BA7FED2DD5B97AE499FAFA4F22C6BD647DE"),
            ("SMIMEA", "3 0 0 ab12", "030000ab12", "3 0 0 AB12"),
            ("OPENPGPKEY", "AQID BAU=", "0102030405", "AQIDBAU="),
        ];
        for (rtype, text, wire, out) in cases {
            let wire: String = wire.split_whitespace().collect();
            let rdata = read(rtype, text).unwrap_or_else(|e| panic!("{rtype} {text}: {e}"));
            assert_eq!(rdata, hex(&wire), "{rtype} {text}");
            let t = RrType::from_mnemonic(rtype).unwrap();
            assert_eq!(to_presentation(t, &rdata), out, "{rtype} {text}");
            assert_eq!(read(rtype, out).unwrap(), rdata, "{rtype} {out}");
        }
    }

    /// Every well-formed RDATA prints to text that parses back to the same bytes, and no
    /// RDATA makes printing fail or panic: random bytes (a fixed xorshift sequence, bounded)
    /// for each added type, and random SvcParams built in key order.
    #[test]
    fn random_rdata_of_the_added_types_prints_and_parses_back() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let types = [
            RrType::SVCB,
            RrType::HTTPS,
            RrType::LOC,
            RrType::IPSECKEY,
            RrType::EUI48,
            RrType::EUI64,
            RrType::CERT,
            RrType::CSYNC,
            RrType::URI,
            RrType::RP,
            RrType::AFSDB,
            RrType::KX,
            RrType::ZONEMD,
            RrType::CAA,
        ];
        let mut well_formed = 0;
        for round in 0..20_000 {
            let rtype = types[round % types.len()];
            let mut rdata: Vec<u8> = (0..next() % 48).map(|_| next() as u8).collect();
            match rtype {
                // Small values make valid gateway types, LOC versions and SvcParams likely.
                RrType::IPSECKEY | RrType::LOC => rdata.iter_mut().take(2).for_each(|b| *b %= 4),
                RrType::SVCB | RrType::HTTPS => {
                    rdata = vec![0, 1, 0];
                    let mut key = 0u16;
                    for _ in 0..next() % 4 {
                        key += 1 + (next() % 9) as u16;
                        let value: Vec<u8> = (0..next() % 9).map(|_| next() as u8).collect();
                        rdata.extend(key.to_be_bytes());
                        rdata.extend((value.len() as u16).to_be_bytes());
                        rdata.extend(value);
                    }
                }
                _ => {}
            }
            let text = to_presentation(rtype, &rdata);
            if !is_well_formed(rtype, &rdata) {
                assert!(text.starts_with("\\# "), "{rtype} {text}");
                continue;
            }
            well_formed += 1;
            let back = read(&rtype.to_string(), &text)
                .unwrap_or_else(|e| panic!("{rtype} {rdata:02x?} printed as {text:?}: {e}"));
            assert_eq!(back, rdata, "{rtype} {text}");
        }
        assert!(well_formed > 2_000, "{well_formed} well-formed samples");
    }

    #[test]
    fn bad_rdata_of_the_added_types_is_refused() {
        for (rtype, text) in [
            ("LOC", "91 0 0 N 0 0 0 E 0m"),
            ("LOC", "42 60 0 N 0 0 0 E 0m"),
            ("LOC", "42 N 181 W 0m"),
            ("LOC", "42 N 71 W"),
            ("LOC", "42 N 71 W 0m 1m 1m 1m 1m"),
            ("LOC", "42 N 71 W 0m 90000001m"),
            ("EUI48", "00-00-5e-00-53"),
            ("EUI48", "00:00:5e:00:53:2a"),
            ("EUI64", "00-00-5e-00-53-2a"),
            ("IPSECKEY", "10 0 2 gw.example. AQID"),
            ("IPSECKEY", "10 4 2 . AQID"),
            ("IPSECKEY", "10 1 2 2001:db8::1 AQID"),
            ("CERT", "NOPE 0 0 AQID"),
            ("URI", "10 1"),
            ("CSYNC", "66 3 BOGUS"),
        ] {
            assert!(read(rtype, text).is_err(), "{rtype} {text}");
        }
        // A LOC of version 1 or the wrong length is data, printed in RFC 3597 form.
        assert!(to_presentation(RrType::LOC, &[1; 16]).starts_with("\\# 16"));
        assert!(to_presentation(RrType::EUI48, &[1; 5]).starts_with("\\# 5"));
    }

    #[test]
    fn algorithm_mnemonics_are_accepted_where_the_number_goes() {
        // RFC 4034 §2.2, §3.2, §5.3: "either as an unsigned decimal integer or as an algorithm
        // mnemonic". Written back as the number.
        assert_eq!(round_trip(RrType::DS, "1 RSASHA1 1 ab"), "1 5 1 AB");
        assert_eq!(
            round_trip(RrType::DS, "1 ecdsap256sha256 2 ab"),
            "1 13 2 AB"
        );
        assert_eq!(
            round_trip(RrType::DNSKEY, "257 3 RSASHA1-NSEC3-SHA1 AAEC"),
            "257 3 7 AAEC"
        );
        assert_eq!(
            round_trip(RrType::DNSKEY, "256 3 ML-DSA-44 AAEC"),
            "256 3 18 AAEC"
        );
        assert_eq!(
            round_trip(
                RrType::RRSIG,
                "A ED25519 3 3600 20300101000000 20250101000000 59829 example.com. AAEC"
            ),
            "A 15 3 3600 20300101000000 20250101000000 59829 example.com. AAEC"
        );
        let origin: Name = "example.com.".parse().unwrap();
        let tokens: Vec<Token> = ["1", "NOSUCHALG", "1", "ab"]
            .iter()
            .map(|t| Token {
                text: t.to_string(),
                quoted: false,
            })
            .collect();
        assert!(parse_presentation(RrType::DS, &tokens, Some(&origin)).is_err());
    }

    #[test]
    fn type_bitmap_matches_rfc4034_example() {
        // RFC 4034 §4.3: A MX RRSIG NSEC TYPE1234.
        let mut out = Vec::new();
        write_type_bitmap(
            &mut out,
            &[
                RrType::A,
                RrType::MX,
                RrType::RRSIG,
                RrType::NSEC,
                RrType(1234),
            ],
        );
        let expected = [
            0x00, 0x06, 0x40, 0x01, 0x00, 0x00, 0x00, 0x03, 0x04, 0x1b, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn canonical_form_lowercases_only_listed_names() {
        let origin: Name = "Example.COM.".parse().unwrap();
        let mut mx = parse_presentation(RrType::MX, &toks("10 MAIL"), Some(&origin)).unwrap();
        canonicalize_rdata(RrType::MX, &mut mx);
        assert_eq!(
            &mx[2..],
            "mail.example.com.".parse::<Name>().unwrap().as_wire()
        );
        let nsec = parse_presentation(RrType::NSEC, &toks("ABC A"), Some(&origin)).unwrap();
        assert_eq!(canonical_rdata(RrType::NSEC, &nsec), nsec);
    }

    #[test]
    fn bad_rdata_is_an_error_naming_the_field() {
        let err = parse_presentation(RrType::MX, &toks("ten mail."), None).unwrap_err();
        assert_eq!(
            err,
            RdataError::Bad {
                expected: "a 16-bit number",
                found: "ten".into()
            }
        );
        assert_eq!(
            parse_presentation(RrType::A, &toks("1.2.3.4 5"), None),
            Err(RdataError::Extra("5".into()))
        );
        assert!(matches!(
            parse_presentation(RrType::SOA, &toks("a. b. 1"), None),
            Err(RdataError::Missing(_))
        ));
        assert!(parse_presentation(RrType(65000), &toks("\\# 3 abcd"), None).is_err());
    }
}

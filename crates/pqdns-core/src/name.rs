//! Domain names (RFC 1035 §3.1) with canonical ordering (RFC 4034 §6.1).
//!
//! A [`Name`] holds an absolute name in uncompressed wire format, case preserved. Equality and
//! ordering ignore ASCII case and follow the DNSSEC canonical order, so a `BTreeMap<Name, _>`
//! iterates a zone in the order NSEC chains need.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Longest name in wire format, in bytes (RFC 1035 §3.1).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label, in bytes (RFC 1035 §3.1).
pub const MAX_LABEL_LEN: usize = 63;

/// Why a name could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// A label is longer than 63 bytes.
    #[error("label longer than 63 bytes")]
    LabelTooLong,
    /// The whole name is longer than 255 bytes in wire format.
    #[error("name longer than 255 bytes")]
    NameTooLong,
    /// Two dots in a row, or a dot at the start of a name other than the root.
    #[error("empty label")]
    EmptyLabel,
    /// A `\` escape that is not `\X` or `\DDD` with DDD ≤ 255.
    #[error("bad escape sequence")]
    BadEscape,
    /// A relative name was given where no origin is known.
    #[error("relative name without an origin")]
    NoOrigin,
    /// Wire-format name runs past the end of its buffer or uses a bad label type.
    #[error("malformed wire-format name")]
    BadWire,
}

/// An absolute domain name: uncompressed wire format, case preserved, compared case-insensitively
/// in canonical DNS order (RFC 4034 §6.1).
#[derive(Clone)]
pub struct Name {
    wire: Box<[u8]>,
}

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name {
            wire: Box::new([0]),
        }
    }

    /// Builds a name from uncompressed wire format (a sequence of length-prefixed labels ending in
    /// the zero-length root label).
    ///
    /// # Errors
    /// [`NameError`] if a label is too long, the total exceeds 255 bytes, or the data does not end
    /// exactly at the root label.
    pub fn from_wire(wire: &[u8]) -> Result<Name, NameError> {
        let (name, used) = Name::read_uncompressed(wire)?;
        if used != wire.len() {
            return Err(NameError::BadWire);
        }
        Ok(name)
    }

    /// Reads an uncompressed name from the start of `data`; returns it and the bytes consumed.
    ///
    /// # Errors
    /// [`NameError::BadWire`] on truncation or a compression pointer, and length errors.
    pub fn read_uncompressed(data: &[u8]) -> Result<(Name, usize), NameError> {
        let used = uncompressed_len(data)?;
        Ok((Name::from_checked_wire(&data[..used]), used))
    }

    /// A name from wire bytes already checked by [`uncompressed_len`] (or a decoder that keeps
    /// the same rules).
    pub(crate) fn from_checked_wire(wire: &[u8]) -> Name {
        debug_assert_eq!(uncompressed_len(wire), Ok(wire.len()));
        Name { wire: wire.into() }
    }

    /// Parses presentation format (RFC 1035 §5.1): `www.example.com.`, escapes `\.` and `\DDD`,
    /// `@` for the origin. A name without a trailing dot is relative and gets `origin` appended.
    ///
    /// # Errors
    /// [`NameError`] for bad escapes, label or name length, empty labels, or a relative name
    /// with no origin.
    pub fn parse(text: &str, origin: Option<&Name>) -> Result<Name, NameError> {
        if text == "@" {
            return origin.cloned().ok_or(NameError::NoOrigin);
        }
        if text == "." {
            return Ok(Name::root());
        }
        let bytes = text.as_bytes();
        let mut wire = Vec::with_capacity(bytes.len() + 2);
        let mut label = Vec::with_capacity(MAX_LABEL_LEN);
        let mut i = 0;
        let mut absolute = false;
        while i < bytes.len() {
            match bytes[i] {
                b'.' => {
                    push_label(&mut wire, &label)?;
                    label.clear();
                    if i + 1 == bytes.len() {
                        absolute = true;
                    }
                    i += 1;
                }
                b'\\' => {
                    let (byte, used) = parse_escape(&bytes[i + 1..])?;
                    label.push(byte);
                    i += 1 + used;
                }
                b => {
                    label.push(b);
                    i += 1;
                }
            }
        }
        if !absolute {
            push_label(&mut wire, &label)?;
            let origin = origin.ok_or(NameError::NoOrigin)?;
            wire.extend_from_slice(&origin.wire);
        } else {
            wire.push(0);
        }
        if wire.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        Ok(Name { wire: wire.into() })
    }

    /// The name in uncompressed wire format, case preserved.
    pub fn as_wire(&self) -> &[u8] {
        &self.wire
    }

    /// Length of the wire format, in bytes (1 for the root).
    pub fn wire_len(&self) -> usize {
        self.wire.len()
    }

    /// Writes the name in canonical form (RFC 4034 §6.2: uncompressed, ASCII lowercase).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        out.extend(self.wire.iter().map(u8::to_ascii_lowercase));
    }

    /// A copy with ASCII letters lowercased.
    pub fn to_lowercase(&self) -> Name {
        let mut wire = Vec::with_capacity(self.wire.len());
        self.write_canonical(&mut wire);
        Name { wire: wire.into() }
    }

    /// Iterates the labels left to right, without the root label.
    pub fn labels(&self) -> Labels<'_> {
        Labels {
            wire: &self.wire,
            pos: 0,
        }
    }

    /// Number of labels, not counting the root.
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// True for the root name.
    pub fn is_root(&self) -> bool {
        self.wire.len() == 1
    }

    /// True when the leftmost label is `*` (RFC 4592 §2.1.1).
    pub fn is_wildcard(&self) -> bool {
        self.wire.len() >= 2 && self.wire[0] == 1 && self.wire[1] == b'*'
    }

    /// The name with its leftmost label removed; `None` for the root.
    pub fn parent(&self) -> Option<Name> {
        if self.is_root() {
            return None;
        }
        let skip = 1 + self.wire[0] as usize;
        Some(Name {
            wire: self.wire[skip..].into(),
        })
    }

    /// True if `self` is `other` or lies below it.
    pub fn is_subdomain_of(&self, other: &Name) -> bool {
        let (a, b) = (self.wire_len(), other.wire_len());
        if a < b {
            return false;
        }
        // The suffix must start on a label boundary.
        let mut pos = 0;
        while a - pos > b {
            pos += 1 + self.wire[pos] as usize;
        }
        a - pos == b && self.wire[pos..].eq_ignore_ascii_case(&other.wire)
    }

    /// Prepends one label (raw bytes).
    ///
    /// # Errors
    /// [`NameError`] if the label or the result is too long, or the label is empty.
    pub fn prepend_label(&self, label: &[u8]) -> Result<Name, NameError> {
        let mut wire = Vec::with_capacity(self.wire.len() + label.len() + 1);
        push_label(&mut wire, label)?;
        wire.extend_from_slice(&self.wire);
        if wire.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        Ok(Name { wire: wire.into() })
    }

    /// DNAME substitution (RFC 6672 §2.2): the labels of `self` below `owner`, followed by
    /// `target`. `None` if `self` is not strictly below `owner`.
    ///
    /// # Errors
    /// [`NameError::NameTooLong`] when the result would exceed 255 bytes (the server then
    /// answers YXDOMAIN, RFC 6672 §2.2).
    pub fn replace_suffix(&self, owner: &Name, target: &Name) -> Option<Result<Name, NameError>> {
        if self.wire_len() == owner.wire_len() || !self.is_subdomain_of(owner) {
            return None;
        }
        let prefix = &self.wire[..self.wire_len() - owner.wire_len()];
        if prefix.len() + target.wire_len() > MAX_NAME_LEN {
            return Some(Err(NameError::NameTooLong));
        }
        let mut wire = Vec::with_capacity(prefix.len() + target.wire_len());
        wire.extend_from_slice(prefix);
        wire.extend_from_slice(&target.wire);
        Some(Ok(Name { wire: wire.into() }))
    }

    /// The wildcard `*.<parent>` that could synthesise this name's answers.
    pub fn wildcard_of_parent(&self) -> Option<Name> {
        self.parent().and_then(|p| p.prepend_label(b"*").ok())
    }
}

/// Length of the uncompressed name at the start of `data`, in bytes, checked: labels of at
/// most 63 bytes, at most 255 bytes in all, ending in the root label inside `data`.
///
/// # Errors
/// [`NameError::BadWire`] on truncation or a label type other than a length (e.g. a
/// compression pointer), [`NameError::NameTooLong`] past 255 bytes.
pub(crate) fn uncompressed_len(data: &[u8]) -> Result<usize, NameError> {
    let mut pos = 0;
    loop {
        let len = *data.get(pos).ok_or(NameError::BadWire)? as usize;
        if len > MAX_LABEL_LEN {
            return Err(NameError::BadWire);
        }
        pos += 1 + len;
        if pos > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        if pos > data.len() {
            return Err(NameError::BadWire);
        }
        if len == 0 {
            return Ok(pos);
        }
    }
}

/// A domain name borrowed in uncompressed wire format, checked when made (labels of at most
/// 63 bytes, at most 255 bytes, ending in the root label); the typed RDATA views
/// (`crate::wire::rdata`) hand out embedded names this way without allocating.
#[derive(Clone, Copy)]
pub struct NameRef<'a> {
    wire: &'a [u8],
}

impl<'a> NameRef<'a> {
    /// Reads the uncompressed name at the start of `data`; returns it and its length in bytes.
    ///
    /// # Errors
    /// As [`Name::read_uncompressed`].
    pub fn read(data: &'a [u8]) -> Result<(NameRef<'a>, usize), NameError> {
        let used = uncompressed_len(data)?;
        Ok((
            NameRef {
                wire: &data[..used],
            },
            used,
        ))
    }

    /// The name in uncompressed wire format, case preserved.
    pub fn as_wire(&self) -> &'a [u8] {
        self.wire
    }

    /// Length of the wire format, in bytes.
    pub fn wire_len(&self) -> usize {
        self.wire.len()
    }

    /// The owned [`Name`].
    pub fn to_name(&self) -> Name {
        Name::from_checked_wire(self.wire)
    }
}

impl PartialEq for NameRef<'_> {
    /// Equal ignoring ASCII case, as [`Name`] compares.
    fn eq(&self, other: &NameRef<'_>) -> bool {
        self.wire.eq_ignore_ascii_case(other.wire)
    }
}
impl Eq for NameRef<'_> {}

impl PartialEq<Name> for NameRef<'_> {
    fn eq(&self, other: &Name) -> bool {
        self.wire.eq_ignore_ascii_case(&other.wire)
    }
}

impl fmt::Display for NameRef<'_> {
    /// Presentation format, as [`Name`]'s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_name(), f)
    }
}

impl fmt::Debug for NameRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameRef({self})")
    }
}

fn push_label(wire: &mut Vec<u8>, label: &[u8]) -> Result<(), NameError> {
    if label.is_empty() {
        return Err(NameError::EmptyLabel);
    }
    if label.len() > MAX_LABEL_LEN {
        return Err(NameError::LabelTooLong);
    }
    wire.push(label.len() as u8);
    wire.extend_from_slice(label);
    Ok(())
}

/// Parses the part after a backslash: `X` or `DDD`. Returns the byte and the characters used.
pub(crate) fn parse_escape(rest: &[u8]) -> Result<(u8, usize), NameError> {
    match rest {
        [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            let v = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            u8::try_from(v)
                .map(|v| (v, 3))
                .map_err(|_| NameError::BadEscape)
        }
        [a, ..] if !a.is_ascii_digit() => Ok((*a, 1)),
        _ => Err(NameError::BadEscape),
    }
}

/// Iterator over a name's labels, left to right.
pub struct Labels<'a> {
    wire: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let len = self.wire[self.pos] as usize;
        if len == 0 {
            return None;
        }
        let label = &self.wire[self.pos + 1..self.pos + 1 + len];
        self.pos += 1 + len;
        Some(label)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.wire.eq_ignore_ascii_case(&other.wire)
    }
}
impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for b in self.wire.iter() {
            state.write_u8(b.to_ascii_lowercase());
        }
    }
}

impl Ord for Name {
    /// Canonical DNS name order, RFC 4034 §6.1: labels compared right to left as lowercase byte
    /// strings, a missing label sorting first.
    fn cmp(&self, other: &Name) -> Ordering {
        let (a, b) = (&*self.wire, &*other.wire);
        if a == b {
            return Ordering::Equal;
        }
        let (na, nb) = (label_count_of(a), label_count_of(b));
        // Align the rightmost labels: skip the extra leftmost labels of the longer name. Then
        // one pass left to right over the aligned labels: the rightmost pair that differs
        // decides; none, and the name with fewer labels sorts first.
        let (mut i, mut j) = (
            skip_labels(a, na.saturating_sub(nb)),
            skip_labels(b, nb.saturating_sub(na)),
        );
        let mut decisive = None;
        while a[i] != 0 {
            let (x, y) = (label_at(a, i), label_at(b, j));
            if !x.eq_ignore_ascii_case(y) {
                decisive = Some((x, y));
            }
            i += 1 + x.len();
            j += 1 + y.len();
        }
        match decisive {
            Some((x, y)) => cmp_label(x, y),
            None => na.cmp(&nb),
        }
    }
}

/// Labels in the uncompressed wire name `wire`, the root not counted.
fn label_count_of(wire: &[u8]) -> usize {
    let (mut n, mut pos) = (0, 0);
    while wire[pos] != 0 {
        n += 1;
        pos += 1 + usize::from(wire[pos]);
    }
    n
}

/// The offset in `wire` after its first `n` labels.
fn skip_labels(wire: &[u8], n: usize) -> usize {
    (0..n).fold(0, |pos, _| pos + 1 + usize::from(wire[pos]))
}

/// The label (without its length octet) at offset `at` of `wire`.
fn label_at(wire: &[u8], at: usize) -> &[u8] {
    &wire[at + 1..at + 1 + usize::from(wire[at])]
}

/// Two labels as lowercase byte strings (RFC 4034 §6.1); names of one zone share their
/// rightmost labels, so equal labels are checked first.
fn cmp_label(x: &[u8], y: &[u8]) -> Ordering {
    if x.eq_ignore_ascii_case(y) {
        return Ordering::Equal;
    }
    x.iter()
        .zip(y)
        .map(|(p, q)| p.to_ascii_lowercase().cmp(&q.to_ascii_lowercase()))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| x.len().cmp(&y.len()))
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Name {
    /// Presentation format, absolute (trailing dot), with `\.`, `\\` and `\DDD` escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            return f.write_str(".");
        }
        for label in self.labels() {
            write_label(f, label)?;
            f.write_str(".")?;
        }
        Ok(())
    }
}

/// Writes one label in presentation format.
pub(crate) fn write_label(f: &mut impl fmt::Write, label: &[u8]) -> fmt::Result {
    for &b in label {
        match b {
            b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => write!(f, "\\{}", b as char)?,
            0x21..=0x7e => f.write_char(b as char)?,
            _ => write!(f, "\\{b:03}")?,
        }
    }
    Ok(())
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl std::str::FromStr for Name {
    type Err = NameError;
    /// Parses an absolute name; a name without a trailing dot is taken as relative to the root.
    fn from_str(s: &str) -> Result<Name, NameError> {
        Name::parse(s, Some(&Name::root()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn canonical_order_matches_rfc4034_example() {
        // RFC 4034 §6.1 lists these names in canonical order.
        let ordered = [
            "example.",
            "a.example.",
            "yljkjljk.a.example.",
            "Z.a.example.",
            "zABC.a.EXAMPLE.",
            "z.example.",
            "\\001.z.example.",
            "*.z.example.",
            "\\200.z.example.",
        ];
        let names: Vec<Name> = ordered.iter().map(|s| n(s)).collect();
        for pair in names.windows(2) {
            assert_eq!(pair[0].cmp(&pair[1]), Ordering::Less, "{:?}", pair);
        }
    }

    #[test]
    fn order_is_the_reversed_lowercase_label_sequence() {
        // The definition of RFC 4034 §6.1, spelled out, against every pair of these names.
        let reference = |name: &Name| -> Vec<Vec<u8>> {
            let mut labels: Vec<Vec<u8>> = name.labels().map(|l| l.to_ascii_lowercase()).collect();
            labels.reverse();
            labels
        };
        let mut names: Vec<Name> = [
            ".",
            "a.",
            "A.",
            "a.b.",
            "b.a.",
            "aa.",
            "a.aa.",
            "ab.a.",
            "Ab.A.",
            "\\000.a.",
            "\\255.a.",
            "a\\000.a.",
            "x.y.z.",
            "x.Y.z.",
            "w.x.y.z.",
            "z.",
            "www.example.",
            "WWW.example.",
            "www1.example.",
            "ww.example.",
            "*.example.",
        ]
        .iter()
        .map(|s| n(s))
        .collect();
        // The most labels a name can have (127, 255 octets), and names that differ only far left.
        for first in ["a.", "b.", "B."] {
            names.push(n(&format!("{first}{}", "a.".repeat(126))));
        }
        names.push(n(&"a.".repeat(126)));
        for a in &names {
            for b in &names {
                assert_eq!(a.cmp(b), reference(a).cmp(&reference(b)), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn parse_relative_escape_and_display() {
        let origin = n("example.com.");
        let name = Name::parse("a\\.b.www", Some(&origin)).unwrap();
        assert_eq!(name.label_count(), 4);
        assert_eq!(name.to_string(), "a\\.b.www.example.com.");
        assert_eq!(
            Name::parse("\\065bc", Some(&origin)).unwrap(),
            n("abc.example.com.")
        );
        assert_eq!(Name::parse("@", Some(&origin)).unwrap(), origin);
        assert_eq!(Name::parse("www", None), Err(NameError::NoOrigin));
        assert_eq!(Name::parse("a..b.", None), Err(NameError::EmptyLabel));
        assert_eq!(Name::parse("\\300.", None), Err(NameError::BadEscape));
        let long = "a".repeat(64) + ".";
        assert_eq!(Name::parse(&long, None), Err(NameError::LabelTooLong));
        let too_long = "abcdefghi.".repeat(26);
        assert_eq!(Name::parse(&too_long, None), Err(NameError::NameTooLong));
    }

    #[test]
    fn subdomain_parent_wildcard() {
        assert!(n("a.b.example.").is_subdomain_of(&n("EXAMPLE.")));
        assert!(!n("aexample.").is_subdomain_of(&n("example.")));
        assert!(n("example.").is_subdomain_of(&Name::root()));
        assert_eq!(n("a.b.example.").parent(), Some(n("b.example.")));
        assert!(n("*.example.").is_wildcard());
        assert_eq!(n("x.example.").wildcard_of_parent(), Some(n("*.example.")));
        assert_eq!(
            n("WwW.Example.").to_lowercase().as_wire(),
            n("www.example.").as_wire()
        );
    }

    #[test]
    fn dname_substitution_keeps_the_prefix_and_bounds_the_length() {
        // RFC 6672 §2.2's example: a.b.example. with DNAME example. -> example.net.
        let owner = n("Example.");
        let target = n("example.net.");
        let got = n("a.B.example.")
            .replace_suffix(&owner, &target)
            .unwrap()
            .unwrap();
        assert_eq!(got.to_string(), "a.B.example.net.");
        assert_eq!(n("example.").replace_suffix(&owner, &target), None);
        assert_eq!(n("a.other.").replace_suffix(&owner, &target), None);
        // 244 bytes of labels below "e." plus a 66-byte target overflow 255 bytes.
        let long = format!("{0}.{0}.{0}.{0}.e.", "x".repeat(60));
        let long_target = n(&format!("{}.net.", "y".repeat(60)));
        assert_eq!(
            n(&long).replace_suffix(&n("e."), &long_target),
            Some(Err(NameError::NameTooLong))
        );
    }

    #[test]
    fn wire_round_trip_and_rejects_garbage() {
        let name = n("www.example.com.");
        assert_eq!(Name::from_wire(name.as_wire()).unwrap(), name);
        assert_eq!(Name::from_wire(&[3, b'w', b'w']), Err(NameError::BadWire));
        assert_eq!(Name::from_wire(&[0xc0, 12]), Err(NameError::BadWire));
        assert_eq!(Name::from_wire(&[0, 0]), Err(NameError::BadWire));
    }
}

//! MTL-mode RRSIG signature fields, in the two layouts Verisign's implementations have used
//! (big-endian integers, n = 16 bytes per hash). [`Format`] says which one a field is in; it
//! follows the algorithm, never a global switch.
//!
//! 2025 ([`Format::V2025`]: SLH-DSA-MTL 248/249, draft-fregly-dnsop-slh-dsa-mtl-dnssec,
//! `docs/pqc-dnssec-wire.md` §5):
//!
//! ```text
//! flag (1: 0 condensed, 1 full)
//! condensed: randomizer (n) | flags u16 | series ID (8) | leaf index u32 | rung left u32 |
//!            rung right u32 | sibling count u16 | sibling hashes (count · n)
//! full:      condensed | ladder: flags u16 | series ID (8) | rung count u16 |
//!            rungs {left u32, right u32, hash n} | u32 length | ladder signature
//! ```
//!
//! 2026 ([`Format::V2026`]: ML-DSA-MTL 129, SLH-DSA-MTL 130/131, FL-DSA-MTL 128;
//! draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02 §5, as Verisign's MTL library 1.3 demo data and
//! mtl-mode-nsd lay it out):
//!
//! ```text
//! flag (1: 0 condensed, 1 full)
//! condensed: flags u16 | series ID (2n = 32) | randomizer (n) | leaf index u64 |
//!            rung left u64 | rung right u64 | sibling count u16 | sibling hashes (count · n)
//! full:      condensed | ladder: flags u16 | series ID (32) | rung count u16 |
//!            rungs {left u64, right u64, hash n} | u32 length | ladder signature
//! ```
//!
//! Parsing is bounded: at most [`MAX_DEPTH`] siblings and rungs, and the ladder signature must
//! be exactly the length its field announces and end the field. Every error is a value; no
//! input makes parsing panic.

use std::fmt;

use super::node_set::N;

/// Most siblings in a path, and most rungs in a ladder: a series of at most 2^32 leaves in
/// either format (2025 leaf indices are 32 bits; pqdns starts a new series long before that).
pub const MAX_DEPTH: usize = 32;

/// Length of a 2025 series identifier (bytes).
pub const SERIES_ID_LEN: usize = 8;

/// Length of a 2026 series identifier (bytes): 2n (draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02 §5).
pub const SERIES_ID_LEN_2026: usize = 2 * N;

/// Which layout an MTL signature field uses (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Verisign's 2025 layout: 8-byte series ID, 32-bit indexes, randomizer first.
    V2025,
    /// The 2026 layout: 32-byte series ID, 64-bit indexes, flags first.
    V2026,
}

impl Format {
    /// Series identifier length in bytes.
    pub fn series_len(self) -> usize {
        match self {
            Format::V2025 => SERIES_ID_LEN,
            Format::V2026 => SERIES_ID_LEN_2026,
        }
    }

    fn index_len(self) -> usize {
        match self {
            Format::V2025 => 4,
            Format::V2026 => 8,
        }
    }

    /// Bytes of a condensed signature field with `siblings` sibling hashes, the flag byte
    /// included: 41 + 16·k (2025) or 77 + 16·k (2026).
    pub fn condensed_len(self, siblings: usize) -> usize {
        1 + 2 + N + self.series_len() + 3 * self.index_len() + 2 + siblings * N
    }

    /// Bytes of a ladder with `rungs` rungs in its wire form.
    pub fn ladder_len(self, rungs: usize) -> usize {
        2 + self.series_len() + 2 + rungs * (2 * self.index_len() + N)
    }

    /// The largest full signature field for a ladder signature of at most `signature` bytes
    /// ([`MAX_DEPTH`] siblings and rungs).
    pub const fn max_full_len(self, signature: usize) -> usize {
        let (series, index) = match self {
            Format::V2025 => (SERIES_ID_LEN, 4),
            Format::V2026 => (SERIES_ID_LEN_2026, 8),
        };
        (1 + 2 + N + series + 3 * index + 2 + MAX_DEPTH * N)
            + (2 + series + 2 + MAX_DEPTH * (2 * index + N))
            + 4
            + signature
    }

    /// The format of a full signature field: the one it parses in. A field parses in at most
    /// one of them in practice (2026 needs its 32-byte series ID twice, 2025 its flags at
    /// bytes 17–18); 2026 is tried first. `None` if it parses in neither or is condensed.
    pub fn of_full(field: &[u8]) -> Option<Format> {
        [Format::V2026, Format::V2025]
            .into_iter()
            .find(|f| MtlSignature::parse_as(*f, field).is_ok_and(|s| s.is_full()))
    }
}

/// An MTL series identifier: 8 bytes (2025) or 32 bytes (2026) on the wire, chosen at random
/// when a series starts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesId {
    bytes: [u8; SERIES_ID_LEN_2026],
    len: u8,
}

impl fmt::Debug for SeriesId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SeriesId({self})")
    }
}

impl fmt::Display for SeriesId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_bytes()
            .iter()
            .try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl SeriesId {
    /// A series identifier of 1 to 32 bytes, or `None` for any other length.
    pub fn new(bytes: &[u8]) -> Option<SeriesId> {
        if bytes.is_empty() || bytes.len() > SERIES_ID_LEN_2026 {
            return None;
        }
        let mut out = [0u8; SERIES_ID_LEN_2026];
        out[..bytes.len()].copy_from_slice(bytes);
        Some(SeriesId {
            bytes: out,
            len: bytes.len() as u8,
        })
    }

    /// The identifier's bytes as on the wire.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The first 8 bytes as a number (for messages).
    pub fn as_u64(self) -> u64 {
        u64::from_be_bytes(self.bytes[..8].try_into().expect("8"))
    }
}

/// One rung: the root hash of the complete subtree over leaves `left..=right`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rung {
    /// First leaf index covered.
    pub left: u64,
    /// Last leaf index covered.
    pub right: u64,
    /// Root hash of the subtree.
    pub hash: [u8; N],
}

/// A Merkle tree ladder: the rungs covering leaves `0..leaf_count` (draft-harvey-cfrg-mtl-mode
/// Algorithm 6), in order of increasing leaf index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ladder {
    /// The layout it is written in.
    pub format: Format,
    /// Flags (0).
    pub flags: u16,
    /// Series.
    pub series: SeriesId,
    /// Rungs.
    pub rungs: Vec<Rung>,
}

/// The part of every MTL signature: randomizer and authentication path from a leaf to a rung.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthPath {
    /// The layout it is written in.
    pub format: Format,
    /// Per-leaf randomizer (n bytes), hashed with the message (draft-harvey-cfrg-mtl-mode §5.1).
    pub randomizer: [u8; N],
    /// Flags (0).
    pub flags: u16,
    /// Series.
    pub series: SeriesId,
    /// Leaf index of the message.
    pub leaf: u64,
    /// First leaf of the rung the path leads to.
    pub rung_left: u64,
    /// Last leaf of the rung the path leads to.
    pub rung_right: u64,
    /// Sibling hashes from the leaf upwards.
    pub siblings: Vec<[u8; N]>,
}

/// A parsed MTL signature field: condensed, or full with its signed ladder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtlSignature {
    /// The authentication path.
    pub path: AuthPath,
    /// For a full signature: the ladder, its wire bytes (what the ladder signature covers), and
    /// the ladder signature.
    pub signed_ladder: Option<(Ladder, Vec<u8>, Vec<u8>)>,
}

/// Why an MTL signature field does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The field ends early.
    #[error("MTL signature truncated")]
    Truncated,
    /// The first byte is neither 0 (condensed) nor 1 (full).
    #[error("MTL signature flag byte {0} is neither 0 nor 1")]
    BadFlag(u8),
    /// More than [`MAX_DEPTH`] siblings or rungs.
    #[error("MTL path or ladder deeper than 32")]
    TooDeep,
    /// Bytes follow where the field should end, or the length field disagrees.
    #[error("MTL signature has trailing or missing bytes")]
    BadLength,
    /// A path or ladder flags field is not 0 (no flags are defined; a path's flags are not
    /// covered by any signature, so unknown ones are refused rather than ignored).
    #[error("MTL flags {0:#06x} are not defined")]
    UnknownFlags(u16),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SignatureError> {
        if self.0.len() < n {
            return Err(SignatureError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u16(&mut self) -> Result<u16, SignatureError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, SignatureError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }
    fn index(&mut self, format: Format) -> Result<u64, SignatureError> {
        match format {
            Format::V2025 => self.u32().map(u64::from),
            Format::V2026 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(self.take(8)?);
                Ok(u64::from_be_bytes(a))
            }
        }
    }
    fn hash(&mut self) -> Result<[u8; N], SignatureError> {
        let mut h = [0u8; N];
        h.copy_from_slice(self.take(N)?);
        Ok(h)
    }
    fn flags(&mut self) -> Result<u16, SignatureError> {
        match self.u16()? {
            0 => Ok(0),
            other => Err(SignatureError::UnknownFlags(other)),
        }
    }
    fn series(&mut self, format: Format) -> Result<SeriesId, SignatureError> {
        SeriesId::new(self.take(format.series_len())?).ok_or(SignatureError::Truncated)
    }
    fn count(&mut self) -> Result<usize, SignatureError> {
        let count = usize::from(self.u16()?);
        if count > MAX_DEPTH {
            return Err(SignatureError::TooDeep);
        }
        Ok(count)
    }
}

fn write_index(format: Format, value: u64, out: &mut Vec<u8>) {
    match format {
        // Callers keep 2025 series below 2^32 leaves (`NodeSet::append`).
        Format::V2025 => out.extend((value as u32).to_be_bytes()),
        Format::V2026 => out.extend(value.to_be_bytes()),
    }
}

impl Ladder {
    /// Number of leaves the ladder covers.
    pub fn leaf_count(&self) -> u64 {
        self.rungs.last().map_or(0, |r| r.right.saturating_add(1))
    }

    /// Appends the wire form.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.flags.to_be_bytes());
        out.extend(self.series.as_bytes());
        out.extend((self.rungs.len() as u16).to_be_bytes());
        for r in &self.rungs {
            write_index(self.format, r.left, out);
            write_index(self.format, r.right, out);
            out.extend(r.hash);
        }
    }

    fn read(format: Format, r: &mut Reader<'_>) -> Result<Ladder, SignatureError> {
        let flags = r.flags()?;
        let series = r.series(format)?;
        let count = r.count()?;
        let rungs = (0..count)
            .map(|_| {
                Ok(Rung {
                    left: r.index(format)?,
                    right: r.index(format)?,
                    hash: r.hash()?,
                })
            })
            .collect::<Result<_, SignatureError>>()?;
        Ok(Ladder {
            format,
            flags,
            series,
            rungs,
        })
    }

    /// The rung an authentication path leads to in this ladder, if any (draft-harvey-cfrg-mtl-
    /// mode Algorithm 7): the path must be a binary-rung path (its rung aligned on its sibling
    /// count), and the ladder's rung must cover the leaf, be aligned, and be reached by the
    /// path; the lowest such rung is chosen.
    pub fn rung_for(&self, path: &AuthPath) -> Option<&Rung> {
        let depth = path.siblings.len() as u32;
        let span = 1u64.checked_shl(depth)?;
        let left = path.leaf & !(span - 1);
        if path.rung_left != left || Some(path.rung_right) != left.checked_add(span - 1) {
            return None;
        }
        self.rungs
            .iter()
            .filter(|r| r.left <= path.leaf && path.leaf <= r.right)
            .filter(|r| {
                let size = (r.right - r.left).wrapping_add(1);
                size.is_power_of_two() && r.left % size == 0 && size.trailing_zeros() <= depth
            })
            .min_by_key(|r| r.right - r.left)
    }
}

impl AuthPath {
    fn write(&self, out: &mut Vec<u8>) {
        match self.format {
            Format::V2025 => {
                out.extend(self.randomizer);
                out.extend(self.flags.to_be_bytes());
                out.extend(self.series.as_bytes());
            }
            Format::V2026 => {
                out.extend(self.flags.to_be_bytes());
                out.extend(self.series.as_bytes());
                out.extend(self.randomizer);
            }
        }
        write_index(self.format, self.leaf, out);
        write_index(self.format, self.rung_left, out);
        write_index(self.format, self.rung_right, out);
        out.extend((self.siblings.len() as u16).to_be_bytes());
        for s in &self.siblings {
            out.extend(s);
        }
    }

    fn read(format: Format, r: &mut Reader<'_>) -> Result<AuthPath, SignatureError> {
        let (randomizer, flags, series) = match format {
            Format::V2025 => {
                let randomizer = r.hash()?;
                let flags = r.flags()?;
                (randomizer, flags, r.series(format)?)
            }
            Format::V2026 => {
                let flags = r.flags()?;
                let series = r.series(format)?;
                (r.hash()?, flags, series)
            }
        };
        let leaf = r.index(format)?;
        let rung_left = r.index(format)?;
        let rung_right = r.index(format)?;
        let count = r.count()?;
        let siblings = (0..count).map(|_| r.hash()).collect::<Result<_, _>>()?;
        Ok(AuthPath {
            format,
            randomizer,
            flags,
            series,
            leaf,
            rung_left,
            rung_right,
            siblings,
        })
    }
}

impl MtlSignature {
    /// Parses an RRSIG signature field in the 2025 layout ([`MtlSignature::parse_as`]).
    ///
    /// # Errors
    /// [`SignatureError`] naming what is wrong.
    pub fn parse(field: &[u8]) -> Result<MtlSignature, SignatureError> {
        MtlSignature::parse_as(Format::V2025, field)
    }

    /// Parses an RRSIG signature field in `format`. A full signature's ladder must name the
    /// same series as its path.
    ///
    /// # Errors
    /// [`SignatureError`] naming what is wrong.
    pub fn parse_as(format: Format, field: &[u8]) -> Result<MtlSignature, SignatureError> {
        let mut r = Reader(field);
        let flag = r.take(1)?[0];
        if flag > 1 {
            return Err(SignatureError::BadFlag(flag));
        }
        let path = AuthPath::read(format, &mut r)?;
        let signed_ladder = if flag == 1 {
            let start = r.0;
            let ladder = Ladder::read(format, &mut r)?;
            let ladder_bytes = start[..start.len() - r.0.len()].to_vec();
            let len = r.u32()? as usize;
            let sig = r.take(len)?.to_vec();
            Some((ladder, ladder_bytes, sig))
        } else {
            None
        };
        if !r.0.is_empty() {
            return Err(SignatureError::BadLength);
        }
        Ok(MtlSignature {
            path,
            signed_ladder,
        })
    }

    /// True for a full signature.
    pub fn is_full(&self) -> bool {
        self.signed_ladder.is_some()
    }

    /// The wire form of a condensed signature for `path`.
    pub fn condensed_bytes(path: &AuthPath) -> Vec<u8> {
        let mut out = Vec::with_capacity(path.format.condensed_len(path.siblings.len()));
        out.push(0);
        path.write(&mut out);
        out
    }

    /// The wire form of a full signature: `path`, then `ladder_bytes` (a ladder's wire form)
    /// and its ladder signature.
    pub fn full_bytes(path: &AuthPath, ladder_bytes: &[u8], ladder_sig: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            path.format.condensed_len(path.siblings.len())
                + ladder_bytes.len()
                + 4
                + ladder_sig.len(),
        );
        out.push(1);
        path.write(&mut out);
        out.extend_from_slice(ladder_bytes);
        out.extend((ladder_sig.len() as u32).to_be_bytes());
        out.extend_from_slice(ladder_sig);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(siblings: usize) -> AuthPath {
        path_as(Format::V2025, siblings)
    }

    fn path_as(format: Format, siblings: usize) -> AuthPath {
        let series: Vec<u8> = (1..=format.series_len() as u8).collect();
        AuthPath {
            format,
            randomizer: [7; N],
            flags: 0,
            series: SeriesId::new(&series).unwrap(),
            leaf: 9,
            rung_left: 8,
            rung_right: 9,
            siblings: vec![[3; N]; siblings],
        }
    }

    #[test]
    fn condensed_and_full_round_trip_with_the_documented_sizes() {
        let p = path(1);
        let c = MtlSignature::condensed_bytes(&p);
        assert_eq!(c.len(), 57, "n + 24 + k·n + flag byte for one sibling");
        let parsed = MtlSignature::parse(&c).unwrap();
        assert_eq!(parsed.path, p);
        assert!(!parsed.is_full());
        let ladder = Ladder {
            format: Format::V2025,
            flags: 0,
            series: p.series,
            rungs: vec![Rung {
                left: 8,
                right: 9,
                hash: [5; N],
            }],
        };
        let mut lb = Vec::new();
        ladder.write(&mut lb);
        let f = MtlSignature::full_bytes(&p, &lb, &[9; 100]);
        let parsed = MtlSignature::parse(&f).unwrap();
        assert_eq!(parsed.signed_ladder, Some((ladder, lb, vec![9; 100])));
    }

    #[test]
    fn the_2026_layout_round_trips_with_its_sizes_and_is_told_apart() {
        let p = path_as(Format::V2026, 3);
        let c = MtlSignature::condensed_bytes(&p);
        assert_eq!(c.len(), 77 + 3 * N);
        assert_eq!(c.len(), Format::V2026.condensed_len(3));
        assert_eq!(MtlSignature::parse_as(Format::V2026, &c).unwrap().path, p);
        let ladder = Ladder {
            format: Format::V2026,
            flags: 0,
            series: p.series,
            rungs: vec![Rung {
                left: 0,
                right: 7,
                hash: [5; N],
            }],
        };
        let mut lb = Vec::new();
        ladder.write(&mut lb);
        assert_eq!(lb.len(), Format::V2026.ladder_len(1));
        let f = MtlSignature::full_bytes(&p, &lb, &[9; 50]);
        assert_eq!(Format::of_full(&f), Some(Format::V2026));
        assert!(MtlSignature::parse_as(Format::V2025, &f).is_err());
        let old = MtlSignature::full_bytes(&path(1), &[0; 12], &[9; 50]);
        assert_eq!(Format::of_full(&old), Some(Format::V2025));
        assert_eq!(Format::of_full(&c), None, "condensed");
        // Every truncation of a 2026 full field is an error, never a panic.
        for cut in 0..f.len() {
            assert!(MtlSignature::parse_as(Format::V2026, &f[..cut]).is_err());
        }
    }

    #[test]
    fn hostile_fields_are_errors() {
        let c = MtlSignature::condensed_bytes(&path(1));
        assert_eq!(
            MtlSignature::parse(&c[..40]),
            Err(SignatureError::Truncated)
        );
        let mut bad = c.clone();
        bad[0] = 2;
        assert_eq!(MtlSignature::parse(&bad), Err(SignatureError::BadFlag(2)));
        let mut flagged = c.clone();
        flagged[1 + N + 1] = 1;
        assert_eq!(
            MtlSignature::parse(&flagged),
            Err(SignatureError::UnknownFlags(1))
        );
        let mut long = c.clone();
        long.push(0);
        assert_eq!(MtlSignature::parse(&long), Err(SignatureError::BadLength));
        let mut deep = c[..1 + N + 22].to_vec();
        deep.extend(33u16.to_be_bytes());
        assert_eq!(MtlSignature::parse(&deep), Err(SignatureError::TooDeep));
        assert!(MtlSignature::parse(&[]).is_err());
    }

    #[test]
    fn rung_selection_needs_an_aligned_covering_rung() {
        let rung = |left, right| Rung {
            left,
            right,
            hash: [0; N],
        };
        let ladder = Ladder {
            format: Format::V2025,
            flags: 0,
            series: SeriesId::new(&[0; 8]).unwrap(),
            rungs: vec![rung(0, 7), rung(8, 9)],
        };
        assert_eq!(ladder.rung_for(&path(1)), Some(&rung(8, 9)));
        // A path relative to a later ladder (leaf 9 under rung 8..11) still reaches 8..9.
        let mut longer = path(2);
        longer.rung_right = 11;
        assert_eq!(ladder.rung_for(&longer), Some(&rung(8, 9)));
        // A path whose claimed rung is not aligned on its length is refused.
        let mut skew = path(1);
        skew.rung_left = 9;
        assert_eq!(ladder.rung_for(&skew), None);
        // A leaf the ladder does not cover yet has no rung.
        let mut later = path(0);
        later.leaf = 10;
        later.rung_left = 10;
        later.rung_right = 10;
        assert_eq!(ladder.rung_for(&later), None);
    }
}

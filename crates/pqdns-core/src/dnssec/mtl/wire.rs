//! MTL-mode RRSIG signature fields (`docs/pqc-dnssec-wire.md` §5, draft-fregly-dnsop-slh-dsa-
//! mtl-dnssec; big-endian integers, n = 16 bytes per hash):
//!
//! ```text
//! flag (1: 0 condensed, 1 full)
//! condensed: randomizer (n) | flags u16 | series ID (8) | leaf index u32 | rung left u32 |
//!            rung right u32 | sibling count u16 | sibling hashes (count · n)
//! full:      condensed | ladder: flags u16 | series ID (8) | rung count u16 |
//!            rungs {left u32, right u32, hash n} | u32 length | SPHINCS+ signature of the ladder
//! ```
//!
//! Parsing is bounded: at most [`MAX_DEPTH`] siblings and rungs (a 2^32-leaf series), and the
//! SPHINCS+ signature must be exactly the length its field announces and end the field.

use std::fmt;

use super::node_set::N;

/// Most siblings in a path, and most rungs in a ladder (leaf indices are 32 bits).
pub const MAX_DEPTH: usize = 32;

/// Length of the series identifier (bytes).
pub const SERIES_ID_LEN: usize = 8;

/// An MTL series identifier (8 bytes on the wire), chosen at random when a series starts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesId(pub [u8; SERIES_ID_LEN]);

impl fmt::Debug for SeriesId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SeriesId({self})")
    }
}

impl fmt::Display for SeriesId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl SeriesId {
    /// The identifier as a number (for messages).
    pub fn as_u64(self) -> u64 {
        u64::from_be_bytes(self.0)
    }
}

/// One rung: the root hash of the complete subtree over leaves `left..=right`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rung {
    /// First leaf index covered.
    pub left: u32,
    /// Last leaf index covered.
    pub right: u32,
    /// Root hash of the subtree.
    pub hash: [u8; N],
}

/// A Merkle tree ladder: the rungs covering leaves `0..leaf_count` (draft-harvey-cfrg-mtl-mode
/// Algorithm 6), in order of increasing leaf index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ladder {
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
    /// Per-leaf randomizer (n bytes), hashed with the message (draft-harvey-cfrg-mtl-mode §5.1).
    pub randomizer: [u8; N],
    /// Flags (0).
    pub flags: u16,
    /// Series.
    pub series: SeriesId,
    /// Leaf index of the message.
    pub leaf: u32,
    /// First leaf of the rung the path leads to.
    pub rung_left: u32,
    /// Last leaf of the rung the path leads to.
    pub rung_right: u32,
    /// Sibling hashes from the leaf upwards.
    pub siblings: Vec<[u8; N]>,
}

/// A parsed MTL signature field: condensed, or full with its signed ladder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtlSignature {
    /// The authentication path.
    pub path: AuthPath,
    /// For a full signature: the ladder, its wire bytes (what SPHINCS+ signed), and the SPHINCS+
    /// signature.
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
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, SignatureError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn hash(&mut self) -> Result<[u8; N], SignatureError> {
        Ok(self.take(N)?.try_into().expect("n"))
    }
    fn flags(&mut self) -> Result<u16, SignatureError> {
        match self.u16()? {
            0 => Ok(0),
            other => Err(SignatureError::UnknownFlags(other)),
        }
    }
    fn series(&mut self) -> Result<SeriesId, SignatureError> {
        Ok(SeriesId(self.take(SERIES_ID_LEN)?.try_into().expect("8")))
    }
}

impl Ladder {
    /// Number of leaves the ladder covers.
    pub fn leaf_count(&self) -> u64 {
        self.rungs.last().map_or(0, |r| u64::from(r.right) + 1)
    }

    /// Appends the wire form.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.flags.to_be_bytes());
        out.extend(self.series.0);
        out.extend((self.rungs.len() as u16).to_be_bytes());
        for r in &self.rungs {
            out.extend(r.left.to_be_bytes());
            out.extend(r.right.to_be_bytes());
            out.extend(r.hash);
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Ladder, SignatureError> {
        let flags = r.flags()?;
        let series = r.series()?;
        let count = usize::from(r.u16()?);
        if count > MAX_DEPTH {
            return Err(SignatureError::TooDeep);
        }
        let rungs = (0..count)
            .map(|_| {
                Ok(Rung {
                    left: r.u32()?,
                    right: r.u32()?,
                    hash: r.hash()?,
                })
            })
            .collect::<Result<_, SignatureError>>()?;
        Ok(Ladder {
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
        let left = u64::from(path.leaf) & !(span - 1);
        if u64::from(path.rung_left) != left || u64::from(path.rung_right) != left + span - 1 {
            return None;
        }
        self.rungs
            .iter()
            .filter(|r| r.left <= path.leaf && path.leaf <= r.right)
            .filter(|r| {
                let size = u64::from(r.right - r.left) + 1;
                size.is_power_of_two()
                    && u64::from(r.left) % size == 0
                    && size.trailing_zeros() <= depth
            })
            .min_by_key(|r| r.right - r.left)
    }
}

impl AuthPath {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.randomizer);
        out.extend(self.flags.to_be_bytes());
        out.extend(self.series.0);
        out.extend(self.leaf.to_be_bytes());
        out.extend(self.rung_left.to_be_bytes());
        out.extend(self.rung_right.to_be_bytes());
        out.extend((self.siblings.len() as u16).to_be_bytes());
        for s in &self.siblings {
            out.extend(s);
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<AuthPath, SignatureError> {
        let randomizer = r.hash()?;
        let flags = r.flags()?;
        let series = r.series()?;
        let leaf = r.u32()?;
        let rung_left = r.u32()?;
        let rung_right = r.u32()?;
        let count = usize::from(r.u16()?);
        if count > MAX_DEPTH {
            return Err(SignatureError::TooDeep);
        }
        let siblings = (0..count).map(|_| r.hash()).collect::<Result<_, _>>()?;
        Ok(AuthPath {
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
    /// Parses an RRSIG signature field.
    ///
    /// # Errors
    /// [`SignatureError`] naming what is wrong.
    pub fn parse(field: &[u8]) -> Result<MtlSignature, SignatureError> {
        let mut r = Reader(field);
        let flag = r.take(1)?[0];
        let path = AuthPath::read(&mut r)?;
        let signed_ladder = match flag {
            0 => None,
            1 => {
                let start = r.0;
                let ladder = Ladder::read(&mut r)?;
                let ladder_bytes = start[..start.len() - r.0.len()].to_vec();
                let len = r.u32()? as usize;
                let sig = r.take(len)?.to_vec();
                Some((ladder, ladder_bytes, sig))
            }
            other => return Err(SignatureError::BadFlag(other)),
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
        let mut out = Vec::with_capacity(1 + N + 24 + path.siblings.len() * N);
        out.push(0);
        path.write(&mut out);
        out
    }

    /// The wire form of a full signature: `path`, then `ladder_bytes` (a ladder's wire form)
    /// and its SPHINCS+ signature.
    pub fn full_bytes(path: &AuthPath, ladder_bytes: &[u8], ladder_sig: &[u8]) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(1 + N + 24 + path.siblings.len() * N + ladder_bytes.len() + 4);
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
        AuthPath {
            randomizer: [7; N],
            flags: 0,
            series: SeriesId([1, 2, 3, 4, 5, 6, 7, 8]),
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
            flags: 0,
            series: SeriesId([0; 8]),
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

//! Merkle Tree Ladder (MTL) mode for DNSSEC, as Verisign's implementations have shipped it in
//! two generations (`docs/pqc-dnssec-wire.md` §5; [`MtlParams`] says which algorithm is which):
//!
//! - 2025: SLH-DSA-MTL, algorithms 248 (SHA2) and 249 (SHAKE) in the `verisign-2025` profile
//!   (draft-harvey-cfrg-mtl-mode-00…03, draft-fregly-dnsop-slh-dsa-mtl-dnssec): SPHINCS+-aligned
//!   hashes keyed by the DNSKEY, 8-byte series IDs, 32-bit indexes ([`Format::V2025`]).
//! - 2026: ML-DSA-MTL 129 (ML-DSA-44 under the ladder), SLH-DSA-MTL 130/131 and FL-DSA-MTL 128
//!   in the `verisign-2026` profile (draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02,
//!   draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00): hashes keyed by a 32-byte series ID
//!   carried in every signature, 64-bit indexes, the DNSKEY holding only the underlying public
//!   key ([`Format::V2026`]), and the SigTag EDNS option ([`SigTags`]).
//!
//! Each RRset's RFC 4034 signed data becomes a leaf of a growing Merkle tree (the node set of a
//! *series*). The *ladder* — the roots of the complete binary subtrees that cover the leaves so
//! far, its *rungs* — is signed once with the underlying scheme. An RRset's signature is then
//! either *condensed* (its authentication path from the leaf to a rung) or *full* (the
//! condensed signature plus the signed ladder). A validator verifies a full signature once,
//! keeps the ladder ([`VerifiedLadder`], in a [`LadderCache`] keyed by [`SigTag`]), and checks
//! condensed signatures of the same series with hashes only.
//!
//! Modules: [`node_set`] (hashing, append, authentication paths, ladders), [`wire`] (the
//! signature layouts), [`series`] (a series saved between signings, so re-signing appends to
//! it), and the provider schemes and batch signer.

pub mod node_set;
mod scheme;
pub mod series;
pub mod wire;

use std::collections::HashMap;

use sha3::digest::{ExtendableOutput, Update, XofReader};
use sha3::Shake128;

pub use node_set::{HashFamily, NodeSet, TreeHash, N};
pub(crate) use scheme::SCHEMES;
pub use scheme::{verify_full, MtlSigner};
pub use wire::{AuthPath, Format, Ladder, MtlSignature, Rung, SeriesId, SignatureError};

use super::provider::CryptoError;
use super::Algorithm;

/// EDNS(0) option code of the MTL signature option, the value Verisign's implementations use
/// (not IANA-assigned; 65001–65534 are for local and experimental use, RFC 6891 §9). In 2025
/// (draft-fregly-dnsop-slh-dsa-mtl-dnssec) an empty option asks for full signatures; in 2026
/// (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00, "SigTag") its data lists the ladders the
/// validator holds ([`SigTags`]).
pub const EDNS_FULL_SIGNATURES: u16 = 65050;

/// The SigTag option code (the same number as [`EDNS_FULL_SIGNATURES`]).
pub const EDNS_SIGTAG: u16 = EDNS_FULL_SIGNATURES;

/// What an MTL algorithm is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlParams {
    /// Wire layout and hash inputs.
    pub format: Format,
    /// Hash family of the tree.
    pub family: HashFamily,
    /// The scheme that signs ladders.
    pub underlying: Algorithm,
}

impl MtlParams {
    /// The parameters of `alg`, or `None` if it is not an MTL algorithm:
    ///
    /// | algorithm | format | tree hash | ladder signed with |
    /// |---|---|---|---|
    /// | SLH-DSA-MTL-SHA2-128s (2025, 248) | 2025 | SHA-256 (SPHINCS+) | SPHINCS+-SHA2-128s-simple |
    /// | SLH-DSA-MTL-SHAKE-128s (2025, 249) | 2025 | SHAKE256 (SPHINCS+) | SPHINCS+-SHAKE-128s-simple |
    /// | FL-DSA-MTL-512 (128) | 2026 | SHAKE128 | Falcon-padded-512 |
    /// | ML-DSA-MTL-44 (129) | 2026 | SHAKE128 | ML-DSA-44 (pure, empty context) |
    /// | SLH-DSA-MTL-SHA2-128s-2026 (130) | 2026 | SHA-256 | SPHINCS+-SHA2-128s-simple (round 3.1) |
    /// | SLH-DSA-MTL-SHAKE-128s-2026 (131) | 2026 | SHAKE128 | SPHINCS+-SHAKE-128s-simple (round 3.1) |
    /// | SLH-DSA-MTL-FIPS205-SHA2-128s (no number) | 2026 | SHA-256 | FIPS 205 SLH-DSA-SHA2-128s |
    /// | SLH-DSA-MTL-FIPS205-SHAKE-128s (no number) | 2026 | SHAKE128 | FIPS 205 SLH-DSA-SHAKE-128s |
    ///
    /// Verisign's 2026 code (mtl-mode-nsd, mtl-mode-ldns "MTL Mode v08") signs 130/131 ladders
    /// with liboqs' pre-FIPS SPHINCS+ parameter sets; the FIPS 205 variants are offered as
    /// separate schemes for operators who want the standard, numbered by a custom profile.
    pub fn of(alg: Algorithm) -> Option<MtlParams> {
        use Algorithm as A;
        let (format, family, underlying) = match alg {
            A::MtlSlhDsaSha2_128s => (Format::V2025, HashFamily::Sha2, A::SphincsSha2_128s),
            A::MtlSlhDsaShake128s => (Format::V2025, HashFamily::Shake, A::SphincsShake128s),
            A::FlDsaMtl512 => (Format::V2026, HashFamily::Shake, A::FalconPadded512),
            A::MlDsaMtl44 => (Format::V2026, HashFamily::Shake, A::MlDsa44),
            A::SlhDsaMtl2026Sha2_128s => (Format::V2026, HashFamily::Sha2, A::SphincsSha2_128s),
            A::SlhDsaMtl2026Shake128s => (Format::V2026, HashFamily::Shake, A::SphincsShake128s),
            A::SlhDsaMtlFips205Sha2_128s => (Format::V2026, HashFamily::Sha2, A::SlhDsaSha2_128s),
            A::SlhDsaMtlFips205Shake128s => (Format::V2026, HashFamily::Shake, A::SlhDsaShake128s),
            _ => return None,
        };
        Some(MtlParams {
            format,
            family,
            underlying,
        })
    }

    /// The tree hashes of a series under DNSKEY public key `public_key`.
    ///
    /// # Errors
    /// [`CryptoError::BadKey`] if a 2025 key is not 2n bytes.
    pub fn tree_hash(&self, public_key: &[u8]) -> Result<TreeHash, CryptoError> {
        match self.format {
            Format::V2025 => TreeHash::spx(self.family, public_key)
                .filter(|_| public_key.len() == 2 * N)
                .ok_or(CryptoError::BadKey("MTL public key must be 32 bytes")),
            Format::V2026 => Ok(TreeHash::Sid {
                family: self.family,
            }),
        }
    }
}

/// A SigTag: the name of a signed ladder, the first 32 bytes of SHAKE128 over its bytes in a
/// full signature field (ladder ‖ u32 length ‖ ladder signature), as Verisign's mtl-mode-nsd
/// computes it for draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SigTag(pub [u8; SigTag::LEN]);

impl SigTag {
    /// Length in bytes.
    pub const LEN: usize = 32;

    /// The tag of a signed ladder given as its wire parts.
    pub fn of(ladder_bytes: &[u8], ladder_sig: &[u8]) -> SigTag {
        let mut h = Shake128::default();
        h.update(ladder_bytes);
        h.update(&(ladder_sig.len() as u32).to_be_bytes());
        h.update(ladder_sig);
        let mut out = [0u8; SigTag::LEN];
        h.finalize_xof().read(&mut out);
        SigTag(out)
    }
}

impl std::fmt::Debug for SigTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigTag(")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        write!(f, ")")
    }
}

/// The ladders a SigTag option names: 0 to [`SigTags::MAX`] tags
/// (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00; an empty option says "SigTag spoken,
/// no ladder held").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SigTags(Vec<SigTag>);

/// Why SigTag option data is malformed: its length is not a multiple of 32 bytes, or it names
/// more than [`SigTags::MAX`] ladders. A server answers FORMERR (RFC 6891 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("SigTag option of {0} bytes: must be 0 to 8 tags of 32 bytes")]
pub struct SigTagLengthError(pub usize);

impl SigTags {
    /// Most tags in one option (mtl-mode-nsd's `MAX_SIG_TAGS`).
    pub const MAX: usize = 8;

    /// Parses option data.
    ///
    /// # Errors
    /// [`SigTagLengthError`] for a length other than 0, 32, …, 256.
    pub fn parse(data: &[u8]) -> Result<SigTags, SigTagLengthError> {
        if !data.len().is_multiple_of(SigTag::LEN) || data.len() > SigTags::MAX * SigTag::LEN {
            return Err(SigTagLengthError(data.len()));
        }
        Ok(SigTags(
            data.chunks_exact(SigTag::LEN)
                .map(|c| {
                    let mut t = [0u8; SigTag::LEN];
                    t.copy_from_slice(c);
                    SigTag(t)
                })
                .collect(),
        ))
    }

    /// At most [`SigTags::MAX`] of `tags`, in order.
    pub fn new(tags: impl IntoIterator<Item = SigTag>) -> SigTags {
        SigTags(tags.into_iter().take(SigTags::MAX).collect())
    }

    /// The option data.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|t| t.0).collect()
    }

    /// True if `tag` is named.
    pub fn contains(&self, tag: &SigTag) -> bool {
        self.0.contains(tag)
    }

    /// The tags.
    pub fn tags(&self) -> &[SigTag] {
        &self.0
    }
}

/// A ladder whose signature has been verified under a DNSKEY public key. Only
/// [`verify_full`] makes one, so holding it proves the check was done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedLadder {
    hash: TreeHash,
    public_key: Vec<u8>,
    ladder: Ladder,
    tag: SigTag,
}

impl VerifiedLadder {
    /// The series this ladder belongs to.
    pub fn series(&self) -> SeriesId {
        self.ladder.series
    }

    /// The ladder.
    pub fn ladder(&self) -> &Ladder {
        &self.ladder
    }

    /// Its SigTag.
    pub fn tag(&self) -> SigTag {
        self.tag
    }

    /// The DNSKEY public-key field it was verified under.
    pub fn public_key(&self) -> &[u8] {
        &self.public_key
    }

    /// Checks a condensed (or full) signature's authentication path for `message` against this
    /// ladder, with hashes only (draft-harvey-cfrg-mtl-mode Algorithms 7 and 8).
    ///
    /// # Errors
    /// [`CryptoError::BadSignature`] if the key, layout or series differs, no rung covers the
    /// leaf, or the path does not lead to the rung's hash.
    pub fn verify_condensed(
        &self,
        public_key: &[u8],
        message: &[u8],
        sig: &MtlSignature,
    ) -> Result<(), CryptoError> {
        if public_key != self.public_key.as_slice()
            || sig.path.series != self.ladder.series
            || sig.path.format != self.ladder.format
        {
            return Err(CryptoError::BadSignature);
        }
        let rung = self
            .ladder
            .rung_for(&sig.path)
            .ok_or(CryptoError::BadSignature)?;
        self.hash
            .path_reaches_rung(message, &sig.path, rung)
            .then_some(())
            .ok_or(CryptoError::BadSignature)
    }
}

/// A bounded store of verified ladders keyed by [`SigTag`], found for a condensed signature by
/// its series (the ladder of a series with the most leaves is the one used; a key check
/// follows). Oldest-inserted entries are evicted past `capacity`.
#[derive(Debug)]
pub struct LadderCache {
    capacity: usize,
    entries: HashMap<SigTag, (u64, VerifiedLadder)>,
    /// The tag of the widest ladder held for each series.
    by_series: HashMap<SeriesId, SigTag>,
    clock: u64,
}

impl LadderCache {
    /// A cache of at most `capacity` ladders (at least 1).
    pub fn new(capacity: usize) -> LadderCache {
        LadderCache {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            by_series: HashMap::new(),
            clock: 0,
        }
    }

    /// Stores `ladder`, unless a ladder of the same series with more leaves is already held.
    pub fn insert(&mut self, ladder: VerifiedLadder) {
        let series = ladder.series();
        if let Some((_, old)) = self
            .by_series
            .get(&series)
            .and_then(|t| self.entries.get(t))
        {
            if old.ladder.leaf_count() > ladder.ladder.leaf_count() {
                return;
            }
        }
        self.clock += 1;
        let tag = ladder.tag;
        if let Some(old) = self.by_series.insert(series, tag) {
            self.entries.remove(&old);
        }
        self.entries.insert(tag, (self.clock, ladder));
        while self.entries.len() > self.capacity {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((_, gone)) = self.entries.remove(&oldest) {
                self.by_series.remove(&gone.series());
            }
        }
    }

    /// The ladder of `series` verified under `public_key`, if held.
    pub fn get(&self, public_key: &[u8], series: SeriesId) -> Option<&VerifiedLadder> {
        let tag = self.by_series.get(&series)?;
        self.entries
            .get(tag)
            .map(|(_, l)| l)
            .filter(|l| l.public_key == public_key)
    }

    /// The ladder with SigTag `tag`, if held.
    pub fn by_tag(&self, tag: &SigTag) -> Option<&VerifiedLadder> {
        self.entries.get(tag).map(|(_, l)| l)
    }

    /// The tags of the (at most [`SigTags::MAX`]) most recently stored 2026 ladders, newest
    /// first: what a validator names in a SigTag option.
    pub fn recent_tags(&self) -> SigTags {
        let mut held: Vec<(u64, SigTag)> = self
            .entries
            .iter()
            .filter(|(_, (_, l))| l.ladder.format == Format::V2026)
            .map(|(tag, (t, _))| (*t, *tag))
            .collect();
        held.sort_unstable_by_key(|h| std::cmp::Reverse(h.0));
        SigTags::new(held.into_iter().map(|(_, tag)| tag))
    }

    /// Number of ladders held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if no ladder is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The full form of the condensed signature field `condensed`, made with the signed ladder of
/// `full`, a full signature field of the same layout and series whose ladder has a rung for
/// the condensed signature's path (what a server returns when a validator lacks the ladder).
/// `None` if either field does not parse, `condensed` is already full, the series differ, or
/// the ladder does not cover the path.
pub fn expand_condensed(condensed: &[u8], full: &[u8]) -> Option<Vec<u8>> {
    let format = Format::of_full(full)?;
    let short = MtlSignature::parse_as(format, condensed).ok()?;
    let long = MtlSignature::parse_as(format, full).ok()?;
    let (ladder, ladder_bytes, ladder_sig) = long.signed_ladder.as_ref()?;
    if short.is_full() || ladder.series != short.path.series {
        return None;
    }
    ladder.rung_for(&short.path)?;
    Some(MtlSignature::full_bytes(
        &short.path,
        ladder_bytes,
        ladder_sig,
    ))
}

/// The condensed form of the full signature field `full` (its authentication path without the
/// signed ladder): what a server sends instead when the validator already holds the ladder
/// (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00: condensed when a SigTag matches).
/// `None` if `full` is not a full MTL signature in either layout.
pub fn condense_full(full: &[u8]) -> Option<Vec<u8>> {
    let format = Format::of_full(full)?;
    let sig = MtlSignature::parse_as(format, full).ok()?;
    sig.is_full()
        .then(|| MtlSignature::condensed_bytes(&sig.path))
}

/// The SigTag of the signed ladder in a full signature field, or `None` if it is not a full
/// MTL signature in either layout.
pub fn full_signature_tag(full: &[u8]) -> Option<SigTag> {
    let format = Format::of_full(full)?;
    let sig = MtlSignature::parse_as(format, full).ok()?;
    let (_, ladder_bytes, ladder_sig) = sig.signed_ladder.as_ref()?;
    Some(SigTag::of(ladder_bytes, ladder_sig))
}

/// Checks one MTL signature field: a full one by its ladder signature (and the ladder is
/// returned for caching), a condensed one against a ladder of its series in `ladders`.
///
/// # Errors
/// As [`verify_full`] and [`VerifiedLadder::verify_condensed`];
/// [`CryptoError::LadderRequired`] if `ladders` holds no ladder of a condensed signature's
/// series with a rung for its path (none, or one from before the series grew);
/// [`CryptoError::Unsupported`] if `alg` is not an MTL algorithm.
pub fn verify_signature(
    alg: Algorithm,
    public_key: &[u8],
    message: &[u8],
    field: &[u8],
    ladders: &LadderCache,
) -> Result<Option<VerifiedLadder>, CryptoError> {
    if field.first() == Some(&1) {
        return verify_full(alg, public_key, message, field).map(Some);
    }
    let params = MtlParams::of(alg).ok_or(CryptoError::Unsupported(alg))?;
    let sig = MtlSignature::parse_as(params.format, field).map_err(CryptoError::MalformedMtl)?;
    // A ladder of the series that has no rung for this path is an older one (the series has
    // grown since): a newer ladder is needed, not a verdict.
    let ladder = ladders
        .get(public_key, sig.path.series)
        .filter(|l| l.ladder.rung_for(&sig.path).is_some())
        .ok_or(CryptoError::LadderRequired(sig.path.series.as_u64()))?;
    ladder
        .verify_condensed(public_key, message, &sig)
        .map(|()| None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The DNSSEC signed data of Verisign's MTL demo (verisign/MTL
    /// `examples/demo/mtlmode_demo.ipynb`, commit 3c7f089a, §1): `ns.example.org. 3600 IN A
    /// 192.168.1.50` under RRSIG fields alg 131, labels 3, key tag 46491, signer example.org.
    pub(crate) const DEMO_MESSAGE: [u8; 61] = [
        0x00, 0x01, 0x83, 0x03, 0x00, 0x00, 0x0e, 0x10, 0x69, 0x81, 0xf6, 0xc9, 0x69, 0x5d, 0x0c,
        0xc9, 0xb5, 0x9b, 0x07, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0x03, b'o', b'r', b'g',
        0x00, 0x02, b'n', b's', 0x07, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0x03, b'o', b'r',
        b'g', 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x0e, 0x10, 0x00, 0x04, 0xc0, 0xa8, 0x01,
        0x32,
    ];

    #[test]
    fn sigtag_option_lengths_other_than_0_to_8_tags_are_errors() {
        assert_eq!(SigTags::parse(&[]).unwrap().tags().len(), 0);
        assert_eq!(SigTags::parse(&[7; 64]).unwrap().tags().len(), 2);
        assert_eq!(SigTags::parse(&[7; 256]).unwrap().tags().len(), 8);
        for bad in [1usize, 31, 33, 63, 288, 300] {
            assert_eq!(SigTags::parse(&vec![0; bad]), Err(SigTagLengthError(bad)));
        }
        let tags = SigTags::new((0..10u8).map(|i| SigTag([i; 32])));
        assert_eq!(tags.tags().len(), 8);
        assert_eq!(SigTags::parse(&tags.to_bytes()).unwrap(), tags);
        assert!(tags.contains(&SigTag([3; 32])) && !tags.contains(&SigTag([9; 32])));
    }
}

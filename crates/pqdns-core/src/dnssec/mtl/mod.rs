//! Merkle Tree Ladder (MTL) mode for DNSSEC: SLH-DSA-MTL, algorithms 248 (SHA2) and 249 (SHAKE)
//! (draft-harvey-cfrg-mtl-mode, draft-fregly-dnsop-slh-dsa-mtl-dnssec;
//! `docs/pqc-dnssec-wire.md` §5).
//!
//! Each RRset's RFC 4034 signed data becomes a leaf of a growing Merkle tree (the node set of a
//! *series*, named by an 8-byte series identifier). The *ladder* — the roots of the complete
//! binary subtrees that cover the leaves so far, its *rungs* — is signed once with SPHINCS+
//! 128s-simple. An RRset's signature is then either *condensed* (its authentication path from
//! the leaf to a rung, tens of bytes) or *full* (the condensed signature plus the signed
//! ladder, about 8 KB). A validator verifies a full signature once, keeps the ladder
//! ([`VerifiedLadder`]), and checks condensed signatures of the same series with hashes only.
//!
//! Modules: [`node_set`] (hashing, append, authentication paths, ladders), [`wire`] (the
//! signature layouts), and the provider scheme and batch signer (builds with `liboqs`).

pub mod node_set;
#[cfg(feature = "liboqs")]
mod scheme;
pub mod wire;

use std::collections::HashMap;

pub use node_set::{HashFamily, NodeSet, N};
#[cfg(feature = "liboqs")]
pub(crate) use scheme::SCHEMES;
#[cfg(feature = "liboqs")]
pub use scheme::{verify_full, MtlSigner};
pub use wire::{AuthPath, Ladder, MtlSignature, Rung, SeriesId, SignatureError};

use super::provider::CryptoError;

/// EDNS(0) option code a validator sends to ask for full MTL signatures (empty option data;
/// draft-fregly-dnsop-slh-dsa-mtl-dnssec, the value Verisign's implementations use).
pub const EDNS_FULL_SIGNATURES: u16 = 65050;

/// A ladder whose SPHINCS+ signature has been verified under a DNSKEY public key. Only
/// [`verify_full`] makes one, so holding it proves the check was done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedLadder {
    family: HashFamily,
    public_key: Vec<u8>,
    ladder: Ladder,
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

    /// The DNSKEY public-key field (PK.seed ‖ PK.root) it was verified under.
    pub fn public_key(&self) -> &[u8] {
        &self.public_key
    }

    /// Checks a condensed (or full) signature's authentication path for `message` against this
    /// ladder, with hashes only (draft-harvey-cfrg-mtl-mode Algorithms 7 and 8).
    ///
    /// # Errors
    /// [`CryptoError::BadSignature`] if the key or series differs, no rung covers the leaf, or
    /// the path does not lead to the rung's hash.
    pub fn verify_condensed(
        &self,
        public_key: &[u8],
        message: &[u8],
        sig: &MtlSignature,
    ) -> Result<(), CryptoError> {
        if public_key != self.public_key.as_slice() || sig.path.series != self.ladder.series {
            return Err(CryptoError::BadSignature);
        }
        let seed = public_key
            .get(..N)
            .ok_or(CryptoError::BadKey("short MTL key"))?;
        let root = public_key
            .get(N..2 * N)
            .ok_or(CryptoError::BadKey("short MTL key"))?;
        let rung = self
            .ladder
            .rung_for(&sig.path)
            .ok_or(CryptoError::BadSignature)?;
        node_set::path_reaches_rung(self.family, seed, root, message, &sig.path, rung)
            .then_some(())
            .ok_or(CryptoError::BadSignature)
    }
}

/// A bounded store of verified ladders, keyed by (DNSKEY public key, series); the newest ladder
/// of a series replaces older ones. Oldest-inserted entries are evicted past `capacity`.
#[derive(Debug)]
pub struct LadderCache {
    capacity: usize,
    entries: HashMap<(Vec<u8>, SeriesId), (u64, VerifiedLadder)>,
    clock: u64,
}

impl LadderCache {
    /// A cache of at most `capacity` ladders (at least 1).
    pub fn new(capacity: usize) -> LadderCache {
        LadderCache {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            clock: 0,
        }
    }

    /// Stores `ladder`, unless a ladder of the same series with more leaves is already held.
    pub fn insert(&mut self, ladder: VerifiedLadder) {
        let key = (ladder.public_key.clone(), ladder.series());
        if let Some((_, old)) = self.entries.get(&key) {
            if old.ladder.leaf_count() > ladder.ladder.leaf_count() {
                return;
            }
        }
        self.clock += 1;
        self.entries.insert(key, (self.clock, ladder));
        while self.entries.len() > self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone())
                .expect("non-empty");
            self.entries.remove(&oldest);
        }
    }

    /// The ladder of `series` verified under `public_key`, if held.
    pub fn get(&self, public_key: &[u8], series: SeriesId) -> Option<&VerifiedLadder> {
        self.entries
            .get(&(public_key.to_vec(), series))
            .map(|(_, l)| l)
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
/// `full`, a full signature field of the same series whose ladder has a rung for the condensed
/// signature's path (draft-fregly-dnsop-slh-dsa-mtl-dnssec: what a server returns when asked
/// with [`EDNS_FULL_SIGNATURES`]). `None` if either field does not parse, `condensed` is
/// already full, the series differ, or the ladder does not cover the path.
pub fn expand_condensed(condensed: &[u8], full: &[u8]) -> Option<Vec<u8>> {
    let short = MtlSignature::parse(condensed).ok()?;
    let long = MtlSignature::parse(full).ok()?;
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

/// Checks one MTL signature field: a full one by its ladder signature (and the ladder is
/// returned for caching), a condensed one against a ladder of its series in `ladders`.
///
/// # Errors
/// As [`verify_full`] and [`VerifiedLadder::verify_condensed`];
/// [`CryptoError::LadderRequired`] if a condensed signature's ladder is not in `ladders`;
/// [`CryptoError::Unsupported`] in builds without the `liboqs` feature.
pub fn verify_signature(
    alg: super::Algorithm,
    public_key: &[u8],
    message: &[u8],
    field: &[u8],
    ladders: &LadderCache,
) -> Result<Option<VerifiedLadder>, CryptoError> {
    if field.first() == Some(&1) {
        #[cfg(feature = "liboqs")]
        return verify_full(alg, public_key, message, field).map(Some);
        #[cfg(not(feature = "liboqs"))]
        return Err(CryptoError::Unsupported(alg));
    }
    let _ = alg;
    let sig = MtlSignature::parse(field).map_err(CryptoError::MalformedMtl)?;
    let ladder = ladders
        .get(public_key, sig.path.series)
        .ok_or(CryptoError::LadderRequired(sig.path.series.as_u64()))?;
    ladder
        .verify_condensed(public_key, message, &sig)
        .map(|()| None)
}

//! MTL modes as provider schemes: a key is the underlying scheme's key pair (DNSKEY field its
//! public key; 2025: SPHINCS+ PK.seed ‖ PK.root), ladders are signed with the underlying
//! scheme ([`ladder_message`]), and batches of RRsets become one series.

use std::sync::Mutex;

use super::node_set::{NodeSet, N};
use super::series::{key_id, SavedSeries};
use super::wire::{Format, Ladder, MtlSignature, SeriesId};
use super::{MtlParams, SigTag, VerifiedLadder};
use crate::dnssec::algorithm::{Algorithm, Backend};
use crate::dnssec::provider::{
    BatchSigningKey, CryptoError, PrivateFields, SignatureScheme, SigningKey,
};

/// The MTL schemes whose underlying scheme this build has.
pub(crate) static SCHEMES: &[&dyn SignatureScheme] = &[
    #[cfg(feature = "liboqs")]
    &Mtl(Algorithm::MtlSlhDsaSha2_128s),
    #[cfg(feature = "liboqs")]
    &Mtl(Algorithm::MtlSlhDsaShake128s),
    #[cfg(any(feature = "aws-lc", feature = "liboqs"))]
    &Mtl(Algorithm::MlDsaMtl44),
    #[cfg(feature = "liboqs")]
    &Mtl(Algorithm::FlDsaMtl512),
    #[cfg(feature = "liboqs")]
    &Mtl(Algorithm::SlhDsaMtl2026Sha2_128s),
    #[cfg(feature = "liboqs")]
    &Mtl(Algorithm::SlhDsaMtl2026Shake128s),
    &Mtl(Algorithm::SlhDsaMtlFips205Sha2_128s),
    &Mtl(Algorithm::SlhDsaMtlFips205Shake128s),
];

struct Mtl(Algorithm);

fn params(alg: Algorithm) -> Result<MtlParams, CryptoError> {
    MtlParams::of(alg).ok_or(CryptoError::Unsupported(alg))
}

/// The scheme that signs ladders of `alg`: the first compiled backend that has it (aws-lc-rs,
/// then liboqs, then `fips205`), with no allocation.
fn ladder_scheme(alg: Algorithm) -> Result<&'static dyn SignatureScheme, CryptoError> {
    let underlying = params(alg)?.underlying;
    let mut groups: [&[&'static dyn SignatureScheme]; 3] = [&[], &[], &[]];
    #[cfg(feature = "aws-lc")]
    {
        groups[0] = crate::dnssec::backend_awslc::SCHEMES;
    }
    #[cfg(feature = "liboqs")]
    {
        groups[1] = crate::dnssec::backend_liboqs::SCHEMES;
    }
    groups[2] = crate::dnssec::backend_fips205::SCHEMES;
    groups
        .into_iter()
        .flatten()
        .copied()
        .find(|s| s.algorithm() == underlying)
        .ok_or(CryptoError::Unsupported(alg))
}

/// The bytes a ladder signature covers.
///
/// 2025: `0x81 ‖ 0x00 ‖ OID ‖ ladder`, the ladder domain separator (`MTL_LADDER_SEP` = 129),
/// the length of the empty context string, and the 6-byte object identifier Verisign's MTL
/// library gives SLH-DSA-MTL-SHA2-128S (`2B CE 0F 06 0A 10`) or -SHAKE-128S
/// (`2B CE 0F 06 0D 10`), then the ladder's wire form (draft-harvey-cfrg-mtl-mode-03 §4.1).
///
/// 2026: the ladder's wire form alone, signed with the underlying scheme's empty context
/// (pure ML-DSA, FIPS 204 §5.2), as Verisign's published ML-DSA-MTL data is signed (MTL
/// library 1.3 `examples/demo`, OpenSSL `EVP_PKEY_sign_message_init` without a context).
fn ladder_message(p: &MtlParams, ladder_bytes: &[u8]) -> Vec<u8> {
    let oid: [u8; 6] = match (p.format, p.family) {
        (Format::V2026, _) => return ladder_bytes.to_vec(),
        (Format::V2025, super::HashFamily::Sha2) => [0x2B, 0xCE, 0x0F, 0x06, 0x0A, 0x10],
        (Format::V2025, super::HashFamily::Shake) => [0x2B, 0xCE, 0x0F, 0x06, 0x0D, 0x10],
    };
    let mut out = Vec::with_capacity(2 + oid.len() + ladder_bytes.len());
    out.extend_from_slice(&[0x81, 0x00]);
    out.extend_from_slice(&oid);
    out.extend_from_slice(ladder_bytes);
    out
}

fn random_series(format: Format) -> Result<SeriesId, CryptoError> {
    let mut out = [0u8; super::wire::SERIES_ID_LEN_2026];
    let len = format.series_len();
    fill_random(&mut out[..len])?;
    SeriesId::new(&out[..len]).ok_or(CryptoError::Library("series ID length"))
}

fn fill_random(out: &mut [u8]) -> Result<(), CryptoError> {
    aws_lc_rs::rand::fill(out).map_err(|_| CryptoError::Library("random generator failed"))
}

fn random_randomizer() -> Result<[u8; N], CryptoError> {
    let mut out = [0u8; N];
    fill_random(&mut out)?;
    Ok(out)
}

/// Verifies a full MTL signature of `message` under `public_key`: the ladder's signature, then
/// the authentication path against it. Returns the verified ladder, for checking condensed
/// signatures of the series later.
///
/// # Errors
/// [`CryptoError::MalformedMtl`] if the field does not parse; [`CryptoError::BadSignature`] if
/// the ladder signature or the path does not verify; [`CryptoError::LadderRequired`] for a
/// condensed signature; [`CryptoError::Unsupported`] if `alg` is not an MTL algorithm this
/// build has.
pub fn verify_full(
    alg: Algorithm,
    public_key: &[u8],
    message: &[u8],
    field: &[u8],
) -> Result<VerifiedLadder, CryptoError> {
    let p = params(alg)?;
    let hash = p.tree_hash(public_key)?;
    let sig = MtlSignature::parse_as(p.format, field).map_err(CryptoError::MalformedMtl)?;
    let Some((ladder, ladder_bytes, ladder_sig)) = &sig.signed_ladder else {
        return Err(CryptoError::LadderRequired(sig.path.series.as_u64()));
    };
    if ladder.series != sig.path.series {
        return Err(CryptoError::BadSignature);
    }
    ladder_scheme(alg)?.verify(public_key, &ladder_message(&p, ladder_bytes), ladder_sig)?;
    let verified = VerifiedLadder {
        hash,
        public_key: public_key.to_vec(),
        ladder: ladder.clone(),
        tag: SigTag::of(ladder_bytes, ladder_sig),
    };
    verified.verify_condensed(public_key, message, &sig)?;
    Ok(verified)
}

/// An MTL signing key with its current series: append RRsets' signed data as leaves, sign the
/// ladder once, then hand out condensed or full signatures. A re-signing after a zone change
/// can append the new RRsets to the same series and sign a new ladder, leaving the existing
/// signatures valid against both ladders where their rungs survive.
pub struct MtlSigner {
    params: MtlParams,
    alg: Algorithm,
    key: Box<dyn SigningKey>,
    nodes: NodeSet,
    /// The leaf count, wire form and signature of the last ladder signed.
    signed_ladder: Option<(u64, Vec<u8>, Vec<u8>)>,
}

impl MtlSigner {
    /// A new series (random series ID from the OS generator: 8 bytes in 2025, 32 in 2026) for
    /// `key`, an MTL key.
    ///
    /// # Errors
    /// [`CryptoError::Unsupported`] if `key` is not an MTL key this build can sign with;
    /// [`CryptoError::Library`] if the random generator fails.
    pub fn new(key: &dyn SigningKey) -> Result<MtlSigner, CryptoError> {
        let alg = key.algorithm();
        let params = params(alg)?;
        let underlying = ladder_scheme(alg)?.load(&key.private_fields(), key.public_key())?;
        let hash = params.tree_hash(key.public_key())?;
        Ok(MtlSigner {
            params,
            alg,
            nodes: NodeSet::new(hash, random_series(params.format)?),
            key: underlying,
            signed_ladder: None,
        })
    }

    /// Resumes `saved`, a series of `key` ([`super::series`]): its leaves keep their indexes
    /// and new ones are appended after them, under the same series ID.
    ///
    /// # Errors
    /// As [`MtlSigner::new`]; [`CryptoError::BadKey`] if `saved` is another key's series or
    /// its ID does not fit the algorithm's layout.
    pub fn resume(key: &dyn SigningKey, saved: &SavedSeries) -> Result<MtlSigner, CryptoError> {
        let alg = key.algorithm();
        let params = params(alg)?;
        if saved.key_id != key_id(alg, key.public_key())
            || saved.series.as_bytes().len() != params.format.series_len()
        {
            return Err(CryptoError::BadKey(
                "the saved MTL series belongs to another key",
            ));
        }
        let underlying = ladder_scheme(alg)?.load(&key.private_fields(), key.public_key())?;
        let hash = params.tree_hash(key.public_key())?;
        Ok(MtlSigner {
            params,
            alg,
            nodes: NodeSet::from_leaves(hash, saved.series, &saved.leaves)
                .ok_or(CryptoError::BadKey("saved MTL series over 2^32 leaves"))?,
            key: underlying,
            signed_ladder: None,
        })
    }

    /// The series as [`MtlSigner::resume`] takes it back: every leaf so far.
    pub fn saved(&self) -> SavedSeries {
        SavedSeries {
            key_id: key_id(self.alg, self.key.public_key()),
            series: self.nodes.series(),
            leaves: (0..self.nodes.leaf_count())
                .filter_map(|i| self.nodes.leaf(i))
                .collect(),
        }
    }

    /// True if leaf `leaf` is `message`'s (its leaf hash recomputed with the leaf's
    /// randomizer): an earlier signature of `message` at that index can be given a path to the
    /// current ladder without a new leaf.
    pub fn holds(&self, leaf: u64, message: &[u8]) -> bool {
        self.nodes.leaf(leaf).is_some_and(|(hash, randomizer)| {
            self.nodes
                .tree_hash()
                .leaf(self.nodes.series(), leaf, &randomizer, message)
                == hash
        })
    }

    /// The series.
    pub fn series(&self) -> SeriesId {
        self.nodes.series()
    }

    /// Number of leaves so far.
    pub fn leaf_count(&self) -> u64 {
        self.nodes.leaf_count()
    }

    /// Appends a message (an RRset's RFC 4034 §3.1.8.1 signed data); returns its leaf index.
    ///
    /// # Errors
    /// [`CryptoError::Library`] if the series is full or the random generator fails.
    pub fn append(&mut self, message: &[u8]) -> Result<u64, CryptoError> {
        self.nodes
            .append(message, random_randomizer()?)
            .ok_or(CryptoError::Library("MTL series is full (2^32 leaves)"))
    }

    /// Signs the current ladder with the underlying scheme (once per ladder; the expensive
    /// step).
    ///
    /// # Errors
    /// [`CryptoError::Library`] if the underlying scheme fails.
    pub fn sign_ladder(&mut self) -> Result<(), CryptoError> {
        let count = self.nodes.leaf_count();
        if self
            .signed_ladder
            .as_ref()
            .is_some_and(|(c, _, _)| *c == count)
        {
            return Ok(());
        }
        let mut bytes = Vec::new();
        self.nodes.ladder().write(&mut bytes);
        let sig = self.key.sign(&ladder_message(&self.params, &bytes))?;
        self.signed_ladder = Some((count, bytes, sig));
        Ok(())
    }

    /// The current ladder.
    pub fn ladder(&self) -> Ladder {
        self.nodes.ladder()
    }

    /// The SigTag of the last ladder signed, if any.
    pub fn tag(&self) -> Option<SigTag> {
        self.signed_ladder
            .as_ref()
            .map(|(_, bytes, sig)| SigTag::of(bytes, sig))
    }

    /// The signature field for leaf `leaf`: condensed, or full with the last signed ladder.
    /// Paths lead to the rungs of the current ladder.
    ///
    /// # Errors
    /// [`CryptoError::Library`] for an unknown leaf, or a full signature before
    /// [`MtlSigner::sign_ladder`] covered the current leaves.
    pub fn signature(&self, leaf: u64, full: bool) -> Result<Vec<u8>, CryptoError> {
        let path = self
            .nodes
            .auth_path(leaf)
            .ok_or(CryptoError::Library("no such MTL leaf"))?;
        if !full {
            return Ok(MtlSignature::condensed_bytes(&path));
        }
        match &self.signed_ladder {
            Some((count, bytes, sig)) if *count == self.nodes.leaf_count() => {
                Ok(MtlSignature::full_bytes(&path, bytes, sig))
            }
            _ => Err(CryptoError::Library("MTL ladder not signed yet")),
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }
}

/// An MTL key: the underlying scheme's key pair. Signing one message makes a one-leaf series.
struct MtlKey {
    alg: Algorithm,
    underlying: Box<dyn SigningKey>,
    /// Serialises batch signing so two batches never share a series by accident.
    lock: Mutex<()>,
}

impl SigningKey for MtlKey {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn public_key(&self) -> &[u8] {
        self.underlying.public_key()
    }
    fn private_fields(&self) -> PrivateFields {
        self.underlying.private_fields()
    }
    fn liboqs_secret_key(&self) -> Result<zeroize::Zeroizing<Vec<u8>>, CryptoError> {
        self.underlying.liboqs_secret_key()
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut sigs = self.sign_batch(&[message.to_vec()], &[true])?;
        sigs.pop().ok_or(CryptoError::Library("empty batch"))
    }
    fn as_batch(&self) -> Option<&dyn BatchSigningKey> {
        Some(self)
    }
}

impl BatchSigningKey for MtlKey {
    fn sign_batch(&self, messages: &[Vec<u8>], full: &[bool]) -> Result<Vec<Vec<u8>>, CryptoError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut signer = MtlSigner::new(self)?;
        let leaves = messages
            .iter()
            .map(|m| signer.append(m))
            .collect::<Result<Vec<_>, _>>()?;
        if full.iter().any(|f| *f) {
            signer.sign_ladder()?;
        }
        leaves
            .iter()
            .zip(full)
            .map(|(&leaf, &f)| signer.signature(leaf, f))
            .collect()
    }
}

impl SignatureScheme for Mtl {
    fn algorithm(&self) -> Algorithm {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::Pqdns
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        Ok(Box::new(MtlKey {
            alg: self.0,
            underlying: ladder_scheme(self.0)?.generate()?,
            lock: Mutex::new(()),
        }))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        Ok(Box::new(MtlKey {
            alg: self.0,
            underlying: ladder_scheme(self.0)?.load(fields, public_key)?,
            lock: Mutex::new(()),
        }))
    }
    /// Verifies a full signature; a condensed one needs a ladder ([`CryptoError::LadderRequired`]).
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        verify_full(self.0, public_key, message, sig).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condensed_len(alg: Algorithm, siblings: usize) -> usize {
        params(alg).unwrap().format.condensed_len(siblings)
    }

    /// Every MTL scheme of this build: a batch signs, the full signature verifies and yields
    /// the ladder, every condensed signature verifies through it and only for its message.
    #[test]
    fn batch_signatures_verify_condensed_through_the_full_ones_ladder() {
        for scheme in SCHEMES {
            let alg = scheme.algorithm();
            let key = scheme.generate().unwrap();
            let msgs: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 40]).collect();
            let full: Vec<bool> = (0..10).map(|i| i == 2).collect();
            let sigs = key.as_batch().unwrap().sign_batch(&msgs, &full).unwrap();
            assert_eq!(sigs[0].len(), condensed_len(alg, 3), "{alg}");
            assert!(sigs[2].len() > condensed_len(alg, 3) + 100, "{alg}");
            let ladder = verify_full(alg, key.public_key(), &msgs[2], &sigs[2]).unwrap();
            assert_eq!(ladder.ladder().leaf_count(), 10);
            let format = params(alg).unwrap().format;
            for (i, sig) in sigs.iter().enumerate() {
                let parsed = MtlSignature::parse_as(format, sig).unwrap();
                ladder
                    .verify_condensed(key.public_key(), &msgs[i], &parsed)
                    .unwrap();
                assert!(ladder
                    .verify_condensed(key.public_key(), &msgs[(i + 1) % 10], &parsed)
                    .is_err());
            }
            assert_eq!(
                scheme.verify(key.public_key(), &msgs[0], &sigs[0]),
                Err(CryptoError::LadderRequired(ladder.series().as_u64())),
                "{alg}"
            );
            let mut bad = sigs[2].clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert!(scheme.verify(key.public_key(), &msgs[2], &bad).is_err());
            assert_eq!(
                super::super::full_signature_tag(&sigs[2]),
                Some(ladder.tag())
            );
        }
    }

    #[test]
    fn full_and_condensed_signatures_convert_both_ways_and_verify() {
        for alg in [Algorithm::MtlSlhDsaSha2_128s, Algorithm::MlDsaMtl44] {
            let Some(scheme) = SCHEMES.iter().find(|s| s.algorithm() == alg) else {
                continue;
            };
            let key = scheme.generate().unwrap();
            let msgs: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 30]).collect();
            let full: Vec<bool> = (0..6).map(|i| i == 0).collect();
            let sigs = key.as_batch().unwrap().sign_batch(&msgs, &full).unwrap();
            // A full signature condensed verifies through the ladder, for its message only; a
            // condensed one has nothing to condense.
            let ladder = verify_full(alg, key.public_key(), &msgs[0], &sigs[0]).unwrap();
            let condensed = super::super::condense_full(&sigs[0]).unwrap();
            let format = params(alg).unwrap().format;
            assert_eq!(condensed[0], 0, "flag: condensed");
            assert!(condensed.len() < sigs[0].len());
            let parsed = MtlSignature::parse_as(format, &condensed).unwrap();
            ladder
                .verify_condensed(key.public_key(), &msgs[0], &parsed)
                .unwrap();
            assert!(ladder
                .verify_condensed(key.public_key(), &msgs[1], &parsed)
                .is_err());
            assert_eq!(super::super::condense_full(&sigs[4]), None);
            let expanded = super::super::expand_condensed(&sigs[4], &sigs[0]).unwrap();
            assert_eq!(expanded[0], 1, "flag: full");
            scheme
                .verify(key.public_key(), &msgs[4], &expanded)
                .unwrap();
            assert!(scheme
                .verify(key.public_key(), &msgs[3], &expanded)
                .is_err());
            // Not two full ones, not a ladder of another series.
            assert_eq!(super::super::expand_condensed(&sigs[0], &sigs[0]), None);
            let other = scheme.generate().unwrap();
            let theirs = other.as_batch().unwrap().sign_batch(&msgs, &full).unwrap();
            assert_eq!(super::super::expand_condensed(&sigs[4], &theirs[0]), None);
        }
    }
}

//! SLH-DSA-MTL as a provider scheme (algorithms 248/249): keys are SPHINCS+-128s-simple key
//! pairs from liboqs (DNSKEY field PK.seed ‖ PK.root, private key liboqs' secret key), ladders
//! are signed with SPHINCS+ over their domain-separated wire form ([`ladder_message`]), and
//! batches of RRsets become one series.

use std::sync::Mutex;

use super::node_set::{HashFamily, NodeSet, N};
use super::wire::{Ladder, MtlSignature, SeriesId};
use super::VerifiedLadder;
use crate::dnssec::algorithm::{Algorithm, Backend};
use crate::dnssec::backend_liboqs::sphincs_128s;
use crate::dnssec::provider::{
    BatchSigningKey, CryptoError, PrivateFields, SignatureScheme, SigningKey,
};

/// The MTL schemes.
pub(crate) static SCHEMES: &[&dyn SignatureScheme] =
    &[&Mtl(HashFamily::Sha2), &Mtl(HashFamily::Shake)];

struct Mtl(HashFamily);

fn family_of(alg: Algorithm) -> HashFamily {
    if alg == Algorithm::MtlSlhDsaShake128s {
        HashFamily::Shake
    } else {
        HashFamily::Sha2
    }
}

fn algorithm_of(family: HashFamily) -> Algorithm {
    match family {
        HashFamily::Sha2 => Algorithm::MtlSlhDsaSha2_128s,
        HashFamily::Shake => Algorithm::MtlSlhDsaShake128s,
    }
}

/// The bytes SPHINCS+ signs for a ladder: `0x81 ‖ 0x00 ‖ OID ‖ ladder`, the ladder domain
/// separator (`MTL_LADDER_SEP` = 129), the length of the empty context string, and the 6-byte
/// object identifier Verisign's MTL library gives SLH-DSA-MTL-SHA2-128S (`2B CE 0F 06 0A 10`) or
/// -SHAKE-128S (`2B CE 0F 06 0D 10`), then the ladder's wire form (draft-harvey-cfrg-mtl-mode-03
/// §4.1, "sep = octet(MTL_LADDER_SEP) ‖ octet(OLEN(ctx)) ‖ ctx ‖ OID_MTL ‖ ladder").
fn ladder_message(family: HashFamily, ladder_bytes: &[u8]) -> Vec<u8> {
    let oid: [u8; 6] = match family {
        HashFamily::Sha2 => [0x2B, 0xCE, 0x0F, 0x06, 0x0A, 0x10],
        HashFamily::Shake => [0x2B, 0xCE, 0x0F, 0x06, 0x0D, 0x10],
    };
    let mut out = Vec::with_capacity(2 + oid.len() + ladder_bytes.len());
    out.extend_from_slice(&[0x81, 0x00]);
    out.extend_from_slice(&oid);
    out.extend_from_slice(ladder_bytes);
    out
}

fn ladder_scheme(family: HashFamily) -> &'static dyn SignatureScheme {
    sphincs_128s(family == HashFamily::Shake)
}

fn random_bytes<const L: usize>() -> Result<[u8; L], CryptoError> {
    let mut out = [0u8; L];
    aws_lc_rs::rand::fill(&mut out).map_err(|_| CryptoError::Library("random generator failed"))?;
    Ok(out)
}

/// Verifies a full MTL signature of `message` under `public_key`: the ladder's SPHINCS+
/// signature, then the authentication path against it. Returns the verified ladder, for
/// checking condensed signatures of the series later.
///
/// # Errors
/// [`CryptoError::MalformedMtl`] if the field does not parse; [`CryptoError::BadSignature`] if
/// the ladder signature or the path does not verify; [`CryptoError::LadderRequired`] for a
/// condensed signature.
pub fn verify_full(
    alg: Algorithm,
    public_key: &[u8],
    message: &[u8],
    field: &[u8],
) -> Result<VerifiedLadder, CryptoError> {
    let family = family_of(alg);
    if public_key.len() != 2 * N {
        return Err(CryptoError::BadKey("MTL public key must be 32 bytes"));
    }
    let sig = MtlSignature::parse(field).map_err(CryptoError::MalformedMtl)?;
    let Some((ladder, ladder_bytes, ladder_sig)) = &sig.signed_ladder else {
        return Err(CryptoError::LadderRequired(sig.path.series.as_u64()));
    };
    if ladder.series != sig.path.series {
        return Err(CryptoError::BadSignature);
    }
    ladder_scheme(family).verify(
        public_key,
        &ladder_message(family, ladder_bytes),
        ladder_sig,
    )?;
    let verified = VerifiedLadder {
        family,
        public_key: public_key.to_vec(),
        ladder: ladder.clone(),
    };
    verified.verify_condensed(public_key, message, &sig)?;
    Ok(verified)
}

/// An MTL signing key with its current series: append RRsets' signed data as leaves, sign the
/// ladder once, then hand out condensed or full signatures. A re-signing after a zone change
/// appends the new RRsets to the same series and signs a new ladder, leaving the existing
/// signatures valid against both ladders where their rungs survive.
pub struct MtlSigner {
    family: HashFamily,
    key: Box<dyn SigningKey>,
    nodes: NodeSet,
    /// The wire form and SPHINCS+ signature of the last ladder signed.
    signed_ladder: Option<(u64, Vec<u8>, Vec<u8>)>,
}

impl MtlSigner {
    /// A new series (random 8-byte identifier from the OS generator) for `key`, an MTL key.
    ///
    /// # Errors
    /// [`CryptoError::Unsupported`] if `key` is not an MTL key; [`CryptoError::Library`] if the
    /// random generator fails.
    pub fn new(key: &dyn SigningKey) -> Result<MtlSigner, CryptoError> {
        let alg = key.algorithm();
        if !alg.is_mtl() {
            return Err(CryptoError::Unsupported(alg));
        }
        let family = family_of(alg);
        let fields = key.private_fields();
        let sphincs = ladder_scheme(family).load(&fields, key.public_key())?;
        Ok(MtlSigner {
            family,
            nodes: NodeSet::new(family, key.public_key(), SeriesId(random_bytes()?)),
            key: sphincs,
            signed_ladder: None,
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
    pub fn append(&mut self, message: &[u8]) -> Result<u32, CryptoError> {
        self.nodes
            .append(message, random_bytes()?)
            .ok_or(CryptoError::Library("MTL series is full (2^32 leaves)"))
    }

    /// Signs the current ladder with SPHINCS+ (once per ladder; the expensive step).
    ///
    /// # Errors
    /// [`CryptoError::Library`] if SPHINCS+ fails.
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
        let sig = self.key.sign(&ladder_message(self.family, &bytes))?;
        self.signed_ladder = Some((count, bytes, sig));
        Ok(())
    }

    /// The current ladder.
    pub fn ladder(&self) -> Ladder {
        self.nodes.ladder()
    }

    /// The signature field for leaf `leaf`: condensed, or full with the last signed ladder.
    /// Paths lead to the rungs of the current ladder.
    ///
    /// # Errors
    /// [`CryptoError::Library`] for an unknown leaf, or a full signature before
    /// [`MtlSigner::sign_ladder`] covered the current leaves.
    pub fn signature(&self, leaf: u32, full: bool) -> Result<Vec<u8>, CryptoError> {
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
        algorithm_of(self.family)
    }
}

/// An MTL key: the SPHINCS+ key pair. Signing one message makes a one-leaf series.
struct MtlKey {
    family: HashFamily,
    sphincs: Box<dyn SigningKey>,
    /// Serialises batch signing so two batches never share a series by accident.
    lock: Mutex<()>,
}

impl SigningKey for MtlKey {
    fn algorithm(&self) -> Algorithm {
        algorithm_of(self.family)
    }
    fn public_key(&self) -> &[u8] {
        self.sphincs.public_key()
    }
    fn private_fields(&self) -> PrivateFields {
        self.sphincs.private_fields()
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut sigs = self.sign_batch(&[message.to_vec()], &[true])?;
        Ok(sigs.remove(0))
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
        algorithm_of(self.0)
    }
    fn backend(&self) -> Backend {
        Backend::Pqdns
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        Ok(Box::new(MtlKey {
            family: self.0,
            sphincs: ladder_scheme(self.0).generate()?,
            lock: Mutex::new(()),
        }))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        Ok(Box::new(MtlKey {
            family: self.0,
            sphincs: ladder_scheme(self.0).load(fields, public_key)?,
            lock: Mutex::new(()),
        }))
    }
    /// Verifies a full signature; a condensed one needs a ladder ([`CryptoError::LadderRequired`]).
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        verify_full(algorithm_of(self.0), public_key, message, sig).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_signatures_verify_condensed_through_the_full_ones_ladder() {
        let scheme = &Mtl(HashFamily::Sha2);
        let key = scheme.generate().unwrap();
        let msgs: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 40]).collect();
        let full: Vec<bool> = (0..10).map(|i| i == 2).collect();
        let sigs = key.as_batch().unwrap().sign_batch(&msgs, &full).unwrap();
        assert!(sigs[2].len() > 7856 && sigs[0].len() == 1 + 16 + 24 + 3 * 16);
        let alg = key.algorithm();
        let ladder = verify_full(alg, key.public_key(), &msgs[2], &sigs[2]).unwrap();
        assert_eq!(ladder.ladder().leaf_count(), 10);
        for (i, sig) in sigs.iter().enumerate() {
            let parsed = MtlSignature::parse(sig).unwrap();
            ladder
                .verify_condensed(key.public_key(), &msgs[i], &parsed)
                .unwrap();
            assert!(ladder
                .verify_condensed(key.public_key(), &msgs[(i + 1) % 10], &parsed)
                .is_err());
        }
        assert_eq!(
            scheme.verify(key.public_key(), &msgs[0], &sigs[0]),
            Err(CryptoError::LadderRequired(ladder.series().as_u64()))
        );
        let mut bad = sigs[2].clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(scheme.verify(key.public_key(), &msgs[2], &bad).is_err());
    }

    #[test]
    fn a_condensed_signature_expanded_with_the_ladder_verifies_alone() {
        let scheme = &Mtl(HashFamily::Sha2);
        let key = scheme.generate().unwrap();
        let msgs: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 30]).collect();
        let full: Vec<bool> = (0..6).map(|i| i == 0).collect();
        let sigs = key.as_batch().unwrap().sign_batch(&msgs, &full).unwrap();
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

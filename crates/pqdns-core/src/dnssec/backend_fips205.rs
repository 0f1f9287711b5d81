//! FIPS 205 SLH-DSA (pure mode, empty context, FIPS 205 §10.2) through the `fips205` crate:
//! SLH-DSA-SHA2-128s and SLH-DSA-SHAKE-128s. Not signature-compatible with SPHINCS+ round 3.1
//! (`docs/pqc-dnssec-wire.md` §1), so these are distinct algorithms with their own numbers.
//!
//! DNSKEY public-key field: PK.seed ‖ PK.root (2n = 32 bytes, FIPS 205 §9.1). Private key
//! (`PrivateKey` field): SK.seed ‖ SK.prf ‖ PK.seed ‖ PK.root (4n = 64 bytes); a 3n-byte
//! SK.seed ‖ SK.prf ‖ PK.seed is accepted too and expanded with `slh_keygen_internal`
//! (FIPS 205 Algorithm 18), which is how the NIST ACVP key-generation vectors are stated.

use fips205::traits::{KeyGen, SerDes, Signer, Verifier};
use zeroize::Zeroizing;

use super::algorithm::{Algorithm, Backend};
use super::provider::{CryptoError, PrivateFields, SignatureScheme, SigningKey};

/// The schemes this backend provides.
pub(crate) static SCHEMES: &[&dyn SignatureScheme] = &[
    &SlhDsa(Algorithm::SlhDsaSha2_128s),
    &SlhDsa(Algorithm::SlhDsaShake128s),
];

struct SlhDsa(Algorithm);

/// n for the 128-bit parameter sets (FIPS 205 Table 2).
const N: usize = 16;

/// Runs `$body` with `$m` bound to the `fips205` module of the parameter set.
macro_rules! with_params {
    ($alg:expr, $m:ident, $body:expr) => {
        match $alg {
            Algorithm::SlhDsaSha2_128s => {
                use fips205::slh_dsa_sha2_128s as $m;
                $body
            }
            _ => {
                use fips205::slh_dsa_shake_128s as $m;
                $body
            }
        }
    };
}

struct SlhDsaKey {
    alg: Algorithm,
    public: Vec<u8>,
    secret: Zeroizing<Vec<u8>>,
}

fn keypair_from_seeds(alg: Algorithm, seeds: &[u8]) -> (Vec<u8>, Zeroizing<Vec<u8>>) {
    let part = |i: usize| -> [u8; N] { seeds[i * N..(i + 1) * N].try_into().expect("n bytes") };
    with_params!(alg, m, {
        let (pk, sk) = m::KG::keygen_from_seed(&part(0), &part(1), &part(2));
        (
            pk.into_bytes().to_vec(),
            Zeroizing::new(sk.into_bytes().to_vec()),
        )
    })
}

impl SigningKey for SlhDsaKey {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn public_key(&self) -> &[u8] {
        &self.public
    }
    fn private_fields(&self) -> PrivateFields {
        PrivateFields::single(self.secret.to_vec())
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let fail = CryptoError::Library("SLH-DSA signing failed");
        with_params!(self.alg, m, {
            let bytes: [u8; m::SK_LEN] = self.secret.as_slice().try_into().map_err(|_| fail)?;
            let sk = m::PrivateKey::try_from_bytes(bytes).map_err(|_| fail)?;
            sk.try_sign(message, &[], true)
                .map(|s| s.to_vec())
                .map_err(|_| fail)
        })
    }
}

impl SignatureScheme for SlhDsa {
    fn algorithm(&self) -> Algorithm {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::Fips205
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        let mut seeds = Zeroizing::new(vec![0u8; 3 * N]);
        aws_lc_rs::rand::fill(&mut seeds)
            .map_err(|_| CryptoError::Library("random generator failed"))?;
        let (public, secret) = keypair_from_seeds(self.0, &seeds);
        Ok(Box::new(SlhDsaKey {
            alg: self.0,
            public,
            secret,
        }))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let private = fields
            .get("PrivateKey")
            .ok_or(CryptoError::BadKey("PrivateKey field missing"))?;
        let (public, secret) = match private.len() {
            l if l == 3 * N => keypair_from_seeds(self.0, private),
            l if l == 4 * N => (private[2 * N..].to_vec(), Zeroizing::new(private.to_vec())),
            _ => {
                return Err(CryptoError::BadKey(
                    "SLH-DSA private key is neither 3n seed bytes nor a 4n-byte key",
                ))
            }
        };
        if public != public_key {
            return Err(CryptoError::BadKey(
                "SLH-DSA private key does not match the DNSKEY",
            ));
        }
        Ok(Box::new(SlhDsaKey {
            alg: self.0,
            public,
            secret,
        }))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        with_params!(self.0, m, {
            let pk: [u8; m::PK_LEN] = public_key
                .try_into()
                .map_err(|_| CryptoError::BadKey("public key has the wrong length"))?;
            let pk = m::PublicKey::try_from_bytes(pk)
                .map_err(|_| CryptoError::BadKey("malformed SLH-DSA public key"))?;
            let sig: &[u8; m::SIG_LEN] = sig.try_into().map_err(|_| CryptoError::BadSignature)?;
            pk.verify(message, sig, &[])
                .then_some(())
                .ok_or(CryptoError::BadSignature)
        })
    }
}

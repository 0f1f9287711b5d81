//! aws-lc-rs backend: RSASHA256/512 (RFC 5702, key format RFC 3110), RSASHA1 and
//! RSASHA1-NSEC3-SHA1 for validation only (RFC 3110, RFC 5155 §2; RFC 8624 §3.1: "MUST NOT"
//! sign, "MUST" validate, through aws-lc-rs's legacy SHA-1 verification), ECDSA P-256/P-384
//! (RFC 6605), Ed25519 (RFC 8080) and ML-DSA-44/65/87 (FIPS 204, seeds as private keys).

use aws_lc_rs::encoding::AsBigEndian;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::{KeyPairComponents, PublicKeyComponents};
use aws_lc_rs::signature::{self, KeyPair as _, UnparsedPublicKey};
use zeroize::Zeroizing;

use super::algorithm::{Algorithm, Backend};
use super::provider::{CryptoError, PrivateFields, SignatureScheme, SigningKey};

/// The schemes this backend provides.
pub(crate) static SCHEMES: &[&dyn SignatureScheme] = &[
    &Rsa(Algorithm::RsaSha1),
    &Rsa(Algorithm::RsaSha1Nsec3Sha1),
    &Rsa(Algorithm::RsaSha256),
    &Rsa(Algorithm::RsaSha512),
    &Ecdsa(Algorithm::EcdsaP256Sha256),
    &Ecdsa(Algorithm::EcdsaP384Sha384),
    &Ed25519,
    &MlDsa(Algorithm::MlDsa44),
    &MlDsa(Algorithm::MlDsa65),
    &MlDsa(Algorithm::MlDsa87),
];

fn private_key(fields: &PrivateFields) -> Result<&[u8], CryptoError> {
    fields
        .get("PrivateKey")
        .ok_or(CryptoError::BadKey("PrivateKey field missing"))
}

fn verify_with(
    alg: &'static dyn signature::VerificationAlgorithm,
    public_key: &[u8],
    message: &[u8],
    sig: &[u8],
) -> Result<(), CryptoError> {
    UnparsedPublicKey::new(alg, public_key)
        .verify(message, sig)
        .map_err(|_| CryptoError::BadSignature)
}

// ---------------------------------------------------------------------------------------------
// ECDSA, RFC 6605: public key = X ‖ Y, signature = r ‖ s, each fixed width.

struct Ecdsa(Algorithm);

impl Ecdsa {
    fn algs(
        &self,
    ) -> (
        &'static signature::EcdsaSigningAlgorithm,
        &'static signature::EcdsaVerificationAlgorithm,
    ) {
        if self.0 == Algorithm::EcdsaP256Sha256 {
            (
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &signature::ECDSA_P256_SHA256_FIXED,
            )
        } else {
            (
                &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
                &signature::ECDSA_P384_SHA384_FIXED,
            )
        }
    }
}

struct EcdsaKey {
    alg: Algorithm,
    pair: signature::EcdsaKeyPair,
    public: Vec<u8>,
}

impl EcdsaKey {
    fn new(alg: Algorithm, pair: signature::EcdsaKeyPair) -> EcdsaKey {
        // aws-lc-rs gives the SEC1 uncompressed point 0x04 ‖ X ‖ Y; DNSSEC drops the 0x04.
        let public = pair.public_key().as_ref()[1..].to_vec();
        EcdsaKey { alg, pair, public }
    }
}

impl SigningKey for EcdsaKey {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn public_key(&self) -> &[u8] {
        &self.public
    }
    fn private_fields(&self) -> PrivateFields {
        let scalar = self
            .pair
            .private_key()
            .as_be_bytes()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        PrivateFields::single(scalar)
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| CryptoError::Library("ECDSA signing failed"))
    }
}

impl SignatureScheme for Ecdsa {
    fn algorithm(&self) -> Algorithm {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::AwsLc
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        let pair = signature::EcdsaKeyPair::generate(self.algs().0)
            .map_err(|_| CryptoError::Library("ECDSA key generation failed"))?;
        Ok(Box::new(EcdsaKey::new(self.0, pair)))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let point = [&[4u8][..], public_key].concat();
        let pair = signature::EcdsaKeyPair::from_private_key_and_public_key(
            self.algs().0,
            private_key(fields)?,
            &point,
        )
        .map_err(|_| CryptoError::BadKey("ECDSA private key does not match the DNSKEY"))?;
        Ok(Box::new(EcdsaKey::new(self.0, pair)))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        let point = [&[4u8][..], public_key].concat();
        verify_with(self.algs().1, &point, message, sig)
    }
}

// ---------------------------------------------------------------------------------------------
// Ed25519, RFC 8080: public key 32 bytes, private key = the 32-byte seed.

struct Ed25519;

struct Ed25519Key(signature::Ed25519KeyPair);

impl SigningKey for Ed25519Key {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Ed25519
    }
    fn public_key(&self) -> &[u8] {
        self.0.public_key().as_ref()
    }
    fn private_fields(&self) -> PrivateFields {
        let seed = self
            .0
            .seed()
            .and_then(|s| s.as_be_bytes())
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        PrivateFields::single(seed)
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        Ok(self.0.sign(message).as_ref().to_vec())
    }
}

impl SignatureScheme for Ed25519 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Ed25519
    }
    fn backend(&self) -> Backend {
        Backend::AwsLc
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        signature::Ed25519KeyPair::generate()
            .map(|k| Box::new(Ed25519Key(k)) as Box<dyn SigningKey>)
            .map_err(|_| CryptoError::Library("Ed25519 key generation failed"))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        signature::Ed25519KeyPair::from_seed_and_public_key(private_key(fields)?, public_key)
            .map(|k| Box::new(Ed25519Key(k)) as Box<dyn SigningKey>)
            .map_err(|_| CryptoError::BadKey("Ed25519 seed does not match the DNSKEY"))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        verify_with(&signature::ED25519, public_key, message, sig)
    }
}

// ---------------------------------------------------------------------------------------------
// ML-DSA, FIPS 204 pure mode, empty context. Private key = 32-byte seed ξ
// (draft-westerbaan-dnssec-mldsa §5); the expanded FIPS 204 encoding is accepted on load too.

struct MlDsa(Algorithm);

impl MlDsa {
    fn algs(
        &self,
    ) -> (
        &'static signature::PqdsaSigningAlgorithm,
        &'static signature::PqdsaVerificationAlgorithm,
    ) {
        match self.0 {
            Algorithm::MlDsa44 => (&signature::ML_DSA_44_SIGNING, &signature::ML_DSA_44),
            Algorithm::MlDsa65 => (&signature::ML_DSA_65_SIGNING, &signature::ML_DSA_65),
            _ => (&signature::ML_DSA_87_SIGNING, &signature::ML_DSA_87),
        }
    }
}

struct MlDsaKey {
    alg: Algorithm,
    pair: signature::PqdsaKeyPair,
    /// The private key as stored: the seed, or the expanded key if that is what was loaded.
    private: Zeroizing<Vec<u8>>,
}

impl SigningKey for MlDsaKey {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }
    fn private_fields(&self) -> PrivateFields {
        PrivateFields::single(self.private.to_vec())
    }
    /// The expanded key (FIPS 204 `skEncode`), derived from the seed if that is what is stored.
    fn liboqs_secret_key(&self) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        use aws_lc_rs::encoding::AsRawBytes as _;
        let raw = self
            .pair
            .private_key()
            .as_raw_bytes()
            .map_err(|_| CryptoError::Library("ML-DSA private key expansion failed"))?;
        Ok(Zeroizing::new(raw.as_ref().to_vec()))
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut sig = vec![0u8; self.pair.algorithm().signature_len()];
        let len = self
            .pair
            .sign(message, &mut sig)
            .map_err(|_| CryptoError::Library("ML-DSA signing failed"))?;
        sig.truncate(len);
        Ok(sig)
    }
}

impl SignatureScheme for MlDsa {
    fn algorithm(&self) -> Algorithm {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::AwsLc
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        let mut seed = Zeroizing::new(vec![0u8; 32]);
        SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| CryptoError::Library("random generator failed"))?;
        let pair = signature::PqdsaKeyPair::from_seed(self.algs().0, &seed)
            .map_err(|_| CryptoError::Library("ML-DSA key generation failed"))?;
        Ok(Box::new(MlDsaKey {
            alg: self.0,
            pair,
            private: seed,
        }))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let private = private_key(fields)?;
        let pair = if private.len() == 32 {
            signature::PqdsaKeyPair::from_seed(self.algs().0, private)
        } else {
            signature::PqdsaKeyPair::from_raw_private_key(self.algs().0, private)
        }
        .map_err(|_| CryptoError::BadKey("ML-DSA private key is neither a seed nor a key"))?;
        if pair.public_key().as_ref() != public_key {
            return Err(CryptoError::BadKey(
                "ML-DSA private key does not match the DNSKEY",
            ));
        }
        Ok(Box::new(MlDsaKey {
            alg: self.0,
            pair,
            private: Zeroizing::new(private.to_vec()),
        }))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        verify_with(self.algs().1, public_key, message, sig)
    }
}

// ---------------------------------------------------------------------------------------------
// RSA, RFC 5702 (PKCS #1 v1.5) with RFC 3110 public keys: exponent length (1 byte, or 0 and
// then 2 bytes), exponent, modulus. BIND private files carry the eight RSA components.

struct Rsa(Algorithm);

const RSA_FIELDS: [&str; 8] = [
    "Modulus",
    "PublicExponent",
    "PrivateExponent",
    "Prime1",
    "Prime2",
    "Exponent1",
    "Exponent2",
    "Coefficient",
];

/// Splits an RFC 3110 public key into (exponent, modulus).
fn rsa_split(public_key: &[u8]) -> Result<(&[u8], &[u8]), CryptoError> {
    let bad = CryptoError::BadKey("malformed RFC 3110 RSA public key");
    let (len, rest) = match public_key {
        [0, hi, lo, rest @ ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), rest),
        [len, rest @ ..] => (usize::from(*len), rest),
        [] => return Err(bad),
    };
    if len == 0 || rest.len() <= len {
        return Err(bad);
    }
    Ok(rest.split_at(len))
}

fn rsa_join(e: &[u8], n: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + e.len() + n.len());
    if e.len() < 256 {
        out.push(e.len() as u8);
    } else {
        out.push(0);
        out.extend((e.len() as u16).to_be_bytes());
    }
    out.extend_from_slice(e);
    out.extend_from_slice(n);
    out
}

struct RsaKey {
    alg: Algorithm,
    pair: aws_lc_rs::rsa::KeyPair,
    public: Vec<u8>,
    fields: PrivateFields,
}

impl Rsa {
    /// The PKCS #1 v1.5 encoding to sign with; SHA-1 has none (validation only).
    fn encoding(&self) -> Result<&'static dyn signature::RsaEncoding, CryptoError> {
        match self.0 {
            Algorithm::RsaSha256 => Ok(&signature::RSA_PKCS1_SHA256),
            Algorithm::RsaSha512 => Ok(&signature::RSA_PKCS1_SHA512),
            other => Err(CryptoError::ValidationOnly(other)),
        }
    }

    /// The verification parameters: moduli of 1024 to 8192 bits, as aws-lc-rs verifies them
    /// (keys below 1024 bits, which RFC 3110 allows down to 512, do not validate).
    fn verification(&self) -> &'static signature::RsaParameters {
        match self.0 {
            Algorithm::RsaSha256 => &signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
            Algorithm::RsaSha512 => &signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
            _ => &signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
        }
    }

    fn key_from_fields(&self, fields: PrivateFields) -> Result<Box<dyn SigningKey>, CryptoError> {
        self.encoding()?;
        let get = |name| {
            fields
                .get(name)
                .ok_or(CryptoError::BadKey("RSA private key field missing"))
        };
        let components = KeyPairComponents {
            public_key: PublicKeyComponents {
                n: strip_zeros(get("Modulus")?),
                e: strip_zeros(get("PublicExponent")?),
            },
            d: get("PrivateExponent")?,
            p: get("Prime1")?,
            q: get("Prime2")?,
            dP: get("Exponent1")?,
            dQ: get("Exponent2")?,
            qInv: get("Coefficient")?,
        };
        // aws-lc-rs signs with 2048- to 8192-bit moduli only (ldns-keygen defaults to 1024).
        let bits = components.public_key.n.len() * 8;
        if !(2048..=8192).contains(&bits) {
            return Err(CryptoError::BadKey(
                "RSA modulus outside 2048-8192 bits, which aws-lc-rs cannot sign with \
                 (ldns-keygen: use -b 2048)",
            ));
        }
        let pair = aws_lc_rs::rsa::KeyPair::from_components(&components)
            .map_err(|_| CryptoError::BadKey("RSA private key components are inconsistent"))?;
        let public = rsa_join(components.public_key.e, components.public_key.n);
        Ok(Box::new(RsaKey {
            alg: self.0,
            pair,
            public,
            fields,
        }))
    }
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[start..]
}

impl SigningKey for RsaKey {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn public_key(&self) -> &[u8] {
        &self.public
    }
    fn private_fields(&self) -> PrivateFields {
        self.fields.clone()
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let encoding = Rsa(self.alg).encoding()?;
        let mut sig = vec![0u8; self.pair.public_modulus_len()];
        self.pair
            .sign(encoding, &SystemRandom::new(), message, &mut sig)
            .map_err(|_| CryptoError::Library("RSA signing failed"))?;
        Ok(sig)
    }
}

impl SignatureScheme for Rsa {
    fn algorithm(&self) -> Algorithm {
        self.0
    }
    fn backend(&self) -> Backend {
        Backend::AwsLc
    }
    fn signs(&self) -> bool {
        self.encoding().is_ok()
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        use aws_lc_rs::encoding::AsDer;
        self.encoding()?;
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .map_err(|_| CryptoError::Library("RSA key generation failed"))?;
        let pkcs8 = pair
            .as_der()
            .map_err(|_| CryptoError::Library("RSA key export failed"))?;
        let parts = crate::dnssec::der::rsa_private_components(pkcs8.as_ref())
            .ok_or(CryptoError::Library("RSA key export could not be parsed"))?;
        let fields = PrivateFields(
            RSA_FIELDS
                .iter()
                .zip(parts)
                .map(|(n, v)| (n.to_string(), Zeroizing::new(v)))
                .collect(),
        );
        self.key_from_fields(fields)
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let key = self.key_from_fields(fields.clone())?;
        if key.public_key() != public_key {
            return Err(CryptoError::BadKey(
                "RSA private key does not match the DNSKEY",
            ));
        }
        Ok(key)
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        let (e, n) = rsa_split(public_key)?;
        PublicKeyComponents { n, e }
            .verify(self.verification(), message, sig)
            .map_err(|_| CryptoError::BadSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3110_key_layout() {
        let key = rsa_join(&[1, 0, 1], &[0xc0; 256]);
        assert_eq!(&key[..4], &[3, 1, 0, 1]);
        assert_eq!(
            rsa_split(&key).unwrap(),
            (&[1u8, 0, 1][..], &[0xc0u8; 256][..])
        );
        let long_e = rsa_join(&[1; 300], &[2; 10]);
        assert_eq!(&long_e[..3], &[0, 1, 44]);
        assert_eq!(rsa_split(&long_e).unwrap().1, &[2; 10]);
        assert!(rsa_split(&[5, 1, 2]).is_err());
        assert!(rsa_split(&[]).is_err());
    }
}

//! The crypto provider: which library signs and verifies each [`Algorithm`], chosen at run
//! time as a value (like rustls' `CryptoProvider`), never by Cargo feature precedence.
//!
//! Wire encodings follow `docs/pqc-dnssec-wire.md` §2: DNSKEY public-key fields and RRSIG
//! signature fields carry the raw bytes each scheme defines (RFC 3110 for RSA, RFC 6605 for
//! ECDSA, RFC 8080 for Ed25519, liboqs/FIPS 204 encodings for post-quantum schemes). ML-DSA is
//! pure ML-DSA with an empty context (FIPS 204 §5.2), as draft-westerbaan-dnssec-mldsa §4 says.

use std::fmt;

use zeroize::Zeroizing;

use super::algorithm::{Algorithm, Backend};
use super::backend_awslc;
use super::backend_liboqs;

/// Why a cryptographic operation failed. `Copy` so it is cheap on validation paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// This provider has no implementation of the algorithm.
    #[error("{0} is not implemented by this provider")]
    Unsupported(Algorithm),
    /// Key material that the library rejects; says which part.
    #[error("bad key: {0}")]
    BadKey(&'static str),
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The library failed to produce a key or signature.
    #[error("crypto library failure: {0}")]
    Library(&'static str),
}

/// Private-key material as named fields of a BIND `Private-key-format: v1.3` file (for example
/// `PrivateKey`, or RSA's `Modulus`, `PublicExponent`, …). Values are zeroed when dropped and
/// never printed by `Debug`.
#[derive(Clone, Default)]
pub struct PrivateFields(pub Vec<(String, Zeroizing<Vec<u8>>)>);

impl PrivateFields {
    /// The value of field `name`, if present.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// A single `PrivateKey` field.
    pub fn single(bytes: Vec<u8>) -> PrivateFields {
        PrivateFields(vec![("PrivateKey".into(), Zeroizing::new(bytes))])
    }
}

impl fmt::Debug for PrivateFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|(n, _)| n.as_str()).collect();
        write!(f, "PrivateFields({names:?}, values redacted)")
    }
}

/// A private key able to sign DNSSEC signed data (RFC 4034 §3.1.8.1).
pub trait SigningKey: Send + Sync {
    /// The algorithm.
    fn algorithm(&self) -> Algorithm;
    /// The DNSKEY public-key field (wire format).
    fn public_key(&self) -> &[u8];
    /// The private key as BIND private-file fields.
    fn private_fields(&self) -> PrivateFields;
    /// Signs `message`; returns the RRSIG signature field.
    ///
    /// # Errors
    /// [`CryptoError::Library`] if the library fails.
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError>;
}

/// One algorithm as implemented by one backend.
pub trait SignatureScheme: Send + Sync {
    /// The algorithm implemented.
    fn algorithm(&self) -> Algorithm;
    /// The library behind it.
    fn backend(&self) -> Backend;
    /// Generates a fresh key pair.
    ///
    /// # Errors
    /// [`CryptoError::Library`] if key generation fails.
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError>;
    /// Loads a key from BIND private-file fields and the DNSKEY public-key field.
    ///
    /// # Errors
    /// [`CryptoError::BadKey`] if the fields are missing, malformed or do not match the public
    /// key.
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError>;
    /// Verifies `signature` (RRSIG signature field) over `message` with `public_key` (DNSKEY
    /// public-key field).
    ///
    /// # Errors
    /// [`CryptoError::BadSignature`] if it does not verify, [`CryptoError::BadKey`] if the key
    /// cannot be parsed.
    fn verify(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), CryptoError>;
}

/// A set of signature schemes, at most one per algorithm.
#[derive(Clone)]
pub struct Provider {
    name: &'static str,
    schemes: Vec<&'static dyn SignatureScheme>,
}

impl Provider {
    /// aws-lc-rs for RSA, ECDSA, Ed25519 and ML-DSA (it can expand ML-DSA seeds); liboqs for
    /// Falcon, SPHINCS+, MAYO and round-3 Dilithium.
    pub fn default_provider() -> Provider {
        let mut schemes: Vec<&'static dyn SignatureScheme> = backend_awslc::SCHEMES.to_vec();
        schemes.extend(backend_liboqs::SCHEMES.iter().copied().filter(|s| {
            !backend_awslc::SCHEMES
                .iter()
                .any(|a| a.algorithm() == s.algorithm())
        }));
        Provider {
            name: "default (aws-lc-rs + liboqs)",
            schemes,
        }
    }

    /// liboqs for every post-quantum algorithm (including ML-DSA), aws-lc-rs for classical ones.
    pub fn liboqs_first() -> Provider {
        let mut schemes: Vec<&'static dyn SignatureScheme> = backend_liboqs::SCHEMES.to_vec();
        schemes.extend(
            backend_awslc::SCHEMES
                .iter()
                .copied()
                .filter(|s| !s.algorithm().is_post_quantum()),
        );
        Provider {
            name: "liboqs-first (liboqs + aws-lc-rs for classical)",
            schemes,
        }
    }

    /// A provider by name: `default` or `liboqs`.
    pub fn named(name: &str) -> Option<Provider> {
        match name {
            "default" | "aws-lc" => Some(Provider::default_provider()),
            "liboqs" => Some(Provider::liboqs_first()),
            _ => None,
        }
    }

    /// A short description.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The scheme implementing `alg`.
    ///
    /// # Errors
    /// [`CryptoError::Unsupported`] if none does.
    pub fn scheme(&self, alg: Algorithm) -> Result<&'static dyn SignatureScheme, CryptoError> {
        self.schemes
            .iter()
            .copied()
            .find(|s| s.algorithm() == alg)
            .ok_or(CryptoError::Unsupported(alg))
    }

    /// Every algorithm this provider implements.
    pub fn algorithms(&self) -> impl Iterator<Item = Algorithm> + '_ {
        self.schemes.iter().map(|s| s.algorithm())
    }
}

impl Default for Provider {
    fn default() -> Provider {
        Provider::default_provider()
    }
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Provider({})", self.name)
    }
}

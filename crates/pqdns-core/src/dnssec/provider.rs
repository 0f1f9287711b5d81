//! The crypto provider: which library signs and verifies each [`Algorithm`], chosen at run
//! time as a value (like rustls' `CryptoProvider`), never by Cargo feature precedence. Cargo
//! features (`aws-lc`, `liboqs`, both default) only decide which backends are compiled in.
//!
//! The provider is open: a scheme defined outside pqdns is a `static` implementing
//! [`SignatureScheme`] whose [`SignatureScheme::algorithm`] is an
//! [`Algorithm::External`]; [`Provider::with_scheme`] adds it, and
//! [`super::profile::Profile::with_provider`] gives it its DNSSEC number.
//!
//! Wire encodings follow `docs/pqc-dnssec-wire.md` §2: DNSKEY public-key fields and RRSIG
//! signature fields carry the raw bytes each scheme defines (RFC 3110 for RSA, RFC 6605 for
//! ECDSA, RFC 8080 for Ed25519, liboqs/FIPS 204 encodings for post-quantum schemes). ML-DSA is
//! pure ML-DSA with an empty context (FIPS 204 §5.2), as draft-westerbaan-dnssec-mldsa §4 says.

use std::fmt;

use zeroize::Zeroizing;

use super::algorithm::{Algorithm, Backend};
#[cfg(feature = "aws-lc")]
use super::backend_awslc;
use super::backend_fips205;
#[cfg(feature = "liboqs")]
use super::backend_liboqs;

/// Why a cryptographic operation failed. `Copy` so it is cheap on validation paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// The algorithm is implemented for validation only: RFC 8624 §3.1 says signers "MUST
    /// NOT" use it (RSASHA1, RSASHA1-NSEC3-SHA1).
    #[error("{0} is for validation only (RFC 8624 §3.1: MUST NOT sign with it)")]
    ValidationOnly(Algorithm),
    /// The library failed to produce a key or signature.
    #[error("crypto library failure: {0}")]
    Library(&'static str),
    /// An MTL-mode condensed signature cannot be checked without a verified ladder of its
    /// series (draft-fregly-dnsop-slh-dsa-mtl-dnssec: fetch the full signature with EDNS option
    /// 65050).
    #[error("MTL condensed signature: no verified ladder for series {0:016x}")]
    LadderRequired(u64),
    /// An MTL-mode signature field that does not parse (`docs/pqc-dnssec-wire.md` §5).
    #[error("malformed MTL signature: {0}")]
    MalformedMtl(super::mtl::SignatureError),
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
    /// The secret key in liboqs' `OQS_SIG` encoding, as tools built on liboqs store it (Verisign's
    /// ldns `Key:` field): for ML-DSA the expanded FIPS 204 `skEncode` form (2,560 bytes for
    /// ML-DSA-44, 4,032 for ML-DSA-65, 4,896 for ML-DSA-87), never the 32-byte seed. The
    /// default is the single `PrivateKey` field of [`SigningKey::private_fields`].
    ///
    /// # Errors
    /// [`CryptoError::Unsupported`] if the key has no single `PrivateKey` field (RSA) and does
    /// not override this; [`CryptoError::Library`] if expanding the key fails.
    fn liboqs_secret_key(&self) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        self.private_fields()
            .get("PrivateKey")
            .map(|k| Zeroizing::new(k.to_vec()))
            .ok_or(CryptoError::Unsupported(self.algorithm()))
    }
    /// Signs `message`; returns the RRSIG signature field.
    ///
    /// # Errors
    /// [`CryptoError::Library`] if the library fails.
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError>;
    /// The batch interface, for keys whose signatures are cheaper made together (MTL mode);
    /// `None` (the default) for keys that sign one message at a time.
    fn as_batch(&self) -> Option<&dyn BatchSigningKey> {
        None
    }
}

/// A key that signs a batch of messages with one expensive operation, as MTL mode signs one
/// ladder for a whole zone (draft-harvey-cfrg-mtl-mode §5).
pub trait BatchSigningKey: Send + Sync {
    /// Signs every message of `messages`; `full[i]` asks for a self-contained signature of
    /// message `i` (an MTL full signature, which carries the signed ladder) rather than a short
    /// one that needs the ladder from elsewhere. Returns the RRSIG signature fields in order.
    ///
    /// # Errors
    /// [`CryptoError::Library`] if the library fails.
    fn sign_batch(&self, messages: &[Vec<u8>], full: &[bool]) -> Result<Vec<Vec<u8>>, CryptoError>;
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
    /// False for schemes that only verify ([`CryptoError::ValidationOnly`] from
    /// [`SignatureScheme::generate`] and [`SignatureScheme::load`]).
    fn signs(&self) -> bool {
        true
    }
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

/// The schemes of the backends compiled into this build, first listed first.
fn compiled_schemes(liboqs_first: bool) -> Vec<&'static dyn SignatureScheme> {
    let mut groups: Vec<&'static [&'static dyn SignatureScheme]> = Vec::new();
    #[cfg(feature = "liboqs")]
    if liboqs_first {
        groups.push(backend_liboqs::SCHEMES);
    }
    #[cfg(feature = "aws-lc")]
    groups.push(backend_awslc::SCHEMES);
    #[cfg(feature = "liboqs")]
    groups.push(backend_liboqs::SCHEMES);
    groups.push(super::mtl::SCHEMES);
    groups.push(backend_fips205::SCHEMES);
    let _ = liboqs_first;
    let mut provider = Provider {
        name: "",
        schemes: Vec::new(),
    };
    for scheme in groups.into_iter().flatten() {
        if provider.scheme(scheme.algorithm()).is_err() {
            provider.schemes.push(*scheme);
        }
    }
    provider.schemes
}

impl Provider {
    /// An empty provider called `name`, to be filled with [`Provider::with_scheme`].
    pub fn new(name: &'static str) -> Provider {
        Provider {
            name,
            schemes: Vec::new(),
        }
    }

    /// aws-lc-rs for RSA, ECDSA, Ed25519 and ML-DSA (it can expand ML-DSA seeds); liboqs for
    /// Falcon, SPHINCS+, MAYO and round-3 Dilithium; pqdns' MTL mode over liboqs SPHINCS+; the
    /// `fips205` crate for FIPS 205 SLH-DSA. Backends left out of the build (cargo features
    /// `aws-lc`, `liboqs`) leave their algorithms out.
    pub fn default_provider() -> Provider {
        Provider {
            name: "default (aws-lc-rs + liboqs + fips205)",
            schemes: compiled_schemes(false),
        }
    }

    /// liboqs for every post-quantum algorithm it has (including ML-DSA), aws-lc-rs for the
    /// rest. Only in builds with the `liboqs` feature.
    #[cfg(feature = "liboqs")]
    pub fn liboqs_first() -> Provider {
        Provider {
            name: "liboqs-first (liboqs + aws-lc-rs for classical)",
            schemes: compiled_schemes(true),
        }
    }

    /// A provider by name: `default` (or `aws-lc`), or `liboqs` in builds with that backend.
    pub fn named(name: &str) -> Option<Provider> {
        match name {
            "default" | "aws-lc" => Some(Provider::default_provider()),
            #[cfg(feature = "liboqs")]
            "liboqs" => Some(Provider::liboqs_first()),
            _ => None,
        }
    }

    /// This provider with `scheme` added; it replaces the scheme this provider had for the
    /// same algorithm, if any. This is how a scheme defined outside pqdns is registered.
    #[must_use]
    pub fn with_scheme(mut self, scheme: &'static dyn SignatureScheme) -> Provider {
        let alg = scheme.algorithm();
        self.schemes.retain(|s| s.algorithm() != alg);
        self.schemes.push(scheme);
        self
    }

    /// The algorithm called `name` among this provider's schemes (compared as
    /// [`Algorithm::from_name`] does), including external ones.
    pub fn algorithm_by_name(&self, name: &str) -> Option<Algorithm> {
        let squash = |s: &str| -> String {
            s.chars()
                .filter(|c| !matches!(c, '-' | '_' | '+'))
                .flat_map(char::to_lowercase)
                .collect()
        };
        let want = squash(name);
        self.algorithms()
            .find(|a| squash(a.name()) == want || squash(a.mnemonic()) == want)
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

//! liboqs backend (liboqs 0.13 through the `oqs` crate): ML-DSA, round-3 Dilithium2, Falcon,
//! SPHINCS+ "simple" (round 3.1, not FIPS 205) and MAYO; Falcon-padded through the raw
//! `oqs-sys` bindings, which the `oqs` crate does not wrap.
//!
//! Private keys are stored as liboqs' secret-key encoding. liboqs 0.13 cannot derive an ML-DSA
//! key from a 32-byte seed, so a seed-only ML-DSA key file needs the aws-lc-rs backend.
//!
//! Each scheme creates its liboqs signature object (`OQS_SIG`) once, on first use, and shares
//! it between its keys and verifications: the object is an immutable table of lengths and
//! function pointers.
//!
//! Falcon-512 signatures are re-drawn (Falcon signing is randomized) until they fit in 666
//! bytes, the size OQS-BIND's Falcon-512 (algorithm 17 in the `oqs-bind` profile) accepts; the
//! compressed format allows up to 752 (Falcon specification §3.11), so a rare longer signature
//! would be rejected there. Falcon-padded-512 applies the same bound by construction.

use std::sync::{Once, OnceLock};

use zeroize::Zeroizing;

use super::algorithm::{Algorithm, Backend};
use super::provider::{CryptoError, PrivateFields, SignatureScheme, SigningKey};

macro_rules! schemes {
    ($($static:ident = $alg:ident;)*) => {
        $(static $static: Oqs = Oqs::new(Algorithm::$alg);)*
        /// The schemes this backend provides.
        pub(crate) static SCHEMES: &[&dyn SignatureScheme] = &[$(&$static,)*];
    };
}

schemes! {
    ML_DSA_44 = MlDsa44;
    ML_DSA_65 = MlDsa65;
    ML_DSA_87 = MlDsa87;
    DILITHIUM2 = Dilithium2;
    FALCON_512 = Falcon512;
    FALCON_1024 = Falcon1024;
    FALCON_PADDED_512 = FalconPadded512;
    FALCON_PADDED_1024 = FalconPadded1024;
    SPHINCS_SHA2_128S = SphincsSha2_128s;
    SPHINCS_SHA2_128F = SphincsSha2_128f;
    SPHINCS_SHAKE_128S = SphincsShake128s;
    SPHINCS_SHAKE_128F = SphincsShake128f;
    MAYO_1 = Mayo1;
    MAYO_2 = Mayo2;
    MAYO_3 = Mayo3;
}

/// The largest Falcon-512 signature OQS-BIND accepts (bytes): the padded size.
pub(crate) const FALCON_512_OQS_BIND_MAX: usize = 666;

/// How many times a Falcon-512 signature is re-drawn before giving up (each draw exceeds 666
/// bytes with probability well below 1 %).
const FALCON_REDRAWS: usize = 64;

/// Calls `draw` until it returns a signature of at most `max` bytes, at most `attempts` times.
fn redraw(
    max: usize,
    attempts: usize,
    mut draw: impl FnMut() -> Result<Vec<u8>, CryptoError>,
) -> Result<Vec<u8>, CryptoError> {
    for _ in 0..attempts {
        let sig = draw()?;
        if sig.len() <= max {
            return Ok(sig);
        }
    }
    Err(CryptoError::Library(
        "no Falcon-512 signature within 666 bytes after many draws",
    ))
}

fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(oqs::init);
}

/// A liboqs signature object, from the `oqs` crate or, for Falcon-padded, the raw bindings.
enum Engine {
    Crate(oqs::sig::Sig),
    Raw(raw::RawSig),
}

impl Engine {
    fn new(alg: Algorithm) -> Result<Engine, CryptoError> {
        use oqs::sig::Algorithm as O;
        init();
        let oqs_alg = match alg {
            Algorithm::MlDsa44 => O::MlDsa44,
            Algorithm::MlDsa65 => O::MlDsa65,
            Algorithm::MlDsa87 => O::MlDsa87,
            Algorithm::Dilithium2 => O::Dilithium2,
            Algorithm::Falcon512 => O::Falcon512,
            Algorithm::Falcon1024 => O::Falcon1024,
            Algorithm::SphincsSha2_128s => O::SphincsSha2128sSimple,
            Algorithm::SphincsSha2_128f => O::SphincsSha2128fSimple,
            Algorithm::SphincsShake128s => O::SphincsShake128sSimple,
            Algorithm::SphincsShake128f => O::SphincsShake128fSimple,
            Algorithm::Mayo1 => O::Mayo1,
            Algorithm::Mayo2 => O::Mayo2,
            Algorithm::Mayo3 => O::Mayo3,
            Algorithm::FalconPadded512 => {
                return raw::RawSig::new(c"Falcon-padded-512").map(Engine::Raw)
            }
            Algorithm::FalconPadded1024 => {
                return raw::RawSig::new(c"Falcon-padded-1024").map(Engine::Raw)
            }
            other => return Err(CryptoError::Unsupported(other)),
        };
        oqs::sig::Sig::new(oqs_alg)
            .map(Engine::Crate)
            .map_err(|_| CryptoError::Unsupported(alg))
    }

    fn lengths(&self) -> (usize, usize) {
        match self {
            Engine::Crate(s) => (s.length_public_key(), s.length_secret_key()),
            Engine::Raw(r) => (r.public_key_len(), r.secret_key_len()),
        }
    }

    fn keypair(&self) -> Result<(Vec<u8>, Zeroizing<Vec<u8>>), CryptoError> {
        let fail = CryptoError::Library("liboqs key generation failed");
        match self {
            Engine::Crate(s) => {
                let (pk, sk) = s.keypair().map_err(|_| fail)?;
                Ok((pk.into_vec(), Zeroizing::new(sk.into_vec())))
            }
            Engine::Raw(r) => r.keypair().ok_or(fail),
        }
    }

    fn sign(&self, message: &[u8], secret: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let fail = CryptoError::Library("liboqs signing failed");
        match self {
            Engine::Crate(s) => {
                let sk = s.secret_key_from_bytes(secret).ok_or(fail)?;
                s.sign(message, sk)
                    .map(|sig| sig.into_vec())
                    .map_err(|_| fail)
            }
            Engine::Raw(r) => r.sign(message, secret).ok_or(fail),
        }
    }

    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        match self {
            Engine::Crate(s) => {
                let pk = s
                    .public_key_from_bytes(public_key)
                    .ok_or(CryptoError::BadKey("public key has the wrong length"))?;
                let sig = s
                    .signature_from_bytes(sig)
                    .ok_or(CryptoError::BadSignature)?;
                s.verify(message, sig, pk)
                    .map_err(|_| CryptoError::BadSignature)
            }
            Engine::Raw(r) => {
                if public_key.len() != r.public_key_len() {
                    return Err(CryptoError::BadKey("public key has the wrong length"));
                }
                r.verify(message, sig, public_key)
                    .then_some(())
                    .ok_or(CryptoError::BadSignature)
            }
        }
    }
}

/// One algorithm, with its liboqs object created once on first use and kept for the life of
/// the process (one per algorithm, so the memory is bounded), so keys can borrow it.
struct Oqs {
    alg: Algorithm,
    engine: OnceLock<Result<&'static Engine, CryptoError>>,
}

impl Oqs {
    const fn new(alg: Algorithm) -> Oqs {
        Oqs {
            alg,
            engine: OnceLock::new(),
        }
    }

    fn engine(&self) -> Result<&'static Engine, CryptoError> {
        *self
            .engine
            .get_or_init(|| Engine::new(self.alg).map(|e| &*Box::leak(Box::new(e))))
    }
}

struct OqsKey {
    alg: Algorithm,
    engine: &'static Engine,
    public: Vec<u8>,
    secret: Zeroizing<Vec<u8>>,
}

impl SigningKey for OqsKey {
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
        if self.alg == Algorithm::Falcon512 {
            return redraw(FALCON_512_OQS_BIND_MAX, FALCON_REDRAWS, || {
                self.engine.sign(message, &self.secret)
            });
        }
        self.engine.sign(message, &self.secret)
    }
}

impl SignatureScheme for Oqs {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
    fn backend(&self) -> Backend {
        Backend::Liboqs
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        let engine = self.engine()?;
        let (public, secret) = engine.keypair()?;
        Ok(Box::new(OqsKey {
            alg: self.alg,
            engine,
            public,
            secret,
        }))
    }
    fn load(
        &self,
        fields: &PrivateFields,
        public_key: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let engine = self.engine()?;
        let secret = fields
            .get("PrivateKey")
            .ok_or(CryptoError::BadKey("PrivateKey field missing"))?;
        let (pk_len, sk_len) = engine.lengths();
        if secret.len() != sk_len {
            return Err(if secret.len() == 32 {
                CryptoError::BadKey(
                    "liboqs cannot expand a 32-byte seed; use the default (aws-lc-rs) provider",
                )
            } else {
                CryptoError::BadKey("private key has the wrong length for this algorithm")
            });
        }
        if public_key.len() != pk_len {
            return Err(CryptoError::BadKey("public key has the wrong length"));
        }
        let key = OqsKey {
            alg: self.alg,
            engine,
            public: public_key.to_vec(),
            secret: Zeroizing::new(secret.to_vec()),
        };
        // liboqs has no "public key from secret key"; a test signature proves they match.
        let probe = key.sign(b"pqdns key check")?;
        key.engine
            .verify(public_key, b"pqdns key check", &probe)
            .map_err(|_| CryptoError::BadKey("private key does not match the DNSKEY"))?;
        Ok(Box::new(key))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        self.engine()?.verify(public_key, message, sig)
    }
}

/// Falcon-padded through `oqs-sys`, which the `oqs` crate (0.11) does not expose.
mod raw {
    #![allow(unsafe_code)]

    use std::ffi::CStr;
    use std::ptr::NonNull;

    use oqs_sys::common::OQS_STATUS;
    use oqs_sys::sig::{
        OQS_SIG_free, OQS_SIG_keypair, OQS_SIG_new, OQS_SIG_sign, OQS_SIG_verify, OQS_SIG,
    };
    use zeroize::Zeroizing;

    use super::CryptoError;

    pub(super) struct RawSig(NonNull<OQS_SIG>);

    // SAFETY: an OQS_SIG is an immutable table of lengths and function pointers after
    // OQS_SIG_new; liboqs' sign/verify functions keep no state in it.
    unsafe impl Send for RawSig {}
    // SAFETY: as above, shared references only read the table.
    unsafe impl Sync for RawSig {}

    impl RawSig {
        pub(super) fn new(name: &CStr) -> Result<RawSig, CryptoError> {
            // SAFETY: `name` is NUL-terminated; OQS_SIG_new returns NULL for unknown or disabled
            // algorithms, which NonNull::new turns into an error.
            let ptr = unsafe { OQS_SIG_new(name.as_ptr()) };
            NonNull::new(ptr)
                .map(RawSig)
                .ok_or(CryptoError::Library("liboqs lacks Falcon-padded"))
        }

        fn table(&self) -> &OQS_SIG {
            // SAFETY: the pointer came from OQS_SIG_new, is non-null and lives until Drop.
            unsafe { self.0.as_ref() }
        }

        pub(super) fn public_key_len(&self) -> usize {
            self.table().length_public_key
        }

        pub(super) fn secret_key_len(&self) -> usize {
            self.table().length_secret_key
        }

        pub(super) fn keypair(&self) -> Option<(Vec<u8>, Zeroizing<Vec<u8>>)> {
            let mut pk = vec![0u8; self.public_key_len()];
            let mut sk = Zeroizing::new(vec![0u8; self.secret_key_len()]);
            // SAFETY: both buffers have exactly the lengths liboqs declares for this algorithm.
            let status =
                unsafe { OQS_SIG_keypair(self.0.as_ptr(), pk.as_mut_ptr(), sk.as_mut_ptr()) };
            (status == OQS_STATUS::OQS_SUCCESS).then_some((pk, sk))
        }

        pub(super) fn sign(&self, message: &[u8], secret: &[u8]) -> Option<Vec<u8>> {
            if secret.len() != self.secret_key_len() {
                return None;
            }
            let mut sig = vec![0u8; self.table().length_signature];
            let mut len = sig.len();
            // SAFETY: `sig` has the declared maximum signature length, `len` receives the actual
            // length, `secret` has the declared secret-key length, `message` is a valid slice.
            let status = unsafe {
                OQS_SIG_sign(
                    self.0.as_ptr(),
                    sig.as_mut_ptr(),
                    &mut len,
                    message.as_ptr(),
                    message.len(),
                    secret.as_ptr(),
                )
            };
            (status == OQS_STATUS::OQS_SUCCESS && len <= sig.len()).then(|| {
                sig.truncate(len);
                sig
            })
        }

        pub(super) fn verify(&self, message: &[u8], sig: &[u8], public_key: &[u8]) -> bool {
            if public_key.len() != self.public_key_len() {
                return false;
            }
            // SAFETY: all pointers come from valid slices with their lengths; the public key has
            // the declared length (checked above); liboqs only reads them.
            let status = unsafe {
                OQS_SIG_verify(
                    self.0.as_ptr(),
                    message.as_ptr(),
                    message.len(),
                    sig.as_ptr(),
                    sig.len(),
                    public_key.as_ptr(),
                )
            };
            status == OQS_STATUS::OQS_SUCCESS
        }
    }

    impl Drop for RawSig {
        fn drop(&mut self) {
            // SAFETY: the pointer came from OQS_SIG_new and is freed exactly once.
            unsafe { OQS_SIG_free(self.0.as_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redraw_keeps_drawing_until_the_signature_fits() {
        let mut lengths = [700usize, 690, 666, 600].into_iter();
        let sig = redraw(666, 10, || Ok(vec![0; lengths.next().unwrap()])).unwrap();
        assert_eq!(sig.len(), 666);
        assert_eq!(
            lengths.next(),
            Some(600),
            "stopped at the first fitting draw"
        );
        assert!(redraw(666, 3, || Ok(vec![0; 700])).is_err());
    }

    #[test]
    fn one_liboqs_object_per_scheme() {
        let a = ML_DSA_44.engine().unwrap() as *const Engine;
        let b = ML_DSA_44.engine().unwrap() as *const Engine;
        assert_eq!(a, b);
        let key = ML_DSA_44.generate().unwrap();
        let sig = key.sign(b"m").unwrap();
        ML_DSA_44.verify(key.public_key(), b"m", &sig).unwrap();
        assert_eq!(ML_DSA_44.engine().unwrap() as *const Engine, a);
    }

    #[test]
    fn falcon_512_signatures_fit_oqs_bind() {
        let key = FALCON_512.generate().unwrap();
        for i in 0u32..3000 {
            let sig = key.sign(&i.to_be_bytes()).unwrap();
            assert!(sig.len() <= FALCON_512_OQS_BIND_MAX, "{}", sig.len());
        }
    }
}

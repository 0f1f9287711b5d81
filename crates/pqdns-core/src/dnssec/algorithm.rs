//! DNSSEC signature algorithms: the 8-bit number on the wire ([`SecAlg`], an open newtype) and
//! the algorithm it stands for ([`Algorithm`]), which depends on the profile
//! ([`super::profile::Profile`]) for post-quantum numbers.
//!
//! Sizes are from FIPS 204, FIPS 205, the Falcon, SPHINCS+ (round 3.1) and MAYO specifications
//! as implemented by liboqs 0.13, and RFC 6605 / RFC 8080 for the classical ones.
//!
//! The set is open: a scheme defined outside pqdns describes itself with a static
//! [`AlgorithmInfo`] and is known as [`Algorithm::External`] (see
//! [`super::provider::Provider::with_scheme`]).

use std::fmt;

/// A DNSSEC algorithm number as carried in DNSKEY, RRSIG and DS RDATA. Any value is valid data;
/// what it means is decided by a profile.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SecAlg(pub u8);

impl SecAlg {
    /// RSA/SHA-1, RFC 3110 (validate only: RFC 8624 §3.1).
    pub const RSASHA1: SecAlg = SecAlg(5);
    /// RSA/SHA-1 for NSEC3 zones, RFC 5155 §2 (validate only: RFC 8624 §3.1).
    pub const RSASHA1_NSEC3_SHA1: SecAlg = SecAlg(7);
    /// RSA/SHA-256, RFC 5702.
    pub const RSASHA256: SecAlg = SecAlg(8);
    /// RSA/SHA-512, RFC 5702.
    pub const RSASHA512: SecAlg = SecAlg(10);
    /// ECDSA P-256 with SHA-256, RFC 6605.
    pub const ECDSAP256SHA256: SecAlg = SecAlg(13);
    /// ECDSA P-384 with SHA-384, RFC 6605.
    pub const ECDSAP384SHA384: SecAlg = SecAlg(14);
    /// Ed25519, RFC 8080.
    pub const ED25519: SecAlg = SecAlg(15);
    /// Ed448, RFC 8080.
    pub const ED448: SecAlg = SecAlg(16);
    /// ML-DSA-44, the one post-quantum number IANA has assigned (draft-westerbaan-dnssec-mldsa).
    pub const MLDSA44: SecAlg = SecAlg(18);
}

/// The algorithm mnemonics of the IANA "DNS Security Algorithm Numbers" registry (RFC 4034
/// Appendix A.1, RFC 5155, RFC 5702, RFC 6605, RFC 8080, RFC 8624), and ML-DSA-44 for 18.
const MNEMONICS: &[(&str, u8)] = &[
    ("RSAMD5", 1),
    ("DH", 2),
    ("DSA", 3),
    ("RSASHA1", 5),
    ("DSA-NSEC3-SHA1", 6),
    ("RSASHA1-NSEC3-SHA1", 7),
    ("RSASHA256", 8),
    ("RSASHA512", 10),
    ("ECC-GOST", 12),
    ("ECDSAP256SHA256", 13),
    ("ECDSAP384SHA384", 14),
    ("ED25519", 15),
    ("ED448", 16),
    ("SM2SM3", 17),
    ("ML-DSA-44", 18),
    // The spelling BIND key files use for it (`Algorithm: 18 (MLDSA44)`).
    ("MLDSA44", 18),
    ("ECC-GOST12", 23),
    ("INDIRECT", 252),
    ("PRIVATEDNS", 253),
    ("PRIVATEOID", 254),
];

impl SecAlg {
    /// The number of an algorithm mnemonic, case-insensitively: the presentation format of
    /// DNSKEY, RRSIG and DS allows a mnemonic where the number goes (RFC 4034 §2.2, §3.2,
    /// §5.3). `None` for a name the registry does not hold.
    pub fn from_mnemonic(text: &str) -> Option<SecAlg> {
        MNEMONICS
            .iter()
            .find(|(m, _)| m.eq_ignore_ascii_case(text))
            .map(|&(_, n)| SecAlg(n))
    }

    /// An algorithm number as presentation format writes it: a decimal number or a mnemonic
    /// ([`SecAlg::from_mnemonic`]).
    pub fn parse(text: &str) -> Option<SecAlg> {
        text.parse::<u8>()
            .ok()
            .map(SecAlg)
            .or_else(|| SecAlg::from_mnemonic(text))
    }
}

impl fmt::Display for SecAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The library that implements an algorithm in a [`super::provider::Provider`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Backend {
    /// aws-lc-rs (AWS-LC): RSA, ECDSA, Ed25519, ML-DSA.
    AwsLc,
    /// liboqs through the `oqs` crate: ML-DSA, Falcon, SPHINCS+, MAYO, Dilithium (round 3).
    Liboqs,
    /// The `fips205` crate (pure Rust): FIPS 205 SLH-DSA.
    Fips205,
    /// pqdns' own code on top of another scheme, e.g. MTL mode over SPHINCS+.
    Pqdns,
    /// A library outside pqdns, named by the scheme that registered it.
    External(&'static str),
}

/// What a signature algorithm defined outside pqdns is: the facts pqdns needs to print, size
/// buffers and number it. Third parties declare one as a `static` and return
/// `Algorithm::External(&THE_STATIC)` from their [`super::provider::SignatureScheme`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct AlgorithmInfo {
    /// Name, unique among the algorithms of a provider (compared loosely, as
    /// [`Algorithm::from_name`] does).
    pub name: &'static str,
    /// Mnemonic written in BIND private-key files (`Algorithm: 250 (MYALG)`).
    pub mnemonic: &'static str,
    /// DNSKEY public-key field size in bytes (0 = depends on the key).
    pub public_key_len: usize,
    /// Largest RRSIG signature field in bytes (0 = depends on the key).
    pub max_signature_len: usize,
    /// True if designed to resist a quantum adversary.
    pub post_quantum: bool,
    /// The DNSSEC algorithm number this algorithm takes in built-in profiles, by profile name
    /// (`("default", 250)`); [`super::profile::Profile::with_provider`] applies them. Use 253
    /// or 254 (private use, RFC 4034 Appendix A.1) or a number agreed with the peers.
    pub numbers: &'static [(&'static str, u8)],
}

macro_rules! algorithms {
    ($($variant:ident, $name:expr, $pk:expr, $sig:expr, $mnemonic:expr;)*) => {
        /// A signature algorithm, independent of the number a profile gives it: one pqdns
        /// knows, or one registered from outside ([`Algorithm::External`]).
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        #[non_exhaustive]
        pub enum Algorithm {
            $(#[doc = $name] $variant,)*
            /// An algorithm defined outside pqdns, described by its [`AlgorithmInfo`].
            External(&'static AlgorithmInfo),
        }

        impl Algorithm {
            /// Every algorithm pqdns itself defines, in table order.
            pub const ALL: &'static [Algorithm] = &[$(Algorithm::$variant,)*];

            /// The name: IANA mnemonic for classical algorithms, liboqs / FIPS name otherwise.
            pub fn name(self) -> &'static str {
                match self { $(Algorithm::$variant => $name,)* Algorithm::External(i) => i.name }
            }

            /// DNSKEY public-key field size in bytes (0 = depends on the key, e.g. RSA).
            pub fn public_key_len(self) -> usize {
                match self { $(Algorithm::$variant => $pk,)* Algorithm::External(i) => i.public_key_len }
            }

            /// Largest RRSIG signature field in bytes (0 = depends on the key, e.g. RSA).
            pub fn max_signature_len(self) -> usize {
                match self { $(Algorithm::$variant => $sig,)* Algorithm::External(i) => i.max_signature_len }
            }

            /// The mnemonic written in BIND private-key files (`Algorithm: 18 (MLDSA44)`).
            pub fn mnemonic(self) -> &'static str {
                match self { $(Algorithm::$variant => $mnemonic,)* Algorithm::External(i) => i.mnemonic }
            }
        }
    };
}

algorithms! {
    RsaSha1, "RSASHA1", 0, 0, "RSASHA1";
    RsaSha1Nsec3Sha1, "RSASHA1-NSEC3-SHA1", 0, 0, "NSEC3RSASHA1";
    RsaSha256, "RSASHA256", 0, 0, "RSASHA256";
    RsaSha512, "RSASHA512", 0, 0, "RSASHA512";
    EcdsaP256Sha256, "ECDSAP256SHA256", 64, 64, "ECDSAP256SHA256";
    EcdsaP384Sha384, "ECDSAP384SHA384", 96, 96, "ECDSAP384SHA384";
    Ed25519, "ED25519", 32, 64, "ED25519";
    Ed448, "ED448", 57, 114, "ED448";
    MlDsa44, "ML-DSA-44", 1312, 2420, "MLDSA44";
    MlDsa65, "ML-DSA-65", 1952, 3309, "MLDSA65";
    MlDsa87, "ML-DSA-87", 2592, 4627, "MLDSA87";
    Dilithium2, "Dilithium2", 1312, 2420, "DILITHIUM2";
    Falcon512, "Falcon-512", 897, 752, "FALCON512";
    Falcon1024, "Falcon-1024", 1793, 1462, "FALCON1024";
    FalconPadded512, "Falcon-padded-512", 897, 666, "FALCONPADDED512";
    FalconPadded1024, "Falcon-padded-1024", 1793, 1280, "FALCONPADDED1024";
    SphincsSha2_128s, "SPHINCS+-SHA2-128s-simple", 32, 7856, "SPHINCSSHA2128S";
    SphincsSha2_128f, "SPHINCS+-SHA2-128f-simple", 32, 17088, "SPHINCSSHA2128F";
    SphincsShake128s, "SPHINCS+-SHAKE-128s-simple", 32, 7856, "SPHINCSSHAKE128S";
    SphincsShake128f, "SPHINCS+-SHAKE-128f-simple", 32, 17088, "SPHINCSSHAKE128F";
    Mayo1, "MAYO-1", 1420, 454, "MAYO1";
    Mayo2, "MAYO-2", 4912, 186, "MAYO2";
    Mayo3, "MAYO-3", 2986, 681, "MAYO3";
    Snova24_5_4, "SNOVA_24_5_4", 1016, 248, "SNOVA2454";
    SlhDsaSha2_128s, "SLH-DSA-SHA2-128s", 32, 7856, "SLHDSASHA2128S";
    SlhDsaShake128s, "SLH-DSA-SHAKE-128s", 32, 7856, "SLHDSASHAKE128S";
    MtlSlhDsaSha2_128s, "SLH-DSA-MTL-SHA2-128s", 32, MTL_MAX_SIGNATURE_LEN, "MTLSHA2128S";
    MtlSlhDsaShake128s, "SLH-DSA-MTL-SHAKE-128s", 32, MTL_MAX_SIGNATURE_LEN, "MTLSHAKE128S";
    MlDsaMtl44, "ML-DSA-MTL-44", 1312, mtl_2026_max(2420), "MLDSAMTL44";
    FlDsaMtl512, "FL-DSA-MTL-512", 897, mtl_2026_max(666), "FLDSAMTL512";
    SlhDsaMtl2026Sha2_128s, "SLH-DSA-MTL-SHA2-128s-2026", 32, mtl_2026_max(7856), "MTL26SHA2128S";
    SlhDsaMtl2026Shake128s, "SLH-DSA-MTL-SHAKE-128s-2026", 32, mtl_2026_max(7856), "MTL26SHAKE128S";
    SlhDsaMtlFips205Sha2_128s, "SLH-DSA-MTL-FIPS205-SHA2-128s", 32, mtl_2026_max(7856), "MTLFIPS205SHA2128S";
    SlhDsaMtlFips205Shake128s, "SLH-DSA-MTL-FIPS205-SHAKE-128s", 32, mtl_2026_max(7856), "MTLFIPS205SHAKE128S";
}

/// Largest 2026 MTL-mode RRSIG signature field for a ladder signature of at most `signature`
/// bytes (draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02 §5; [`super::mtl::Format::max_full_len`]):
/// 4,073 bytes over ML-DSA-44, 2,319 over Falcon-padded-512, 9,509 over SPHINCS+-128s.
const fn mtl_2026_max(signature: usize) -> usize {
    super::mtl::Format::V2026.max_full_len(signature)
}

/// Largest MTL-mode RRSIG signature field pqdns emits (bytes): a full signature with a
/// 32-sibling authentication path and a 32-rung ladder (draft-fregly-dnsop-slh-dsa-mtl-dnssec;
/// `docs/pqc-dnssec-wire.md` §5): 1 + (16 + 24 + 32·16) + (12 + 32·24) + 4 + 7856.
pub const MTL_MAX_SIGNATURE_LEN: usize = 1 + (16 + 24 + 32 * 16) + (12 + 32 * 24) + 4 + 7856;

impl Algorithm {
    /// Finds an algorithm pqdns defines by name, ignoring case and the characters `-`, `_`, `+` (so
    /// `ML-DSA-44`, `mldsa44` and `MLDSA44` all match), or by its BIND mnemonic.
    pub fn from_name(text: &str) -> Option<Algorithm> {
        let squash = |s: &str| -> String {
            s.chars()
                .filter(|c| !matches!(c, '-' | '_' | '+'))
                .flat_map(char::to_lowercase)
                .collect()
        };
        let want = squash(text);
        let want = want.strip_suffix("simple").unwrap_or(&want).to_string();
        Algorithm::ALL.iter().copied().find(|a| {
            let name = squash(a.name());
            name.strip_suffix("simple").unwrap_or(&name) == want || squash(a.mnemonic()) == want
        })
    }

    /// True for the algorithms designed to resist a quantum adversary.
    pub fn is_post_quantum(self) -> bool {
        if let Algorithm::External(info) = self {
            return info.post_quantum;
        }
        !matches!(
            self,
            Algorithm::RsaSha1
                | Algorithm::RsaSha1Nsec3Sha1
                | Algorithm::RsaSha256
                | Algorithm::RsaSha512
                | Algorithm::EcdsaP256Sha256
                | Algorithm::EcdsaP384Sha384
                | Algorithm::Ed25519
                | Algorithm::Ed448
        )
    }

    /// True for Merkle Tree Ladder mode algorithms (draft-fregly-dnsop-slh-dsa-mtl-dnssec,
    /// draft-kaizer-dnsop-ml-dsa-mtl-dnssec), whose zone signing batches every RRset under one
    /// ladder signature ([`super::mtl`]).
    pub fn is_mtl(self) -> bool {
        super::mtl::MtlParams::of(self).is_some()
    }

    /// Why no backend compiled into this build implements this algorithm, or `None` if one
    /// does.
    pub fn unavailable_reason(self) -> Option<&'static str> {
        match self {
            Algorithm::Ed448 => {
                Some("no maintained Rust library with Ed448 is used (aws-lc-rs and ring lack it)")
            }
            Algorithm::Snova24_5_4 => {
                Some("SNOVA is not in liboqs 0.13 or any maintained Rust crate")
            }
            Algorithm::MtlSlhDsaSha2_128s
            | Algorithm::MtlSlhDsaShake128s
            | Algorithm::SlhDsaMtl2026Sha2_128s
            | Algorithm::SlhDsaMtl2026Shake128s
            | Algorithm::FlDsaMtl512
                if !cfg!(feature = "liboqs") =>
            {
                Some("this MTL mode signs its ladder with SPHINCS+ or Falcon from liboqs (cargo feature `liboqs`)")
            }
            Algorithm::MlDsaMtl44 if !cfg!(any(feature = "liboqs", feature = "aws-lc")) => {
                Some("ML-DSA-MTL needs ML-DSA-44 from aws-lc-rs or liboqs")
            }
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_loosely_and_uniquely() {
        assert_eq!(Algorithm::from_name("ML-DSA-44"), Some(Algorithm::MlDsa44));
        assert_eq!(Algorithm::from_name("mldsa44"), Some(Algorithm::MlDsa44));
        assert_eq!(
            Algorithm::from_name("ecdsap256sha256"),
            Some(Algorithm::EcdsaP256Sha256)
        );
        assert_eq!(
            Algorithm::from_name("SPHINCS+-SHA2-128s"),
            Some(Algorithm::SphincsSha2_128s)
        );
        assert_eq!(
            Algorithm::from_name("falcon-padded-512"),
            Some(Algorithm::FalconPadded512)
        );
        assert_eq!(Algorithm::from_name("RSA"), None);
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(a.name()), Some(*a), "{a}");
        }
    }
}

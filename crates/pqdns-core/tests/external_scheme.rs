//! A signature scheme defined outside pqdns — here Ed25519 from aws-lc-rs under a made-up name
//! and the private-use number 253 — registered with `Provider::with_scheme` and numbered by its
//! own `AlgorithmInfo`, signs and verifies a zone without any change to pqdns.

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::provider::{CryptoError, PrivateFields, SignatureScheme, SigningKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, AlgorithmInfo, Backend, Profile, Provider, SecAlg};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};

use aws_lc_rs::signature::{self, KeyPair as _, UnparsedPublicKey};

static TOY_INFO: AlgorithmInfo = AlgorithmInfo {
    name: "TOY-ED25519",
    mnemonic: "TOYED25519",
    public_key_len: 32,
    max_signature_len: 64,
    post_quantum: false,
    numbers: &[("default", 253)],
};

struct Toy;
static TOY: Toy = Toy;

struct ToyKey(signature::Ed25519KeyPair, Vec<u8>);

impl SigningKey for ToyKey {
    fn algorithm(&self) -> Algorithm {
        Algorithm::External(&TOY_INFO)
    }
    fn public_key(&self) -> &[u8] {
        self.0.public_key().as_ref()
    }
    fn private_fields(&self) -> PrivateFields {
        PrivateFields::single(self.1.clone())
    }
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, CryptoError> {
        Ok(self.0.sign(message).as_ref().to_vec())
    }
}

impl SignatureScheme for Toy {
    fn algorithm(&self) -> Algorithm {
        Algorithm::External(&TOY_INFO)
    }
    fn backend(&self) -> Backend {
        Backend::External("toy")
    }
    fn generate(&self) -> Result<Box<dyn SigningKey>, CryptoError> {
        let mut seed = [0u8; 32];
        aws_lc_rs::rand::fill(&mut seed).map_err(|_| CryptoError::Library("rng"))?;
        self.load(&PrivateFields::single(seed.to_vec()), &[])
    }
    fn load(
        &self,
        fields: &PrivateFields,
        _public: &[u8],
    ) -> Result<Box<dyn SigningKey>, CryptoError> {
        let seed = fields
            .get("PrivateKey")
            .ok_or(CryptoError::BadKey("no seed"))?;
        let pair = signature::Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| CryptoError::BadKey("bad seed"))?;
        Ok(Box::new(ToyKey(pair, seed.to_vec())))
    }
    fn verify(&self, public_key: &[u8], message: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        UnparsedPublicKey::new(&signature::ED25519, public_key)
            .verify(message, sig)
            .map_err(|_| CryptoError::BadSignature)
    }
}

#[test]
fn an_external_scheme_signs_and_verifies_a_zone() {
    let provider = Provider::default_provider().with_scheme(&TOY);
    let profile = Profile::default_profile().with_provider(&provider);
    let toy = Algorithm::External(&TOY_INFO);
    assert_eq!(profile.algorithm(SecAlg(253)), Some(toy));
    assert_eq!(provider.algorithm_by_name("toy-ed25519"), Some(toy));
    assert_eq!(
        provider.scheme(toy).unwrap().backend(),
        Backend::External("toy")
    );
    // Without the registration the number means nothing.
    assert_eq!(Profile::default_profile().algorithm(SecAlg(253)), None);

    let origin: Name = "toy.example.".parse().unwrap();
    let text = "$ORIGIN toy.example.\n$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(text, "t")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let keys: Vec<ZoneKey> = [KeyRole::Ksk, KeyRole::Zsk]
        .iter()
        .map(|r| ZoneKey::generate(&origin, toy, *r, &profile, &provider, 300).unwrap())
        .collect();
    let now = 1_750_000_000;
    let policy = SigningPolicy {
        inception: now - 60,
        expiration: now + 3600,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &keys, &policy, &|_, _| {}).unwrap();
    let rrsig = &zone.rrset(&origin, RrType::SOA).unwrap().rrsigs[0];
    assert_eq!(rrsig[2], 253, "RRSIG algorithm field");
    let opts = VerifyOptions::at(now);
    let report = verify_zone(&zone, &profile, &provider, &opts);
    assert!(report.is_ok(), "{:?}", report.failures);

    // Key files carry the scheme's name and load back through the provider.
    let dir = tempfile::tempdir().unwrap();
    let (key_path, _) = keys[0].write_files(dir.path()).unwrap();
    let loaded = ZoneKey::read_files(&key_path, &profile, &provider).unwrap();
    assert_eq!(loaded.dnskey_rdata(), keys[0].dnskey_rdata());

    // Tampering is caught, and a provider without the scheme says why it cannot check.
    let www: Name = "www.toy.example.".parse().unwrap();
    zone.nodes
        .get_mut(&www)
        .unwrap()
        .get_mut(&RrType::A)
        .unwrap()
        .rdatas[0][3] ^= 1;
    let report = verify_zone(&zone, &profile, &provider, &opts);
    assert!(
        report.failures.iter().any(|f| f.owner == www),
        "{:?}",
        report.failures
    );
    let plain = verify_zone(&zone, &profile, &Provider::default_provider(), &opts);
    assert!(plain
        .failures
        .iter()
        .any(|f| f.reason.contains("not implemented by this provider")));
}

//! Fuzz target for TSIG (RFC 8945), what a server verifies before anything else on a signed
//! request, transfer or UPDATE. The input is read three ways:
//! - as a message: `tsig::find` and, when it finds a record, `Signed::verify` with a key of the
//!   name it gives (the same algorithm, and another one). Errors are expected, panics are not;
//!   random bytes must not verify.
//! - as a message we sign (`tsig::sign` at a fixed time): `find` and `verify` must then accept
//!   it with the same key, give back the MAC `sign` returned, and reject it with another
//!   secret (BADSIG).
//! - as the text of a BIND key file (`tsig_keyfile::parse`): errors name the file, and every
//!   key read formats to text that parses back to the same key.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pqdns_core::tsig_keyfile;
use pqdns_core::wire::tsig::{self, Algorithm, Digest, Fields, Key, Rejection};
use pqdns_core::wire::MessageView;
use pqdns_core::Name;

const NOW: u64 = 1_780_000_000;

fuzz_target!(|bytes: &[u8]| {
    let name: Name = "fuzz-key.".parse().unwrap();
    let key = Key::new(&name, Algorithm::HmacSha256, b"0123456789abcdef0123456789abcdef").unwrap();
    let other = Key::new(&name, Algorithm::HmacSha256, b"fedcba9876543210fedcba9876543210").unwrap();

    if let Ok(view) = MessageView::parse(bytes) {
        let found = tsig::find(&view);
        if let Ok(Some(signed)) = found {
            // A key of the name the record gives: what a server's key ring would return.
            if let Ok(named) = Name::from_wire(signed.key_name()) {
                for algorithm in [Algorithm::HmacSha256, Algorithm::HmacSha512] {
                    let k = Key::new(&named, algorithm, b"0123456789abcdef0123456789abcdef")
                        .unwrap();
                    let result = signed.verify(Some(&k), Digest::Request, NOW);
                    assert!(
                        !matches!(result, Ok(_) | Err(Rejection::BadTime(_))),
                        "input bytes carry a MAC that verifies"
                    );
                }
            }
            let _ = signed.verify(None, Digest::Request, NOW);
        } else if found.is_ok() && view.counts()[3] < u16::MAX {
            let mut msg = bytes.to_vec();
            let mac = tsig::sign(&key, Digest::Request, &mut msg, 0, &Fields::at(NOW))
                .expect("a parsed message can be signed");
            let view = MessageView::parse(&msg).expect("a signed message parses");
            let signed = tsig::find(&view)
                .expect("our TSIG record is well formed")
                .expect("our TSIG record is found");
            let verified = signed
                .verify(Some(&key), Digest::Request, NOW)
                .expect("our signature verifies");
            assert_eq!(verified.mac.as_bytes(), mac.as_bytes());
            assert_eq!(verified.len, bytes.len());
            assert!(matches!(
                signed.verify(Some(&other), Digest::Request, NOW),
                Err(Rejection::BadSig)
            ));
        }
    }

    if let Ok(text) = std::str::from_utf8(bytes) {
        match tsig_keyfile::parse(text, "fuzz.key") {
            Ok(keys) => {
                for k in keys {
                    let again = tsig_keyfile::parse(&tsig_keyfile::format(&k), "again.key")
                        .expect("a formatted key parses");
                    assert_eq!(again.len(), 1);
                    assert_eq!(again[0].name(), k.name());
                    assert_eq!(again[0].algorithm(), k.algorithm());
                    assert_eq!(again[0].secret(), k.secret());
                }
            }
            Err(e) => assert!(e.to_string().contains("fuzz.key"), "error without its file: {e}"),
        }
    }
});

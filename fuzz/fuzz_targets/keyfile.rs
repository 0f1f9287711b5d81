//! Fuzz target for BIND-style key files: the input is split at its first NUL byte into the
//! text of a `.key` file (a DNSKEY record in master-file form) and of a `.private` file
//! (`Private-key-format: v1.3` fields), and read as a key pair with the default profile and
//! provider (`ZoneKey::from_texts`, what `read_files` does after reading the two files).
//! Errors are expected; panics are not, and every error must name its file.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pqdns_core::dnssec::keyfile::ZoneKey;
use pqdns_core::dnssec::{Profile, Provider};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let (key, private) = text.split_once('\0').unwrap_or((text, ""));
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let (key_path, private_path) = (Path::new("Kfuzz.key"), Path::new("Kfuzz.private"));
    if let Err(e) = ZoneKey::from_texts(key, private, key_path, private_path, &profile, &provider) {
        let shown = e.to_string();
        assert!(shown.contains("Kfuzz."), "error without its file: {shown}");
    }
});

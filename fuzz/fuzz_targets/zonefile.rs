//! Fuzz target for zone input: any text as an RFC 1035 master file (then grouped into a zone
//! with its checks) and as a TOML zone description. Errors are expected; panics are not, and
//! every error must say where it is.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pqdns_core::config::LoadedConfig;
use pqdns_core::zone::Zone;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::Name;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let origin: Name = "example.".parse().expect("origin");
    match ZoneFileReader::new(Some(origin.clone()), Some(300)).read_str(text, "fuzz.zone") {
        Ok(records) => {
            let _ = Zone::from_records(origin, records);
        }
        Err(e) => assert!(
            e.to_string().contains("fuzz.zone"),
            "error without its file: {e}"
        ),
    }
    // Inline records only: a `file` key must not make the fuzzer read the machine's files.
    if !text.contains("file") && !text.contains("include") {
        if let Ok(cfg) =
            LoadedConfig::parse(text, Path::new("fuzz.toml"), Path::new("/nonexistent"))
        {
            let _ = cfg.read_zone();
        }
    }
});

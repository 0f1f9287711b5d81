//! Fuzz target for the server's TOML settings: any text as a zone description's `[server]`
//! table (or a bare table), checked by `ServerTable::parse` and merged over the defaults by
//! `Settings::from_tables` (ranges, addresses, TLS, cookies, RRL, fragmentation). Errors are
//! expected; panics are not, and a table error must name its file. Nothing is read from disk.

#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use pqdns_server::settings::{ServerTable, Settings};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return;
    };
    let server = match table.get("server") {
        Some(toml::Value::Table(t)) => t,
        _ => &table,
    };
    match ServerTable::parse(server, Path::new("fuzz.toml")) {
        Ok(t) => {
            let dir = PathBuf::from("/nonexistent");
            let _ = Settings::from_tables(&[(t, dir.clone())], dir);
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "error without its file: {e}"),
    }
});

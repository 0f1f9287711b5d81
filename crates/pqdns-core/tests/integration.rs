//! pqdns-core's integration tests, compiled and linked as one test binary (each file
//! under tests/ as its own binary cost a link against aws-lc and liboqs and its own copy of
//! the shared support): one module per file, named after it, so `--test integration NAME::`
//! runs one file's tests. A new test file `tests/NAME.rs` is one more `mod NAME;` line here.

mod algorithms;
mod external_scheme;
mod fips205_kat;
mod mldsa_kat;
mod mtl;
mod mtl2026;
mod mtl_series;
mod peer_keys;
mod verify_messages;

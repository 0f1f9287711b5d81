//! pqdns-server's integration tests, compiled and linked as one test binary (each file
//! under tests/ as its own binary cost a link against aws-lc and liboqs and its own copy of
//! the shared support): one module per file, named after it, so `--test integration NAME::`
//! runs one file's tests. A new test file `tests/NAME.rs` is one more `mod NAME;` line here.

mod common;

mod binary;
mod catalog_zone;
mod check;
mod config_file;
mod cookies_rrl;
mod ctl;
mod daemon;
mod delv;
mod dig;
mod dnstap;
mod docs;
mod doh_abuse;
mod doq;
mod malformed;
mod mutation;
mod online;
mod operator;
mod package;
mod pq_certificates;
mod secondary;
mod tcp;
mod tls;
mod tsig;
mod update;
mod xfr;
mod zone_types;

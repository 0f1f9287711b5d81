//! pqdns-resolver's integration tests, compiled and linked as one test binary (each file
//! under tests/ as its own binary cost a link against aws-lc and liboqs and its own copy of
//! the shared support): one module per file, named after it, so `--test integration NAME::`
//! runs one file's tests. A new test file `tests/NAME.rs` is one more `mod NAME;` line here.

mod common;

mod aggressive;
mod bailiwick;
mod cache_memory;
mod cli;
mod closed_stdout;
mod conformance;
mod cookies;
mod daemon;
mod dnstap;
mod downgrade;
mod fleet;
mod fragmentation;
mod hierarchy;
mod hostile;
mod ixfr;
mod lifecycle;
mod minimise;
mod mtl;
mod nta;
mod online;
mod padding;
mod policy;
mod prefetch;
mod qtypes;
mod rollover;
mod service;
mod stale;
mod trust;
mod trust_anchor_update;
mod unbound;

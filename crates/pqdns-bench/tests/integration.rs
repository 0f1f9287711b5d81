//! pqdns-bench's integration tests, compiled and linked as one test binary (each file
//! under tests/ as its own binary cost a link against aws-lc and liboqs and its own copy of
//! the shared support): one module per file, named after it, so `--test integration NAME::`
//! runs one file's tests. A new test file `tests/NAME.rs` is one more `mod NAME;` line here.

mod cli;
mod load;

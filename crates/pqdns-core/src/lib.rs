//! pqdns-core: DNS names, records and master files, and DNSSEC signing and validation with
//! classical and post-quantum algorithms. No network I/O: everything works on bytes and files,
//! so servers, resolvers and benchmarks build on it.
//!
//! See `ARCHITECTURE.md` at the repository root for how the crates fit together.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod atomic_file;
pub mod config;
pub mod dnssec;
pub mod frag;
pub mod message;
pub mod name;
pub mod rdata;
pub mod rr;
pub mod serial;
pub mod stdout;
pub mod time;
pub mod wire;
pub mod zone;
pub mod zonefile;

pub use name::Name;
pub use rr::{Class, Record, RrType};
pub use zone::Zone;

//! pqdns-bench: zone generators, a generic DNS load generator ([`load`]) and measurement
//! reports for pqdns. The criterion suites live in
//! the workspace's `benches/` directory and run with `cargo bench -p pqdns-bench`.

#![deny(unsafe_code)]

pub mod amplification;
pub mod charts;
pub mod delay_shim;
pub mod fragmentation_report;
pub mod genzone;
pub mod handshake_report;
pub mod lifecycle_report;
pub mod load;
pub mod matrix;
pub mod matrix_report;
pub mod mtl_report;
pub mod proc_stat;
pub mod query_source;
pub mod recursor_report;
pub mod replay;
pub mod resolver_report;
pub mod server_process;
pub mod signing_report;
pub mod soak;
pub mod tls_client;
pub mod wire_count;

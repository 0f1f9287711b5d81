//! pqdns-bench: zone generators and measurement reports for pqdns. The criterion suites live in
//! the workspace's `benches/` directory and run with `cargo bench -p pqdns-bench`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod delay_shim;
pub mod fragmentation_report;
pub mod genzone;
pub mod resolver_report;
pub mod signing_report;

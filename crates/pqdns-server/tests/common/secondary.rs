//! The peer secondaries (NSD, Knot, BIND) and their helpers, shared with the resolver's
//! tests: `pqdns_test_support::secondaries`.

#![allow(
    unused_imports,
    reason = "each test binary uses a different part of the harness"
)]

pub(crate) use pqdns_test_support::secondaries::*;

//! The peer secondaries (NSD, Knot, BIND) and their helpers, shared with the resolver's
//! tests: `pqdns_test_support::secondaries`.

pub(crate) use pqdns_test_support::secondaries::*;

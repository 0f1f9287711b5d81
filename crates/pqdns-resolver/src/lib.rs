//! pqdns-resolver: the validating resolver (issue 4). Not implemented yet: this crate only
//! reserves its place in the workspace; chain-of-trust validation will build on
//! `pqdns_core::dnssec`.

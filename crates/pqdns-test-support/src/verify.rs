//! Whole-zone DNSSEC checks for tests that take a signed zone from a server or a peer.

use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::Zone;

/// Asserts that `zone` verifies whole at the current time (`verify_zone` under the default
/// profile and provider): every signature of every algorithm and the complete denial chain.
/// Returns the number of signatures checked.
///
/// # Panics
/// If it does not, with `context` and the first five failures.
pub fn assert_zone_verifies(zone: &Zone, context: &str) -> usize {
    let report = verify_zone(
        zone,
        &Profile::default_profile(),
        &Provider::default_provider(),
        &VerifyOptions::at(pqdns_core::time::now()),
    );
    assert!(
        report.is_ok(),
        "{context}: {:?}",
        &report.failures[..report.failures.len().min(5)]
    );
    report.signatures_checked
}

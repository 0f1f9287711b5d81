//! Unit-test support: a catalog holding one zone read from master-file text and signed in
//! memory with a fresh CSK (validity 2023-11 … 2030-03).

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Zone};

use crate::catalog::{Catalog, ServedZone};

/// `text` (relative to `origin`, default TTL 3600) signed with `algorithm` and `denial`.
pub(crate) fn signed_catalog(
    origin: &Name,
    text: &str,
    algorithm: Algorithm,
    denial: Denial,
) -> Catalog {
    let records = ZoneFileReader::new(Some(origin.clone()), Some(3600))
        .read_str(text, "test.zone")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let profile = Profile::default_profile();
    let key = ZoneKey::generate(
        origin,
        algorithm,
        KeyRole::Csk,
        &profile,
        &Provider::default_provider(),
        3600,
    )
    .unwrap();
    let policy = SigningPolicy {
        inception: 1_700_000_000,
        expiration: 1_900_000_000,
        denial,
    };
    sign_zone(&mut zone, &[key], &policy, &|_, _| {}).unwrap();
    Catalog::new([ServedZone::new(zone)]).unwrap()
}

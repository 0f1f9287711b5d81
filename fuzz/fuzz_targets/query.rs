//! Fuzz target for the query path: any bytes go through the answer engine, over UDP and over
//! a stream, against a zone signed with ECDSA P-256 and ML-DSA-44 and NSEC3. The engine must
//! not panic, and whatever it sends must satisfy `pqdns_test_support::check_response`.
//! Prepared answers are on, so repeated questions also exercise replays.

#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::Algorithm;
use pqdns_server::answer::{respond, Transport};
use pqdns_server::catalog::Catalog;
use pqdns_server::cookie::{CookieMode, Cookies, DEFAULT_ROTATION};
use pqdns_test_support::{check_response, signed_catalog, LOCALHOST};

const ZONE: &str = "@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.2\nalias CNAME www\n*.wild TXT \"w\"\nsub NS ns.sub\nns.sub A 192.0.2.3\n\
    sub DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n";

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    // DNS cookies on, with a fixed secret: COOKIE options take their checked paths too.
    let cookies = Cookies::new(CookieMode::On, Some([7; 16]), DEFAULT_ROTATION).expect("secret");
    signed_catalog(
        &"example.".parse().expect("origin"),
        ZONE,
        &[Algorithm::EcdsaP256Sha256, Algorithm::MlDsa44],
        Denial::Nsec3(Nsec3Params::default()),
    )
    .with_cookies(Some(Arc::new(cookies)))
});

fuzz_target!(|packet: &[u8]| {
    let mut out = Vec::new();
    for transport in [Transport::Udp, Transport::Tcp] {
        let outcome = respond(&CATALOG, packet, transport, LOCALHOST, 1232, &mut out, 0);
        if let Err(e) = check_response(packet, transport, 1232, &out, &outcome) {
            panic!("{e}");
        }
    }
});

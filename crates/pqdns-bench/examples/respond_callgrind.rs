//! A fixed, deterministic workload for the answer engine, for instruction counts under
//! callgrind (repeatable, unlike timings on a shared machine):
//!
//! ```sh
//! cargo build --release -p pqdns-bench --example respond_callgrind
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/respond_callgrind replay 20000
//! ```
//!
//! `replay` answers from prepared answers (the UDP hot path), `engine` with prepared answers
//! off (parse, zone walk, response writer), `malformed` sends FORMERR-worthy queries;
//! `replay-rrl` adds the response-rate limiter's verdict per response (rate high enough that
//! every response goes out), `replay-cookie` sends every EDNS query with a valid DNS server
//! cookie (checked, and a fresh one written into the answer). Each
//! iteration sends the same 6 queries (authoritative A, referral with DS, NXDOMAIN with NSEC3,
//! with DO, over UDP with EDNS 1232; and three without EDNS). Run it with two iteration counts
//! and take the difference to cancel the set-up (signing the zone).

use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::Denial;
use pqdns_core::dnssec::Algorithm;
use pqdns_core::wire::OPTION_COOKIE;
use pqdns_server::answer::{respond, Transport};
use pqdns_server::cookie::{CookieMode, Cookies, DEFAULT_ROTATION, RESPONSE_COOKIE_LEN};
use pqdns_server::rrl::{Rrl, RrlSettings, Verdict};
use pqdns_test_support::{signed_catalog, with_option, LOCALHOST};
use std::sync::Arc;

fn query(qname: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let name: pqdns_core::Name = qname.parse().expect("name");
    let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)];
    p.extend_from_slice(name.as_wire());
    p.extend(qtype.to_be_bytes());
    p.extend(1u16.to_be_bytes());
    if edns {
        p.extend([0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
    }
    p
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "replay".into());
    let n: usize = args
        .next()
        .map_or(10_000, |s| s.parse().expect("iterations"));
    let mut zone =
        String::from("@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n");
    for i in 0..20 {
        zone.push_str(&format!("host{i} A 192.0.2.{i}\n"));
        zone.push_str(&format!(
            "d{i} NS ns1.d{i}\nd{i} NS ns2.d{i}\nns1.d{i} A 192.0.2.{i}\nns2.d{i} A 192.0.2.{i}\n\
             d{i} DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n"
        ));
    }
    let catalog = signed_catalog(
        &"bench.".parse().expect("origin"),
        &zone,
        &[Algorithm::EcdsaP256Sha256],
        Denial::Nsec3(Nsec3Params::default()),
    );
    let cookies = Cookies::new(CookieMode::On, Some([7; 16]), DEFAULT_ROTATION).expect("secret");
    let mut server_cookie = [0u8; RESPONSE_COOKIE_LEN];
    let client_cookie = [1u8; 8];
    cookies.write(
        &client_cookie,
        LOCALHOST,
        pqdns_core::time::now(),
        &mut server_cookie,
    );
    let catalog = match mode.as_str() {
        "engine" => catalog.with_answer_cache(0),
        "replay-cookie" => catalog.with_cookies(Some(Arc::new(cookies))),
        _ => catalog,
    };
    let rrl = (mode == "replay-rrl").then(|| {
        let mut settings = RrlSettings::default();
        settings.rate = u32::MAX;
        Rrl::new(settings).expect("on")
    });
    let queries: Vec<Vec<u8>> = if mode == "malformed" {
        let mut bad = query("host1.bench.", 1, true);
        bad.push(0);
        let mut opcode = query("host1.bench.", 1, false);
        opcode[2] = 0x28;
        vec![bad, opcode, vec![0; 12]]
    } else {
        vec![
            query("host3.bench.", 1, true),
            query("www.d7.bench.", 1, true),
            query("nothere.bench.", 1, true),
            query("HOST3.bench.", 1, false),
            query("www.d7.bench.", 1, false),
            query("nothere.bench.", 28, false),
        ]
    };
    let queries: Vec<Vec<u8>> = if mode == "replay-cookie" {
        queries
            .into_iter()
            .map(|q| {
                if q[11] == 0 {
                    q // no OPT record
                } else {
                    with_option(q, OPTION_COOKIE, &server_cookie)
                }
            })
            .collect()
    } else {
        queries
    };
    let mut out = Vec::with_capacity(65_535);
    let mut total = 0usize;
    for _ in 0..n {
        for q in &queries {
            let o = respond(&catalog, q, Transport::Udp, LOCALHOST, 1232, &mut out, 0);
            if let Some(rrl) = &rrl {
                assert_eq!(rrl.verdict(LOCALHOST, o.rcode), Verdict::Send);
            }
            total += o.len;
        }
    }
    println!("{mode}: {n} iterations, {total} bytes");
}
